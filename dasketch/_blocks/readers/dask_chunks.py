"""A Dask array's row chunks as :class:`~dasketch._blocks.row_blocks.RowBlocks`.

Blocks have the rows the options give for the array's shape: row chunks of
exactly that many rows (the last one fewer) are the blocks as they are, any
other chunking is rechunked to them first. A block task either computes its
chunk or, for a store, reads its rows itself.
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks.readers.options import MAX_DECODED, decoded_rows
from dasketch._blocks.row_blocks import RowBlocks, delayed_row_chunks, reader_blocks
from dasketch._blocks.scheduler import client_holding
from dasketch.storage.reading import REUSED_READ_BYTES


def chunk_row_blocks(X, rows, dtype, *, reader=None, plan="rows"):
    """Blocks of ``rows`` rows of the 2-D Dask array ``X``.

    Parameters
    ----------
    X : dask.array.Array
    rows : int
        Rows per block.
    dtype : numpy.dtype
    reader : tuple, optional
        ``(source, read)`` of a store the tasks read their rows from
        (:func:`~dasketch._blocks.stores.open_zarr_rows`); dropped for blocks of
        more than :data:`~dasketch.storage.reading.REUSED_READ_BYTES`, whose tasks read the
        store's chunks instead (no faster, and a worker's peak memory is
        higher, with a task reading its own wide block: ``bench_scale.py
        --wide``, ``benchmarks/README.md``), and where reading their own rows
        would decode more than :data:`~dasketch._blocks.readers.options.MAX_DECODED`
        times the rows (zarr decodes a whole chunk for any of its rows, so blocks
        that cut chunks decode them again): each chunk is then decoded once, by
        its own task, and the blocks are rechunked from them.
    plan : str
        How the blocks are read, as :class:`RowBlocks` states it.

    Returns
    -------
    RowBlocks
        Whose ``read_bytes`` is the largest chunk a block is cut from, at least
        a block; ``resident`` when a client holds ``X`` in memory.
    """
    row_chunks = X.chunks[0]
    canonical = all(c == rows for c in row_chunks[:-1]) and row_chunks[-1] <= rows
    read_rows = max(max(row_chunks), rows) if canonical else max(row_chunks) + rows
    read_bytes = read_rows * int(X.shape[1]) * dtype.itemsize
    if not canonical or len(X.chunks[1]) > 1:
        X = X.rechunk({0: rows, 1: -1})
    persisted = client_holding([X]) is not None
    blocks = tuple(delayed_row_chunks(X))
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(X.chunks[0])]))
    if (rows * int(X.shape[1]) * dtype.itemsize > REUSED_READ_BYTES
            or decoded_rows(offsets, (0, *np.cumsum(row_chunks))) > MAX_DECODED * X.shape[0]):
        reader = None
    if reader is not None:
        blocks = reader_blocks(offsets, reader)
    return RowBlocks(blocks, offsets, int(X.shape[1]), dtype, False, read_bytes, reader,
                     resident=persisted, plan=plan)
