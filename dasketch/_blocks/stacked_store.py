"""A zarr array of more than two dimensions as :class:`~dasketch._blocks.RowBlocks`:
its first axis the rows, its other axes stacked into the columns, read in the
tasks that use them.

A field stored as ``(time, lat, lon)`` is analysed as a matrix of ``time`` rows
and ``lat x lon`` columns (C order, as ``numpy.reshape``). Each block task reads
its rows ``[start, stop)`` across all the store's chunks
(:class:`~dasketch._blocks.column_reads.ColumnChunkedRows`), so a store chunked
along space is neither reshaped by Dask nor rechunked; its columns of interest
(a land mask dropped) and their weights are applied by the same task
(:func:`masked_weighted`). Its transpose, whose rows (the grid points kept)
are whole in a store chunked along space, is read by blocks of grid points
(:func:`stacked_transposed_blocks`), each task decoding its chunks once.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import replace
from functools import partial

import numpy as np

from dasketch._blocks.block_functions import take_columns, weigh_columns
from dasketch._blocks.column_reads import (
    ColumnChunkedRows,
    plan_column_reads,
    state_plan,
    undecodable_chunk,
)
from dasketch._blocks.readers.options import check_dtype, dense_block_rows
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks, transformed_blocks
from dasketch._blocks.stores import open_checked_store
from dasketch.storage.store_checks import check_chunk_files


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
    dtype = check_dtype(store.dtype, name)
    shape, offsets, plan = stacked_plan(store, block_rows, name)
    rows = offsets[1] - offsets[0]
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


def stacked_plan(store, block_rows=None, name="X"):
    """``(shape, offsets, plan)`` of the row blocks of the stacked N-D ``store``:
    its 2-D shape, the blocks' first rows (and ``n``) and the
    :class:`~dasketch._blocks.column_reads.ColumnReadPlan` of reading them
    across the chunks of its second axis (None when that axis is whole)."""
    if store.ndim < 2:
        raise ValueError(f"{name} must have at least 2 dimensions, got shape "
                         f"{tuple(store.shape)}")
    n_rows, inner = int(store.shape[0]), math.prod(store.shape[2:])
    shape = (n_rows, int(store.shape[1]) * inner)
    rows = dense_block_rows(block_rows, shape)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    plan = plan_column_reads((n_rows, int(store.shape[1])), tuple(store.chunks[:2]),
                             store.dtype.itemsize * inner, offsets, name)
    return shape, offsets, plan


class StackedColumns:
    """How a task reads columns ``columns[start:stop]`` of the stacked matrix of
    an N-D zarr array as rows (of its transpose), each times its ``weights``
    entry (when given): the task decodes the chunks of the second-axis range
    that holds them, across every row chunk, then checks their files against
    the store's fingerprint (as :class:`ColumnChunkedRows`)."""

    def __init__(self, check_files, name, columns, weights=None):
        self.check_files, self.name = check_files, name
        self.columns, self.weights = np.asarray(columns, dtype=np.int64), weights

    def read(self, array, start, stop):
        columns = self.columns[start:stop]
        per = math.prod(array.shape[2:])
        lo, hi = int(columns[0]) // per, int(columns[-1]) // per + 1
        try:
            block = array[:, lo:hi]
        except Exception as exc:  # noqa: BLE001 - a chunk that does not decode, named there
            raise undecodable_chunk(array, (0, array.shape[0]), (lo, hi), exc,
                                    self.name) from None
        if self.check_files:
            check_chunk_files(array, 0, array.shape[0], self.name,
                              self.check_files if isinstance(self.check_files, str) else None)
        block = block.reshape(array.shape[0], -1)[:, columns - lo * per].T
        if self.weights is not None:
            block = block * self.weights[start:stop, None]
        return block

    def __call__(self, array, start, stop, reuse=False):
        return contextlib.nullcontext(self.read(array, start, stop))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.check_files, self.name, self.columns.tobytes(),
                None if self.weights is None else self.weights.tobytes())


def stacked_transposed_blocks(store, columns, weights=None, *, block_rows=None, name="X"):
    """Row blocks of the transpose of the stacked matrix of the N-D zarr array
    ``store``, restricted to ``columns`` (the grid points kept, increasing) and
    each multiplied by its ``weights`` entry (in the store's float dtype, float64
    for integers): block ``i`` holds ``block_rows`` (default: as for any input
    of its shape) of those columns, read by its task (:class:`StackedColumns`)."""
    store, checked, digest = open_checked_store(store, name=name)
    dtype = check_dtype(store.dtype, name)
    columns = np.asarray(columns, dtype=np.int64)
    if weights is not None:
        dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
        weights = np.asarray(weights).astype(dtype)
    n_rows, n_samples = int(columns.size), int(store.shape[0])
    rows = dense_block_rows(block_rows, (n_rows, n_samples))
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    reader = (checked, StackedColumns(digest, name, columns, weights))
    read_bytes = 2 * store.dtype.itemsize * n_samples * rows * \
        math.ceil(store.shape[1] * math.prod(store.shape[2:]) / max(n_rows, 1))
    return RowBlocks(reader_blocks(offsets, reader), offsets, n_samples, dtype, False,
                     int(read_bytes), reader, plan="transposed")


def masked_weighted(blocks, columns=None, weights=None):
    """``blocks`` with only ``columns`` (integer indices, all when None) kept and
    multiplied by ``weights`` (one per kept column, in the blocks' float dtype;
    float64 for integer blocks), both in the task that reads a block."""
    if columns is not None and len(columns) < blocks.n_features:
        columns = np.asarray(columns, dtype=np.int64)
        blocks = transformed_blocks(blocks, partial(take_columns, index=columns),
                                    int(columns.size))
    if weights is not None:
        dtype = blocks.dtype if blocks.dtype.kind == "f" else np.dtype(np.float64)
        weights = np.asarray(weights).astype(dtype)
        blocks = replace(transformed_blocks(blocks, partial(weigh_columns, weights=weights),
                                            blocks.n_features), dtype=np.dtype(dtype))
    return blocks
