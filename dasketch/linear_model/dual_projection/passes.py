"""Blocked passes over X for dual random projection.

Every function here is one pass over the row blocks of X through the bridge's
primitives (:func:`~dasketch._blocks.map_reduce`, fused with the rows it keeps
where a later step needs them, and :func:`~dasketch._blocks.map_rows`): each
block is read once, by one task, and only small per-block results are
tree-summed. Vectors of length ``d`` (or ``d + 1`` with the intercept as the
last entry) are stacked as columns, one per target of a one-vs-rest fit, so
that all targets share every pass. The sample weights ``s`` (n x 1) are one
more array aligned with the blocks: every loss term, derivative and curvature
of row ``i`` is multiplied by ``s_i`` (``s = 1`` for an unweighted fit).

A block of another library than numpy (a CuPy array) is multiplied in its own
namespace: its projection ``X_hat`` stays an array of that library (on the
device, for every later pass), the host's vectors and thin matrices go to it by
``xp.asarray`` and the products with X and ``X_hat`` come back by ``to_host``;
the losses of the margins (``n x K``) are taken on the host, as for numpy.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from dasketch._blocks import (
    add,
    as_row_aligned,
    block_namespace,
    chunk_blocks,
    compute,
    forward_backward,
    join_columns,
    like,
    map_reduce,
    map_rows,
    matvec_block,
    persist,
    project_block,
    rows_product,
    side_by_side,
    to_host,
    transpose_product,
)
from dasketch.linear_model.dual_projection.losses import loss_curvature, loss_derivative, loss_value
from dasketch.linear_model.dual_projection.row_norms import row_norm_terms

# Stream of the Gaussian projection R in dasketch.kernels.embeddings.
PROJECTION_STREAM = 0x445250
# Stream of the columns a grown projection adds to R.
GROWTH_STREAM = PROJECTION_STREAM + 1


def _with_ones(xhat):
    """``[X_hat 1]`` in the library of ``xhat``."""
    return join_columns(xhat, like(xhat, np.ones((xhat.shape[0], 1))))


def _weighted_grams(weights, xa):
    """``xa^T diag(weights[:, k]) xa`` for each column ``k`` of ``weights`` (on
    the host), raveled on the host (one GEMM each, in the library of ``xa``:
    ``einsum`` over three operands does not use BLAS)."""
    weights = like(xa, weights)
    return np.concatenate([to_host(xa.T @ (weights[:, k:k + 1] * xa)).ravel()
                           for k in range(weights.shape[1])])


def _times(xhat, matrix):
    """``xhat @ matrix`` (``matrix`` on the host) on the host."""
    return to_host(xhat @ like(xhat, matrix))


# ------------------------------------------------------------ the projection pass
def _gram_terms(xhat, y, s):
    """``[X_hat 1]^T S [X_hat 1 y]`` and the count of non-finite projected values."""
    xp, xa = block_namespace(xhat), _with_ones(xhat)
    return np.concatenate([to_host(xa.T @ (like(xa, s) * join_columns(xa, like(xa, y)))).ravel(),
                           [float(xp.count_nonzero(~xp.isfinite(xhat)))]])


def _projection_block(block, start, stop, y, s, *, seed, n_components, b0, loss, smoothing):
    """``X_hat_b = X_b R / sqrt(m)`` and, packed, ``X_b^T S [X_hat_b, 1, l'(b0, y_b)]``,
    the Gram terms of ``X_hat_b`` and the row norm terms (the largest last)."""
    xhat = project_block(block, start, stop, seed=seed, stream=PROJECTION_STREAM,
                         n_components=n_components)
    columns = like(xhat, s) * join_columns(
        _with_ones(xhat), like(xhat, loss_derivative(b0, y, loss, smoothing)))
    products = transpose_product(block, columns)
    gram = _gram_terms(xhat, y, s)
    # packed in place: one copy of the d x (m + 2) products, not a ravel and a concatenation
    packed = np.empty(products.size + gram.size + 2)
    packed[:products.size].reshape(products.shape)[...] = products
    packed[products.size:-2] = gram
    packed[-2:] = row_norm_terms(block, s)
    return xhat, packed


def _sum_then_max(*parts):
    """Sum of all entries but the last (:func:`~dasketch._blocks.add`, left to
    right), largest of the last."""
    largest = max(part[-1] for part in parts)
    total = add(*parts)
    total[-1] = largest
    return total


def _sum_into_then_max(total, *parts):
    """:func:`_sum_then_max` summed into ``total`` (``add.into``) for a total the
    tree made itself."""
    largest = max(part[-1] for part in (total, *parts))
    total = add.into(total, *parts)
    total[-1] = largest
    return total


_sum_then_max.into = _sum_into_then_max


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
    yd = as_row_aligned(targets, blocks, name="y")
    sd = as_row_aligned(np.reshape(weights, (-1, 1)), blocks, name="sample_weight")
    func = partial(_projection_block, seed=int(seed), n_components=m, b0=b0, loss=loss,
                   smoothing=smoothing)
    d = blocks.n_features
    part_bytes = 8 * (d * (m + 1 + k) + (m + 1) * (m + 1 + k) + 3)
    xhat, total = map_reduce(blocks, func, _sum_then_max, yd, sd, split_every=split_every,
                             keeps_block=False, rows=(m, np.float64), part_bytes=part_bytes,
                             fresh_parts=True)
    xhat, yd, sd, total = persist(xhat, yd, sd, total, client=client)
    (packed,) = compute(total, client=client)
    products, packed = packed[:d * (m + 1 + k)], packed[d * (m + 1 + k):]
    gram, packed = packed[:(m + 1) * (m + 1 + k)], packed[(m + 1) * (m + 1 + k):]
    finite, row_norms = packed[0] == 0, (float(packed[1]), float(packed[2]))
    return (xhat, yd, sd, products.reshape(d, m + 1 + k), gram.reshape(m + 1, m + 1 + k),
            finite, row_norms)


# ------------------------------------------------------------ growing the projection
def _growth_block(block, start, stop, xhat, y, s, *, seed, extra, W, b, loss, smoothing):
    """``X_new_b = X_b R_new / sqrt(extra)`` (``R_new`` of :data:`GROWTH_STREAM`) and,
    packed, ``X_b^T S X_new_b``, ``X_new_b^T S [X_hat_b X_new_b 1]`` and, at
    ``(W, b)`` (None for the squared loss), ``[X_hat_b X_new_b 1]^T diag(s l'')
    [X_hat_b X_new_b 1]`` per target."""
    new = project_block(block, start, stop, seed=seed, stream=GROWTH_STREAM,
                        n_components=extra)
    xa, weights = _with_ones(join_columns(xhat, new)), like(new, s)
    parts = [transpose_product(block, weights * new).ravel(),
             to_host(new.T @ (weights * xa)).ravel()]
    if W is not None:
        weights = s * loss_curvature(rows_product(block, W) + b, y, loss, smoothing)
        parts.append(_weighted_grams(weights, xa))
    return new, np.concatenate(parts)


def growth_pass(blocks, xhat, yd, sd, extra, seed, W=None, b=None, *, loss, smoothing,
                split_every, client):
    """One pass: ``extra`` more columns of the projection, from new tiles of the
    random operator (``R`` stays a function of ``(seed, stream, feature index)``).

    Returns ``(xhat, XtS_new, gram_new, curvature)``: the persisted
    ``[X_hat X_new]`` (n x (m + extra)), ``X^T S X_new`` (d x extra), the rows
    ``X_new^T S [X_hat X_new 1]`` of the grown Gram matrix, and at ``(W, b)`` the
    projected curvature ``[X_hat X_new 1]^T diag(s l''(X W + b)) [X_hat X_new 1]``
    per target (None without ``W``).
    """
    m1 = xhat.shape[1] + extra + 1
    d = blocks.n_features
    func = partial(_growth_block, seed=int(seed), extra=int(extra), b=b, loss=loss,
                   smoothing=smoothing)
    part_bytes = 8 * (d * extra + extra * m1 + (0 if W is None else W.shape[1] * m1 * m1))
    new, total = map_reduce(blocks, func, add, xhat, yd, sd, split_every=split_every,
                            shared={"W": W}, keeps_block=False, rows=(extra, np.float64),
                            part_bytes=part_bytes, fresh_parts=True)
    grown, total = persist(side_by_side(xhat, new), total,
                           client=client)
    (packed,) = compute(total, client=client)
    products, packed = packed[:d * extra].reshape(d, extra), packed[d * extra:]
    gram, packed = packed[:extra * m1].reshape(extra, m1), packed[extra * m1:]
    curvature = packed.reshape(-1, m1, m1) if W is not None else None
    return grown, products, gram, curvature


# ------------------------------------------------------------ evaluations
def _evaluate_block(block, start, stop, xhat, y, s, *, W, b, loss, smoothing, curvature_gram,
                    keep_margins=False, S=None, sb=None, steps=None, start_hessian=False):
    k = W.shape[1]

    def back_columns(F, rows):
        """``s l'`` at the end point (and ``s l'' U`` at the start), row by row."""
        T, weights, labels = F[:, :k] + b, s[rows], y[rows]
        if S is None:
            return weights * loss_derivative(T, labels, loss, smoothing)
        U = F[:, k:] + sb
        dual = weights * loss_derivative(T + U, labels, loss, smoothing)
        if not start_hessian:
            return dual
        return np.hstack([dual, weights * loss_curvature(T, labels, loss, smoothing) * U])

    F, columns, backward = forward_backward(
        block, W if S is None else np.hstack([W, S]), back_columns)
    margins = F[:, :k]
    T = margins + b
    path, start_terms = [], []
    if S is not None:
        U = F[:, k:] + sb
        path = [(s * loss_value(T + eta * U, y, loss, smoothing)).sum(axis=0)
                for eta in steps]
        if start_hessian:   # [X 1]^T diag(s l''(X W + b)) [X 1] [S; sb]
            start_terms = [backward[:, k:].ravel(), columns[:, k:].sum(axis=0)]
        T = T + U
    value = (s * loss_value(T, y, loss, smoothing)).sum(axis=0)
    parts = [value, backward[:, :k].ravel(), columns[:, :k].sum(axis=0)]
    if curvature_gram:
        xa = _with_ones(xhat)
        weights = s * loss_curvature(T, y, loss, smoothing)
        parts.append(_weighted_grams(weights, xa))
    packed = np.concatenate(parts + start_terms + [np.ravel(path)])
    return (np.ascontiguousarray(margins), packed) if keep_margins else packed


def evaluate_pass(blocks, xhat, yd, sd, W, b, *, loss, smoothing, curvature_gram, split_every,
                  client, keep_margins=False, direction=None, steps=None,
                  start_hessian=False):
    """One pass at ``(W, b)`` (``d x K``, ``K``): per target the loss sum
    ``sum_i s_i l(t_i, y_i)``, the gradient terms ``X^T S l'`` (d x K) and
    ``sum_i s_i l'`` (K) and, with ``curvature_gram``,
    ``[X_hat 1]^T diag(s l'') [X_hat 1]`` per
    target (the projected Hessian the preconditioner is built from). With
    ``keep_margins`` the margins ``X W`` are kept in (worker) memory from the same
    tasks (each block is read once) and returned last.

    With a ``direction`` ``(S, sb)`` everything is taken at ``(W + S, b + sb)``,
    and the loss sums along the segment, at ``(W + eta S, b + eta sb)`` for every
    ``eta`` of ``steps``, come back as well (``len(steps) x K``): a backtracking
    line search then needs no further pass. With ``start_hessian`` the Hessian
    products at the start, ``[X 1]^T diag(s l''(X W + b)) [X 1] [S; sb]`` (without
    the regulariser), come back before them, as ``(d x K, K)``."""
    d, k = W.shape
    S, sb = direction if direction is not None else (None, None)
    func = partial(_evaluate_block, b=b, loss=loss, smoothing=smoothing,
                   curvature_gram=curvature_gram, keep_margins=keep_margins, sb=sb,
                   steps=steps, start_hessian=start_hessian)
    total = map_reduce(blocks, func, add, xhat, yd, sd, split_every=split_every,
                       shared={"W": W, "S": S}, keeps_block=False,
                       rows=(k, np.float64) if keep_margins else None)
    margins = None
    if keep_margins:
        margins, total = persist(*total, client=client)
    (packed,) = compute(total, client=client)
    value, rest = packed[:k], packed[k:]
    gradient, rest = rest[:d * k].reshape(d, k), rest[d * k:]
    dual_sum, rest = rest[:k], rest[k:]
    m1 = xhat.shape[1] + 1
    curvature = rest[:k * m1 * m1].reshape(k, m1, m1) if curvature_gram else None
    if direction is not None:
        path = rest[-len(steps) * k:].reshape(-1, k)
        if not start_hessian:
            return value, gradient, dual_sum, curvature, path
        rest = rest[k * m1 * m1 if curvature_gram else 0:]
        return (value, gradient, dual_sum, curvature, path,
                (rest[:d * k].reshape(d, k), rest[d * k:d * k + k]))
    if keep_margins:
        return value, gradient, dual_sum, curvature, margins
    return value, gradient, dual_sum, curvature


def _constant_curvature_block(xhat, start, stop, y, s, *, b, loss, smoothing):
    xa = _with_ones(xhat)
    weights = s * loss_curvature(np.broadcast_to(b, y.shape), y, loss, smoothing)
    return _weighted_grams(weights, xa)


def curvature_at_constant(xhat, yd, sd, b, *, loss, smoothing, split_every, client,
                          offsets=None):
    """``[X_hat 1]^T diag(s l''(b_k, y_k)) [X_hat 1]`` per target at constant margins
    ``b`` (K): a pass over the persisted ``X_hat``, not over X (cut at ``offsets``,
    those of the blocks of X, when it is an ndarray of eager passes)."""
    func = partial(_constant_curvature_block, b=b, loss=loss, smoothing=smoothing)
    (packed,) = compute(map_reduce(chunk_blocks(xhat, offsets), func, add, yd, sd,
                                   split_every=split_every), client=client)
    m1 = xhat.shape[1] + 1
    return packed.reshape(yd.shape[1], m1, m1)


def _hessian_block(block, start, stop, y, s, *, W, b, P, pb, loss, smoothing):
    j = P.shape[1]

    def directions(F, rows):
        U = s[rows] * (F[:, :j] + pb)
        if loss != "squared":
            U *= loss_curvature(F[:, j:] + b, y[rows], loss, smoothing)
        return U

    matrix = P if loss == "squared" else np.hstack([P, W])
    _, U, backward = forward_backward(block, matrix, directions)
    return np.concatenate([backward.ravel(), U.sum(axis=0)])


def hessian_pass(blocks, yd, sd, W, b, P, pb, *, loss, smoothing, split_every, client):
    """One pass: ``[X 1]^T diag(s l''(X W + b)) [X 1] [P; pb]`` for directions
    ``P`` (d x J) and ``pb`` (J); for the squared loss ``l'' = 1`` and the
    directions may be any number of columns, else one per target."""
    d, j = P.shape
    func = partial(_hessian_block, b=b, pb=pb, loss=loss, smoothing=smoothing)
    (packed,) = compute(map_reduce(blocks, func, add, yd, sd, split_every=split_every,
                                   shared={"W": W, "P": P}, keeps_block=False),
                        client=client)
    return packed[:d * j].reshape(d, j), packed[d * j:]


def _recovery_block(block, start, stop, xhat, y, s, *, Z, b, W, loss, smoothing):
    T = _times(xhat, Z) + b
    if W is None:
        dual = s * loss_derivative(T, y, loss, smoothing)
        return transpose_product(block, dual).ravel()

    def duals(F, rows):
        return s[rows] * loss_derivative(T[rows] + F, y[rows], loss, smoothing)

    return forward_backward(block, W, duals)[2].ravel()


def recovery_pass(blocks, xhat, yd, sd, Z, b, *, W=None, loss, smoothing, split_every,
                  client):
    """One pass: ``X^T alpha`` for the dual variables
    ``alpha = s l'(X_hat Z + X W + b, y)``
    of projected solutions ``Z`` (m x K) around ``W`` (Algorithms 1 and 2 of Zhang
    et al.: the recovery is ``w = -(1/lambda) X^T alpha``)."""
    func = partial(_recovery_block, Z=Z, b=b, loss=loss, smoothing=smoothing)
    (packed,) = compute(map_reduce(blocks, func, add, xhat, yd, sd, split_every=split_every,
                                   shared={"W": W}, keeps_block=False), client=client)
    return packed.reshape(blocks.n_features, Z.shape[1])


def _dual_block(block, start, stop, y, s, *, W, b, loss, smoothing):
    margins = matvec_block(block, start, stop, w=W) + b
    return s * loss_derivative(margins, y, loss, smoothing)


def dual_variables(blocks, yd, sd, W, b, *, loss, smoothing):
    """Lazy ``s l'(X W + b, y)`` (n x K): the dual variables of ``(W, b)``; a block
    with NaN or Inf raises a ``ValueError`` naming its rows when computed."""
    return map_rows(blocks, partial(_dual_block, b=b, loss=loss, smoothing=smoothing), yd, sd,
                    n_columns=W.shape[1], shared={"W": W}, keeps_block=False)
