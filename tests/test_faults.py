"""What dasketch promises on a real Dask cluster under faults.

Real ``dask scheduler`` / ``dask worker`` processes, started with the command lines
of ``deploy/docker-compose.yml`` (see ``cluster_procs.py``), are killed in the
middle of jobs. Results must equal the fault-free ones (tile-seeded operators and
a deterministic merge tree make every retry recompute the same values), jobs over
stores larger than the workers' memory must finish without a worker being killed
for memory, a lost scheduler must give a clear error in bounded time, and bad
data must name its rows and leave no output behind.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import uuid
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import zarr
from cluster_procs import (
    Job,
    ProcessCluster,
    kill_mid_job,
    kill_process,
    kill_while_running,
    kill_worker_and_nanny,
    measure,
    progress,
    run_sampling_memory,
    wait_until,
    without_xarray,
)

import dasketch
from dasketch._blocks.stores import open_zarr_array
from dasketch.datasets import write_synthetic

# Functions run on the scheduler and workers travel by value: those processes
# cannot import the test modules.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


# ------------------------------------------------------------------ helpers
def _sketch_job(client, path, **kwargs):
    params = dict(sketch_size=8, block_rows=1024, update="buffered")
    params.update(kwargs)
    return lambda: dasketch.sketch(path, client=client, **params)


def assert_same_sketch(a, b, exact=False, label=""):
    """Equal sketches: bit for bit (``exact``), or the same estimate ``B^T B`` and
    shrinkage to rounding. A recomputed block may land at another memory
    alignment, where BLAS may round differently, so retries after a fault are
    compared to rounding."""
    assert a.n_rows == b.n_rows and a.sketch_size == b.sketch_size, label
    if exact:
        np.testing.assert_array_equal(a.B, b.B, err_msg=str(label))
        assert a.shrinkage == b.shrinkage, label
    else:
        scale = np.abs(b.B.T @ b.B).max()
        np.testing.assert_allclose(a.B.T @ a.B, b.B.T @ b.B, rtol=0, atol=1e-9 * scale,
                                   err_msg=str(label))
        np.testing.assert_allclose(a.shrinkage, b.shrinkage, rtol=1e-9, atol=1e-12 * scale,
                                   err_msg=str(label))


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def fault_store(tmp_path_factory):
    """~80 MB zarr store: 160 blocks of 1024 rows, a few seconds of sketching."""
    path = tmp_path_factory.mktemp("faults") / "X.zarr"
    write_synthetic(path, 160 * 1024, 64, rank=16, noise=0.05, chunk_rows=4096)
    return path


@pytest.fixture
def procs(tmp_path):
    """Two compose workers (2 threads each, as in the compose defaults)."""
    cluster = ProcessCluster(tmp_path / "logs", n_workers=2)
    try:
        yield cluster
    finally:
        cluster.close()


# ------------------------------------------------------------------ worker loss
@pytest.mark.timeout(300)
@pytest.mark.parametrize("node_lost", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["process killed", "node lost"])
def test_workers_killed_mid_sketch_give_the_fault_free_result(procs, fault_store, node_lost):
    """A worker process is killed (its nanny restarts it, like a container restart),
    then (``-m slow``) a whole ``dask worker`` with its nanny (a node lost): both jobs
    finish with the fault-free sketch, bit for bit."""
    with procs.client(n_workers=2) as client:
        reference = Job(_sketch_job(client, fault_store)).join().result
        job, info = kill_mid_job(client, _sketch_job(client, fault_store), kill=kill_process)
        assert job.error is None, f"sketch failed after a worker was killed: {job.error!r}"
        assert info["results_lost"] > 0 and info["tasks_done"] < info["tasks_total"]
        assert info["victim"] not in client.scheduler_info()["workers"]
        assert_same_sketch(job.result, reference)
        if not node_lost:
            return

        client.wait_for_workers(2, timeout=60)  # the nanny's replacement
        job, info = kill_mid_job(client, _sketch_job(client, fault_store),
                                 kill=kill_worker_and_nanny, at_fraction=0.5)
        assert job.error is None, f"sketch failed after a worker was lost: {job.error!r}"
        assert info["results_lost"] > 0
        assert len(client.scheduler_info()["workers"]) == 1
        assert_same_sketch(job.result, reference)


# The same recovery (Dask recomputes the lost block tasks) as the sketch's and dual
# random projection's passes, tested by default above and below.
@pytest.mark.slow
@pytest.mark.timeout(240)
def test_worker_killed_mid_preconditioner_pass(procs, fault_store):
    """PwSGD's preconditioner pass (``S [A b]`` by a distributed OSNAP embedding, then
    ``QR(S A)``) survives a killed worker with the fault-free ``R`` and ``x0``."""
    from dasketch.linear_model import sketch_precondition

    b = np.random.default_rng(5).standard_normal(160 * 1024)
    with procs.client(n_workers=2) as client:
        def job():
            return sketch_precondition(fault_store, b, random_state=7, client=client,
                                       block_rows=1024)

        reference = Job(job).join().result
        run, info = kill_mid_job(client, job, kill=kill_process, at_fraction=0.25)
        assert run.error is None, f"preconditioner failed after a worker was killed: " \
                                  f"{run.error!r}"
        assert info["results_lost"] > 0
    R, R_ref = run.result.R, reference.R
    np.testing.assert_allclose(R, R_ref, rtol=0, atol=1e-10 * np.abs(R_ref).max())
    np.testing.assert_allclose(run.result.x0, reference.x0, rtol=1e-8,
                               atol=1e-10 * np.abs(reference.x0).max())
    assert 1 <= run.result.condition_number_estimate < 10


@pytest.mark.timeout(240)
def test_worker_killed_mid_stream_of_rfdson(procs, tmp_path):
    """RFD-SON walks the row blocks in order, one small graph per block: a worker
    killed mid-stream costs a recomputed block, and the model is the fault-free one."""
    online = pytest.importorskip("dasketch.linear_model.rfd_son")
    store = write_synthetic(tmp_path / "S.zarr", 24 * 256, 16, rank=8, chunk_rows=256)
    rng = np.random.default_rng(8)
    y = store.compute() @ rng.standard_normal(16) + 0.1 * rng.standard_normal(24 * 256)
    with procs.client(n_workers=2) as client:
        def job():
            with client.as_current():
                return online.RFDSONRegressor(sketch_size=6, block_rows=256,
                                              random_state=0).fit(tmp_path / "S.zarr", y)

        reference, n_transitions = measure(client, job)
        assert reference.error is None, repr(reference.error)
        run, info = kill_while_running(client, job, kill=kill_process,
                                       after_transitions=0.4 * n_transitions)
        assert run.error is None, f"RFD-SON failed after a worker was killed: {run.error!r}"
    np.testing.assert_allclose(run.result.coef_, reference.result.coef_, rtol=1e-9,
                               atol=1e-12 * np.abs(reference.result.coef_).max())


@pytest.mark.timeout(240)
def test_worker_killed_mid_dual_random_projection(procs, tmp_path):
    """Dual random projection persists ``X R / sqrt(m)`` on the workers, solves the
    projected problem and recovers ``w`` in a second pass; a worker killed mid-fit
    loses persisted blocks, which are regenerated from the tile-seeded ``R``: the
    model is the fault-free one."""
    linear_model = pytest.importorskip("dasketch.linear_model")
    if not hasattr(linear_model, "DualRandomProjectionRegressor"):
        pytest.skip("dual random projection is not available")
    store = write_synthetic(tmp_path / "D.zarr", 32 * 512, 48, rank=8, noise=0.0,
                            chunk_rows=512)
    rng = np.random.default_rng(9)
    y = store.compute() @ rng.standard_normal(48) + 0.05 * rng.standard_normal(32 * 512)
    with procs.client(n_workers=2) as client:
        def job():
            with client.as_current():
                return linear_model.DualRandomProjectionRegressor(
                    alpha=1.0, sketch_size=24, solver="paper", max_iter=1, block_rows=512,
                    random_state=0).fit(tmp_path / "D.zarr", y)

        reference, n_transitions = measure(client, job)
        assert reference.error is None, repr(reference.error)
        run, info = kill_while_running(client, job, kill=kill_process,
                                       after_transitions=0.3 * n_transitions)
        assert run.error is None, f"dual random projection failed after a worker was " \
                                  f"killed: {run.error!r}"
    coef = reference.result.coef_
    np.testing.assert_allclose(run.result.coef_, coef, rtol=1e-9,
                               atol=1e-12 * np.abs(coef).max())


# ------------------------------------------------------------------ memory limits
def _memory_job(tmp_path_factory, n_rows, n_features, limit, n_workers, timeout):
    """Sketch a zarr store of ``n_rows x n_features`` float64 on ``n_workers``
    compose workers with ``--memory-limit limit``; return store / total limit."""
    from dask.utils import parse_bytes

    path = tmp_path_factory.mktemp("memory") / "big.zarr"
    block_rows = 1024  # 4 MiB blocks at 512 features: what a worker holds at once
    store = write_synthetic(path, n_rows, n_features, rank=8, noise=0.0,
                            chunk_rows=block_rows)
    env = {"DASK_WORKER_MEMORY_LIMIT": limit, "DASK_WORKER_THREADS": "1"}
    # The workers run as an image without the xarray extra: the limit measures dasketch.
    with without_xarray(tmp_path_factory.mktemp("no-xarray")), \
            ProcessCluster(tmp_path_factory.mktemp("memlogs"), n_workers=n_workers,
                           env=env) as cluster, cluster.client(n_workers=n_workers) as client:
        assert not any(client.run(lambda: "xarray" in sys.modules).values())
        workers = client.scheduler_info()["workers"]
        total_limit = sum(w["memory_limit"] for w in workers.values())
        assert total_limit == n_workers * parse_bytes(limit)
        ratio = store.nbytes / total_limit
        job, peak = run_sampling_memory(
            client, lambda: dasketch.sketch(path, 8, client=client, block_rows=block_rows,
                                            update="buffered"), timeout)
        assert job.error is None, f"job over a store {ratio:.1f}x memory failed: {job.error!r}"
        # No worker was killed or restarted for memory: same workers, no nanny restarts.
        assert set(client.scheduler_info()["workers"]) == set(workers)
        logs = cluster.logs("worker")
        for marker in ("exceeded 95% memory", "Restarting worker", "Worker process",
                       "KilledWorker"):
            assert marker not in logs, f"{marker!r} in worker logs"
        assert max(peak.values()) < 0.95 * parse_bytes(limit)
        assert job.result.n_rows == n_rows
        print(f"store {store.nbytes / 2**20:.0f} MiB = {ratio:.1f} x the workers' "
              f"{total_limit / 2**20:.0f} MiB; peak worker RSS "
              f"{max(peak.values()) / 2**20:.0f} MiB; {job.elapsed:.1f} s")
        return ratio, peak


@pytest.mark.timeout(240)
@pytest.mark.slow  # run by .ci/run's slow step
def test_store_three_times_the_workers_memory(tmp_path_factory):
    """805 MB store, one worker limited to 240 MiB (a worker process with numpy,
    scipy, zarr and dasketch loaded already holds ~150 MiB of it)."""
    ratio, _ = _memory_job(tmp_path_factory, 192 * 1024, 512, "240MiB", 1, timeout=200)
    assert ratio > 3.0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_store_ten_times_the_workers_memory(tmp_path_factory):
    """5.1 GB store, two workers limited to 240 MiB each."""
    ratio, _ = _memory_job(tmp_path_factory, 1_250_000, 512, "240MiB", 2, timeout=840)
    assert ratio > 10.0


# ------------------------------------------------------------------ scheduler loss
@pytest.mark.timeout(240)
@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_scheduler_lost_gives_a_clear_error_then_a_restart_works(procs, fault_store):
    from distributed.client import FutureCancelledError

    with procs.client(n_workers=2) as client:
        job = Job(_sketch_job(client, fault_store))
        wait_until(lambda: client.run_on_scheduler(progress)[0] > 5, 60,
                   what="job under way")
        procs.kill_scheduler()
        job.join(60)  # bounded: the client must not hang on a dead scheduler
        assert isinstance(job.error, FutureCancelledError), repr(job.error)
        assert "scheduler" in str(job.error).lower()

    # A new client on the dead address fails at once, naming the address: its
    # port refuses the TCP probe, so distributed never retries it.
    with pytest.raises(OSError, match=procs.address.split("//")[1].replace(".", r"\.")
                       + ".*connection refused"):
        with dasketch.get_client(procs.address, timeout="3s"):
            pass

    # Workers leave when their scheduler goes (the recipes restart them); a
    # scheduler restarted on the same address serves jobs again.
    for name, proc in procs.procs.items():
        if name.startswith("worker"):
            proc.wait(timeout=60)
    procs.start_scheduler(port=procs.port)
    procs.start_worker()
    X = np.random.default_rng(2).standard_normal((4000, 12)) * 0.7 ** np.arange(12)
    with dasketch.get_client(procs.address) as client:
        client.wait_for_workers(1, timeout=60)
        again = dasketch.sketch(X, 6, client=client, block_rows=500)
    assert_same_sketch(again, dasketch.sketch(X, 6, block_rows=500), exact=False)


# ------------------------------------------------------------------ determinism
@pytest.fixture(scope="module")
def chunkings(tmp_path_factory):
    """The same 24k x 32 values stored in three zarr chunkings."""
    import dask.array as da

    root = tmp_path_factory.mktemp("chunkings")
    base = write_synthetic(root / "base.zarr", 24_000, 32, rank=12, noise=0.1,
                           chunk_rows=4096)
    paths = []
    for chunk_rows in (1000, 4096, 7777):
        path = root / f"X-{chunk_rows}.zarr"
        base.rechunk((chunk_rows, -1)).to_zarr(str(path))
        paths.append(path)
    assert da.from_zarr(str(paths[2])).chunks[0][0] == 7777
    return paths


# by default tests/test_sketching.py compares sketches across clusters and chunkings
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_same_result_for_1_2_4_workers_and_3_chunkings(tmp_path, chunkings):
    """The sketch, pwSGD's preconditioner (sparse embedding + QR) and dual random
    projection."""
    from dasketch.linear_model import DualRandomProjectionRegressor, sketch_precondition

    targets = np.random.default_rng(4).standard_normal(24_000)
    results, preconditioners, drp = {}, {}, {}
    env = {"DASK_WORKER_THREADS": "1"}
    with ProcessCluster(tmp_path / "logs", n_workers=1, env=env) as cluster, \
            cluster.client(n_workers=1) as client:
        for n_workers in (1, 2, 4):
            while cluster.n_started < n_workers:
                cluster.start_worker()
            client.wait_for_workers(n_workers, timeout=90)
            assert len(client.scheduler_info()["workers"]) == n_workers
            for path in chunkings:
                results[n_workers, path.name] = dasketch.sketch(
                    path, 10, client=client, block_rows=2048, center=True)
                preconditioners[n_workers, path.name] = sketch_precondition(
                    path, targets, random_state=3, client=client, block_rows=2048)
                if path is not chunkings[1]:
                    with client.as_current():
                        drp[n_workers, path.name] = DualRandomProjectionRegressor(
                            alpha=10.0, sketch_size=16, block_rows=2048,
                            random_state=3).fit(path, targets).coef_
    reference = results[1, chunkings[0].name]
    assert reference.n_rows == 24_000
    for key, result in results.items():
        assert_same_sketch(result, reference, label=key)
        np.testing.assert_allclose(result.mean, reference.mean, rtol=1e-12, err_msg=str(key))
    R_ref = preconditioners[1, chunkings[0].name].R
    for key, precond in preconditioners.items():
        np.testing.assert_allclose(precond.R, R_ref, rtol=0, atol=1e-10 * np.abs(R_ref).max(),
                                   err_msg=str(key))
    coef_ref = drp[1, chunkings[0].name]
    for key, coef in drp.items():
        np.testing.assert_allclose(coef, coef_ref, rtol=1e-9,
                                   atol=1e-12 * np.abs(coef_ref).max(), err_msg=str(key))
    # The threaded scheduler (no cluster) agrees to rounding.
    local = dasketch.sketch(chunkings[1], 10, block_rows=2048, center=True)
    assert_same_sketch(local, reference, exact=False)


# ------------------------------------------------------------------ bad data
def test_nan_in_block_37_names_the_rows_and_writes_nothing(tmp_path, cluster_client):
    path = tmp_path / "X.zarr"
    write_synthetic(path, 60 * 500, 16, chunk_rows=500)
    array = zarr.open_array(str(path), mode="r+")
    bad_rows = (37 * 500 + 123, 37 * 500 + 499)
    for row in bad_rows:
        array[row, 5] = np.nan
    out = tmp_path / "out"
    out.mkdir()
    target = out / "sketch.npz"

    def sketch_and_save():
        result = dasketch.sketch(path, 8, client=cluster_client, block_rows=500)
        dasketch.save_sketch(result, target)

    with pytest.raises(ValueError) as excinfo:
        sketch_and_save()
    message = str(excinfo.value)
    for row in bad_rows:
        assert str(row) in message, message
    assert "NaN" in message
    assert list(out.iterdir()) == []  # no output, no temporary left behind

    # The command line on the same cluster: fails naming the rows, writes nothing.
    run = subprocess.run([sys.executable, "-m", "dasketch.cli", "sketch", str(path), "-l", "8",
                          "--scheduler", cluster_client.scheduler.address,
                          "--out", str(target), "--quiet"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert all(str(row) in run.stderr for row in bad_rows), run.stderr[-2000:]
    assert list(out.iterdir()) == []

    # An existing output is left intact by a failed run that would overwrite it.
    good = dasketch.sketch(np.ones((10, 16)), 4)
    dasketch.save_sketch(good, target)
    before = target.read_bytes()

    def sketch_and_overwrite():
        result = dasketch.sketch(path, 8, client=cluster_client, block_rows=500)
        dasketch.save_sketch(result, target, overwrite=True)

    with pytest.raises(ValueError):
        sketch_and_overwrite()
    assert target.read_bytes() == before
    assert [p.name for p in out.iterdir()] == ["sketch.npz"]


# ------------------------------------------------------------------ storage faults
def _memory_store():
    url = f"memory://faults-{uuid.uuid4().hex}/X.zarr"
    write_synthetic(url, 2000, 8, chunk_rows=500)
    return url, "in-memory filesystem"


def _deleted_chunk(tmp_path):
    """A chunk stored when the job opened the store, deleted before it was read."""
    path = tmp_path / "deleted.zarr"
    write_synthetic(path, 2000, 8, chunk_rows=500)
    X = open_zarr_array(path)
    (path / "c" / "2" / "0").unlink()
    return X, "changed under the job"


def _never_written_strict(tmp_path):
    """No chunk written, opened with missing_chunks="raise"."""
    path = tmp_path / "unwritten.zarr"
    zarr.create_array(str(path), shape=(2000, 8), chunks=(500, 8), dtype="float64")
    return open_zarr_array(path, missing_chunks="raise"), "lacks 4 of 4 chunks"


def _rewritten_after_opening(tmp_path):
    """The store was replaced by another of the same shape after the client opened it."""
    path = tmp_path / "rewritten.zarr"
    write_synthetic(path, 2000, 8, chunk_rows=500)
    X = open_zarr_array(path)
    write_synthetic(path, 2000, 8, chunk_rows=500, random_state=1, overwrite=True)
    return X, "changed under the job"


def _moved_after_opening(tmp_path):
    """The client opened the store, then the path went away: what a worker on
    another machine without the path sees."""
    path = tmp_path / "moved.zarr"
    write_synthetic(path, 2000, 8, chunk_rows=500)
    X = open_zarr_array(path)
    path.rename(tmp_path / "elsewhere.zarr")
    return X, "does not exist on worker"


STORAGE_FAULTS = {"memory:// store": lambda tmp_path: _memory_store(),
                  "deleted chunk file": _deleted_chunk,
                  "never-written store, strict": _never_written_strict,
                  "store rewritten after opening": _rewritten_after_opening,
                  "path missing on the workers": _moved_after_opening}


@pytest.mark.timeout(180)  # a hang guard only
@pytest.mark.parametrize("fault", list(STORAGE_FAULTS))
def test_storage_the_workers_cannot_read_is_an_error_never_zeros(fault, tmp_path,
                                                                  cluster_client):
    X, needle = STORAGE_FAULTS[fault](tmp_path)
    with pytest.raises(ValueError) as excinfo:
        dasketch.sketch(X, 4, client=cluster_client)
    message = str(excinfo.value)
    assert needle in message and "\n" not in message, message
    if isinstance(X, str):
        assert X in message


def test_memory_store_is_fine_without_worker_processes():
    url, _ = _memory_store()
    values = zarr.open_array(url, mode="r")[...]
    result = dasketch.sketch(url, 4)  # threads share the in-memory filesystem
    reference = dasketch.sketch(values, 4)
    np.testing.assert_allclose(result.B.T @ result.B, reference.B.T @ reference.B,
                               rtol=1e-12, atol=1e-12)


ORPHANING_RUN = """
import os, pathlib, sys, tempfile
sys.path.insert(0, sys.argv[1])
from cluster_procs import ProcessCluster
cluster = ProcessCluster(pathlib.Path(tempfile.mkdtemp()), n_workers=1)
cluster.client(n_workers=1)
print(" ".join(str(proc.pid) for proc in cluster.procs.values()), flush=True)
os._exit(1)  # as a hard timeout ends a test process: no finaliser runs
"""


@pytest.mark.timeout(120)
@pytest.mark.heavy
def test_cluster_processes_end_with_a_test_process_that_dies_hard():
    """The scheduler and worker processes a test starts end with the test's
    process even when it ends without running any finaliser."""
    import psutil

    run = subprocess.run([sys.executable, "-c", ORPHANING_RUN, str(Path(__file__).parent)],
                         capture_output=True, text=True, timeout=90)
    pids = [int(pid) for pid in run.stdout.split()]
    assert len(pids) == 2, run.stderr

    def ended():
        return not [pid for pid in pids if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]

    try:
        wait_until(ended, 30, what="the cluster processes' end")
    finally:
        for pid in pids:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()
