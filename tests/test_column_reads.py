"""Zarr stores chunked along columns are read by rows in the block tasks: no
rechunk, no shuffle, the sketch of the same data stored by rows."""

import logging
import tracemalloc
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import dasketch
from dasketch import SketchPCA
from dasketch._blocks import as_row_blocks
from dasketch._blocks.column_reads import ColumnChunkedRows, plan_column_reads
from dasketch._blocks.transposed_store import transposed_store_blocks
from tests.helpers import GraphRecorder, graph_tasks, moved_whole, store_read

N, D, BLOCK = 1200, 96, 128


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The same data stored by space (each chunk holds all the rows of 16
    columns, as a time-series layout) and by time (whole rows)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, 12)) @ rng.standard_normal((12, D)) * 3 \
        + rng.standard_normal((N, D))
    root = tmp_path_factory.mktemp("column_reads")
    space, time = str(root / "space.zarr"), str(root / "time.zarr")
    zarr.create_array(space, data=X, chunks=(N, 16))
    zarr.create_array(time, data=X, chunks=(BLOCK, D))
    return X, space, time


def test_space_chunked_store_sketches_as_the_time_chunked_one(stores, cluster_client):
    X, space, time = stores
    with pytest.warns(UserWarning, match=r"decoded by about 10\.0 block tasks.*block_rows=1200"):
        blocks = as_row_blocks(space, block_rows=BLOCK)
    assert blocks.plan == "column reads" and as_row_blocks(time, block_rows=BLOCK).plan == "rows"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_space = dasketch.sketch(space, 12, block_rows=BLOCK, center=True,
                                   client=cluster_client)
    by_time = dasketch.sketch(time, 12, block_rows=BLOCK, center=True, client=cluster_client)
    scale = np.linalg.norm(X) ** 2
    np.testing.assert_allclose(by_space.B, by_time.B, atol=1e-12 * np.sqrt(scale))
    assert by_space.error_bound == pytest.approx(by_time.error_bound, rel=1e-12, abs=1e-12 * scale)


@pytest.mark.parametrize("opened", [str, da.from_zarr])
def test_no_task_moves_a_whole_column_of_the_store(stores, opened):
    """SketchPCA of the space-chunked store sketches its transpose (column reads
    would decode every chunk 38 times a pass): its two passes read every column
    once each, its transform reads blocks of rows across the column chunks, and
    no graph holds a rechunk or shuffle."""
    X, space, _ = stores
    recorder, rows = GraphRecorder(), 32
    with warnings.catch_warnings(), dask.config.set(scheduler=recorder):
        warnings.simplefilter("ignore")
        pca = SketchPCA(4, 12, block_rows=rows).fit(opened(space))
        scores = pca.transform(opened(space)).compute()
    assert pca.plan_ == "transposed"
    np.testing.assert_allclose(scores, (X - X.mean(axis=0)) @ pca.components_.T, atol=1e-9)
    assert not moved_whole(recorder)
    reads = [store_read(task) for graph in recorder.graphs for task in graph_tasks(graph)]
    reads = [r for r in reads if r is not None]
    assert all(isinstance(read, ColumnChunkedRows) for read, _, _ in reads)
    fitted = sorted((start, stop) for read, start, stop in reads if read.transposed)
    assert fitted == sorted(2 * [(a, min(a + rows, D)) for a in range(0, D, rows)])
    projected = sorted((start, stop) for read, start, stop in reads if not read.transposed)
    assert projected == [(a, min(a + rows, N)) for a in range(0, N, rows)]


