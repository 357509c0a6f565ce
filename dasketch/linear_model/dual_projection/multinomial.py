r"""Multinomial (softmax) logistic regression by projection-preconditioned Newton-CG.

.. math:: \min_{W, b} \frac{\lambda}{2} \|W\|_F^2
          + \sum_i s_i \Big(\log \sum_k e^{x_i^T w_k + b_k} - x_i^T w_{y_i} - b_{y_i}\Big)

with one coefficient vector ``w_k`` and intercept ``b_k`` per class, the model
of scikit-learn's ``LogisticRegression`` for more than two classes
(``lambda = 1 / C``). The minimiser in ``W`` is unique for ``lambda > 0`` (and
its columns sum to 0); the loss does not change when one constant is added to
every ``b_k``, and the intercepts are taken to sum to 0, as scikit-learn's.
A class of no weight has no finite optimum; its limit is returned (coefficients
0, intercept ``-inf``; :func:`_without_absent_classes`).

Zhang et al.'s recovery ``W = -X^T S (P - Y) / lambda`` (COLT 2013) holds for
this smooth convex loss as for the binary ones, and the method is that of
:mod:`.newton`: inexact Newton (Nocedal and Wright, Algorithm 7.1) with
Armijo backtracking, its inner conjugate gradients preconditioned through the
projection ``X_hat = X R / sqrt(m)`` (:mod:`.preconditioner`). The Hessian is
block-structured over classes (:mod:`.softmax_passes`); the preconditioner
(:mod:`.softmax_preconditioner`) replaces X by its projection onto the range
of ``[X_hat 1]`` in every block, which is exact when the rank of X is at most m,
and is applied by Woodbury through the d x k basis shared by all classes.
The Newton iteration starts from the best constant model.

Certificate: the relative optimality residual ``||grad F|| / ||grad F(0, b0)||``
and ``||W - W*||_F <= coef_error_bound`` (:func:`.softmax_certificate.bound_parts`). The fit
stops when ``coef_error_bound <= tol ||W||_F`` and warns with a
``ConvergenceWarning`` exactly when that is not reached; with ``lambda = 0``
(no strong convexity) as :mod:`.unpenalised`: the relative residual must reach
``tol``, the bound is infinite, and linearly separable data are said to be.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.special import logsumexp, softmax

from dasketch._blocks import (
    cache_blocks,
    device_transfers,
    fit_blas_threads,
    fit_size,
    run_eagerly,
)
from dasketch.kernels.embeddings import resolve_seed
from dasketch.linear_model.dual_projection.checks import (
    DEFAULT_TOL,
    _check_alpha,
    _warn,
    check_weights,
    fit_blocks,
)
from dasketch.linear_model.dual_projection.columns import select_used_columns, widened
from dasketch.linear_model.dual_projection.newton import ARMIJO, LAST_STEP, MAX_INNER_ITER
from dasketch.linear_model.dual_projection.passes import projection_pass
from dasketch.linear_model.dual_projection.preconditioner import ProjectedBasis
from dasketch.linear_model.dual_projection.result import DualRandomProjectionResult
from dasketch.linear_model.dual_projection.softmax_certificate import (
    bound_parts,
)
from dasketch.linear_model.dual_projection.softmax_passes import (
    evaluate_softmax,
    softmax_hessian,
)
from dasketch.linear_model.dual_projection.softmax_preconditioner import (
    SoftmaxPreconditioner,
)
from dasketch.linear_model.dual_projection.solvers import STALL, STEPS, record
from dasketch.linear_model.dual_projection.unpenalised import separable, warn_separable
from dasketch.utils._sklearn_compat import InvalidParameterError

__all__ = ["check_multi_class", "multinomial_logistic_regression"]

def check_multi_class(multi_class, loss, solver, penalty="l2"):
    """Whether more than two classes are fitted by the multinomial model:
    ``"auto"`` where it is allowed (logistic loss, ``solver="cg"``, the l2
    penalty); ``"multinomial"`` elsewhere is refused."""
    allowed = loss == "logistic" and solver == "cg" and penalty == "l2"
    if multi_class == "multinomial" and not allowed:
        raise InvalidParameterError(
            f"The 'multi_class' parameter of DualRandomProjectionClassifier is "
            f"'multinomial', which needs loss='logistic', solver='cg' and penalty='l2' "
            f"(got loss={loss!r}, solver={solver!r}, penalty={penalty!r}); use "
            f"multi_class='ovr' or 'auto'")
    return allowed and multi_class != "ovr"


class _Softmax:
    """The problem's passes over X at stacked points ``V = [W; b]`` ((d [+1]) x K),
    counted in ``passes``."""

    def __init__(self, blocks, xhat, yd, sd, lam, fit_intercept, spread, options):
        self.blocks, self.xhat, self.yd, self.sd = blocks, xhat, yd, sd
        self.lam, self.fit_intercept, self.spread = lam, fit_intercept, spread
        self.options = options
        self.passes = 1

    def split(self, V):
        return (V[:-1], V[-1]) if self.fit_intercept else (V, np.zeros(V.shape[1]))

    def stack(self, gw, gb):
        return np.vstack([gw, gb]) if self.fit_intercept else gw

    def evaluate(self, V, direction=None):
        """``(f, G, curvature)`` at ``V`` (at ``V + direction`` with the objective
        along it for every step of ``STEPS`` last)."""
        W, b = self.split(V)
        extra = {}
        if direction is not None:
            extra = {"direction": self.split(direction), "steps": STEPS}
        self.passes += 1
        value, gw, gb, curvature, path = evaluate_softmax(
            self.blocks, self.xhat, self.yd, self.sd, W, b, **extra, **self.options)
        if direction is not None:
            Dw = self.split(direction)[0]
            path = path + 0.5 * self.lam * np.array(
                [np.sum((W + eta * Dw) ** 2) for eta in STEPS])
            W = W + Dw
        f = value + 0.5 * self.lam * np.sum(W * W)
        return f, self.stack(gw + self.lam * W, gb), curvature, path

    def hessian(self, V, D):
        W, b = self.split(V)
        Dw, db = self.split(D)
        self.passes += 1
        xt, sums = softmax_hessian(self.blocks, self.yd, self.sd, W, b, Dw, db,
                                   **self.options)
        return self.stack(xt + self.lam * Dw, sums)


def _centred(V):
    """``V`` with each row's mean over the classes taken out: the direction
    changes no loss, and the minimiser has none of it."""
    return V - V.mean(axis=1, keepdims=True)


def _inner_cg(problem, V, G, prec, forcing):
    """Preconditioned conjugate gradients on ``H S = -G`` until the residual is
    below ``forcing ||G||``, in the points whose rows sum to 0 over the classes
    (where H is positive definite for ``lambda = 0`` too; the gradient lies
    there); the step and the passes taken."""
    R = _centred(-G)
    S = np.zeros_like(R)
    Z = _centred(prec.apply(R))
    P = Z.copy()
    rz = float(np.sum(R * Z))
    target = forcing * np.linalg.norm(R)
    passes = 0
    while passes < MAX_INNER_ITER:
        HP = problem.hessian(V, P)
        passes += 1
        pHp = float(np.sum(P * HP))
        if not pHp > 0:
            return (S if S.any() else Z), passes
        step = rz / pHp
        S += step * P
        R -= step * HP
        if np.linalg.norm(R) <= target:
            break
        Z = _centred(prec.apply(R))
        rz_new = float(np.sum(R * Z))
        P = Z + (rz_new / rz) * P
        rz = rz_new
    return S, passes


def _newton(problem, V, f, G, curvature, basis, coupling, reference, tol, max_iter,
            history):
    """Newton-CG from ``V`` until ``coef_error_bound <= tol ||W||_F`` (or, for
    ``lambda = 0``, the relative residual below ``tol``), ``max_iter`` steps,
    or rounding: the gradient's part of the bound below its rounding part
    while no longer halving, or the bound not halved in ``STALL`` steps. The
    iterate of smallest bound is returned with its gradient, objective,
    bound and the steps taken."""
    K = G.shape[1]
    best, level, stall, smallest, n_iter = None, np.inf, 0, np.inf, 0
    while True:
        cert = float(np.linalg.norm(G)) / reference
        gradient, rounding = bound_parts(problem, V, G, curvature, coupling, reference, f)
        bound = gradient + rounding
        w_norm = float(np.linalg.norm(problem.split(V)[0]))
        finished = bound <= tol * w_norm
        # without a penalty the "bound" is ||W|| times the relative residual:
        # iterates are ranked by the residual
        score = bound / max(w_norm, np.finfo(float).tiny) if problem.lam == 0 else bound
        if best is None or score <= best[5]:
            best = (V.copy(), G.copy(), f, cert, bound, score)
        halved = score <= 0.5 * level
        stall, level = (0, score) if halved else (stall + 1, level)
        floor = gradient <= rounding and not gradient <= 0.5 * smallest
        smallest = min(smallest, gradient)
        if finished or floor or stall >= STALL or n_iter >= max_iter:
            break
        n_iter += 1
        prec = SoftmaxPreconditioner(basis, curvature, problem.lam, problem.spread, K)
        # Eisenstat-Walker's sqrt rule, never asking for more than a part of what
        # certification still needs (as newton_cg)
        needed = max(0.0, tol * w_norm - rounding) / gradient if gradient > 0 else 0.0
        forcing = min(0.5, max(np.sqrt(cert), LAST_STEP * needed))
        S, inner = _inner_cg(problem, V, G, prec, forcing)
        decrease = float(np.sum(G * S))
        f_new, G_new, curv_new, path = problem.evaluate(V, direction=S)
        good = (path <= f + ARMIJO * STEPS * decrease) | (
            np.abs(STEPS * decrease) <= 1e-15 * max(abs(f), 1.0))
        eta = STEPS[np.argmax(good)] if good.any() else STEPS[-1]
        if eta == 1.0:
            V, f, G, curvature = V + S, f_new, G_new, curv_new
        else:
            V = V + eta * S
            f, G, curvature, _ = problem.evaluate(V)
        history.append(record(n_iter, problem.passes, [np.linalg.norm(G) / reference],
                              [f], cg_iterations=inner, step_size=float(eta),
                              n_components=problem.xhat.shape[1]))
    V, G, f, cert, bound, _ = best
    return V, G, f, cert, bound, n_iter


@fit_blas_threads
def multinomial_logistic_regression(X, y, *, alpha=1.0, sketch_size=100, tol=DEFAULT_TOL,
                                    max_iter=100, fit_intercept=True, block_rows=None,
                                    split_every=None, random_state=None, client=None,
                                    sample_weight=None, cache="auto"):
    """Fit multinomial logistic regression by projection-preconditioned Newton-CG.

    Parameters
    ----------
    X : numpy array, scipy.sparse matrix, Dask array, zarr array, zarr path or URL
        ``n x d``, read block by block.
    y : array-like of int (n,)
        Class codes ``0, ..., K-1`` (``K >= 2``), every one present.
    alpha, sketch_size, tol, max_iter, fit_intercept, block_rows, split_every, \
