"""Blocked passes over X for dual random projection.

Every function here is one pass over the row blocks of X (each block is read
once, by one task, and only small per-block results are tree-summed), built on
:mod:`dasketch._blocks`. Vectors of length ``d`` (or ``d + 1`` with the intercept
as the last entry) are stacked as columns, one per target of a one-vs-rest fit,
so that all targets share every pass. The sample weights ``s`` (n x 1) are one
more array aligned with the blocks: every loss term, derivative and curvature
of row ``i`` is multiplied by ``s_i`` (``s = 1`` for an unweighted fit).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse
from dask import delayed

from dasketch._blocks import (
    as_row_aligned, compute, map_reduce, map_row_chunks, matvec, persist, random_projection,
    tree_sum_rows)
from dasketch._blocks.tasks import add, task, tree_reduce
from dasketch.linear_model.dual_projection.losses import (
    loss_curvature, loss_derivative, loss_value)

# Stream of the Gaussian projection R in dasketch.kernels.embeddings.
PROJECTION_STREAM = 0x445250


def _dense(values):
    return np.asarray(values, dtype=np.float64)


def _with_ones(xhat):
    return np.hstack([xhat, np.ones((xhat.shape[0], 1))])


def _sum_over_blocks(blocks, func, aligned, split_every, **shared):
    """Delayed sum over blocks of ``func(block, *aligned_pieces, **shared)``: one
    task per block reads it once; ``aligned`` are Dask arrays with the blocks' row
    chunks; ``shared`` arrays (points and directions, d x K) enter the graph once,
    not once per task."""
    pieces = [a.to_delayed(optimize_graph=True).ravel() for a in aligned]
    shared = {name: delayed(value, pure=True) for name, value in shared.items()}
    mapped = task(func)
    parts = [mapped(block, *row, **shared) for block, *row in zip(blocks.blocks, *pieces)]
    return tree_reduce(parts, add, split_every)


# ------------------------------------------------------------ the projection pass
def _projection_columns(xhat, y, s, *, b0, loss, smoothing):
    """``s [X_hat_b, 1, l'(b0, y_b)]``: the columns ``X_b^T`` is applied to."""
    return s * np.hstack([_with_ones(xhat), loss_derivative(b0, y, loss, smoothing)])


def _gram_terms(xhat, y, s):
    """``[X_hat 1]^T S [X_hat 1 y]`` and the count of non-finite projected values."""
    xa = _with_ones(xhat)
    return np.concatenate([(xa.T @ (s * np.hstack([xa, y]))).ravel(),
                           [np.count_nonzero(~np.isfinite(xhat))]])


def _products_block(block, start, stop, columns, s):
    """``X_b^T columns`` and, last, ``sum_i s_i ||x_i||^2`` and the largest norm of
    a row of weight > 0 (scaled, as LAPACK's ``nrm2``: finite rows never overflow)."""
    positive = np.flatnonzero(s[:, 0] > 0)
    rows = block[positive]
    scale = float(abs(rows).max()) if min(rows.shape) > 0 else 0.0
    norms = np.full(positive.size, 0.0 if np.isfinite(scale) else np.inf)
    if 0.0 < scale < np.inf:
        scaled = rows / scale
        squares = (scaled.multiply(scaled).sum(axis=1, dtype=np.float64)
                   if scipy.sparse.issparse(scaled)
                   else np.einsum("ij,ij->i", scaled, scaled, dtype=np.float64))
        norms = scale * np.sqrt(np.ravel(squares))
    weighted = float(s[positive, 0] @ norms ** 2)
    largest = norms.max() if norms.size else 0.0
    return np.concatenate([_dense(block.T @ columns).ravel(), [weighted, largest]])


def _sum_then_max(*parts):
    """Sum of all entries but the last, largest of the last."""
    total = parts[0].copy()
    for part in parts[1:]:
        total[:-1] += part[:-1]
        total[-1] = max(total[-1], part[-1])
    return total


def projection_pass(blocks, targets, weights, n_components, seed, *, b0, loss, smoothing,
                    split_every, client):
    """One pass: ``X_hat = X R / sqrt(m)`` kept in (worker) memory, and
    ``X^T S [X_hat, 1, l'(b0, y)]`` (``d x (m + 1 + K)``, ``S = diag(weights)``).

    Returns ``(xhat, y, s, XtA, gram, finite, row_norm)``: the persisted ``X_hat``,
    targets and weights (row-aligned with the blocks), ``X^T S [X_hat 1]`` and
    ``X^T S l'(b0, y)`` stacked, the Gram matrix ``[X_hat 1]^T S [X_hat 1 y]``
    ((m+1) x (m+1+K)), whether ``X_hat`` is finite (it is not exactly when X is
    not, or overflows), and ``(sum_i s_i ||x_i||^2, max_{s_i > 0} ||x_i||)``.
    """
    m, k = int(n_components), targets.shape[1]
    xhat = random_projection(blocks, m, seed, stream=PROJECTION_STREAM)
    yd = as_row_aligned(targets, blocks, name="y")
    sd = as_row_aligned(np.reshape(weights, (-1, 1)), blocks, name="sample_weight")
    columns = map_row_chunks((xhat, yd, sd), partial(
        _projection_columns, b0=b0, loss=loss, smoothing=smoothing), n_columns=m + 1 + k)
    products = map_reduce(blocks, _products_block, _sum_then_max, columns, sd,
                          split_every=split_every, keeps_block=False)
    gram = tree_sum_rows((xhat, yd, sd), _gram_terms, split_every=split_every)
    xhat, yd, sd, products, gram = persist(xhat, yd, sd, products, gram, client=client)
    products, gram = compute(products, gram, client=client)
    finite = gram[-1] == 0
    gram = gram[:-1].reshape(m + 1, m + 1 + k)
    row_norms = (float(products[-2]), float(products[-1]))
    products = _dense(products[:-2]).reshape(blocks.n_features, m + 1 + k)
    return xhat, yd, sd, products, gram, finite, row_norms


# ------------------------------------------------------------ evaluations
def _evaluate_block(block, xhat, y, s, *, W, b, loss, smoothing, curvature_gram, S=None,
                    sb=None, steps=None):
    T = _dense(block @ W) + b
    path = []
    if S is not None:
        U = _dense(block @ S) + sb
        path = [(s * loss_value(T + eta * U, y, loss, smoothing)).sum(axis=0)
                for eta in steps]
        T = T + U
    value = (s * loss_value(T, y, loss, smoothing)).sum(axis=0)
    dual = s * loss_derivative(T, y, loss, smoothing)
    parts = [value, _dense(block.T @ dual).ravel(), dual.sum(axis=0)]
    if curvature_gram:
        xa = _with_ones(xhat)
        weights = s * loss_curvature(T, y, loss, smoothing)
        parts.append(np.einsum("ik,ia,ib->kab", weights, xa, xa).ravel())
    return np.concatenate(parts + [np.ravel(path)])


def evaluate_pass(blocks, xhat, yd, sd, W, b, *, loss, smoothing, curvature_gram, split_every,
                  client, keep_margins=False, direction=None, steps=None):
    """One pass at ``(W, b)`` (``d x K``, ``K``): per target the loss sum
    ``sum_i s_i l(t_i, y_i)``, the gradient terms ``X^T S l'`` (d x K) and
    ``sum_i s_i l'`` (K) and, with ``curvature_gram``,
    ``[X_hat 1]^T diag(s l'') [X_hat 1]`` per
    target (the projected Hessian the preconditioner is built from). With
    ``keep_margins`` the margins ``X W`` are kept in (worker) memory from the same
    pass (their tasks share the blocks' reads) and returned last.

    With a ``direction`` ``(S, sb)`` everything is taken at ``(W + S, b + sb)``,
    and the loss sums along the segment, at ``(W + eta S, b + eta sb)`` for every
    ``eta`` of ``steps``, come back as well (``len(steps) x K``): a backtracking
    line search then needs no further pass."""
    d, k = W.shape
    S, sb = direction if direction is not None else (None, None)
    func = partial(_evaluate_block, b=b, loss=loss, smoothing=smoothing,
                   curvature_gram=curvature_gram, sb=sb, steps=steps)
    total = _sum_over_blocks(blocks, func, (xhat, yd, sd), split_every, W=W, S=S)
    margins = None
    if keep_margins:
        margins, total = persist(matvec(blocks, W), total, client=client)
    (packed,) = compute(total, client=client)
    value, rest = packed[:k], packed[k:]
    gradient, rest = rest[:d * k].reshape(d, k), rest[d * k:]
    dual_sum, rest = rest[:k], rest[k:]
    m1 = xhat.shape[1] + 1
    curvature = rest[:k * m1 * m1].reshape(k, m1, m1) if curvature_gram else None
    if direction is not None:
        return value, gradient, dual_sum, curvature, rest[-len(steps) * k:].reshape(-1, k)
    if keep_margins:
        return value, gradient, dual_sum, curvature, margins
    return value, gradient, dual_sum, curvature


def _constant_curvature_terms(xhat, y, s, *, b, loss, smoothing):
    xa = _with_ones(xhat)
    weights = s * loss_curvature(np.broadcast_to(b, y.shape), y, loss, smoothing)
    return np.einsum("ik,ia,ib->kab", weights, xa, xa).ravel()


def curvature_at_constant(xhat, yd, sd, b, *, loss, smoothing, split_every, client):
    """``[X_hat 1]^T diag(s l''(b_k, y_k)) [X_hat 1]`` per target at constant margins
    ``b`` (K): a pass over the persisted ``X_hat``, not over X."""
    func = partial(_constant_curvature_terms, b=b, loss=loss, smoothing=smoothing)
    (packed,) = compute(tree_sum_rows((xhat, yd, sd), func, split_every=split_every),
                        client=client)
    m1 = xhat.shape[1] + 1
    return packed.reshape(yd.shape[1], m1, m1)


def _hessian_block(block, y, s, *, W, b, P, pb, loss, smoothing):
    U = s * (_dense(block @ P) + pb)
    if loss != "squared":
        U *= loss_curvature(_dense(block @ W) + b, y, loss, smoothing)
    return np.concatenate([_dense(block.T @ U).ravel(), U.sum(axis=0)])


def hessian_pass(blocks, yd, sd, W, b, P, pb, *, loss, smoothing, split_every, client):
    """One pass: ``[X 1]^T diag(s l''(X W + b)) [X 1] [P; pb]`` for directions
    ``P`` (d x J) and ``pb`` (J); for the squared loss ``l'' = 1`` and the
    directions may be any number of columns, else one per target."""
    d, j = P.shape
    func = partial(_hessian_block, b=b, pb=pb, loss=loss, smoothing=smoothing)
    (packed,) = compute(_sum_over_blocks(blocks, func, (yd, sd), split_every, W=W, P=P),
                        client=client)
    return packed[:d * j].reshape(d, j), packed[d * j:]


def _recovery_block(block, xhat, y, s, *, Z, b, W, loss, smoothing):
    T = xhat @ Z + b
    if W is not None:
        T += _dense(block @ W)
    return _dense(block.T @ (s * loss_derivative(T, y, loss, smoothing))).ravel()


def recovery_pass(blocks, xhat, yd, sd, Z, b, *, W=None, loss, smoothing, split_every,
                  client):
    """One pass: ``X^T alpha`` for the dual variables
    ``alpha = s l'(X_hat Z + X W + b, y)``
    of projected solutions ``Z`` (m x K) around ``W`` (Algorithms 1 and 2 of Zhang
    et al.: the recovery is ``w = -(1/lambda) X^T alpha``)."""
    func = partial(_recovery_block, Z=Z, b=b, loss=loss, smoothing=smoothing)
    (packed,) = compute(_sum_over_blocks(blocks, func, (xhat, yd, sd), split_every, W=W),
                        client=client)
    return packed.reshape(blocks.n_features, Z.shape[1])


def _dual_chunk(margins, y, s, *, b, loss, smoothing):
    return s * loss_derivative(margins + b, y, loss, smoothing)


def dual_variables(blocks, yd, sd, W, b, *, loss, smoothing):
    """Lazy ``s l'(X W + b, y)`` (n x K): the dual variables of ``(W, b)``."""
    return map_row_chunks((matvec(blocks, W), yd, sd), partial(
        _dual_chunk, b=b, loss=loss, smoothing=smoothing), n_columns=W.shape[1])
