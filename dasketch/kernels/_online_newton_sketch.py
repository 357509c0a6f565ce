"""State layout and gradient sketch of the compiled online Newton step (numba).

The state of :class:`~dasketch.kernels.online_newton.OnlineNewton` lives in a few
numpy arrays; this module names their slots and keeps the sketch of the scaled
gradients in the orthonormal basis ``Q`` (see :mod:`dasketch.kernels._online_newton_loop`
for the layout): :func:`append` adds a sketch row (Gram-Schmidt against ``Q``, run
twice on cancellation, and a Sherman-Morrison update of ``P = (K + alpha I)^{-1}``),
:func:`shrink` is the FD shrink of the Gram matrix ``K`` (Liberty, KDD 2013;
Luo et al., JMLR 2019, Algorithm 2), and :func:`update_floor` raises the data-derived
floor of the regulariser ``alpha``.

:func:`~dasketch.kernels._online_newton_loop.run_rows` compiles these functions
into its own machine code, and numba's on-disk cache (``cache=True``) checks only
the source file of the function it compiled: after a change here, remove the
cached ``_online_newton_loop`` entries (``*.nbi``, ``*.nbc`` in ``__pycache__``).
"""

import numpy as np
from numba import njit

# Eigenvalues of H below RCOND * (largest eigenvalue) are treated as zero.
RCOND = 1e-12
# A sketch row whose part outside span(Q) is below this fraction of its norm adds
# no basis direction (that part is rounding noise).
BASIS_TOL = 1e-12
# Float state slots.
T, SHRINKAGE, TRACE, GRAD_MAX, ROW_MAX, FLOOR, INV_ALPHA, TOP, V_NORM_SQ = range(9)
N_FLOAT_STATE = 9
# Integer state slots.
N_ROWS, RANK, HAS_INVERSE, FACTORED, N_EIG, N_SHRINKS = range(6)
N_INT_STATE = 6
# Float parameters.
ALPHA0, BOUND, ETA, MU = range(4)
N_FLOAT_PARAMS = 4
# Integer parameters.
SKETCH_SIZE, CAPACITY, LOSS, METHOD, USE_FLOOR = range(5)
N_INT_PARAMS = 5
METHOD_CODES = {"rfd": 0, "fd": 1, "full": 2}
_RFD, _FULL = 0, 2


@njit(cache=True)
def current_alpha(fs, fp, ip):
    """``max(alpha0 + shrinkage / 2, floor)`` (RFD) or ``max(alpha0, floor)``."""
    alpha = fp[ALPHA0]
    if ip[METHOD] == _RFD:
        alpha += 0.5 * fs[SHRINKAGE]
    if ip[USE_FLOOR] and fs[FLOOR] > alpha:
        return fs[FLOOR]
    return alpha


@njit(cache=True)
def add_basis_combination(Q, k, coef, scale, out):
    """``out += scale * Q^T coef`` (dense, O(k d))."""
    if k:
        out += scale * (coef[:k] @ Q[:k])


@njit(cache=True)
def rebuild_inverse(K, P, ist, alpha):
    """``P = (K + alpha I)^{-1}`` from scratch (after alpha changed)."""
    k = ist[RANK]
    if alpha <= 0:
        ist[HAS_INVERSE] = 0
        return
    if k:
        A = K[:k, :k].copy()
        for i in range(k):
            A[i, i] += alpha
        P[:k, :k] = np.linalg.inv(A)
    ist[HAS_INVERSE] = 1


