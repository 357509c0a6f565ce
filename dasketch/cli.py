"""The ``dasketch`` command: sketch zarr data sets from a terminal.

Subcommands: ``make-data``, ``sketch``, ``info``, ``demo``; ``dasketch SUBCOMMAND
--help`` describes each, and a bare ``dasketch`` prints the help (exit status 0).
A misspelt option, subcommand or choice is answered with the closest valid one.
Results go to stdout, progress and errors to stderr.
Every user mistake (options, paths, unreadable stores or sketch files, errors
raised on the workers) prints one line and exits with status 2, before any
cluster starts where it can be known then; Ctrl-C exits with status 130 and
SIGTERM with 143, and neither leaves a partial output or a temporary behind.
Nothing is overwritten without ``--overwrite``, and ``--overwrite`` replaces
only a sketch or data store that dasketch wrote, never an input of the same
job (:mod:`dasketch.storage.outputs`).

Only the standard library is imported at start (``--help`` answers at once);
NumPy, Dask and the sketching code are imported by the subcommand that runs.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import tempfile
import time
from contextlib import contextmanager

from dasketch.cli_format import number, percent, rate, size
from dasketch.cli_parser import EXIT_USER_ERROR, FILE, PATH, build_parser

EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
# Most directions of the demo data's spectrum.
DEMO_RANK = 512
_USER_ERRORS = (ValueError, TypeError, OSError, KeyError)


# ------------------------------------------------------------------ helpers
def _terminate(signum, frame):
    from dasketch.storage.outputs import signal_interrupt

    raise signal_interrupt(signum)


def _close_interrupted_clusters():
    """Close embedded clusters that an interrupt caught half started or half
    closed, here and quietly: distributed's own exit hook would close them again
    and print the tracebacks of workers that never finished starting."""
    if "distributed" not in sys.modules:
        return
    from distributed.deploy.spec import SpecCluster

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    for cluster in list(SpecCluster._instances):
        try:
            cluster.close(timeout=10)
        except BaseException:  # noqa: BLE001 - closing what an interrupt left, best effort
            pass
        SpecCluster._instances.discard(cluster)


def _say(args, message):
    """Progress and status messages: stderr, unless --quiet."""
    if not args.quiet:
        print(message, file=sys.stderr, flush=True)


class _ChunkProgress:
    """``done / total`` on stderr: one rewritten line on a terminal, a line per
    tenth of the work otherwise (a redirected log stays short)."""

    def __init__(self, args, label):
        self.args, self.label, self.shown = args, label, -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done, total):
        if self.args.quiet:
            return
        tenth = 10 * done // max(total, 1)
        if self.tty:
            end = "\n" if done == total else ""
            print(f"\r{self.label}: {done}/{total} chunks ({done / total:.0%})", end=end,
                  file=sys.stderr, flush=True)
        elif tenth > self.shown:
            self.shown = tenth
            print(f"{self.label}: {done}/{total} chunks ({done / total:.0%})",
                  file=sys.stderr, flush=True)


def _check_writable_output(path, overwrite, *, option="--out", inputs=()):
    """The output may be written (:func:`dasketch.storage.outputs.check_output`: an
    existing one needs --overwrite and must be something dasketch wrote, and no
    input of the job is its own output); the nearest existing directory above it
    must accept a new file (tried, so that it also holds for root and read-only
    mounts)."""
    if str(path).startswith("memory://"):
        raise ValueError(f"{option}: {path!r} is an in-memory filesystem, which is gone "
                         "when this command exits; write to a path or a remote store")
    from dasketch.storage.outputs import check_output, local_file_path

    if local_file_path(path) is None:
        return
    check_output(path, overwrite, inputs=inputs, name=option, flag="--overwrite")
    parent = os.path.dirname(os.path.abspath(local_file_path(path)))
    while not os.path.exists(parent):  # missing directories are created when writing
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise NotADirectoryError(f"{option}: {parent!r} is a file, not a directory")
    try:
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise PermissionError(f"{option}: cannot write in {parent!r} "
                              f"({exc.strerror or type(exc).__name__})") from None


def _silence_distributed_logs():
    """Keep distributed's and asyncio's log records below CRITICAL out of the terminal.

    distributed's configuration gives child loggers (``distributed.client``, ...) levels
    of their own, so the handlers are raised as well as the loggers.
    """
    for name in ("distributed", "asyncio", "tornado"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        for handler in logger.handlers:
            handler.setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("distributed.", "tornado.")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def _sigint_held():
    """A context in which SIGINT waits, recorded by a handler; yields the list of
    those received, complete once the block has ended. An error that the block
    raises after one was received (the error of a start-up cut short) is
    replaced by ``KeyboardInterrupt``. Main thread only."""
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield received
    except Exception:
        if not received:
            raise
        raise KeyboardInterrupt(f"signal {received[0]}") from None
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _workers_ignore_sigint():
    """Processes that ``multiprocessing`` starts in this block (the workers of an
    embedded cluster, and those their nannies start again) ignore SIGINT from
    their first instruction on: they are started through a shell script that
    sets it to be ignored, which the interpreter it then executes keeps. A Ctrl-C
    in a terminal, sent to every process of its group, reaches only this
    process, which shuts the workers down. POSIX only, and where the temporary
    directory allows executing a script; elsewhere the workers start as
    ``multiprocessing`` starts them."""
    import multiprocessing.spawn
    import shlex

    python = multiprocessing.spawn.get_executable()
    if os.name != "posix":
        yield
        return
    with tempfile.TemporaryDirectory(prefix="dasketch-workers-") as folder:
        launcher = os.path.join(folder, "python")
        with open(launcher, "w") as script:
            script.write(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(os.fsdecode(python))} "
                         '"$@"\n')
        os.chmod(launcher, 0o700)
        if not os.access(launcher, os.X_OK):  # a temporary directory mounted noexec
            yield
            return
        multiprocessing.spawn.set_executable(launcher)
        try:
            yield
        finally:
            multiprocessing.spawn.set_executable(python)


@contextmanager
def _client(args):
    """The client of the job: connected to --scheduler / $DASK_SCHEDULER_ADDRESS,
    else an embedded cluster whose workers ignore Ctrl-C (this process handles
    it and shuts them down, :func:`_workers_ignore_sigint`) and, unless
    --verbose, keep their logs to themselves: errors reach the user as one line
    from here. A Ctrl-C while the embedded cluster starts is held until the
    start-up has ended, then ends the job as at any other moment."""
    from dasketch.cluster import SCHEDULER_ENV, get_client

    address = args.scheduler or os.environ.get(SCHEDULER_ENV)
    if address:
        if args.workers is not None or args.memory_limit is not None:
            raise ValueError("--workers and --memory-limit size an embedded cluster; they "
                             "cannot be used with --scheduler")
        with get_client(address) as client:
            yield _quiet_unless_verbose(args, client)
        return
    quiet_logs = {} if args.verbose else {"silence_logs": logging.CRITICAL}
    with _workers_ignore_sigint():
        with _sigint_held() as interrupted:
            client = get_client(n_workers=args.workers, memory_limit=args.memory_limit,
                                **quiet_logs)
        with client:
            if interrupted:
                raise KeyboardInterrupt(f"signal {interrupted[0]}")
            yield _quiet_unless_verbose(args, client)


def _quiet_unless_verbose(args, client):
    """``client``, once distributed's logs are kept out of the terminal unless
    --verbose: set once distributed is imported (its import sets its loggers'
    levels), so that the client's reconnection tracebacks when a scheduler dies
    stay out and the error reaches the user as one line."""
    if not args.verbose:
        _silence_distributed_logs()
    return client


def _default_sketch_path(path):
    base = os.path.basename(os.path.normpath(str(path))) or "data"
    return os.path.join(os.path.dirname(os.path.normpath(str(path))) or ".",
                        f"{base}.sketch.npz") if "://" not in str(path) else f"{base}.sketch.npz"


# ------------------------------------------------------------------ subcommands
def run_sketch(args):
    out = args.out or _default_sketch_path(args.path)
    _check_writable_output(out, args.overwrite, inputs=[args.path])
    import dasketch
    from dasketch._blocks import as_row_blocks

    # Opens the store's metadata here: a missing path, a group without
    # --component or a 1-D array fails before any cluster starts.
    blocks = as_row_blocks(args.path, component=args.component, name=PATH,
                           missing_chunks=args.missing_chunks, block_rows=args.block_rows)
    with _client(args) as client:
        _say(args, f"dashboard: {client.dashboard_link}")
        start = time.perf_counter()
        sketch = dasketch.sketch(blocks, args.sketch_size, method=args.method,
                                 alpha0=args.alpha0, center=args.center,
                                 split_every=args.split_every, client=client,
                                 progress=not args.quiet)
        elapsed = time.perf_counter() - start
    dasketch.save_sketch(sketch, out, overwrite=args.overwrite)
    bound = _times_power_of_two(sketch.scaled().error_bound, 2 * sketch.scale_exponent)
    print(f"sketched {sketch.n_rows:,} x {sketch.n_features} in {elapsed:.2f} s "
          f"({number(sketch.n_rows / elapsed)} rows/s); certified bound {bound}; saved {out}")
    return 0


def _times_power_of_two(value, exponent):
    """``value * 2**exponent`` written as ``%.6g`` would, also beyond float64's range."""
    if not exponent or value == 0:
        return f"{value:.6g}"
    decimal = math.log10(value) + exponent * math.log10(2.0)
    power = math.floor(decimal)
    mantissa = 10.0 ** (decimal - power)
    if mantissa >= 9.999995:  # rounds up to 10 at six digits
        mantissa, power = 1.0, power + 1
    return f"{mantissa:.6g}e{power:+03d}"


