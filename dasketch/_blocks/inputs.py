"""Inputs as :class:`~dasketch._blocks.row_blocks.RowBlocks`: every kind of
matrix a user passes (numpy, scipy.sparse, pandas, Dask arrays and DataFrames,
xarray, zarr arrays, paths and URLs of dense or sparse zarr stores, AnnData
and HDF5) normalised to consecutive blocks of whole rows.

The number of rows per block depends on the shape only, never on how the input
happens to be chunked, so every blocked computation gives the same result for
any chunking, scheduler or number of workers.
"""

from __future__ import annotations

import os
import warnings

import dask
import dask.array as da
import numpy as np
import scipy.sparse

from dasketch._blocks.anndata_blocks import anndata_row_blocks
from dasketch._blocks.column_reads import column_read_reader, state_plan, zarr_behind
from dasketch._blocks.row_blocks import (
    RowBlocks,
    default_block_rows,
    delayed_row_chunks,
    reader_blocks,
)
from dasketch._blocks.scheduler import client_holding, known_row_chunks
from dasketch._blocks.stores import checked_sparse_store, open_zarr_rows
from dasketch._blocks.tasks import check_number
from dasketch.io import (
    REUSED_READ_BYTES,
    CsrRows,
    is_local_path,
    is_sparse_store,
    local_path,
    sparse_store_info,
)


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
