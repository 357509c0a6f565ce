"""Solvers of the full problem preconditioned by the random projection.

``min_{w, b} lambda/2 ||w||^2 + sum_i s_i l(x_i^T w + b, y_i)`` (``s`` the sample
weights) for every column of the targets at once (one-vs-rest shares every
pass; ``lambda`` may differ per target). Points are stacked as columns
``v = [w; b]`` (``[w]`` without an intercept).

* Squared loss: preconditioned conjugate gradients on the normal equations
  ``(X_a^T S X_a + diag(lambda, 0)) v = X_a^T S y``, ``X_a = [X 1]``, started from the
  Algorithm 1 solution of Zhang et al. (COLT 2013). One pass over X per
  iteration, which also returns the true gradient at the current iterate, so the
  reported residual is never a drifting recurrence.
* Logistic and smoothed hinge: an inexact (truncated) Newton method
  (:mod:`.newton`).

Both use the preconditioner of :mod:`.preconditioner`, exact when the rank of
X is at most the projection dimension, grow the projection once when their
conjugate gradients contract slowly (:mod:`.growth`), and both stop on the
a-posteriori bound of :meth:`FullProblem.error_bound`: a target is done when
``||w - w*|| <= tol ||w||`` is certified.
"""

from __future__ import annotations

import numpy as np

from dasketch.kernels.shrink import gamma
from dasketch.linear_model.dual_projection.growth import contracting_slowly
from dasketch.linear_model.dual_projection.passes import evaluate_pass, hessian_pass
from dasketch.linear_model.dual_projection.preconditioner import Preconditioner
from dasketch.linear_model.dual_projection.rounding import (
    derivative_rounding,
    dual_norm,
    evaluated_rounding,
    margin_rounding,
    norm_rounding,
    product_rounding,
)

# A target stops when the gradient's part of its error bound is below its
# rounding part (no iteration can then improve the certificate much), or when
# the bound has not halved in STALL iterations; the iterate of smallest error
# bound is returned.
STALL = 10
# Lipschitz constant of l' (squared, logistic; smoothed hinge: 1 / smoothing).
LIPSCHITZ = {"squared": 1.0, "logistic": 0.25}
# Step lengths tried by the line search, all evaluated in the pass at the full step.
STEPS = 2.0 ** -np.arange(0, 31)


