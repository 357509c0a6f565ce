"""Dask arrays and Dask DataFrames.

A DataFrame, or an array whose row chunk sizes are unknown, first has its row
counts computed, once (:func:`~dasketch._blocks.scheduler.known_row_chunks`).
An array chunked along columns is rechunked to whole rows, which moves all of
it between tasks (and is warned about), unless it reads a zarr array as it is
(``dask.array.from_zarr``): then the block tasks read that store themselves.
"""

from __future__ import annotations

import warnings

import dask.array as da

from dasketch._blocks.column_reads import zarr_behind
from dasketch._blocks.readers.dask_chunks import chunk_row_blocks
from dasketch._blocks.readers.options import check_dtype, check_shape
from dasketch._blocks.readers.zarr_stores import stored_row_blocks
from dasketch._blocks.scheduler import is_dask_collection, known_row_chunks

# Frames from the warning to the caller of the caller of as_row_blocks:
# _warn_rechunk, DaskReader.row_blocks, read_row_blocks, as_row_blocks, its
# caller, and the function that called that (an estimator's fit, or the user).
_STACKLEVEL = 6


def is_dask_dataframe(X):
    """Whether ``X`` is a Dask DataFrame."""
    return is_dask_collection(X) and hasattr(X, "to_dask_array") and hasattr(X, "columns")


def _warn_rechunk(X, name):
    warnings.warn(f"{name} is chunked along columns ({len(X.chunks[1])} column chunks); "
                  f"rechunking to whole rows moves all its {X.nbytes / 2 ** 20:.0f} MiB "
                  "between tasks (a zarr store, or dask.array.from_zarr of one, is read "
                  "by rows in the tasks instead)", stacklevel=_STACKLEVEL)


class DaskReader:
    """Reads Dask arrays (their chunks, or the zarr store behind them) and Dask
    DataFrames (as the array of their values)."""

    name = "dask"
    kinds = ("Dask array",)
    opens_stores = False

    def can_read(self, X, options):
        return isinstance(X, da.Array) or is_dask_dataframe(X)

    def row_blocks(self, X, options, dtype=None):
        """The blocks of ``X``; ``dtype``, when given, is the numpy dtype of its
        values (for blocks of a library whose dtypes are not numpy's)."""
        X = known_row_chunks(X)
        check_shape(X.shape, options.name)
        dtype = check_dtype(X.dtype if dtype is None else dtype, options.name)
        if len(X.chunks[1]) > 1:
            store = zarr_behind(X)
            if store is not None:  # dask.array.from_zarr: the tasks read the store instead
                return stored_row_blocks(store, options)
            _warn_rechunk(X, options.name)
        return chunk_row_blocks(X, options.dense_rows(X.shape), dtype, plan=(
            "rechunk" if len(X.chunks[1]) > 1 else "rows"))
