"""The real `dasketch` console script, run in subprocesses against zarr stores on disk."""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import zarr

import dasketch
from dasketch.datasets import write_synthetic
from dasketch.storage.reading import read_csr_rows
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


def test_data_beyond_float64_squares_is_sketched_and_shown(tmp_path):
    """Entries of 1e300: the sketch is saved divided by a power of two, and both
    commands print its bound and singular values in the data's units (beyond
    float64's range, so written out from the scaled values)."""
    store = tmp_path / "huge.zarr"
    X = np.random.default_rng(5).standard_normal((4000, 16)) * 0.8 ** np.arange(16) * 1e300
    zarr.create_array(str(store), data=X, chunks=(1000, 16))
    out = tmp_path / "s.npz"
    result = run("sketch", store, "--sketch-size", 6, "--workers", 1, "--out", out, "--quiet")
    assert result.returncode == 0, result.stderr
    sketch = dasketch.load_sketch(out)
    e, scaled = sketch.scale_exponent, sketch.scaled()
    Xs = np.ldexp(X, -e)
    assert spectral_norm(Xs.T @ Xs - scaled.covariance()) <= scaled.error_bound * (1 + 1e-9)
    decimal = np.log10(scaled.error_bound) + 2 * e * np.log10(2.0)
    assert decimal > 308 and f"certified bound {10 ** (decimal % 1):.6g}e+{int(decimal)}" \
        in result.stdout
    info = run("info", out, "--top", 2)
    assert info.returncode == 0, info.stderr
    assert f"the rows were sketched divided by 2**{e}" in info.stdout
    top = np.log10(scaled.singular_values()[0]) + e * np.log10(2.0)
    assert f"top singular values: {10 ** (top % 1):.6g}e+{int(top)} " in info.stdout


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
    # one system of units, and small numbers written with significant digits
    assert " MiB/s" in result.stdout and " MB/s" not in result.stdout
    assert "0.0000%" not in result.stdout and " 0 MiB/s" not in result.stdout
    bound, error = (float(re.search(rf"\|_2 {sign} (\S+) \(", result.stdout).group(1))
                    for sign in ("<=", " ="))
    assert ("equal, as expected" in result.stdout) == (error >= bound * (1 - 1e-6))
    png = out / "spectrum.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    sketch = dasketch.load_sketch(out / "sketch.npz")
    assert sketch.n_rows == 20000
    again = run("demo", "--rows", 100, "--features", 4, "--out", out)
    assert_user_error(again, "not empty", "--overwrite")
    assert dasketch.load_sketch(out / "sketch.npz").n_rows == 20000


def test_user_mistakes(dense_store, tmp_path):
    assert_user_error(run("sketch", tmp_path / "missing.zarr", "--quiet"), "PATH:",
                      "missing.zarr")
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
    assert_user_error(run("info", tmp_path / "nothing.npz"), "FILE:", "no sketch")
    assert_user_error(run("sketch", dense_store, "--sketch-size", 1, "--workers", 1,
                          "--quiet"), "--sketch-size")


@pytest.mark.parametrize("command", ["demo", "sketch", "info", "make-data"])
def test_help_for_every_subcommand(command):
    result = run(command, "--help")
    assert result.returncode == 0 and "usage: dasketch " + command in result.stdout


def test_every_option_and_argument_has_help():
    from dasketch.cli_parser import build_parser

    parser = build_parser()
    (subcommands,) = [action for action in parser._actions
                      if isinstance(action, argparse._SubParsersAction)]
    for name, subparser in subcommands.choices.items():
        for action in subparser._actions:
            assert action.help and action.help.strip(), (name, action.dest)


