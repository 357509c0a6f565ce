"""Blocks of whole rows of a zarr store chunked along columns, read in the
tasks that use them: no rechunk, no shuffle.

A store chunked along its columns (space-chunked climate fields, genotypes
chunked along samples) has no chunk that holds whole rows. Rechunking it to
whole rows moves the whole array between workers (a P2P shuffle of every
chunk). Here instead each block task reads its own rows ``[start, stop)``
across all the column chunks of the store: the zarr slice of a range of rows
decodes the chunks that hold them. The task does so a group of column chunks at
a time, decoding at most about its block's dense size at once
(:func:`column_groups`), into one array of the block's rows. The rows per
block stay those of every other input (the shape decides them), so the sketch
is the one of the same data stored by rows, up to rounding.

The price is read amplification: a stored chunk spanning more rows than a block
is decoded by every block task that needs some of its rows. The plan states the
factor (:attr:`ColumnReadPlan.amplification`), logs it on the ``dasketch``
logger, and warns above :data:`AMPLIFICATION_WARNING` with what to change.

A variants-by-samples genotype store read as samples by variants is the same
plan transposed (``transposed=True``): a block of samples is a range of the
store's columns, read across all its row chunks.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import warnings
from dataclasses import dataclass

import numpy as np

from dasketch._blocks.stores import open_zarr_rows
from dasketch.storage.reading import chunk_read_error, open_store_array
from dasketch.storage.store_checks import check_chunk_files

logger = logging.getLogger("dasketch")

# Warn when the plan decodes every stored chunk this many times or more.
AMPLIFICATION_WARNING = 8
# Blocks of up to this many bytes of float64 are advised as block_rows.
LARGE_BLOCK_BYTES = 2 ** 28


def column_groups(width, chunk, decoded_per_chunk, budget):
    """``(lo, hi)`` column ranges of whole chunks (``chunk`` columns each) such
    that the chunks of one range decode to at most ``budget`` bytes
    (``decoded_per_chunk`` bytes per column chunk; one chunk when a single one
    is larger).

    Examples
    --------
    >>> column_groups(10, 3, 100, 250)
    ((0, 6), (6, 10))
    """
    per_group = max(1, int(budget) // max(int(decoded_per_chunk), 1)) * int(chunk)
    return tuple((lo, min(lo + per_group, int(width))) for lo in range(0, int(width), per_group))


def undecodable_chunk(array, rows, columns, exc, name):
    """The error naming the store and the first chunk within ``rows`` x
    ``columns`` (``(start, stop)`` each) that does not decode, read again one
    chunk at a time, for a read that failed with ``exc``: a ``ValueError``, or a
    ``PermissionError`` for a chunk file that may not be read
    (:func:`dasketch.storage.reading.chunk_read_error`)."""
    (row_chunk, column_chunk), (n, d) = (array.shards or array.chunks)[:2], array.shape[:2]
    where, cause = f"rows {rows[0]}-{rows[1]}", exc
    cells = [(r, c) for r in range(rows[0] - rows[0] % row_chunk, rows[1], row_chunk)
             for c in range(columns[0] - columns[0] % column_chunk, columns[1], column_chunk)]
    for r, c in cells:
        try:
            array[r:min(r + row_chunk, n), c:min(c + column_chunk, d)]
        except Exception as chunk_exc:  # noqa: BLE001 - this is the chunk to name
            key = array.metadata.encode_chunk_key((r // row_chunk, c // column_chunk)
                                                  + (0,) * (array.ndim - 2))
            where, cause = (f"chunk {key!r} (rows {r}-{min(r + row_chunk, n)}, columns "
                            f"{c}-{min(c + column_chunk, d)})", chunk_exc)
            break
    return chunk_read_error(array, where, cause, name)


class ColumnChunkedRows:
    """How a task reads rows ``[start, stop)`` of a checked zarr array chunked
    along columns: one group of column chunks (``groups``) at a time, each
    decoded straight into its columns of the block (a context manager giving
    the block, as :class:`dasketch.storage.reading.ZarrRows`). With ``transposed`` the rows
    read are columns ``[start, stop)`` of the store, as the rows of its
    transpose (``groups`` then range over the store's rows), decoded in the
    store's layout: the block is a Fortran-ordered view, never transposed in
    memory. An array of more
    than two dimensions has its axes after the first stacked into the columns
    (C order: a row of a ``(time, lat, lon)`` store is its ``lat x lon`` grid),
    and ``groups`` range over its second axis. The chunk files
    are checked against the store's fingerprint after the read
    (:func:`dasketch.storage.store_checks.check_chunk_files`)."""

    def __init__(self, check_files, name, groups, transposed=False):
        self.check_files, self.name = check_files, name
        self.groups, self.transposed = tuple(groups), bool(transposed)

    def read(self, array, start, stop):
        from zarr.core.buffer import default_buffer_prototype

        inner = tuple(array.shape[2:])  # axes stacked into the columns
        if self.transposed:  # decoded in the store's layout; the block is its transpose
            stored = np.empty((array.shape[0], stop - start), dtype=array.dtype)
            out = stored.T
        else:
            out = np.empty((stop - start, math.prod(array.shape[1:])), dtype=array.dtype)
        wrap = default_buffer_prototype().nd_buffer.from_numpy_array
        per = math.prod(inner)
        try:
            for lo, hi in self.groups:
                if self.transposed:
                    array.get_basic_selection((slice(lo, hi), slice(start, stop)),
                                              out=wrap(stored[lo:hi]))
                else:  # a view of the block's columns shaped as the selection
                    view = out[:, lo * per:hi * per].reshape((stop - start, hi - lo) + inner,
                                                             copy=False)
                    array.get_basic_selection(
                        (slice(start, stop), slice(lo, hi)) + (slice(None),) * len(inner),
                        out=wrap(view))
        except Exception as exc:  # noqa: BLE001 - a chunk that does not decode, named there
            cells = ((0, array.shape[0]), (start, stop)) if self.transposed else \
                ((start, stop), (0, array.shape[1]))
            raise undecodable_chunk(array, *cells, exc, self.name) from None
        if self.check_files:  # after the read: any change since the fingerprint shows
            rows = (0, array.shape[0]) if self.transposed else (start, stop)
            check_chunk_files(array, *rows, self.name,
                              self.check_files if isinstance(self.check_files, str) else None)
        return out

    def __call__(self, array, start, stop, reuse=False):
        return contextlib.nullcontext(self.read(array, start, stop))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.check_files, self.name, self.groups, self.transposed)


@dataclass(frozen=True)
class ColumnReadPlan:
    """How the blocks of a column-chunked store are read.

    Attributes
    ----------
    groups : tuple of (int, int)
        Column ranges read one after the other by each task.
    block_bytes : int
        The largest block, dense, in the store's dtype: the memory budget of
        the chunks a task decodes at once.
    decoded_bytes : int
        The most a task decodes at once (one group of column chunks).
    amplification : float
        Bytes decoded by all the block tasks over the bytes of the array: how
        many times each stored chunk is decoded, on average.
    itemsize : int
        Bytes of one stored value.
    row_chunk : int
        Rows of a stored chunk (of the transpose, with ``transposed``).
    message : str
        The plan in words (logged, and part of the warning).
    """

    groups: tuple
    block_bytes: int
    decoded_bytes: int
    amplification: float
    itemsize: int
    row_chunk: int
    message: str


def plan_column_reads(shape, chunks, itemsize, offsets, name="X", transposed=False):
    """The :class:`ColumnReadPlan` of blocks ``offsets`` of a store of
    ``shape`` and ``chunks`` (read as its transpose with ``transposed``), or
    None when one chunk spans all its columns (rows are read whole anyway).

    Examples
    --------
    >>> plan = plan_column_reads((1000, 64), (1000, 16), 8, (0, 256, 512, 768, 1000))
    >>> plan.groups, round(plan.amplification, 2)
    (((0, 16), (16, 32), (32, 48), (48, 64)), 4.0)
    """
    if transposed:
        shape, chunks = shape[::-1], chunks[::-1]
    (n, width), (row_chunk, column_chunk) = shape, chunks
    if column_chunk >= width and not transposed:
        return None
    rows = max(stop - start for start, stop in zip(offsets[:-1], offsets[1:]))
    decoded_rows = [min(math.ceil(stop / row_chunk) * row_chunk, n) - start // row_chunk
                    * row_chunk for start, stop in zip(offsets[:-1], offsets[1:])]
    per_chunk = max(decoded_rows) * column_chunk * itemsize  # one column chunk of a block
    block_bytes = rows * width * itemsize
    groups = column_groups(width, column_chunk, per_chunk, block_bytes)
    decoded_bytes = per_chunk * math.ceil((groups[0][1] - groups[0][0]) / column_chunk)
    amplification = sum(decoded_rows) / n
    if transposed:
        layout = (f"{name} is read as the transpose of a zarr store of {width} rows in chunks "
                  f"of {column_chunk} ({row_chunk} columns each); each block task reads its "
                  "rows (columns of the store) across all the store's row chunks")
    else:
        layout = (f"{name}: the zarr store is chunked along columns "
                  f"({math.ceil(width / column_chunk)} column chunks of {column_chunk}, "
                  f"{row_chunk} rows each); each block task reads its rows across all the "
                  "column chunks")
    message = (
        f"{layout}, {len(groups)} group(s) of chunks one after the other (at most "
        f"{decoded_bytes / 2 ** 20:.1f} MiB decoded at once; blocks of {rows} rows, "
        f"{block_bytes / 2 ** 20:.1f} MiB), without a rechunk; each stored chunk is decoded "
        f"by about {amplification:.1f} block tasks")
    return ColumnReadPlan(groups, int(block_bytes), int(decoded_bytes), float(amplification),
                          int(itemsize), int(row_chunk), message)


def state_plan(plan, block_rows):
    """Log ``plan`` on the ``dasketch`` logger, and warn when its read
    amplification reaches :data:`AMPLIFICATION_WARNING`, saying what to change:
    blocks of the store's row chunk when they hold at most
    :data:`LARGE_BLOCK_BYTES` (as float64), else a store whose row chunks
    hold at most ``block_rows`` rows."""
    row_chunk = plan.row_chunk
    logger.info(plan.message)
    if plan.amplification < AMPLIFICATION_WARNING:
        return
    row_bytes = plan.block_bytes / block_rows / plan.itemsize * 8
    advice = f"store it with row chunks of at most {block_rows} rows (a block's rows)"
    if row_chunk * row_bytes <= LARGE_BLOCK_BYTES:
        advice += (f", or pass block_rows={row_chunk} (blocks of "
                   f"{row_chunk * row_bytes / 2 ** 20:.0f} MiB of float64)")
    warnings.warn(f"{plan.message}. To decode each chunk once, {advice}", stacklevel=4)


def zarr_behind(array):
    """The ``zarr.Array`` that a Dask array reads as it is
    (``dask.array.from_zarr``, ``from_array`` of a zarr array, no other
    operation), or None."""
    layers = getattr(array.dask, "layers", None)
    if layers is None or len(layers) != 2 or array.name not in layers:
        return None
    values = [value for key, layer in layers.items() if key != array.name
              for value in layer.values()]
    if len(values) != 1:
        return None
    stored = values[0]
    if type(stored).__module__.split(".")[0] != "zarr" or not hasattr(stored, "chunks") \
            or tuple(stored.shape) != tuple(array.shape) or stored.dtype != array.dtype:
        return None
    return stored


def column_read_reader(source, offsets, *, name="X", component=None, storage_options=None,
                       missing_chunks="fill", transposed=False, reader=None):
    """``(reader, plan)`` of blocks ``offsets`` of the zarr store ``source`` (a
    path, URL or ``zarr.Array``) by :class:`ColumnChunkedRows`, or None when
    it is not chunked along columns. ``reader`` is that of
    :func:`dasketch._blocks.stores.open_zarr_rows` when the caller has it (the store is
    checked by the same task)."""
    if isinstance(source, (str, os.PathLike)):
        store = open_store_array(source, component=component,
                                 storage_options=storage_options, name=name)
    else:
        store = source
    if store.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {tuple(store.shape)}")
    plan = plan_column_reads(tuple(store.shape), tuple(store.chunks), store.dtype.itemsize,
                             offsets, name, transposed)
    if plan is None:
        return None
    if reader is None:
        reader = open_zarr_rows(source, component=component, storage_options=storage_options,
                                missing_chunks=missing_chunks, name=name)[1]
    checked, rows = reader
    return (checked, ColumnChunkedRows(rows.check_files, name, plan.groups, transposed)), plan