def run_info(args):
    import dasketch

    sketch = dasketch.load_sketch(args.file, name=FILE)
    scaled, e = sketch.scaled(), sketch.scale_exponent
    s = scaled.singular_values()[:args.top]
    top = s[0] ** 2 + scaled.alpha if s.size else scaled.alpha
    lines = [
        f"file:          {args.file}",
        f"method:        {sketch.method}",
        f"sketch_size:   {sketch.sketch_size}",
        f"rows:          {sketch.n_rows}",
        f"features:      {sketch.n_features}",
        f"centered:      {sketch.centered}",
        f"alpha0:        {sketch.alpha0:.6g}",
        f"shrinkage:     {_times_power_of_two(scaled.shrinkage, 2 * e)}",
        f"alpha:         {_times_power_of_two(scaled.alpha, 2 * e)}",
        f"error_bound:   {_times_power_of_two(scaled.error_bound, 2 * e)}"
        + (f"  ({percent(scaled.error_bound / top)} of the top eigenvalue estimate)"
           if top else ""),
        "top singular values: " + " ".join(_times_power_of_two(v, e) for v in s),
    ]
    if e:
        lines.insert(7, f"scale:         the rows were sketched divided by 2**{e}")
    print("\n".join(lines))
    return 0


def run_make_data(args):
    _check_writable_output(args.path, args.overwrite, option="PATH")
    from dasketch.datasets import write_sparse_synthetic, write_synthetic

    start = time.perf_counter()
    progress = _ChunkProgress(args, f"writing {args.path}")
    if args.density is None:
        X = write_synthetic(args.path, args.rows, args.features, chunk_rows=args.chunks,
                            random_state=args.seed, overwrite=args.overwrite,
                            progress=progress)
        what = f"dense {X.shape[0]:,} x {X.shape[1]} float64 ({size(X.nbytes)})"
    else:
        n, d, nnz = write_sparse_synthetic(args.path, args.rows, args.features,
                                           density=args.density,
                                           chunk_rows=args.chunks or 16384,
                                           random_state=args.seed, overwrite=args.overwrite,
                                           progress=progress)
        what = f"sparse {n:,} x {d} with {nnz:,} nonzeros"
    print(f"wrote {what} to {args.path} in {time.perf_counter() - start:.1f} s")
    return 0


