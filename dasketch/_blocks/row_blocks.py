"""Inputs as :class:`RowBlocks`: consecutive blocks of whole rows.

The number of rows per block depends on the shape only, never on how the input
happens to be chunked, so every blocked computation gives the same result for
any chunking, scheduler or number of workers.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, replace
from functools import partial

import dask
import dask.array as da
import numpy as np
import scipy.sparse

from dasketch._blocks import store_watch
from dasketch._blocks.anndata_blocks import anndata_row_blocks
from dasketch._blocks.block_functions import append_ones, read_block, take_columns
from dasketch._blocks.column_reads import column_read_reader, state_plan, zarr_behind
from dasketch._blocks.scheduler import client_holding, known_row_chunks
from dasketch._blocks.stores import checked_sparse_store, open_zarr_rows
from dasketch._blocks.tasks import ReadThenApply, check_number, task
from dasketch.io import (
    REUSED_READ_BYTES,
    CsrRows,
    is_local_path,
    is_sparse_store,
    local_path,
    sparse_store_info,
)

# A dense block holds about this many values (32 MiB in float64).
BLOCK_VALUES = 2 ** 22
# Fewest rows per default block (a few times a typical sketch size).
MIN_BLOCK_ROWS = 32
# Most rows per default block.
MAX_BLOCK_ROWS = 2 ** 16


def default_block_rows(n_features, *, block_values=BLOCK_VALUES, max_rows=MAX_BLOCK_ROWS):
    """Rows per block for ``n_features`` columns (or nonzeros per sparse row): a
    power of two in [MIN_BLOCK_ROWS, max_rows] with about ``block_values`` values
    per block (32 MiB of float64 by default). Wide rows get fewer rows per block,
    down to 32 (256 MiB at d = 1e6), so a block's memory stays bounded for any d."""
    rows = int(block_values) // max(int(n_features), 1)
    rows = 1 << max(int(rows).bit_length() - 1, 0)
    return int(min(max(rows, MIN_BLOCK_ROWS), max_rows))


@dataclass(frozen=True)
class RowBlocks:
    """A matrix as consecutive blocks of whole rows.

    Attributes
    ----------
    blocks : tuple of dask.delayed.Delayed
        Each evaluates to a 2-D ndarray or scipy.sparse CSR matrix.
    offsets : tuple of int
        Row ``offsets[i]`` is the first row of block ``i``; the last entry is n.
    n_features : int
    dtype : numpy.dtype
    sparse : bool
    read_bytes : int
        Bytes one block task holds while reading its rows: the largest input
        chunk that a block is cut from (a whole zarr chunk is read at once), at
        least the block itself; for sparse inputs the CSR rows of a block at the
        mean number of nonzeros a row (16 bytes each).
    reader : tuple or None
        For stores (dense and sparse zarr, HDF5), ``(source, read)``: a task
        reads its block's rows itself, ``read(source, start, stop, reuse)``
        (:class:`dasketch.io.ZarrRows`, :class:`dasketch.io.CsrRows`,
        :class:`~dasketch._blocks.anndata_blocks.H5Rows`), instead of
        depending on a read task; ``source`` is the Delayed store check (or
        the file name). None for inputs in memory, Dask arrays, and dense
        blocks of more than :data:`~dasketch.io.REUSED_READ_BYTES`.
    transform : tuple of callables
        Applied in order to the rows a task reads through ``reader`` (the
        intercept column of :func:`append_ones_column`, the columns of
        :func:`select_columns`); ``blocks`` already include them.
    resident : bool
        Whether the blocks are in memory already (in-memory input, a persisted
        Dask array, blocks kept by :func:`~dasketch._blocks.cache.cache_blocks`).
    plan : str
        How the tasks get their rows: ``"rows"`` (the input's own rows, or a
        task reading a store's rows), ``"column reads"`` (a task reading its
        rows across the column chunks of a store,
        :mod:`dasketch._blocks.column_reads`) or ``"rechunk"`` (a Dask array
        chunked along columns, rechunked to whole rows).
    """

    blocks: tuple
    offsets: tuple
    n_features: int
    dtype: np.dtype
    sparse: bool
    read_bytes: int = 0
    reader: tuple | None = None
    transform: tuple = ()
    resident: bool = False
    plan: str = "rows"

    @property
    def n_rows(self):
        return self.offsets[-1]

    @property
    def shape(self):
        return (self.n_rows, self.n_features)

    def ranges(self):
        """``(start, stop)`` of every block."""
        return list(zip(self.offsets[:-1], self.offsets[1:]))


