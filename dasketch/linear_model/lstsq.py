"""Sketch-preconditioned LSQR for full-accuracy least squares.

Beyond pwSGD (Yang, Chow, Re, Mahoney, JMLR 2018): the same ``R`` from
``QR(S A)`` right-preconditions LSQR (Paige and Saunders, ACM TOMS 1982), as in
Blendenpik (Avron, Maymounkov, Toledo, SIAM J. Sci. Comput. 2010) and LSRN
(Meng, Saunders, Mahoney, SIAM J. Sci. Comput. 2014): LSQR on ``A R^{-1}``
converges at a rate set by ``cond(A R^{-1})`` (about 3 here), independent of
``cond(A)``.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_scalar
from sklearn.utils._param_validation import Interval, StrOptions

from dasketch._blocks import as_row_blocks, compute, matvec, rmatvec
from dasketch.kernels.embeddings import EMBEDDINGS
from dasketch.linear_model._sketched_regression import SketchedRegressorMixin
from dasketch.linear_model.preconditioning import check_regression_data, precondition_blocks


@dataclass(frozen=True)
class LstsqResult:
    """Solution of :func:`sketch_lstsq`.

    Parameters
    ----------
    x : ndarray (d,)
        The least-squares solution.
    n_iter : int
        LSQR iterations (each one product with ``A`` and one with ``A^T``).
    istop : int
        LSQR's reason for stopping (see ``scipy.sparse.linalg.lsqr``).
    residual_norm : float
        ``||A x - b||_2`` as tracked by LSQR.
    condition_number_estimate : float
        LSQR's estimate of ``cond(A R^{-1})``.
    sketch_solution : ndarray (d,)
        The warm start ``R^{-1} Q^T S b``.
    optimality_residual : float
        ``||U^T r|| / (||U|| ||r||)`` for ``U = A R^{-1}`` and ``r = b - A x``, as
        tracked by LSQR: the relative residual of the normal equations (0 at the
        exact solution; 0 also when ``r = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import sketch_lstsq
    >>> A = np.random.default_rng(0).standard_normal((2000, 6))
    >>> res = sketch_lstsq(A, A @ np.ones(6), random_state=0)
    >>> bool(np.allclose(res.x, 1.0)), res.n_iter < 50
    (True, True)
    """

    x: np.ndarray
    n_iter: int
    istop: int
    residual_norm: float
    condition_number_estimate: float
    sketch_solution: np.ndarray
    optimality_residual: float


def _products(A, blocks, client):
    """``(A v, A^T u)`` as functions: on the array itself when it is in memory
    (numpy or scipy.sparse: one BLAS call, no task overhead per LSQR iteration),
    else one blocked pass per product over the Dask blocks."""
    if isinstance(A, np.ndarray) or scipy.sparse.issparse(A):
        data = A if scipy.sparse.issparse(A) else np.asarray(A)
        return (lambda v: np.asarray(data @ v, dtype=np.float64).ravel(),
                lambda u: np.asarray(data.T @ u, dtype=np.float64).ravel())

    def forward(v):
        (out,) = compute(matvec(blocks, v), client=client)
        return np.asarray(out).ravel()

    def adjoint(u):
        (out,) = compute(rmatvec(blocks, u), client=client)
        return np.asarray(out).ravel()

    return forward, adjoint


def preconditioned_operator(forward, adjoint, precond, shape):
    """``A R^{-1}`` as a ``scipy.sparse.linalg.LinearOperator``."""
    return scipy.sparse.linalg.LinearOperator(
        shape, dtype=np.float64,
        matvec=lambda v: forward(precond.solve(np.ravel(v))),
        rmatvec=lambda u: precond.solve_transpose(adjoint(np.ravel(u))))


def sketch_lstsq(A, b, *, tol=1e-10, max_iter=None, sketch_size=None, embedding="osnap",
                 nnz_per_column=None, random_state=None, client=None, block_rows=None):
    """Least squares ``min ||A x - b||_2`` by LSQR right-preconditioned with a sketch.

    1. ``S [A b]`` in one blocked pass (OSNAP by default), ``QR(S A) = Q R``;
    2. warm start ``x0 = R^{-1} Q^T S b`` (sketch-and-solve);
    3. ``scipy.sparse.linalg.lsqr`` on the ``LinearOperator`` ``A R^{-1}`` from
       ``y0 = R x0``, then ``x = R^{-1} y``.

    Each product of the operator is a blocked pass over a Dask or zarr ``A``
    (correct at any size, but every LSQR iteration then pays two passes over
    the data and the task overhead); numpy and scipy.sparse inputs are
    multiplied in place instead, through the same preconditioned operator.

    Parameters
    ----------
    A : array-like of shape (n, d)
        A numpy array, scipy.sparse matrix, Dask array or zarr path, ``n > d``.
    b : array-like of shape (n,)
        Targets.
    tol : float, default 1e-10
        ``atol`` and ``btol`` of LSQR: it stops when ``||(A R^{-1})^T r|| <= tol
        ||A R^{-1}|| ||r||`` (or ``||r|| <= tol ||b||``), then restarts once from
        its solution with a freshly computed residual. ``1e-10`` gives ``x`` to
        about ``1e-9`` relative to ``numpy.linalg.lstsq`` at ``cond(A) = 1e6``.
    max_iter : int, optional
        Default ``max(2 d, 100)``.
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
    """
    tol = check_scalar(tol, "tol", numbers.Real, min_val=0, max_val=1,
                       include_boundaries="neither")
    blocks, b = check_regression_data(A, b, block_rows=block_rows)
    return solve_lstsq(A if _in_memory(A) else blocks, b, tol=tol, max_iter=max_iter,
                       sketch_size=sketch_size, embedding=embedding,
                       nnz_per_column=nnz_per_column, random_state=random_state,
                       client=client, block_rows=block_rows)


def _in_memory(A):
    return isinstance(A, np.ndarray) or scipy.sparse.issparse(A)


def solve_lstsq(A, b, *, tol, max_iter, sketch_size, embedding, random_state,
                nnz_per_column=None, client=None, block_rows=None, name="A"):
    """:func:`sketch_lstsq` on validated input: ``A`` an ndarray, a sparse matrix
    (products in place) or :class:`~dasketch._blocks.RowBlocks`, ``b`` a finite
    float64 vector; errors about the data name it ``name``."""
    blocks = as_row_blocks(A, block_rows=block_rows, name=name)
    n, d = blocks.shape
    if max_iter is None:
        max_iter = max(2 * d, 100)
    max_iter = check_scalar(max_iter, "max_iter", numbers.Integral, min_val=1)
    precond = precondition_blocks(blocks, b, sketch_size=sketch_size, embedding=embedding,
                                  nnz_per_column=nnz_per_column, check_size=0,
                                  random_state=random_state, client=client, name=name)
    forward, adjoint = _products(A, blocks, client)
    op = preconditioned_operator(forward, adjoint, precond, (n, d))
    y = precond.R @ precond.x0
    n_iter = 0
    # LSQR updates its residual by a recurrence that drifts from b - A R^{-1} y
    # at about 1e-8 relative accuracy in x when cond(A) = 1e6; one restart from
    # the computed y (scipy recomputes the residual for x0) removes the drift.
    for _ in range(2):
        y, istop, itn, r1norm, _, anorm, acond, arnorm, _, _ = scipy.sparse.linalg.lsqr(
            op, b, atol=tol, btol=tol, conlim=1e12, iter_lim=int(max_iter), x0=y)
        n_iter += int(itn)
    denominator = anorm * r1norm
    optimality = float(arnorm / denominator) if denominator > 0 else 0.0
    if istop == 7:  # iteration limit
        warnings.warn(f"LSQR stopped at max_iter={max_iter} iterations with relative "
                      f"normal-equation residual {optimality:.3g} > tol={tol:g}; increase "
                      "max_iter (or sketch_size, for a better preconditioner)",
                      ConvergenceWarning, stacklevel=3)
    return LstsqResult(precond.solve(y), n_iter, int(istop), float(r1norm),
                       float(acond), precond.x0, optimality)


class SketchLstsqRegressor(SketchedRegressorMixin, BaseEstimator):
    """Estimator form of :func:`sketch_lstsq` (sketch-preconditioned LSQR).

    Parameters
    ----------
    fit_intercept : bool, default True
        Fit an intercept, as the coefficient of an appended column of ones
        (the preconditioner absorbs its scale; sparse ``X`` stays sparse).
    tol : float, default 1e-10
        As for :func:`sketch_lstsq`.
    max_iter : int, optional
        As for :func:`sketch_lstsq`; default ``max(2 (d + 1), 100)`` for ``d`` features and the
        intercept.
    sketch_size : int, optional
        As for :func:`sketch_lstsq`; default ``4 (d + 1)``.
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        As for :func:`sketch_lstsq`.
    random_state : None, int or numpy.random.Generator, optional
        As for :func:`sketch_lstsq`.
    block_rows : int, optional
        As for :func:`sketch_lstsq`.

    Attributes
    ----------
    coef_ : ndarray (n_features,)
        In the dtype of ``X`` (float32 stays float32; the solve runs in float64).
    intercept_ : float
        0.0 when ``fit_intercept=False``.
    n_iter_ : int
    condition_number_estimate_ : float
        LSQR's estimate of ``cond(X R^{-1})``.
    optimality_residual_ : float
        Relative normal-equation residual of the solution (see
        :class:`LstsqResult`); a ``ConvergenceWarning`` is raised when LSQR
        stops at ``max_iter`` before reaching ``tol``.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        For a pandas DataFrame ``X``.

    See Also
    --------
    sketch_lstsq : The solver, with its diagnostics.
    PWSGDRegressor : Preconditioned weighted SGD, also for l1 regression.
    DualRandomProjectionRegressor : Ridge regression for ``d >> n``.
    dasketch.RFDSONRegressor : Online regression in one pass.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import SketchLstsqRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((3000, 8))
    >>> y = X @ np.arange(8.0) + 5.0
    >>> model = SketchLstsqRegressor(random_state=0).fit(X, y)
    >>> bool(np.allclose(model.coef_, np.arange(8.0), atol=1e-9))
    True
    >>> round(float(model.intercept_), 9)
    5.0
    """

    _parameter_constraints = {
        "fit_intercept": ["boolean"],
        "tol": [Interval(numbers.Real, 0, 1, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "sketch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        "random_state": ["random_state"],
        "block_rows": [Interval(numbers.Integral, 1, None, closed="left"), None],
    }

    def __init__(self, fit_intercept=True, tol=1e-10, max_iter=None, sketch_size=None,
                 embedding="osnap", random_state=None, block_rows=None):
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.sketch_size = sketch_size
        self.embedding = embedding
        self.random_state = random_state
        self.block_rows = block_rows

    def fit(self, X, y):
        """Fit the coefficients and intercept by sketch-preconditioned LSQR.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL.
        y : array-like of shape (n_samples,)
            Targets.

        Returns
        -------
        self : SketchLstsqRegressor
            The fitted estimator.
        """
        self._validate_params()
        design, y, dtype = self._validate_fit_data(X, y)
        res = solve_lstsq(design, y, tol=self.tol, max_iter=self.max_iter,
                          sketch_size=self.sketch_size, embedding=self.embedding,
                          random_state=self.random_state, block_rows=self.block_rows,
                          name="X")
        self._set_coef(res.x, dtype)
        self.n_iter_ = res.n_iter
        self.condition_number_estimate_ = res.condition_number_estimate
        self.optimality_residual_ = res.optimality_residual
        return self
