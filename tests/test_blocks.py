"""dasketch.sketch over Dask: chunking, trees, schedulers, zarr, bad input, real data."""

import contextlib

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import zarr

import dasketch
from dasketch._blocks import as_row_blocks, default_block_rows
from tests.helpers import check_guarantees, decaying, low_rank_plus_noise, spectral_norm


@pytest.fixture(scope="module")
def data():
    return low_rank_plus_noise(3000, 40, 8, noise=0.3, seed=11)


def _same_sketch(a, b, rtol=1e-9):
    scale = spectral_norm(a.B.T @ a.B)
    np.testing.assert_allclose(a.B.T @ a.B, b.B.T @ b.B, atol=rtol * scale)
    assert a.shrinkage == pytest.approx(b.shrinkage, rel=rtol, abs=rtol * scale)
    assert a.n_rows == b.n_rows


@pytest.mark.parametrize("method", ["rfd", "fd"])
@pytest.mark.parametrize("center", [False, True])
def test_numpy_input_guarantees(data, method, center):
    sk = dasketch.sketch(data, 10, method=method, center=center, block_rows=400)
    A = data - data.mean(axis=0) if center else data
    check_guarantees(sk, A, ks=(0, 4, 8))


def test_result_independent_of_input_chunking(data):
    reference = dasketch.sketch(data, 10, block_rows=256)
    for chunks in [(3000, 40), (1, 40), (7, 40), (1000, 13), ((1, 999, 2000), (40,))]:
        X = da.from_array(data, chunks=chunks)
        with dask.config.set(scheduler="threads"):
            if len(X.chunks[1]) > 1:
                with pytest.warns(UserWarning, match="chunked along columns"):
                    sk = dasketch.sketch(X, 10, block_rows=256)
            else:
                sk = dasketch.sketch(X, 10, block_rows=256)
        _same_sketch(sk, reference)


@pytest.mark.slow  # .ci/run runs it by name
def test_split_every_and_block_rows_keep_guarantee(data):
    lambda_l = np.linalg.eigvalsh(data.T @ data)[::-1][9]
    bounds = {}
    for split_every in (2, 3, 8, 100):
        for block_rows in (1, 97, 256, 3000):
            if block_rows == 1 and split_every != 100:
                continue
            sk = dasketch.sketch(data, 10, split_every=split_every, block_rows=block_rows)
            check_guarantees(sk, data, ks=(0, 4, 8))
            bounds[split_every, block_rows] = sk.shrinkage
    # Weyl: any rank-(l-1) B with A^T A - B^T B <= Delta I has Delta >= lambda_l, which
    # the one-shot sketch of a single block attains; every tree stays within the
    # tail-energy bound checked above.
    assert min(bounds.values()) == pytest.approx(bounds[8, 3000], rel=1e-12)
    assert bounds[8, 3000] == pytest.approx(lambda_l, rel=1e-9)


def test_ragged_last_block_and_tiny_inputs():
    A = decaying(1001, 9, seed=3)
    check_guarantees(dasketch.sketch(A, 4, block_rows=100), A)
    one_row = A[:1]
    sk = dasketch.sketch(one_row, 4)
    np.testing.assert_allclose(sk.B.T @ sk.B, one_row.T @ one_row)
    assert sk.shrinkage == 0.0


def test_local_cluster_matches_threads(data, cluster_client):
    threaded = dasketch.sketch(data, 10, block_rows=300, center=True)
    distributed = dasketch.sketch(data, 10, block_rows=300, center=True, client=cluster_client)
    _same_sketch(distributed, threaded)
    np.testing.assert_allclose(distributed.mean, threaded.mean, rtol=1e-12)


