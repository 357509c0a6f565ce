"""Arrow tables in memory (``pyarrow.Table`` and ``pyarrow.RecordBatch``), and
the rules every columnar input follows (Parquet is read through them too).

The features are the columns named by ``columns`` (``ReadOptions.columns``),
in that order, or else every column except the index columns pandas wrote.
Each must be numeric (integer or floating; any other column is an error naming
it). Integer columns are read as float64, floating columns keep the widest
float dtype among them, and nulls are NaN, so a null is an error wherever a NaN
is (the kernels and the estimators' validation reject non-finite values).
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks.readers.in_memory import dense_row_blocks
from dasketch._blocks.readers.options import check_dtype, check_shape


def is_arrow_table(X):
    """Whether ``X`` is a ``pyarrow.Table`` or ``pyarrow.RecordBatch``."""
    if type(X).__module__.split(".")[0] != "pyarrow":
        return False
    import pyarrow as pa

    return isinstance(X, (pa.Table, pa.RecordBatch))


def feature_columns(schema, columns, where, name):
    """``(columns, dtype)``: the names of the feature columns of ``schema`` and
    the dtype of the matrix they make.

    Parameters
    ----------
    schema : pyarrow.Schema
    columns : sequence of str or None
        The columns asked for; None for all but pandas' index columns.
    where : str
        What holds the columns (a file name, ``"the Arrow table"``), for errors.
    name : str
        Name of the argument, for errors.

    Raises
    ------
    ValueError
        Naming every column asked for that ``schema`` lacks, and every feature
        column that is not integer or floating.
    """
    import pyarrow as pa

    if columns is None:
        index = {column for column in (schema.pandas_metadata or {}).get("index_columns", ())
                 if isinstance(column, str)}
        columns = [field.name for field in schema if field.name not in index]
    absent = [column for column in columns if schema.get_field_index(column) < 0]
    if absent:
        raise ValueError(f"{name}: {where} has no column {', '.join(map(repr, absent))}; "
                         f"its columns are {schema.names}")
    fields = [schema.field(column) for column in columns]
    refused = [f"{field.name!r} ({field.type})" for field in fields
               if not (pa.types.is_integer(field.type) or pa.types.is_floating(field.type))]
    if refused:
        raise ValueError(f"{name}: {where} has columns that are not numeric: "
                         f"{', '.join(refused)}; only integer and floating columns are read "
                         "(select the features with columns=[...])")
    dtypes = [field.type.to_pandas_dtype() if pa.types.is_floating(field.type)
              else np.float64 for field in fields]
    dtype = np.result_type(*dtypes) if dtypes else np.dtype(np.float64)
    return list(columns), check_dtype(dtype, name)


def check_columns(columns, name):
    """``columns`` as a list of distinct strings (None stays None)."""
    if columns is None:
        return None
    if isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
        raise TypeError(f"columns must be a list of column names (str), got {columns!r}")
    columns = list(columns)
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated or not columns:
        raise ValueError(f"columns must name at least one column, each once; got {columns!r}"
                         f" for {name}")
    return columns


# Bytes of the tile of rows that fill_rows gathers at a time: small enough to
# stay in a core's cache while it is transposed into the output.
TILE_BYTES = 2 ** 22


def column_arrays(table, dtype):
    """The columns of ``table`` (a ``pyarrow.Table``) as 1-D ndarrays of ``dtype``,
    nulls as NaN; a column of that type without nulls is handed over without a
    copy (``to_numpy``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrow_dtype = pa.from_numpy_dtype(dtype)
    arrays = []
    for column in table.columns:
        if column.type != arrow_dtype:
            column = column.cast(arrow_dtype)
        if column.null_count:
            column = pc.fill_null(column, np.nan)
        arrays.append(column.to_numpy())
    return arrays


def fill_rows(out, table, dtype):
    """Write the columns of ``table`` (a ``pyarrow.Table`` of as many rows as
    ``out``) into the columns of the C-ordered ndarray ``out``, nulls as NaN;
    pandas is not involved.

    The rows are written a tile at a time: each column's part of the tile is
    copied whole into a column-ordered buffer of :data:`TILE_BYTES` (contiguous
    copies), which is then transposed into ``out``'s rows while it is in cache.
    Writing whole columns into a C-ordered matrix (``numpy.stack``,
    ``numpy.column_stack``, or column by column over a larger tile) touches one
    cache line a value instead, and costs several times as long. No library
    call transposes a list of columns into C order, hence the loop.
    """
    arrays = column_arrays(table, dtype)
    n_rows, width = out.shape
    tile = max(TILE_BYTES // max(width * out.itemsize, 1), 1)
    buffer = np.empty((width, min(tile, n_rows)), out.dtype)
    for start in range(0, n_rows, tile):
        stop = min(start + tile, n_rows)
        part = buffer[:, :stop - start]
        for j, values in enumerate(arrays):
            part[j] = values[start:stop]
        out[start:stop] = part.T
    return out


def arrow_matrix(table, options):
    """The feature columns of an in-memory Arrow table as one ndarray."""
    import pyarrow as pa

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    columns, dtype = feature_columns(table.schema, check_columns(options.columns, options.name),
                                     "the Arrow table", options.name)
    check_shape((table.num_rows, len(columns)), options.name)
    return fill_rows(np.empty((table.num_rows, len(columns)), dtype), table.select(columns),
                     dtype)


class ArrowReader:
    """Reads Arrow tables and record batches in memory: their feature columns
    are copied into one matrix (as ``numpy.asarray`` of them would be) and cut
    into blocks as a numpy array is."""

    name = "arrow"
    kinds = ("Arrow table",)
    opens_stores = False
    selects_columns = True

    def can_read(self, X, options):
        return is_arrow_table(X)

    def row_blocks(self, X, options):
        return dense_row_blocks(arrow_matrix(X, options), options)
