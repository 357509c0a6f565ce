"""The real `dasketch` console script, run in subprocesses against zarr stores on disk."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import dasketch
from dasketch.io import read_csr_rows
from tests.helpers import spectral_norm

TIMEOUT = 300


# The console script installed with this interpreter (found beside it, not on PATH:
# `venv/bin/python -m pytest` runs without the venv activated); from a source tree
# without an installed script, the module.
SCRIPT = Path(sys.executable).parent / "dasketch"
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "dasketch.cli"]


def run(*args, cwd=None, env=None, timeout=TIMEOUT):
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)


def assert_user_error(result, *needles):
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def dense_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "dense.zarr"
    result = run("make-data", path, "--rows", 30000, "--features", 48, "--chunks", 7000)
    assert result.returncode == 0, result.stderr
    assert "wrote dense 30,000 x 48" in result.stdout
    return path


def test_sketch_and_info_on_embedded_cluster(dense_store, tmp_path):
    out = tmp_path / "s.npz"
    result = run("sketch", dense_store, "--sketch-size", 12, "--workers", 2, "--out", out,
                 "--quiet")
    assert result.returncode == 0, result.stderr
    assert "certified bound" in result.stdout
    sketch = dasketch.load_sketch(out)
    A = zarr.open_array(str(dense_store), mode="r")[...]
    error = spectral_norm(A.T @ A - sketch.covariance())
    assert sketch.n_rows == 30000 and sketch.sketch_size == 12
    assert error <= sketch.error_bound * (1 + 1e-9)
    info = run("info", out, "--top", 3)
    assert info.returncode == 0, info.stderr
    assert "rows:          30000" in info.stdout
    assert f"error_bound:   {sketch.error_bound:.6g}" in info.stdout
    top = " ".join(f"{v:.6g}" for v in sketch.singular_values()[:3])
    assert f"top singular values: {top}" in info.stdout


def test_sparse_store_sketch_centred_fd(tmp_path):
    path = tmp_path / "sparse.zarr"
    result = run("make-data", path, "--rows", 3000, "--features", 2000, "--density", 0.005,
                 "--chunks", 1000)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "sparse.sketch.zarr"
    result = run("sketch", path, "-l", 10, "--method", "fd", "--center", "--workers", 1,
                 "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    sketch = dasketch.load_sketch(out)
    A = read_csr_rows(path, 0, 3000).toarray()
    Ac = A - A.mean(axis=0)
    residual = np.linalg.eigvalsh(Ac.T @ Ac - sketch.B.T @ sketch.B)
    assert residual.min() >= -1e-9 and residual.max() <= sketch.error_bound * (1 + 1e-9)
    assert sketch.method == "fd" and sketch.centered


def test_demo_writes_sketch_and_plot(tmp_path):
    out = tmp_path / "demo"
    result = run("demo", "--rows", 20000, "--features", 32, "--sketch-size", 8,
                 "--workers", 2, "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    assert "bound holds" in result.stdout and "rows/s" in result.stdout
    png = out / "spectrum.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    sketch = dasketch.load_sketch(out / "sketch.npz")
    assert sketch.n_rows == 20000
    again = run("demo", "--rows", 100, "--features", 4, "--out", out)
    assert_user_error(again, "not empty", "--overwrite")
    assert dasketch.load_sketch(out / "sketch.npz").n_rows == 20000


def test_user_mistakes(dense_store, tmp_path):
    assert_user_error(run("sketch", tmp_path / "missing.zarr", "--quiet"), "missing.zarr")
    one_d = tmp_path / "vector.zarr"
    zarr.create_array(str(one_d), data=np.arange(10.0))
    assert_user_error(run("sketch", one_d, "--workers", 1, "--quiet"), "2-D")
    existing = tmp_path / "taken.npz"
    existing.write_bytes(b"keep me")
    assert_user_error(run("sketch", dense_store, "--out", existing, "--quiet"),
                      "exists", "--overwrite")
    assert existing.read_bytes() == b"keep me"
    assert_user_error(run("make-data", dense_store, "--rows", 5, "--features", 2), "exists")
    bad_option = run("sketch", dense_store, "--sketch-size", "many")
    assert_user_error(bad_option, "--sketch-size")
    assert_user_error(run("make-data", tmp_path / "x.zarr", "--rows", 5, "--features", 2,
                          "--density", 3), "--density")
    assert_user_error(run("info", tmp_path / "nothing.npz"), "no sketch")
    assert_user_error(run("sketch", dense_store, "--sketch-size", 1, "--workers", 1,
                          "--quiet"), "sketch_size")


@pytest.mark.parametrize("command", ["demo", "sketch", "info", "make-data"])
def test_help_for_every_subcommand(command):
    result = run(command, "--help")
    assert result.returncode == 0 and "usage: dasketch " + command in result.stdout


def test_scheduler_address_and_env(dense_store, tmp_path, cluster_client):
    out = tmp_path / "remote.npz"
    address = cluster_client.scheduler.address
    result = run("sketch", dense_store, "-l", 6, "--scheduler", address, "--out", out,
                 "--quiet")
    assert result.returncode == 0, result.stderr
    env = dict(os.environ, DASK_SCHEDULER_ADDRESS=address)
    via_env = run("sketch", dense_store, "-l", 6, "--out", tmp_path / "env.npz", "--quiet",
                  env=env)
    assert via_env.returncode == 0, via_env.stderr
    a, b = dasketch.load_sketch(out), dasketch.load_sketch(tmp_path / "env.npz")
    np.testing.assert_allclose(a.B.T @ a.B, b.B.T @ b.B, rtol=1e-10, atol=1e-8)
    # The scheduler the command connected to is still running afterwards.
    assert cluster_client.submit(sum, [1, 2]).result() == 3
