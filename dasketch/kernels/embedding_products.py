"""``S B`` for the block of a sparse embedding ``S`` and a dense block of rows ``B``.

Column ``i`` of the block's ``S`` holds ``k`` nonzeros (``values[i]`` in rows
``buckets[i]``, :func:`dasketch.kernels.embeddings.embedding_entries`), so ``S B``
adds ``values[i, j] * B[i]`` to row ``buckets[i, j]`` of the result for every
row ``i`` of the block: one read of ``B``, ``k`` multiply-adds a value. This is
written by hand (compiled by numba) because scipy's CSR-times-dense product,
the library way to the same sums, runs several times slower on the
wide right-hand sides here (it copies a strided block contiguous first and
then loops over short rows), and no library exposes a row scatter-add that
keeps the GIL released. The sums run in the order scipy's product takes (row
``i`` increasing within every output row), without fused multiply-adds, so the
results are the same bits.
"""

from __future__ import annotations

import numpy as np
from numba import float64, njit


def _compiled_dtype(block):
    """``block`` as an ndarray of a dtype the kernels compile for (float64 for
    float16 and any other kind than real numbers and booleans)."""
    block = np.asarray(block)
    if block.dtype.kind not in "fiub" or block.dtype == np.float16:
        block = np.asarray(block, dtype=np.float64)
    return block


@njit(cache=True, nogil=True)
def _scatter_rows(block, buckets, values, out):  # pragma: no cover - compiled
    rows, d = block.shape
    for i in range(rows):
        for j in range(buckets.shape[1]):
            target = out[buckets[i, j]]
            value = values[i, j]
            for c in range(d):
                target[c] += value * block[i, c]


@njit(cache=True, nogil=True)
def _scatter_scaled_rows(block, scale, weights, buckets, values, out, sums, squares):
    # pragma: no cover - compiled
    rows, d = block.shape
    for i in range(rows):
        s, w = scale[i], weights[i]
        for c in range(d):
            sums[c] += w * float64(block[i, c])
        # four running sums: independent chains the processor overlaps
        q0 = q1 = q2 = q3 = 0.0
        c = 0
        while c + 4 <= d:
            x0, x1 = float64(block[i, c]), float64(block[i, c + 1])
            x2, x3 = float64(block[i, c + 2]), float64(block[i, c + 3])
            q0 += x0 * x0
            q1 += x1 * x1
            q2 += x2 * x2
            q3 += x3 * x3
            c += 4
        while c < d:
            x0 = float64(block[i, c])
            q0 += x0 * x0
            c += 1
        squares[i] = (q0 + q1) + (q2 + q3)
        for j in range(buckets.shape[1]):
            target = out[buckets[i, j]]
            value = values[i, j]
            for c in range(d):
                target[c] += value * (s * block[i, c])


def scatter_scaled_rows(block, scale, weights, buckets, values, out):
    """Add ``S diag(scale) B`` to ``out`` and return ``(w^T B, squares)``, the
    weighted column sums and every row's squared norm ``||B_i||^2``, all from
    one read of ``B``: the sparse embeddings of weighted rows with the sums that
    centring and the accuracy bounds need.

    ``S`` may stack several embeddings (``buckets`` offset by the rows of the
    ones before it, one column of ``buckets`` a nonzero of one of them): each
    output row still sums its rows in increasing order, as
    :func:`scatter_rows` does, with ``scale_i B_i`` rounded first.

    Parameters
    ----------
    block : ndarray of shape (rows, d)
    scale, weights : ndarray of shape (rows,), float64
    buckets : ndarray of shape (rows, k), int64
    values : ndarray of shape (rows, k), float64
    out : ndarray of shape (sketch_size, d), float64

    Returns
    -------
    sums : ndarray of shape (d,)
    squares : ndarray of shape (rows,)
    """
    block = _compiled_dtype(block)
    sums, squares = np.zeros(block.shape[1]), np.empty(block.shape[0])
    _scatter_scaled_rows(block, np.ascontiguousarray(scale, dtype=np.float64),
                         np.ascontiguousarray(weights, dtype=np.float64),
                         np.ascontiguousarray(buckets, dtype=np.int64),
                         np.ascontiguousarray(values, dtype=np.float64), out, sums, squares)
    return sums, squares


def scatter_rows(block, buckets, values, out):
    """Add ``S B`` to ``out`` (``sketch_size x d``, float64, written in place).

    Parameters
    ----------
    block : ndarray of shape (rows, d)
        Real values of any dtype (computed in float64).
    buckets : ndarray of shape (rows, k), int64
        Rows of ``out`` that row ``i`` of the block is added to.
    values : ndarray of shape (rows, k), float64
        The factors of those additions.
    out : ndarray of shape (sketch_size, d), float64

    Returns
    -------
    out : ndarray
    """
    block = _compiled_dtype(block)
    _scatter_rows(block, np.ascontiguousarray(buckets, dtype=np.int64),
                  np.ascontiguousarray(values, dtype=np.float64), out)
    return out
