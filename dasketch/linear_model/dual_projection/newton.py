"""Newton-CG for the logistic and smoothed hinge losses of the full problem.

An inexact (truncated) Newton method, Nocedal and Wright, *Numerical
Optimization*, Algorithm 7.1 (line-search Newton-CG), with the forcing sequence
``min(0.5, sqrt(residual))`` (raised to :data:`LAST_STEP` of the reduction that
certification still needs, when that asks less) and Armijo backtracking, for every target column at
once (one-vs-rest shares every pass). Each Hessian-vector product is one pass
over X; the full step and the objective along it are one more, and a shorter
step one more again. The inner conjugate gradients are preconditioned through
the random projection (:mod:`.preconditioner`), grown once when they contract
slowly (:mod:`.growth`).
"""

from __future__ import annotations

import numpy as np

from dasketch.linear_model.dual_projection.growth import contracting_slowly
from dasketch.linear_model.dual_projection.preconditioner import Preconditioner
from dasketch.linear_model.dual_projection.solvers import (
    STEPS,
    BestIterates,
    column_dots,
    column_norms,
    record,
)

# Inner conjugate-gradient iterations per Newton step at most.
MAX_INNER_ITER = 50
ARMIJO = 1e-4
# A single inner iteration reducing the Newton residual at least this much (a
# hundredfold) makes the next Newton step the preconditioned one, without inner
# iterations.
SPECULATE = 0.01


# Share of the gradient reduction certification needs that the inner solve of
# a Newton step is asked for (the rest is left to the Newton step's own error).
LAST_STEP = 0.25


def _inner_cg(problem, center, G, precs, kappas, forcing, columns, watch=False):
    """Truncated PCG on ``H_k s_k = -g_k`` for the target ``columns``; stops a column
    when its residual is below ``forcing_k ||g_k||``, or on non-positive curvature
    (returning the last step, or the preconditioned gradient step if none).
    With ``watch``, stops every column when the residuals contract slowly
    (:func:`.growth.contracting_slowly`; the truncated steps are still descent
    directions). Returns the steps, the number of passes, whether it stopped
    for slow contraction, and per column the residual reduction
    ``||r|| / ||g||`` it reached (infinite when it stopped short of its forcing
    target)."""
    R = -G[:, columns]
    S = np.zeros_like(R)
    Z = np.column_stack([precs[k].apply(R[:, i]) for i, k in enumerate(columns)])
    P = Z.copy()
    rz = column_dots(R, Z)
    initial = column_norms(R)
    target = forcing * initial
    running = np.ones(len(columns), dtype=bool)
    reached = np.full(len(columns), np.inf)
    passes = 0
    while running.any() and passes < MAX_INNER_ITER:
        run = np.flatnonzero(running)
        if watch and contracting_slowly(column_norms(R[:, run]) / initial[run], passes):
            return S, passes, True, reached
        run = np.flatnonzero(running)
        HP = problem.hessian(center[:, columns[run]], P[:, run], columns[run],
                             intercept_curvature=kappas[columns[run]])
        passes += 1
        pHp = column_dots(P[:, run], HP)
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
                running[j], reached[j] = False, np.linalg.norm(R[:, j]) / initial[j]
                continue
            z = precs[columns[j]].apply(R[:, j])
            rz_new = R[:, j] @ z
            P[:, j] = z + (rz_new / rz[j]) * P[:, j]
            rz[j] = rz_new
    return S, passes, False, reached


def newton_cg(problem, V, f, G, curvature, growth, reference, tol, max_iter, history):
    """Inexact Newton (Newton-CG with Armijo backtracking) from ``V`` with objective
    ``f``, gradient ``G`` and projected curvature ``curvature`` (K x (m+1) x (m+1))
    there, for every target column until its relative optimality residual
    ``||G_k|| / reference_k`` certifies its coefficients to ``tol``
    (:meth:`FullProblem.done`).

    The intercept is unpenalised: where no sample has curvature (the smoothed
    hinge far from the optimum) its Newton system would be singular, so its
    curvature is raised to ``lambda * residual`` when below it (a
    Levenberg-Marquardt term that vanishes at the optimum and keeps the fast
    local convergence).

    When the inner conjugate gradients contract slowly and growing can pay
    (:meth:`.growth.Growth.pays`), the projection of ``growth``
    (:class:`.growth.Growth`) is grown once after that Newton step.

    When the last inner solve took one iteration that reduced the residual by
    :data:`SPECULATE` or more (the preconditioner matches the Hessian, e.g. X
    of rank at most m), the next step is the
    preconditioned Newton step ``s = -M^{-1} g`` without inner iterations
    (``cg_iterations`` 0 in the history): the pass that evaluates the trial
    point also returns ``H s`` at the current point, which checks the inexact
    Newton condition ``||H s + g|| <= forcing ||g||`` after the fact. The step
    is a descent direction either way (``M`` is positive definite) and the line
    search applies; inner iterations resume after a step that misses it.
    """
    K = V.shape[1]
    cert = column_norms(G) / reference
    history.append(record(0, problem.passes, cert, f, cg_iterations=0, step_size=0.0,
                          n_components=problem.n_components))
    n_iter = 0
    basis = growth.basis()
    lam = problem.lam
    best = BestIterates(problem, V, G, f, cert, tol)
    stop = best.finished.copy()
    speculate = False
    while not stop.all() and n_iter < max_iter:
        n_iter += 1
        act = np.flatnonzero(~stop)
        kappas = np.zeros(K)
        m1 = curvature.shape[1]
        if problem.fit_intercept:
            kappas[act] = np.maximum(
                0.0, lam[act] * np.minimum(1.0, cert[act]) - curvature[act, m1 - 1, m1 - 1])
        precs = {k: Preconditioner(basis, curvature[k], lam[k], kappas[k]) for k in act}
        # Eisenstat-Walker's sqrt rule, but never asking the inner solve for more
        # than a part of what certification still needs (the last Newton system
        # is not over-solved).
        forcing = np.minimum(0.5, np.maximum(np.sqrt(cert[act]), LAST_STEP * best.needed[act]))
        if speculate:
            S = np.column_stack([precs[k].apply(-G[:, k]) for k in act])
            inner, slow = 0, False
        else:
            S, inner, slow, reached = _inner_cg(problem, V, G, precs, kappas, forcing, act,
                                            watch=growth.pays(precs.values()))
        decrease = column_dots(G[:, act], S)
        # The full step and the objective along it in one pass; a shorter step (the
        # longest of STEPS with Armijo's decrease) costs one more pass, not one per halving.
        f_new, G_new, curv_new, path, *check = problem.evaluate(
            V[:, act], act, direction=S, start_hessian=kappas[act] if speculate else None)
        g_norms = column_norms(G[:, act])
        speculate = (bool(np.all(column_norms(G[:, act] + check[0]) <= forcing * g_norms))
                     if speculate else inner == 1 and bool(np.all(reached <= SPECULATE)))
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
        cert[act] = column_norms(G[:, act]) / reference[act]
        history.append(record(n_iter, problem.passes, cert, f, cg_iterations=inner,
                               step_size=float(eta.min()), n_components=problem.n_components))
        stop[act] = best.update(act, V, G, f, cert)
        if slow and not stop.all():
            basis, curvature = growth.grow(V)
    V, cert, f, G = best.result()
    return V, cert, f, n_iter, G
