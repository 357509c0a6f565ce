"""Parquet files are read by row groups in the block tasks: every numeric
column is a feature (pandas' index is not), nulls are NaN, and the sketch of a
file equals that of the same values in memory bit for bit, whatever the row
groups."""

import numpy as np
import pandas as pd
import pytest

import dasketch
from dasketch._blocks import as_row_blocks, iter_row_blocks

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture
def values():
    return np.random.default_rng(0).standard_normal((300, 5)) * 0.7 ** np.arange(5)


def _write(tmp_path, table, **kwargs):
    path = tmp_path / "x.parquet"
    pq.write_table(table, path, **kwargs)
    return str(path)


@pytest.mark.parametrize("row_group_size", [70, 64, 1000])
def test_a_parquet_file_sketches_as_its_values(tmp_path, values, row_group_size):
    path = _write(tmp_path, pa.table({f"c{j}": values[:, j] for j in range(5)}),
                  row_group_size=row_group_size)
    blocks = as_row_blocks(path, block_rows=64)
    assert blocks.offsets == (0, 64, 128, 192, 256, 300) and blocks.reader is not None
    for start, stop, block in iter_row_blocks(blocks):
        np.testing.assert_array_equal(block, values[start:stop])
    got, want = (dasketch.sketch(X, 4, block_rows=64) for X in (path, values))
    np.testing.assert_array_equal(got.B, want.B)
    assert (got.shrinkage, got.n_rows) == (want.shrinkage, want.n_rows)


def test_integer_columns_are_floats_and_the_index_is_no_feature(tmp_path, values):
    frame = pd.DataFrame({"a": values[:, 0], "n": np.arange(300, dtype=np.int32)},
                         index=pd.Index(np.arange(300) * 2, name="id"))
    path = str(tmp_path / "frame.parquet")
    frame.to_parquet(path, engine="pyarrow")
    blocks = as_row_blocks(path)
    assert (blocks.n_features, blocks.dtype) == (2, np.float64)
    (_, _, block), = iter_row_blocks(blocks)
    np.testing.assert_array_equal(block, frame.to_numpy(dtype=np.float64))


def test_float32_columns_stay_float32(tmp_path, values):
    path = _write(tmp_path, pa.table({"a": values[:, 0].astype(np.float32),
                                      "b": values[:, 1].astype(np.float32)}))
    assert as_row_blocks(path).dtype == np.float32


def test_other_columns_are_named(tmp_path, values):
    path = _write(tmp_path, pa.table({"a": values[:, 0], "label": ["x"] * 300,
                                      "flag": [True] * 300}))
    with pytest.raises(ValueError, match=r"not numeric: 'label' \(string\), 'flag' \(bool\)"):
        as_row_blocks(path, name="A")


def test_a_null_is_a_nan(tmp_path, values):
    column = pa.array([1.0, None] + [0.0] * 298)
    path = _write(tmp_path, pa.table({"a": column, "b": values[:, 1]}))
    (_, _, block), = iter_row_blocks(as_row_blocks(path))
    assert np.isnan(block[1, 0]) and np.isfinite(np.delete(block[:, 0], 1)).all()
    with pytest.raises(ValueError, match="NaN or Inf in rows 1"):
        dasketch.sketch(path, 4)


def test_store_options_do_not_apply(tmp_path, values):
    path = _write(tmp_path, pa.table({"a": values[:, 0]}))
    with pytest.raises(ValueError, match="component applies only when X is a zarr store"):
        as_row_blocks(path, component="X")
