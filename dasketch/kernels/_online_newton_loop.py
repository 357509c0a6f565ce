"""Compiled per-example loop of the sketched online Newton step (numba).

:class:`dasketch.kernels.online_newton.OnlineNewton` keeps its state in a few
numpy arrays and hands whole blocks of rows to :func:`run_rows`, which processes
them strictly in order (predict, loss, sketch update, step) without returning to
Python. The per-example work is a handful of loops over the non-zeros of the row
and over the ``d x k`` basis of the sketch; a hand-written loop is used where
numpy would allocate a temporary per example (numba compiles them to tight
machine code), LAPACK (through numba's ``numpy.linalg``) for the small
eigen-problems. The names of the state's slots, and the updates of the sketch
(append a row, shrink), are in :mod:`dasketch.kernels._online_newton_sketch`.

State (see :class:`~dasketch.kernels.online_newton.OnlineNewton` for the maths):

* ``Q`` (kmax x d): its first k rows are an orthonormal basis of the sketch's
  row space; ``K`` (kmax x kmax) the Gram matrix ``M^T M`` of the sketch
  rows in that basis, so that ``B^T B = Q^T K Q``; ``P = (K + alpha I)^{-1}``
  while H is non-singular; ``wt``, ``inv`` a cached eigen-decomposition of K.
* The iterate is held as ``u = v + Q^T c``: the Woodbury solves give vectors of
  the form ``Q^T coef + beta x``, so a step updates the ``k`` numbers ``c`` and
  the non-zeros of ``x`` in ``v``; only the new basis vector of a sketch update
  touches all d coordinates.
"""

import numpy as np
from numba import njit

from dasketch.kernels._online_newton_sketch import (  # noqa: F401 - the state layout is re-exported
    _FULL,
    _RFD,
    ALPHA0,
    BASIS_TOL,
    BOUND,
    CAPACITY,
    ETA,
    FACTORED,
    FLOOR,
    GRAD_MAX,
    HAS_INVERSE,
    INV_ALPHA,
    LOSS,
    METHOD,
    METHOD_CODES,
    MU,
    N_EIG,
    N_FLOAT_PARAMS,
    N_FLOAT_STATE,
    N_INT_PARAMS,
    N_INT_STATE,
    N_ROWS,
    N_SHRINKS,
    RANK,
    RCOND,
    ROW_MAX,
    SHRINKAGE,
    SKETCH_SIZE,
    TOP,
    TRACE,
    USE_FLOOR,
    V_NORM_SQ,
    T,
    add_basis_combination,
    append,
    current_alpha,
    rebuild_inverse,
    shrink,
    update_floor,
)

# Iterates whose norm exceeds this are reported as diverged.
DIVERGENCE_NORM = 1e100

LOSS_CODES = {"squared": 0, "logistic": 1, "hinge": 2}
_SQUARED, _LOGISTIC = 0, 1
# Return codes of run_rows.
OK, GRADIENT_OVERFLOW, DIVERGED = 0, 1, 2


@njit(cache=True)
def loss_and_slope(code, z, y):
    """Loss ``l(z, y)`` and its derivative in ``z`` (overflow-free logistic)."""
    if code == _SQUARED:
        r = z - y
        return r * r, 2.0 * r
    m = y * z
    if code == _LOGISTIC:
        soft_minus = max(-m, 0.0) + np.log1p(np.exp(-abs(m)))  # log(1 + exp(-m))
        soft_plus = max(m, 0.0) + np.log1p(np.exp(-abs(m)))    # log(1 + exp(m))
        return soft_minus, -y * np.exp(-soft_plus)
    if m < 1.0:
        return 1.0 - m, -y
    return 0.0, 0.0


@njit(cache=True)
def basis_coordinates(Q, k, idx, val, is_sparse, out):
    """``out[:k] = Q x`` for the row with non-zeros ``val`` at ``idx``: O(k nnz)."""
    if not is_sparse:
        out[:k] = Q[:k] @ val
        return
    out[:k] = 0.0
    for j in range(idx.size):
        c = idx[j]
        v = val[j]
        for i in range(k):
            out[i] += Q[i, c] * v