def run_demo(args):
    out = args.out or tempfile.mkdtemp(prefix="dasketch-demo-")
    if os.path.isdir(out) and os.listdir(out) and not args.overwrite:
        raise FileExistsError(f"--out: directory {out!r} is not empty; pass --overwrite "
                              "to replace its contents")
    for name in ("data.zarr", "sketch.npz", "spectrum.png"):
        _check_writable_output(os.path.join(out, name), args.overwrite)
    import numpy as np

    import dasketch
    from dasketch.datasets import MAX_BASIS_BYTES, write_synthetic
    from dasketch.storage.outputs import remove_path

    os.makedirs(out, exist_ok=True)
    data_path = os.path.join(out, "data.zarr")
    start = time.perf_counter()
    # Half the features carry the spectrum, at most DEMO_RANK of them (the random
    # basis is orthogonalised in memory) and as many as MAX_BASIS_BYTES holds.
    rank = max(1, min(args.features // 2, DEMO_RANK, MAX_BASIS_BYTES // (8 * args.features)))
    X = write_synthetic(data_path, args.rows, args.features, rank=rank,
                        power=0.5, noise=0.01, overwrite=True,
                        progress=_ChunkProgress(args, f"writing {data_path}"))
    _say(args, f"wrote {data_path}: {X.shape[0]:,} x {X.shape[1]} float64, "
               f"{size(X.nbytes)} in {time.perf_counter() - start:.1f} s")
    try:
        with _client(args) as client:
            _say(args, f"cluster: {len(client.scheduler_info()['workers'])} workers, "
                       f"dashboard {client.dashboard_link}")
            start = time.perf_counter()
            sketch = dasketch.sketch(data_path, args.sketch_size, method=args.method,
                                     split_every=args.split_every, client=client,
                                     progress=not args.quiet)
            elapsed = time.perf_counter() - start
            gram = client.compute(X.T @ X).result()
    except BaseException:  # an interrupted or failed demo leaves no data store behind
        remove_path(data_path)
        raise
    if args.out is None:  # a temporary directory: the data store is not kept
        remove_path(data_path)
        _say(args, f"removed {data_path} ({size(X.nbytes)}); pass --out DIR to "
                   "keep the data")
    eig = np.linalg.eigvalsh(gram)[::-1]
    error = float(np.abs(np.linalg.eigvalsh(gram - sketch.covariance())).max())
    sketch_path = os.path.join(out, "sketch.npz")
    dasketch.save_sketch(sketch, sketch_path, overwrite=True)
    plot_path = os.path.join(out, "spectrum.png")
    _plot_spectrum(eig, sketch, plot_path)
    holds = error <= sketch.error_bound * (1 + 1e-9)
    print(f"sketch size l = {sketch.sketch_size} ({sketch.method.upper()}), "
          f"{sketch.n_rows:,} rows x {sketch.n_features} features")
    print(f"time {elapsed:.2f} s, throughput {rate(X.nbytes, elapsed)} "
          f"({number(sketch.n_rows / elapsed)} rows/s)")
    print(f"certified bound  ||A^T A - (B^T B + alpha I)||_2 <= {sketch.error_bound:.6g} "
          f"({percent(sketch.error_bound / eig[0])} of ||A||_2^2)")
    print(f"measured error   ||A^T A - (B^T B + alpha I)||_2  = {error:.6g} "
          f"({percent(error / eig[0])} of ||A||_2^2)  -> bound {'holds' if holds else 'VIOLATED'}")
    if holds and error >= sketch.error_bound * (1 - 1e-6):
        print(TIGHT_BOUND)
    print(f"wrote {sketch_path} and {plot_path}")
    return 0 if holds else 1


# Why the demo's measured error equals the bound (Ghashami et al. 2016; RFD paper, Thm 2).
TIGHT_BOUND = ("(equal, as expected: the leading directions lie in every shrink and lose the "
               "whole shrinkage; the bound is attained there, so it is tight, not loose)")


def _plot_spectrum(eig, sketch, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    k = min(len(eig), 2 * sketch.sketch_size)
    estimate = np.zeros(k)
    s2 = sketch.singular_values()[:k] ** 2
    estimate[:s2.size] = s2
    estimate += sketch.alpha
    fig, ax = plt.subplots(figsize=(6, 4))
    index = np.arange(1, k + 1)
    ax.semilogy(index, eig[:k], "k.-", label="exact eigenvalues of A^T A")
    ax.semilogy(index, estimate, "o", mfc="none", color="tab:orange",
                label="sketch: eigenvalues of B^T B + alpha I")
    ax.fill_between(index, np.maximum(estimate - sketch.error_bound, eig[k - 1] / 10),
                    estimate + sketch.error_bound, color="tab:orange", alpha=0.2,
                    label="certified bound")
    ax.axvline(sketch.sketch_size, color="grey", ls=":", label="sketch size l")
    ax.set_xlabel("index")
    ax.set_ylabel("eigenvalue")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from dasketch.storage.outputs import PLOT_FORMAT, write_atomically

    try:  # replaced only when dasketch wrote it (its PNG text says so), never through a link
        write_atomically(lambda tmp: fig.savefig(tmp, dpi=110, format="png",
                                                 metadata={"format": PLOT_FORMAT}),
                         path, True, name="--out", flag="--overwrite")
    finally:
        plt.close(fig)


COMMANDS = {"demo": run_demo, "sketch": run_sketch, "info": run_info,
            "make-data": run_make_data}


def _one_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv=None):
    """Entry point of the ``dasketch`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `dasketch`: what it can do
        parser.print_help()
        return 0
    prefix = f"dasketch {args.command}: error:"
    if not args.verbose:
        # "Task exception was never retrieved" at shutdown after an error or Ctrl-C.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # stdout closed early (`dasketch info FILE | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:
        from dasketch.storage.outputs import Terminated

        terminated = isinstance(exc, Terminated)
        _close_interrupted_clusters()
        print(f"dasketch {args.command}: {'terminated' if terminated else 'interrupted'}; "
              "no partial output was left behind", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except _USER_ERRORS as exc:
        if args.verbose:
            raise
        print(f"{prefix} {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as exc:  # noqa: BLE001 - e.g. a worker lost; --verbose shows it
        if args.verbose:
            raise
        if "scheduler-connection-lost" in str(exc):
            print(f"{prefix} the connection to the Dask scheduler was lost (it stopped, or "
                  "the network failed); the job was cancelled and nothing was written",
                  file=sys.stderr)
            return EXIT_FAILURE
        print(f"{prefix} {type(exc).__name__}: {_one_line(exc)} (run with --verbose for "
              "the traceback)", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