def _check_shape(shape, name):
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{len(shape)}-D input with shape {tuple(shape)}")
    if shape[0] == 0:
        raise ValueError(f"{name} has zero rows; at least one row is required")
    if shape[1] == 0:
        raise ValueError(f"{name} has zero columns; at least one column is required")


def _check_dtype(dtype, name):
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")
    return dtype


def _check_block_rows(block_rows):
    return int(check_number(block_rows, "block_rows", integral=True, low=1))


def _block_rows(block_rows, shape, default_rows=None):
    if block_rows is not None:
        rows = _check_block_rows(block_rows)
    elif default_rows is None:
        rows = default_block_rows(shape[1])
    else:
        rows = default_rows(shape[1], shape[1], False)
    return min(rows, shape[0])


def as_row_blocks(X, *, block_rows=None, name="X", component=None, storage_options=None,
                  missing_chunks="fill", default_rows=None):
    """Normalise an input matrix to :class:`RowBlocks`.

    Parameters
    ----------
    X : dask.array.Array, dask.dataframe.DataFrame, numpy.ndarray, pandas.DataFrame, \
scipy.sparse matrix or array (any format), zarr.Array, str or os.PathLike
        Rows are samples. A string or path is a zarr store (a local directory, a
        local ``.zip`` store, or an fsspec URL). A Dask array with unknown row
        chunk sizes (``ddf.values``, ``ddf.to_dask_array()``) or a Dask
        DataFrame first has its row counts computed, once
        (:func:`known_row_chunks`). The dtype is kept (float32 stays
        float32); in-memory values are read as they are, so callers that need
        finite values check them first (the estimators do, through
        :func:`dasketch.utils.validation.validate_input`).
    block_rows : int, optional
        Rows per block; default :func:`default_block_rows`. Blocks, not the
        input's chunks, decide the result, so any chunking gives the same result.
    name : str
        Name of the argument, used in error messages.
    component, storage_options, missing_chunks
        For zarr inputs, see :func:`dasketch._blocks.stores.open_zarr_array`: a store is
        checked on a worker before any block is read, and by every read task
        (storage the workers cannot read, a store that changes during the job,
        or, with ``missing_chunks="raise"``, absent chunks, is an error naming
        the store).
    default_rows : callable, optional
        ``default_rows(values_per_row, n_features, sparse)``: the rows per block
        when ``block_rows`` is None (``values_per_row`` is the mean number of
        nonzeros of sparse rows), instead of :func:`default_block_rows` of the
        values per row.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        Naming the argument: unsupported type, non-real dtype, not 2-D, zero rows
        or columns, missing store.
    """
    if isinstance(X, RowBlocks):
        return X
    if type(X).__module__.split(".")[0] == "xarray":  # a DataArray: its data, lazy stays lazy
        X = X.data
    X = known_row_chunks(X)
    stored = anndata_row_blocks(  # an AnnData matrix in a zarr store or an HDF5 (.h5ad) file
        X, component=component, storage_options=storage_options, missing_chunks=missing_chunks,
        name=name, rows=lambda nnz, n_rows, n_features, sparse: _sparse_block_rows(
            block_rows, nnz, n_rows, n_features, default_rows) if sparse else _block_rows(
            block_rows, (n_rows, n_features), default_rows))
    if stored is not None:
        return RowBlocks(reader_blocks(stored["offsets"], stored["reader"]), **stored)
    reader = source = None
    if isinstance(X, (str, os.PathLike)) and _is_zip_store(X):
        X = _open_zip_array(X, component, name)
    elif isinstance(X, (str, os.PathLike)):
        if is_sparse_store(X, component=component, storage_options=storage_options):
            return _sparse_store_blocks(X, block_rows, component, storage_options,
                                        missing_chunks, name, default_rows)
        source = X
        X, reader = open_zarr_rows(X, component=component, storage_options=storage_options,
                                   missing_chunks=missing_chunks, name=name)
    elif component is not None or storage_options is not None:
        raise ValueError(f"component and storage_options apply only when {name} is a "
                         "zarr path or URL")
    if scipy.sparse.issparse(X):
        return _sparse_row_blocks(X, block_rows, name, default_rows)
    if _is_zarr_array(X):
        source = X
        X, reader = open_zarr_rows(X, missing_chunks=missing_chunks, name=name)
    elif not isinstance(X, da.Array) and (
            isinstance(X, (np.ndarray, list, tuple)) or np.isscalar(X)
            or hasattr(X, "__array__")):  # pandas DataFrames and other array-likes
        X = np.asarray(X)
        _check_shape(X.shape, name)
        dtype = _check_dtype(X.dtype, name)
        rows = _block_rows(block_rows, X.shape, default_rows)
        return _in_memory_row_blocks(X, rows, dtype, False, rows * X.shape[1] * dtype.itemsize)
    if not isinstance(X, da.Array):
        raise TypeError(f"{name} must be a Dask array, numpy array, pandas DataFrame, "
                        "scipy.sparse matrix, zarr.Array or a zarr path/URL, got "
                        f"{type(X).__name__}")
    _check_shape(X.shape, name)
    dtype = _check_dtype(X.dtype, name)
    plan = "rows"
    if len(X.chunks[1]) > 1 and zarr_behind(X) is not None:
        source = zarr_behind(X)  # dask.array.from_zarr: its tasks read the store instead
        X, reader = open_zarr_rows(source, missing_chunks=missing_chunks, name=name)
    elif len(X.chunks[1]) > 1:
        plan = "rechunk"
        warnings.warn(f"{name} is chunked along columns ({len(X.chunks[1])} column chunks); "
                      f"rechunking to whole rows moves all its {X.nbytes / 2 ** 20:.0f} MiB "
                      "between tasks (a zarr store, or dask.array.from_zarr of one, is read "
                      "by rows in the tasks instead)", stacklevel=3)
    rows = _block_rows(block_rows, X.shape, default_rows)
    if reader is not None:
        offsets = tuple(range(0, X.shape[0], rows)) + (X.shape[0],)
        planned = column_read_reader(source, offsets, name=name, component=component,
                                     storage_options=storage_options, reader=reader)
        if planned is not None:  # chunked along columns: each task reads across them
            reader, column_plan = planned
            state_plan(column_plan, rows)
            return RowBlocks(reader_blocks(offsets, reader), offsets, int(X.shape[1]), dtype,
                             False, column_plan.block_bytes + column_plan.decoded_bytes,
                             reader, plan="column reads")
    row_chunks = X.chunks[0]
    canonical = all(c == rows for c in row_chunks[:-1]) and row_chunks[-1] <= rows
    read_rows = max(max(row_chunks), rows) if canonical else max(row_chunks) + rows
    read_bytes = read_rows * int(X.shape[1]) * dtype.itemsize
    if not canonical or len(X.chunks[1]) > 1:
        X = X.rechunk({0: rows, 1: -1})
    persisted = client_holding([X]) is not None
    blocks = tuple(delayed_row_chunks(X))
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(X.chunks[0])]))
    if rows * int(X.shape[1]) * dtype.itemsize > REUSED_READ_BYTES:
        # Wide blocks: a task reading its own block raises the peak memory of a
        # worker and is no faster (bench_scale.py --wide; benchmarks/README.md).
        reader = None
    if reader is not None:
        blocks = reader_blocks(offsets, reader)
    return RowBlocks(blocks, offsets, int(X.shape[1]), dtype, False, read_bytes, reader,
                     resident=persisted, plan=plan)


