r"""Quadratic problems with nonnegative coefficients (``positive=True``), by a
preconditioned projected Newton method.

numpy/scipy only: the products with the Hessian come from the caller (one pass
over X each). The problem, per target (column),

.. math:: \min_{v,\ v_i \ge 0\ (i \in \mathcal{B})} f(v) = f(0) + g_0^T v + \tfrac12 v^T H v,

(``B`` the bounded rows: the coefficients, never an intercept) is solved by the
projected Newton method of Bertsekas (SIAM J. Control Optim. 20(2), 1982) with
inexact, preconditioned steps, as in the trust-region Newton method of Lin and
Moré (SIAM J. Optim. 9(4), 1999):

1. the binding set ``A = {i in B : v_i <= eps, g_i > 0}`` (``eps`` the natural
   residual ``||min(v_B, g_B)||``, at most :data:`EPS` times the largest
   coefficient); the other rows are free;
2. a Newton step on the free rows, ``H_FF d_F = -g_F``, by conjugate gradients
   preconditioned with the principal submatrix ``M_FF`` of the caller's
   preconditioner ``M`` of ``H`` (the binding rows step to 0). Restriction keeps
   its quality: for ``x`` supported on ``F``, ``x^T H_FF x / x^T M_FF x`` is a
   Rayleigh quotient of ``(H, M)``, so the spectrum of ``M_FF^{-1} H_FF`` lies
   within that of ``M^{-1} H`` (exactly ``H_FF`` when ``M = H``); free
   coefficients that the shortest step of the path would clip to 0 join the
   binding set and the step is recomputed (up to :data:`BLOCKING_ROUNDS`
   times), as Lawson and Hanson's active-set method removes the coefficients
   its subproblem drives negative (Solving Least Squares Problems, 1974,
   Chapter 23);
3. the projected path ``P(v + t d)`` at ``t = 1, 1/2, ..., 2^-10``, the step
   to the first bound a positive coefficient meets along ``d`` (which then
   joins the binding set, as in active-set methods) and the projected gradient
   step ``P(v - g / L)`` (``L >= ||H||``), all in one pass;
   the candidate of least objective is taken. The gradient step alone decreases
   ``f`` by at least ``L/2 ||v - P(v - g/L)||^2`` (Beck and Teboulle, SIAM J.
   Imaging Sci. 2009, Lemma 2.3), so the iteration converges from any start;
   the Newton steps make it converge fast once the binding set is found.

The caller certifies each iterate and says when a target is done; a bound on
``||v - v*||`` for strongly convex problems is the projected gradient (see
:func:`projected_gradient`) over the modulus of strong convexity
(:mod:`dasketch.linear_model.dual_projection.positive`).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

# Steps tried along the projected Newton path, all in one pass.
PATH_STEPS = 2.0 ** -np.arange(0, 11)
# The conjugate gradients of a Newton step stop when the preconditioned residual
# has fallen by this factor, or after INNER_ITERATIONS.
INNER_REDUCTION = 1e-4
INNER_ITERATIONS = 50
# Times a Newton step is recomputed with the free coefficients it would push
# through their bound at once added to the binding set.
BLOCKING_ROUNDS = 3
# Unit roundoff, doubled: objectives this close (relative) are level.
ROUNDING = 2.0 * np.finfo(np.float64).eps
# Iterations without a smaller error bound after which a target stops.
STALL = 10
# Coefficients at most this fraction of the largest (and of the natural
# residual) with a positive gradient are binding.
EPS = 1e-9


def projected_gradient(W, G):
    """``g`` where ``w > 0`` or ``g < 0``, else 0: zero exactly at a KKT point of
    ``min_{w >= 0}`` (the limit of ``min(c w, g)`` as ``c -> inf``)."""
    return np.where((W > 0) | (G < 0), G, 0.0)


def column_norms(A):
    return np.sqrt(np.einsum("ij,ij->j", A, A))


class RestrictedPreconditioner:
    """``M_FF^{-1}`` for ``M = o I + V E V^T`` (``V`` with orthonormal columns)
    and a set ``F`` of rows, by the Woodbury identity in its push-through form
    ``(o I + U E U^T)^{-1} = (I - U E (o I + U^T U E)^{-1} U^T) / o``,
    ``U = V_F`` (no inverse of ``E`` needed). With ``coupling`` ``(c, e)``
    the matrix has one more, unbounded row ``[c^T, e]`` (an intercept), applied
    by its Schur complement."""

    def __init__(self, outside, V, E, free, coupling=None):
        self.o, self.U, self.E = outside, V[free], E
        self.lu = scipy.linalg.lu_factor(outside * np.eye(E.shape[0]) + self.U.T @ self.U @ E)
        self.free = free
        self.c = None
        if coupling is not None:
            c, e = coupling
            self.c = c[free]
            self.Mc = self._solve(self.c)
            self.schur = max(e - float(self.c @ self.Mc), 1e-12 * abs(e), np.finfo(float).tiny)

    def _solve(self, r):
        inner = scipy.linalg.lu_solve(self.lu, self.U.T @ r)
        return (r - self.U @ (self.E @ inner)) / self.o

    def apply(self, r):
        """``M_FF^{-1} r`` for ``r`` of length ``|F|`` (+1 with the coupling)."""
        if self.c is None:
            return self._solve(r)
        x = self._solve(r[:-1])
        t = (r[-1] - self.c @ x) / self.schur
        return np.append(x - self.Mc * t, t)


def projected_newton(problem, starts, *, max_iter):
    """Minimise ``problem`` (see below) over its feasible set from the best
    (least objective) of ``starts`` (a list of points, projected first; all
    evaluated in one pass), every target at once; returns ``V, G, f, n_iter`` with
    the gradient ``G`` and objective ``f`` of the returned iterates (those of
    smallest certified bound).

    ``problem`` has ``bounded`` (bool, one per row of ``V``), ``g_zero`` and
    ``f_zero`` (gradient and objective at 0), ``lipschitz`` (``L >= ||H||`` per
    target), ``product(P, columns)`` (``H P``, column ``j`` of ``P`` for target
    ``columns[j]``: one pass), ``preconditioner(k, free)`` (an object whose
    ``apply`` is ``M_FF^{-1}`` for target ``k``) and ``certify(V, G, f)``,
    which returns the error bound (or residual) per target and whether it is
    certified (done) or at its rounding floor (stop).
    """
    bounded = problem.bounded
    K = starts[0].shape[1]
    points = np.hstack([np.where(bounded[:, None], np.maximum(V, 0.0), V) for V in starts])
    columns = np.tile(np.arange(K), len(starts))
    grads = problem.g_zero[:, columns] + problem.product(points, columns)
    values = _objective(problem, points, grads, columns).reshape(len(starts), K)
    index = np.argmin(values, axis=0) * K + np.arange(K)
    V, G, f = points[:, index], grads[:, index], values.min(axis=0)
    bound, done, stop = problem.certify(V, G, f)
    best = [V.copy(), G.copy(), f.copy(), bound.copy()]
    stall = np.zeros(K, dtype=int)
    n_iter = 0
    active = ~(done | stop)
    while active.any() and n_iter < max_iter:
        n_iter += 1
        act = np.flatnonzero(active)
        free = _free_rows(bounded, V[:, act], G[:, act])
        D = _newton_steps(problem, V, G, act, free)
        for _ in range(BLOCKING_ROUNDS):
            # free coefficients that even the shortest step would clip to 0
            blocking = free & bounded[:, None] & (V[:, act] + PATH_STEPS[-1] * D < 0)
            if not blocking.any():
                break
            free &= ~blocking
            D = _newton_steps(problem, V, G, act, free)
        V_new, G_new, f_new = _path_search(problem, V, G, f, D, act)
        V[:, act], G[:, act], f[act] = V_new, G_new, f_new
        bound[act], done[act], stop[act] = (a[act] for a in problem.certify(V, G, f))
        smaller = act[bound[act] < best[3][act]]
        stall[act] += 1
        stall[smaller] = 0
        for keep, now in zip(best, (V, G, f, bound)):
            keep[..., smaller] = now[..., smaller]
        active[act] = ~(done[act] | stop[act] | (stall[act] >= STALL))
    return best[0], best[1], best[2], n_iter


def _objective(problem, V, G, columns=slice(None)):
    """``f(V) = f(0) + (g(V) + g(0))^T V / 2`` for a quadratic."""
    return problem.f_zero[columns] + 0.5 * np.einsum(
        "ij,ij->j", G + problem.g_zero[:, columns], V)


def _free_rows(bounded, V, G):
    """Per target (column), the rows not in the binding set."""
    residual = np.where(bounded[:, None], np.minimum(V, G), 0.0)
    scale = np.where(bounded[:, None], V, 0.0).max(axis=0, initial=0.0)
    eps = np.minimum(column_norms(residual), EPS * scale)
    binding = bounded[:, None] & (V <= eps) & (G > 0)
    return ~binding


def _newton_steps(problem, V, G, act, free):
    """Inexact Newton steps on the free rows of targets ``act`` (columns of
    ``free``) by preconditioned conjugate gradients, batched: one pass per
    iteration for all targets; binding rows step to 0."""
    precs = [problem.preconditioner(k, free[:, j]) for j, k in enumerate(act)]
    D = np.where(free, 0.0, -V[:, act])
    R = np.where(free, -G[:, act], 0.0)
    Z = np.zeros_like(R)
    for j, prec in enumerate(precs):
        Z[free[:, j], j] = prec.apply(R[free[:, j], j])
    P, rz = Z.copy(), np.einsum("ij,ij->j", R, Z)
    start = rz.copy()
    going = rz > 0
    for _ in range(INNER_ITERATIONS):
        if not going.any():
            break
        on = np.flatnonzero(going)
        HP = np.where(free[:, on], problem.product(P[:, on], act[on]), 0.0)
        curvature = np.einsum("ij,ij->j", P[:, on], HP)
        flat = ~(curvature > 0)
        step = rz[on] / np.where(flat, np.inf, curvature)
        D[:, on] += step * P[:, on]
        R[:, on] -= step * HP
        for j in on:
            Z[free[:, j], j] = precs[j].apply(R[free[:, j], j])
        rz_new = np.einsum("ij,ij->j", R[:, on], Z[:, on])
        P[:, on] = Z[:, on] + rz_new / np.where(rz[on] > 0, rz[on], np.inf) * P[:, on]
        rz[on] = rz_new
        going[on] = ~flat & (rz_new > INNER_REDUCTION ** 2 * start[on])
    return D


def _path_search(problem, V, G, f, D, act):
    """The candidate of least objective among ``P(v + t d)`` for ``t`` in
    :data:`PATH_STEPS` and ``P(v - g / L)`` per target of ``act`` (one pass)."""
    bounded = problem.bounded[:, None]
    n_steps = PATH_STEPS.size + 2
    Va, Ga = V[:, act], G[:, act]
    # the first bound a positive coefficient meets along d (the active-set step)
    meets = bounded & (Va > 0) & (D < 0)
    first = np.min(np.where(meets, Va / np.where(meets, -D, 1.0), 1.0), axis=0, initial=1.0)
    points = [Va + t * D for t in PATH_STEPS] + [Va + first * D,
                                                 Va - Ga / problem.lipschitz[act]]
    points = np.stack([np.where(bounded, np.maximum(p, 0.0), p) for p in points])  # T p K
    columns = np.tile(act, n_steps)
    flat = points.transpose(1, 0, 2).reshape(V.shape[0], -1)
    grads = problem.g_zero[:, columns] + problem.product(flat, columns)
    values = _objective(problem, flat, grads, columns).reshape(n_steps, act.size)
    pick = np.argmin(values, axis=0)
    # near the minimum the objective changes below its rounding: among the
    # candidates level with the current one, the least projected gradient
    slack = ROUNDING * (np.abs(f[act]) + np.abs(problem.f_zero[act]))
    level = values <= (f[act] + slack)
    stuck = values[pick, np.arange(act.size)] >= f[act] - slack
    if stuck.any():
        bounded_rows = problem.bounded[:, None]
        residual = column_norms(np.where(bounded_rows, projected_gradient(flat, grads), grads))
        residual = np.where(level, residual.reshape(n_steps, act.size), np.inf)
        pick = np.where(stuck, np.argmin(residual, axis=0), pick)
        now = column_norms(np.where(bounded_rows, projected_gradient(Va, Ga), Ga))
        better = residual[pick, np.arange(act.size)] < now
    index = pick * act.size + np.arange(act.size)
    keep = values[pick, np.arange(act.size)] < f[act] - slack
    if stuck.any():
        keep = keep | (stuck & better)
    V_new = np.where(keep, flat[:, index], Va)
    G_new = np.where(keep, grads[:, index], Ga)
    return V_new, G_new, np.where(keep, values[pick, np.arange(act.size)], f[act])
