"""Inputs as :class:`~dasketch._blocks.row_blocks.RowBlocks`: every kind of
matrix a user passes (numpy, scipy.sparse, pandas, Dask arrays and DataFrames,
xarray, zarr arrays, paths and URLs of dense or sparse zarr stores, AnnData
and HDF5, Parquet datasets, Arrow tables) normalised to consecutive blocks of whole rows, by the
first reader of :mod:`dasketch._blocks.readers` that can read it.

The number of rows per block depends on the shape only, never on how the input
happens to be chunked, so every blocked computation gives the same result for
any chunking, scheduler or number of workers.
"""

from __future__ import annotations

import os

from dasketch._blocks.readers import ReadOptions, read_row_blocks
from dasketch._blocks.readers.in_memory import in_memory_row_blocks as _in_memory_row_blocks
from dasketch._blocks.readers.options import check_block_rows as _check_block_rows
from dasketch._blocks.readers.options import check_dtype as _check_dtype
from dasketch._blocks.readers.options import check_shape as _check_shape
from dasketch._blocks.readers.options import csr_block_bytes as _csr_block_bytes
from dasketch._blocks.readers.options import dense_block_rows as _block_rows
from dasketch._blocks.readers.options import sparse_block_rows as _sparse_block_rows
from dasketch._blocks.readers.parquet import ParquetSource
from dasketch._blocks.readers.zarr_stores import is_zarr_array as _is_zarr_array
from dasketch._blocks.readers.zarr_stores import is_zip_store as _is_zip_store
from dasketch._blocks.readers.zarr_stores import open_zip_array as _open_zip_array
from dasketch._blocks.row_blocks import RowBlocks
from dasketch._blocks.scheduler import is_dask_collection

# Names this module defined before the readers held them.
__all__ = [
    "_block_rows", "_check_block_rows", "_check_dtype", "_check_shape", "_csr_block_bytes",
    "_in_memory_row_blocks", "_is_zarr_array", "_is_zip_store", "_open_zip_array",
    "_sparse_block_rows", "as_row_blocks", "is_out_of_core",
]


def as_row_blocks(X, *, block_rows=None, name="X", component=None, storage_options=None,
                  missing_chunks="fill", default_rows=None, columns=None, min_blocks=1,
                  array_libraries="numpy", content_keys=True):
    """Normalise an input matrix to :class:`RowBlocks`.

    Parameters
    ----------
    X : dask.array.Array, dask.dataframe.DataFrame, numpy.ndarray, pandas.DataFrame, \
scipy.sparse matrix or array (any format), zarr.Array, pyarrow.Table, str or os.PathLike
        Rows are samples. A string or path is a zarr store (a local directory, a
        local ``.zip`` store, or an fsspec URL), an HDF5 (``.h5ad``) file or a
        Parquet dataset (:mod:`dasketch._blocks.readers.parquet`; numeric
        columns, nulls are NaN, also as ``dasketch.read_parquet`` opens it). A
        Dask array with unknown row chunk sizes (``ddf.values``,
        ``ddf.to_dask_array()``) or a Dask DataFrame first has its row counts
        computed, once (:func:`known_row_chunks`). An xarray DataArray is read
        as its data. The dtype is kept (float32 stays float32); in-memory
        values are read as they are, so callers that need finite values check
        them first (the estimators do, through
        :func:`dasketch._blocks.validation.validate_input`). Other kinds are
        read by the readers registered with
        :func:`dasketch._blocks.readers.register_reader`.
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
    columns : list of str, optional
        For a Parquet dataset or an Arrow table: the columns read as features,
        in this order (:mod:`dasketch._blocks.readers.arrow`).
    min_blocks : int, default 1
        With ``block_rows`` None, a matrix of few default blocks is cut into
        this many equal ones (a power of two) while each keeps a few MiB
        (:func:`~dasketch._blocks.readers.options.spread_block_rows`): passes
        run one block a thread, so a count that divides among the threads
        keeps every thread busy. Still a function of the shape only.
    array_libraries : {"numpy", "any"}, default "numpy"
        ``"any"``: a CuPy array, a Dask array of CuPy blocks or an array of
        another array API library is read as blocks of its library (the
        caller's block functions compute in its namespace); ``"numpy"``: such an
        array is a ``TypeError`` (:mod:`dasketch._blocks.readers.array_types`).
    content_keys : bool, default True
        Name the blocks of a numpy or scipy.sparse matrix in memory after its
        content (a hash of it), so that the same data gives the same keys in
        every computation; False names them by a fresh token, sparing the hash,
        for a caller whose passes all run eagerly in this process
        (:func:`~dasketch._blocks.row_blocks.passes_run_eagerly`).

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
    return read_row_blocks(X, ReadOptions(
        block_rows=block_rows, name=name, component=component,
        storage_options=storage_options, missing_chunks=missing_chunks,
        default_rows=default_rows, columns=columns, min_blocks=int(min_blocks),
        array_libraries=array_libraries, content_keys=bool(content_keys)))


def is_out_of_core(X):
    """Whether ``X`` is read lazily block by block: a Dask collection, a
    ``zarr.Array``, a path or URL, a Parquet dataset (``dasketch.read_parquet``)
    or :class:`RowBlocks`.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> is_out_of_core(da.ones((4, 2))), is_out_of_core("data.zarr"), is_out_of_core(np.ones(2))
    (True, True, False)
    """
    if isinstance(X, (RowBlocks, ParquetSource, str, os.PathLike)) or is_dask_collection(X):
        return True
    return type(X).__module__.split(".")[0] == "zarr"
