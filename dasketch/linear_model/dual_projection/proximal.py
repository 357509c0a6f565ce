r"""l1 and elastic-net penalties: sketch-preconditioned proximal Newton.

Solves, per target,

.. math:: \min_{w, b} \sum_i s_i l(x_i^T w + b, y_i)
          + \alpha \left(\rho \|w\|_1 + \frac{1 - \rho}{2} \|w\|^2\right)

(``rho = l1_ratio``; the squared and logistic losses), with ``positive`` over
``w >= 0`` (the indicator of ``w >= 0`` added to the penalty, scikit-learn's
``Lasso(positive=True)``), by a proximal Newton
method (Lee, Sun, Saunders, SIAM J. Optim. 2014) whose quadratic model uses
the projection's approximation ``M`` of the Hessian (:mod:`.preconditioner`:
the exact Hessian when the rank of X is at most the projection dimension, the
randomized Nystrom approximation for the squared loss) in place of the
Hessian. The model, ``M`` a multiple of the identity plus a low-rank part, is
minimised by coordinate descent in memory
(:func:`dasketch.kernels.proximal_model.model_descent`, no pass over X); the
step is then taken with an Armijo backtracking line search on the true
objective, whose values along the step come from the same pass that gives
the gradient, the curvature and the dual variables at its end
(:mod:`.l1_passes`): one pass per iteration, two when the step is shortened.

When the supports before and after a step (the working set J) are small, the
pass also returns the exact Hessian of the loss on J, and the next step,
when it stays within J, is proximal Newton's own on J (exact Hessian,
superlinear convergence once the support is found) instead of the
approximate model's. The penalty follows a continuation (a path,
:func:`penalty_path`): from near the penalty at which ``w = 0`` solves,
divided by :data:`PATH_FACTOR` per stage down to the target, each stage
warm-started from the last, so that the working set grows with the penalty's
decrease instead of being found at once at a weak penalty.

Every iterate is certified by its duality gap (:mod:`.duality_gap`), a bound on
``F(w, b) - F*`` computed from that pass; the iteration stops when
``gap <= tol F(0, b0)`` (``b0`` the best constant model), and warns with
:class:`~sklearn.exceptions.ConvergenceWarning` exactly when a target does not
reach it. With a ridge part (``rho < 1``) strong convexity also bounds the
coefficients: ``||w - w*|| <= sqrt(2 gap / (alpha (1 - rho)))``.

With ``w >= 0`` the proximal operator of the penalty is the one-sided soft
threshold, ``max(v - t l1, 0) / (1 + t l2)`` for a step ``t``: the model's
coordinate descent and face solve keep every coordinate at ``>= 0``
(:func:`~dasketch.kernels.proximal_model.model_descent`), so the working set
holds only coordinates that are positive before or after a step; the path
starts from ``max_j (-X^T S l')_j`` in place of ``||X^T S l'||_inf`` (``w = 0``
solves when it is at most ``l1``, at any penalty when it is at most 0), and the
duality gap takes the one-sided conjugate of the penalty (:mod:`.duality_gap`).
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dasketch.kernels.proximal_model import model_descent
from dasketch.linear_model.dual_projection.duality_gap import duality_gaps
from dasketch.linear_model.dual_projection.l1_passes import l1_pass
from dasketch.linear_model.dual_projection.preconditioner import Preconditioner, ProjectedBasis
from dasketch.utils._sklearn_compat import InvalidParameterError
from dasketch.utils.stack_level import caller_stacklevel

PENALTIES = ("l2", "l1", "elasticnet")
ARMIJO = 1e-4
# The relative rounding of an objective summed over many terms.
ROUNDING = 64 * np.finfo(np.float64).eps
# Step lengths of the line search, all evaluated in the pass at the full step.
STEPS = 2.0 ** -np.arange(0, 31)
# Minimisation of the model: relative tolerance and rounds (of coordinate
# descent and a face solve) at most.
MODEL_TOL = 1e-10
MODEL_ROUNDS = 50
# The exact Hessian on the working set is computed in the pass when it has at
# most FACE_LIMIT sqrt(d K) columns (its cost, n J^2 K, is then at most
# FACE_LIMIT^2 times the pass's own n d K; the steps it gives converge
# superlinearly where the approximate model's converge linearly).
FACE_LIMIT = 16.0
# The continuation in the penalty (:func:`penalty_path`): the first stage's
# share of the penalty at which w = 0, the factor between stages, their number
# at most, and the relative duality gap each stage before the target is solved to.
PATH_START = 0.5
PATH_FACTOR = 3.0
PATH_STAGES = 12
PATH_TOL = 1e-3


def l1_share(penalty, l1_ratio, *, solver="cg", loss="squared"):
    """The weight ``rho`` of ``||w||_1`` in the penalty (0 for ``"l2"``), after the
    rules that need several arguments: ``"elasticnet"`` needs an ``l1_ratio``,
    and an l1 part needs ``solver="cg"`` and the squared or logistic loss.
    Raises :class:`~sklearn.utils._param_validation.InvalidParameterError`."""
    if penalty == "l2":
        return 0.0
    if penalty == "elasticnet" and l1_ratio is None:
        raise InvalidParameterError("The 'l1_ratio' parameter must be a float in [0, 1] "
                                    "with penalty='elasticnet', got None.")
    rho = 1.0 if penalty == "l1" else float(l1_ratio)
    if rho > 0 and solver != "cg":
        raise InvalidParameterError(f"The 'solver' parameter must be 'cg' with "
                                    f"penalty={penalty!r} (an l1 part), got {solver!r}.")
    if rho > 0 and loss not in ("squared", "logistic"):
        raise InvalidParameterError(f"The 'penalty' parameter must be 'l2' with "
                                    f"loss={loss!r}; l1 and elastic-net penalties take the "
                                    f"squared or logistic loss, got {penalty!r}.")
    return rho


def _store(state, new, columns):
    for name in ("value", "dual_sum", "positive_sum"):
        if getattr(new, name, None) is not None:
            getattr(state, name)[columns] = getattr(new, name)
    for name in ("xt_dual", "xt_positive", "diagonal"):
        if getattr(new, name, None) is not None:
            getattr(state, name)[:, columns] = getattr(new, name)
    if new.curvature is not None:
        state.curvature[columns] = new.curvature


def _direction(full, basis, gram, V, state, faces, k, l1, l2, positive=False):
    """The minimiser of the model around target ``k``, stacked, and the model's
    predicted decrease ``g^T D + l1 (||w + D_w||_1 - ||w||_1)`` (< 0 unless optimal)."""
    W, b = full.split(V)
    w = np.ascontiguousarray(W[:, k])
    curvature = gram if full.loss == "squared" else state.curvature[k]
    U, a, o, c, e = Preconditioner(basis, curvature, l2[k]).metric()
    # the diagonal the low-rank part misses (columns of X outside the range of
    # the projection), added back: the metric is then exact on the diagonal
    o = o + np.maximum(state.diagonal[:, k] + l2[k] - o - (U * U) @ a, 0.0)
    g = state.xt_dual[:, k] + l2[k] * w
    gb = float(state.dual_sum[k]) if full.fit_intercept else 0.0
    dz, db, _ = model_descent(w, g, U, a, o, c, e, gb, l1[k], MODEL_TOL, MODEL_ROUNDS,
                              positive=positive)
    if k in faces:
        dz, db = _working_set_step(w, dz, db, g, gb, faces[k], l1[k], l2[k],
                                   full.fit_intercept, positive)
    decrease = g @ dz + gb * db + l1[k] * np.sum(np.abs(w + dz) - np.abs(w))
    return full.stack(dz[:, None], np.array([db]))[:, 0], decrease


def _working_set_step(w, dz, db, g, gb, face, l1, l2, fit_intercept, positive=False):
    """The minimiser of the model with the exact Hessian of the loss on the
    working set ``face = (J, [X_J 1]^T diag(s l'') [X_J 1])`` from the last pass
    (the other coordinates kept at 0), in place of the model's step ``(dz, db)``
    when the support of ``w`` and of ``w + dz`` lie within J: the step of proximal
    Newton's method itself on J (Lee, Sun, Saunders 2014), found by the same
    coordinate descent with ``H_J + l2 I`` written as ``o I + Q diag(a) Q^T``
    from its eigendecomposition."""
    support, hessian = face
    inside = np.zeros(w.size, dtype=bool)
    inside[support] = True
    if np.any((w != 0) & ~inside) or np.any((w + dz != 0) & ~inside):
        return dz, db
    size = support.size
    eigenvalues, Q = np.linalg.eigh(hessian[:size, :size])
    eigenvalues = np.maximum(eigenvalues, 0.0) + l2
    o = max(float(eigenvalues.min()), 1e-12 * float(eigenvalues.max()), np.finfo(float).tiny)
    c = hessian[:size, size] if fit_intercept else np.zeros(size)
    e = float(hessian[size, size]) if fit_intercept else 0.0
    step, step_b, _ = model_descent(w[support], g[support], np.ascontiguousarray(Q),
                                    eigenvalues - o, np.full(size, o), c, e, gb, l1,
                                    MODEL_TOL, MODEL_ROUNDS, positive=positive)
    out = np.zeros_like(dz)
    out[support] = step
    return out, step_b if fit_intercept else 0.0


def _faces(faces, new, columns):
    """Keep the Hessian of the loss on the working set of the last pass (the
    supports of the point before and after the step), per target of ``columns``."""
    for i, k in enumerate(columns):
        faces.pop(k, None)
        if new.face is not None:
            faces[k] = (new.support, new.face[i])


def _support(W, W_end):
    """The working set: the union of the supports of ``W`` and ``W_end``, if small
    enough (else None)."""
    union = np.flatnonzero(np.any((W_end != 0) | (W != 0), axis=1))
    return union if 0 < union.size <= FACE_LIMIT * np.sqrt(W.size) else None


def _objective_path(W, Dw, path, l1, l2):
    """``F(W + eta Dw)`` for every ``eta`` of :data:`STEPS` from the loss sums ``path``."""
    out = np.empty_like(path)
    for i, eta in enumerate(STEPS):
        Z = W + eta * Dw
        out[i] = path[i] + l1 * np.abs(Z).sum(axis=0) + 0.5 * l2 * np.einsum("ij,ij->j", Z, Z)
    return out


def penalty_path(xt_dual, l1, l2, positive=False):
    """The stages ``[(l1_s, l2_s), ...]`` of the continuation, the last the target.

    ``xt_dual`` is ``X^T S l'`` at ``(0, b0)``, the gradient of the loss there:
    ``w = 0`` is the solution exactly when ``||X^T S l'||_inf <= l1`` (``b0`` the
    best constant model; with ``positive``, ``w >= 0``, when ``max_j (-X^T S
    l')_j <= l1``, the only descent directions from 0 being nonnegative), so the
    path starts at ``PATH_START`` of that largest useful ``l1`` and divides both
    penalties by ``PATH_FACTOR`` per stage, their ratio (``l1_ratio``) kept,
    until the target (glmnet's warm-started path: Friedman, Hastie, Tibshirani,
    J. Stat. Softw. 2010, section 2.5). No stage precedes the target where that
    ``l1`` is at most the target's (``w = 0`` solves; with ``positive`` that
    includes a maximum at most 0)."""
    reach = -xt_dual if positive else np.abs(xt_dual)
    top = np.max(reach, axis=0) if xt_dual.size else np.zeros(l1.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(l1 > 0, PATH_START * top / l1, 1.0)
        stages = np.where(ratio > 1.0, np.ceil(np.log(np.maximum(ratio, 1.0))
                                               / np.log(PATH_FACTOR)), 0.0)
    count = int(min(np.max(stages, initial=0.0), PATH_STAGES))
    out = []
    for s in range(count, 0, -1):
        scale = np.maximum(np.minimum(ratio, PATH_FACTOR ** s), 1.0)
        out.append((l1 * scale, l2 * scale))
    return out + [(l1, l2)]


def proximal_newton(full, setup, *, l1, l2, tol, max_iter, history, positive=False):
    """Fit every target; see the module docstring.

    ``setup`` holds what the projection pass gave (``Y``, ``weights``, ``b0``,
    ``column_sums``, ``products``, ``gram``). The penalties follow
    :func:`penalty_path`, each stage warm-started from the last and solved to a
    relative gap of ``max(tol, PATH_TOL)``, the target to ``tol``; ``max_iter``
    counts the iterations of all stages; ``positive``: over ``w >= 0``. Returns
    ``(V, objective, gap, reference, n_iter)``: the stacked solutions, their
    objective and duality gap at the target penalties, the objective of the best
    constant model the gap is measured against, and the iterations run.
    """
    Y, weights = setup.Y, setup.weights
    K, m1 = Y.shape[1], setup.gram.shape[0]
    solver = SimpleNamespace(full=full, gram=setup.gram[:, :m1], basis=ProjectedBasis(
        setup.products[:, :m1], setup.gram[:, :m1], full.fit_intercept), positive=positive)
    V = full.stack(np.zeros((full.blocks.shape[1], K)), setup.b0)
    full.passes += 1
    state = l1_pass(full.blocks, full.xhat, full.yd, full.sd, *full.split(V),
                    loss=full.loss, **_pass_options(full))
    terms = dict(loss=full.loss, fit_intercept=full.fit_intercept,
                 column_sums=setup.column_sums, weight_sum=weights.sum(),
                 weighted_target_sums=weights @ Y, positive=positive)
    primal, _, gap = duality_gaps(*full.split(V), state, l1=l1, l2=l2, **terms)
    reference = np.where(primal > 0, primal, 1.0)
    _record(history, 0, full.passes, gap / reference, primal)
    n_iter = 0
    for l1_s, l2_s in penalty_path(state.xt_dual, l1, l2, positive):
        stage = {**terms, "l1": l1_s, "l2": l2_s}
        primal, _, gap = duality_gaps(*full.split(V), state, **stage)
        goal = tol if l1_s is l1 else max(tol, PATH_TOL)
        n_iter = _descend(solver, V, state, stage, primal, gap, goal * reference,
                          n_iter, max_iter, history, reference)
    # the certificate is at the target, whichever stage the iterations ended in
    primal, _, gap = duality_gaps(*full.split(V), state, l1=l1, l2=l2, **terms)
    return V, primal, gap, reference, n_iter


def _descend(solver, V, state, terms, primal, gap, goal, n_iter, max_iter, history,
             reference):
    """Proximal Newton iterations at the penalties of ``terms`` from ``V`` (updated
    in place, with ``state``, ``primal`` and ``gap``) until every target's gap is
    at most ``goal``, or stalls, or ``max_iter`` iterations in all. Returns the
    iterations run so far."""
    full, l1, l2 = solver.full, terms["l1"], terms["l2"]
    stalled = np.zeros(V.shape[1], dtype=bool)
    faces = {}
    while n_iter < max_iter:
        run = np.flatnonzero((gap > goal) & ~stalled)
        if not run.size:
            break
        n_iter += 1
        D, decrease = np.zeros((V.shape[0], run.size)), np.zeros(run.size)
        for i, k in enumerate(run):
            D[:, i], decrease[i] = _direction(full, solver.basis, solver.gram, V, state,
                                              faces, k, l1, l2, solver.positive)
        W, b = full.split(V[:, run])
        Dw, db = full.split(D)
        full.passes += 1
        new = l1_pass(full.blocks, full.xhat, full.yd[:, run], full.sd, W, b, (Dw, db),
                      STEPS, _support(W, W + Dw), loss=full.loss, **_pass_options(full))
        values = _objective_path(W, Dw, new.path, l1[run], l2[run])
        accepted = values <= primal[run] + ARMIJO * STEPS[:, None] * decrease
        # a decrease below the rounding of the objective cannot be checked: the
        # full step is taken (the gap of the new point is computed all the same)
        unseen = -decrease <= ROUNDING * (np.abs(primal[run]) + l1[run] * np.abs(W).sum(axis=0))
        accepted[0] |= unseen & (decrease < 0)
        ok = accepted.any(axis=0) & (decrease < 0)
        eta = np.where(ok, STEPS[np.argmax(accepted, axis=0)], 0.0)
        stalled[run[~ok]] = True
        V[:, run] += eta * D
        if solver.positive:     # w + eta (z - w) >= 0 up to its rounding
            rows = V.shape[0] - int(full.fit_intercept)
            V[:rows, run] = np.maximum(V[:rows, run], 0.0)
        run_all, before = run, gap[run]
        if np.any(eta[ok] < 1.0):
            W_end, b = full.split(V[:, run])
            full.passes += 1
            new = l1_pass(full.blocks, full.xhat, full.yd[:, run], full.sd, W_end, b,
                          support=_support(W, W_end), loss=full.loss,
                          **_pass_options(full))
        elif not ok.all():     # keep the state of the targets that did not move
            run, new = _subset(run, ok, new)
        _store(state, new, run)
        _faces(faces, new, run)
        primal[run], _, gap[run] = duality_gaps(*full.split(V[:, run]),
                                                _columns(state, run), **_columns_of(terms, run))
        # a step taken below the rounding of the objective that did not lower
        # the gap: rounding, not the iteration, limits the certificate
        moved = np.isin(run_all, run)
        stalled[run] |= unseen[moved] & (gap[run] >= before[moved])
        _record(history, n_iter, full.passes, gap / reference, primal, eta)
    return n_iter


def _pass_options(full):
    return {"split_every": full.options["split_every"], "client": full.options["client"]}


def _subset(run, ok, new):
    """The pass's results for the targets ``run[ok]`` only."""
    picked = SimpleNamespace(curvature=None if new.curvature is None else new.curvature[ok],
                             face=None if new.face is None else new.face[ok],
                             support=new.support)
    for name in ("value", "dual_sum", "positive_sum"):
        value = getattr(new, name)
        setattr(picked, name, None if value is None else value[ok])
    for name in ("xt_dual", "xt_positive", "diagonal"):
        value = getattr(new, name)
        setattr(picked, name, None if value is None else value[:, ok])
    return run[ok], picked


