"""What the benchmark scripts share.

* :func:`parser`: the command line every script takes (``--quick`` at least);
* :func:`local_cluster`: the cluster the distributed benchmarks run on (a
  ``LocalCluster`` of single-threaded worker processes on 127.0.0.1);
* :func:`best_time`, :func:`cpu_seconds`, :func:`side_by_side`: a command and its
  peers timed in one process, best of ``k``, wall and CPU seconds;
  :func:`traced`: one call's wall time and peak traced memory;
* :class:`PassCounter`: passes over an ``n x d`` matrix on Dask's local schedulers;
* :func:`relative_error`: ``||w - reference|| / ||reference||``;
* :func:`machine_facts`: the machine and its load, recorded beside every result;
* :func:`shared_data`: the real data sets, found as the tests find them;
* :func:`write_results`: ``results/<name>.json`` and its figure (``<name>_quick``
  for ``--quick``; the directory ``DASKETCH_BENCH_RESULTS`` when it is set);
  :func:`annotated_bars`: a bar per method with its numbers written above it.

Run a script as ``python -m benchmarks.bench_x`` from the repository root, or as
``python benchmarks/bench_x.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
RESULTS_ENV = "DASKETCH_BENCH_RESULTS"
SHARED_DATA_ENV = "DASKETCH_SHARED_DATA"


def parser(doc, quick_help="small smoke run, seconds"):
    """An argument parser described by the first line of ``doc``, with ``--quick``."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    return p


def sizes_and_repeats(doc, quick_help, sizes, quick_sizes, argv=None, repeat=5):
    """Parse ``--quick`` and ``--repeat R`` (default ``repeat``): ``(args, sizes)``,
    the quick sizes and at most two rounds with ``--quick``."""
    options = parser(doc, quick_help)
    options.add_argument("--repeat", type=int, default=repeat)
    args = options.parse_args(argv)
    if args.quick:
        sizes, args.repeat = quick_sizes, min(args.repeat, 2)
    return args, sizes


# ---------------------------------------------------------------------- timing
def best_time(func, repeat):
    """Best wall time of ``repeat`` runs of ``func``, and the last result."""
    best, result = np.inf, None
    for _ in range(repeat):
        result = None  # release the last result, so a persisted one is recomputed
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def traced(func):
    """``(result, wall seconds, peak MiB)`` of one call of ``func``, the peak of
    Python-tracked memory (``tracemalloc``, which sees numpy's buffers) in this
    process."""
    import tracemalloc

    tracemalloc.start()
    start = time.perf_counter()
    try:
        result = func()
    finally:
        wall = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
        tracemalloc.stop()
    return result, wall, peak


def cpu_seconds(func):
    """Process CPU time (all threads) of one call of ``func``."""
    start = time.process_time()
    func()
    return time.process_time() - start


def side_by_side(runs, repeat=3):
    """Time each of ``runs`` (``{name: callable}``) in ``repeat`` interleaved rounds
    in this process, so that load on the machine drifts over all of them alike.

    Returns ``{name: {"wall": best wall s, "cpu": process CPU s of that run,
    "rounds": [wall s of each round]}}`` and ``{name: last result}``.
    """
    timings = {name: {"wall": np.inf, "cpu": np.inf, "rounds": []} for name in runs}
    results = {}
    for _ in range(repeat):
        for name, func in runs.items():
            results[name] = None
            start, start_cpu = time.perf_counter(), time.process_time()
            results[name] = func()
            wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
            entry = timings[name]
            entry["rounds"].append(wall)
            if wall < entry["wall"]:
                entry["wall"], entry["cpu"] = wall, cpu
    return timings, results


