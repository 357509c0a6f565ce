"""No silent waits, no impossible sizes, listeners on loopback by default."""

import contextlib
import os
import subprocess
import sys
import threading
import time

import dask
import numpy as np
import psutil
import pytest
from cluster_procs import ProcessCluster, kill_worker_and_nanny, worker_pids
from distributed import Client, LocalCluster

import dasketch
from dasketch._blocks import cluster_wait
from dasketch._blocks.cluster_wait import worker_timeout
from dasketch.datasets import write_synthetic

COMMAND = [sys.executable, "-m", "dasketch.cli"]


@pytest.mark.timeout(90)  # a hang guard only: the wait is counted in polls
@pytest.mark.parametrize("progress", [False, True], ids=["no bar", "bar"])
def test_zero_workers_end_in_a_clear_error_within_the_wait(monkeypatch, capsys, progress):
    """Each poll of the worker count follows a wait of POLL_SECONDS for the
    futures, so an error within the 2 s configured is at most 2 / POLL_SECONDS
    polls after the first one. The progress bar is drawn while the worker count
    is watched, not before (on stderr)."""
    polls, count = [], cluster_wait._n_workers

    def counted(client):
        polls.append(count(client))
        return polls[-1]

    monkeypatch.setattr(cluster_wait, "_n_workers", counted)
    with dask.config.set({"dasketch.worker-timeout": "2s"}), \
            LocalCluster(n_workers=0, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(TimeoutError, match="no worker for 2 s") as excinfo:
            dasketch.sketch(np.ones((100, 4)), 3, client=client, progress=progress)
        assert 2 <= len(polls) <= 1 + 2 / cluster_wait.POLL_SECONDS and not any(polls), polls
        assert cluster.scheduler_address in str(excinfo.value)
        assert "\n" not in str(excinfo.value)
        assert not client.processing() or not any(client.processing().values())
    assert capsys.readouterr().out == ""


@pytest.mark.timeout(120)
def test_all_workers_lost_end_in_a_clear_error(tmp_path):
    path = tmp_path / "X.zarr"
    write_synthetic(path, 200_000, 32, chunk_rows=2_000)
    with dask.config.set({"dasketch.worker-timeout": "3s"}), \
            ProcessCluster(tmp_path / "logs", n_workers=1) as cluster:
        client = cluster.client(n_workers=1)
        try:
            (pid,) = worker_pids(client).values()
            outcome = {}

            def job():
                try:
                    outcome["result"] = dasketch.sketch(str(path), 8, block_rows=500,
                                                        client=client)
                except Exception as exc:  # noqa: BLE001 - inspected below
                    outcome["error"] = exc

            thread = threading.Thread(target=job)
            thread.start()
            time.sleep(1.0)  # under way
            kill_worker_and_nanny(None, pid)
            thread.join(timeout=60)
            assert not thread.is_alive(), "the job still waits"
            assert "result" not in outcome
            error = outcome["error"]
            assert isinstance(error, TimeoutError) and "all were lost" in str(error), error
        finally:
            client.close()


def test_worker_timeout_is_checked():
    with dask.config.set({"dasketch.worker-timeout": "soon"}):
        with pytest.raises(ValueError, match="dasketch.worker-timeout"):
            worker_timeout()
    assert worker_timeout() == 60.0


def test_impossible_sizes_are_refused_before_anything_starts(tmp_path):
    available = psutil.virtual_memory().available
    with pytest.raises(ValueError, match="n_workers=100000 worker processes cannot run"):
        dasketch.get_client(n_workers=100_000)
    result = subprocess.run([*COMMAND, "sketch", str(tmp_path / "x.zarr"), "--workers",
                             "100000"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    big = tmp_path / "big.zarr"
    result = subprocess.run([*COMMAND, "make-data", str(big), "--rows", str(10 ** 12),
                             "--features", "1000"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "free on its filesystem" in result.stderr and len(result.stderr.splitlines()) == 1
    assert list(tmp_path.iterdir()) == []
    assert available > 0


def _listening(process):
    found = []
    for proc in [process, *process.children(recursive=True)]:
        found += [c.laddr for c in proc.net_connections(kind="inet")
                  if c.status == psutil.CONN_LISTEN]
    return found


def test_embedded_cluster_listens_on_loopback_only():
    me = psutil.Process(os.getpid())
    before = set(_listening(me))
    with dasketch.get_client(n_workers=1, set_as_default=False) as client:
        opened = [a for a in _listening(me) if a not in before]
        assert opened and all(address.ip == "127.0.0.1" for address in opened), opened
        assert client.dashboard_link.startswith("http://127.0.0.1:")
    with dasketch.get_client(n_workers=1, dashboard_address=None,
                             set_as_default=False) as client:
        opened = [a for a in _listening(me) if a not in before]
        assert all(address.ip == "127.0.0.1" for address in opened), opened
        assert 8787 not in {address.port for address in opened}


@pytest.mark.timeout(150)  # a hang guard only: distributed's own ttl is 5 minutes
@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_a_stopped_worker_of_the_embedded_cluster_is_replaced(tmp_path):
    """A worker that stops heart-beating (SIGSTOP) is restarted by its nanny
    after ``dasketch.worker-timeout``; its tasks run elsewhere and the job ends
    with the sketch of the data."""
    path = tmp_path / "X.zarr"
    write_synthetic(path, 20_000, 8, chunk_rows=1_000)
    expected = dasketch.sketch(str(path), 4, block_rows=1_000, method="fd")
    stopped = None
    with dask.config.set({"dasketch.worker-timeout": "3s"}):
        client = dasketch.get_client(n_workers=2, dashboard_address=None,
                                     set_as_default=False)
    try:
        pids = worker_pids(client)
        address, pid = sorted(pids.items())[0]
        stopped = psutil.Process(pid)
        stopped.suspend()  # SIGSTOP: no heartbeat, no task finished
        result = dasketch.sketch(str(path), 4, block_rows=1_000, method="fd",
                                 client=client)
        np.testing.assert_allclose(result.covariance(), expected.covariance(),
                                   rtol=1e-10, atol=1e-8)
        assert result.n_rows == expected.n_rows == 20_000
        assert address not in client.scheduler_info()["workers"]
    finally:
        if stopped is not None:
            with contextlib.suppress(psutil.Error):
                stopped.resume()
                stopped.kill()
        client.close()
