"""The transpose of a zarr store as :class:`~dasketch._blocks.RowBlocks`, read
in the tasks that use it.

A genotype store is laid out variants by samples (sgkit, plink); its principal
components of samples need samples as rows. Each block task reads its samples,
a range of the store's columns, across all the store's row chunks
(:class:`~dasketch._blocks.column_reads.ColumnChunkedRows` with
``transposed=True``), so neither the store nor its transpose is ever rechunked.
"""

from __future__ import annotations

import os

from dasketch._blocks.column_reads import column_read_reader, state_plan, zarr_behind
from dasketch._blocks.readers.options import check_dtype, check_shape, dense_block_rows
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks
from dasketch.storage.reading import open_store_array


def stored_array(X):
    """The zarr store ``X`` stands for (a path, URL, ``zarr.Array``, or a Dask
    array that reads one as it is), or None."""
    if isinstance(X, (str, os.PathLike)):
        return X
    module = type(X).__module__.split(".")[0]
    if module == "zarr" and hasattr(X, "chunks"):
        return X
    if module == "dask" and hasattr(X, "dask"):
        return zarr_behind(X)
    return None


def transposed_store_blocks(source, *, block_rows=None, name="X", component=None,
                            storage_options=None, missing_chunks="fill"):
    """Row blocks of the transpose of the 2-D zarr store ``source`` (a path,
    URL or ``zarr.Array``): block ``i`` holds columns ``[start, stop)`` of the
    store as rows, read by its task across all the store's row chunks; rows
    per block as for any input of its shape (``block_rows`` or
    :func:`~dasketch._blocks.default_block_rows`). The plan is logged, with a
    warning when it decodes each stored chunk many times
    (:func:`~dasketch._blocks.column_reads.state_plan`)."""
    store = source
    if isinstance(source, (str, os.PathLike)):
        store = open_store_array(source, component=component, storage_options=storage_options,
                                 name=name)
    check_shape(store.shape, name)
    dtype = check_dtype(store.dtype, name)
    n_rows, n_features = int(store.shape[1]), int(store.shape[0])
    rows = dense_block_rows(block_rows, (n_rows, n_features))
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    reader, plan = column_read_reader(source, offsets, name=name, component=component,
                                      storage_options=storage_options,
                                      missing_chunks=missing_chunks, transposed=True)
    state_plan(plan, rows)
    return RowBlocks(reader_blocks(offsets, reader), offsets, n_features, dtype, False,
                     plan.block_bytes + plan.decoded_bytes, reader, plan="transposed reads")
