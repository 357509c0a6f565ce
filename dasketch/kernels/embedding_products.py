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
from numba import njit


@njit(cache=True, nogil=True)
def _scatter_rows(block, buckets, values, out):  # pragma: no cover - compiled
    rows, d = block.shape
    for i in range(rows):
        for j in range(buckets.shape[1]):
            target = out[buckets[i, j]]
            value = values[i, j]
            for c in range(d):
                target[c] += value * block[i, c]


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
    if block.dtype.kind not in "fiub" or block.dtype == np.float16:
        block = np.asarray(block, dtype=np.float64)
    _scatter_rows(block, np.ascontiguousarray(buckets, dtype=np.int64),
                  np.ascontiguousarray(values, dtype=np.float64), out)
    return out
