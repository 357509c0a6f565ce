"""Zarr stores: paths and fsspec URLs of dense arrays, local ``.zip`` stores,
sparse-by-rows (CSR) groups written by :mod:`dasketch.storage.reading`, and ``zarr.Array``
objects.

A store is checked on a worker before any block is read, and by every read
task (:mod:`dasketch._blocks.stores`). Each block task reads its own rows; a
store chunked along columns is read across its column chunks by the same task
(:mod:`dasketch._blocks.column_reads`), never rechunked between tasks.
"""

from __future__ import annotations

import os

import numpy as np

from dasketch._blocks.column_reads import column_read_reader, state_plan
from dasketch._blocks.readers.dask_chunks import chunk_row_blocks
from dasketch._blocks.readers.options import check_dtype, check_shape, csr_block_bytes
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks
from dasketch._blocks.stores import checked_sparse_store, open_zarr_rows
from dasketch.storage.reading import CsrRows, is_sparse_store, sparse_store_info
from dasketch.storage.store_checks import is_local_path, local_path


def is_zarr_array(X):
    """Whether ``X`` is an array of the zarr package."""
    return type(X).__module__.split(".")[0] == "zarr" and hasattr(X, "shape")


def is_zip_store(path):
    """Whether ``path`` names a local ``.zip`` file."""
    path = os.fspath(path)
    return is_local_path(path) and local_path(path).endswith(".zip")


def open_zip_array(path, component, name):
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


def sparse_store_row_blocks(path, options):
    """Blocks of the sparse-by-rows group at ``path``: each task reads the CSR
    rows of its block (its share of ``indptr``, ``indices`` and ``data``)."""
    n_rows, n_features, nnz, dtype = sparse_store_info(
        path, component=options.component, storage_options=options.storage_options)
    rows = options.sparse_rows(nnz, n_rows, n_features)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    group, fingerprint = checked_sparse_store(
        path, component=options.component, storage_options=options.storage_options,
        missing_chunks=options.missing_chunks, name=options.name)
    reader = (group, CsrRows(fingerprint, options.name))
    return RowBlocks(reader_blocks(offsets, reader), offsets, n_features, np.dtype(dtype), True,
                     csr_block_bytes(nnz, n_rows, rows), reader)


def stored_row_blocks(source, options, **store_options):
    """Blocks of the dense zarr array ``source`` (a path, URL or ``zarr.Array``;
    ``store_options`` are :func:`~dasketch._blocks.stores.open_zarr_rows`'
    ``component`` and ``storage_options`` for a path), each read by its own
    task: across the store's column chunks when it has several
    (``plan="column reads"``), else by rows."""
    X, reader = open_zarr_rows(source, missing_chunks=options.missing_chunks,
                               name=options.name, **store_options)
    check_shape(X.shape, options.name)
    dtype = check_dtype(X.dtype, options.name)
    rows = options.dense_rows(X.shape)
    offsets = tuple(range(0, X.shape[0], rows)) + (X.shape[0],)
    planned = column_read_reader(source, offsets, name=options.name,
                                 component=options.component,
                                 storage_options=options.storage_options, reader=reader)
    if planned is None:
        return chunk_row_blocks(X, rows, dtype, reader=reader)
    reader, column_plan = planned
    state_plan(column_plan, rows)
    return RowBlocks(reader_blocks(offsets, reader), offsets, int(X.shape[1]), dtype, False,
                     column_plan.block_bytes + column_plan.decoded_bytes, reader,
                     plan="column reads")


class ZarrReader:
    """Reads zarr stores by path or URL (dense arrays, ``.zip`` stores, sparse
    groups) and ``zarr.Array`` objects. Every other string or path is taken
    too, to be reported as a missing or unreadable store."""

    name = "zarr"
    kinds = ("zarr.Array", "a zarr path/URL")
    opens_stores = True

    def can_read(self, X, options):
        return isinstance(X, (str, os.PathLike)) or is_zarr_array(X)

    def row_blocks(self, X, options):
        if not isinstance(X, (str, os.PathLike)):
            options.check_no_store_options()
            return stored_row_blocks(X, options)
        if is_zip_store(X):
            return stored_row_blocks(open_zip_array(X, options.component, options.name),
                                     options)
        if is_sparse_store(X, component=options.component,
                           storage_options=options.storage_options):
            return sparse_store_row_blocks(X, options)
        return stored_row_blocks(X, options, component=options.component,
                                 storage_options=options.storage_options)
