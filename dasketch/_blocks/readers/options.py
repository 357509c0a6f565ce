"""What every reader is given (:class:`ReadOptions`) and the rules all readers
share: an input is a 2-D matrix of real numbers with at least one row and one
column, and its rows per block depend on its shape (and, for sparse rows, on
its mean number of nonzeros a row) only, never on how it is chunked.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from dasketch._blocks.row_blocks import default_block_rows
from dasketch._blocks.tasks import check_number


def check_shape(shape, name):
    """Raise unless ``shape`` is that of a 2-D matrix with rows and columns."""
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{len(shape)}-D input with shape {tuple(shape)}")
    if shape[0] == 0:
        raise ValueError(f"{name} has zero rows; at least one row is required")
    if shape[1] == 0:
        raise ValueError(f"{name} has zero columns; at least one column is required")


def check_dtype(dtype, name):
    """``dtype`` as a :class:`numpy.dtype`; raise unless it holds real numbers
    (booleans, integers or floats)."""
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")
    return dtype


def check_block_rows(block_rows):
    """``block_rows`` as a positive int; raise for anything else."""
    return int(check_number(block_rows, "block_rows", integral=True, low=1))


# Asked-for blocks this small, this many, cost a task each for a few rows of
# arithmetic: the graph alone outlasts any useful run, so they are refused.
MAX_SMALL_BLOCKS = 10_000
MIN_BLOCK_BYTES = 2 ** 16


def check_block_count(rows, n_rows, row_bytes):
    """Refuse ``block_rows = rows`` when it cuts ``n_rows`` rows of about
    ``row_bytes`` bytes each into more than :data:`MAX_SMALL_BLOCKS` blocks of
    under :data:`MIN_BLOCK_BYTES`, naming the smallest block size accepted."""
    n_blocks = -(-n_rows // rows)
    if n_blocks > MAX_SMALL_BLOCKS and rows * row_bytes < MIN_BLOCK_BYTES:
        least = min(-(-MIN_BLOCK_BYTES // max(int(row_bytes), 1)), -(-n_rows // MAX_SMALL_BLOCKS))
        raise ValueError(f"block_rows (--block-rows) = {rows} cuts {n_rows:,} rows into "
                         f"{n_blocks:,} blocks of about {rows * row_bytes:,.0f} bytes, a task "
                         f"each: pass at least {least:,}, or leave it unset for the default")
    return rows


# A matrix is spread over more blocks than its default (``min_blocks``) only
# while each block keeps at least this many values (16 MiB of float64): a
# block's products with a few hundred columns (``X_b^T U_b``, ``d x j`` each)
# lose their BLAS speed on fewer rows.
MIN_SPREAD_VALUES = 2 ** 21


def spread_block_rows(rows, n_rows, values_per_row, min_blocks):
    """``rows`` lowered so that ``n_rows`` rows make at least ``min_blocks``
    blocks of equal size (the last one shorter), when the matrix has fewer:
    the largest power of two of blocks up to ``min_blocks`` whose blocks hold at
    least :data:`MIN_SPREAD_VALUES` values each. A function of the shape only.

    The passes of a matrix in memory run one block a thread
    (:func:`~dasketch._blocks.run_eagerly`): a few large blocks leave threads
    idle (3 blocks keep 2 threads busy two thirds of the pass, 16 threads less
    than a fifth), a power-of-two count divides evenly among 2, 4, 8 or 16.

    Examples
    --------
    >>> spread_block_rows(512, 1500, 6000, 16), spread_block_rows(512, 1500, 6000, 1)
    (375, 512)
    >>> spread_block_rows(2048, 400, 1600, 16)     # too small to spread
    400
    """
    rows = min(int(rows), int(n_rows))
    if min_blocks <= 1 or -(-n_rows // rows) >= min_blocks:
        return rows
    count = 1 << (int(min_blocks).bit_length() - 1)
    while count > 1 and n_rows * values_per_row < count * MIN_SPREAD_VALUES:
        count //= 2
    return min(rows, max(1, -(-int(n_rows) // count)))


# A block task reads the chunks (or row groups) that hold its rows while that decodes
# at most this many times the input's rows; else every chunk is decoded once, by a
# task of its own, and the blocks are cut from the chunks (a chunk of zarr or a row
# group of Parquet is decoded whole for any of its rows).
MAX_DECODED = 1.5


def decoded_rows(offsets, groups):
    """Rows decoded when every block (rows ``offsets[i]:offsets[i + 1]``) reads
    the whole chunks or row groups (starting at ``groups``, the last entry the
    number of rows) that hold its rows.

    >>> decoded_rows((0, 16, 32, 48, 64, 80, 96, 100), (0, 25, 50, 75, 100))
    250
    >>> decoded_rows((0, 32, 36), (0, 16, 32, 36))
    36
    """
    total = 0
    for start, stop in zip(offsets[:-1], offsets[1:]):
        first = bisect.bisect_right(groups, start) - 1
        last = bisect.bisect_left(groups, stop)
        total += groups[last] - groups[first]
    return total


def dense_block_rows(block_rows, shape, default_rows=None, min_blocks=1):
    """Rows per block of a dense matrix of ``shape``: ``block_rows`` when given
    (:func:`check_block_count`), else ``default_rows(d, d, False)`` or
    :func:`default_block_rows` of its ``d`` columns, spread over ``min_blocks``
    blocks (:func:`spread_block_rows`); at most its number of rows."""
    if block_rows is not None:
        rows = check_block_count(check_block_rows(block_rows), shape[0], 8 * shape[1])
    elif default_rows is None:
        rows = default_block_rows(shape[1])
    else:
        rows = default_rows(shape[1], shape[1], False)
    if block_rows is None:
        rows = spread_block_rows(rows, shape[0], shape[1], min_blocks)
    return min(rows, shape[0])


def sparse_block_rows(block_rows, nnz, n_rows, n_features, default_rows, min_blocks=1):
    """Rows per block of a sparse matrix with ``nnz`` nonzeros: ``block_rows``
    when given, else the default for its mean number of nonzeros a row (at
    least one), spread over ``min_blocks`` blocks (:func:`spread_block_rows`);
    at most ``n_rows``."""
    if block_rows is None:
        nnz_per_row = max(nnz / max(n_rows, 1), 1.0)
        block_rows = (default_block_rows(nnz_per_row) if default_rows is None
                      else default_rows(nnz_per_row, n_features, True))
        block_rows = spread_block_rows(block_rows, max(n_rows, 1), nnz_per_row, min_blocks)
    else:
        block_rows = check_block_count(check_block_rows(block_rows), n_rows,
                                       16 * max(nnz / max(n_rows, 1), 1.0))
    return min(check_block_rows(block_rows), n_rows)


def csr_block_bytes(nnz, n_rows, rows):
    """Bytes of the CSR rows of one block of ``rows`` rows (float64 values and int64
    column indices) at the matrix's mean number of nonzeros a row."""
    return int(16 * np.ceil(nnz / max(n_rows, 1) * rows))


