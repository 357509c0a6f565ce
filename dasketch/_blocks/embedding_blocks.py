"""The block functions of sparse embeddings ``S X``: every embedding of a block in
one read of its rows.

Imports numpy, scipy, :mod:`dasketch.kernels` and the array seam only (workers
unpickle these functions; see :mod:`dasketch._blocks.block_functions`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from dasketch._blocks.array_libraries import is_numpy_block, to_host
from dasketch._blocks.namespace_products import float_rows
from dasketch.kernels.embedding_products import scatter_rows, scatter_scaled_rows
from dasketch.kernels.embeddings import embedding_entries, entries_matrix
from dasketch.kernels.namespace_embeddings import embed_dense_rows

# Largest embedding of a dense block summed in a contiguous array of its own
# (faster than adding to rows of the strided result in place).
SCATTER_BYTES = 1 << 25


def stacked_entries(seed, specs, start, stop):
    """The nonzeros of the embeddings ``specs`` stacked: ``(buckets, values)`` of
    shape ``(stop - start, sum k)``, the buckets of each embedding offset by the
    rows of the ones before it (:func:`~dasketch.kernels.embeddings.embedding_entries`)."""
    buckets, values, row = [], [], 0
    for stream, size, embedding, k in specs:
        b, v = embedding_entries(seed, stream, start, stop, size, embedding=embedding,
                                 nnz_per_column=k)
        buckets.append(b + row)
        values.append(v)
        row += size
    return np.hstack(buckets), np.hstack(values)


def _is_dense_numpy(block):
    return is_numpy_block(block) and not scipy.sparse.issparse(block)


def _scattered(out, rows, d, scatter):
    """Run ``scatter(target)`` on the first ``rows`` x ``d`` values of ``out``: in a
    contiguous array of its own when it is small (:data:`SCATTER_BYTES`)."""
    if rows * d * 8 <= SCATTER_BYTES:
        target = np.zeros((rows, d))
        result = scatter(target)
        out[:rows, :d] = target
        return result
    out[:rows, :d] = 0.0
    return scatter(out[:rows, :d])


def _embed_columns(out, columns, d, buckets, values):
    col = d
    for c in columns:
        out[:, col:col + c.shape[1]] = scatter_rows(
            c, buckets, values, np.zeros((out.shape[0], c.shape[1])))
        col += c.shape[1]


def embed_block(block, start, stop, *pieces, seed, specs, out=None):
    """``[S_1 X_blk; S_2 X_blk; ...]`` (float64, dense) for the embeddings ``specs``
    (tuples ``(stream, sketch_size, embedding, nnz_per_column)``); extra row-aligned
    ``pieces`` (vectors or matrices) are appended to the block as columns.

    Written into the top left corner of ``out`` when given (and ``out`` returned),
    else into a new array. A dense block's rows are added to every embedding
    at once, in one read (:func:`~dasketch.kernels.embedding_products.scatter_rows`);
    a block of another array library is embedded in its own namespace by the
    same ``S`` (:func:`~dasketch.kernels.namespace_embeddings.embed_dense_rows`),
    the pieces on the host."""
    columns = [np.asarray(p, dtype=np.float64).reshape(stop - start, -1) for p in pieces]
    d = block.shape[1]
    total = sum(spec[1] for spec in specs)
    if out is None:
        out = np.empty((total, d + sum(c.shape[1] for c in columns)))
    buckets, values = stacked_entries(seed, specs, start, stop)
    if _is_dense_numpy(block):
        _scattered(out, total, d, lambda target: scatter_rows(block, buckets, values, target))
    else:
        row, col = 0, 0
        for _, size, _, k in specs:
            rows = slice(row, row + size)
            b, v = buckets[:, col:col + k] - row, values[:, col:col + k]
            if scipy.sparse.issparse(block):
                out[rows, :d] = (entries_matrix(b, v, size) @ block).toarray()
            else:
                xp, dense = float_rows(block)
                out[rows, :d] = to_host(embed_dense_rows(dense, b, v, size, xp=xp))
            row, col = row + size, col + k
    _embed_columns(out[:total], columns, d, buckets, values)
    return out


def embed_weighted_dense(block, start, stop, extra, weights, scale, *, seed, specs, out):
    """:func:`embed_block` of the scaled rows ``diag(scale) [X_blk E]`` of a dense
    block into ``out``, and ``(w^T X_blk, ||X_i||^2 for every row)`` from the
    same read (:func:`~dasketch.kernels.embedding_products.scatter_scaled_rows`)."""
    d, total = block.shape[1], sum(spec[1] for spec in specs)
    buckets, values = stacked_entries(seed, specs, start, stop)
    sums, squares = _scattered(out, total, d, lambda target: scatter_scaled_rows(
        block, scale, weights, buckets, values, target))
    _embed_columns(out[:total], [extra * scale[:, None]], d, buckets, values)
    return sums, squares
