"""The readers of inputs are an extension point: a reader registered for a new
kind of input reads it for every entry point, in-memory block types dispatch on
type to the function registered for them, and an input no reader takes is a
TypeError naming the argument and the kinds accepted."""

import dask
import numpy as np
import pandas as pd
import pytest
import scipy.sparse

import dasketch
from dasketch._blocks import RowBlocks, as_row_blocks
from dasketch._blocks.readers import (
    accepted_kinds,
    register_reader,
    registered_readers,
    row_blocks_of,
    unregister_reader,
)
from dasketch._blocks.readers.in_memory import dense_row_blocks, sparse_row_blocks

BUILT_IN_KINDS = ("Parquet path/URL, Dask array, numpy array, pandas DataFrame, "
                  "scipy.sparse matrix, Arrow table, zarr.Array or a zarr path/URL")


class RowFile:
    """A matrix that only hands out rows by range, as a file format would."""

    def __init__(self, values):
        self.values = values
        self.shape = values.shape
        self.reads = []

    def read(self, start, stop):
        self.reads.append((start, stop))
        return self.values[start:stop].copy()


class RowFileReader:
    """Reads a :class:`RowFile` in blocks of the rows the options ask for, each
    read by its own task."""

    name = "row-file"
    kinds = ("RowFile",)
    opens_stores = False

    def can_read(self, X, options):
        return isinstance(X, RowFile)

    def row_blocks(self, X, options):
        n_rows, n_features = X.shape
        rows = options.dense_rows(X.shape)
        offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
        blocks = tuple(dask.delayed(X.read, pure=True)(start, stop)
                       for start, stop in zip(offsets[:-1], offsets[1:]))
        return RowBlocks(blocks, offsets, n_features, X.values.dtype, False,
                         rows * n_features * X.values.itemsize)


@pytest.fixture
def row_file_reader():
    reader = register_reader(RowFileReader())
    yield reader
    unregister_reader(reader.name)


@pytest.fixture
def values():
    return np.random.default_rng(0).standard_normal((300, 7)) * 0.7 ** np.arange(7)


def test_a_registered_reader_reads_its_kind(row_file_reader, values):
    stored = RowFile(values)
    got = dasketch.sketch(stored, 4, block_rows=64)
    want = dasketch.sketch(values, 4, block_rows=64)
    assert sorted(stored.reads) == [(0, 64), (64, 128), (128, 192), (192, 256), (256, 300)]
    np.testing.assert_array_equal(got.B, want.B)
    assert (got.shrinkage, got.n_rows, got.rounding) == (want.shrinkage, want.n_rows,
                                                         want.rounding)


def test_without_its_reader_a_kind_is_refused(values):
    assert "row-file" not in [reader.name for reader in registered_readers()]
    with pytest.raises(TypeError, match="X must be a .* got RowFile"):
        dasketch.sketch(RowFile(values), 4)


def test_the_error_lists_every_registered_kind(row_file_reader):
    assert accepted_kinds() == BUILT_IN_KINDS.replace(" or ", ", ") + " or RowFile"
    with pytest.raises(TypeError, match=" or RowFile, got object"):
        as_row_blocks(object())


def test_an_unknown_input_names_the_argument_and_the_kinds():
    with pytest.raises(TypeError) as error:
        as_row_blocks(object(), name="A")
    assert str(error.value) == f"A must be a {BUILT_IN_KINDS}, got object"
    with pytest.raises(ValueError, match="component and storage_options apply only when A "
                                         "is a zarr or Parquet path or URL"):
        as_row_blocks(object(), name="A", component="X")


def test_readers_are_tried_in_order(row_file_reader):
    names = [reader.name for reader in registered_readers()]
    assert names == ["array-library", "parquet", "anndata", "dask", "in-memory", "arrow", "zarr",
                     "array-like", "row-file"]
    with pytest.raises(ValueError, match="registered already"):
        register_reader(RowFileReader())
    assert unregister_reader("row-file") is row_file_reader
    with pytest.raises(ValueError, match="no reader named 'netcdf'"):
        register_reader(row_file_reader, before="netcdf")
    register_reader(row_file_reader, before="dask")
    assert [reader.name for reader in registered_readers()][3] == "row-file"


class Tagged:
    """An in-memory array type of a library the package does not know."""

    def __init__(self, values):
        self.values = values


@pytest.fixture
def tagged_dispatch():
    calls = []

    def tagged_row_blocks(X, options):
        calls.append(options.name)
        return dense_row_blocks(X.values, options)

    row_blocks_of.register(Tagged, tagged_row_blocks)
    yield calls
    row_blocks_of._lookup.pop(Tagged, None)


def test_in_memory_types_dispatch_to_their_function(tagged_dispatch, values):
    assert row_blocks_of.dispatch(np.ndarray) is dense_row_blocks
    assert row_blocks_of.dispatch(pd.DataFrame) is dense_row_blocks
    assert row_blocks_of.dispatch(scipy.sparse.csr_matrix) is sparse_row_blocks
    assert row_blocks_of.dispatch(scipy.sparse.coo_array) is sparse_row_blocks
    blocks = as_row_blocks(Tagged(values), name="T", block_rows=100)
    assert tagged_dispatch == ["T"]
    assert blocks.offsets == (0, 100, 200, 300) and blocks.resident
    got = dasketch.sketch(Tagged(values), 4, block_rows=100)
    np.testing.assert_array_equal(got.B, dasketch.sketch(values, 4, block_rows=100).B)


def test_an_unregistered_in_memory_type_is_refused(values):
    with pytest.raises(TypeError, match="got Tagged"):
        as_row_blocks(Tagged(values))


@pytest.mark.parametrize("sparse", [False, True])
def test_block_rows_that_make_a_task_of_a_few_rows_are_refused(sparse):
    """30,000 blocks of one row: refused before any graph is built, naming the
    smallest block size accepted, which is accepted."""
    X = np.ones((30_000, 8))
    X = scipy.sparse.csr_matrix(X) if sparse else X
    with pytest.raises(ValueError, match=r"block_rows \(--block-rows\) = 1 cuts 30,000 rows "
                                         r"into 30,000 blocks.*pass at least (\d+)") as info:
        as_row_blocks(X, block_rows=1)
    least = int(info.value.args[0].split("pass at least ")[1].split(",")[0])
    assert as_row_blocks(X, block_rows=least).shape == (30_000, 8)
    assert len(as_row_blocks(np.ones((5_000, 8)), block_rows=1).blocks) == 5_000