def _columns(state, run):
    picked = SimpleNamespace(value=state.value[run], dual_sum=state.dual_sum[run],
                             xt_dual=state.xt_dual[:, run])
    if state.xt_positive is not None:
        picked.xt_positive = state.xt_positive[:, run]
        picked.positive_sum = state.positive_sum[run]
    return picked


def _columns_of(terms, run):
    return {**terms, "l1": terms["l1"][run], "l2": terms["l2"][run],
            "weighted_target_sums": terms["weighted_target_sums"][run]}


def _record(history, iteration, passes, relative_gap, objective, step=None):
    entry = {"iteration": iteration, "passes": passes,
             "optimality_residual": relative_gap.tolist() if relative_gap.size > 1
             else float(relative_gap[0]),
             "objective": objective.tolist() if objective.size > 1 else float(objective[0])}
    if step is not None:
        entry["step_size"] = step.tolist() if step.size > 1 else float(step[0])
    history.append(entry)


def warn_gap(gap, reference, tol, n_iter, sketch_size):
    """The :class:`ConvergenceWarning` of a fit whose duality gap misses ``tol``."""
    relative = float(np.max(gap / reference))
    warnings.warn(f"proximal Newton: relative duality gap {relative:.3g} > tol={tol:g} "
                  f"(gap {float(np.max(gap)):.3g} over the objective of the best constant "
                  f"model) after {n_iter} iterations; increase max_iter, or sketch_size "
                  f"(now {sketch_size}) to precondition better, or a tol above the "
                  "rounding of the objective", ConvergenceWarning,
                  stacklevel=caller_stacklevel())


