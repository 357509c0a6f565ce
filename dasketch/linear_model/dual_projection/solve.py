"""Dual random projection for l2-regularised linear models, and past the paper.

Zhang, Mahdavi, Jin, Yang, Zhu, "Recovering the Optimal Solution by Dual Random
Projection", COLT 2013. The problem

.. math:: \\min_{w, b} \\frac{\\lambda}{2} \\|w\\|^2 + \\sum_i \\ell(x_i^T w + b, y_i)

is projected to ``X_hat = X R / sqrt(m)`` (one blocked pass); the dual variables
of the small problem give back a d-dimensional solution
``w = -(1/lambda) X^T alpha`` (Algorithm 1), repeated around the current solution
in Algorithm 2 (``solver="paper"``). Algorithm 2 is a preconditioned Richardson
iteration whose rate is about 0.5 per round at ``m = 20 r`` and which diverges
when X is not low rank. The default ``solver="cg"`` keeps the projection as a
preconditioner of the full problem instead (:mod:`.preconditioner`), with
conjugate gradients for the squared loss and Newton-CG for the others
(:mod:`.solvers`): one pass over X per iteration, no divergence, and exact
preconditioning when the rank of X is at most m.

Every fit reports its relative optimality residual
``||grad F(w, b)|| / ||grad F(0, b0)||`` (``b0`` the best constant model, 0
without an intercept), taken from the last pass, and warns with
:class:`~sklearn.exceptions.ConvergenceWarning` when it misses ``tol``.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import as_row_blocks
from dasketch.kernels.embeddings import TILE, gaussian_rows, resolve_seed
from dasketch.linear_model.dual_projection.losses import (
    LOSSES, intercept_only, loss_derivative, loss_value)
from dasketch.linear_model.dual_projection.paper import algorithm_one, paper_rounds
from dasketch.linear_model.dual_projection.passes import (
    PROJECTION_STREAM, curvature_at_constant, dual_variables, projection_pass)
from dasketch.linear_model.dual_projection.preconditioner import ProjectedBasis
from dasketch.linear_model.dual_projection.solvers import (
    FullProblem, newton_cg, pcg_squared, record)

__all__ = ["DualRandomProjectionResult", "dual_random_projection"]

SOLVERS = ("cg", "paper")


@dataclass
class DualRandomProjectionResult:
    """Solution of :func:`dual_random_projection`.

    Attributes
    ----------
    coef : ndarray (n_features,) or (n_targets, n_features)
    intercept : float or ndarray (n_targets,)
    optimality_residual : float or ndarray (n_targets,)
        ``||grad F(w, b)|| / ||grad F(0, b0)||`` of the full problem at the
        returned solution: ``grad F = [lambda w + X^T l'; sum l']`` with
        ``l' = l'(X w + b, y)``, ``b0`` the optimal constant (0 without an
        intercept). Computed in the last pass over X, not estimated.
    objective : float or ndarray (n_targets,)
        ``lambda/2 ||w||^2 + sum_i l(x_i^T w + b, y_i)`` at the solution.
    converged : bool
        Whether every target reached ``optimality_residual <= tol``.
    n_iter : int
        Iterations run (the most over targets): conjugate-gradient iterations
        (squared loss), Newton steps (other losses) or rounds of Algorithm 2.
    n_passes : int
        Passes over X, the projection included.
    history : list of dict
        Per iteration: ``iteration``, ``passes`` (over X so far),
        ``optimality_residual`` and ``objective`` (per target when several),
        and for Newton-CG ``cg_iterations`` and ``step_size``.
    naive_coef, naive_intercept
        The naive solution ``R z / sqrt(m)`` of the first projected problem, the
        baseline the paper shows to be far off.
    best_iteration : int
        ``solver="paper"``: the round returned (the one with the lowest
        objective when the iteration stopped contracting), else ``n_iter``.
    n_components : int
        The projection dimension used, ``min(n_components, n_samples, n_features)``.
    random_state : int
        The seed of ``R``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import dual_random_projection
    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((100, 4)) @ rng.standard_normal((4, 300))
    >>> y = np.where(X @ rng.standard_normal(300) > 0, 1, -1)
    >>> res = dual_random_projection(X, y, loss="logistic", alpha=10.0, n_components=20,
    ...                              tol=1e-10, random_state=0)
    >>> res.converged, res.coef.shape, res.history[-1]["passes"] == res.n_passes
    (True, (300,), True)
    >>> dual = res.dual_coef().compute()     # l'(X w + b, y): one more pass
    >>> bool(np.allclose(res.coef, -X.T @ dual / 10.0, atol=1e-6 * abs(res.coef).max()))
    True
    """

    coef: np.ndarray
    intercept: object
    optimality_residual: object
    objective: object
    converged: bool
    n_iter: int
    n_passes: int
    history: list
    naive_coef: np.ndarray
    naive_intercept: object
    best_iteration: int
    n_components: int
    random_state: int
    _dual: tuple = field(default=None, repr=False)

    def dual_coef(self):
        """Lazy Dask array ``l'(X w + b, y)`` (n_samples or n_samples x n_targets):
        the dual variables of the solution (computing it is one pass over X)."""
        blocks, yd, W, b, loss, smoothing, squeeze = self._dual
        dual = dual_variables(blocks, yd, W, b, loss=loss, smoothing=smoothing)
        return dual[:, 0] if squeeze else dual


def _gaussian_combination(seed, stream, n_rows, Z):
    """``R Z`` for the Gaussian ``R`` (n_rows x m) of ``(seed, stream)``, tile by
    tile so that ``R`` is never held whole."""
    out = np.empty((n_rows, Z.shape[1]))
    for lo in range(0, n_rows, TILE):
        hi = min(lo + TILE, n_rows)
        out[lo:hi] = gaussian_rows(seed, stream, lo, hi, Z.shape[0]) @ Z
    return out


def _check_number(value, name, *, integer=False, minimum=0.0, strict=True):
    kind = numbers.Integral if integer else numbers.Real
    ok = isinstance(value, kind) and not isinstance(value, (bool, np.bool_)) \
        and np.isfinite(value) and (value > minimum if strict else value >= minimum)
    if not ok:
        what = "an integer" if integer else "a finite number"
        raise ValueError(f"{name} must be {what} {'>' if strict else '>='} {minimum}, "
                         f"got {value!r}")
    return int(value) if integer else float(value)


def _check_targets(y, n, loss):
    Y = np.asarray(y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != n:
        raise ValueError(f"y must have {n} rows (one per row of X), got shape {np.shape(y)}")
    if not np.isfinite(Y).all():
        raise ValueError("y contains NaN or Inf; only finite values are accepted")
    if loss != "squared" and not np.isin(Y, (-1.0, 1.0)).all():
        raise ValueError(f"y must hold labels -1 and +1 for loss={loss!r}")
    return Y


def _warn(result, tol, solver, loss, diverged):
    worst = float(np.max(result.optimality_residual))
    if diverged:
        advice = (f"Algorithm 2 stopped contracting at round {result.n_iter}: "
                  f"n_components={result.n_components} is too small for the rank of X; "
                  f"returning round {result.best_iteration} (lowest objective). "
                  "Use solver='cg' or increase n_components")
    elif solver == "paper" and result.n_iter == 1:
        advice = ("this is the one-shot solution (Algorithm 1); use solver='cg' (or more "
                  "rounds, max_iter) for an accurate solution")
    else:
        unit = "rounds" if solver == "paper" else (
            "conjugate-gradient iterations" if loss == "squared" else "Newton steps")
        advice = (f"after {result.n_iter} {unit}; increase max_iter, or n_components "
                  f"(now {result.n_components}) to precondition better")
    warnings.warn(f"dual random projection: relative optimality residual {worst:.3g} > "
                  f"tol={tol:g}; {advice}", ConvergenceWarning, stacklevel=3)


def dual_random_projection(X, y, *, loss="squared", alpha=1.0, smoothing=1.0,
                           n_components=100, solver="cg", tol=1e-6, max_iter=100,
                           fit_intercept=True, block_rows=None, split_every=None,
                           random_state=None, client=None):
    """Solve ``min_{w,b} alpha/2 ||w||^2 + sum_i l(x_i^T w + b, y_i)`` by dual random
    projection (Zhang et al., COLT 2013), for one or several targets at once.

    Parameters
    ----------
    X : numpy array, scipy.sparse matrix, Dask array, zarr array, zarr path or URL
        ``n x d``, rows are samples; read block by block.
    y : array-like (n,) or (n, K)
        Real targets (squared loss) or labels in ``{-1, +1}``; each column is an
        independent problem (one-vs-rest) and all share every pass over X.
    loss : {"squared", "logistic", "smoothed_hinge"}
    alpha : float
        ``lambda > 0``.
    smoothing : float
        ``s > 0`` of the smoothed hinge loss.
    n_components : int
        ``m``, the projection dimension; ``min(n_components, n, d)`` is used.
        Algorithm 1 recovers well, and the default solver converges in a few
        iterations, when m is a modest multiple of the rank of X (the paper's
        Theorems 1 and 2 ask ``m = O(r log r)``).
    solver : {"cg", "paper"}
        ``"cg"``: conjugate gradients (squared loss) or Newton-CG (other losses)
        on the full problem, preconditioned through the projection and started
        from the Algorithm 1 solution. ``"paper"``: Algorithm 2 (``max_iter=1``:
        Algorithm 1, the one-shot solution).
    tol : float
        Stop when the relative optimality residual is at most ``tol``.
    max_iter : int
        At most this many iterations (see ``n_iter`` of the result).
    fit_intercept : bool
        Fit an unpenalised intercept.
    block_rows, split_every, client
        Rows per block, fan-in of the reduction trees and an optional
        ``distributed.Client`` (default: the current Dask scheduler). The result
        does not depend on them beyond rounding.
    random_state : None, int or numpy random generator
        Seed of the Gaussian ``R`` (d x m), regenerated tile by tile from
        ``(seed, stream, feature index)``; never materialised whole.

    Returns
    -------
    DualRandomProjectionResult

    Warns
    -----
    ConvergenceWarning
        When the relative optimality residual misses ``tol`` (including every
        one-shot solution that is not accurate, and Algorithm 2 diverging).

    Notes
    -----
    Passes over X: the projection pass computes ``X_hat`` (kept in worker memory,
    n x m) and ``X^T [X_hat, 1]``; the squared loss then needs one pass per
    conjugate-gradient iteration plus one for the start, the other losses one
    per inner iteration plus one (two when the line search shortens the step)
    per Newton step. Memory on the client: ``X^T [X_hat, 1]`` and the basis of
    the preconditioner, ``d x (m + 1)`` floats each, like a sketch of ``m`` rows.
    For the smoothed hinge with little regularisation on data far from low rank
    the generalised Newton steps are often cut short by the line search and the
    iteration can need many passes (a ``ConvergenceWarning`` says when
    ``max_iter`` is reached).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import dual_random_projection
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 1000))
    >>> y = X @ rng.standard_normal(1000) + rng.standard_normal(200)
    >>> res = dual_random_projection(X, y, alpha=1.0, n_components=50, random_state=0)
    >>> bool(res.converged), res.optimality_residual < 1e-6, res.n_passes <= 5
    (True, True, True)
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    lam = _check_number(alpha, "alpha")
    smoothing = _check_number(smoothing, "smoothing")
    m = _check_number(n_components, "n_components", integer=True)
    max_iter = _check_number(max_iter, "max_iter", integer=True)
    tol = _check_number(tol, "tol", strict=False)
    blocks = as_row_blocks(X, block_rows=block_rows)
    n, d = blocks.shape
    m = min(m, n, d)
    Y = _check_targets(y, n, loss)
    K = Y.shape[1]
    seed = resolve_seed(random_state)
    fit_intercept = bool(fit_intercept)
    b0 = intercept_only(Y, loss, smoothing) if fit_intercept else np.zeros(K)

    xhat, yd, products, gram, finite = projection_pass(
        blocks, Y, m, seed, b0=b0, loss=loss, smoothing=smoothing, split_every=split_every,
        client=client)
    if not finite:
        raise ValueError("X contains NaN or infinity (or values so large that their "
                         "projection overflows); only finite values are accepted")
    full = FullProblem(blocks, xhat, yd, lam=lam, loss=loss, smoothing=smoothing,
                       fit_intercept=fit_intercept, split_every=split_every, client=client)
    full.passes = 1
    column_sums, xt_dual0 = products[:, m], products[:, m + 1:]
    V0 = full.stack(np.zeros((d, K)), b0)
    g_v0 = full.stack(xt_dual0, loss_derivative(b0, Y, loss, smoothing).sum(axis=0))
    reference = np.sqrt(np.einsum("ij,ij->j", g_v0, g_v0))
    reference = np.where(reference > 0, reference, 1.0)
    f_v0 = loss_value(b0, Y, loss, smoothing).sum(axis=0)
    history = []
    diverged, best = False, None
    if solver == "paper":
        V, cert, f = np.empty((V0.shape[0], K)), np.empty(K), np.empty(K)
        Z, B, n_iter = np.empty((m, K)), np.empty(K), 0
        for k in range(K):
            V[:, k], cert[k], f[k], rounds, best, div, (Z[:, k], B[k]) = paper_rounds(
                full, xhat, k, b0[k], reference[k], tol, max_iter, history, record)
            n_iter, diverged = max(n_iter, rounds), diverged or div
    else:
        target_products = column_sums[:, None] * b0 - xt_dual0 if loss == "squared" \
            else None    # X^T y = b0 X^T 1 - X^T (b0 - y)
        Z, B, W1 = algorithm_one(full, xhat, b0, products[:, :m], column_sums,
                                 target_products)
        V = full.stack(W1, B)
        if loss == "squared":
            g_zero = full.stack(-target_products, -Y.sum(axis=0))
            V, cert, f, n_iter = pcg_squared(
                full, V, V0, g_v0, g_zero, 0.5 * np.sum(Y ** 2, axis=0),
                ProjectedBasis(products[:, :m + 1], gram[:, :m + 1], fit_intercept),
                gram[:, :m + 1], reference, tol, max_iter, history)
        else:
            V, cert, f, n_iter = _newton_from_algorithm_one(
                full, V, V0, g_v0, f_v0, products, gram, b0, reference, tol, max_iter,
                history)
    W, b = full.split(V)
    squeeze = np.ndim(y) == 1
    naive = _gaussian_combination(seed, PROJECTION_STREAM, d, Z) / np.sqrt(m)
    pick = (lambda a: a[0]) if squeeze else (lambda a: a)
    result = DualRandomProjectionResult(
        coef=W[:, 0] if squeeze else W.T, intercept=float(b[0]) if squeeze else b,
        optimality_residual=float(cert[0]) if squeeze else cert,
        objective=float(f[0]) if squeeze else f,
        converged=bool(np.all(cert <= tol)), n_iter=int(n_iter), n_passes=full.passes,
        history=history, naive_coef=naive[:, 0] if squeeze else naive.T,
        naive_intercept=pick(B), best_iteration=int(best if best else n_iter),
        n_components=m, random_state=seed,
        _dual=(blocks, yd, W, b, loss, smoothing, squeeze))
    if not result.converged:
        _warn(result, tol, solver, loss, diverged)
    return result


def _newton_from_algorithm_one(full, V, V0, g_v0, f_v0, products, gram, b0, reference,
                               tol, max_iter, history):
    """Newton-CG from the Algorithm 1 solution, or from the intercept-only model for
    targets where that has the lower objective (the recovery can be far off when
    X is not low rank or, for the smoothed hinge, when lambda is small)."""
    m = gram.shape[0] - 1
    K = V.shape[1]
    f, G, curvature = full.evaluate(V, np.arange(K))
    worse = np.flatnonzero(f > f_v0)
    if worse.size:
        V[:, worse], f[worse], G[:, worse] = V0[:, worse], f_v0[worse], g_v0[:, worse]
        curvature[worse] = curvature_at_constant(full.xhat, full.yd[:, worse], b0[worse],
                                                 **full.options)
    basis = ProjectedBasis(products[:, :m + 1], gram[:, :m + 1], full.fit_intercept)
    return newton_cg(full, V, f, G, curvature, basis, reference, tol, max_iter, history)


