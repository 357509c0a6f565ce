r"""Coordinate descent on an l1-regularised quadratic model (numba).

The subproblem of a proximal Newton method (Lee, Sun, Saunders, "Proximal
Newton-type methods for minimizing composite functions", SIAM J. Optim. 2014):

.. math:: \min_{z, \beta} \; g^T (z - w) + g_b (\beta - b)
          + \tfrac12 \Delta^T M \Delta + l_1 \|z\|_1,
          \qquad \Delta = (z - w, \beta - b),

with the metric ``M = [[diag(o) + U diag(a) U^T, c], [c^T, e]]``: a positive
diagonal plus a symmetric low-rank part (``U`` d x r, orthonormal columns) for
the weights, and the coupling ``c`` and curvature ``e`` of an unpenalised
intercept (``e = 0``: no intercept), optionally over ``z >= 0`` (the penalty
``l_1 \|z\|_1 + I(z >= 0)``, scikit-learn's ``positive=True``). Cyclic
coordinate descent with exact coordinate minimisation (soft thresholding, one-sided
with ``z >= 0``: Friedman, Hastie, Tibshirani, J. Stat. Softw. 2010), on the
active set between full sweeps, alternated with the exact minimiser on the face
of the current support and signs. The products with ``M`` are kept up to date
through ``u = U^T (z - w)``, so a coordinate step costs ``O(r)`` and never forms
a d x d matrix.

Written by hand: scikit-learn's coordinate descent takes the data or a dense
d x d Gram matrix, not a diagonal-plus-low-rank metric.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def _coordinate(j, z, step_sum, U, au, a, o, diag, g, c, db, l1, positive):
    """Minimise over coordinate ``j`` (over ``z_j >= 0`` with ``positive``); update
    ``z``, ``au = a * U^T (z - w)`` and return the change of ``z_j``
    (``step_sum[0]`` accumulates ``c^T (z - w)``)."""
    r = U.shape[1]
    grad = g[j] + o[j] * step_sum[j + 1] + c[j] * db
    for i in range(r):
        grad += U[j, i] * au[i]
    old = z[j]
    v = old - grad / diag[j]
    t = l1 / diag[j]
    new = v - t if v > t else (v + t if v < -t and not positive else 0.0)
    change = new - old
    if change != 0.0:
        z[j] = new
        step_sum[j + 1] += change
        step_sum[0] += change * c[j]
        for i in range(r):
            au[i] += change * a[i] * U[j, i]
    return change


@njit(cache=True)
def _descent(w, z, db, g, U, a, o, c, e, gb, l1, positive, threshold, max_sweeps):
    """Coordinate descent from ``(z, w_b + db)`` until a full sweep moves no
    coordinate by more than ``threshold`` (in the metric's norm of the
    coordinate) or ``max_sweeps``; ``z`` is updated in place. Returns ``db``, the
    largest move of the first sweep and whether it converged."""
    d, r = U.shape
    step_sum = np.zeros(d + 1)      # [c^T (z - w), z - w]
    au = np.zeros(r)
    diag = o.copy()
    for j in range(d):
        step = z[j] - w[j]
        step_sum[j + 1] = step
        step_sum[0] += c[j] * step
        for i in range(r):
            au[i] += a[i] * U[j, i] * step
            diag[j] += a[i] * U[j, i] * U[j, i]
    first = -1.0
    full = True
    for _ in range(max_sweeps):
        largest = 0.0
        for j in range(d):
            if not full and z[j] == 0.0:
                continue
            change = _coordinate(j, z, step_sum, U, au, a, o, diag, g, c, db, l1,
                                 positive)
            largest = max(largest, abs(change) * np.sqrt(diag[j]))
        if e > 0.0:
            change_b = -(gb + step_sum[0] + e * db) / e
            db += change_b
            largest = max(largest, abs(change_b) * np.sqrt(e))
        if first < 0.0:
            first = largest
        small = largest <= threshold
        if full and small:
            return db, first, True
        full = small      # a full sweep checks an active set that has settled
    return db, first, False


def _diagonal_plus_low_rank_solve(o, Us, a, B):
    """``(diag(o) + Us diag(a) Us^T)^{-1} B`` by the Woodbury identity in its
    push-through form, ``D^{-1} B - D^{-1} Us (I + diag(a) Us^T D^{-1} Us)^{-1}
    diag(a) Us^T D^{-1} B`` (``D = diag(o)``, ``o > 0``): one solve of the rank's
    size, where the support's size would cost its cube. Written by hand:
    scipy has no diagonal-plus-low-rank solver."""
    DB = B / o[:, None]
    DU = Us / o[:, None]
    small = np.eye(a.size) + a[:, None] * (Us.T @ DU)
    return DB - DU @ np.linalg.solve(small, a[:, None] * (Us.T @ DB))


def _face_solve(w, z, db, g, U, a, o, c, e, gb, l1):
    """The minimiser of the model on the face of ``z``'s support and signs
    (``z_j = 0`` off the support), by one linear solve with the support's
    diagonal-plus-low-rank block (and the intercept's Schur complement);
    ``(z, db)`` moved towards it up to the first coordinate that changes sign,
    which is set to 0. Returns the new ``(z, db)``."""
    support = np.flatnonzero(z)
    if support.size == 0 and e == 0.0:
        return z, db
    signs = np.sign(z[support])
    Us = U[support]
    fixed = U.T @ w
    rhs = -g[support] - l1 * signs + o[support] * w[support] + Us @ (a * fixed)
    try:
        if e > 0.0:
            cs = c[support]
            both = _diagonal_plus_low_rank_solve(o[support], Us, a, np.column_stack([rhs, cs]))
            schur = e - cs @ both[:, 1]
            target_b = (-gb + c @ w - cs @ both[:, 0]) / schur
            target_z = both[:, 0] - both[:, 1] * target_b
        else:
            target_z = _diagonal_plus_low_rank_solve(o[support], Us, a, rhs[:, None])[:, 0]
            target_b = db
    except np.linalg.LinAlgError:
        return z, db
    if not (np.all(np.isfinite(target_z)) and np.isfinite(target_b)):
        return z, db
    out = z.copy()
    out[support], t = within_orthant(z[support], target_z)
    return out, db + t * (target_b - db)


def within_orthant(current, target):
    """The point of the segment from ``current`` (no zero entry) towards
    ``target`` where the first entry changes sign (``target`` if none does),
    with the entries that reach 0 there set to exactly 0, and its fraction
    ``t`` of the segment."""
    flips = np.flatnonzero(np.sign(target) != np.sign(current))
    if not flips.size:
        return target.copy(), 1.0
    ratios = current[flips] / (current[flips] - target[flips])
    t = float(np.min(ratios))
    out = current + t * (target - current)
    out[flips[ratios <= t]] = 0.0
    return out, t


def model_descent(w, g, U, a, o, c, e, gb, l1, tol, max_rounds, sweeps=20, positive=False):
    """Minimise the model of the module docstring: rounds of coordinate descent
    (at most ``sweeps`` sweeps each), each followed by the exact minimiser on the
    face of the current support and signs (an active-set step: coordinate
    descent finds the support, one linear solve the values, which coordinate
    descent alone approaches slowly when ``M`` is ill-conditioned).

    Parameters
    ----------
    w : ndarray (d,)
        The current weights (the centre of the model).
    g : ndarray (d,)
        Gradient of the smooth part in the weights.
    U : ndarray (d, r), a : ndarray (r,), o : ndarray (d,)
        The metric of the weights, ``diag(o) + U diag(a) U^T`` (positive definite).
    c : ndarray (d,), e : float, gb : float
        Coupling, curvature and gradient of the intercept (``e = 0``: none).
    l1 : float
        Weight of ``||z||_1``.
    tol : float
        Stop when a full sweep moves no coordinate by more than ``tol`` times
        the largest move of the first sweep (in the metric's norm of the
        coordinate).
    max_rounds, sweeps : int
    positive : bool, default False
        Minimise over ``z >= 0`` (``w >= 0`` then): the coordinate step is the
        one-sided soft threshold ``max(v - t, 0)``, the proximal operator of
        ``t |z| + I(z >= 0)``, and the face solve keeps the support positive
        (it stops where a coordinate reaches 0).

    Returns
    -------
    dz : ndarray (d,)
        ``z - w``.
    db : float
        The change of the intercept.
    converged : bool
    """
    z = np.array(w, dtype=np.float64)
    positive = bool(positive)
    db, first, done = _descent(w, z, 0.0, g, U, a, o, c, e, gb, l1, positive, -1.0, 1)
    threshold = tol * first
    for _ in range(max_rounds):
        db, _, done = _descent(w, z, db, g, U, a, o, c, e, gb, l1, positive, threshold,
                               sweeps)
        if done:
            break
        z, db = _face_solve(w, z, db, g, U, a, o, c, e, gb, l1)
    return z - w, db, done
