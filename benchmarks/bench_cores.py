"""Passes on every core: fits against numpy's time for their passes, the sketch against the read.

Two measurements, each with every core of the machine:

* **Fits in memory.** Weakly regularised ridge and logistic regression by
  ``dual_random_projection`` (``alpha`` = 1e-3 of the mean non-zero eigenvalue
  of ``X X^T``, ``tol = 1e-6``) on dense low-rank-plus-noise data (rank ``r``,
  spectrum ``0.95 ** j``, noise 0.01), Dask's default (threaded) scheduler.
  Beside each fit, numpy's time for the same passes, multithreaded: the
  projection pass's two products, ``X R`` (``R`` of ``m`` columns) and ``X^T
  Z`` for ``Z = [X R, 1, y]`` (``m + 2`` columns, the products with ``X^T`` that
  the projection pass returns beside ``X R``), and ``X^T (X w)`` once for every
  further pass. The ridge fit is also run with ``dasketch.eager`` off (every
  pass a Dask graph of block tasks), with ``dasketch.blas-threads`` at 1, and
  on a Dask array of the same data (12 chunks, ``cache="auto"``). Each fit's
  passes are timed by kind (the rest is the fit's own linear algebra between
  passes), the input's tokenisation and the graph of one pass are counted.
  Peers: scikit-learn's ``Ridge`` (cholesky, lsqr) and ``LogisticRegression``
  (lbfgs, newton-cg) on all cores; relative errors of the coefficients against
  ``Ridge(solver="cholesky")`` and a ``tol=1e-10`` dual random projection.
* **The sketch against the read.** A tall dense zarr store written by
  ``dask.array.to_zarr`` (its default codec), ``dasketch.sketch(path, 32)``
  against ``da.from_zarr(path).sum()`` on a ``LocalCluster`` of 1, 2, 4, ...
  ``os.cpu_count()`` single-threaded worker processes.
* **A cached fit on a cluster** (``--cached``). The ridge fit from a zarr
  store with ``cache=True`` on a ``LocalCluster`` of ``os.cpu_count()``
  single-threaded worker processes against the same fit in memory, and a
  trace of one cached pass (:mod:`benchmarks._cached_cluster`): tasks per
  pass, the slowest worker's compute, the overhead, the client's own
  seconds, transfers between workers.

Every time is the best of ``--repeat`` runs (interleaved where they are
compared), as the machine may be shared. Writes ``benchmarks/results/cores.json``
and ``cores.png`` (``cores_quick`` with ``--quick``). The default sizes are
those of the issue it answers (6,000 x 24,000, m = 320; 2,000,000 x 256);
``--quick`` runs 1,500 x 6,000 (m = 120) and 100,000 x 256 in about two
minutes on two idle cores (three with the cores busy with other work).

Usage: ``python -m benchmarks.bench_cores [--quick] [--n N] [--d D] [--rank R]
[--m M] [--rows ROWS] [--repeat K] [--fits-only] [--cached [--cached-n N]]
[--results STEM]``
"""

import collections
import contextlib
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "benchmarks"

import dasketch
from benchmarks._cached_cluster import cached_fit_on_cluster, plot_cached
from benchmarks._common import (
    local_cluster,
    machine_facts,
    parser,
    relative_error,
    side_by_side,
    write_results,
)
from dasketch.kernels.embeddings import gaussian_rows
from dasketch.linear_model import dual_random_projection
from dasketch.linear_model.dual_projection import solve, solvers

PASS_KINDS = ("projection_pass", "hessian_pass", "evaluate_pass", "growth_pass",
              "recovery_pass")


def low_rank_plus_noise(n, d, rank, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, rank)) * 0.95 ** np.arange(rank)) @ rng.standard_normal(
        (rank, d))
    X += 0.01 * rng.standard_normal((n, d))
    y = X @ rng.standard_normal(d) / np.sqrt(d) + 0.1 * rng.standard_normal(n)
    return X, y


