"""Dual random projection for l2-regularised linear models.

Zhang, Mahdavi, Jin, Yang, Zhu, "Recovering the Optimal Solution by Dual Random
Projection", COLT 2013. The problem

.. math:: \\min_{w, b} \\frac{\\lambda}{2} \\|w\\|^2 + \\sum_i \\ell(x_i^T w + b, y_i)

is solved in the random m-dimensional projection ``X_hat = X R / sqrt(m)``; the
optimal dual variables of the small problem, ``alpha_i = l'(x_hat_i^T z + b, y_i)``,
give back a d-dimensional solution through the optimality condition of the
original problem, ``w = -(1/lambda) sum_i alpha_i x_i`` (Algorithm 1). Algorithm 2
repeats this around the current solution with the same projection, and the error
contracts geometrically when ``m`` is large enough compared with the rank of X.

Dask appears only through :mod:`dasketch._blocks`: the projection is one blocked
pass (``R`` is regenerated tile by tile inside every block task), the projected
data stay in (worker) memory, every evaluation of the projected objective is a
tree-reduced pass over them, and each recovery ``X^T alpha`` and each margin
``X w`` is one more blocked pass over X.
"""

from __future__ import annotations

import numbers
import warnings
from functools import partial

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from dasketch import _blocks
from dasketch.utils.validation import as_target_vector
from dasketch.kernels.embeddings import TILE, gaussian_rows, resolve_seed

__all__ = ["DualRandomProjectionClassifier", "DualRandomProjectionRegressor"]

# Stream of the Gaussian projection R in dasketch.kernels.embeddings.
PROJECTION_STREAM = 0x445250
# Above this many samples the dual variables are kept as a lazy Dask array.
DUAL_COEF_MAX_SAMPLES = 2 ** 24

LOSSES = ("logistic", "smoothed_hinge", "squared")
SOLVERS = ("newton", "lbfgs")


# ------------------------------------------------------------------ losses
def _loss_value(t, y, loss, smoothing=1.0):
    """``l(t, y)`` element-wise for margins ``t`` and targets ``y``."""
    if loss == "squared":
        return 0.5 * (t - y) ** 2
    u = y * t
    if loss == "logistic":
        return np.logaddexp(0.0, -u)
    return np.where(u >= 1.0, 0.0,
                    np.where(u <= 1.0 - smoothing, 1.0 - u - 0.5 * smoothing,
                             (1.0 - u) ** 2 / (2.0 * smoothing)))


def _loss_derivative(t, y, loss, smoothing=1.0):
    """``l'(t, y)``, the derivative in the margin ``t``: the dual variable."""
    if loss == "squared":
        return t - y
    u = y * t
    if loss == "logistic":
        return -y * expit(-u)
    return -y * np.clip((1.0 - u) / smoothing, 0.0, 1.0)


def _loss_curvature(t, y, loss, smoothing=1.0):
    """``l''(t, y)`` (the generalised second derivative for the smoothed hinge)."""
    if loss == "squared":
        return np.ones_like(t)
    u = y * t
    if loss == "logistic":
        p = expit(u)
        return p * (1.0 - p)
    return ((u > 1.0 - smoothing) & (u < 1.0)) / smoothing


# ------------------------------------------------- per-block kernels (numpy only)
def _margins(xhat, c, z, b):
    t = xhat @ z + b
    if c is not None:
        t += c.reshape(-1)
    return t


def _projected_terms(xhat, y, c=None, *, z, b, loss, smoothing, hessian):
    """Packed ``[sum l, X^T l', sum l', vec([X 1]^T diag(l'') [X 1])]`` of one block
    at the projected margins ``t = xhat z + c + b``."""
    t = _margins(xhat, c, z, b)
    y = y.reshape(-1)
    dl = _loss_derivative(t, y, loss, smoothing)
    parts = [[_loss_value(t, y, loss, smoothing).sum()], xhat.T @ dl, [dl.sum()]]
    if hessian:
        w = _loss_curvature(t, y, loss, smoothing)
        xw = xhat * w[:, None]
        column = xw.sum(axis=0)
        H = np.empty((xhat.shape[1] + 1,) * 2)
        H[:-1, :-1] = xhat.T @ xw
        H[:-1, -1] = H[-1, :-1] = column
        H[-1, -1] = w.sum()
        parts.append(H.ravel())
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