def test_bare_command_prints_the_help_with_make_data_first():
    result = run()
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert result.stdout.startswith("usage: dasketch")
    commands = result.stdout.split("COMMAND\n", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^    (\S+)", commands, flags=re.M)
    assert listed == ["make-data", "sketch", "info", "demo"], result.stdout


@pytest.mark.parametrize("args, suggestion", [
    (["skech"], "did you mean 'sketch'?"),
    (["sketch", "x.zarr", "--sketch-sise", "3"], "did you mean '--sketch-size'?"),
    (["sketch", "x.zarr", "--sketch-sise=3"], "did you mean '--sketch-size'?"),
    (["make-data", "x.zarr", "--rows", "5", "--features", "2", "--sed", "1"],
     "did you mean '--seed'?"),
    (["sketch", "x.zarr", "--method", "rdf"], "did you mean 'rfd'?")])
def test_misspelt_words_get_the_closest_valid_one(args, suggestion, tmp_path):
    result = run(*args, cwd=tmp_path)
    assert_user_error(result, suggestion)
    assert list(tmp_path.iterdir()) == []


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


# ------------------------------------------------------------------ edges
def _write_sketch_file(path):
    dasketch.save_sketch(dasketch.sketch(np.random.default_rng(0).standard_normal((50, 6)),
                                         4), path)
    return path


@pytest.mark.slow  # run by .ci/run's slow step
def test_info_rejects_files_that_are_not_sketches(tmp_path, dense_store):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"garbage")
    assert_user_error(run("info", garbage), "garbage.npz", "not a NumPy .npz archive")
    truncated = _write_sketch_file(tmp_path / "truncated.npz")
    truncated.write_bytes(truncated.read_bytes()[:300])
    assert_user_error(run("info", truncated), "truncated or corrupted")
    np.savez(tmp_path / "foreign.npz", x=np.ones(3))
    assert_user_error(run("info", tmp_path / "foreign.npz"), "without dasketch metadata")
    meta = {"format": "dasketch.Sketch", "format_version": 1, "method": "rfd"}
    np.savez(tmp_path / "partial.npz", metadata=np.array(json.dumps(meta)), B=np.ones((2, 3)))
    assert_user_error(run("info", tmp_path / "partial.npz"), "'sketch_size'", "missing")
    meta["format_version"] = 7
    np.savez(tmp_path / "future.npz", metadata=np.array(json.dumps(meta)), B=np.ones((2, 3)))
    assert_user_error(run("info", tmp_path / "future.npz"), "format version 7")
    assert_user_error(run("info", dense_store), "zarr array", "not a saved sketch")


