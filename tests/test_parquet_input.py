"""Parquet files are read by row groups in the block tasks: every numeric
column is a feature (pandas' index is not), nulls are NaN, and the sketch of a
file equals that of the same values in memory bit for bit, whatever the row
groups."""

import dask
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


@pytest.mark.parametrize("row_group_size", [70, 64, 1000, 20])
def test_a_parquet_file_sketches_as_its_values(tmp_path, values, row_group_size, monkeypatch):
    """Whatever the row groups, the blocks are those of the shape, and a pass
    decodes every row group once: in the blocks' tasks when the groups fit them
    (20 and 64 rows a group), else in a task each (70 rows: every block would
    read two groups; one group of 300 rows: every block would read it)."""
    path = _write(tmp_path, pa.table({f"c{j}": values[:, j] for j in range(5)}),
                  row_group_size=row_group_size)
    blocks = as_row_blocks(path, block_rows=64)
    assert blocks.offsets == (0, 64, 128, 192, 256, 300)
    assert (blocks.reader is not None) == (row_group_size in (20, 64))
    for start, stop, block in iter_row_blocks(blocks):
        np.testing.assert_array_equal(block, values[start:stop])
    decoded, read_row_group = [], pq.ParquetFile.read_row_group

    def counted(file, group, **kwargs):
        decoded.append(group)
        return read_row_group(file, group, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counted)
    got, want = (dasketch.sketch(X, 4, block_rows=64) for X in (path, values))
    n_groups = -(-300 // row_group_size)
    extra = 1 if row_group_size == 20 else 0    # blocks of 64 end inside groups of 20
    assert len(decoded) <= n_groups + extra * 4 and set(decoded) == set(range(n_groups))
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


def test_row_groups_read_once_convert_nulls_and_integers_in_every_block(tmp_path, values,
                                                                         monkeypatch):
    """Blocks cut from row groups read by tasks of their own (groups of 70 rows,
    blocks of 64) convert their rows from Arrow as a block task does: integers
    as float64, nulls as NaN, across the groups' edges and the conversion's
    tiles (of 3 rows here)."""
    from dasketch._blocks.readers import arrow

    monkeypatch.setattr(arrow, "TILE_BYTES", 3 * 3 * 8)
    counts = pa.array([None if i % 67 == 1 else i for i in range(300)], pa.int32())
    path = _write(tmp_path, pa.table({"a": values[:, 0], "n": counts, "b": values[:, 1]}),
                  row_group_size=70)
    want = np.column_stack([values[:, 0], counts.to_numpy(zero_copy_only=False), values[:, 1]])
    blocks = as_row_blocks(path, block_rows=64)
    assert blocks.reader is None and blocks.dtype == np.float64
    for start, stop, block in iter_row_blocks(blocks):
        assert block.flags.c_contiguous
        np.testing.assert_array_equal(block, want[start:stop])


def test_a_missing_parquet_path_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Parquet file or directory at .*gone.parquet"):
        dasketch.sketch(str(tmp_path / "gone.parquet"), 4)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no data file"):
        dasketch.read_parquet(tmp_path / "empty")


def test_store_options_do_not_apply(tmp_path, values):
    path = _write(tmp_path, pa.table({"a": values[:, 0]}))
    with pytest.raises(ValueError, match="component applies only when X is a zarr store"):
        as_row_blocks(path, component="X")


def _table(values, **extra):
    return pa.table({**{f"c{j}": values[:, j] for j in range(values.shape[1])}, **extra})


def test_columns_select_the_features_in_their_order(tmp_path, values):
    path = _write(tmp_path, _table(values, label=["x"] * 300), row_group_size=50)
    got = dasketch.sketch(path, 3, columns=["c3", "c0"], block_rows=64)
    want = dasketch.sketch(values[:, [3, 0]], 3, block_rows=64)
    np.testing.assert_array_equal(got.B, want.B)
    with pytest.raises(ValueError, match=r"has no column 'c9'.*its columns are \['c0'"):
        dasketch.sketch(path, 3, columns=["c0", "c9"])
    with pytest.raises(ValueError, match=r"not numeric: 'label' \(string\).*columns=\["):
        dasketch.sketch(path, 3)
    with pytest.raises(ValueError, match="each once"):
        dasketch.sketch(path, 3, columns=["c0", "c0"])
    with pytest.raises(ValueError, match="columns applies only when X is a Parquet"):
        dasketch.sketch(values, 3, columns=["c0"])


def test_a_directory_is_its_data_files_in_sorted_order(tmp_path, values):
    """As Spark and Dask write them: hive partitions, several row groups a file,
    and ``_SUCCESS`` / ``.crc`` / ``_metadata`` files that are not data."""
    root = tmp_path / "features.parquet"
    for part, (start, stop) in enumerate([(0, 120), (120, 130), (130, 300)]):
        folder = root / f"day={part}"
        folder.mkdir(parents=True)
        pq.write_table(_table(values[start:stop]), folder / f"part-{part}.parquet",
                       row_group_size=40)
        (folder / f".part-{part}.parquet.crc").write_bytes(b"crc")
    (root / "_SUCCESS").write_bytes(b"")
    (root / "_metadata").write_bytes(b"not data")
    source = dasketch.read_parquet(root)
    assert source.shape == (300, 5) and len(source.files) == 3
    assert [len(groups) for groups in source.group_rows] == [3, 1, 5]
    got = dasketch.sketch(str(root), 4, block_rows=64)
    np.testing.assert_array_equal(got.B, dasketch.sketch(values, 4, block_rows=64).B)
    (root / "day=1" / "extra.parquet").write_bytes(b"PAR1 and no footer")
    with pytest.raises(ValueError, match="extra.parquet' is not a Parquet file"):
        dasketch.read_parquet(root)


def test_a_url_is_read_through_fsspec(values):
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("memory")
    with fs.open("/features/x.parquet", "wb") as file:
        pq.write_table(_table(values), file, row_group_size=100)
    try:
        got = dasketch.sketch("memory://features/x.parquet", 4, block_rows=64,
                              columns=["c1", "c2"])
        want = dasketch.sketch(values[:, 1:3], 4, block_rows=64)
        np.testing.assert_array_equal(got.B, want.B)
        source = dasketch.read_parquet("memory://features")
        with fs.open("/features/x.parquet", "wb") as file:  # rewritten since it was opened
            pq.write_table(_table(values[::-1]), file, row_group_size=100)
        with pytest.raises(ValueError, match="changed while the job read it"):
            dasketch.sketch(source, 4)
    finally:
        fs.rm("/features", recursive=True)


def test_a_file_rewritten_since_it_was_opened_is_an_error(tmp_path, values):
    path = _write(tmp_path, _table(values), row_group_size=100)
    source = dasketch.read_parquet(path)
    pq.write_table(_table(values[::-1]), path, row_group_size=100)   # same size and shape
    with pytest.raises(ValueError, match="x.parquet' changed while the job read it"):
        dasketch.sketch(source, 4, block_rows=64)
    np.testing.assert_array_equal(dasketch.sketch(path, 4, block_rows=64).B,
                                  dasketch.sketch(values[::-1], 4, block_rows=64).B)


def test_a_file_rewritten_between_passes_is_an_error(tmp_path, values):
    """A process keeps the footers it parsed; a file rewritten after a pass (its
    row groups elsewhere) is named as changed by the next pass, whether or not
    its rows still decode by the footer kept."""
    path = _write(tmp_path, _table(values), row_group_size=100)
    source = dasketch.read_parquet(path)
    with dask.config.set(scheduler="synchronous"):
        dasketch.sketch(source, 4, block_rows=64)
        pq.write_table(_table(values[:, ::-1]), path, row_group_size=30, compression="gzip")
        with pytest.raises(ValueError, match="x.parquet' changed while the job read it"):
            dasketch.sketch(source, 4, block_rows=64)


@pytest.mark.parametrize("kind", ["pca", "lstsq"])
def test_estimators_fit_an_opened_dataset_as_its_values(tmp_path, values, kind):
    from dasketch import SketchPCA
    from dasketch.linear_model import SketchLstsqRegressor

    y = values @ np.arange(1.0, 6.0) + 0.01 * np.sin(np.arange(300))
    path = _write(tmp_path, _table(values, y=y, name=["row"] * 300), row_group_size=70)
    X = dasketch.read_parquet(path, columns=[f"c{j}" for j in range(5)])
    if kind == "pca":
        make = lambda: SketchPCA(n_components=2, sketch_size="exact", block_rows=64)  # noqa: E731
        got, want = make().fit(X), make().fit(values)
        np.testing.assert_allclose(np.abs(got.components_), np.abs(want.components_),
                                   atol=1e-12)
        np.testing.assert_allclose(np.abs(np.asarray(got.transform(X))),
                                   np.abs(want.transform(values)), atol=1e-10)
    else:
        got = SketchLstsqRegressor(random_state=0).fit(X, y)
        want = SketchLstsqRegressor(random_state=0).fit(values, y)
        np.testing.assert_allclose(got.coef_, want.coef_, rtol=1e-10)
        np.testing.assert_allclose(np.asarray(got.predict(X)), want.predict(values),
                                   rtol=1e-10)
    assert got.n_features_in_ == 5
    with pytest.raises(ValueError, match="give columns and storage_options to "
                                         "dasketch.read_parquet"):
        dasketch.sketch(X, 3, columns=["c0"])


def test_an_arrow_table_is_read_as_its_numeric_columns(values):
    table = _table(values, label=["x"] * 300)
    got = dasketch.sketch(table, 4, columns=["c4", "c1"], block_rows=64)
    np.testing.assert_array_equal(got.B, dasketch.sketch(values[:, [4, 1]], 4,
                                                         block_rows=64).B)
    batch = _table(values[:, :2], n=pa.array([1, None] + [3] * 298, pa.int64())).to_batches()[0]
    (_, _, block), = iter_row_blocks(as_row_blocks(batch))
    assert block.dtype == np.float64 and np.isnan(block[1, 2]) and block[0, 2] == 1
    with pytest.raises(ValueError, match=r"the Arrow table has columns that are not numeric: "
                                         r"'label' \(string\)"):
        dasketch.sketch(table, 4)


def test_dask_frames_of_read_parquet_take_their_lengths_from_the_footers(tmp_path, values):
    """No partition is computed to learn the row counts: the blocks are planned
    under a scheduler that refuses to run anything."""
    dd = pytest.importorskip("dask.dataframe")
    root = tmp_path / "ds"
    root.mkdir()
    for part, (start, stop) in enumerate([(0, 100), (100, 137), (137, 300)]):
        pq.write_table(_table(values[start:stop]), root / f"part.{part}.parquet")
    frame = dd.read_parquet(str(root))[["c0", "c2"]]

    def refuse(*args, **kwargs):
        raise AssertionError("a partition was computed")

    with dask.config.set(scheduler=refuse):
        blocks = as_row_blocks(frame, block_rows=64)
    assert blocks.offsets == (0, 64, 128, 192, 256, 300)
    np.testing.assert_array_equal(dasketch.sketch(frame, 3, block_rows=64).B,
                                  dasketch.sketch(values[:, [0, 2]], 3, block_rows=64).B)


@pytest.mark.parametrize("row_group_size", [32, 100])
def test_worker_processes_read_the_row_groups(tmp_path, values, cluster_client,
                                              row_group_size):
    """On a cluster of worker processes, the tasks (the blocks' own, or one a row
    group) read the files, and the sketch is the one of the values in memory."""
    path = _write(tmp_path, _table(values), row_group_size=row_group_size)
    source = dasketch.read_parquet(path, columns=["c2", "c0", "c1"])
    got = dasketch.sketch(source, 3, block_rows=64, client=cluster_client)
    want = dasketch.sketch(values[:, [2, 0, 1]], 3, block_rows=64)
    np.testing.assert_array_equal(got.B, want.B)