def test_zarr_path_and_group_component(tmp_path, data, cluster_client):
    path = tmp_path / "a.zarr"
    zarr.create_array(str(path), data=data, chunks=(500, 40))
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("inner/x", data=data, chunks=(333, 40))
    reference = dasketch.sketch(data, 10, block_rows=512)
    _same_sketch(dasketch.sketch(str(path), 10, block_rows=512), reference)
    _same_sketch(dasketch.sketch(tmp_path / "g.zarr", 10, component="inner/x", block_rows=512,
                                 client=cluster_client), reference)
    with pytest.raises(ValueError, match="component"):
        dasketch.sketch(tmp_path / "g.zarr", 10)


def test_zarr_blocks_read_into_reused_buffers_by_overlapping_tasks(tmp_path, data):
    # Many small blocks, cut across the store's chunks, on four scheduler threads:
    # block tasks read their own rows into buffers the process reuses, so one
    # buffer handed to two running reads, or rows kept past their task, would
    # change the result.
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, data=data, chunks=(10, 40))
    reference = dasketch.sketch(data, 10, block_rows=37)
    with dask.config.set(scheduler="threads", num_workers=4):
        for _ in range(3):
            _same_sketch(dasketch.sketch(path, 10, block_rows=37), reference)
        estimated = dasketch.estimate_error(path, reference, random_state=3, block_rows=37)
    in_memory = dasketch.estimate_error(data, reference, random_state=3, block_rows=37)
    assert (estimated.lower, estimated.upper) == pytest.approx(
        (in_memory.lower, in_memory.upper), rel=1e-12)


def test_a_store_whose_chunks_the_blocks_cut_is_decoded_once(tmp_path, data, monkeypatch):
    """Blocks of 160 rows reading their own rows would decode chunks of 250 rows
    2.5 times over (zarr decodes a whole chunk for any of its rows): each chunk is
    read once instead, by a task of its own, and the sketch is that of the rows."""
    import dasketch._blocks.stores
    import dasketch.storage.reading

    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, data=data, chunks=(250, 40))
    reads, read_rows = [], dasketch.storage.reading.read_rows

    def counted(array, start, stop, *args, **kwargs):
        reads.append((start, stop))
        return read_rows(array, start, stop, *args, **kwargs)

    for module in (dasketch._blocks.stores, dasketch.storage.reading):
        monkeypatch.setattr(module, "read_rows", counted)
    assert as_row_blocks(path, block_rows=160).reader is None
    assert as_row_blocks(path, block_rows=250).reader is not None
    with dask.config.set(scheduler="sync"):
        got = dasketch.sketch(path, 10, block_rows=160)
    assert sorted(reads) == [(start, start + 250) for start in range(0, 3000, 250)]
    want = dasketch.sketch(data, 10, block_rows=160)
    np.testing.assert_array_equal(got.B, want.B)
    assert (got.shrinkage, got.n_rows) == (want.shrinkage, want.n_rows)


def test_row_buffers_reused_distinct_while_borrowed_and_one_kept(tmp_path, monkeypatch):
    from dasketch.storage import reading as io

    buffers = io._RowBuffers()
    with buffers.borrow((100, 8), np.float64) as first:
        with buffers.borrow((100, 8), np.float64) as second:  # both running
            assert not np.shares_memory(first, second)
    with buffers.borrow((60, 8), np.float64) as again:  # a shorter last block
        assert again.shape == (60, 8) and again.flags.c_contiguous
        assert np.shares_memory(again, first) or np.shares_memory(again, second)
    assert len(buffers._free) == 1  # none running: one is kept
    with buffers.borrow((100, 8), np.float32) as other_dtype:
        assert other_dtype.dtype == np.float32
    # Blocks above REUSED_READ_BYTES (wide rows) are read into fresh arrays.
    store = zarr.create_array(str(tmp_path / "s.zarr"), data=np.ones((20, 8)), chunks=(5, 8))
    with io.borrowed_rows(store, 0, 20, False, "X") as rows:
        assert io._row_buffers._running == 1 and rows.sum() == 160
    monkeypatch.setattr(io, "REUSED_READ_BYTES", 20 * 8 * 8 - 1)
    with io.borrowed_rows(store, 0, 20, False, "X") as rows:
        assert io._row_buffers._running == 0 and rows.sum() == 160