def best(func, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


@contextlib.contextmanager
def pass_timer():
    """Wall seconds of every pass of a fit, by kind (the functions the solvers call)."""
    seconds = collections.defaultdict(float)
    saved = []
    for module in (solve, solvers):
        for name in PASS_KINDS:
            if hasattr(module, name):
                func = getattr(module, name)

                def timed(*args, _func=func, _name=name, **kwargs):
                    start = time.perf_counter()
                    try:
                        return _func(*args, **kwargs)
                    finally:
                        seconds[_name] += time.perf_counter() - start

                saved.append((module, name, func))
                setattr(module, name, timed)
    try:
        yield seconds
    finally:
        for module, name, func in saved:
            setattr(module, name, func)


def numpy_passes(X, m, repeat):
    """The multithreaded numpy ``X R``, ``X^T Z`` (``m + 2`` columns) and ``X^T (X
    w)``, best of ``repeat``."""
    R = gaussian_rows(0, 0, 0, X.shape[1], m)
    w = np.ones(X.shape[1])
    Z = np.hstack([X @ R, np.ones((X.shape[0], 2))])
    return {"X R": best(lambda: X @ R, max(2, repeat // 2)),
            "X^T Z": best(lambda: X.T @ Z, max(2, repeat // 2)),
            "X^T (X w)": best(lambda: X.T @ (X @ w), 2 * repeat)}


def fit_record(fit, repeat):
    """Best wall time of ``fit`` and the passes of that run, timed by kind."""
    record = None
    for _ in range(repeat):
        with pass_timer() as seconds, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            res = fit()
            wall = time.perf_counter() - start
        if record is None or wall < record["seconds"]:
            passes = dict(seconds)
            record = {"seconds": wall, "n_passes": int(res.n_passes),
                      "converged": bool(res.converged),
                      "coef_error_bound": float(np.max(res.coef_error_bound)),
                      "passes_seconds": {k: round(v, 4) for k, v in passes.items()},
                      "between_passes_seconds": wall - sum(passes.values()),
                      "coef": np.ravel(res.coef)}
    return record


def graph_of_one_pass(X, y, alpha, m):
    """Tasks and graphs of a ridge fit whose passes are Dask graphs, and the
    seconds dask spends tokenising ``X`` once."""
    from dask.callbacks import Callback

    class Count(Callback):
        graphs = tasks = 0

        def _start(self, dsk):
            Count.graphs += 1
            Count.tasks += len(dsk)

    with dask.config.set({"dasketch.eager": False}), Count(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dual_random_projection(X, y, alpha=alpha, sketch_size=m, tol=1e-6,
                                     random_state=0, fit_intercept=False)
    start = time.perf_counter()
    dask.base.tokenize(X)
    return {"graphs": Count.graphs, "tasks": Count.tasks, "n_passes": int(res.n_passes),
            "tasks_per_pass": Count.tasks / res.n_passes,
            "tokenize_X_seconds": time.perf_counter() - start}


def fits(args):
    X, y = low_rank_plus_noise(args.n, args.d, args.rank)
    labels = np.sign(y - np.median(y))
    alpha = 1e-3 * float(np.sum(X * X)) / min(X.shape)
    m, repeat = args.m, args.repeat
    print(f"X {X.shape}, rank {args.rank}, m = {m}, alpha = {alpha:.4g}, "
          f"{os.cpu_count()} cores", flush=True)
    limit = numpy_passes(X, m, repeat)
    print(f"numpy: X R {limit['X R']:.3f} s, X^T Z {limit['X^T Z']:.3f} s, "
          f"X^T (X w) {limit['X^T (X w)']:.4f} s", flush=True)
    from sklearn.linear_model import LogisticRegression, Ridge

    reference = Ridge(alpha=alpha, solver="cholesky", fit_intercept=False).fit(X, y).coef_
    params = dict(alpha=alpha, sketch_size=m, tol=1e-6, random_state=0, fit_intercept=False)
    ridge = lambda **kw: dual_random_projection(X, y, **params, **kw)  # noqa: E731
    Xd = da.from_array(X, chunks=(-(-args.n // 12), -1))
    runs = {
        "ridge": (ridge, {}),
        "ridge, dasketch.eager off": (ridge, {"dasketch.eager": False}),
        "ridge, dasketch.blas-threads 1": (ridge, {"dasketch.blas-threads": 1}),
        "ridge, Dask array of 12 chunks": (
            lambda: dual_random_projection(Xd, y, **params), {}),
        "logistic": (lambda: dual_random_projection(X, labels, loss="logistic", **params),
                     {}),
        "logistic, dasketch.blas-threads 1": (
            lambda: dual_random_projection(X, labels, loss="logistic", **params),
            {"dasketch.blas-threads": 1}),
    }
    records = {}
    for name, (fit, config) in runs.items():
        with dask.config.set(config):
            record = fit_record(fit, repeat)
        record["numpy_limit_seconds"] = limit["X R"] + limit["X^T Z"] \
            + (record["n_passes"] - 1) * limit["X^T (X w)"]
        record["over_numpy"] = record["seconds"] / record["numpy_limit_seconds"]
        coef = record.pop("coef")
        record["relative_error"] = relative_error(coef, reference) \
            if name.startswith("ridge") else None
        records[name] = record
        print(f"{name:36s} {record['seconds']:7.3f} s  {record['n_passes']:3d} passes  "
              f"{record['over_numpy']:5.2f}x numpy  passes {record['passes_seconds']}  "
              f"between {record['between_passes_seconds']:.3f} s", flush=True)
    # The reference goes as far as its certificate can go: the worst-case rounding of
    # the gradient's evaluation sets a floor, reported beside the peers' errors.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tight = dual_random_projection(X, labels, loss="logistic", **dict(params, tol=1e-10))
    logistic_reference = tight.coef
    reference_bound = tight.coef_error_bound / np.linalg.norm(tight.coef)
    print(f"logistic reference: certified relative error <= {reference_bound:.2e}", flush=True)
    peers = {}
    for name, make in {
        "Ridge cholesky": lambda: Ridge(alpha=alpha, solver="cholesky", fit_intercept=False),
        "Ridge lsqr": lambda: Ridge(alpha=alpha, solver="lsqr", tol=1e-8,
                                    fit_intercept=False),
        "LogisticRegression lbfgs": lambda: LogisticRegression(
            C=1 / alpha, solver="lbfgs", tol=1e-8, max_iter=2000, fit_intercept=False),
        "LogisticRegression newton-cg": lambda: LogisticRegression(
            C=1 / alpha, solver="newton-cg", tol=1e-8, max_iter=200, fit_intercept=False),
    }.items():
        target = labels if name.startswith("Logistic") else y
        truth = logistic_reference if name.startswith("Logistic") else reference
        seconds = np.inf
        for _ in range(max(1, repeat // 2)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                coef = make().fit(X, target).coef_
                seconds = min(seconds, time.perf_counter() - start)
        peers[name] = {"seconds": seconds, "relative_error": relative_error(coef, truth)}
        print(f"{name:36s} {seconds:7.3f} s  relative error "
              f"{peers[name]['relative_error']:.2e}", flush=True)
    records["logistic"]["relative_error"] = relative_error(
        dual_random_projection(X, labels, loss="logistic", **params).coef, logistic_reference)
    graph = graph_of_one_pass(X, y, alpha, m)
    print(f"graph passes: {graph}", flush=True)
    return {"shape": list(X.shape), "rank": args.rank, "m": m, "alpha": alpha,
            "numpy": limit, "dasketch": records, "scikit-learn": peers, "graph": graph,
            "logistic_reference_relative_bound": reference_bound}


def sketch_against_read(args):
    workers = [1]
    while workers[-1] * 2 <= os.cpu_count():
        workers.append(workers[-1] * 2)
    if workers[-1] != os.cpu_count():
        workers.append(os.cpu_count())
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-cores-") as tmp:
        path = os.path.join(tmp, "X.zarr")
        rng = da.random.default_rng(0)
        chunk = min(25_000, args.rows)
        (rng.standard_normal((args.rows, 256), chunks=(chunk, 256))
         @ da.from_array(np.diag(0.95 ** np.arange(256)))).to_zarr(path)
        X = da.from_zarr(path)
        for count in workers:
            with local_cluster(n_workers=count) as client:
                timings, _ = side_by_side({
                    "read": lambda: X.sum().compute(),
                    "sketch": lambda: dasketch.sketch(path, 32, client=client),
                }, args.repeat)
            rows[count] = {name: t["wall"] for name, t in timings.items()}
            rows[count]["sketch / read"] = rows[count]["sketch"] / rows[count]["read"]
            print(f"{count:3d} workers: read {rows[count]['read']:.3f} s, sketch "
                  f"{rows[count]['sketch']:.3f} s, {rows[count]['sketch / read']:.2f}x",
                  flush=True)
    one = rows[1]
    for row in rows.values():
        row["speedup read"] = one["read"] / row["read"]
        row["speedup sketch"] = one["sketch"] / row["sketch"]
    return {"shape": [args.rows, 256], "chunk_rows": min(25_000, args.rows),
            "sketch_size": 32, "workers": {str(k): v for k, v in rows.items()}}


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    fits_ = report["fits"]["dasketch"]
    names = list(fits_)
    left.barh(names, [fits_[k]["seconds"] for k in names], color="C0", label="dasketch")
    left.barh(names, [fits_[k]["numpy_limit_seconds"] for k in names], color="C7",
              alpha=0.6, label="numpy, the same passes")
    peers = report["fits"]["scikit-learn"]
    left.barh(list(peers), [p["seconds"] for p in peers.values()], color="C1",
              label="scikit-learn")
    left.set_xlabel("seconds")
    left.set_title(f"fits in memory, {report['machine']['cpus']} cores")
    left.legend(fontsize=8)
    if report["sketch"] is None:
        right.set_visible(False)
        fig.savefig(path, dpi=110)
        return
    rows = report["sketch"]["workers"]
    counts = [int(k) for k in rows]
    for name, colour in (("read", "C7"), ("sketch", "C0")):
        right.plot(counts, [rows[str(k)][f"speedup {name}"] for k in counts], "o-",
                   color=colour, label=name)
    right.plot(counts, counts, ":", color="k", label="linear")
    right.set_xlabel("single-threaded workers")
    right.set_ylabel("speed-up over one worker")
    right.set_title("sketch against the read of a zarr store")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    options = parser(__doc__, "1,500 x 6,000 fits, a 100,000 x 256 store: 2-3 min on 2 cores")
    options.add_argument("--n", type=int, default=6000)
    options.add_argument("--d", type=int, default=24000)
    options.add_argument("--rank", type=int, default=40)
    options.add_argument("--m", type=int, default=320)
    options.add_argument("--rows", type=int, default=2_000_000)
    options.add_argument("--repeat", type=int, default=3)
    options.add_argument("--fits-only", action="store_true",
                         help="leave out the sketch against the read")
    options.add_argument("--cached", action="store_true",
                         help="only the cached fit on a cluster against the fit in memory")
    options.add_argument("--cached-n", type=int, default=200_000,
                         help="rows of the cached fit (500 columns, m = 100)")
    options.add_argument("--results", default="cores",
                         help="stem of the JSON and PNG written (default cores; e.g. "
                         "cores_2cores beside a many-core machine's cores.json)")
    args = options.parse_args(argv)
    if args.cached:
        rows = 50_000 if args.quick else args.cached_n
        report = {"machine": machine_facts(), "cached": cached_fit_on_cluster(
            rows, 500, 100, 40, args.repeat, n_workers=os.cpu_count())}
        print(report["cached"], flush=True)
        write_results("cores_cached", report, plot_cached, quick=args.quick)
        return
    if args.quick:
        args.n, args.d, args.rank, args.m, args.rows = 1500, 6000, 20, 120, 100_000
        args.repeat = min(args.repeat, 2)
    report = {"machine": machine_facts(), "fits": fits(args),
              "sketch": None if args.fits_only else sketch_against_read(args)}
    write_results(args.results, report, plot, quick=args.quick)


if __name__ == "__main__":
    main()