def test_the_transposed_plan_is_certified_and_measured(tmp_path):
    """The transposed plan's statement: every covariance eigenvalue within
    eigenvalue_bound_ of sketch_eigenvalues_, explained_variance_ the data's
    variance along the components (1e-10), the captured variance within 2 k
    bounds of the optimum, as the row plan on the time-chunked store."""
    rng = np.random.default_rng(1)  # a slowly decaying spectrum, columns of different means
    n, d = 600, 400
    X = rng.standard_normal((n, d)) * 0.99 ** np.arange(d) + np.linspace(-30.0, 30.0, d)
    space, time = str(tmp_path / "space.zarr"), str(tmp_path / "time.zarr")
    zarr.create_array(space, data=X, chunks=(n, 16))
    zarr.create_array(time, data=X, chunks=(BLOCK, d))
    k = 4  # 50 blocks of 8 columns, shrunk at every merge: the sketch is not exact
    pca = SketchPCA(k, 16, block_rows=8).fit(space)
    by_rows = SketchPCA(k, 16, block_rows=BLOCK).fit(time)
    assert pca.plan_ == "transposed" and by_rows.plan_ == "rows"
    exact = np.linalg.eigvalsh(np.cov(X.T))[::-1]
    Xc = X - X.mean(axis=0)
    np.testing.assert_allclose(pca.mean_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(pca.explained_variance_,
                               np.var(Xc @ pca.components_.T, axis=0, ddof=1), rtol=1e-10)
    bound = pca.eigenvalue_bound_
    assert 0 < bound < 0.5 * exact[0]
    assert np.all(np.abs(pca.sketch_eigenvalues_ - exact[:k]) <= bound * (1 + 1e-9))
    captured = pca.explained_variance_.sum()
    assert exact[:k].sum() - 2 * k * bound <= captured <= exact[:k].sum() * (1 + 1e-12)
    assert abs(captured - by_rows.explained_variance_.sum()) <= 2 * k * max(
        bound, by_rows.eigenvalue_bound_)
    with pytest.raises(ValueError, match="sketched the transpose"):
        pca.partial_fit(X[:10])


def test_dask_array_from_zarr_is_read_in_the_tasks(stores, caplog):
    X, space, _ = stores
    lazy = da.from_zarr(space)
    with caplog.at_level(logging.INFO, logger="dasketch"), warnings.catch_warnings(
            record=True) as caught:
        warnings.simplefilter("always")
        blocks = as_row_blocks(lazy, block_rows=BLOCK)
    assert blocks.plan == "column reads"
    assert not [w for w in caught if "rechunking" in str(w.message)]
    assert "without a rechunk" in caplog.text
    np.testing.assert_array_equal(dask.compute(*blocks.blocks)[3], X[3 * BLOCK:4 * BLOCK])
    with pytest.warns(UserWarning, match="rechunking to whole rows moves all its"):
        assert as_row_blocks(lazy[:, :50], block_rows=BLOCK).plan == "rechunk"


def test_a_read_decodes_at_most_its_budget(tmp_path):
    X = np.random.default_rng(1).standard_normal((4096, 512))
    array = zarr.create_array(str(tmp_path / "x.zarr"), data=X, chunks=(4096, 32))
    offsets = tuple(range(0, 4097, 256))
    plan = plan_column_reads(array.shape, array.chunks, 8, offsets)
    assert plan.amplification == 16 and plan.decoded_bytes == plan.block_bytes == 2 ** 20
    read = ColumnChunkedRows(False, "X", plan.groups)
    read.read(array, 256, 512)  # zarr's own first-use allocations
    tracemalloc.start()
    try:
        rows = read.read(array, 256, 512)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(rows, X[256:512])
    # The block, one group of decoded chunks, their compressed bytes and a copy
    # (reading the rows at once, zarr decodes up to 10 chunks together: 16-19 MiB).
    assert peak <= plan.block_bytes + 3 * plan.decoded_bytes + 2 ** 18, peak / 2 ** 20


def test_transposed_store_blocks_are_its_columns(tmp_path):
    G = np.random.default_rng(2).integers(-1, 3, size=(700, 90), dtype=np.int8)
    path = str(tmp_path / "g.zarr")
    zarr.create_array(path, data=G, chunks=(100, 32))
    blocks = transposed_store_blocks(path, block_rows=40)
    assert blocks.shape == (90, 700) and blocks.plan == "transposed reads"
    for (start, stop), block in zip(blocks.ranges(), dask.compute(*blocks.blocks)):
        assert block.dtype == np.int8
        np.testing.assert_array_equal(block, G[:, start:stop].T)


@pytest.mark.parametrize("transposed", [False, True])
def test_a_damaged_chunk_is_named(tmp_path, transposed):
    path = tmp_path / "x.zarr"
    zarr.create_array(str(path), data=np.ones((300, 64)), chunks=(300, 16))
    (path / "c" / "0" / "2").write_bytes(b"not zstd")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plan's read amplification
        blocks = transposed_store_blocks(str(path), block_rows=16) if transposed \
            else as_row_blocks(str(path), block_rows=100)
    # Rows 100-200 of the store, or its columns 32-48 as rows: both need chunk c/0/2.
    with pytest.raises(ValueError, match=r"x\.zarr' cannot decode chunk 'c/0/2' \(rows 0-300, "
                                         r"columns 32-48\).*rewrite the store"):
        dask.compute(blocks.blocks[2 if transposed else 1])
