"""The estimator form of sketch-preconditioned LSQR
(:func:`~dasketch.linear_model.lstsq_solver.sketch_lstsq`, whose result and
solver are re-exported here)."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator

from dasketch.kernels.embeddings import EMBEDDINGS
from dasketch.linear_model._sketched_regression import SketchedRegressorMixin
from dasketch.linear_model.lstsq_solver import (  # noqa: F401 - the solver is re-exported
    LSTSQ_SOLVERS,
    LstsqResult,
    _scalar_per_target,
    error_bound,
    sketch_lstsq,
    solve_lstsq,
)
from dasketch.utils._sklearn_compat import StrOptions, deprecate_positional_args
from dasketch.utils.params import Interval


class SketchLstsqRegressor(SketchedRegressorMixin, BaseEstimator):
    """Estimator form of :func:`sketch_lstsq` (sketch-preconditioned LSQR).

    It has the semantics of ``sklearn.linear_model.LinearRegression``: the
    minimum-norm solution for rank-deficient ``X`` (``rank_``,
    ``singular_``), sample weights, several targets.

    Parameters
    ----------
    fit_intercept : bool, default True
        Fit an intercept by weighted centring, applied inside every product
        with ``X`` (no centred copy; sparse ``X`` stays sparse): the
        intercept is not part of the minimised norm, as in
        ``LinearRegression``.
    tol : float, default 1e-10
        As for :func:`sketch_lstsq`.
    max_iter : int, optional
        As for :func:`sketch_lstsq`; default ``max(2 rank, 100)`` per target.
    sketch_size : int, optional
        As for :func:`sketch_lstsq`; default ``4 d``.
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        As for :func:`sketch_lstsq`.
    random_state : None, int or numpy.random.Generator, optional
        As for :func:`sketch_lstsq`.
    block_rows : int, optional
        As for :func:`sketch_lstsq`.
    cache : {"auto", True, False}, default "auto"
        As for :func:`sketch_lstsq`; ``cache_`` records the choice.
    positive : bool, default False
        Constrain the coefficients to be ``>= 0``, as
        ``LinearRegression(positive=True)``: as for :func:`sketch_lstsq`.
    solver : {"auto", "lsqr", "refinement"}, default "auto"
        As for :func:`sketch_lstsq`.

    Attributes
    ----------
    coef_ : ndarray (n_features,) or (n_targets, n_features)
        In the dtype of ``X`` (float32 stays float32; the solve runs in
        float64); 2-D for 2-D ``y``, as ``LinearRegression``.
    intercept_ : numpy float or ndarray (n_targets,)
        0 when ``fit_intercept=False``; in the dtype of ``coef_``.
    n_iter_ : int
        Iterations of the solver (see :class:`LstsqResult`).
    rank_ : int
        Numerical rank of the (centred, weighted) ``X`` from its sketch.
    singular_ : ndarray (n_features,)
        Singular values of the (centred, weighted) ``X``, as
        ``LinearRegression``'s (``W^(1/2) (X - 1 m^T)``, ``m`` the weighted
        column means), descending, 0 beyond ``rank_``: from the Gram matrix of
        the well-conditioned ``X N`` in one more pass over ``X``, accurate to
        about ``eps cond(X N)`` relative to the largest.
    condition_number_estimate_ : float
        Estimate of ``cond(X N)`` from an independent check sketch.
    optimality_residual_ : float or ndarray (n_targets,)
        Relative normal-equation residual of the solution per target (see
        :class:`LstsqResult`); a ``ConvergenceWarning`` is raised when LSQR
        stops at ``max_iter`` before reaching ``tol``.
    coef_error_bound_ : float or ndarray (n_targets,)
        ``||coef_ - coef*|| <= coef_error_bound_`` per target for the exact
        minimum-norm solution ``coef*`` (of rank ``rank_``), including the
        rounding to float32 for float32 input: see
        :func:`dasketch.linear_model.lstsq_bounds.error_bound`.
    intercept_error_bound_ : float or ndarray (n_targets,)
        ``|intercept_ - intercept*| <= intercept_error_bound_``:
        ``||mean(X)|| coef_error_bound_`` plus rounding.
    cache_ : CacheChoice
        Whether the decoded blocks of X were kept in (worker) memory after the
        first pass (``cached``), why (``reason``), the decoded size of X
        (``nbytes``) and the budget ``cache="auto"`` compared it with.
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
    >>> round(float(model.intercept_), 9), model.rank_
    (5.0, 8)
    >>> bool(model.coef_error_bound_ < 1e-6)
    True
    """

    _parameter_constraints = {
        "fit_intercept": ["boolean"],
        "tol": [Interval(numbers.Real, 0, 1, closed="neither")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "sketch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        "random_state": ["random_state"],
        "block_rows": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "cache": [StrOptions({"auto"}), "boolean"],
        "positive": ["boolean"],
        "solver": [StrOptions(set(LSTSQ_SOLVERS))],
    }

    @deprecate_positional_args(version="0.3")
    def __init__(self, *, fit_intercept=True, tol=1e-10, max_iter=None, sketch_size=None,
                 embedding="osnap", random_state=None, block_rows=None, cache="auto",
                 positive=False, solver="auto"):
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.max_iter = max_iter
        self.sketch_size = sketch_size
        self.embedding = embedding
        self.random_state = random_state
        self.block_rows = block_rows
        self.cache = cache
        self.positive = positive
        self.solver = solver

    def fit(self, X, y, sample_weight=None):
        """Fit the coefficients and intercept by sketch-preconditioned LSQR.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL; or a CuPy array or Dask array
            of CuPy blocks, computed in its own namespace as in
            :func:`sketch_lstsq` (the fitted attributes are numpy).
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (an array of another library is copied to the host).
        sample_weight : array-like of shape (n_samples,), optional
            Weights ``>= 0`` of the squared residuals; default all 1.

        Returns
        -------
        self : SketchLstsqRegressor
            The fitted estimator.
        """
        self._validate_params()
        X, y, weights, dtype = self._validate_fit_data(X, y, sample_weight, ones_column=False,
                                                       multi_output=True,
                                                       array_libraries="any")
        res = solve_lstsq(X, y, tol=self.tol, max_iter=self.max_iter,
                          sketch_size=self.sketch_size, embedding=self.embedding,
                          random_state=self.random_state, block_rows=self.block_rows,
                          name="X", sample_weight=weights, fit_intercept=self.fit_intercept,
                          exact_singular_values=True, cache=self.cache,
                          positive=self.positive, solver=self.solver)
        self._set_coef(res.x, res.intercept if self.fit_intercept else None, dtype)
        rounding = np.linalg.norm(np.atleast_2d(self.coef_) - np.atleast_2d(res.x.T), axis=1)
        self.coef_error_bound_ = _scalar_per_target(res.coef_error_bound + rounding,
                                                    y.ndim == 1)
        self.intercept_error_bound_ = res.intercept_error_bound
        self.n_iter_ = res.n_iter
        self.rank_ = res.rank
        self.singular_ = res.singular_values
        self.condition_number_estimate_ = res.condition_number_estimate
        self.optimality_residual_ = res.optimality_residual
        self.cache_ = res.cache
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
