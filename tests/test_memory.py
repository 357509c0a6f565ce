"""Memory of wide rows: what a shrink, a merge and the synthetic writer allocate,
and a worker with a small memory limit sketching rows 400,000 wide.

Allocations are counted with tracemalloc, which sees numpy's buffers; the limits
below are a small multiple of the result, where the former code allocated 3-4
times the result (or, in the writer, 4,096 rows of noise per chunk).
"""

import os
import warnings

import numpy as np
import pytest
from distributed import Client, LocalCluster

import dasketch
import dasketch.datasets
from dasketch import Sketch, merge_sketches
from dasketch._blocks.stores import open_zarr_array
from dasketch.kernels.shrink import PANEL_COLUMNS, shrink
from dasketch.sketch_memory import (
    PAUSE_FRACTION,
    TERMINATE_FRACTION,
    WORKER_BASELINE_BYTES,
    check_task_memory,
    estimate_memory_bytes,
    task_memory_bytes,
    worker_memory_limit,
)


def _peak_allocation(func):
    import tracemalloc

    tracemalloc.start()
    try:
        result = func()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.heavy
def test_merge_of_wide_sketches_allocates_about_its_output():
    d, l = 200_000, 16
    rng = np.random.default_rng(0)
    parts = [Sketch.from_rows(rng.standard_normal((l, d)), l) for _ in range(2)]
    merged, peak = _peak_allocation(lambda: merge_sketches(parts))
    panel = merged.B.shape[0] * PANEL_COLUMNS * 8
    assert peak <= merged.B.nbytes + panel + 16 * d  # and a column index of d values
    expected = np.linalg.svd(np.vstack([p.B for p in parts]), compute_uv=False)
    assert merged.shrinkage == pytest.approx(parts[0].shrinkage + parts[1].shrinkage
                                             + expected[l - 1] ** 2, rel=1e-9)


def test_shrink_of_a_wide_block_allocates_about_its_output():
    d, l = 200_000, 16
    block = np.random.default_rng(1).standard_normal((2 * l, d))
    (B, delta), peak = _peak_allocation(lambda: shrink(np.zeros((0, d)), block, l))
    assert B.shape == (l - 1, d)
    assert peak <= B.nbytes + 2 ** 20
    singular = np.linalg.svd(block, compute_uv=False)
    assert delta == pytest.approx(singular[l - 1] ** 2, rel=1e-9)


@pytest.mark.heavy
def test_shrink_of_wide_sparse_rows_allocates_about_its_output():
    import scipy.sparse

    d, l = 200_000, 8
    rng = np.random.default_rng(2)
    top = rng.standard_normal((l - 1, d))
    rows = scipy.sparse.random(200, d, density=50 / d, format="csr", random_state=3)
    (B, delta), peak = _peak_allocation(lambda: shrink(top, rows, l))
    panel = B.shape[0] * PANEL_COLUMNS * 8
    assert B.flags.c_contiguous
    assert peak <= B.nbytes + 2 * panel + rows.nnz * 16 + 2 ** 20
    cross = np.asarray(rows @ top.T)
    gram = np.block([[top @ top.T, cross.T], [cross, (rows @ rows.T).toarray()]])
    singular = np.linalg.eigvalsh(gram)[::-1]  # squared singular values of the stack
    assert delta == pytest.approx(singular[l - 1], rel=1e-9)
    expected = np.maximum(singular[:l - 1] - singular[l - 1], 0)
    np.testing.assert_allclose(np.linalg.eigvalsh(B @ B.T)[::-1], expected, rtol=1e-8,
                               atol=1e-8 * singular[0])


@pytest.mark.heavy
def test_write_synthetic_draws_noise_per_chunk_not_per_4096_rows(tmp_path):
    d = 20_000
    _, peak = _peak_allocation(lambda: dasketch.write_synthetic(
        tmp_path / "wide.zarr", 64, d, rank=8, chunk_rows=8))
    tile = dasketch.datasets.CHUNK_VALUES * 8
    assert peak <= 6 * tile  # a tile and a chunk on each of two threads, with slack
    # The noise of a row does not depend on the chunking (noise is 0.01 per entry; the
    # signal's product may round differently for a different number of rows).
    again = dasketch.write_synthetic(tmp_path / "again.zarr", 64, d, rank=8, chunk_rows=13)
    first = open_zarr_array(tmp_path / "wide.zarr")
    np.testing.assert_allclose(first[40:50].compute(), again[40:50].compute(), rtol=0,
                               atol=1e-12)


def test_default_rank_fits_the_basis_limit(tmp_path, monkeypatch):
    d = 1_000
    monkeypatch.setattr(dasketch.datasets, "MAX_BASIS_BYTES", 8 * d * 10)
    X = dasketch.write_synthetic(tmp_path / "X.zarr", 200, d)
    assert np.linalg.matrix_rank(X.compute(), tol=0.5) == 10  # 10 directions + noise 0.01
    with pytest.raises(ValueError, match="rank"):
        dasketch.write_synthetic(tmp_path / "Y.zarr", 200, d, rank=11)