random_state, client, sample_weight, cache
        As for :func:`~dasketch.linear_model.dual_random_projection`; ``alpha``
        is one number ``>= 0`` (0: no penalty); the projection is not grown.

    Returns
    -------
    DualRandomProjectionResult
        ``coef`` (K x d), ``intercept`` (K, summing to 0), and one number each
        for ``optimality_residual``, ``coef_error_bound`` (a bound on
        ``||coef - W*||_F``) and ``objective``. ``naive_coef`` and
        ``naive_intercept`` are not computed (NaN): the iteration starts from
        the best constant model, not from Algorithm 1; ``dual_coef`` is not
        available.

    Warns
    -----
    ConvergenceWarning
        Exactly when ``coef_error_bound > tol ||coef||_F`` (``lambda > 0``) or the
        relative optimality residual stays above ``tol`` (``lambda = 0``), and
        when, without a penalty, the data are linearly separable.
    """
    X, used = select_used_columns(X)
    source = fit_blocks(X, block_rows, client)
    n, d = source.shape
    m = min(int(sketch_size), n, d)
    fit_size(d, m)
    codes = np.asarray(y)
    K = int(codes.max()) + 1
    Y = (codes[:, None] == np.arange(K)).astype(np.float64)
    lam = float(_check_alpha(alpha, 1)[0])
    weights = check_weights(sample_weight, n)
    total, counts = weights.sum(), weights @ Y
    if not counts.all():
        return widened(_without_absent_classes(
            counts > 0, X, codes, alpha=alpha, sketch_size=sketch_size, tol=tol,
            max_iter=max_iter, fit_intercept=fit_intercept, block_rows=block_rows,
            split_every=split_every, random_state=random_state, client=client,
            sample_weight=weights, cache=cache), used)
    seed = resolve_seed(random_state)
    blocks, cache_choice = cache_blocks(source, cache, client=client)
    blocks = run_eagerly(blocks, client, threaded=True)
    xhat, yd, sd, products, gram, finite, row_norms = projection_pass(
        blocks, Y, weights, m, seed, b0=np.zeros(K), loss="squared", smoothing=1.0,
        split_every=split_every, client=client)
    if not finite:
        raise ValueError("X contains NaN or infinity (or values so large that their "
                         "projection overflows); only finite values are accepted")
    column_sums, xty = products[:, m], -products[:, m + 1:]     # X^T s, X^T S Y
    if fit_intercept:      # the best constant model: the weighted class frequencies
        b0 = np.log(np.maximum(counts / total, np.finfo(float).tiny))
        b0 -= b0.mean()
    else:
        b0 = np.zeros(K)
    p0 = softmax(b0)
    options = dict(split_every=split_every, client=client)
    problem = _Softmax(blocks, xhat, yd, sd, lam, bool(fit_intercept), total / K, options)
    V = problem.stack(np.zeros((d, K)), b0)
    G = problem.stack(np.outer(column_sums, p0) - xty, total * p0 - counts)
    f = total * float(logsumexp(b0)) - float(counts @ b0)
    reference = float(np.linalg.norm(G)) or 1.0
    # the projected Hessian at constant margins: (diag(p0) - p0 p0^T) (x) [X_hat 1]^T S [X_hat 1]
    curvature = np.kron(np.diag(p0) - np.outer(p0, p0), gram[:, :m + 1])
    basis = ProjectedBasis(products[:, :m + 1], gram[:, :m + 1], bool(fit_intercept),
                           device_transfers(xhat))
    history = [record(0, problem.passes, [np.linalg.norm(G) / reference], [f], cg_iterations=0,
                      step_size=0.0, n_components=m)]
    coupling = (total, row_norms[0], row_norms[1], (n, d))
    V, G, f, cert, bound, n_iter = _newton(problem, V, f, G, curvature, basis, coupling,
                                           reference, float(tol), int(max_iter), history)
    W, b = problem.split(V)
    converged = bound <= tol * np.linalg.norm(W)
    apart = False
    if lam == 0:         # no strong convexity: nothing bounds ||W - W*||
        apart = bool(separable(np.atleast_1d(f), weights)[0])
        bound, converged = np.inf, converged and not apart
    result = DualRandomProjectionResult(
        coef=W.T.copy(), intercept=b.copy(), optimality_residual=float(cert),
        coef_error_bound=float(bound), objective=float(f), converged=bool(converged),
        n_iter=int(n_iter), n_passes=problem.passes, history=history,
        naive_coef=np.full((K, d), np.nan), naive_intercept=np.full(K, np.nan),
        best_iteration=int(n_iter), n_components=m, random_state=seed, cache=cache_choice)
    if apart:
        warn_separable(None, n_iter, np.atleast_1d(cert))
    elif not converged:
        _warn(result, tol, "cg", "logistic", False, np.array([lam]))
    return widened(result, used)


def _without_absent_classes(present, X, codes, **options):
    """The fit when some classes have no weight (``class_weight`` or
    ``sample_weight`` 0 for all their samples): the objective then has no
    finite minimiser, its infimum being approached as their intercepts go to
    ``-inf`` with their coefficients 0 (their probability 0), the other
    classes fitted alone; that limit is returned."""
    kept = np.flatnonzero(present)
    if kept.size < 2:
        raise ValueError(f"sample_weight (with class_weight) leaves {kept.size} class with "
                         "weight > 0; a classifier needs two")
    inner = np.where(present[codes], np.cumsum(present)[codes] - 1, 0)
    result = multinomial_logistic_regression(X, inner, **options)
    K, d = present.size, result.coef.shape[1]
    coef, naive = np.zeros((K, d)), np.full((K, d), np.nan)
    intercept = np.full(K, -np.inf)
    coef[kept], intercept[kept] = result.coef, result.intercept
    return dataclasses.replace(result, coef=coef, intercept=intercept, naive_coef=naive,
                               naive_intercept=np.full(K, np.nan))