@dataclass(frozen=True)
class ReadOptions:
    """The arguments of :func:`~dasketch._blocks.as_row_blocks` besides the
    input, as every reader receives them.

    Attributes
    ----------
    block_rows : int or None
        Rows per block; None for the default of the input's shape.
    name : str
        Name of the argument, used in error messages.
    component, storage_options, missing_chunks
        How a store is opened and checked
        (:func:`dasketch._blocks.stores.open_zarr_array`); only readers of
        stores accept ``component`` and ``storage_options``.
    default_rows : callable or None
        ``default_rows(values_per_row, n_features, sparse)``: rows per block when
        ``block_rows`` is None.
    columns : list of str or None
        The columns read as features, in order; only readers of columnar inputs
        (``selects_columns``) accept them. None: all of them.
    min_blocks : int
        With ``block_rows`` None, the fewest blocks a matrix large enough is
        cut into (:func:`spread_block_rows`); 1 keeps the default rows.
    array_libraries : {"numpy", "any"}
        Which array libraries the caller's block functions compute in: numpy
        only, or any with an array API namespace (CuPy on a GPU;
        :mod:`~dasketch._blocks.readers.array_types`).
    content_keys : bool
        Whether the blocks of a matrix in memory are named after its content (a
        hash of it, one pass over its memory); False names them by a fresh token.
    """

    block_rows: Any = None
    name: str = "X"
    component: Any = None
    storage_options: Any = None
    missing_chunks: str = "fill"
    default_rows: Callable | None = None
    columns: Any = None
    min_blocks: int = 1
    array_libraries: str = "numpy"
    content_keys: bool = True

    def dense_rows(self, shape):
        """Rows per block of a dense matrix of ``shape``."""
        return dense_block_rows(self.block_rows, shape, self.default_rows, self.min_blocks)

    def sparse_rows(self, nnz, n_rows, n_features):
        """Rows per block of a sparse ``n_rows x n_features`` matrix with ``nnz``
        nonzeros."""
        return sparse_block_rows(self.block_rows, nnz, n_rows, n_features, self.default_rows,
                                 self.min_blocks)

    def rows(self, nnz, n_rows, n_features, sparse):
        """Rows per block of a sparse (``nnz`` nonzeros) or dense matrix."""
        if sparse:
            return self.sparse_rows(nnz, n_rows, n_features)
        return self.dense_rows((n_rows, n_features))

    def check_no_store_options(self):
        """Raise when ``component`` or ``storage_options`` is given: they apply to
        stores opened by path only."""
        if self.component is not None or self.storage_options is not None:
            raise ValueError(f"component and storage_options apply only when {self.name} "
                             "is a zarr or Parquet path or URL")

    def check_no_columns(self):
        """Raise when ``columns`` is given: it applies to columnar inputs only."""
        if self.columns is not None:
            raise ValueError(f"columns applies only when {self.name} is a Parquet "
                             "path/URL or an Arrow table; select the columns of other "
                             "inputs before passing them")
