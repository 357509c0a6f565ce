"""Decoded blocks kept in (worker) memory for algorithms of many passes.

``cache="auto" | True | False`` must not change a result beyond rounding, the
result records the choice, cached passes never read the store again, ``"auto"``
streams when X is larger than its share of the workers' memory, and workers
stay within their memory limits either way (a store larger than a cluster of
two 240 MiB workers, as in ``test_faults.py``).
"""

from __future__ import annotations

import shutil
import sys

import cloudpickle
import dask
import numpy as np
import pytest

from dasketch._blocks import add, as_row_blocks, cache_blocks, compute, map_reduce, matvec
from dasketch.datasets import write_synthetic
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
    sketch_lstsq,
)

cloudpickle.register_pickle_by_value(sys.modules[__name__])

N, D = 1500, 90


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A low-rank-plus-noise zarr store, its rows in memory, targets and labels."""
    path = str(tmp_path_factory.mktemp("cache") / "X.zarr")
    X = np.asarray(write_synthetic(path, N, D, rank=12, noise=0.05, chunk_rows=256,
                                   random_state=3))
    rng = np.random.default_rng(4)
    y = X @ rng.standard_normal(D) + 0.1 * rng.standard_normal(N)
    return path, X, y, np.where(y > np.median(y), 1.0, -1.0)


def _fits(source, y, labels, cache, client=None):
    ridge = dual_random_projection(source, y, alpha=10.0, sketch_size=30, tol=1e-8,
                                   block_rows=200, random_state=0, cache=cache, client=client)
    logistic = dual_random_projection(source, labels, loss="logistic", alpha=1.0,
                                      sketch_size=30, tol=1e-6, block_rows=200,
                                      random_state=0, cache=cache, client=client)
    lstsq = sketch_lstsq(source, y, tol=1e-8, block_rows=200, random_state=0, cache=cache,
                         client=client)
    return ridge, logistic, lstsq


def _assert_same(fits, reference, label):
    for fit, ref, name in zip(fits, reference, ("ridge", "logistic", "lstsq")):
        a, b = (fit.x, ref.x) if name == "lstsq" else (fit.coef, ref.coef)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9 * np.abs(b).max(),
                                   err_msg=f"{label} {name}")


def test_cache_settings_give_the_same_results_and_are_recorded(store, cluster_client):
    path, X, y, labels = store
    reference = _fits(X, y, labels, "auto")
    assert all(not f.cache.cached and f.cache.reason == "X is in memory already"
               for f in reference)
    for cache in ("auto", True, False):
        fits = _fits(path, y, labels, cache)
        _assert_same(fits, reference, f"cache={cache}")
        for fit, ref in zip(fits, reference):
            assert fit.cache.cached == (cache is not False), fit.cache
            assert fit.cache.nbytes == N * D * 8
            assert (fit.cache.budget is None) == (cache != "auto")
            assert getattr(fit, "n_passes", 0) == getattr(ref, "n_passes", 0)
    # On worker processes: the blocks are kept there, and the fit is the same.
    on_cluster = dual_random_projection(path, y, alpha=10.0, sketch_size=30, tol=1e-8,
                                        block_rows=200, random_state=0, client=cluster_client)
    assert on_cluster.cache.cached and "workers' free memory" in on_cluster.cache.reason
    _assert_same([on_cluster], reference, "on a cluster")


def test_cached_passes_do_not_read_the_store(store, tmp_path):
    path, X, y, _ = store
    copy = str(tmp_path / "copy.zarr")
    shutil.copytree(path, copy)
    cached, choice = cache_blocks(as_row_blocks(copy, block_rows=200), True)
    streamed = as_row_blocks(copy, block_rows=200)
    assert choice.cached and cached.resident
    shutil.rmtree(copy)  # later passes read the blocks kept in memory, never the store
    total = map_reduce(cached, lambda block, start, stop, v: block.T @ v, add, y)
    np.testing.assert_allclose(compute(total, matvec(cached, np.ones(D)))[0], X.T @ y,
                               rtol=1e-12)
    with pytest.raises(Exception, match="copy.zarr"):
        compute(matvec(streamed, np.ones(D)))


@pytest.mark.heavy
def test_estimators_record_the_choice_in_cache_(store):
    path, X, y, labels = store
    estimators = (DualRandomProjectionRegressor(alpha=10.0, sketch_size=30, tol=1e-8,
                                                block_rows=200, random_state=0),
                  DualRandomProjectionClassifier(alpha=1.0, sketch_size=30, block_rows=200,
                                                 random_state=0),
                  SketchLstsqRegressor(tol=1e-8, block_rows=200, random_state=0))
    targets = (y, labels, y)
    in_memory = [est.fit(X, t).coef_ for est, t in zip(estimators, targets)]
    assert all(est.cache_.reason == "X is in memory already" for est in estimators)
    # Every setting gives the functions' results (the test above); here each estimator
    # passes one setting on and records it, the three settings among the three.
    for cache, est, t, reference in zip(("auto", True, False), estimators, targets, in_memory):
        est.set_params(cache=cache).fit(path, t)
        assert est.cache_.cached == (cache is not False), (est, est.cache_)
        assert est.cache_.nbytes == N * D * 8
        assert (est.cache_.budget is None) == (cache != "auto")
        np.testing.assert_allclose(est.coef_, reference, rtol=0,
                                   atol=1e-9 * np.abs(reference).max())
    with dask.config.set({"dasketch.cache-fraction": 1e-6}):
        est = estimators[0].set_params(cache="auto").fit(path, y)
    assert not est.cache_.cached and est.cache_.budget < est.cache_.nbytes
    with pytest.raises(ValueError, match="cache"):
        SketchLstsqRegressor(cache="yes").fit(X, y)
    rule = (r"'cache' parameter of DualRandomProjectionRegressor must be a str among "
            r"\{'auto'\} or an instance of 'bool'")
    with pytest.raises(ValueError, match=rule):
        DualRandomProjectionRegressor(cache="yes").fit(X, y)


def test_auto_streams_beyond_its_share_of_memory(store):
    path, _, y, _ = store
    with dask.config.set({"dasketch.cache-fraction": 1e-6}):
        res = dual_random_projection(path, y, alpha=1.0, sketch_size=30, random_state=0)
    assert not res.cache.cached and res.cache.budget < res.cache.nbytes
    assert "streams from its source on every pass" in res.cache.reason


@pytest.mark.parametrize("cache", ["yes", None, 1, "True"])
def test_bad_cache_is_named(store, cache):
    path, _, y, _ = store
    with pytest.raises(ValueError, match="cache must be 'auto', True or False"):
        sketch_lstsq(path, y, cache=cache)
    with dask.config.set({"dasketch.cache-fraction": 2.0}), \
            pytest.raises(ValueError, match="dasketch.cache-fraction"):
        cache_blocks(as_row_blocks(path), "auto")


# ------------------------------------------------------------- worker memory limits
SMALL_WORKER = "240MiB"


def run_on_small_workers(tmp_path, job):
    """``job(client)`` on two compose workers of :data:`SMALL_WORKER` (one thread
    each, run as an image without the xarray extra, see
    ``cluster_procs.without_xarray``), sampling their memory; fails if the job
    raised or a worker was lost, restarted or passed 95% of its limit. Returns
    the job's result."""
    from cluster_procs import ProcessCluster, run_sampling_memory, without_xarray
    from dask.utils import parse_bytes

    env = {"DASK_WORKER_MEMORY_LIMIT": SMALL_WORKER, "DASK_WORKER_THREADS": "1"}
    with without_xarray(tmp_path / "no-xarray"), \
            ProcessCluster(tmp_path / "logs", n_workers=2, env=env) as cluster, \
            cluster.client(n_workers=2) as client:
        workers = set(client.scheduler_info()["workers"])
        run, peak = run_sampling_memory(client, lambda: job(client), timeout=840)
        assert run.error is None, repr(run.error)
        assert set(client.scheduler_info()["workers"]) == workers
        logs = cluster.logs("worker")
        for marker in ("exceeded 95% memory", "Restarting worker", "KilledWorker"):
            assert marker not in logs, f"{marker!r} in worker logs"
    limit = parse_bytes(SMALL_WORKER)
    assert max(peak.values()) < 0.95 * limit, {a: v / 2 ** 20 for a, v in peak.items()}
    return run.result


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_240_mib_workers_stream_a_store_larger_than_the_cluster(tmp_path):
    """On two compose workers of 240 MiB (about 150 MiB of each taken by the
    process and its modules), a 640 MiB store is solved by dual random
    projection with ``cache="auto"`` streaming it, and a 4 MiB store is cached
    for dual random projection and sketch_lstsq; no worker is restarted or
    passes 95% of its limit."""
    from dask.utils import parse_bytes

    big, small = str(tmp_path / "big.zarr"), str(tmp_path / "small.zarr")
    write_synthetic(big, 160 * 1024, 512, rank=8, noise=0.01, chunk_rows=1024)
    X_small = np.asarray(write_synthetic(small, 8192, 64, rank=8, noise=0.01,
                                         chunk_rows=1024))
    rng = np.random.default_rng(0)
    y_big = rng.standard_normal(160 * 1024)
    y_small = X_small @ rng.standard_normal(64) + 0.1 * rng.standard_normal(8192)

    def job(client):
        options = dict(block_rows=1024, random_state=0, client=client)
        return (dual_random_projection(big, y_big, alpha=1e3, sketch_size=20, tol=1e-4,
                                       **options),
                dual_random_projection(small, y_small, alpha=1.0, sketch_size=20,
                                       **options),
                sketch_lstsq(small, y_small, **options))

    drp_big, drp_small, lstsq_small = run_on_small_workers(tmp_path, job)
    assert drp_big.cache.nbytes > 2 * parse_bytes(SMALL_WORKER), drp_big.cache
    assert not drp_big.cache.cached and "streams from its source" in drp_big.cache.reason
    assert drp_big.optimality_residual < 1e-3
    assert drp_small.cache.cached and lstsq_small.cache.cached, drp_small.cache
    exact = dual_random_projection(X_small, y_small, alpha=1.0, sketch_size=20,
                                   block_rows=1024, random_state=0)
    np.testing.assert_allclose(drp_small.coef, exact.coef, rtol=0,
                               atol=1e-9 * np.abs(exact.coef).max())
    x = np.linalg.lstsq(X_small, y_small, rcond=None)[0]
    np.testing.assert_allclose(lstsq_small.x, x, rtol=0, atol=1e-8 * np.abs(x).max())


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_240_mib_workers_solve_512_columns_from_a_store(tmp_path):
    """sketch_lstsq with 512 columns on two 240 MiB workers, the store cached and
    streamed: the sketch pass's partial results (``S [A b]`` and the check
    sketch, 24 MiB each, from 4 MiB blocks) are folded over several blocks in
    one task and combined two at a time, so no worker is restarted,
    and the solution is that of NumPy in memory."""
    path = str(tmp_path / "wide.zarr")
    n, d = 16 * 1024, 512
    X = np.asarray(write_synthetic(path, n, d, rank=8, noise=0.01, chunk_rows=1024))
    rng = np.random.default_rng(0)
    y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    cached, streamed = run_on_small_workers(tmp_path, lambda client: [
        sketch_lstsq(path, y, block_rows=1024, random_state=0, client=client, cache=cache)
        for cache in ("auto", False)])
    x = np.linalg.lstsq(X, y, rcond=None)[0]
    assert cached.cache.cached and not streamed.cache.cached, (cached.cache, streamed.cache)
    for res in (cached, streamed):
        assert np.linalg.norm(res.x - x) <= res.coef_error_bound
        np.testing.assert_allclose(res.x, x, rtol=0, atol=1e-8 * np.abs(x).max())