class FullProblem:
    """Passes over X at stacked points ``V`` ((d [+1]) x K), counted in ``passes``.

    ``sd`` are the sample weights (n x 1, aligned with the blocks like the
    targets ``yd``), ``lam`` the regularisation per target (K). ``coupling``
    is ``(X^T s, sum_i s_i, sum_i s_i ||x_i||^2, max_{s_i > 0} ||x_i||)``, what
    :meth:`error_bound` needs of X (all from the projection pass).
    ``n_components`` is the number of columns of ``xhat``.
    """

    def __init__(self, blocks, xhat, yd, sd, *, lam, loss, smoothing, fit_intercept,
                 split_every, client, coupling=None):
        self.blocks, self.xhat, self.yd, self.sd = blocks, xhat, yd, sd
        self.lam = np.broadcast_to(np.asarray(lam, dtype=np.float64), (yd.shape[1],))
        self.loss, self.smoothing = loss, smoothing
        self.fit_intercept = fit_intercept
        self.coupling = coupling
        self.options = dict(loss=loss, smoothing=smoothing, split_every=split_every,
                            client=client)
        self.passes = 0
        self.n_components = xhat.shape[1]
        self.reference = None     # set by the solver; needed where lambda = 0

    def error_bound(self, V, G, f, columns=slice(None)):
        """See :meth:`bound_parts`: their sum."""
        return sum(self.bound_parts(V, G, f, columns))

    def bound_parts(self, V, G, f, columns=slice(None)):
        """A bound on ``||w - w*||`` per target from the gradient ``G`` and
        objective ``f`` at ``V``.

        ``F(w, b) - lambda/2 ||w||^2`` is convex, so ``F`` is ``lambda``-strongly
        convex in ``w``, and so is the profiled objective
        ``phi(w) = min_b F(w, b)`` (a partial minimum of a convex function is
        convex), whose minimiser is ``w*``. Strong convexity gives
        ``||w - w*|| <= ||grad phi(w)|| / lambda``, with
        ``grad phi(w) = grad_w F(w, b*(w))``, ``b*(w)`` the best intercept for
        ``w``. The returned ``b`` has ``g_b = dF/db = sum_i s_i l'(t_i)`` instead
        of 0, so ``grad phi(w) = g_w + X^T u`` with
        ``u_i = s_i (l'(t_i + delta) - l'(t_i))``, ``delta = b*(w) - b``:

        * squared loss: ``u = -s g_b / sum(s)`` exactly, so
          ``grad phi(w) = g_w - X^T s g_b / sum(s)``, computed;
        * other losses: ``l'`` is non-decreasing, so all ``u_i`` have the sign
          of ``delta`` and ``sum_i |u_i| = |g_b|`` (``dF/db`` vanishes at
          ``b*(w)``); hence ``||X^T u|| <= |g_b| max_{s_i > 0} ||x_i||``.

        Without an intercept ``grad phi = g_w``. The gradient is computed in
        floating point; its rounding error is bounded by Higham's worst case
        (:mod:`.rounding`: the margins ``X w + b``, the evaluation of ``l'``, the
        sums over rows and ``lambda w``; for the squared loss the products
        ``X^T S X w`` and ``X^T S y`` its solvers compute instead of the residual),
        with ``max ||x_i||`` (squared loss: ``F / sqrt(sum(s))``, and the rounding
        of ``X^T s``) times that of ``g_b``, and is added: the bound then also
        covers the accuracy floor of about ``eps kappa ||w||`` of ill-conditioned
        problems.

        Without a penalty (``lambda = 0``, :mod:`.unpenalised`) there is no
        strong convexity: ``lambda`` is replaced by ``reference / ||w||``
        (``reference`` the gradient norm at the best constant model), so that
        the "bound" is ``||w||`` times the relative optimality residual and
        :meth:`done` asks that residual to be below ``tol``; it bounds nothing.

        Returns the gradient's and the rounding's parts of the bound.
        """
        W, b = self.split(V)
        lam = self.lam[columns]
        scale = 1.0 / np.where(lam > 0, lam, 1.0)
        if not lam.all():
            free = lam == 0
            scale[free] = np.maximum(column_norms(W[:, free]), np.finfo(float).tiny) / \
                self.reference[columns][free]
        gw = G[:-1] if self.fit_intercept else G
        column_sums, weight_sum, frobenius2, row_norm = self.coupling
        n, d = self.blocks.shape
        w_norm, b_norm = column_norms(W), np.abs(b)
        frobenius = np.sqrt(frobenius2)
        margins = margin_rounding(d, frobenius, w_norm, weight_sum, b_norm)
        if self.loss == "squared":
            spread = frobenius * w_norm + np.sqrt(weight_sum) * b_norm     # >= ||S^(1/2) t||
            residual = np.sqrt(np.maximum(2.0 * (f - 0.5 * lam * w_norm ** 2), 0.0))
            rounding, rounding_b = product_rounding(
                n, frobenius, weight_sum, lam, w_norm, spread, margins, residual + spread,
                self.fit_intercept)
        else:
            dual = dual_norm(self.loss, weight_sum, f - 0.5 * lam * w_norm ** 2,
                             self.smoothing)
            lipschitz = LIPSCHITZ.get(self.loss, 1.0 / self.smoothing)
            rounding, rounding_b = evaluated_rounding(
                n, frobenius, weight_sum, lam, w_norm, dual,
                lipschitz * margins + derivative_rounding(self.loss) * dual)
        if not self.fit_intercept:
            size = column_norms(gw)
            return size * scale, (rounding + norm_rounding(d, size)) * scale
        gb = G[-1]
        if self.loss == "squared":
            # ||X^T s|| / sum(s) <= F / sqrt(sum(s)); X^T s itself is rounded
            size = column_norms(gw - np.outer(column_sums, gb / weight_sum))
            coupled = frobenius / np.sqrt(weight_sum) * (rounding_b + gamma(n + 3) * np.abs(gb))
        else:
            size = column_norms(gw) + row_norm * np.abs(gb)
            coupled = row_norm * rounding_b
        return size * scale, (rounding + coupled + norm_rounding(d, size)) * scale

    def done(self, V, G, f, tol, columns=slice(None)):
        """Targets whose coefficients are certified to relative accuracy ``tol``:
        ``error_bound <= tol ||w||`` (then ``||w - w*|| <= tol/(1 - tol) ||w*||``)."""
        W, _ = self.split(V)
        return self.error_bound(V, G, f, columns) <= tol * column_norms(W)

    def split(self, V):
        if self.fit_intercept:
            return V[:-1], V[-1]
        return V, np.zeros(V.shape[1])

    def targets(self, columns):
        """The targets of ``columns``: ``yd`` itself when they are all of them in
        order, so that a pass over a Dask ``yd`` reads its (persisted) chunks as
        they are instead of selecting columns in tasks of its own."""
        every = np.arange(self.yd.shape[1])
        return self.yd if np.array_equal(every[columns], every) else self.yd[:, columns]

    def stack(self, gradient_w, gradient_b):
        return np.vstack([gradient_w, gradient_b]) if self.fit_intercept else gradient_w

    def evaluate(self, V, columns, curvature_gram=True, keep_margins=False, direction=None,
                 start_hessian=None):
        """Objective, gradient and projected curvature at ``V`` for target
        ``columns`` (and the persisted margins ``X W`` with ``keep_margins``).

        With a ``direction`` ``D`` they are taken at ``V + D``, and the objective at
        ``V + eta D`` for every ``eta`` of ``STEPS`` comes back next (``len(STEPS) x
        K``), from the same pass; with ``start_hessian``, the curvature added to
        the intercept per target (see :meth:`hessian`), so does ``H D`` at ``V``,
        last."""
        W, b = self.split(V)
        extra = {}
        if direction is not None:
            Dw, db = self.split(direction)
            extra = {"direction": (Dw, db), "steps": STEPS,
                     "start_hessian": start_hessian is not None}
        self.passes += 1
        value, xt_dual, dual_sum, curv, *more = evaluate_pass(
            self.blocks, self.xhat, self.targets(columns), self.sd, W, b,
            curvature_gram=curvature_gram, keep_margins=keep_margins, **extra, **self.options)
        if direction is not None:
            path = more[0] + 0.5 * self.lam[columns] * np.array(
                [column_dots(W + eta * Dw, W + eta * Dw) for eta in STEPS])
            products = []
            if start_hessian is not None:
                xt, sums = more[1]
                products = [self.stack(xt + self.lam[columns] * Dw,
                                       sums + start_hessian * db)]
            W = W + Dw
            more = [path, *products]
        lam = self.lam[columns]
        f = value + 0.5 * lam * column_dots(W, W)
        return (f, self.stack(xt_dual + lam * W, dual_sum), curv, *more)

    def hessian(self, center, P, columns, intercept_curvature=0.0):
        """``H P`` at ``center`` (ignored for squared loss) for target ``columns``
        (one per column of ``P``)."""
        W, b = self.split(center) if center is not None else (None, None)
        Pw, pb = self.split(P)
        self.passes += 1
        # The squared loss's curvature does not depend on the targets: any will do.
        targets = self.yd if self.loss == "squared" else self.targets(columns)
        xt, sums = hessian_pass(self.blocks, targets, self.sd, W, b, Pw, pb,
                                **self.options)
        return self.stack(xt + self.lam[columns] * Pw, sums + intercept_curvature * pb)


