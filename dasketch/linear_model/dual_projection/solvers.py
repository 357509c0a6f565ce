"""Solvers of the full problem preconditioned by the random projection.

``min_{w, b} lambda/2 ||w||^2 + sum_i l(x_i^T w + b, y_i)`` for every column of
the targets at once (one-vs-rest shares every pass). Points are stacked as
columns ``v = [w; b]`` (``[w]`` without an intercept).

* Squared loss: preconditioned conjugate gradients on the normal equations
  ``(X_a^T X_a + diag(lambda, 0)) v = X_a^T y``, ``X_a = [X 1]``, started from the
  Algorithm 1 solution of Zhang et al. (COLT 2013). One pass over X per
  iteration, which also returns the true gradient at the current iterate, so the
  reported residual is never a drifting recurrence.
* Logistic and smoothed hinge: an inexact (truncated) Newton method, Nocedal and
  Wright, *Numerical Optimization*, Algorithm 7.1 (line-search Newton-CG), with
  the forcing sequence ``min(0.5, sqrt(residual))`` and Armijo backtracking; each
  Hessian-vector product is one pass, each trial point one pass.

Both use the preconditioner of :mod:`.preconditioner`, exact when the rank of
X is at most the projection dimension.
"""

from __future__ import annotations

import numpy as np

from dasketch.linear_model.dual_projection.passes import evaluate_pass, hessian_pass
from dasketch.linear_model.dual_projection.preconditioner import Preconditioner

# Inner conjugate-gradient iterations per Newton step at most.
MAX_INNER_ITER = 50
ARMIJO = 1e-4
# Step lengths tried by the line search, all evaluated in the pass at the full step.
STEPS = 2.0 ** -np.arange(0, 31)


class FullProblem:
    """Passes over X at stacked points ``V`` ((d [+1]) x K), counted in ``passes``."""

    def __init__(self, blocks, xhat, yd, *, lam, loss, smoothing, fit_intercept,
                 split_every, client):
        self.blocks, self.xhat, self.yd = blocks, xhat, yd
        self.lam, self.loss, self.smoothing = lam, loss, smoothing
        self.fit_intercept = fit_intercept
        self.options = dict(loss=loss, smoothing=smoothing, split_every=split_every,
                            client=client)
        self.passes = 0

    def split(self, V):
        if self.fit_intercept:
            return V[:-1], V[-1]
        return V, np.zeros(V.shape[1])

    def stack(self, gradient_w, gradient_b):
        return np.vstack([gradient_w, gradient_b]) if self.fit_intercept else gradient_w

    def evaluate(self, V, columns, curvature_gram=True, keep_margins=False, direction=None):
        """Objective, gradient and projected curvature at ``V`` for target
        ``columns`` (and the persisted margins ``X W`` with ``keep_margins``).

        With a ``direction`` ``D`` they are taken at ``V + D``, and the objective at
        ``V + eta D`` for every ``eta`` of ``STEPS`` comes back last (``len(STEPS) x
        K``), from the same pass."""
        W, b = self.split(V)
        extra = {}
        if direction is not None:
            Dw, db = self.split(direction)
            extra = {"direction": (Dw, db), "steps": STEPS}
        self.passes += 1
        value, xt_dual, dual_sum, curv, *more = evaluate_pass(
            self.blocks, self.xhat, self.yd[:, columns], W, b,
            curvature_gram=curvature_gram, keep_margins=keep_margins, **extra, **self.options)
        if direction is not None:
            path = more[0] + 0.5 * self.lam * np.array(
                [_dot(W + eta * Dw, W + eta * Dw) for eta in STEPS])
            W = W + Dw
            more = [path]
        f = value + 0.5 * self.lam * _dot(W, W)
        return (f, self.stack(xt_dual + self.lam * W, dual_sum), curv, *more)

    def hessian(self, center, P, columns, intercept_curvature=0.0):
        """``H P`` at ``center`` (ignored for squared loss) for target ``columns``."""
        W, b = self.split(center) if center is not None else (None, None)
        Pw, pb = self.split(P)
        self.passes += 1
        xt, sums = hessian_pass(self.blocks, self.yd[:, columns], W, b, Pw, pb,
                                **self.options)
        return self.stack(xt + self.lam * Pw, sums + intercept_curvature * pb)