@pytest.mark.timeout(300)
def test_worker_sketches_wide_rows_within_its_memory_limit(tmp_path):
    """Rows 400,000 wide with merges of two 31-row sketches (99 MB each) on one
    worker limited to 900 MB: a merge that copies its inputs and its output
    passes the 95 % limit and the worker is restarted."""
    d, l = 400_000, 32
    path = tmp_path / "wide.zarr"
    dasketch.write_synthetic(path, 128, d, rank=40, decay=0.95)
    local = dasketch.sketch(path, l, split_every=2, client=None)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      memory_limit="900MB", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        pids = client.run(os.getpid)
        distributed = dasketch.sketch(path, l, split_every=2, client=client)
        assert client.run(os.getpid) == pids, "the worker was restarted (memory)"
    assert distributed.shrinkage == pytest.approx(local.shrinkage, rel=1e-9)
    np.testing.assert_allclose(distributed.singular_values(), local.singular_values(),
                               rtol=1e-9)


@pytest.fixture(scope="module")
def small_worker():
    """One worker process limited to 300 MiB."""
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      memory_limit="300MiB", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


def test_sketch_larger_than_worker_memory_is_a_clear_error(small_worker):
    import dask.array as da

    X = da.zeros((64, 500_000), chunks=(8, 500_000))
    with pytest.raises(ValueError, match=r"sketch_size=32 .* use sketch_size <= 9,"):
        dasketch.sketch(X, 32, client=small_worker, block_rows=8)
    limit = worker_memory_limit(small_worker)
    assert limit == 300 * 2 ** 20
    budget = TERMINATE_FRACTION * limit - WORKER_BASELINE_BYTES
    assert task_memory_bytes(9, 500_000, 2) <= budget < task_memory_bytes(10, 500_000, 2)


def test_error_estimate_larger_than_worker_memory_is_a_clear_error(small_worker):
    import scipy.sparse

    d = 1_000_000
    X = scipy.sparse.random(64, d, density=2e-5, format="csr", random_state=0)
    sk = dasketch.sketch(X, 4, update="block")
    pids = small_worker.run(os.getpid)
    # 10 vectors: even two 1e6 x 10 products summed (the fan-in drops to 2) and two
    # more held are 305 MiB, above the 135 MiB a 300 MiB worker has for a task
    with pytest.raises(ValueError, match=r"n_vectors=10 .* use n_vectors <= 4 "):
        dasketch.estimate_error(X, sk, client=small_worker)
    budget = TERMINATE_FRACTION * 300 * 2 ** 20 - WORKER_BASELINE_BYTES
    assert estimate_memory_bytes(4, d, 2) <= budget < estimate_memory_bytes(5, d, 2)
    est = dasketch.estimate_error(X, sk, n_vectors=4, client=small_worker, random_state=0)
    assert est.lower <= sk.error_bound * (1 + 1e-9) and est.failure_probability == 1e-4
    assert small_worker.run(os.getpid) == pids


def test_auto_update_falls_back_to_exact_when_randomized_does_not_fit(small_worker):
    d = 800_000
    fits = dict(working_size=4, n_features=d, split_every=2, failure_probability=1e-6)
    exact = task_memory_bytes(**fits)
    randomized = task_memory_bytes(**fits, update="randomized")
    assert exact <= TERMINATE_FRACTION * 300 * 2 ** 20 - WORKER_BASELINE_BYTES < randomized
    assert check_task_memory(small_worker, 4, 4, d, 2, update="randomized",
                             failure_probability=1e-6, requested="auto") == "auto"
    with pytest.raises(ValueError, match="Lanczos"):
        check_task_memory(small_worker, 4, 4, d, 2, update="randomized",
                          failure_probability=1e-6, requested="randomized")
    # Without a distributed client (threads) there is no limit to check.
    assert check_task_memory(None, 4, 4, d, 2, update="randomized",
                             failure_probability=1e-6) == "randomized"


def test_zarr_chunk_larger_than_worker_memory_is_a_clear_error(tmp_path, small_worker):
    import zarr

    path = str(tmp_path / "big_chunks.zarr")
    store = zarr.create_array(path, shape=(1024, 40_000), chunks=(1024, 40_000),
                              dtype="float64")
    store[:] = 1.0  # one 328 MB chunk (compressed to almost nothing on disk)
    pids = small_worker.run(os.getpid)
    with pytest.raises(ValueError, match=r"X: one block task reads 0\.3\d GiB.*--block-rows"):
        dasketch.sketch(path, 8, client=small_worker)
    assert small_worker.run(os.getpid) == pids


def test_sketch_above_the_pause_fraction_warns(small_worker):
    params = dict(update="auto", failure_probability=1e-6)
    with pytest.warns(UserWarning, match=r"pause .* sketch_size <= 6 stays below"):
        assert check_task_memory(small_worker, 7, 7, 500_000, 2, **params) == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_task_memory(small_worker, 6, 6, 500_000, 2, **params)
    # Blocks whose reads alone pass the pause fraction: no sketch size helps.
    limit = 300 * 2 ** 20
    between = (PAUSE_FRACTION + TERMINATE_FRACTION) / 2 * limit - WORKER_BASELINE_BYTES
    with pytest.warns(UserWarning, match=r"no sketch size stays below .*--block-rows") as seen:
        check_task_memory(small_worker, 2, 2, 8, 2, read_bytes=int(between), **params)
    assert "None" not in str(seen[0].message)


def test_randomized_estimate_counts_the_columns_a_sparse_block_touches():
    """A sparse block is compressed on the columns it touches, at most its nonzeros."""
    wide = task_memory_bytes(4, 10 ** 7, 2, update="randomized")
    touched = task_memory_bytes(4, 10 ** 7, 2, update="randomized", read_bytes=16 * 10 ** 5)
    assert touched == task_memory_bytes(4, 10 ** 7, 2)  # the merge is then the largest
    assert touched < wide