def test_in_memory_input_is_not_copied():
    # dask.array.from_array copies its whole input; sketching an in-memory matrix
    # must not double its memory.
    import tracemalloc

    X = np.random.default_rng(0).standard_normal((40_000, 128))
    dasketch.sketch(X[:1000], 8)  # imports and thread pools first
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="threads", num_workers=2):
            dasketch.sketch(X, 8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * X.nbytes, f"peak {peak / 2**20:.0f} MiB for {X.nbytes / 2**20:.0f} MiB"


def test_missing_zarr_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no zarr store"):
        dasketch.sketch(tmp_path / "missing.zarr", 10)


@pytest.mark.heavy
def test_sparse_input_matches_dense():
    X = scipy.sparse.random(2000, 500, density=0.01, random_state=2, format="csr")
    sparse = dasketch.sketch(X, 16, block_rows=300, update="block")
    dense = dasketch.sketch(X.toarray(), 16, block_rows=300, update="block")
    _same_sketch(sparse, dense, rtol=1e-8)
    check_guarantees(sparse, X.toarray(), ks=(0, 5))


def test_float32_input(data):
    sk = dasketch.sketch(da.from_array(data.astype(np.float32), chunks=(700, 40)), 10)
    check_guarantees(sk, data.astype(np.float32).astype(np.float64))


def test_nan_block_is_named(data):
    bad = data.copy()
    bad[1234, 3] = np.nan
    with pytest.raises(ValueError, match=r"rows 1234 .*\[1024, 1280\)"):
        dasketch.sketch(da.from_array(bad, chunks=(100, 40)), 10, block_rows=256)


@pytest.mark.parametrize("X,kwargs,error,match", [
    (np.ones(10), {}, ValueError, "2-D"),
    (np.ones((4, 3, 2)), {}, ValueError, "2-D"),
    (np.ones((0, 3)), {}, ValueError, "zero rows"),
    (np.ones((10, 3)), dict(sketch_size=1), ValueError, "sketch_size"),
    (np.ones((10, 3)), dict(method="pca"), ValueError, "method"),
    (np.ones((10, 3)), dict(alpha0=-0.1), ValueError, "alpha0"),
    (np.ones((10, 3)), dict(split_every=1), ValueError, "split_every"),
    (np.ones((10, 3)), dict(block_rows=0), ValueError, "block_rows"),
    (np.ones((10, 3)), dict(update="fast"), ValueError, "update"),
    (np.ones((10, 3), dtype=complex), {}, TypeError, "real numbers"),
    ({"a": 1}, {}, TypeError, "X must be"),
])
def test_bad_input(X, kwargs, error, match):
    params = dict(sketch_size=4) | kwargs
    with pytest.raises(error, match=match):
        dasketch.sketch(X, **params)


def test_default_block_rows_is_shape_only():
    assert default_block_rows(256) == 16384
    assert default_block_rows(10 ** 6) == 32
    assert default_block_rows(1) == 65536
    blocks = as_row_blocks(np.ones((70000, 3)))
    assert blocks.offsets[1] == 65536 and blocks.n_rows == 70000


# Reference figures of ../shared/data/README.md: best possible RFD error
# (lambda_l - lambda_d) / 2 / lambda_1 on a9a train.
A9A_BEST = {5: 0.0312, 10: 0.0165, 20: 0.0110, 30: 0.0062, 50: 0.0018}


@pytest.mark.parametrize("block_rows", [None, 4096])
@pytest.mark.slow  # run by .ci/run's slow step
def test_a9a_rfd_near_best_possible(a9a_train, block_rows):
    X, _ = a9a_train
    A = X.toarray()
    gram = A.T @ A
    eig = np.linalg.eigvalsh(gram)[::-1]
    for l, best_reference in A9A_BEST.items():
        best = (eig[l - 1] - eig[-1]) / 2
        assert best / eig[0] == pytest.approx(best_reference, abs=1e-4)
        rfd = dasketch.sketch(X, l, block_rows=block_rows)
        fd = dasketch.sketch(X, l, method="fd", block_rows=block_rows)
        error = spectral_norm(gram - rfd.covariance())
        assert error <= rfd.error_bound * (1 + 1e-9)
        assert error <= 1.1 * best, \
            f"l={l}: RFD error {error / eig[0]:.4f} vs best {best / eig[0]:.4f}"
        assert error <= 0.5 * fd.error_bound * (1 + 1e-9)
        check_guarantees(fd, A, ks=(0, l // 2))


def test_arrays_persisted_on_a_cluster_are_computed_there(data, cluster_client):
    X = cluster_client.persist(da.from_array(data, chunks=(700, 40)))
    on_cluster = dasketch.sketch(X, 10, block_rows=300)
    _same_sketch(on_cluster, dasketch.sketch(data, 10, block_rows=300))


def _blas_thread_counts():
    from threadpoolctl import threadpool_info

    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_block_tasks_run_with_one_blas_thread_and_leave_the_caller_as_it_was():
    import scipy.linalg  # noqa: F401  (its BLAS is loaded, as the kernels load it)
    from threadpoolctl import threadpool_limits

    from dasketch._blocks import compute
    from dasketch._blocks.tasks import task

    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_thread_counts()
        assert before and set(before) == {2}
        X = np.random.default_rng(0).standard_normal((20_000, 50))
        with dask.config.set(scheduler="threads", num_workers=4):
            for _ in range(3):  # 200 overlapping block tasks each
                dasketch.sketch(X, 8, block_rows=100)
                assert _blas_thread_counts() == before
            (inside,) = compute(task(lambda: _blas_thread_counts())())
        assert max(inside) == 1
        assert _blas_thread_counts() == before


# ------------------------------------------------ the bridge's primitives
def _task_names(collection):
    return {dask.utils.key_split(k) for k in dict(collection.__dask_graph__())}


def test_split_every_defaults_to_dask_config_and_arguments_win():
    from dasketch._blocks import add, check_split_every, compute, map_reduce
    from dasketch.sketching import default_split_every

    blocks = as_row_blocks(np.arange(54.0).reshape(27, 2), block_rows=1)

    def summed(**kwargs):
        total = map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add, **kwargs)
        n_adds = sum(name == "add" for name in map(
            dask.utils.key_split, dict(total.__dask_graph__())))
        return n_adds, compute(total)[0]

    expected = np.arange(54.0).reshape(27, 2).sum(axis=0)
    assert summed()[0] == 4 + 1  # fan-in 8: 27 -> 4 -> 1
    with dask.config.set(split_every=3):
        assert check_split_every(None) == 3 and default_split_every(10, 10) == 3
        n_adds, total = summed()
        assert n_adds == 9 + 3 + 1 and np.array_equal(total, expected)
        assert summed(split_every=8)[0] == 5 and check_split_every(27) == 27
    with dask.config.set(split_every={0: 4}):
        assert check_split_every(None) == 4
    with dask.config.set(split_every=1), pytest.raises(ValueError, match="dask.config"):
        check_split_every(None)


def test_large_parts_are_folded_and_combined_within_a_budget(tmp_path):
    """A part larger than a block sums several blocks in one task, and large
    parts are combined fewer at a time: fewer parts in memory, the same sum."""
    from dasketch._blocks import add, check_split_every, compute, map_reduce

    X = np.random.default_rng(0).standard_normal((40, 5))
    path = str(tmp_path / "X.zarr")
    zarr.create_array(path, shape=X.shape, chunks=(4, 5), dtype="f8")[:] = X
    expected = np.outer(X.sum(axis=0), np.ones(50))

    def func(block, start, stop):
        return np.outer(block.sum(axis=0), np.ones(50))    # 2,000 bytes from 160

    for source in (X, path):
        blocks = as_row_blocks(source, block_rows=4)
        plain = map_reduce(blocks, func, add, keeps_block=False)
        folded = map_reduce(blocks, func, add, keeps_block=False, part_bytes=640)
        assert sum(name == "add" for name in map(
            dask.utils.key_split, dict(plain.__dask_graph__()))) == 2 + 1
        names = [dask.utils.key_split(k) for k in dict(folded.__dask_graph__())]
        assert names.count("func") == 3        # 10 blocks, 4 to a task: 3 parts
        for total in compute(plain, folded):
            np.testing.assert_allclose(total, expected, rtol=1e-12)
    assert check_split_every(None, part_bytes=2 ** 20) == 8
    assert check_split_every(16, part_bytes=2 ** 22) == 15
    assert check_split_every(None, part_bytes=2 ** 25) == 2
    with dask.config.set({"dasketch.combine-bytes": "16 MiB"}):
        assert check_split_every(None, part_bytes=2 ** 22) == 3
    with dask.config.set({"dasketch.combine-bytes": 0}), \
            pytest.raises(ValueError, match="dasketch.combine-bytes"):
        check_split_every(None, part_bytes=1)


def test_in_memory_block_keys_follow_the_data():
    from dasketch._blocks import rmatvec

    X = np.random.default_rng(0).standard_normal((50, 50))

    def keys(A, rows=20):
        return [b.key for b in as_row_blocks(A, block_rows=rows).blocks]

    assert keys(X) == keys(X.copy())  # the same data: the same keys, work is shared
    v = np.ones(50)
    assert rmatvec(as_row_blocks(X, block_rows=20), v).key == rmatvec(
        as_row_blocks(X.copy(), block_rows=20), v).key
    changed = X.copy()
    changed[49, 49] += 1e-12
    # A square matrix and its transpose share one buffer in memory order.
    for other in (changed, X.T, np.asfortranarray(X), X.astype(np.float32)):
        assert not set(keys(X)) & set(keys(other))
    assert not set(keys(X)) & set(keys(X, rows=25))
    S = scipy.sparse.random(50, 40, density=0.1, format="csr", random_state=0)
    wider = scipy.sparse.csr_matrix((S.data, S.indices, S.indptr), shape=(50, 41))
    assert keys(S) == keys(S.copy()) and not set(keys(S)) & set(keys(wider))


def test_every_pass_reads_zarr_rows_in_its_tasks(tmp_path, cluster_client):
    from dasketch._blocks import (
        add,
        append_ones_column,
        compute,
        gather_rows,
        map_reduce,
        map_rows,
        matvec,
        random_projection,
        rmatvec,
        sparse_embed_streams,
    )

    data = np.random.default_rng(1).standard_normal((300, 7))
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, data=data, chunks=(10, 7))
    y = np.arange(300.0)
    specs = [(0, 20, "osnap", 4), (1, 16, "countsketch", 1)]

    def passes(blocks):
        return {
            "X R": random_projection(blocks, 5, seed=3),
            "X w": matvec(blocks, np.arange(blocks.n_features, dtype=float)),
            "X^T v": rmatvec(blocks, y),
            "S [X y]": sparse_embed_streams(blocks, specs, 4, extra=(y,)),
            "rows": map_rows(blocks, lambda b, start, stop, v: b[:, 0] * v, y),
            "sum": map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add),
        }

    drawn = np.array([0, 36, 37, 150, 299])
    for design in (data, np.hstack([data, np.ones((300, 1))])):
        in_memory = as_row_blocks(design, block_rows=37)
        expected = dict(zip(passes(in_memory), compute(*passes(in_memory).values())))
        on_store = as_row_blocks(path, block_rows=37)
        if design.shape[1] == 8:
            on_store = append_ones_column(on_store)
        lazy = passes(on_store)
        for name, result in lazy.items():  # one task per block, reading its rows
            assert "read_chunk" not in _task_names(result), name
        for client, workers in ((None, 1), (None, 4), (cluster_client, None)):
            with dask.config.set(num_workers=workers):
                results = compute(*lazy.values(), client=client)
            for name, result in zip(lazy, results):
                np.testing.assert_allclose(result, expected[name], rtol=1e-12, atol=1e-12,
                                           err_msg=name)
            np.testing.assert_array_equal(gather_rows(on_store, drawn, client=client),
                                          design[drawn])