@njit(cache=True)
def shrink(Q, K, P, fs, ist, fp, ip, qx, c, v):
    """FD shrink to ``l - 1`` rows, from the eigen-decomposition of the Gram matrix
    ``K`` (section 2 of DESIGN.md); rotates the basis, ``Q x`` and the iterate's
    coordinates, and folds the dropped part of the iterate into ``v``."""
    l = ip[SKETCH_SIZE]
    k = ist[RANK]
    eig, vecs = np.linalg.eigh(np.ascontiguousarray(K[:k, :k]))
    sq = np.empty(k)
    for i in range(k):
        sq[i] = max(eig[k - 1 - i], 0.0)
    delta = sq[l - 1] if k >= l else 0.0
    keep = np.empty(min(k, l - 1), dtype=np.int64)
    lead = np.empty(min(k, l - 1))
    nk = 0
    for i in range(min(k, l - 1)):
        if sq[i] - delta > 0:
            keep[nk] = i
            lead[nk] = sq[i] - delta
            nk += 1
    W = np.empty((k, nk))  # columns: kept right singular vectors of M
    for j in range(nk):
        W[:, j] = vecs[:, k - 1 - keep[j]]
    new_c = W.T @ c[:k]
    dropped = c[:k] - W @ new_c
    add_basis_combination(Q, k, dropped, 1.0, v)
    fs[V_NORM_SQ] = v @ v
    new_qx = W.T @ qx[:k]
    Q[:nk] = np.ascontiguousarray(W.T) @ Q[:k]
    c[:nk] = new_c
    qx[:nk] = new_qx
    K[:, :] = 0.0
    P[:, :] = 0.0
    trace = 0.0
    for j in range(nk):
        K[j, j] = lead[j]
        trace += lead[j]
    ist[RANK] = nk
    ist[N_ROWS] = nk
    ist[N_SHRINKS] += 1
    ist[FACTORED] = 0
    fs[SHRINKAGE] += delta
    fs[TRACE] = trace
    alpha = current_alpha(fs, fp, ip)
    if alpha > 0:  # K is diagonal right after a shrink
        for j in range(nk):
            P[j, j] = 1.0 / (lead[j] + alpha)
        ist[HAS_INVERSE] = 1
    else:
        ist[HAS_INVERSE] = 0


@njit(cache=True)
def append(Q, K, P, fs, ist, fp, ip, idx, val, scale, qx, c, v, resid, row):
    """Append the sketch row ``a = scale * x`` (``Q a = scale * qx``)."""
    d = Q.shape[1]
    k = ist[RANK]
    resid[:] = 0.0
    norm_sq = 0.0
    for j in range(idx.size):
        resid[idx[j]] += scale * val[j]
        norm_sq += (scale * val[j]) ** 2
    for i in range(k):
        row[i] = scale * qx[i]
    add_basis_combination(Q, k, row, -1.0, resid)
    rho = np.sqrt(resid @ resid)
    norm_a = np.sqrt(norm_sq)
    if k and rho < 0.7 * norm_a:
        # Cancellation: a second Gram-Schmidt pass keeps Q orthonormal to working
        # precision ("twice is enough", Kahan-Parlett criterion).
        corr = Q[:k] @ resid
        add_basis_combination(Q, k, corr, -1.0, resid)
        row[:k] += corr
        rho = np.sqrt(resid @ resid)
    alpha = current_alpha(fs, fp, ip)
    if rho > BASIS_TOL * norm_a and k < d:
        Q[k] = resid / rho
        K[k, :k + 1] = 0.0
        K[:k + 1, k] = 0.0
        row[k] = rho
        c[k] = 0.0
        s = 0.0
        for j in range(idx.size):
            s += resid[idx[j]] * val[j]
        qx[k] = s / rho
        if ist[HAS_INVERSE]:  # the new direction enters K + alpha I with alpha
            P[k, :k + 1] = 0.0
            P[:k + 1, k] = 0.0
            P[k, k] = 1.0 / alpha if alpha > 0 else 0.0
        k += 1
        ist[RANK] = k
    ist[N_ROWS] += 1
    for i in range(k):
        for j in range(k):
            K[i, j] += row[i] * row[j]
    fs[TRACE] += row[:k] @ row[:k]
    if ist[HAS_INVERSE]:  # Sherman-Morrison: (K + a a^T + alpha I)^{-1}, O(k^2)
        pa = np.zeros(k)
        for i in range(k):
            for j in range(k):
                pa[i] += P[i, j] * row[j]
        denom = 1.0 + row[:k] @ pa
        for i in range(k):
            for j in range(k):
                P[i, j] -= pa[i] * pa[j] / denom
    ist[FACTORED] = 0
    if ist[N_ROWS] == ip[CAPACITY]:
        shrink(Q, K, P, fs, ist, fp, ip, qx, c, v)


@njit(cache=True)
def update_floor(K, P, fs, ist, fp, ip, row_norm, slope):
    """Raise the data-derived floor of alpha with the row and gradient just seen."""
    before = current_alpha(fs, fp, ip)
    fs[ROW_MAX] = max(fs[ROW_MAX], row_norm)
    fs[GRAD_MAX] = max(fs[GRAD_MAX], abs(slope) * row_norm)
    fs[FLOOR] = fs[GRAD_MAX] * fs[ROW_MAX] / (2.0 * fp[BOUND])
    after = current_alpha(fs, fp, ip)
    if after != before:
        ist[FACTORED] = 0
        rebuild_inverse(K, P, ist, after)