class PassCounter:
    """Counts passes over an ``n x d`` matrix on Dask's local schedulers: rows of
    full-width blocks produced, per task family, divided by ``n`` (the largest
    family). Use as a context manager around the computation."""

    def __init__(self, n, d):
        from dask.callbacks import Callback

        self.n, self.d, self.rows = n, d, {}
        self._callback = Callback(posttask=self._posttask)

    def _posttask(self, key, result, dsk, state, worker_id):
        if isinstance(result, np.ndarray) and result.ndim == 2 and result.shape[1] == self.d:
            name = str(key[0] if isinstance(key, tuple) else key).rsplit("-", 1)[0]
            self.rows[name] = self.rows.get(name, 0) + result.shape[0]

    def __enter__(self):
        self._callback.__enter__()
        return self

    def __exit__(self, *exc):
        self._callback.__exit__(*exc)

    @property
    def passes(self):
        return max(self.rows.values(), default=0) / self.n


def relative_error(w, reference):
    """``||w - reference|| / ||reference||`` (Frobenius norms of any shape)."""
    return float(np.linalg.norm(np.ravel(w) - np.ravel(reference))
                 / np.linalg.norm(reference))


# ---------------------------------------------------------------------- set-up
@contextlib.contextmanager
def local_cluster(n_workers=2, memory_limit="auto", **kwargs):
    """A ``distributed.Client`` on a ``LocalCluster`` of ``n_workers`` processes of
    one thread each, listening on 127.0.0.1; closed on exit."""
    from distributed import Client, LocalCluster

    options = dict(n_workers=n_workers, threads_per_worker=1, processes=True,
                   memory_limit=memory_limit, host="127.0.0.1",
                   dashboard_address="127.0.0.1:0")
    options.update(kwargs)
    with LocalCluster(**options) as cluster, Client(cluster) as client:
        yield client


def machine_facts():
    """The machine, its load and the versions that produced a result."""
    import dask

    import dasketch

    facts = {"platform": platform.platform(), "node": platform.node(),
             "cpus": os.cpu_count(), "python": platform.python_version(),
             "numpy": np.__version__, "dask": dask.__version__,
             "dasketch": dasketch.__version__}
    with contextlib.suppress(OSError, AttributeError):
        facts["load_average"] = [round(x, 2) for x in os.getloadavg()]
    with contextlib.suppress(ImportError):
        import psutil

        facts["memory_gib"] = round(psutil.virtual_memory().total / 2 ** 30, 1)
    return facts


def shared_data():
    """The directory of the real data sets (a9a), as tests/conftest.py finds it:
    ``DASKETCH_SHARED_DATA``, else ``../shared/data`` beside the repository; None
    when ``DASKETCH_SHARED_DATA=none``."""
    setting = os.environ.get(SHARED_DATA_ENV, "")
    if setting.lower() == "none":
        return None
    if setting:
        return Path(setting)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


# ---------------------------------------------------------------------- results
def results_dir():
    """``DASKETCH_BENCH_RESULTS`` if set, else ``benchmarks/results``; created."""
    folder = Path(os.environ.get(RESULTS_ENV) or RESULTS)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def result_path(name, quick=False, suffix=".json"):
    """Where the result ``name`` goes (``<name>_quick`` for a quick run)."""
    return results_dir() / f"{name}{'_quick' if quick else ''}{suffix}"


def write_results(name, report, plot=None, quick=False):
    """Write ``report`` to ``<name>.json`` and, with ``plot(report, path)``, its
    figure to ``<name>.png``; returns the JSON path."""
    path = result_path(name, quick)
    path.write_text(json.dumps(report, indent=2) + "\n")
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        plot(report, result_path(name, quick, ".png"))
    print(f"wrote {path}", flush=True)
    return path


def annotated_bars(ax, bars, highlight=()):
    """One bar of seconds per ``{label: (seconds, note)}`` on ``ax``, the note
    written above it; labels in ``highlight`` in colour, the others grey."""
    labels = list(bars)
    seconds = [bars[k][0] for k in labels]
    ax.bar(labels, seconds, color=["C0" if k in highlight else "C7" for k in labels])
    for i, k in enumerate(labels):
        ax.text(i, seconds[i], bars[k][1], ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("seconds")
