"""The SGD steps of pwSGD in the metric of a preconditioner, and their step sizes.

Yang, Chow, Re, Mahoney, "Weighted SGD for l_p regression with randomized
preconditioning", JMLR 18(211), 2018, Algorithm 1 steps 4-9. numpy/scipy only:
the estimator (:class:`dasketch.linear_model.PWSGDRegressor`) draws the rows and
gathers them; this module runs the sequential steps on them.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

# Steps per chunk: the drawn rows are moved to the metric of the iteration (one
# BLAS-3 triangular solve) a chunk at a time, so memory stays O(chunk d).
_CHUNK = 4096


def step_schedule(n_iter, eta0, mu, step_size=None):
    """Per-step step sizes and epoch ends of the default schedule.

    Epoch ``j`` uses ``eta_j = eta0 / 2^j`` for ``ceil(1 / (eta_j mu))`` steps:
    enough steps at a constant step for the bias to shrink by ``e`` while the
    noise floor, proportional to ``eta_j``, halves; so the error after ``T`` steps
    is within a small factor of the best constant step chosen for that ``T``, with
    no target accuracy to set. A given ``step_size`` is used constant, in one
    epoch.
    """
    if step_size is not None:
        ends = np.zeros(n_iter, dtype=bool)
        ends[-1] = True
        return np.full(n_iter, float(step_size)), ends
    etas = np.empty(n_iter)
    ends = np.zeros(n_iter, dtype=bool)
    t, eta = 0, eta0
    while t < n_iter:
        length = int(min(max(math.ceil(1.0 / (eta * mu)), 1), n_iter - t)) \
            if np.isfinite(1.0 / (eta * mu)) else n_iter - t
        etas[t:t + length] = eta
        ends[t + length - 1] = True
        t += length
        eta /= 2.0
    return etas, ends


def to_metric(rows, P):
    """Rows of ``A P^{-1}`` from rows of ``A`` for an upper triangular or diagonal
    (1-D) ``P``."""
    if np.ndim(P) == 1:
        return rows / P
    return scipy.linalg.solve_triangular(P, rows.T, trans="T").T


def run_pwsgd(rows, draws, b, probs, P, y0, *, p, etas, ends, box=None, record=None):
    """The SGD steps of pwSGD (Algorithm 1, steps 4-9) in the coordinates ``y = P x``.

    With ``U = A P^{-1}``, the update ``x <- argmin_{x in Z} eta c_t a_xi x +
    1/2 ||x - x_t||_H^2`` with ``H = P^T P`` is ``y <- Pi(y - eta c_t U_xi^T)``
    where ``Pi`` clips to the box ``[P lower, P upper]`` (``P`` diagonal). The
    step along a row is capped where it would cross the hyperplane
    ``U_xi y = b_xi`` (a randomized Kaczmarz projection), which keeps early
    steps stable when weights are estimates; the cap is inactive once the step
    size has decayed. Written as a Python loop because each step depends on the
    previous one and no library runs weighted SGD with a custom metric.

    Parameters
    ----------
    rows : ndarray (m, d)
        The distinct drawn rows of ``A``.
    draws : ndarray (T,)
        Index into ``rows`` of each draw, in order.
    b, probs : ndarray (T,)
        Target and sampling probability of each draw.
    P : ndarray (d, d) upper triangular, or (d,) diagonal
    y0 : ndarray (d,)
    p : {1, 2}
    etas, ends : ndarray (T,)
        Step size per step, and where epochs end (for p = 1 the iterate restarts
        from the epoch's average).
    box : (lower, upper) in y coordinates, optional
    record : callable, optional
        ``record(t, y)`` at the end of each chunk of steps.

    Returns
    -------
    ndarray (d,)
        Last iterate (p = 2) or average of the last epoch (p = 1).
    """
    y = np.array(y0, dtype=np.float64)
    total = np.zeros_like(y)
    count = 0
    lower, upper = box if box is not None else (None, None)
    n_iter = draws.shape[0]
    for t0 in range(0, n_iter, _CHUNK):
        t1 = min(t0 + _CHUNK, n_iter)
        U = to_metric(rows[draws[t0:t1]], P)
        with np.errstate(divide="ignore"):
            inv_norm2 = 1.0 / np.einsum("ij,ij->i", U, U)
        scale = (2.0 if p == 2 else 1.0) * etas[t0:t1] / probs[t0:t1]
        bc = b[t0:t1].tolist()
        ends_c = ends[t0:t1].tolist()
        if p == 2:
            alpha = np.minimum(scale, inv_norm2).tolist()
            for j in range(t1 - t0):
                u = U[j]
                y -= (alpha[j] * (u.dot(y) - bc[j])) * u
                if lower is not None:
                    np.clip(y, lower, upper, out=y)
        else:
            alpha, cap = scale.tolist(), inv_norm2.tolist()
            for j in range(t1 - t0):
                u = U[j]
                r = u.dot(y) - bc[j]
                y -= math.copysign(min(alpha[j], abs(r) * cap[j]), r) * u
                if lower is not None:
                    np.clip(y, lower, upper, out=y)
                total += y
                count += 1
                if ends_c[j]:
                    y = total / count
                    total[:] = 0.0
                    count = 0
        if record is not None:
            record(t1, y if p == 2 or count == 0 else total / count)
    if p == 1 and count:
        return total / count
    return y
