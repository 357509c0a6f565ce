r"""Blocked passes over X for multinomial (softmax) logistic regression.

The problem of :mod:`.multinomial`,

.. math:: \min_{W, b} \frac{\lambda}{2} \|W\|_F^2
          + \sum_i s_i \Big(\log \sum_k e^{t_{ik}} - t_{i y_i}\Big),
          \qquad t_i = W^T x_i + b,

has one column of ``W`` (d x K) and one entry of ``b`` per class. Each pass
reads every block of X once through :func:`~dasketch._blocks.map_reduce` (as
the passes of :mod:`.passes`) and tree-sums small per-block results. The
targets ``y`` are the one-hot rows (n x K, 0 or 1) and ``s`` the sample
weights (n x 1), both row-aligned with the blocks; ``X_hat`` is the persisted
projection of :func:`.passes.projection_pass`.

The per-row Hessian of the loss in the margins is ``diag(p_i) - p_i p_i^T``
(``p_i = softmax(t_i)``), so the Hessian of the problem is block-structured
over classes: block ``(k, l)`` is ``[X 1]^T diag(s p_k (delta_kl - p_l)) [X 1]``.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from scipy.special import logsumexp, softmax

from dasketch._blocks import (
    add,
    block_namespace,
    compute,
    forward_backward,
    like,
    map_reduce,
    to_host,
)
from dasketch.linear_model.dual_projection.passes import _weighted_grams, _with_ones


def cross_entropy(T, y, s):
    """``sum_i s_i (logsumexp(t_i) - y_i^T t_i)`` for margins ``T`` and one-hot ``y``."""
    return float(s[:, 0] @ (logsumexp(T, axis=1) - np.einsum("ij,ij->i", y, T)))


def softmax_curvature(xa, P, s):
    """The projected Hessian ``[xa^T diag(s p_k (delta_kl - p_l)) xa]_{kl}``
    (K m1 x K m1, class-major) for rows ``xa`` (n x m1) and probabilities ``P``:
    the block diagonal of ``xa^T diag(s p_k) xa`` less ``Z^T Z``,
    ``Z_i = sqrt(s_i) p_i (x) xa_i``; ``xa`` in its library (the products
    there), ``P`` and ``s`` and the result on the host."""
    n, K = P.shape
    m1 = xa.shape[1]
    Z = block_namespace(xa).reshape(like(xa, np.sqrt(s) * P)[:, :, None] * xa[:, None, :],
                                    (n, K * m1))
    out = -to_host(Z.T @ Z)
    diagonal = _weighted_grams(s * P, xa).reshape(K, m1, m1)
    for k in range(K):
        out[k * m1:(k + 1) * m1, k * m1:(k + 1) * m1] += diagonal[k]
    return out


def _softmax_evaluate_block(block, start, stop, xhat, y, s, *, W, D, b, db, steps, curvature):
    K = W.shape[1]

    def residuals(F, rows):
        """``s (p - y)`` at the end point, row by row."""
        T = F[:, :K] + b if D is None else F[:, :K] + b + F[:, K:] + db
        return s[rows] * (softmax(T, axis=1) - y[rows])

    F, R, backward = forward_backward(block, W if D is None else np.hstack([W, D]),
                                      residuals)
    T = F[:, :K] + b
    path = []
    if D is not None:
        U = F[:, K:] + db
        path = [cross_entropy(T + eta * U, y, s) for eta in steps]
        T = T + U
    parts = [[cross_entropy(T, y, s)], backward.ravel(), R.sum(axis=0)]
    if curvature:
        parts.append(softmax_curvature(_with_ones(xhat), softmax(T, axis=1), s).ravel())
    return np.concatenate(parts + [np.asarray(path, dtype=np.float64)])


def evaluate_softmax(blocks, xhat, yd, sd, W, b, *, direction=None, steps=None,
                     curvature=True, split_every, client):
    """One pass at ``(W, b)``: the loss sum, the gradient terms ``X^T S (P - Y)``
    (d x K) and ``sum_i s_i (p_i - y_i)`` (K) and, with ``curvature``, the
    projected Hessian :func:`softmax_curvature` of ``[X_hat 1]``.

    With a ``direction`` ``(D, db)`` all is taken at ``(W + D, b + db)`` and the
    loss sums at ``(W + eta D, b + eta db)`` for every ``eta`` of ``steps`` come
    back last (the line search then needs no further pass).
    Returns ``(value, gradient, sums, curvature, path)``."""
    d, K = W.shape
    D, db = direction if direction is not None else (None, None)
    m1 = xhat.shape[1] + 1
    size = (K * m1) ** 2 if curvature else 0
    func = partial(_softmax_evaluate_block, b=b, db=db, steps=steps, curvature=curvature)
    total = map_reduce(blocks, func, add, xhat, yd, sd, split_every=split_every,
                       shared={"W": W, "D": D}, keeps_block=False,
                       part_bytes=8 * (1 + d * K + K + size))
    (packed,) = compute(total, client=client)
    value, gradient = float(packed[0]), packed[1:1 + d * K].reshape(d, K)
    sums, rest = packed[1 + d * K:1 + d * K + K], packed[1 + d * K + K:]
    gram = rest[:size].reshape(K * m1, K * m1) if curvature else None
    return value, gradient, sums, gram, rest[size:]


def _softmax_hessian_block(block, start, stop, y, s, *, W, D, b, db):
    K = W.shape[1]

    def directions(F, rows):
        """``s (diag(p) - p p^T) u`` row by row, ``u`` the margins of the direction."""
        P = softmax(F[:, K:] + b, axis=1)
        PU = P * (F[:, :K] + db)
        return s[rows] * (PU - P * PU.sum(axis=1, keepdims=True))

    _, R, backward = forward_backward(block, np.hstack([D, W]), directions)
    return np.concatenate([backward.ravel(), R.sum(axis=0)])


def softmax_hessian(blocks, yd, sd, W, b, D, db, *, split_every, client):
    """One pass: the loss part of the Hessian at ``(W, b)`` times the direction
    ``(D, db)``: ``(X^T S Phi, sum_i s_i Phi_i)``, ``Phi_i = (diag(p_i) - p_i
    p_i^T) (D^T x_i + db)``."""
    d, K = W.shape
    func = partial(_softmax_hessian_block, b=b, db=db)
    (packed,) = compute(map_reduce(blocks, func, add, yd, sd, split_every=split_every,
                                   shared={"W": W, "D": D}, keeps_block=False),
                        client=client)
    return packed[:d * K].reshape(d, K), packed[d * K:]