@njit(cache=True)
def is_nonsingular(fs, ist, alpha):
    """Whether the maintained ``(K + alpha I)^{-1}`` applies (alpha above cut-off)."""
    return ist[HAS_INVERSE] == 1 and alpha > 0 and alpha > RCOND * (fs[TRACE] + alpha)


@njit(cache=True)
def factor(K, wt, inv, fs, ist, alpha, d):
    """Eigen-decomposition of H on span(Q) (cached until the sketch changes)."""
    if ist[FACTORED]:
        return
    k = ist[RANK]
    top = alpha
    if k:
        eig, vecs = np.linalg.eigh(np.ascontiguousarray(K[:k, :k]))
        for i in range(k):  # descending order
            lam = max(eig[k - 1 - i], 0.0)
            wt[i, :k] = vecs[:, k - 1 - i]
            inv[i] = lam + alpha
        top = max(inv[0], alpha)
        for i in range(k):
            inv[i] = 1.0 / inv[i] if inv[i] > RCOND * top else 0.0
    fs[INV_ALPHA] = 1.0 / alpha if (alpha > RCOND * top and alpha > 0 and k < d) else 0.0
    fs[TOP] = top
    ist[N_EIG] = k
    ist[FACTORED] = 1


@njit(cache=True)
def solve(K, P, wt, inv, fs, ist, alpha, qx, d, coef, null_coef, work):
    """``H^+ x = Q^T coef + beta x`` for a row with ``qx = Q x``.

    Returns ``(beta, singular, null_beta)``; when ``singular`` the part of x in the
    null space of H is ``Q^T null_coef + null_beta x``.
    """
    k = ist[RANK]
    if is_nonsingular(fs, ist, alpha):
        # Woodbury: H^{-1} x = Q^T (K + alpha I)^{-1} Q x + (x - Q^T Q x) / alpha.
        for i in range(k):
            s = 0.0
            for j in range(k):
                s += P[i, j] * qx[j]
            coef[i] = s - qx[i] / alpha
        return 1.0 / alpha, False, 0.0
    factor(K, wt, inv, fs, ist, alpha, d)
    for i in range(k):
        s = 0.0
        for j in range(k):
            s += wt[i, j] * qx[j]
        work[i] = s  # eigen-coordinates of Q x
    for j in range(k):
        s = 0.0
        for i in range(k):
            s += wt[i, j] * inv[i] * work[i]
        coef[j] = s
    inv_alpha = fs[INV_ALPHA]
    if inv_alpha > 0:
        for j in range(k):
            coef[j] -= inv_alpha * qx[j]
        return inv_alpha, False, 0.0
    # Null space: the complement of span(Q) and the directions the cut-off dropped.
    for j in range(k):
        s = -qx[j]
        for i in range(k):
            if inv[i] == 0.0:
                s += wt[i, j] * work[i]
        null_coef[j] = s
    return 0.0, True, 1.0


@njit(cache=True)
def move_sparse(v, idx, val, step, fs):
    """``v[idx] -= step * val``, keeping ``||v||^2`` up to date in O(nnz)."""
    change = 0.0
    for j in range(idx.size):
        old = v[idx[j]]
        new = old - step * val[j]
        v[idx[j]] = new
        change += (new - old) * (new + old)
    fs[V_NORM_SQ] += change


@njit(cache=True)
def iterate_norm(Q, v, c, k):
    """``||v + Q^T c||`` (O(k d))."""
    u = v.copy()
    add_basis_combination(Q, k, c, 1.0, u)
    return np.sqrt(u @ u)