def reader_blocks(offsets, reader, transform=()):
    """One task per block that reads its rows ``[start, stop)`` through
    ``reader`` (``(source, read)``, see :class:`RowBlocks`) and applies
    ``transform``: the ``blocks`` of an input read by its tasks, for what needs
    the rows themselves (a cache, a walk over the blocks)."""
    source, read = reader
    apply = task(ReadThenApply(read_block, read, False, transform))
    return tuple(apply(source, start, stop) for start, stop in zip(offsets[:-1], offsets[1:]))


def delayed_row_chunks(array):
    """The row chunks of a Dask array as Delayed objects (graphs of persisted
    arrays are not optimised, which would hide the futures that name their
    client). An optimised graph loses the names of its layers, so the chunks
    are registered as reading the remote stores the array reads
    (:func:`dasketch._blocks.store_watch.carry`)."""
    persisted = client_holding([array]) is not None
    chunks = array.to_delayed(optimize_graph=not persisted).ravel()
    store_watch.carry(chunks, store_watch.stores_read_by([array]))
    return chunks


def chunk_blocks(array):
    """The row chunks of a Dask array, as they are, as :class:`RowBlocks` (e.g. a
    persisted projection ``X R``, to pass over with the bridge's primitives).

    Examples
    --------
    >>> import dask.array as da
    >>> chunk_blocks(da.ones((5, 3), chunks=(2, 1))).offsets
    (0, 2, 4, 5)
    """
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(array.chunks[0])]))
    if any(len(c) > 1 for c in array.chunks[1:]):
        array = array.rechunk({ax: -1 for ax in range(1, array.ndim)})
    width = int(np.prod(array.shape[1:], dtype=np.int64))
    return RowBlocks(tuple(delayed_row_chunks(array)), offsets, width, array.dtype, False)


