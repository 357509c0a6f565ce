"""Losses of dual random projection, element-wise in the margin ``t = x^T w + b``.

Each loss ``l(t, y)`` comes with its derivative ``l'(t, y)`` (the dual variable of
Zhang et al., COLT 2013) and its (generalised) second derivative ``l''(t, y)``, the
weights of the Hessian ``X^T diag(l'') X + lambda I`` of the full problem. All
functions accept arrays of any matching shape (one column per target of a
one-vs-rest fit).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

LOSSES = ("squared", "logistic", "smoothed_hinge")


def loss_value(t, y, loss, smoothing=1.0):
    """``l(t, y)``: ``(t - y)^2 / 2``; ``log(1 + exp(-u))``; the smoothed hinge
    (0 for ``u >= 1``, ``1 - u - s/2`` for ``u <= 1 - s``, ``(1 - u)^2 / (2 s)``
    between), with ``u = y t`` and ``s = smoothing``."""
    if loss == "squared":
        return 0.5 * (t - y) ** 2
    u = y * t
    if loss == "logistic":
        return np.logaddexp(0.0, -u)
    return np.where(u >= 1.0, 0.0,
                    np.where(u <= 1.0 - smoothing, 1.0 - u - 0.5 * smoothing,
                             (1.0 - u) ** 2 / (2.0 * smoothing)))


def loss_derivative(t, y, loss, smoothing=1.0):
    """``l'(t, y)``, the derivative in the margin ``t``: the dual variable."""
    if loss == "squared":
        return t - y
    u = y * t
    if loss == "logistic":
        return -y * expit(-u)
    return -y * np.clip((1.0 - u) / smoothing, 0.0, 1.0)


def loss_curvature(t, y, loss, smoothing=1.0):
    """``l''(t, y)``; for the smoothed hinge the generalised second derivative
    ``1/s`` inside ``1 - s < u < 1`` and 0 outside."""
    if loss == "squared":
        return np.ones(np.broadcast(t, y).shape)
    u = y * t
    if loss == "logistic":
        p = expit(u)
        return p * (1.0 - p)
    return ((u > 1.0 - smoothing) & (u < 1.0)) / smoothing


def intercept_only(y, loss, smoothing=1.0, weights=None):
    """The optimal constant margin ``b0`` of ``sum_i s_i l(b, y_i)`` per column of ``y``
    (``s`` the sample ``weights``, ones when None).

    It is the model the relative optimality residual is measured against when an
    intercept is fitted: the residual of the full problem at ``(w, b) = (0, b0)``
    is ``X^T (s l'(b0, y))``, unaffected by the (weighted) mean of the targets.
    """
    y = np.asarray(y, dtype=np.float64)
    columns = y.reshape(y.shape[0], -1)
    s = np.ones(columns.shape[0]) if weights is None else np.asarray(weights, np.float64)
    total = s.sum()
    out = np.empty(columns.shape[1])
    for k, col in enumerate(columns.T):
        if loss == "squared":
            out[k] = s @ col / total
            continue
        positive = s[col > 0].sum() / total
        if loss == "logistic" and 0.0 < positive < 1.0:
            out[k] = np.log(positive / (1.0 - positive))
            continue
        import scipy.optimize  # client side only: keep worker imports light

        # Convex in b; labels of one sign only have no finite logistic optimum, so
        # the search is bounded (|b| = 30 predicts the class with p > 1 - 1e-13).
        res = scipy.optimize.minimize_scalar(
            lambda b, col=col: s @ loss_value(np.full_like(col, b), col, loss, smoothing),
            bounds=(-30.0, 30.0), method="bounded", options={"xatol": 1e-10})
        out[k] = res.x
    return out