def _column_norms(A):
    return np.sqrt(np.einsum("ij,ij->j", A, A))


def _dot(A, B):
    return np.einsum("ij,ij->j", A, B)


def pcg_squared(problem, V, intercept_only, gradient_intercept_only, gradient_at_zero,
                objective_at_zero, basis, gram, reference, tol, max_iter, history):
    """Preconditioned CG for the squared loss from ``V`` (the Algorithm 1 solution).

    ``intercept_only`` is ``V0 = [0; b0]`` (zero without an intercept) and
    ``gradient_intercept_only`` its gradient ``[X^T (b0 - y); 0]``; the
    gradient is affine, ``g(V) = g(0) + H V``, with ``g(0) = -X_a^T y`` and
    ``f(V) = f(0) + (g(V) + g(0))^T V / 2``. The first pass gives ``H V``; the
    start is then moved to the minimiser on the line through ``V0`` and ``V``
    (no pass), so a poor Algorithm 1 solution never makes the start worse than
    the intercept-only model. Each later pass computes ``H [P, V]``: ``H P`` for
    the step and the true gradient of the current iterate, from which the
    residual of the next one is a single update (residual replacement).
    """
    K = V.shape[1]
    prec = Preconditioner(basis, gram, problem.lam)
    g_start = gradient_at_zero + problem.hessian(None, V, np.arange(K))  # g(V)
    g_base = gradient_intercept_only
    D = V - intercept_only
    HD = g_start - g_base
    curvature = _dot(D, HD)
    gamma = -_dot(g_base, D) / np.where(curvature > 0, curvature, np.inf)
    V = intercept_only + gamma * D
    G = g_base + gamma * HD

    def objective(columns):
        return objective_at_zero[columns] + 0.5 * _dot(
            G[:, columns] + gradient_at_zero[:, columns], V[:, columns])

    f = objective(slice(None))
    cert = _column_norms(G) / reference
    history.append(record(0, problem.passes, cert, f))
    R = -G
    P = np.column_stack([prec.apply(R[:, k]) for k in range(K)])
    rz = _dot(R, P)
    active = cert > tol
    n_iter = 0
    while active.any() and n_iter < max_iter:
        n_iter += 1
        act = np.flatnonzero(active)
        both = problem.hessian(None, np.hstack([P[:, act], V[:, act]]), act)
        HP, true_G = both[:, :act.size], both[:, act.size:] + gradient_at_zero[:, act]
        pHp = _dot(P[:, act], HP)
        step = rz[act] / np.where(pHp > 0, pHp, np.inf)
        V[:, act] += step * P[:, act]
        G[:, act] = true_G + step * HP
        R[:, act] = -G[:, act]
        f[act] = objective(act)
        cert[act] = _column_norms(G[:, act]) / reference[act]
        history.append(record(n_iter, problem.passes, cert, f))
        for i, k in enumerate(act):
            if cert[k] <= tol or not pHp[i] > 0:
                active[k] = False
                continue
            z = prec.apply(R[:, k])
            rz_new = R[:, k] @ z
            P[:, k] = z + (rz_new / rz[k]) * P[:, k]
            rz[k] = rz_new
    return V, cert, f, n_iter


def record(iteration, passes, cert, objective, **extra):
    squeeze = (lambda a: float(a[0])) if np.size(cert) == 1 else (lambda a: a.tolist())
    return {"iteration": iteration, "passes": passes,
            "optimality_residual": squeeze(np.asarray(cert)),
            "objective": squeeze(np.asarray(objective)), **extra}