def test_options_and_output_are_checked_before_a_cluster_starts(dense_store, tmp_path):
    """Each run names a scheduler where nothing listens: the error it reports is
    the option's, so it was found before any connection (or data read)."""
    nowhere = ("--scheduler", "tcp://127.0.0.1:1")
    for option, value, needle in (("-l", 1, "--sketch-size"), ("--alpha0", -1, "--alpha0"),
                                  ("--alpha0", "nan", "--alpha0"),
                                  ("--split-every", 1, "--split-every"),
                                  ("--memory-limit", "lots", "--memory-limit")):
        assert_user_error(run("sketch", dense_store, option, value, *nowhere), needle)
    assert_user_error(run("sketch", dense_store, "--scheduler", "not-an-address"),
                      "not-an-address")
    blocked = tmp_path / "file"
    blocked.write_text("a file, not a directory")
    assert_user_error(run("sketch", dense_store, "--out", blocked / "s.npz", *nowhere),
                      "--out", "is a file, not a directory")
    assert_user_error(run("sketch", tmp_path / "absent.zarr", *nowhere), "absent.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _read_only_directory(tmp_path):
    """A directory this process cannot create files in (root ignores mode bits:
    then /sys, which refuses new files even to root, if it does)."""
    directory = tmp_path / "read-only"
    directory.mkdir()
    directory.chmod(0o555)
    for candidate in (directory, Path("/sys")):
        try:
            with tempfile.TemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    pytest.skip("no read-only directory available to this user")


def test_unwritable_out_fails_before_any_compute(dense_store, tmp_path):
    directory = _read_only_directory(tmp_path)
    result = run("sketch", dense_store, "--out", directory / "s.npz", "--scheduler",
                 "tcp://127.0.0.1:1")
    assert_user_error(result, "--out", "cannot write", str(directory))
    assert ".tmp" not in result.stderr


@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_unreachable_scheduler_is_one_line_naming_it(dense_store, tmp_path):
    for address in ("tcp://127.0.0.1:1", "not-an-address", "tcp://127.0.0.1:99999"):
        result = run("sketch", dense_store, "--scheduler", address, "--out",
                     tmp_path / "s.npz", timeout=60)
        assert_user_error(result, address)
        assert not (tmp_path / "s.npz").exists()


def test_group_without_component_lists_its_arrays(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("features", data=np.ones((20, 3)))
    group.create_group("more").create_array("labels", data=np.ones((20, 2)))
    result = run("sketch", tmp_path / "g.zarr", "--scheduler", "tcp://127.0.0.1:1")
    assert_user_error(result, "zarr group", "'features'", "'more/labels'", "--component")


@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_worker_errors_are_one_line(tmp_path):
    """NaN rows and a deleted chunk, found on the workers of an embedded cluster:
    one line naming the rows or the chunk, no worker log, nothing written."""
    path = tmp_path / "X.zarr"
    write_synthetic(path, 4000, 8, chunk_rows=1000)
    array = zarr.open_array(str(path), mode="r+")
    array[2345, 3] = np.nan
    out = tmp_path / "s.npz"
    result = run("sketch", path, "-l", 4, "--workers", 1, "--out", out)
    assert_user_error(result, "2345", "NaN")
    assert "Compute Failed" not in result.stderr and "_OneBlasThread" not in result.stderr
    array[2345, 3] = 0.0
    (path / "c" / "2" / "0").unlink()
    result = run("sketch", path, "-l", 4, "--workers", 1, "--out", out,
                 "--missing-chunks", "raise")
    assert_user_error(result, "c/2/0", "--missing-chunks")
    assert not out.exists()
    filled = run("sketch", path, "-l", 4, "--workers", 1, "--out", out, "--quiet")
    assert filled.returncode == 0, filled.stderr
    A = array[...]
    A[2000:3000] = array.fill_value
    sketch = dasketch.load_sketch(out)
    error = spectral_norm(A.T @ A - sketch.covariance())
    assert sketch.n_rows == 4000 and error <= sketch.error_bound * (1 + 1e-9)


def test_progress_goes_to_stderr(tmp_path):
    path = tmp_path / "X.zarr"
    made = run("make-data", path, "--rows", 5000, "--features", 4, "--chunks", 500)
    assert made.returncode == 0, made.stderr
    assert made.stdout.count("\n") == 1 and made.stdout.startswith("wrote dense")
    assert "10/10 chunks" in made.stderr
    result = run("sketch", path, "-l", 3, "--workers", 1)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "certified bound" in result.stdout
    assert "dashboard" in result.stderr


def test_version_and_help_import_nothing_heavy():
    version = run("--version")
    assert version.returncode == 0 and version.stdout.split() == ["dasketch",
                                                                  dasketch.__version__]
    code = ("import sys; from dasketch.cli import main\n"
            "try:\n    main(['sketch', '--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = sorted({'numpy', 'dask', 'distributed', 'zarr', 'sklearn'} & "
            "set(sys.modules))\nprint('heavy:', heavy, file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert "heavy: []" in result.stderr, result.stderr
    assert "--missing-chunks" in result.stdout


def _interrupt(args, wait_for, tmp_path):
    """Start ``dasketch ARGS`` in its own process group, wait until ``wait_for``
    appears on its stderr, then send SIGINT to the group, as Ctrl-C in a
    terminal does."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([*COMMAND, *map(str, args)], stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        try:
            deadline = time.monotonic() + TIMEOUT
            while wait_for not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, log.read_text()


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory):
    """600k x 32 (150 MB): a sketch of it runs for seconds, time to interrupt it."""
    path = tmp_path_factory.mktemp("slow") / "X.zarr"
    write_synthetic(path, 600_000, 32, chunk_rows=5000)
    return path


@pytest.mark.parametrize("stage", ["make-data", "sketch"])
def test_ctrl_c_exits_130_in_one_line_leaving_nothing(tmp_path, slow_store, stage):
    out = tmp_path / "out"
    out.mkdir()
    if stage == "make-data":
        args = ["make-data", out / "big.zarr", "--rows", 2_000_000, "--features", 64,
                "--chunks", 20000]
        wait_for = "chunks ("
    else:
        args = ["sketch", slow_store, "-l", 16, "--workers", 1, "--out", out / "s.npz"]
        wait_for = "Completed"  # the progress bar: the job is under way
    code, stderr = _interrupt(args, wait_for, tmp_path)
    assert code == 130, stderr
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    # The line, after the dashboard link and the progress bar.
    assert len([line for line in stderr.splitlines() if line.strip()]) <= 3, stderr
    assert list(out.iterdir()) == []  # no output, no hidden temporary


def _interrupt_start_up(args, tmp_path):
    """Start ``dasketch ARGS`` in its own process group and send SIGINT to the
    group as soon as it has a child process (the embedded cluster is starting
    its workers). Returns the exit status, the stderr, and every process it
    started."""
    log = tmp_path / "stderr.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([*COMMAND, *map(str, args)], stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        started, sent = set(), False
        try:
            parent = psutil.Process(proc.pid)
            while proc.poll() is None:
                try:
                    started.update(parent.children(recursive=True))
                except psutil.NoSuchProcess:
                    break
                if started and not sent:
                    os.killpg(proc.pid, signal.SIGINT)
                    sent = True
                time.sleep(0.01)
            proc.wait(timeout=TIMEOUT)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert sent, log.read_text()
    return proc.returncode, log.read_text(), started


def _running(process):
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _still_running(processes, wait=60):
    """Those of ``processes`` still running once they have had ``wait`` seconds
    to exit (a worker closed by its nanny exits soon after its parent)."""
    _, alive = psutil.wait_procs([p for p in processes if _running(p)], timeout=wait)
    return [p for p in alive if _running(p)]


@pytest.mark.timeout(4 * TIMEOUT)
def test_ctrl_c_while_the_cluster_starts_exits_130_in_one_line(dense_store, tmp_path):
    """A Ctrl-C while the workers are spawned is held until the cluster has
    started, then ends the job as at any other moment; the workers, which never
    see it, are shut down. Tried again when the signal came only after the
    start-up (the dashboard line was printed), which shows in what was printed."""
    for _ in range(5):
        out = tmp_path / "s.npz"
        code, stderr, started = _interrupt_start_up(
            ["sketch", dense_store, "-l", 4, "--workers", 2, "--out", out], tmp_path)
        assert code == 130, stderr
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert "Traceback" not in stderr and not out.exists(), stderr
        assert lines[-1] == ("dasketch sketch: interrupted; no partial output was left "
                             "behind"), stderr
        assert not _still_running(started), started
        if len(lines) == 1:  # no dashboard line: the signal came during start-up
            return
    pytest.fail(f"SIGINT never arrived before the cluster had started:\n{stderr}")


def _sigint_disposition(queue):
    queue.put(signal.getsignal(signal.SIGINT))


def test_worker_processes_ignore_sigint_from_their_start():
    """What the embedded cluster's workers are started with: SIGINT ignored
    before the interpreter runs (Python keeps an inherited SIG_IGN), and
    multiprocessing as it was afterwards."""
    import multiprocessing

    from dasketch.cli import _workers_ignore_sigint

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    before = multiprocessing.spawn.get_executable()
    with _workers_ignore_sigint():
        process = context.Process(target=_sigint_disposition, args=(queue,))
        process.start()
        process.join(TIMEOUT)
    assert process.exitcode == 0 and queue.get(timeout=TIMEOUT) == signal.SIG_IGN
    assert multiprocessing.spawn.get_executable() == before


@pytest.mark.slow  # run by .ci/run's slow step
def test_sigterm_during_a_save_exits_143(tmp_path):
    """SIGTERM held while a sketch is saved is delivered once the write ended,
    as a termination (143), not an interrupt (130)."""
    path = tmp_path / "X.zarr"
    write_synthetic(path, 400, 4, chunk_rows=100)
    out = tmp_path / "s.npz"
    code = ("import os, signal, sys\n"
            "import dasketch.storage.sketch_io as io\n"
            "from dasketch.cli import main\n"
            "real = io.write_atomically\n"
            "def terminated_in_write(write, *args, **kwargs):\n"
            "    def write_after_sigterm(tmp):\n"
            "        os.kill(os.getpid(), signal.SIGTERM)\n"
            "        write(tmp)\n"
            "    real(write_after_sigterm, *args, **kwargs)\n"
            "io.write_atomically = terminated_in_write\n"
            f"sys.exit(main(['sketch', {str(path)!r}, '-l', '3', '--workers', '1', "
            f"'--quiet', '--out', {str(out)!r}]))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.returncode == 143, result.stderr
    assert result.stderr.strip().splitlines() == [
        "dasketch sketch: terminated; no partial output was left behind"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.zarr"]


def test_block_rows_of_a_few_rows_each_are_refused_before_any_cluster(dense_store, tmp_path):
    result = run("sketch", dense_store, "-l", 4, "--block-rows", 1, "--out",
                 tmp_path / "s.npz", "--quiet")
    assert_user_error(result, "--block-rows", "30,000 blocks", "pass at least")
    assert not (tmp_path / "s.npz").exists()


@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_demo_keeps_no_data_store_it_was_not_asked_to_keep(tmp_path):
    """A demo that fails after writing its data (here: a scheduler that refuses)
    removes the store; a demo without --out removes it after the run."""
    out = tmp_path / "demo"
    failed = run("demo", "--rows", 2000, "--features", 8, "--out", out,
                 "--scheduler", "tcp://127.0.0.1:1", "--quiet")
    assert failed.returncode == 2 and not (out / "data.zarr").exists(), failed.stderr
    env = dict(os.environ, TMPDIR=str(tmp_path))
    result = run("demo", "--rows", 2000, "--features", 8, "--workers", 1, env=env)
    assert result.returncode == 0, result.stderr
    assert "removed" in result.stderr and "--out DIR" in result.stderr
    (folder,) = tmp_path.glob("dasketch-demo-*")
    assert sorted(p.name for p in folder.iterdir()) == ["sketch.npz", "spectrum.png"]
