"""Sketch-preconditioned LSQR for full-accuracy least squares.

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
import scipy.sparse.linalg
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import (
    CacheChoice,
    as_row_blocks,
    cache_blocks,
    compute,
    host_values,
    is_dask_collection,
    run_eagerly,
)
from dasketch.linear_model._regression_passes import data_singular_values
from dasketch.linear_model._sketched_regression import check_sample_weight
from dasketch.linear_model._weighted_products import WeightedCentredProducts
from dasketch.linear_model.lstsq_bounds import (  # noqa: F401 - re-exported
    _outside_sketch,
    error_bound,
    intercept_rounding,
)
from dasketch.linear_model.nonnegative_lstsq import positive_bound, solve_nonnegative
from dasketch.linear_model.preconditioning import precondition_blocks
from dasketch.utils._sklearn_compat import validate_parameter_constraints
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
        LSQR iterations over all targets (each one product with ``A`` and one
        with ``A^T``).
    istop : int or ndarray
        LSQR's reason for stopping (see ``scipy.sparse.linalg.lsqr``), per
        target.
    residual_norm : float or ndarray
        ``||A x - b||_2`` (weighted), per target, computed in the final pass.
    condition_number_estimate : float
        Estimate of ``cond(A N)`` from the independent check sketch.
    sketch_solution : ndarray (d,) or (d, k)
        The warm start ``N U_k^T Q^T S b`` (sketch-and-solve).
    optimality_residual : float or ndarray
        ``||U^T r|| / (||U|| ||r||)`` for ``U = A N`` and ``r = b - A x``, as
        tracked by LSQR, per target: the relative residual of the normal
        equations (0 at the exact solution; 0 also when ``r = 0``).
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


_LSTSQ_CONSTRAINTS = {"tol": [Interval(numbers.Real, 0, 1, closed="neither")],
                      "max_iter": [POSITIVE_INT, None]}


def sketch_lstsq(A, b, *, tol=1e-10, max_iter=None, sketch_size=None, embedding="osnap",
                 nnz_per_column=None, random_state=None, client=None, block_rows=None,
                 cache="auto", sample_weight=None, fit_intercept=False, positive=False):
    """Solve weighted least squares by LSQR right-preconditioned with a sketch.

    ``min_x sum_i w_i (a_i^T x - b_i)^2``; the minimum-norm solution when ``A`` is
    rank deficient.

    1. ``S W^(1/2) [A b]`` in one blocked pass (OSNAP by default) with an
       independent check sketch, ``QR(S A) = Q R``, the SVD ``R = U Sigma V^T``
       and ``N = V_k Sigma_k^{-1}`` over the numerical rank ``k``;
    2. warm start ``x0 = N U_k^T Q^T S b`` (sketch-and-solve);
    3. ``scipy.sparse.linalg.lsqr`` on the ``LinearOperator`` ``A N`` from
       ``z0 = Sigma_k V_k^T x0``, then ``x = N z``: in the row space of ``A``,
       hence the minimum-norm solution, as ``numpy.linalg.lstsq`` returns;
    4. one more pass for ``A^T (b - A x)``, which gives the a-posteriori
       bound ``coef_error_bound``
       (:func:`~dasketch.linear_model.lstsq_bounds.error_bound`).

    Each product of the operator is a blocked pass over a Dask or zarr ``A``
    (correct at any size, but every LSQR iteration then pays two passes over
    the data and the task overhead); numpy and scipy.sparse inputs are
    multiplied in place instead, through the same preconditioned operator.
    Several targets (``b`` of shape ``(n, k)``) share the sketch and the final
    pass; LSQR runs once per target.

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
        ``atol`` and ``btol`` of LSQR: it stops when ``||(A N)^T r|| <= tol
        ||A N|| ||r||`` (or ``||r|| <= tol ||b||``), then restarts once from
        its solution with a freshly computed residual. ``1e-10`` gives ``x`` to
        about ``1e-9`` relative to ``numpy.linalg.lstsq`` at ``cond(A) = 1e6``.
    max_iter : int, optional
        Per target; default ``max(2 rank, 100)``.
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
        full column rank) and ``istop`` 1 when certified to ``tol``, else 7.

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
    validate_parameter_constraints(_LSTSQ_CONSTRAINTS, {"tol": tol, "max_iter": max_iter},
                                   caller_name="sketch_lstsq")
    tol = float(tol)
    blocks = as_row_blocks(A, block_rows=block_rows, name="A", array_libraries="any")
    b = _check_targets(b, blocks.n_rows)
    weights = check_sample_weight(host_values(sample_weight), blocks.n_rows)
    return solve_lstsq(A if _in_memory(A) else blocks, b, tol=tol, max_iter=max_iter,
                       sketch_size=sketch_size, embedding=embedding,
                       nnz_per_column=nnz_per_column, random_state=random_state,
                       client=client, block_rows=block_rows, cache=cache,
                       sample_weight=weights, fit_intercept=fit_intercept,
                       positive=bool(positive))