def _inner_cg(problem, center, G, precs, kappas, forcing, columns):
    """Truncated PCG on ``H_k s_k = -g_k`` for the target ``columns``; stops a column
    when its residual is below ``forcing_k ||g_k||``, or on non-positive curvature
    (returning the last step, or the preconditioned gradient step if none).
    Returns the steps and the number of passes."""
    R = -G[:, columns]
    S = np.zeros_like(R)
    Z = np.column_stack([precs[k].apply(R[:, i]) for i, k in enumerate(columns)])
    P = Z.copy()
    rz = _dot(R, Z)
    target = forcing * _column_norms(R)
    running = np.ones(len(columns), dtype=bool)
    passes = 0
    while running.any() and passes < MAX_INNER_ITER:
        run = np.flatnonzero(running)
        HP = problem.hessian(center[:, columns[run]], P[:, run], columns[run],
                             intercept_curvature=kappas[columns[run]])
        passes += 1
        pHp = _dot(P[:, run], HP)
        for i, j in enumerate(run):
            if not pHp[i] > 0:
                if not S[:, j].any():
                    S[:, j] = Z[:, j]
                running[j] = False
                continue
            step = rz[j] / pHp[i]
            S[:, j] += step * P[:, j]
            R[:, j] -= step * HP[:, i]
            if np.linalg.norm(R[:, j]) <= target[j]:
                running[j] = False
                continue
            z = precs[columns[j]].apply(R[:, j])
            rz_new = R[:, j] @ z
            P[:, j] = z + (rz_new / rz[j]) * P[:, j]
            rz[j] = rz_new
    return S, passes


def newton_cg(problem, V, f, G, curvature, basis, reference, tol, max_iter, history):
    """Inexact Newton (Newton-CG with Armijo backtracking) from ``V`` with objective
    ``f``, gradient ``G`` and projected curvature ``curvature`` (K x (m+1) x (m+1))
    there, for every target column until its relative optimality residual
    ``||G_k|| / reference_k`` is at most ``tol``.

    The intercept is unpenalised: where no sample has curvature (the smoothed
    hinge far from the optimum) its Newton system would be singular, so its
    curvature is raised to ``lambda * residual`` when below it (a
    Levenberg-Marquardt term that vanishes at the optimum and keeps the fast
    local convergence).
    """
    K = V.shape[1]
    cert = _column_norms(G) / reference
    history.append(record(0, problem.passes, cert, f, cg_iterations=0, step_size=0.0))
    n_iter = 0
    m1 = curvature.shape[1]
    while (cert > tol).any() and n_iter < max_iter:
        n_iter += 1
        act = np.flatnonzero(cert > tol)
        kappas = np.zeros(K)
        if problem.fit_intercept:
            kappas[act] = np.maximum(
                0.0, problem.lam * np.minimum(1.0, cert[act]) - curvature[act, m1 - 1, m1 - 1])
        precs = {k: Preconditioner(basis, curvature[k], problem.lam, kappas[k]) for k in act}
        forcing = np.minimum(0.5, np.sqrt(cert[act]))
        S, inner = _inner_cg(problem, V, G, precs, kappas, forcing, act)
        decrease = _dot(G[:, act], S)
        # The full step and the objective along it in one pass; a shorter step (the
        # longest of STEPS with Armijo's decrease) costs one more pass, not one per halving.
        f_new, G_new, curv_new, path = problem.evaluate(V[:, act], act, direction=S)
        armijo = path <= f[act] + ARMIJO * STEPS[:, None] * decrease
        flat = np.abs(STEPS[:, None] * decrease) <= 1e-15 * np.maximum(np.abs(f[act]), 1.0)
        good = armijo | flat
        eta = np.where(good.any(axis=0), STEPS[np.argmax(good, axis=0)], STEPS[-1])
        full = eta == 1.0
        V[:, act[full]] += S[:, full]
        f[act[full]], G[:, act[full]], curvature[act[full]] = \
            f_new[full], G_new[:, full], curv_new[full]
        if not full.all():
            cols = act[~full]
            V[:, cols] += eta[~full] * S[:, ~full]
            f[cols], G[:, cols], curvature[cols] = problem.evaluate(V[:, cols], cols)
        cert[act] = _column_norms(G[:, act]) / reference[act]
        history.append(record(n_iter, problem.passes, cert, f, cg_iterations=inner,
                               step_size=float(eta.min())))
    return V, cert, f, n_iter