_CALLS = []


def _rows_and_gram(block, start, stop):
    _CALLS.append(start)
    return block * 2.0, block.T @ block


@pytest.mark.parametrize("scheduler", ["sync", "threads", "distributed"])
def test_a_fused_pass_computes_each_block_once(scheduler):
    """map_reduce with rows= hands one block task to a Dask array and a Delayed
    tree: persisting or computing them together runs it once per block (task
    fusion would copy it into both collections under new keys). On a cluster
    the graphs are optimised before they are submitted: the scheduler,
    optimising them itself after the call returned, would fuse them."""
    from distributed import Client, LocalCluster

    from dasketch._blocks import add, compute, map_reduce, persist

    X = np.random.default_rng(0).standard_normal((40, 3))
    for seed, use in enumerate(("persist", "compute")):
        blocks = as_row_blocks(X + seed, block_rows=5)
        rows, total = map_reduce(blocks, _rows_and_gram, add, rows=(3, np.float64))
        _CALLS.clear()
        if scheduler == "distributed":
            with LocalCluster(n_workers=1, processes=False, threads_per_worker=2,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                kept = persist(rows, total, client=client) if use == "persist" else (rows, total)
                got_rows, got_total = compute(*kept, client=client)
        else:
            with dask.config.set(scheduler=scheduler):
                kept = persist(rows, total) if use == "persist" else (rows, total)
                got_rows, got_total = compute(*kept)
        assert sorted(_CALLS) == list(range(0, 40, 5)), (use, _CALLS)
        np.testing.assert_allclose(got_rows, (X + seed) * 2.0)
        np.testing.assert_allclose(got_total, (X + seed).T @ (X + seed))


def test_projection_tiles_kept_for_later_blocks_are_those_drawn_anew(monkeypatch):
    """The Gaussian tiles a process keeps between blocks give the products of
    tiles drawn anew, bit for bit, and take at most their budget."""
    from dasketch._blocks import block_functions
    from dasketch.kernels.embeddings import TILE, gaussian_rows

    X = np.random.default_rng(0).standard_normal((50, 2 * TILE + 5))
    monkeypatch.setattr(block_functions, "_TILES", type(block_functions._TILES)())
    monkeypatch.setattr(block_functions, "TILE_CACHE_BYTES", 2 * TILE * 7 * 8)

    def drawn_anew(stream):
        return sum(X[:, lo:lo + TILE] @ gaussian_rows(3, stream, lo, min(lo + TILE, X.shape[1]), 7)
                   for lo in range(0, X.shape[1], TILE)) / np.sqrt(7)

    for stream in (1, 2, 1):
        kept = block_functions.project_block(X, 0, 50, seed=3, stream=stream, n_components=7)
        np.testing.assert_allclose(kept, drawn_anew(stream), rtol=1e-12)
    tiles = block_functions._TILES
    assert 0 < sum(t.nbytes for t in tiles.values()) <= block_functions.TILE_CACHE_BYTES
    assert all(not t.flags.writeable for t in tiles.values())
    for (seed, stream, lo, hi, m), tile in tiles.items():
        np.testing.assert_array_equal(tile, gaussian_rows(seed, stream, lo, hi, m))


def test_a_fit_holds_the_blas_threads_dask_config_names_and_restores_them():
    import scipy.linalg  # noqa: F401  (its BLAS is loaded, as the kernels load it)
    from threadpoolctl import threadpool_limits

    from dasketch._blocks import fit_blas_threads

    counted = fit_blas_threads(_blas_thread_counts)
    with threadpool_limits(limits=2, user_api="blas"):
        assert set(counted()) == {2}       # not set: the process's own count
        with dask.config.set({"dasketch.blas-threads": 1}):
            assert set(counted()) == {1}
        assert set(_blas_thread_counts()) == {2}
        for bad in (0, 2.5, "one", True):
            with dask.config.set({"dasketch.blas-threads": bad}), pytest.raises(
                    ValueError, match="dask.config 'dasketch.blas-threads' must be an integer"):
                counted()


def test_a_fit_takes_its_blas_threads_from_its_size_when_the_key_is_unset():
    import scipy.linalg  # noqa: F401  (its BLAS is loaded, as the kernels load it)
    from threadpoolctl import threadpool_limits

    from dasketch._blocks import fit_blas_threads, fit_size
    from dasketch._blocks.tasks import FIT_WORK_PER_THREAD

    def sized(d, m):
        fit_size(d, m)
        return _blas_thread_counts()

    counted = fit_blas_threads(sized)
    with threadpool_limits(limits=2, user_api="blas"):
        assert set(counted(6000, 120)) == {1}                 # d m^2 under one thread's work
        assert set(counted(4 * FIT_WORK_PER_THREAD, 1)) == {2}  # at most the process's
        assert set(_blas_thread_counts()) == {2}
        with dask.config.set({"dasketch.blas-threads": 2}):
            assert set(counted(10, 10)) == {2}                # the key, when set, wins
        assert set(sized(10, 10)) == {2}                      # outside a fit: unchanged


def test_few_default_blocks_are_spread_over_a_power_of_two_of_equal_blocks():
    from dasketch._blocks.readers.options import MIN_SPREAD_VALUES, spread_block_rows

    for n, d in [(1500, 6000), (1500, 3000), (3000, 12000), (400, 1600), (10 ** 5, 3),
                 (7, 10 ** 6), (6000, 24000), (1, 5)]:
        rows = default_block_rows(d)
        spread = spread_block_rows(rows, n, d, 16)
        count, before = -(-n // spread), -(-n // min(rows, n))
        assert spread <= min(rows, n) and count >= before
        if count > before:   # equal blocks, a power of two of them, none too small
            assert count & (count - 1) == 0 and count <= 16
            assert n - (count - 1) * spread <= spread and n * d >= count * MIN_SPREAD_VALUES
        assert spread_block_rows(rows, n, d, 1) == min(rows, n)
    X = da.zeros((1500, 3000), chunks=(100, -1))
    assert as_row_blocks(X, min_blocks=16).offsets == (0, 750, 1500)
    assert as_row_blocks(X).offsets == (0, 1024, 1500)
    assert as_row_blocks(X, min_blocks=16, block_rows=100).offsets[1] == 100


@pytest.mark.parametrize("scheduler", ["sync", "distributed"])
def test_arrays_and_delayed_computed_together_keep_their_order(scheduler):
    """Dask arrays and Delayed values interleaved come back in the order given."""
    from distributed import Client, LocalCluster

    from dasketch._blocks import compute, persist

    objs = (da.ones(3, chunks=3), dask.delayed(sum)([1, 2]), da.zeros(2, chunks=2))
    with contextlib.ExitStack() as stack:
        if scheduler == "distributed":
            stack.enter_context(Client(stack.enter_context(LocalCluster(
                n_workers=1, processes=False, dashboard_address=None))))
        else:
            stack.enter_context(dask.config.set(scheduler=scheduler))
        for got in (compute(*objs), compute(*persist(*objs))):
            np.testing.assert_array_equal(got[0], np.ones(3))
            assert got[1] == 3
            np.testing.assert_array_equal(got[2], np.zeros(2))
