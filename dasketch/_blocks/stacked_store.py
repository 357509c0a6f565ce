"""A zarr array of more than two dimensions as :class:`~dasketch._blocks.RowBlocks`:
its first axis the rows, its other axes stacked into the columns, read in the
tasks that use them.

A field stored as ``(time, lat, lon)`` is analysed as a matrix of ``time`` rows
and ``lat x lon`` columns (C order, as ``numpy.reshape``). Each block task reads
its rows ``[start, stop)`` across all the store's chunks
(:class:`~dasketch._blocks.column_reads.ColumnChunkedRows`), so a store chunked
along space is neither reshaped by Dask nor rechunked; its columns of interest
(a land mask dropped) and their weights are applied by the same task
(:func:`masked_weighted`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

import numpy as np

from dasketch._blocks.block_functions import take_columns, weigh_columns
from dasketch._blocks.column_reads import (
    ColumnChunkedRows,
    plan_column_reads,
    state_plan,
)
from dasketch._blocks.row_blocks import (
    RowBlocks,
    _block_rows,
    _check_dtype,
    _transformed,
    reader_blocks,
)
from dasketch.io import open_checked_store


def stacked_store_blocks(source, *, component=None, block_rows=None, storage_options=None,
                         missing_chunks="fill", name="X"):
    """Row blocks of the zarr array ``source`` (a path or URL with ``component``,
    or a ``zarr.Array``) of at least two dimensions, its axes after the first
    stacked into columns; rows per block as for any input of the stacked shape.

    The plan is ``"column reads"`` when the store is chunked along its second
    axis (stated as :func:`~dasketch._blocks.column_reads.state_plan` does),
    else ``"rows"``: either way each task reads its own rows, and no rechunk or
    shuffle enters the graph.
    """
    store, checked, digest = open_checked_store(
        source, component=component, storage_options=storage_options,
        missing_chunks=missing_chunks, name=name)
    if store.ndim < 2:
        raise ValueError(f"{name} must have at least 2 dimensions, got shape "
                         f"{tuple(store.shape)}")
    dtype = _check_dtype(store.dtype, name)
    n_rows, inner = int(store.shape[0]), math.prod(store.shape[2:])
    shape = (n_rows, int(store.shape[1]) * inner)
    rows = _block_rows(block_rows, shape)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    plan = plan_column_reads((n_rows, int(store.shape[1])), tuple(store.chunks[:2]),
                             dtype.itemsize * inner, offsets, name)
    if plan is None:  # whole along the second axis: a block is its rows' chunks
        groups, plan_name = ((0, int(store.shape[1])),), "rows"
        read_bytes = (max(store.chunks[0], rows) + rows) * shape[1] * dtype.itemsize
    else:
        state_plan(plan, rows)
        groups, plan_name = plan.groups, "column reads"
        read_bytes = plan.block_bytes + plan.decoded_bytes
    reader = (checked, ColumnChunkedRows(digest, name, groups))
    return RowBlocks(reader_blocks(offsets, reader), offsets, shape[1], dtype, False,
                     int(read_bytes), reader, plan=plan_name)


def masked_weighted(blocks, columns=None, weights=None):
    """``blocks`` with only ``columns`` (integer indices, all when None) kept and
    multiplied by ``weights`` (one per kept column, in the blocks' float dtype;
    float64 for integer blocks), both in the task that reads a block."""
    if columns is not None and len(columns) < blocks.n_features:
        columns = np.asarray(columns, dtype=np.int64)
        blocks = _transformed(blocks, partial(take_columns, index=columns), int(columns.size))
    if weights is not None:
        dtype = blocks.dtype if blocks.dtype.kind == "f" else np.dtype(np.float64)
        weights = np.asarray(weights).astype(dtype)
        blocks = replace(_transformed(blocks, partial(weigh_columns, weights=weights),
                                      blocks.n_features), dtype=np.dtype(dtype))
    return blocks