def _is_zarr_array(X):
    return type(X).__module__.split(".")[0] == "zarr" and hasattr(X, "shape")


def _is_zip_store(path):
    path = os.fspath(path)
    return is_local_path(path) and local_path(path).endswith(".zip")


def _open_zip_array(path, component, name):
    """A zarr array in a local ``.zip`` store (zarr opens a path as a directory
    store, so the zip store is opened explicitly; read-only)."""
    import zarr

    path = local_path(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"{name}: no zarr store at {path!r}")
    store = zarr.storage.ZipStore(path, mode="r")
    try:
        return zarr.open_array(store, mode="r", path=component or "")
    except Exception as exc:
        where = f" at component {component!r}" if component else ""
        raise ValueError(f"{name}: no zarr array in {path!r}{where}") from exc


def _sparse_block_rows(block_rows, nnz, n_rows, n_features, default_rows):
    if block_rows is None:
        nnz_per_row = max(nnz / max(n_rows, 1), 1.0)
        block_rows = (default_block_rows(nnz_per_row) if default_rows is None
                      else default_rows(nnz_per_row, n_features, True))
    return min(_check_block_rows(block_rows), n_rows)


def _sparse_row_blocks(X, block_rows, name, default_rows=None):
    _check_shape(X.shape, name)
    dtype = _check_dtype(X.dtype, name)
    X = scipy.sparse.csr_matrix(X)
    n_rows, n_features = X.shape
    rows = _sparse_block_rows(block_rows, X.nnz, n_rows, n_features, default_rows)
    return _in_memory_row_blocks(X, rows, dtype, True, _csr_block_bytes(X.nnz, n_rows, rows))


def _in_memory_row_blocks(X, rows, dtype, sparse, read_bytes):
    """Blocks of ``rows`` rows of an in-memory matrix (ndarray or CSR), each a
    graph literal under a key named here: numpy blocks are views, and the matrix
    is not copied (``dask.array.from_array`` copies its whole input: 0.16 s and
    512 MiB more for 8,192 x 8,192). The keys are named after the matrix's
    content, so that the same data gives the same keys (and identical work is
    shared) and different data different keys: ``dask.base.tokenize`` hashes
    the buffer in memory order with the shape and dtype, which a square matrix
    and its transpose share, so the strides enter the token too."""
    n_rows = X.shape[0]
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    token = dask.base.tokenize(X, getattr(X, "strides", None), rows)
    blocks = tuple(dask.delayed(X[start:stop], name=f"rows-{start}-{token}")
                   for start, stop in zip(offsets[:-1], offsets[1:]))
    return RowBlocks(blocks, offsets, int(X.shape[1]), dtype, sparse, int(read_bytes),
                     resident=True)


def _csr_block_bytes(nnz, n_rows, rows):
    """Bytes of the CSR rows of one block of ``rows`` rows (float64 values and int64
    column indices) at the matrix's mean number of nonzeros a row."""
    return int(16 * np.ceil(nnz / max(n_rows, 1) * rows))