@njit(cache=True)
def run_rows(indptr, indices, data, dense, is_sparse, y, weights, v, c, Q, K, P, wt, inv,
             fs, ist, fp, ip, z_out, loss_out):
    """One round of the online Newton step per row, in order.

    Rows are CSR (``indptr``, ``indices``, ``data``) when ``is_sparse``, else the
    rows of ``dense``. Example ``i`` has the loss ``weights[i] * l(z, y[i])``: its
    gradient, and so its sketched row, is scaled by ``weights[i]``; an example of
    weight 0 is skipped (no projection, no step, ``t`` and the floor unchanged)
    and its prediction is ``clip(u^T x, -C, C)``. Writes the prediction made
    before each label and its weighted loss.
    Returns ``(status, row)``: ``OK`` after all rows, or ``GRADIENT_OVERFLOW`` /
    ``DIVERGED`` at the row where it happened (the state is then inconsistent and
    must be discarded).
    """
    d = v.size
    kmax = c.size
    qx = np.zeros(kmax + 1)
    coef = np.zeros(kmax + 1)
    null_coef = np.zeros(kmax + 1)
    work = np.zeros(kmax + 1)
    row = np.zeros(kmax + 1)
    resid = np.zeros(d)
    all_columns = np.arange(d, dtype=indices.dtype)
    bound = fp[BOUND]
    for i in range(y.size):
        if is_sparse:
            idx = indices[indptr[i]:indptr[i + 1]]
            val = data[indptr[i]:indptr[i + 1]]
        else:
            idx = all_columns
            val = dense[i]
        k = ist[RANK]
        basis_coordinates(Q, k, idx, val, is_sparse, qx)
        zu = 0.0
        xx = 0.0
        for j in range(idx.size):
            zu += v[idx[j]] * val[j]
            xx += val[j] * val[j]
        zu += c[:k] @ qx[:k]
        weight = weights[i]
        if weight == 0.0:
            z_out[i] = min(max(zu, -bound), bound)
            loss_out[i] = 0.0
            continue
        # 1. project u onto K_t = {|w^T x| <= C} in the H-(semi)norm
        excess = abs(zu) - bound
        projected = False
        if excess > 0:
            alpha = current_alpha(fs, fp, ip)
            beta, singular, null_beta = solve(K, P, wt, inv, fs, ist, alpha, qx, d, coef,
                                              null_coef, work)
            denom = coef[:k] @ qx[:k] + beta * xx
            if singular:
                top = fs[TRACE] + alpha if is_nonsingular(fs, ist, alpha) else fs[TOP]
                if denom <= RCOND * xx * top:
                    # x leaves the range of H: step along its null-space part
                    coef[:k] = null_coef[:k]
                    beta = null_beta
                    denom = coef[:k] @ qx[:k] + beta * xx
            if denom > 0:
                gamma = np.copysign(excess, zu) / denom
                c[:k] -= gamma * coef[:k]
                move_sparse(v, idx, val, gamma * beta, fs)
                projected = True
        # 2. predict; the projected prediction is exactly +-C
        z = np.copysign(bound, zu) if projected else zu
        value, slope = loss_and_slope(ip[LOSS], z, y[i])
        slope *= weight
        z_out[i] = z
        loss_out[i] = weight * value
        fs[T] += 1.0
        if slope == 0.0:
            if ip[USE_FLOOR]:  # R_t counts every row seen, with a gradient or not
                update_floor(K, P, fs, ist, fp, ip, np.sqrt(xx), 0.0)
            continue
        # 3. sketch sqrt(mu + eta / t) g with g = slope * x
        scale = np.sqrt(fp[MU] + fp[ETA] / fs[T]) * slope
        if not np.isfinite(scale * scale * xx):
            return GRADIENT_OVERFLOW, i
        if ip[USE_FLOOR]:
            update_floor(K, P, fs, ist, fp, ip, np.sqrt(xx), slope)
        append(Q, K, P, fs, ist, fp, ip, idx, val, scale, qx, c, v, resid, row)
        # 4. u = w - H^+ g
        k = ist[RANK]
        alpha = current_alpha(fs, fp, ip)
        beta, _, _ = solve(K, P, wt, inv, fs, ist, alpha, qx, d, coef, null_coef, work)
        c[:k] -= slope * coef[:k]
        move_sparse(v, idx, val, slope * beta, fs)
        # ||u|| <= ||v|| + ||c|| (Q orthonormal) is O(k); the exact norm, O(k d),
        # only when that bound is large or not finite.
        norm_bound = np.sqrt(abs(fs[V_NORM_SQ])) + np.sqrt(c[:k] @ c[:k])
        if not np.isfinite(norm_bound) or norm_bound > DIVERGENCE_NORM:
            norm = iterate_norm(Q, v, c, k)
            if not np.isfinite(norm) or norm > DIVERGENCE_NORM:
                return DIVERGED, i
    return OK, y.size