def fit_l1(full, setup, *, lam, rho, tol, max_iter, squeeze, seed, cache, source,
           positive=False):
    """:func:`proximal_newton` for ``alpha = lam`` (per target), ``l1_ratio = rho``
    and ``positive``, as a :class:`~.result.DualRandomProjectionResult` (warning
    when it misses ``tol``)."""
    from dasketch.linear_model.dual_projection.result import DualRandomProjectionResult

    l1, l2 = lam * rho, lam * (1.0 - rho)
    history = []
    V, f, gap, reference, n_iter = proximal_newton(full, setup, l1=l1, l2=l2, tol=tol,
                                                   max_iter=max_iter, history=history,
                                                   positive=positive)
    W, b = full.split(V)
    bound = np.sqrt(2.0 * gap / np.where(l2 > 0, l2, 1.0))
    bound[l2 == 0] = np.inf        # no strong convexity: nothing bounds ||w - w*||
    relative = gap / reference
    pick = (lambda a: float(a[0])) if squeeze else (lambda a: a)
    result = DualRandomProjectionResult(
        coef=W[:, 0] if squeeze else W.T, intercept=pick(b),
        optimality_residual=pick(relative), coef_error_bound=pick(bound), objective=pick(f),
        converged=bool(np.all(relative <= tol)), n_iter=int(n_iter), n_passes=full.passes,
        history=history, naive_coef=np.zeros_like(W[:, 0] if squeeze else W.T),
        naive_intercept=pick(setup.b0), best_iteration=int(n_iter),
        n_components=full.n_components, random_state=seed, cache=cache,
        duality_gap=pick(gap),
        _dual=(source, full.yd, full.sd, W, b, full.loss, full.smoothing, squeeze))
    if not result.converged:
        warn_gap(gap, reference, tol, n_iter, full.n_components)
    return result
