"""The blocked pass of the l1 and elastic-net fits (:mod:`.proximal`).

One pass over the row blocks of X at ``(W + S, b + sb)`` (``S = 0`` without a
direction) returns per target what the proximal Newton step, its line search
and the duality gap (:mod:`.duality_gap`) need: the loss sum, ``X^T S l'`` and
``sum_i s_i l'``, for the logistic loss the same restricted to the positive
class (the dual point is made feasible for the intercept by scaling one
class), the projected curvature ``[X_hat 1]^T diag(s l'') [X_hat 1]`` of the
preconditioner (not for the squared loss, whose curvature is constant), and
the loss sums at ``(W + eta S, b + eta sb)`` for every ``eta`` of ``steps``,
and the diagonal of the Hessian of the loss, ``(X o X)^T (s l'')``, which
corrects the diagonal of the preconditioner's metric.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse

from dasketch._blocks import add, compute, map_reduce
from dasketch.kernels.block_products import rows_forward_backward
from dasketch.linear_model.dual_projection.losses import loss_curvature, loss_derivative, loss_value
from dasketch.linear_model.dual_projection.passes import _weighted_grams, _with_ones


def _l1_block(block, start, stop, xhat, y, s, *, W, S, b, sb, steps, loss, support):
    k = W.shape[1]
    split = loss != "squared"

    def columns(F, rows):
        T = F[:, :k] + b if S is None else F[:, :k] + F[:, k:] + (b + sb)
        dual = s[rows] * loss_derivative(T, y[rows], loss)
        return np.hstack([dual, dual * (y[rows] > 0)]) if split else dual

    F, U, backward = rows_forward_backward(block, W if S is None else np.hstack([W, S]),
                                           columns)
    T = F[:, :k] + b
    path = []
    if S is not None:
        D = F[:, k:] + sb
        path = [(s * loss_value(T + eta * D, y, loss)).sum(axis=0) for eta in steps]
        T = T + D
    curvature = s * loss_curvature(T, y, loss)
    squares = block.multiply(block) if scipy.sparse.issparse(block) else np.square(block)
    parts = [(s * loss_value(T, y, loss)).sum(axis=0), backward.ravel(), U.sum(axis=0),
             np.asarray(squares.T @ curvature, dtype=np.float64).ravel()]
    if split:
        parts.append(_weighted_grams(curvature, _with_ones(xhat)))
    parts.append(np.ravel(path))
    if support is not None:
        picked = block[:, support]
        picked = picked.toarray() if scipy.sparse.issparse(picked) else picked
        parts.append(_weighted_grams(curvature, _with_ones(np.asarray(picked, np.float64))))
    return np.concatenate(parts)


class PassResult:
    """What :func:`l1_pass` returns, per target: ``value`` (K), ``xt_dual``
    (d x K, ``X^T S l'``), ``dual_sum`` (K), ``diagonal`` (d x K, the
    Hessian's diagonal ``(X o X)^T (s l'')``), for the logistic loss
    ``xt_positive`` and ``positive_sum`` (the same over the rows of label +1)
    and ``curvature`` (K x (m+1) x (m+1)), else None; ``path`` (len(steps) x K)
    with a direction; ``face`` (K x (J+1) x (J+1)) for a ``support`` of J
    columns, else None."""

    def __init__(self, packed, d, k, m1, split, n_steps, support):
        width = 2 * k if split else k
        self.value, rest = packed[:k], packed[k:]
        backward, rest = rest[:d * width].reshape(d, width), rest[d * width:]
        sums, rest = rest[:width], rest[width:]
        self.diagonal, rest = rest[:d * k].reshape(d, k), rest[d * k:]
        self.xt_dual, self.dual_sum = backward[:, :k], sums[:k]
        self.xt_positive = backward[:, k:] if split else None
        self.positive_sum = sums[k:] if split else None
        self.curvature = rest[:k * m1 * m1].reshape(k, m1, m1) if split else None
        rest = rest[k * m1 * m1:] if split else rest
        self.path, rest = (rest[:n_steps * k].reshape(n_steps, k), rest[n_steps * k:]) \
            if n_steps else (None, rest)
        self.support = support
        size = 0 if support is None else support.size + 1
        self.face = rest.reshape(k, size, size) if support is not None else None


def l1_pass(blocks, xhat, yd, sd, W, b, direction=None, steps=(), support=None, *, loss,
            split_every, client):
    """One pass over X at ``(W, b)`` plus ``direction`` ``(S, sb)``; see the module
    docstring. With ``support`` (column indices) also the Hessian of the loss
    on those columns and the intercept, ``[X_J 1]^T diag(s l'') [X_J 1]`` per
    target (``face``). Returns a :class:`PassResult`."""
    S, sb = direction if direction is not None else (None, 0.0)
    func = partial(_l1_block, b=b, sb=sb, steps=tuple(steps) if S is not None else (),
                   loss=loss, support=support)
    (packed,) = compute(map_reduce(blocks, func, add, xhat, yd, sd, split_every=split_every,
                                   shared={"W": W, "S": S}, keeps_block=False), client=client)
    return PassResult(packed, W.shape[0], W.shape[1], xhat.shape[1] + 1, loss != "squared",
                      len(steps) if S is not None else 0, support)