def _sparse_store_blocks(path, block_rows, component, storage_options, missing_chunks, name,
                         default_rows=None):
    n_rows, n_features, nnz, dtype = sparse_store_info(
        path, component=component, storage_options=storage_options)
    rows = _sparse_block_rows(block_rows, nnz, n_rows, n_features, default_rows)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    group, fingerprint = checked_sparse_store(
        path, component=component, storage_options=storage_options,
        missing_chunks=missing_chunks, name=name)
    reader = (group, CsrRows(fingerprint, name))
    return RowBlocks(reader_blocks(offsets, reader), offsets, n_features, np.dtype(dtype), True,
                     _csr_block_bytes(nnz, n_rows, rows), reader)


def append_ones_column(X):
    """``[X 1]``: a column of ones appended (an intercept) to an in-memory matrix
    (ndarray or scipy.sparse, kept in its kind and dtype) or, lazily, to every
    block of :class:`RowBlocks` (tasks that read their rows themselves append
    it after reading).

    Examples
    --------
    >>> import numpy as np, dask
    >>> from dasketch._blocks import append_ones_column, as_row_blocks
    >>> blocks = append_ones_column(as_row_blocks(np.zeros((3, 2)), block_rows=2))
    >>> blocks.shape, dask.compute(blocks.blocks[1])[0]
    ((3, 3), array([[0., 0., 1.]]))
    """
    if not isinstance(X, RowBlocks):
        return append_ones(X)
    return _transformed(X, append_ones, X.n_features + 1)


def select_columns(blocks, index):
    """:class:`RowBlocks` of the columns ``index`` (integers) of every block,
    taken in the task that reads the block (or from the block's task).

    Examples
    --------
    >>> import numpy as np, dask
    >>> from dasketch._blocks import as_row_blocks, select_columns
    >>> blocks = select_columns(as_row_blocks(np.arange(6.0).reshape(2, 3)), [0, 2])
    >>> blocks.shape, dask.compute(blocks.blocks[0])[0]
    ((2, 2), array([[0., 2.],
           [3., 5.]]))
    """
    index = np.asarray(index, dtype=np.int64)
    return _transformed(blocks, partial(take_columns, index=index), int(index.size))


def _transformed(blocks, step, n_features):
    """``blocks`` with ``step`` applied to every block (worker-side functions
    only: it is pickled into every task), ``n_features`` columns after it."""
    if blocks.reader is not None:
        transform = blocks.transform + (step,)
        return replace(blocks, blocks=reader_blocks(blocks.offsets, blocks.reader, transform),
                       n_features=n_features, transform=transform)
    apply = task(step)
    return replace(blocks, blocks=tuple(apply(block) for block in blocks.blocks),
                   n_features=n_features)


def as_row_aligned(v, blocks, name="v"):
    """``v`` (numpy or Dask, 1-D or 2-D with ``n`` rows) as a Dask array whose row
    chunks are the blocks of ``blocks`` (one chunk along any other axis). A Dask
    array of unknown row chunk sizes has them computed (:func:`known_row_chunks`).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, as_row_aligned
    >>> blocks = as_row_blocks(np.ones((10, 3)), block_rows=4)
    >>> as_row_aligned(np.arange(10.0), blocks).chunks
    ((4, 4, 2),)
    """
    v = known_row_chunks(v)
    if not isinstance(v, da.Array):
        v = np.asarray(v)
    if v.ndim not in (1, 2) or v.shape[0] != blocks.n_rows:
        raise ValueError(f"{name} must have {blocks.n_rows} rows, got shape {tuple(v.shape)}")
    chunks = (tuple(np.diff(blocks.offsets)),) + tuple((s,) for s in v.shape[1:])
    if isinstance(v, da.Array):
        return v.rechunk(chunks)
    return da.from_array(v, chunks=chunks)


def rechunk_rows(array, rows):
    """Rechunk a Dask array to ``rows`` rows per chunk and one chunk along other axes.

    Examples
    --------
    >>> import dask.array as da
    >>> from dasketch._blocks import rechunk_rows
    >>> rechunk_rows(da.ones((5, 4), chunks=(1, 2)), 2).chunks
    ((2, 2, 1), (4,))
    """
    return array.rechunk({0: int(rows), **{ax: -1 for ax in range(1, array.ndim)}})


