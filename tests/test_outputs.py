"""Outputs: --overwrite replaces only what dasketch wrote, never an input, and
signals at any moment leave no partial output or temporary behind."""

import hashlib
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zarr

import dasketch
from dasketch._blocks.stores import open_zarr_array
from dasketch.datasets import write_sparse_synthetic, write_synthetic
from dasketch.storage.outputs import check_output, dasketch_output_kind, write_atomically

COMMAND = [sys.executable, "-m", "dasketch.cli"]
TIMEOUT = 180


def snapshot(root):
    """Every path under ``root`` with the hash of its bytes."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    found[rel] = hashlib.sha256(fh.read()).hexdigest()
            else:
                found[rel] = "dir"
    return found


def run(*args, cwd=None):
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=TIMEOUT)


@pytest.fixture()
def workspace(tmp_path):
    """A directory with user files, a data store written by make-data, and a
    plain zarr store written by another program."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.txt").write_text("months of work")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("export A=1")
    write_synthetic(tmp_path / "in.zarr", 400, 6, chunk_rows=100)
    zarr.create_array(str(tmp_path / "plain.zarr"), data=np.ones((20, 3)), chunks=(5, 3))
    return tmp_path


@pytest.mark.heavy
def test_overwrite_refuses_what_dasketch_did_not_write(workspace):
    before = snapshot(workspace)
    commands = [
        ("sketch", "in.zarr", "-l", 4, "--out", "results/", "--overwrite"),
        ("sketch", "in.zarr", "-l", 4, "--out", "in.zarr", "--overwrite"),
        ("make-data", "home/", "--rows", 10, "--features", 2, "--overwrite"),
        ("sketch", "in.zarr", "-l", 4, "--out", ".", "--overwrite"),
        ("sketch", "in.zarr", "-l", 4, "--out", "in.zarr/s.npz", "--overwrite"),
        ("make-data", "plain.zarr", "--rows", 10, "--features", 2, "--overwrite"),
    ]
    for args in commands:
        result = run(*args, cwd=workspace)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
        assert "input" in lines[0] or "not a sketch or data store" in lines[0], lines
    assert snapshot(workspace) == before


def test_overwrite_replaces_what_dasketch_wrote(tmp_path):
    X = np.random.default_rng(0).standard_normal((50, 4))
    for name in ("s.npz", "s.zarr"):
        path = tmp_path / name
        dasketch.save_sketch(dasketch.sketch(X, 3), path)
        assert dasketch_output_kind(path) == "a saved sketch"
        dasketch.save_sketch(dasketch.sketch(2 * X, 3), path, overwrite=True)
        assert np.isclose(dasketch.load_sketch(path).frobenius_sq, 4 * (X ** 2).sum())
    store = tmp_path / "d.zarr"
    write_synthetic(store, 100, 4)
    write_synthetic(store, 120, 4, overwrite=True)
    assert dasketch_output_kind(store) == "a data store written by dasketch"
    sparse = tmp_path / "sp.zarr"
    write_sparse_synthetic(sparse, 100, 40, density=0.1)
    write_sparse_synthetic(sparse, 90, 40, density=0.1, overwrite=True)
    assert dasketch_output_kind(sparse) == "a sparse data store written by dasketch"
    # A sketch may replace a store dasketch wrote, when asked.
    dasketch.save_sketch(dasketch.sketch(X, 3), store, overwrite=True)
    assert dasketch.load_sketch(store).n_rows == 50
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.zarr", "s.npz", "s.zarr",
                                                          "sp.zarr"]


def test_overwrite_refused_for_foreign_outputs_in_the_api(tmp_path):
    sketch = dasketch.sketch(np.eye(4), 2)
    foreign_file = tmp_path / "keep.npz"
    np.savez(foreign_file, a=np.arange(3))
    plain = tmp_path / "plain.zarr"
    zarr.create_array(str(plain), data=np.ones((4, 2)))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "f.txt").write_text("x")
    before = snapshot(tmp_path)
    for target in (foreign_file, plain, folder):
        with pytest.raises(FileExistsError, match="not a sketch or data store"):
            dasketch.save_sketch(sketch, target, overwrite=True)
        with pytest.raises(FileExistsError, match="overwrite=True"):
            dasketch.save_sketch(sketch, target)
    with pytest.raises(FileExistsError, match="not a sketch or data store"):
        write_synthetic(plain, 10, 2, overwrite=True)
    with pytest.raises(ValueError, match="input"):
        check_output(tmp_path, True, inputs=[plain])
    assert snapshot(tmp_path) == before


def test_a_target_that_appears_during_the_write_is_kept(tmp_path):
    target = tmp_path / "out.npz"

    def write(tmp):
        target.write_bytes(b"written meanwhile by someone else")
        with open(tmp, "wb") as fh:
            fh.write(b"ours")

    with pytest.raises(FileExistsError):
        write_atomically(write, target, False)
    assert target.read_bytes() == b"written meanwhile by someone else"
    assert [p.name for p in tmp_path.iterdir()] == ["out.npz"]


def _signal_at(args, delay, signum, cwd):
    proc = subprocess.Popen([*COMMAND, *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        time.sleep(delay)
        if proc.poll() is None:
            os.killpg(proc.pid, signum)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, stderr


def _check_signalled_run(out, code, stderr, signum):
    """Nothing is left but, if the signal came after the swap, the complete output."""
    left = sorted(p.name for p in out.iterdir())
    assert not any(name.startswith(".") for name in left), (left, stderr)  # no temporary
    for name in left:
        path = out / name
        if name == "s.zarr":
            assert dasketch.load_sketch(path).n_rows == 100_000
        else:
            assert open_zarr_array(path).shape == (400_000, 16)
    if code != 0:
        assert code in (130, 143, -signum), (code, stderr)
    if code in (130, 143):
        assert code == (130 if signum == signal.SIGINT else 143), stderr
        assert "Traceback" not in stderr, stderr
        assert sum("no partial output" in line for line in stderr.splitlines()) == 1, stderr


def _signal_moments(out, sketch_store, moments, seed):
    rng = np.random.default_rng(seed)
    cases = [("make-data", ["make-data", out / "d.zarr", "--rows", 400_000, "--features", 16,
                            "--chunks", 20_000, "--quiet"], 3.0),
             ("sketch", ["sketch", sketch_store, "-l", 8, "--workers", 1, "--quiet",
                         "--out", out / "s.zarr"], 6.0)]
    for _ in range(moments):
        for _, args, span in cases:
            signum = signal.SIGINT if rng.random() < 0.5 else signal.SIGTERM
            code, stderr = _signal_at(args, rng.uniform(0.5, span), signum, out.parent)
            _check_signalled_run(out, code, stderr, signum)
            for leftover in out.iterdir():
                dasketch.storage.outputs.remove_path(str(leftover))


@pytest.fixture(scope="module")
def sketch_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("signals") / "X.zarr"
    write_synthetic(path, 100_000, 16, chunk_rows=5_000)
    return path


@pytest.mark.cluster  # _signal_moments runs the CLI's embedded cluster
def test_signals_leave_nothing_behind(tmp_path, sketch_store):
    out = tmp_path / "out"
    out.mkdir()
    _signal_moments(out, sketch_store, 2, seed=0)


@pytest.mark.slow
def test_signals_at_twenty_moments_leave_nothing_behind(tmp_path, sketch_store):
    out = tmp_path / "out"
    out.mkdir()
    _signal_moments(out, sketch_store, 20, seed=1)
