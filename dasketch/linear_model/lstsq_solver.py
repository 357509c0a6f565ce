"""Sketch-preconditioned least squares to full accuracy: LSQR, or the refinement of
:mod:`~dasketch.linear_model.lstsq_refinement` on the same preconditioner.

Beyond pwSGD (Yang, Chow, Re, Mahoney, JMLR 2018): the same ``R`` from
``QR(S A)`` right-preconditions LSQR (Paige and Saunders, ACM TOMS 1982), as in
Blendenpik (Avron, Maymounkov, Toledo, SIAM J. Sci. Comput. 2010) and LSRN
(Meng, Saunders, Mahoney, SIAM J. Sci. Comput. 2014): LSQR on ``A N`` (``N =
R^{-1}`` up to a rotation at full rank, the pseudo-inverse of ``R`` truncated to
the numerical rank otherwise, as LSRN does) converges at a rate set by
``cond(A N)`` (about 3 here), independent of ``cond(A)``, to the minimum-norm
solution.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import (
    CacheChoice,
    as_row_blocks,
    cache_blocks,
    host_values,
    run_eagerly,
)
from dasketch.linear_model._regression_passes import data_singular_values, gram_singular_values
from dasketch.linear_model._sketched_regression import (
    check_lstsq_targets,
    check_sample_weight,
)
from dasketch.linear_model._weighted_products import WeightedCentredProducts
from dasketch.linear_model.lstsq_bounds import (  # noqa: F401 - re-exported
    _outside_sketch,
    error_bound,
    gradient_rounding,
    intercept_rounding,
    norms_error_bound,
    outside_sketch,
)
from dasketch.linear_model.lstsq_lsqr import run_lsqr, warn_unconverged
from dasketch.linear_model.lstsq_refinement import refine, refinement_pays
from dasketch.linear_model.nonnegative_lstsq import positive_bound, solve_nonnegative
from dasketch.linear_model.preconditioning import precondition_blocks
from dasketch.utils._sklearn_compat import StrOptions, validate_parameter_constraints
from dasketch.utils.params import POSITIVE_INT, Interval


@dataclass(frozen=True)
class LstsqResult:
    """Solution of :func:`sketch_lstsq`.

    Entries described "per target" are floats for 1-D ``b`` and arrays of
    shape ``(k,)`` for ``b`` of shape ``(n, k)``.

    Parameters
    ----------
    x : ndarray (d,) or (d, k)
        The minimum-norm least-squares solution (to the accuracy below).
    n_iter : int
        Iterations of the solver: LSQR's over all targets (each one product
        with ``A`` and one with ``A^T``), or the refinement's (each one pass
        that multiplies by ``A`` and ``A^T`` for all targets).
    istop : int or ndarray
        The reason for stopping, per target, in LSQR's codes (see
        ``scipy.sparse.linalg.lsqr``): 1 ``||r||`` within ``tol ||b||``, 2 the
        normal-equation residual within ``tol``, 5 as small as rounding lets
        it be (the refinement stops there when a step no longer halves it),
        7 ``max_iter``.
    residual_norm : float or ndarray
        ``||A x - b||_2`` (weighted), per target, computed in the final pass.
    condition_number_estimate : float
        Estimate of ``cond(A N)`` from the independent check sketch.
    sketch_solution : ndarray (d,) or (d, k)
        The warm start ``N U_k^T Q^T S b`` (sketch-and-solve).
    optimality_residual : float or ndarray
        ``||U^T r|| / (||U||_F ||r||)`` for ``U = A N`` and ``r = b - A x``, per
        target: the relative residual of the normal equations (0 at the exact
        solution; 0 also when ``r = 0``); LSQR's estimate from its
        recurrences, or the refinement's from the ``A^T r`` of its last pass.
    cache : CacheChoice, optional
        Whether the decoded blocks of ``A`` were kept in (worker) memory after
        the first pass, and why.
    coef_error_bound : float or ndarray, optional
        ``||x - x*|| <= coef_error_bound`` per target, ``x*`` the exact
        minimum-norm solution (of the rank ``rank``), see
        :func:`~dasketch.linear_model.lstsq_bounds.error_bound`.
    rank : int, optional
        Numerical rank of ``A`` from its sketch (singular values of ``R``
        above ``max(n, d) eps`` times the largest, as ``numpy.linalg.lstsq``).
    singular_values : ndarray (d,), optional
        Singular values of the sketch ``S A``; those of ``A`` lie between them
        times the smallest and times the largest singular value of ``A N``.
        :class:`SketchLstsqRegressor` computes those of ``A`` itself, in one
        more pass.
    intercept : float or ndarray, default 0.0
        ``mean(b) - mean(A) x`` (weighted means) with ``fit_intercept``, else 0.
    intercept_error_bound : float or ndarray, default 0.0
        ``|intercept - intercept*| <= intercept_error_bound``, per target.
    n_passes : int, default 0
        Passes over ``A``: the sketch, the Gram matrix of the refinement, every
        product with ``A`` or ``A^T`` (a refinement step multiplies by both in
        one pass) and the pass for exact singular values.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import sketch_lstsq
    >>> A = np.random.default_rng(0).standard_normal((2000, 6))
    >>> res = sketch_lstsq(A, A @ np.ones(6), random_state=0)
    >>> bool(np.allclose(res.x, 1.0)), res.n_iter < 50, res.rank
    (True, True, 6)
    """

    x: np.ndarray
    n_iter: int
    istop: object
    residual_norm: object
    condition_number_estimate: float
    sketch_solution: np.ndarray
    optimality_residual: object
    cache: CacheChoice = None
    coef_error_bound: object = None
    rank: int = None
    singular_values: np.ndarray = None
    intercept: object = 0.0
    intercept_error_bound: object = 0.0
    n_passes: int = 0


LSTSQ_SOLVERS = ("auto", "lsqr", "refinement")

_LSTSQ_CONSTRAINTS = {"tol": [Interval(numbers.Real, 0, 1, closed="neither")],
                      "max_iter": [POSITIVE_INT, None],
                      "solver": [StrOptions(set(LSTSQ_SOLVERS))]}


def sketch_lstsq(A, b, *, tol=1e-10, max_iter=None, sketch_size=None, embedding="osnap",
                 nnz_per_column=None, random_state=None, client=None, block_rows=None,
                 cache="auto", sample_weight=None, fit_intercept=False, positive=False,
                 solver="auto"):
    """Solve weighted least squares preconditioned with a sketch.

    ``min_x sum_i w_i (a_i^T x - b_i)^2``; the minimum-norm solution when ``A`` is
    rank deficient.

    1. ``S W^(1/2) [A b]`` in one blocked pass (OSNAP by default) with an
       independent check sketch, ``QR(S A) = Q R``, the SVD ``R = U Sigma V^T``
       and ``N = V_k Sigma_k^{-1}`` over the numerical rank ``k``;
    2. warm start ``x0 = N U_k^T Q^T S b`` (sketch-and-solve);
    3. with ``solver="refinement"``: one pass for the Gram matrix ``G = U^T U``
       of ``U = A N`` (well conditioned, so ``G`` is exact to about ``eps d
       cond(A)``) and ``U^T b``, ``x = N G^{-1} U^T b``, then refinement steps
       ``x += N G^{-1} N^T A^T (b - A x)``, each one pass that multiplies every
       block by ``A`` and ``A^T`` from one read, until ``tol``: two or three
       passes in all (:mod:`~dasketch.linear_model.lstsq_refinement`); with
       ``solver="lsqr"``: ``scipy.sparse.linalg.lsqr`` on the
       ``LinearOperator`` ``A N`` from ``z0 = Sigma_k V_k^T x0``, then ``x = N
       z``, two passes an iteration. Either way ``x`` is in the row space of
       ``A``, hence the minimum-norm solution, as ``numpy.linalg.lstsq``
       returns;
    4. ``A^T (b - A x)`` at the solution (the refinement's last pass, or one
       more pass after LSQR) gives the a-posteriori bound ``coef_error_bound``
       (:func:`~dasketch.linear_model.lstsq_bounds.error_bound`).

    Each product is a blocked pass over the row blocks of ``A`` (an LSQR
    product with numpy or scipy.sparse ``A`` is one call on it instead).
    Several targets (``b`` of shape ``(n, k)``) share the sketch, the Gram
    pass and every refinement pass; LSQR runs once per target.

    Parameters
    ----------
    A : array-like of shape (n, d)
        A numpy array, scipy.sparse matrix, Dask array or zarr path; any shape
        (``n < d`` too: the minimum-norm solution). A CuPy array or a Dask array
        of CuPy blocks (any array API library with the ``linalg`` extension) is
        read as blocks of its library: the passes over ``A`` run in its
        namespace, the embeddings drawn on the host from the same seeds as for
        numpy input and moved there, each block's result handed back to the
        host, so the result is the numpy path's to rounding.
    b : array-like of shape (n,) or (n, k)
        Targets, one column per problem (an array of another library is copied
        to the host).
    tol : float, default 1e-10
        Stop when ``||(A N)^T r|| <= tol ||A N||_F ||r||`` (or ``||r|| <= tol
        ||b||``): LSQR's ``atol`` and ``btol`` (it then restarts once from its
        solution with a freshly computed residual). ``1e-10`` gives ``x`` to
        about ``1e-9`` relative to ``numpy.linalg.lstsq`` at ``cond(A) = 1e6``.
    max_iter : int, optional
        Iterations at most (LSQR's per target, or refinement passes); default
        ``max(2 rank, 100)``.
    sketch_size : int, optional
        Rows of the sketch ``S A``; default ``4 d`` (see
        :func:`dasketch.linear_model.sketch_precondition`).
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        The distribution of ``S``.
    nnz_per_column : int, optional
        Nonzeros per column of ``S``; default 4 for OSNAP, 1 for the others.
    random_state : None, int or numpy.random.Generator, optional
        Seeds the embeddings.
    client : distributed.Client, optional
        Run on this client; default: the active scheduler.
    block_rows : int, optional
        Rows per block; default about 32 MiB of values per block.
    cache : {"auto", True, False}, default "auto"
        Keep the decoded blocks of a Dask or zarr ``A`` in (worker) memory after
        the first pass, so that LSQR's passes do not read the store again
        (``"auto"``: when they fit, see the Dask config ``dasketch.cache-fraction``); the
        result's ``cache`` records the choice.
    sample_weight : array-like of shape (n,), optional
        Weights ``w_i >= 0`` of the squared residuals (numpy, a scalar, or a
        Dask array of any chunking, computed like ``b``): the rows and targets
        are ``sqrt(w_i) [a_i b_i]``, formed block by block in every pass
        (never a weighted copy of ``A``). Integer weights give the solution of
        the rows repeated.
    fit_intercept : bool, default False
        Solve for an intercept too, by weighted centring: ``A`` and ``b``
        minus their weighted column means, applied inside every product (sparse
        ``A`` stays sparse); ``intercept = mean(b) - mean(A) x``. With a rank
        deficient ``A`` the intercept is not part of the minimised norm, as in
        ``sklearn.linear_model.LinearRegression``.
    positive : bool, default False
        Constrain ``x >= 0`` (an intercept stays free), as
        ``LinearRegression(positive=True)``: projected Newton preconditioned
        by the same sketch (:mod:`~dasketch.linear_model.nonnegative_lstsq`)
        instead of LSQR; ``optimality_residual`` is then the KKT residual
        ``||pg|| / ||A^T b||`` (``pg`` the projected gradient),
        ``coef_error_bound`` its bound over ``sigma_min(A)^2`` (infinite below
        full column rank) and ``istop`` 1 when certified to ``tol``, else 7;
        ``solver`` then does not apply.
    solver : {"auto", "lsqr", "refinement"}, default "auto"
        How to iterate from the sketch (step 3). ``"auto"`` refines when the
        Gram pass (``2 s k + k^2`` flops a row, ``s`` the values a row stores,
        ``k`` the rank) costs less than the LSQR passes it saves, each a read
        of every stored value (:func:`~dasketch.linear_model.lstsq_refinement.refinement_pays`):
        dense rows up to a few thousand columns, sparse ones of a few dozen.
        The refinement falls back to LSQR when ``G`` is not numerically
        positive definite.

    Returns
    -------
    LstsqResult
        The solution with LSQR's diagnostics.

    See Also
    --------
    SketchLstsqRegressor : The estimator form.
    sketch_precondition : The preconditioner alone.
    PWSGDRegressor : Preconditioned weighted SGD, also for l1 regression.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import sketch_lstsq
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((5000, 20)) @ np.diag(np.logspace(0, -6, 20))
    >>> b = rng.standard_normal(5000)
    >>> res = sketch_lstsq(A, b, random_state=0)
    >>> x = np.linalg.lstsq(A, b, rcond=None)[0]
    >>> bool(np.linalg.norm(res.x - x) <= 1e-8 * np.linalg.norm(x))
    True
    >>> bool(np.linalg.norm(res.x - x) <= res.coef_error_bound)
    True

    A duplicated column: the minimum-norm solution splits its coefficient.

    >>> A2 = np.column_stack([A[:, :3], A[:, 2]])
    >>> res = sketch_lstsq(A2, A2 @ [1.0, 2.0, 3.0, 3.0], random_state=0)
    >>> res.rank, np.round(res.x, 8).tolist()
    (3, [1.0, 2.0, 3.0, 3.0])
    """
    validate_parameter_constraints(_LSTSQ_CONSTRAINTS,
                                   {"tol": tol, "max_iter": max_iter, "solver": solver},
                                   caller_name="sketch_lstsq")
    tol = float(tol)
    blocks = as_row_blocks(A, block_rows=block_rows, name="A", array_libraries="any")
    b = check_lstsq_targets(b, blocks.n_rows)
    weights = check_sample_weight(host_values(sample_weight), blocks.n_rows)
    return solve_lstsq(A if _in_memory(A) else blocks, b, tol=tol, max_iter=max_iter,
                       sketch_size=sketch_size, embedding=embedding,
                       nnz_per_column=nnz_per_column, random_state=random_state,
                       client=client, block_rows=block_rows, cache=cache,
                       sample_weight=weights, fit_intercept=fit_intercept,
                       positive=bool(positive), solver=solver)


def _in_memory(A):
    return isinstance(A, np.ndarray) or scipy.sparse.issparse(A)


def _scalar_per_target(values, one_target):
    values = np.asarray(values)
    return values.ravel()[0].item() if one_target else values


def solve_lstsq(A, b, *, tol, max_iter, sketch_size, embedding, random_state,
                nnz_per_column=None, client=None, block_rows=None, name="A", cache="auto",
                sample_weight=None, fit_intercept=False, exact_singular_values=False,
                positive=False, solver="auto"):
    """:func:`sketch_lstsq` on validated input: ``A`` an ndarray, a sparse matrix
    (products in place) or :class:`~dasketch._blocks.RowBlocks`, ``b`` a finite
    float64 array (n,) or (n, k), ``sample_weight`` None or checked weights;
    errors about the data name it ``name``. With ``exact_singular_values`` the
    result's ``singular_values`` are those of the (centred, weighted) ``A``
    itself, from one more pass (:func:`data_singular_values`), instead of the
    sketch's. With ``positive`` the coefficients are constrained ``>= 0``
    (:mod:`~dasketch.linear_model.nonnegative_lstsq`)."""
    blocks, cache = cache_blocks(as_row_blocks(A, block_rows=block_rows, name=name,
                                               array_libraries="any"), cache, client=client)
    blocks = run_eagerly(blocks, client)
    n, d = blocks.shape
    precond = precondition_blocks(blocks, b, sketch_size=sketch_size, embedding=embedding,
                                  nnz_per_column=nnz_per_column, random_state=random_state,
                                  client=client, name=name, sample_weight=sample_weight,
                                  centre=fit_intercept, full_rank=False)
    k = precond.rank
    if max_iter is None:
        max_iter = max(2 * k, 100)
    max_iter = int(max_iter)
    root_w = None if sample_weight is None else np.sqrt(sample_weight)
    products = WeightedCentredProducts(A if _in_memory(A) else blocks, blocks,
                                       root_weights=root_w, mean=precond.mean, client=client)
    targets = b.reshape(n, -1)
    shift = precond.target_mean if fit_intercept else np.zeros(targets.shape[1])
    shifted = targets - shift
    centred = shifted if root_w is None else shifted * root_w[:, None]
    refined = None
    if k and not positive and (solver == "refinement" or (solver == "auto" and refinement_pays(
            precond, sparse=blocks.sparse, tol=tol))):
        refined = refine(blocks, products, precond,
                         np.ones(n) if sample_weight is None else sample_weight,
                         shifted, tol=tol, max_iter=max_iter, client=client)
    if refined is not None:
        X, n_iter, istops, optimality = (refined.x, refined.n_iter, refined.istop,
                                         refined.optimality)
        full_gradient, r_norm = refined.gradient, refined.residual_norm
    else:
        solver_of = solve_nonnegative if positive else run_lsqr
        X, n_iter, istops, optimality = solver_of(precond, products, centred, tol=tol,
                                                  max_iter=max_iter)
        residual = centred - products.forward(X)
        full_gradient, r_norm = products.adjoint(residual), np.linalg.norm(residual, axis=0)
    gradient = precond.basis.T @ full_gradient
    targets_norm = np.linalg.norm(targets if root_w is None else targets * root_w[:, None],
                                  axis=0) + np.sqrt(precond.weight_sum) * np.abs(shift)
    if not positive:
        floor = np.zeros(len(istops)) if not k else \
            gradient_rounding(precond, X, n, r_norm, targets_norm)
        warn_unconverged(istops, optimality, np.linalg.norm(gradient, axis=0) > floor,
                          tol=tol, max_iter=max_iter, ndim=b.ndim,
                          method="LSQR" if refined is None else "the refinement")
    bound = norms_error_bound(precond, X, n, r_norm, gradient, targets_norm) \
        if not positive else positive_bound(precond, X, full_gradient, residual, targets_norm)
    outside = outside_sketch(precond, full_gradient, n, r_norm)
    if np.any(outside):
        bound = np.where(outside, np.inf, bound)
        warnings.warn(f"the sketch of {name} has rank {k}, below that of {name}: the "
                      "gradient A^T r of the solution has a part outside the sketch's row "
                      "space, so it is not the least-squares solution; increase sketch_size "
                      "or draw another sketch (random_state)", ConvergenceWarning, stacklevel=3)
    intercept = intercept_bound = np.zeros(targets.shape[1])
    if fit_intercept:
        intercept = shift - precond.mean @ X
        intercept_bound = (np.linalg.norm(precond.mean) * bound
                           + intercept_rounding(shift, precond.mean, X))
    singular_values = precond.singular_values
    n_passes = 1 + products.passes + (refined is not None)
    if exact_singular_values and refined is not None:
        singular_values = gram_singular_values(refined.gram, refined.factor, d)
    elif exact_singular_values:
        singular_values = data_singular_values(
            blocks, precond, np.ones(n) if sample_weight is None else sample_weight,
            client=client)
        n_passes += bool(k)
    one = b.ndim == 1
    return LstsqResult(
        x=X.reshape((d,) + b.shape[1:]), n_iter=n_iter,
        istop=_scalar_per_target(istops, one),
        residual_norm=_scalar_per_target(r_norm, one),
        condition_number_estimate=precond.condition_number_estimate,
        sketch_solution=precond.x0, optimality_residual=_scalar_per_target(optimality, one),
        cache=cache, coef_error_bound=_scalar_per_target(bound, one), rank=k,
        singular_values=singular_values,
        intercept=_scalar_per_target(intercept, one),
        intercept_error_bound=_scalar_per_target(intercept_bound, one), n_passes=n_passes)