def column_norms(A):
    return np.sqrt(np.einsum("ij,ij->j", A, A))


def column_dots(A, B):
    return np.einsum("ij,ij->j", A, B)


def pcg_squared(problem, V, intercept_only, gradient_intercept_only, gradient_at_zero,
                objective_at_zero, growth, reference, tol, max_iter, history):
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
    When the residuals contract slowly and growing can pay
    (:meth:`.growth.Growth.pays`), the projection of ``growth``
    (:class:`.growth.Growth`) is grown once and the iteration restarts from the
    current iterate with the new preconditioner.
    """
    K = V.shape[1]
    precs = _squared_preconditioners(problem, growth.basis(), growth.gram)
    g_start = gradient_at_zero + problem.hessian(None, V, np.arange(K))  # g(V)
    g_base = gradient_intercept_only
    D = V - intercept_only
    HD = g_start - g_base
    curvature = column_dots(D, HD)
    gamma = -column_dots(g_base, D) / np.where(curvature > 0, curvature, np.inf)
    V = intercept_only + gamma * D
    G = g_base + gamma * HD

    def objective(columns):
        return objective_at_zero[columns] + 0.5 * column_dots(
            G[:, columns] + gradient_at_zero[:, columns], V[:, columns])

    f = objective(slice(None))
    cert = column_norms(G) / reference
    history.append(record(0, problem.passes, cert, f, n_components=problem.n_components))
    R = -G
    P = np.column_stack([precs[k].apply(R[:, k]) for k in range(K)])
    rz = column_dots(R, P)
    best = BestIterates(problem, V, G, f, cert, tol)
    active = ~best.finished
    n_iter = start = 0
    cert_start = cert.copy()
    while active.any() and n_iter < max_iter:
        n_iter += 1
        act = np.flatnonzero(active)
        both = problem.hessian(None, np.hstack([P[:, act], V[:, act]]),
                               np.concatenate([act, act]))
        HP, true_G = both[:, :act.size], both[:, act.size:] + gradient_at_zero[:, act]
        pHp = column_dots(P[:, act], HP)
        step = rz[act] / np.where(pHp > 0, pHp, np.inf)
        V[:, act] += step * P[:, act]
        G[:, act] = true_G + step * HP
        R[:, act] = -G[:, act]
        f[act] = objective(act)
        cert[act] = column_norms(G[:, act]) / reference[act]
        history.append(record(n_iter, problem.passes, cert, f,
                              n_components=problem.n_components))
        best.update(act, V, G, f, cert)
        active[act] = ~(best.finished[act] | best.stalled[act] | ~(pHp > 0))
        act = np.flatnonzero(active)
        if act.size and growth.pays([precs[k] for k in act]) and contracting_slowly(
                cert[act] / cert_start[act], n_iter - start):
            precs = _squared_preconditioners(problem, *growth.grow())
            start, cert_start = n_iter, cert.copy()
            P[:, act] = np.column_stack([precs[k].apply(R[:, k]) for k in act])
            rz[act] = column_dots(R[:, act], P[:, act])
            continue
        for k in act:
            z = precs[k].apply(R[:, k])
            rz_new = R[:, k] @ z
            P[:, k] = z + (rz_new / rz[k]) * P[:, k]
            rz[k] = rz_new
    V, cert, f, G = best.result()
    return V, cert, f, n_iter, G


def _squared_preconditioners(problem, basis, gram):
    """One preconditioner per target (shared by targets of equal ``lambda``)."""
    shared = {lam: Preconditioner(basis, gram, lam) for lam in np.unique(problem.lam)}
    return [shared[lam] for lam in problem.lam]


class BestIterates:
    """Per target, the iterate of smallest error bound so far (the certified
    distance to the optimum, :meth:`FullProblem.bound_parts`; by strong convexity
    it also bounds the objective's distance to its minimum, where objectives
    computed near the minimum differ by rounding only), whether it is certified
    to ``tol``, and whether the iteration should stop for rounding (the
    gradient's part of the bound below its rounding part, or the bound not
    halved in ``STALL`` iterations), and ``needed``, the factor by which the
    gradient's part of the bound must still shrink to certify the last iterate."""

    def __init__(self, problem, V, G, f, cert, tol):
        self.problem, self.tol = problem, tol
        self.V, self.G, self.f, self.cert = V.copy(), G.copy(), f.copy(), cert.copy()
        K = V.shape[1]
        self.finished, self.floor = np.zeros(K, dtype=bool), np.zeros(K, dtype=bool)
        self.best_bound = np.full(K, np.inf)
        self.level, self.gradient = np.full(K, np.inf), np.full(K, np.inf)
        self.stall = np.zeros(K, dtype=int)
        self.needed = np.zeros(K)
        self.update(np.arange(K), V, G, f, cert)

    @property
    def stalled(self):
        return (self.stall >= STALL) | self.floor

    def update(self, columns, V, G, f, cert):
        columns = np.asarray(columns)
        gradient, rounding = self.problem.bound_parts(V[:, columns], G[:, columns],
                                                      f[columns], columns)
        bound = gradient + rounding
        W, _ = self.problem.split(V[:, columns])
        self.finished[columns] = bound <= self.tol * column_norms(W)
        # without a penalty the "bound" is ||w|| times the relative optimality
        # residual (FullProblem.bound_parts): iterates are ranked by the residual
        free = self.problem.lam[columns] == 0
        if free.any():
            bound = bound.copy()
            bound[free] /= np.maximum(column_norms(W[:, free]), np.finfo(float).tiny)
        # the factor by which the gradient's part must still shrink to certify
        self.needed[columns] = np.maximum(0.0, self.tol * column_norms(W) - rounding) / \
            np.where(gradient > 0, gradient, np.inf)
        # at the rounding part, go on while the gradient still halves: the
        # rounding part is a worst case, the accuracy reached often much better
        shrinking = gradient <= 0.5 * self.gradient[columns]
        self.gradient[columns] = np.minimum(gradient, self.gradient[columns])
        self.floor[columns] = (gradient <= rounding) & ~shrinking
        smaller = (bound <= self.best_bound[columns]) | self.finished[columns]
        better = columns[smaller]
        self.best_bound[better] = bound[smaller]
        self.V[:, better], self.G[:, better] = V[:, better], G[:, better]
        self.f[better], self.cert[better] = f[better], cert[better]
        halved = bound <= 0.5 * self.level[columns]
        self.stall[columns] = np.where(halved, 0, self.stall[columns] + 1)
        self.level[columns] = np.where(halved, bound, self.level[columns])
        return self.finished[columns] | self.stalled[columns]

    def result(self):
        return self.V, self.cert, self.f, self.G


def record(iteration, passes, cert, objective, **extra):
    squeeze = (lambda a: float(a[0])) if np.size(cert) == 1 else (lambda a: a.tolist())
    return {"iteration": iteration, "passes": passes,
            "optimality_residual": squeeze(np.asarray(cert)),
            "objective": squeeze(np.asarray(objective)), **extra}