def _dual_variables(xhat, y, c=None, *, z, b, loss, smoothing):
    return _loss_derivative(_margins(xhat, c, z, b), y.reshape(-1), loss, smoothing)


def _loss_sum(y, c, *, b, loss, smoothing):
    return np.array([_loss_value(c.reshape(-1) + b, y.reshape(-1), loss, smoothing).sum()])


def _count_nonfinite(xhat):
    return np.array([np.count_nonzero(~np.isfinite(xhat))], dtype=np.float64)


def _gaussian_combination(seed, stream, n_rows, z):
    """``R z`` for the Gaussian ``R`` (n_rows x m) of ``(seed, stream)``, tile by tile
    so that ``R`` is never held whole."""
    out = np.empty(n_rows)
    for lo in range(0, n_rows, TILE):
        hi = min(lo + TILE, n_rows)
        out[lo:hi] = gaussian_rows(seed, stream, lo, hi, z.size) @ z
    return out


# ------------------------------------------------------------------ checks
def _check_positive_int(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) \
            or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_positive_float(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def _check_finite_input(X):
    """Reject NaN/Inf in in-memory inputs up front (Dask and zarr inputs are checked
    on their projection, which is non-finite exactly when X is)."""
    if scipy.sparse.issparse(X):
        values = X.data
    elif isinstance(X, np.ndarray):
        values = X
    else:
        return
    if values.dtype.kind in "fc" and not np.isfinite(values).all():
        raise ValueError("X contains NaN or infinity; only finite values are accepted")


# ------------------------------------------------------------------ solver
class _ProjectedProblem:
    """``min_{z, b} lambda/2 ||z + a||^2 + sum_i l(x_hat_i^T z + c_i + b, y_i)``.

    ``a = R^T w / sqrt(m)`` and ``c = X w`` for the current solution ``w`` (both
    zero in the first round); ``b`` is free (unpenalised) when ``fit_intercept``.
    Every evaluation is one tree-reduced pass over the (persisted) projected data.
    """

    def __init__(self, estimator, xhat, y, c, a, lam, fit_intercept):
        self.est = estimator
        self.arrays = (xhat, y) if c is None else (xhat, y, c)
        self.a = a
        self.lam = lam
        self.m = a.size
        self.fit_intercept = fit_intercept
        self.cache = {}
        self.n_evaluations = 0

    def _split(self, v):
        return v[:self.m], (v[self.m] if self.fit_intercept else 0.0)

    def terms(self, v, hessian):
        key = (v.tobytes(), hessian)
        if key not in self.cache:
            z, b = self._split(v)
            func = partial(_projected_terms, z=z, b=b, loss=self.est._loss,
                           smoothing=self.est._smoothing, hessian=hessian)
            (packed,) = _blocks.compute(_blocks.tree_sum_rows(
                self.arrays, func, split_every=self.est.split_every))
            self.n_evaluations += 1
            self.cache = {key: packed}
        return self.cache[key]

    def value_and_gradient(self, v, hessian=False):
        m = self.m
        packed = self.terms(v, hessian)
        z, _ = self._split(v)
        shift = z + self.a
        f = 0.5 * self.lam * shift @ shift + packed[0]
        g = self.lam * shift + packed[1:m + 1]
        if self.fit_intercept:
            g = np.append(g, packed[m + 1])
        return f, g

    def hessian(self, v):
        m = self.m
        H = self.terms(v, True)[m + 2:].reshape(m + 1, m + 1)
        if not self.fit_intercept:
            H = H[:m, :m]
        H = H.copy()
        H[np.arange(m), np.arange(m)] += self.lam
        return H

    def gradient_scale(self, v):
        """``||lambda (z + a)|| + ||X_hat^T l'|| + |sum l'|``: the size of the terms
        that cancel at the optimum, for a tolerance that rounding can meet."""
        m = self.m
        packed = self.terms(v, False)
        z, _ = self._split(v)
        return (self.lam * np.linalg.norm(z + self.a) + np.linalg.norm(packed[1:m + 1])
                + abs(packed[m + 1]))

    def solve(self, v0):
        est = self.est
        if est._loss == "squared":
            # Quadratic: one Newton step from any point is the closed-form solution
            # (with the intercept as an unpenalised variable, i.e. centring).
            _, g = self.value_and_gradient(v0, hessian=True)
            step = scipy.linalg.solve(self.hessian(v0), g, assume_a="sym")
            return v0 - step, True
        scale = max(self.gradient_scale(v0), np.finfo(float).tiny)
        gtol = est.solver_tol * scale
        if est.solver == "newton":
            v, g = self._newton(v0, gtol)
        else:
            res = scipy.optimize.minimize(
                self.value_and_gradient, v0, jac=True, method="L-BFGS-B",
                options={"gtol": gtol, "ftol": 0.0, "maxiter": est.max_solver_iter,
                         "maxcor": 30})
            v = res.x
            g = self.value_and_gradient(v)[1]
        # L-BFGS may stop short of gtol when the rounding of the objective, not the
        # gradient, limits progress; a gradient this small is converged all the same.
        return v, bool(np.linalg.norm(g) <= max(gtol, np.sqrt(est.solver_tol) * scale))

    def _newton(self, v, gtol):
        """Damped Newton method with Armijo backtracking.

        Written out because scipy's Newton methods do not fit: ``trust-exact``
        refactorises the Hessian several times per step (more costly than the
        distributed evaluation here), and ``Newton-CG`` asks for objective values
        at points where the Hessian is not needed. Here every evaluation returns
        value, gradient and Hessian in one pass, and steps are taken in full once
        the Newton decrement is at the objective's rounding level (where comparing
        objective values is meaningless and the iteration is quadratic anyway).
        """
        f, g = self.value_and_gradient(v, hessian=True)
        for _ in range(self.est.max_solver_iter):
            if np.linalg.norm(g) <= gtol:
                break
            H = self.hessian(v)
            try:
                step = scipy.linalg.solve(H, g, assume_a="pos")
            except np.linalg.LinAlgError:
                # Flat in the intercept (no sample with positive curvature, as can
                # happen with the smoothed hinge): the least-squares step.
                step = scipy.linalg.lstsq(H, g)[0]
            decrement = float(g @ step)
            t = 1.0
            while True:
                f_new, g_new = self.value_and_gradient(v - t * step, hessian=True)
                rounding = decrement <= 1e-8 * max(abs(f), 1.0)
                if rounding or f_new <= f - 1e-4 * t * decrement or t < 1e-10:
                    break
                t *= 0.5
            v, f, g = v - t * step, f_new, g_new
        return v, g


# ------------------------------------------------------------------ estimators
class _DualRandomProjection(BaseEstimator):
    """Shared fitting of Algorithms 1 and 2 (see the public classes)."""

    _loss = "squared"
    _smoothing = 1.0

    def __init__(self, *, alpha, n_components, n_iter, fit_intercept, tol, solver,
                 solver_tol, max_solver_iter, block_rows, split_every,
                 random_state):
        self.alpha = alpha
        self.n_components = n_components
        self.n_iter = n_iter
        self.fit_intercept = fit_intercept
        self.tol = tol
        self.solver = solver
        self.solver_tol = solver_tol
        self.max_solver_iter = max_solver_iter
        self.block_rows = block_rows
        self.split_every = split_every
        self.random_state = random_state

    def _check_params(self, n_features):
        self._lam = _check_positive_float(self.alpha, "alpha")
        m = _check_positive_int(self.n_components, "n_components")
        if m >= n_features:
            raise ValueError(f"n_components must be smaller than the number of features "
                             f"({n_features}), got {m}: a projection to as many dimensions "
                             "is pointless, solve the problem directly")
        _check_positive_int(self.n_iter, "n_iter")
        _check_positive_int(self.max_solver_iter, "max_solver_iter")
        if not isinstance(self.tol, numbers.Real) or not self.tol >= 0:
            raise ValueError(f"tol must be a number >= 0, got {self.tol!r}")
        _check_positive_float(self.solver_tol, "solver_tol")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {self.solver!r}")
        return m

    def _fit(self, X, y_of_n, y_name="y"):
        _check_finite_input(X)
        blocks = _blocks.as_row_blocks(X, block_rows=self.block_rows)
        n, d = blocks.shape
        m = self._check_params(d)
        y = y_of_n(n)
        lam, client, fit_intercept = self._lam, None, bool(self.fit_intercept)
        seed = resolve_seed(self.random_state)

        # Step 1 (one blocked pass): X_hat = X R / sqrt(m), kept in (worker) memory in
        # chunks of rows sized for the m-dimensional problem.
        rows = _blocks.default_block_rows(m + 2)
        xhat = _blocks.rechunk_rows(
            _blocks.random_projection(blocks, m, seed, stream=PROJECTION_STREAM), rows)
        yd = _blocks.rechunk_rows(_blocks.as_row_aligned(y.astype(np.float64), blocks), rows)
        xhat, yd = _blocks.persist(xhat, yd, client=client)
        (bad,) = _blocks.compute(_blocks.tree_sum_rows((xhat,), _count_nonfinite),
                                 client=client)
        if bad[0]:
            raise ValueError("X contains NaN or infinity (or values so large that their "
                             "projection overflows); only finite values are accepted")

        a = np.zeros(m)
        c = None
        w = np.zeros(d)
        v = np.zeros(m + int(fit_intercept))
        history, iterates = [], []
        warned = False
        for it in range(1, self.n_iter + 1):
            problem = _ProjectedProblem(self, xhat, yd, c, a, lam, fit_intercept)
            v, ok = problem.solve(np.zeros_like(v) if c is None else np.append(
                np.zeros(m), v[m:]))
            if not ok and not warned:
                warnings.warn(f"the projected problem of round {it} did not reach "
                              f"solver_tol={self.solver_tol} in max_solver_iter="
                              f"{self.max_solver_iter} iterations", RuntimeWarning,
                              stacklevel=3)
                warned = True
            z, b = v[:m], (float(v[m]) if fit_intercept else 0.0)
            if it == 1:
                self.naive_coef_ = _gaussian_combination(
                    seed, PROJECTION_STREAM, d, z) / np.sqrt(m)
                self.naive_intercept_ = b
            # Step 3 (one blocked pass): dual variables and recovery w = -(1/lambda) X^T alpha.
            arrays = (xhat, yd) if c is None else (xhat, yd, c)
            dual = _blocks.map_row_chunks(arrays, partial(
                _dual_variables, z=z, b=b, loss=self._loss, smoothing=self._smoothing))
            # R^T w / sqrt(m) = -(1/lambda) X_hat^T alpha exactly: the next regulariser
            # needs no pass over R.
            packed = problem.terms(v, False)
            (xt_dual,) = _blocks.compute(_blocks.rmatvec(blocks, dual, split_every=self.split_every),
                                         client=client)
            w_new = -xt_dual / lam
            a = -packed[1:m + 1] / lam
            change = float(np.linalg.norm(w_new - w))
            norm = float(np.linalg.norm(w_new))
            w = w_new
            iterates.append((w, b, dual))
            history.append({"iteration": it, "change": change,
                            "relative_change": change / norm if norm else 0.0,
                            "objective": None,
                            "solver_evaluations": problem.n_evaluations})
            if self.n_iter == 1:
                break
            # Margins of the new iterate (one blocked pass); they also give its objective.
            c = _blocks.persist(_blocks.rechunk_rows(_blocks.matvec(blocks, w), rows),
                                client=client)[0]
            (loss_sum,) = _blocks.compute(_blocks.tree_sum_rows(
                (yd, c), partial(_loss_sum, b=b, loss=self._loss, smoothing=self._smoothing)),
                client=client)
            history[-1]["objective"] = 0.5 * lam * norm ** 2 + float(loss_sum[0])
            if norm == 0 or change <= self.tol * norm:
                break
            if it >= 2 and change > history[-2]["change"]:
                warnings.warn(
                    f"dual random projection stopped contracting at iteration {it} "
                    f"(change {change:.3g} > {history[-2]['change']:.3g}); n_components="
                    f"{m} is too small for the rank of X. Returning the iterate with the "
                    "lowest objective", RuntimeWarning, stacklevel=3)
                break

        best = 0
        if self.n_iter > 1:
            best = int(np.argmin([h["objective"] for h in history]))
        w, b, dual = iterates[best]
        self.coef_ = w
        self.intercept_ = b
        self.n_iter_ = len(history)
        self.best_iteration_ = best + 1
        self.history_ = history
        if n <= DUAL_COEF_MAX_SAMPLES:
            (dual,) = _blocks.compute(dual, client=client)
        self.dual_coef_ = dual
        self.n_components_ = m
        self.n_features_in_ = d
        self.random_state_ = seed
        return self

    def _decision(self, X):
        check_is_fitted(self, "coef_")
        if _blocks.is_dask_collection(X) or isinstance(X, str) or hasattr(X, "__fspath__"):
            blocks = _blocks.as_row_blocks(X, block_rows=self.block_rows)
            if blocks.n_features != self.n_features_in_:
                raise ValueError(f"X must have {self.n_features_in_} columns, got "
                                 f"{blocks.n_features}")
            return _blocks.matvec(blocks, self.coef_)[:, 0] + self.intercept_
        if not scipy.sparse.issparse(X):
            X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        return np.asarray(X @ self.coef_).reshape(-1) + self.intercept_


_PARAMS_DOC = """
    alpha : float, default=1.0
        ``lambda > 0``, the weight of ``||w||^2 / 2``.
    n_components : int, default=100
        ``m``, the dimension of the random projection, ``1 <= m < n_features``.
        The recovery error contracts when ``m`` is a modest multiple of the rank of
        X (the paper's Theorems 1 and 2 ask ``m = O(r log r)``).
    n_iter : int, default=1
        1: Algorithm 1 (one shot). More: Algorithm 2, with the projection computed
        once and one projected solve, one pass ``X^T alpha`` and one pass ``X w`` per
        round.
    fit_intercept : bool, default=True
        Fit an unpenalised intercept ``b``. It is a free variable of every projected
        problem; at its optimum ``sum_i alpha_i = 0``, so the recovered
        ``w = -(1/lambda) X^T alpha`` equals the one for the column-centred X (for
        squared loss this is exactly centring X and y). ``intercept_`` is the ``b``
        of the last projected problem.
    tol : float, default=1e-10
        Algorithm 2 stops early once ``||w_t - w_{t-1}|| <= tol ||w_t||``.
    solver : {"newton", "lbfgs"}, default="newton"
        For non-quadratic losses: a damped Newton method with the exact
        (m+1)-dimensional Hessian, or scipy's ``L-BFGS-B``; every evaluation is one
        distributed pass over the projected data. Squared loss is solved in closed
        form.
    solver_tol : float, default=1e-11
        Gradient tolerance of the projected solve, relative to the size of the
        terms that cancel at its optimum.
    max_solver_iter : int, default=100
    block_rows, split_every
        Blocks of rows and fan-in of the reduction trees (see
        :func:`dasketch.sketch`); computed on the current Dask scheduler. The fitted model does not depend on them
        beyond rounding.
    random_state : None, int or numpy random generator
        Seed of the Gaussian projection ``R`` (d x m), regenerated tile by tile
        from ``(seed, stream, feature index)``; never materialised whole.
"""

_ATTRIBUTES_DOC = """
    coef_ : ndarray of shape (n_features,)
        Recovered ``w = -(1/alpha) X^T dual_coef_``.
    intercept_ : float
    dual_coef_ : ndarray of shape (n_samples,) or dask.array.Array
        Dual variables ``alpha_i = l'(x_hat_i^T z + c_i + b, y_i)`` of the returned
        iterate; a lazy Dask array when there are more than
        ``DUAL_COEF_MAX_SAMPLES`` samples.
    naive_coef_ : ndarray of shape (n_features,)
        The naive solution ``R z / sqrt(m)`` of the first projected problem, the
        baseline the paper shows to be far off.
    naive_intercept_ : float
    n_iter_ : int
        Rounds run (fewer than ``n_iter`` when converged or stopped).
    best_iteration_ : int
        Round of the returned iterate: the last one, or the one with the lowest
        objective when the iteration stopped contracting (a ``RuntimeWarning`` says
        so; a diverged iterate is never returned).
    history_ : list of dict
        Per round: ``change`` ``||w_t - w_{t-1}||``, ``relative_change``,
        ``objective`` (the full objective of ``(w_t, b_t)``, when ``n_iter > 1``),
        ``solver_evaluations`` (passes over the projected data).
    n_components_ : int
    n_features_in_ : int
    random_state_ : int
        The seed of ``R``.
"""


class DualRandomProjectionRegressor(RegressorMixin, _DualRandomProjection):
    __doc__ = """Ridge regression by dual random projection (Zhang et al., COLT 2013,
    Algorithms 1 and 2).

    Minimises ``alpha/2 ||w||^2 + 1/2 sum_i (x_i^T w + b - y_i)^2``, whose minimiser
    is exactly that of scikit-learn's ``Ridge(alpha=alpha,
    fit_intercept=fit_intercept)`` (its objective ``||y - X w - b||^2 + alpha ||w||^2``
    is twice this one).

    Parameters
    ----------""" + _PARAMS_DOC + """
    Attributes
    ----------""" + _ATTRIBUTES_DOC + """
    References
    ----------
    L. Zhang, M. Mahdavi, R. Jin, T. Yang, S. Zhu, "Recovering the Optimal Solution
    by Dual Random Projection", COLT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from dasketch.linear_model import DualRandomProjectionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 1000))
    >>> y = X @ rng.standard_normal(1000) + rng.standard_normal(200)
    >>> drp = DualRandomProjectionRegressor(alpha=1.0, n_components=100, n_iter=4,
    ...                                     random_state=0).fit(X, y)
    >>> exact = Ridge(alpha=1.0).fit(X, y).coef_
    >>> bool(np.linalg.norm(drp.coef_ - exact) <= 1e-2 * np.linalg.norm(exact))
    True
    """

    def __init__(self, alpha=1.0, *, n_components=100, n_iter=1, fit_intercept=True,
                 tol=1e-10, solver="newton", solver_tol=1e-11, max_solver_iter=100,
                 block_rows=None, split_every=None, random_state=None):
        super().__init__(alpha=alpha, n_components=n_components, n_iter=n_iter,
                         fit_intercept=fit_intercept, tol=tol, solver=solver,
                         solver_tol=solver_tol, max_solver_iter=max_solver_iter,
                         block_rows=block_rows, split_every=split_every,
                         random_state=random_state)

    def fit(self, X, y):
        """Fit on ``X`` (numpy, scipy.sparse, Dask array or zarr path) and ``y``."""
        return self._fit(X, lambda n: as_target_vector(y, n, real=True))

    def predict(self, X):
        """``X w + b``; a lazy Dask array for Dask or zarr input."""
        return self._decision(X)


class DualRandomProjectionClassifier(ClassifierMixin, _DualRandomProjection):
    __doc__ = """Binary linear classifier by dual random projection (Zhang et al., COLT 2013,
    Algorithms 1 and 2).

    Minimises ``alpha/2 ||w||^2 + sum_i l(y_i (x_i^T w + b))`` with labels mapped to
    ``y_i in {-1, +1}`` (``classes_[1]`` is +1) and

    * ``"logistic"``: ``log(1 + exp(-u))``. The minimiser is exactly that of
      scikit-learn's ``LogisticRegression(C=1/alpha, fit_intercept=fit_intercept)``
      (L2 penalty, unpenalised intercept, as with its default ``lbfgs`` solver),
      whose objective ``||w||^2/2 + C sum_i log(1 + exp(-u_i))`` is this one divided
      by alpha.
    * ``"smoothed_hinge"``: 0 for ``u >= 1``, ``1 - u - s/2`` for ``u <= 1 - s``,
      ``(1 - u)^2 / (2 s)`` in between (``s = smoothing``).
    * ``"squared"``: ``(1 - u)^2 / 2``, i.e. ``Ridge(alpha)`` on ``+-1`` targets.

    Parameters
    ----------
    loss : {"logistic", "smoothed_hinge", "squared"}, default="logistic"
    smoothing : float, default=1.0
        ``s > 0`` of the smoothed hinge loss.""" + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray of shape (2,)""" + _ATTRIBUTES_DOC + """
    References
    ----------
    L. Zhang, M. Mahdavi, R. Jin, T. Yang, S. Zhu, "Recovering the Optimal Solution
    by Dual Random Projection", COLT 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import DualRandomProjectionClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 2000))
    >>> y = np.where(X @ rng.standard_normal(2000) > 0, "spam", "ham")
    >>> clf = DualRandomProjectionClassifier(alpha=10.0, n_components=100, n_iter=3,
    ...                                      random_state=0).fit(X, y)
    >>> clf.classes_.tolist()
    ['ham', 'spam']
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    def __init__(self, alpha=1.0, *, loss="logistic", smoothing=1.0, n_components=100,
                 n_iter=1, fit_intercept=True, tol=1e-10, solver="newton", solver_tol=1e-11,
                 max_solver_iter=100, block_rows=None, split_every=None,
                 random_state=None):
        self.loss = loss
        self.smoothing = smoothing
        super().__init__(alpha=alpha, n_components=n_components, n_iter=n_iter,
                         fit_intercept=fit_intercept, tol=tol, solver=solver,
                         solver_tol=solver_tol, max_solver_iter=max_solver_iter,
                         block_rows=block_rows, split_every=split_every,
                         random_state=random_state)

    def fit(self, X, y):
        """Fit on ``X`` (numpy, scipy.sparse, Dask array or zarr path) and labels ``y``
        of exactly two classes."""
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        self._loss = self.loss
        self._smoothing = _check_positive_float(self.smoothing, "smoothing")

        def targets(n):
            labels = as_target_vector(y, n)
            classes, codes = np.unique(labels, return_inverse=True)
            if classes.size != 2:
                raise ValueError(f"y must hold exactly two classes, got {classes.size}: "
                                 f"{classes[:10].tolist()}")
            self.classes_ = classes
            return np.where(codes == 1, 1.0, -1.0)
        return self._fit(X, targets)

    def decision_function(self, X):
        """``X w + b``: positive for ``classes_[1]``; lazy for Dask or zarr input."""
        return self._decision(X)

    def predict(self, X):
        """Predicted class labels; lazy for Dask or zarr input."""
        scores = self._decision(X)
        return self.classes_[(scores > 0).astype(int)] if isinstance(scores, np.ndarray) \
            else scores.map_blocks(lambda s: self.classes_[(s > 0).astype(int)],
                                   dtype=self.classes_.dtype)

    def predict_proba(self, X):
        """Class probabilities ``sigmoid(X w + b)`` (logistic loss only)."""
        if self.loss != "logistic":
            raise AttributeError("predict_proba is available for loss='logistic' only")
        p = expit(np.asarray(self._decision(X)))
        return np.column_stack([1.0 - p, p])
