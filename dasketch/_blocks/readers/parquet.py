"""Parquet files (local), read by pyarrow: each block task reads the row groups
that hold its rows (``ParquetFile.read_row_group``) and only those.

Every column is a feature, except the index columns pandas wrote; every one
must be numeric (integer or floating). Integer columns are read as float64,
and nulls as NaN, so a null is an error wherever a NaN is (the kernels reject
non-finite values). The blocks have the rows the options give for the file's
shape, whatever its row groups. The file is checked by every task after its
read (:mod:`dasketch._blocks.file_checks`).
"""

from __future__ import annotations

import bisect
import contextlib
import os

import numpy as np

from dasketch._blocks.file_checks import check_file, file_signature
from dasketch._blocks.readers.options import check_dtype, check_shape
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks
from dasketch.storage.store_checks import is_local_path, local_path

PARQUET_MAGIC = b"PAR1"


def is_parquet_file(X):
    """Whether ``X`` is the path of a local file that starts as Parquet files do."""
    if not isinstance(X, (str, os.PathLike)) or not is_local_path(os.fspath(X)):
        return False
    path = local_path(os.fspath(X))
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as file:
        return file.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC


def feature_columns(schema, filename, name):
    """``(columns, dtype)``: the names of the columns read (all but pandas' index
    columns) and the dtype of the matrix they make.

    Raises
    ------
    ValueError
        Naming every column that is not integer or floating.
    """
    import pyarrow as pa

    index = {column for column in (schema.pandas_metadata or {}).get("index_columns", ())
             if isinstance(column, str)}
    fields = [field for field in schema if field.name not in index]
    refused = [f"{field.name!r} ({field.type})" for field in fields
               if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type))]
    if refused:
        raise ValueError(f"{name}: {filename!r} has columns that are not numeric: "
                         f"{', '.join(refused)}; only integer and floating columns are read")
    dtypes = [field.type.to_pandas_dtype() if pa.types.is_floating(field.type)
              else np.float64 for field in fields]
    return [field.name for field in fields], (np.result_type(*dtypes) if dtypes
                                               else np.dtype(np.float64))


def parquet_rows(filename, start, stop, *, columns, group_offsets, dtype, signature,
                 name="X"):
    """Rows ``[start, stop)`` of ``columns`` of a Parquet file as an ndarray of
    ``dtype`` (nulls are NaN), read from the row groups (starting at
    ``group_offsets``) that hold them; the file is checked against
    ``signature`` after the read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    block = np.empty((stop - start, len(columns)), dtype)
    file = pq.ParquetFile(filename)
    group = bisect.bisect_right(group_offsets, start) - 1
    while group_offsets[group] < stop:
        first, last = group_offsets[group], group_offsets[group + 1]
        lo, hi = max(start, first), min(stop, last)
        table = file.read_row_group(group, columns=columns).slice(lo - first, hi - lo)
        for j, column in enumerate(table.columns):
            values = column.cast(pa.from_numpy_dtype(dtype)).fill_null(np.nan)
            block[lo - start:hi - start, j] = values.to_numpy()
        group += 1
    check_file(filename, signature, name)
    return block


class ParquetRows:
    """How a task reads rows ``[start, stop)`` of a Parquet file itself:
    ``ParquetRows(columns, group_offsets, dtype, signature, name)(filename,
    start, stop, reuse)`` is a context manager giving :func:`parquet_rows` (a
    fresh block; ``reuse`` is ignored)."""

    def __init__(self, columns, group_offsets, dtype, signature, name):
        self.columns, self.group_offsets = tuple(columns), tuple(group_offsets)
        self.dtype, self.signature, self.name = np.dtype(dtype), tuple(signature), name

    def __call__(self, filename, start, stop, reuse=False):
        return contextlib.nullcontext(parquet_rows(
            filename, start, stop, columns=list(self.columns),
            group_offsets=self.group_offsets, dtype=self.dtype, signature=self.signature,
            name=self.name))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.columns, self.group_offsets, self.dtype.str,
                self.signature, self.name)


class ParquetReader:
    """Reads local Parquet files by row groups."""

    name = "parquet"
    kinds = ()  # a path, listed as such by the zarr reader
    opens_stores = False

    def can_read(self, X, options):
        return is_parquet_file(X)

    def row_blocks(self, X, options):
        filename = local_path(os.fspath(X))
        try:
            import pyarrow.parquet as pq
        except ImportError as exc:
            raise ImportError(f"{options.name}: {filename!r} is a Parquet file; reading it "
                              "needs pyarrow (pip install pyarrow)") from exc
        signature = file_signature(filename)
        file = pq.ParquetFile(filename)
        metadata = file.metadata
        columns, dtype = feature_columns(file.schema_arrow, filename, options.name)
        shape = (metadata.num_rows, len(columns))
        check_shape(shape, options.name)
        dtype = check_dtype(dtype, options.name)
        group_rows = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
        group_offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(group_rows)]))
        rows = options.dense_rows(shape)
        offsets = tuple(range(0, shape[0], rows)) + (shape[0],)
        reader = (filename, ParquetRows(columns, group_offsets, dtype, signature, options.name))
        read_bytes = (max(group_rows) + rows) * shape[1] * dtype.itemsize
        return RowBlocks(reader_blocks(offsets, reader), offsets, shape[1], dtype, False,
                         read_bytes, reader)