def _check_targets(b, n):
    """``b`` as a finite float64 array of shape ``(n,)`` or ``(n, k)`` on the host."""
    b = host_values(b)
    if is_dask_collection(b):
        (b,) = compute(b)
    b = np.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != n:
        raise ValueError(f"b has shape {b.shape} but A has {n} rows; b must be (n,) or "
                         "(n, k) with one row per row of A")
    if b.dtype.kind not in "biuf":
        raise TypeError(f"b must hold real numbers, got dtype {b.dtype}")
    b = b.astype(np.float64)
    if not np.isfinite(b).all():
        raise ValueError("b contains NaN or Inf; only finite values are accepted")
    return b


def _in_memory(A):
    return isinstance(A, np.ndarray) or scipy.sparse.issparse(A)


def _scalar_per_target(values, one_target):
    values = np.asarray(values)
    return values.ravel()[0].item() if one_target else values


def solve_lstsq(A, b, *, tol, max_iter, sketch_size, embedding, random_state,
                nnz_per_column=None, client=None, block_rows=None, name="A", cache="auto",
                sample_weight=None, fit_intercept=False, exact_singular_values=False,
                positive=False):
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
    centred = targets - shift
    if root_w is not None:
        centred = centred * root_w[:, None]
    N = precond.basis
    op = scipy.sparse.linalg.LinearOperator(
        (n, k), dtype=np.float64, matvec=lambda z: products.forward(N @ np.ravel(z)),
        rmatvec=lambda u: N.T @ products.adjoint(np.ravel(u)))
    starts = precond.singular_values[:k, None] ** 2 * (N.T @ precond.x0.reshape(d, -1))
    Z, istops, optimality, n_iter = np.zeros((k, targets.shape[1])), [], [], 0
    for j in range(targets.shape[1] if k and not positive else 0):
        z = starts[:, j]
        # LSQR updates its residual by a recurrence that drifts from b - A N z at
        # about 1e-8 relative accuracy in x when cond(A) = 1e6; one restart from
        # the computed z (scipy recomputes the residual for x0) removes the drift.
        for _ in range(2):
            z, istop, itn, r1norm, _, anorm, _, arnorm, _, _ = scipy.sparse.linalg.lsqr(
                op, centred[:, j], atol=tol, btol=tol, conlim=1e12, iter_lim=int(max_iter),
                x0=z)
            n_iter += int(itn)
        Z[:, j] = z
        istops.append(int(istop))
        denominator = anorm * r1norm
        optimality.append(float(arnorm / denominator) if denominator > 0 else 0.0)
        if istop == 7:  # iteration limit
            which = "" if b.ndim == 1 else f" for target {j}"
            warnings.warn(f"LSQR stopped at max_iter={max_iter} iterations{which} with "
                          f"relative normal-equation residual {optimality[-1]:.3g} > "
                          f"tol={tol:g}; increase max_iter (or sketch_size, for a better "
                          "preconditioner)", ConvergenceWarning, stacklevel=3)
    if not k:
        istops, optimality = [0] * targets.shape[1], [0.0] * targets.shape[1]
    X = N @ Z
    if positive:
        X, n_iter, istops, optimality = solve_nonnegative(precond, products, centred, tol=tol,
                                                          max_iter=max_iter)
    residual = centred - products.forward(X)
    full_gradient = products.adjoint(residual)
    gradient = N.T @ full_gradient
    targets_norm = np.linalg.norm(targets if root_w is None else targets * root_w[:, None],
                                  axis=0) + np.sqrt(precond.weight_sum) * np.abs(shift)
    bound = error_bound(precond, X, residual, gradient, targets_norm) if not positive else \
        positive_bound(precond, X, full_gradient, residual, targets_norm)
    outside = _outside_sketch(precond, full_gradient, residual)
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
    if exact_singular_values:
        singular_values = data_singular_values(
            blocks, precond, np.ones(n) if sample_weight is None else sample_weight,
            client=client)
    one = b.ndim == 1
    return LstsqResult(
        x=X.reshape((d,) + b.shape[1:]), n_iter=n_iter,
        istop=_scalar_per_target(istops, one),
        residual_norm=_scalar_per_target(np.linalg.norm(residual, axis=0), one),
        condition_number_estimate=precond.condition_number_estimate,
        sketch_solution=precond.x0, optimality_residual=_scalar_per_target(optimality, one),
        cache=cache, coef_error_bound=_scalar_per_target(bound, one), rank=k,
        singular_values=singular_values,
        intercept=_scalar_per_target(intercept, one),
        intercept_error_bound=_scalar_per_target(intercept_bound, one))
