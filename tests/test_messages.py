"""Messages that name the cause: damaged chunks, outputs that would vanish, closed
pipes."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dasketch
from dasketch.datasets import write_sparse_synthetic, write_synthetic

COMMAND = [sys.executable, "-m", "dasketch.cli"]


def _damage(path):
    data = bytearray(path.read_bytes())
    data[20:40] = b"\x00" * 20  # inside the compressed frame header
    path.write_bytes(bytes(data))


def test_a_damaged_chunk_names_the_store_the_chunk_and_its_rows(tmp_path):
    path = tmp_path / "X.zarr"
    write_synthetic(path, 4000, 8, chunk_rows=1000)
    _damage(path / "c" / "2" / "0")
    with pytest.raises(ValueError) as excinfo:
        dasketch.sketch(str(path), 4, block_rows=1500)
    message = str(excinfo.value)
    assert "X.zarr" in message and "chunk 'c/2/0' (rows 2000-3000)" in message, message
    assert "\n" not in message
    result = subprocess.run([*COMMAND, "sketch", str(path), "-l", "4", "--workers", "1",
                             "--quiet", "--out", str(tmp_path / "s.npz")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "c/2/0" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "s.npz").exists()


def test_a_damaged_sparse_chunk_is_named(tmp_path):
    path = tmp_path / "S.zarr"
    write_sparse_synthetic(path, 400, 50, density=0.1, chunk_rows=100)
    _damage(path / "data" / "c" / "1")
    with pytest.raises(ValueError, match=r"S.zarr.*cannot decode chunk 'c/1'"):
        dasketch.sketch(str(path), 4)


def _unreadable(monkeypatch, chunk):
    """Reading ``chunk`` (a path) fails as a file without read permission does
    (chmod cannot show it to root)."""
    import zarr.storage._local as local

    real = local._get

    def get(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(chunk):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(local, "_get", get)


def test_an_unreadable_chunk_is_a_permission_error_naming_its_file(tmp_path, monkeypatch):
    path = tmp_path / "X.zarr"
    write_synthetic(path, 4000, 8, chunk_rows=1000)
    _unreadable(monkeypatch, path / "c" / "2" / "0")
    with pytest.raises(PermissionError) as excinfo:
        dasketch.sketch(str(path), 4, block_rows=1500)
    message = str(excinfo.value)
    assert "cannot be read: permission denied" in message, message
    assert os.fspath(path / "c" / "2" / "0") in message and "damaged" not in message
    assert "\n" not in message


def test_an_unreadable_column_chunk_is_a_permission_error(tmp_path, monkeypatch):
    import zarr

    path = tmp_path / "x.zarr"
    zarr.create_array(str(path), data=np.ones((300, 64)), chunks=(300, 16))
    _unreadable(monkeypatch, path / "c" / "0" / "2")
    with pytest.raises(PermissionError, match=r"'c/0/2' \(rows 0-300, columns 32-48\).*"
                                              r"cannot be read: permission denied"):
        dasketch.sketch(str(path), 4, block_rows=100)


def test_in_memory_outputs_are_refused_before_any_work(tmp_path):
    write_synthetic(tmp_path / "X.zarr", 100, 4)
    result = subprocess.run([*COMMAND, "sketch", str(tmp_path / "X.zarr"), "--out",
                             "memory://lost.npz"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "in-memory filesystem" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_closed_pipe_is_not_an_error(tmp_path):
    path = tmp_path / "s.npz"
    dasketch.save_sketch(dasketch.sketch(np.random.default_rng(0).standard_normal((50, 6)),
                                         4), path)
    read, write = os.pipe()
    os.close(read)  # the reader is gone before anything is written, as `| head` can be
    result = subprocess.run([*COMMAND, "info", str(path)], stdout=write,
                            stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(write)
    assert result.stderr == "" and result.returncode == 1


def test_a_scheduler_lost_mid_job_is_one_line(tmp_path):
    from cluster_procs import ProcessCluster

    path = tmp_path / "X.zarr"
    write_synthetic(path, 600_000, 32, chunk_rows=5000)
    with ProcessCluster(tmp_path / "logs", n_workers=1) as cluster:
        proc = subprocess.Popen([*COMMAND, "sketch", str(path), "-l", "16", "--scheduler",
                                 cluster.address, "--out", str(tmp_path / "s.npz")],
                                stderr=subprocess.PIPE, text=True)
        seen = ""
        while "Completed" not in seen and proc.poll() is None:
            seen += proc.stderr.read(1)  # the progress bar: the job is under way
        cluster.kill_scheduler()
        _, rest = proc.communicate(timeout=120)
    errors = [line for line in (seen + rest).replace("\r", "\n").splitlines()
              if "Completed" not in line
              and line.strip() and not line.startswith("dashboard:")]
    assert proc.returncode == 1 and len(errors) == 1, repr(seen + rest)
    assert "connection to the Dask scheduler was lost" in errors[0]
    assert not (tmp_path / "s.npz").exists()


def _exit_the_worker(_):
    os._exit(1)  # as the OOM killer or the nanny's memory limit ends a worker


@pytest.mark.timeout(120)  # a hang guard only
@pytest.mark.parametrize("progress", [False, True], ids=["no bar", "bar"])
def test_a_task_that_kills_its_workers_names_memory_in_one_line(progress):
    import dask
    from distributed import Client, LocalCluster

    from dasketch._blocks.scheduler import compute

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}), \
            LocalCluster(n_workers=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster, set_as_default=False) as client:
        with pytest.raises(RuntimeError) as excinfo:
            compute(dask.delayed(_exit_the_worker)(1), client=client, progress=progress)
    message = str(excinfo.value)
    assert "\n" not in message and "_exit_the_worker" in message, message
    assert "out of memory" in message and "block_rows" in message, message
    assert "memory_limit" in message, message
