"""Dual random projection from zarr against scikit-learn in memory and dask-ml from zarr.

Zhang, Mahdavi, Jin, Yang, Zhu (COLT 2013), with the default solver that keeps
the projection as a preconditioner of the full problem (conjugate gradients for
ridge, Newton-CG for logistic regression), on dense low-rank-plus-noise data
written to a zarr store with :func:`dasketch.write_synthetic` (rank ``r``,
spectrum ``0.95 ** j``, noise 0.01):

* two regimes: weak regularisation, ``alpha`` = 1e-3 of the mean non-zero
  eigenvalue of ``X X^T`` (``||X||_F^2 / min(n, d)``), and strong,
  ``alpha = n / 2`` (above the noise eigenvalues, within the signal's);
* ridge and logistic regression (no intercept: dask-glm penalises it), each
  to 1e-6 relative error of the coefficients;
* dasketch: ``dual_random_projection`` reading the store, with ``cache="auto"``
  (the decoded blocks are kept in memory after the first pass, as the store
  fits) and ``cache=False`` (every pass reads the store), and on the data in
  memory;
* peers: scikit-learn on the data in memory, each of its solvers that suits the
  shape timed and the fastest that reaches 1e-6 kept (``Ridge`` cholesky, lsqr,
  sparse_cg; ``LogisticRegression`` lbfgs, newton-cg); dask-ml's
  ``LogisticRegression`` (dask-glm, lbfgs, ``normalize=False``) reading the same
  store, without and with ``persist`` (the persist's read counted in its time).

Relative errors are against scikit-learn's ``Ridge(solver="cholesky")`` (ridge)
and a ``tol=1e-12`` dual random projection (logistic; scikit-learn's solvers
reaching 1e-6 of it check it). A solver with a tolerance is run
with tolerances 1e-4, 1e-6, ... until it reaches 1e-6 and the time of that run
is reported (dask-ml's ladder runs on the persisted data; the run from the
store uses the tolerance found there).

Passes over X are counted: dasketch reports its own (``n_passes``); dask-ml's
are its graph computations (each lbfgs evaluation is one ``dask.compute`` of the
loss and gradient, one pass); scikit-learn's are its iterations (lsqr: one
product with X and one with X^T each; lbfgs and newton-cg at least one pass
each). The time per pass is compared with a plain ``X.sum()`` of the store
(``dask.array.from_zarr``) and of the array in memory.

Everything runs on one core (single-threaded BLAS, Dask's synchronous
scheduler) on a machine shared with other jobs: seconds are CPU seconds of this
process (wall seconds beside them). Writes ``benchmarks/results/drp.json`` and
``drp.png`` (``drp_quick`` with ``--quick``).

The default size, 3,000 x 12,000 (rank 20, m = 80), is the largest whose run
fits 10 minutes on the 2-core benchmark machine (dask-ml reading the store on
each of its passes takes most of it); the issue's 10,000 x 40,000 is
``--n 10000 --d 40000``. A sweep of error against passes (ridge, the paper's
Algorithm 2 and the default solver, 2,000 x 8,000, m = 20 r) closes the run.

Usage: ``python -m benchmarks.bench_drp [--quick] [--n N] [--d D] [--rank R] [--m M]``
"""

import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from dask.callbacks import Callback
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from dasketch import write_synthetic
from dasketch.linear_model import dual_random_projection

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_drp.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    machine_facts,
    parser,
    relative_error,
    write_results,
)

DECAY, NOISE = 0.95, 0.01
ACCURACY = 1e-6
TOLS = (1e-4, 1e-6, 1e-8, 1e-10, 1e-12)
BLOCK_ROWS = 1024


def targets(X, seed):
    """Real targets and +-1 labels from a random direction of the signal."""
    rng = np.random.default_rng(seed)
    t = X @ rng.standard_normal(X.shape[1])
    t = t / t.std()
    y = t + 0.1 * rng.standard_normal(t.size)
    labels = np.where(t + 0.3 * rng.standard_normal(t.size) > 0, 1.0, -1.0)
    return y, labels


class Clock:
    """Wall and CPU seconds of the last :func:`timed` call."""

    wall = cpu = 0.0


def timed(func):
    start, start_cpu = time.perf_counter(), time.process_time()
    out = func()
    Clock.wall, Clock.cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return out, Clock.cpu


class Computations(Callback):
    """Counts the graphs Dask computes (dask-glm computes one per pass over X)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


def row(regime, task, method, seconds, error, passes, **extra):
    """One result; ``seconds`` is CPU time, wall time beside it."""
    print(f"{regime:6s} {task:8s} {method:44s} cpu {seconds:7.2f}s (wall {Clock.wall:6.2f}s)"
          f"  error {error:.1e}  passes {passes}", flush=True)
    return {"regime": regime, "task": task, "method": method, "seconds": seconds,
            "wall_seconds": Clock.wall, "relative_error": error, "passes": passes, **extra}


def to_accuracy(fit, error):
    """Fit with tolerances ``TOLS`` in turn until the error is within ``ACCURACY``
    (or stops improving: a tenfold smaller tolerance gains less than 10 %);
    ``(model, CPU seconds of that run, tol, error)``."""
    last = np.inf
    for tol in TOLS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model, seconds = timed(lambda tol=tol: fit(tol))
        if error(model) <= ACCURACY or error(model) > 0.9 * last:
            break
        last = error(model)
    return model, seconds, tol, error(model)


def read_passes(path, X):
    """Seconds of one plain ``X.sum()``: of the store and of the array in memory."""
    (_, zarr_sum), (_, memory_sum) = (
        timed(lambda: da.from_zarr(path).sum().compute()), timed(lambda: X.sum()))
    print(f"X.sum(): zarr {zarr_sum:.2f}s, in memory {memory_sum:.3f}s", flush=True)
    return {"zarr": zarr_sum, "memory": memory_sum}


def dasketch_rows(regime, task, path, X, target, reference, m, **params):
    rows = []
    for source, cache, where in ((path, "auto", "zarr, cache='auto'"),
                                 (path, False, "zarr, cache=False"),
                                 (X, "auto", "in memory")):
        res, seconds = timed(lambda source=source, cache=cache: dual_random_projection(
            source, target, sketch_size=m, tol=ACCURACY, block_rows=BLOCK_ROWS,
            random_state=0, cache=cache, **params))
        rows.append(row(regime, task, f"dasketch DRP m={m} ({where})", seconds,
                        relative_error(res.coef, reference), res.n_passes,
                        n_iter=res.n_iter, cached=res.cache.cached,
                        cache_reason=res.cache.reason,
                        certified_bound=float(res.coef_error_bound
                                              / np.linalg.norm(res.coef)),
                        zarr=source is path))
    return rows


def ridge_rows(regime, path, X, y, alpha, m):
    exact, seconds = timed(lambda: Ridge(alpha=alpha, solver="cholesky",
                                         fit_intercept=False).fit(X, y))
    rows = [row(regime, "ridge", "sklearn Ridge cholesky", seconds, 0.0,
                "direct (X X^T)", reference=True, peer="sklearn")]
    for solver in ("lsqr", "sparse_cg"):
        model, seconds, tol, error = to_accuracy(
            lambda tol, solver=solver: Ridge(alpha=alpha, solver=solver, tol=tol,
                                             fit_intercept=False, max_iter=100000).fit(X, y),
            lambda model: relative_error(model.coef_, exact.coef_))
        iterations = model.n_iter_
        rows.append(row(regime, "ridge", f"sklearn Ridge {solver} tol={tol:g}", seconds, error,
                        None if iterations is None else int(np.ravel(iterations)[0]),
                        peer="sklearn"))
    return rows + dasketch_rows(regime, "ridge", path, X, y, exact.coef_, m, alpha=alpha,
                                fit_intercept=False)


def logistic_rows(regime, path, X, labels, alpha, m):
    from dask_ml.linear_model import LogisticRegression as DaskLogisticRegression

    reference = dual_random_projection(X, labels, loss="logistic", alpha=alpha,
                                       sketch_size=m, tol=1e-12, fit_intercept=False,
                                       block_rows=BLOCK_ROWS, random_state=1).coef
    error = lambda model: relative_error(model.coef_, reference)  # noqa: E731
    rows = []
    for solver in ("lbfgs", "newton-cg"):
        model, seconds, tol, err = to_accuracy(
            lambda tol, solver=solver: LogisticRegression(
                C=1.0 / alpha, fit_intercept=False, tol=tol, solver=solver,
                max_iter=100000).fit(X, labels),
            error)
        rows.append(row(regime, "logistic", f"sklearn LogisticRegression {solver} tol={tol:g}",
                        seconds, err, int(model.n_iter_[0]), peer="sklearn"))
    counter = Computations()

    def dask_ml(Xd, tol):
        with counter:
            return DaskLogisticRegression(
                C=1.0 / alpha, fit_intercept=False, solver="lbfgs", tol=tol, max_iter=100000,
                solver_kwargs={"normalize": False}).fit(Xd, (labels > 0).astype(int))

    def persisted(tol):
        counter.count = 0
        return dask_ml(da.from_zarr(path).persist(), tol)

    model, seconds, tol, err = to_accuracy(persisted, error)
    rows.append(row(regime, "logistic", f"dask-ml lbfgs tol={tol:g} (zarr, persisted)",
                    seconds, err, counter.count, peer="dask-ml", zarr=True))
    counter.count = 0
    model, seconds = timed(lambda: dask_ml(da.from_zarr(path), tol))
    rows.append(row(regime, "logistic", f"dask-ml lbfgs tol={tol:g} (zarr)", seconds,
                    error(model), counter.count, peer="dask-ml", zarr=True))
    return rows + dasketch_rows(regime, "logistic", path, X, labels, reference, m,
                                loss="logistic", alpha=alpha, fit_intercept=False)


def speedups(rows, load_seconds):
    """``peer seconds / dasketch-from-zarr seconds`` per regime and task, with the
    issue's goals: weak regime >= 3x dask-ml and >= 1x scikit-learn, strong
    regime >= 1x both. Against scikit-learn two more ratios: with the read of the
    store into memory (``load_seconds``) added to its time, as a user whose data
    is on zarr pays it, and dasketch on the same in-memory array."""
    out = []
    for regime in ("weak", "strong"):
        for task in ("ridge", "logistic"):
            here = [r for r in rows if r["regime"] == regime and r["task"] == task]
            ours = next(r for r in here if r["method"].endswith("(zarr, cache='auto')"))
            sklearn = [r for r in here if r.get("peer") == "sklearn"
                       and r["relative_error"] <= ACCURACY]
            peers = ([min(sklearn, key=lambda r: r["seconds"])] if sklearn else []) + [
                r for r in here if r.get("peer") == "dask-ml"]
            in_memory = next(r for r in here if r["method"].endswith("(in memory)"))
            for peer in peers:
                goal = 3.0 if regime == "weak" and peer["peer"] == "dask-ml" else 1.0
                ratio = peer["seconds"] / ours["seconds"]
                reached = peer["relative_error"] <= ACCURACY
                extra = {}
                if peer["peer"] == "sklearn":
                    extra = {"ratio_with_read": (peer["seconds"] + load_seconds)
                             / ours["seconds"],
                             "ratio_in_memory": peer["seconds"] / in_memory["seconds"]}
                out.append({"regime": regime, "task": task, "peer": peer["method"],
                            "dasketch": ours["method"], "ratio": ratio, "goal": goal,
                            "met": ratio >= goal, "peer_error": peer["relative_error"],
                            "peer_reached_accuracy": reached,
                            "dasketch_error": ours["relative_error"], **extra})
                print(f"{ratio:6.2f}x (goal {goal:g}x, {'met' if ratio >= goal else 'missed'})"
                      f"  {regime}, {task}: {peer['method']} / {ours['method']}"
                      + ("" if reached else f" (the peer stopped at error "
                                            f"{peer['relative_error']:.1e})")
                      + "".join(f"; {k} {v:.2f}x" for k, v in extra.items()), flush=True)
    return out


def per_pass(rows, reads):
    """Seconds per pass over X against a plain ``X.sum()`` of the same source."""
    out = []
    for r in rows:
        if isinstance(r["passes"], int) and r["passes"] > 0 and "zarr" in r["method"]:
            seconds = r["seconds"] / r["passes"]
            out.append({"regime": r["regime"], "task": r["task"], "method": r["method"],
                        "seconds_per_pass": seconds, "x_sum_zarr": reads["zarr"],
                        "ratio_to_zarr_sum": seconds / reads["zarr"],
                        "ratio_to_memory_sum": seconds / reads["memory"]})
    return out


def error_against_passes(n, d, rank, path, rounds=8):
    """Relative error against passes over X for ridge (alpha = n / 2, m = 20 r):
    the paper's Algorithm 2 and the default solver."""
    X = np.asarray(write_synthetic(path, n, d, rank=rank, decay=DECAY, noise=NOISE,
                                   chunk_rows=BLOCK_ROWS, random_state=1))
    y, _ = targets(X, 1)
    alpha = 0.5 * n
    exact = Ridge(alpha=alpha, solver="cholesky").fit(X, y).coef_
    curves = {}
    for solver in ("paper", "cg"):
        points = []
        for t in range(1, rounds + 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                res = dual_random_projection(X, y, alpha=alpha, sketch_size=20 * rank,
                                             solver=solver, max_iter=t, tol=0.0,
                                             random_state=0)
            points.append((res.n_passes, relative_error(res.coef, exact)))
        curves[solver] = points
        print(f"{solver:5s} " + " ".join(f"{p}:{e:.1e}" for p, e in points), flush=True)
    return {"n": n, "d": d, "rank": rank, "alpha": alpha, "n_components": 20 * rank,
            "curves": curves}


def plot(result, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(27, 7), width_ratios=(1, 1, 1, 1, 0.8))
    sweep = result["sweep"]
    for solver, label in (("paper", "Algorithm 2 (paper)"), ("cg", "preconditioned CG")):
        passes, errors = zip(*sweep["curves"][solver])
        axes[-1].semilogy(passes, np.maximum(errors, 1e-17), marker="o", label=label)
    axes[-1].axhline(ACCURACY, color="grey", ls=":", lw=1)
    axes[-1].set_xlabel("passes over X")
    axes[-1].set_ylabel("||w - w*|| / ||w*||")
    axes[-1].set_title(f"ridge, {sweep['n']} x {sweep['d']}, m = {sweep['n_components']}",
                       fontsize=9)
    axes[-1].legend(fontsize=8)
    for ax, (regime, task) in zip(axes, [(g, t) for g in ("weak", "strong")
                                         for t in ("ridge", "logistic")]):
        rows = [r for r in result["rows"] if r["regime"] == regime and r["task"] == task]
        y = np.arange(len(rows))
        colors = ["tab:orange" if r["method"].startswith("dasketch") else "tab:blue"
                  for r in rows]
        ax.barh(y, [r["seconds"] for r in rows], color=colors)
        for i, r in enumerate(rows):
            ax.annotate(f" {r['seconds']:.1f}s, err {r['relative_error']:.0e}, "
                        f"passes {r['passes']}", (r["seconds"], i), va="center", fontsize=6)
        ax.set_yticks(y, [r["method"] for r in rows], fontsize=6)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.9 * max(r["seconds"] for r in rows))
        ax.set_xlabel("CPU seconds (one core)")
        ax.set_title(f"{task}, {regime} regularisation (alpha = {rows[0]['alpha']:.3g})",
                     fontsize=9)
    cfg = result["config"]
    fig.suptitle(f"dual random projection, {cfg['n']:,} x {cfg['d']:,} zarr, rank {cfg['rank']}"
                 f" + noise; X.sum() of the store {result['x_sum']['zarr']:.2f} s", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(n, d, rank, m):
    with tempfile.TemporaryDirectory(dir=os.environ.get("DASKETCH_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "X.zarr")
        print(f"writing {n} x {d} ({n * d * 8 / 2 ** 30:.2f} GiB) to zarr ...", flush=True)
        lazy, t_write = timed(lambda: write_synthetic(
            path, n, d, rank=rank, decay=DECAY, noise=NOISE, chunk_rows=BLOCK_ROWS,
            random_state=0))
        X, t_load = timed(lambda lazy=lazy: np.asarray(lazy))
        y, labels = targets(X, 0)
        reads = read_passes(path, X)
        mean_eigenvalue = float(np.einsum("ij,ij->", X, X)) / min(n, d)
        rows = []
        for regime, alpha in (("weak", 1e-3 * mean_eigenvalue), ("strong", 0.5 * n)):
            print(f"-- {regime} regularisation, alpha = {alpha:.4g}", flush=True)
            part = ridge_rows(regime, path, X, y, alpha, m)
            part += logistic_rows(regime, path, X, labels, alpha, m)
            rows += [dict(r, alpha=alpha) for r in part]
        del X, lazy
        sweep = error_against_passes(min(n, 2000), min(d, 8000), rank,
                                     os.path.join(tmp, "sweep.zarr"))
    return {
        "config": {"n": n, "d": d, "rank": rank, "n_components": m, "decay": DECAY,
                   "noise": NOISE, "block_rows": BLOCK_ROWS, "dtype": "float64",
                   "accuracy": ACCURACY, "write_seconds": t_write, "load_seconds": t_load,
                   "scheduler": "dask synchronous, single-threaded BLAS (one core)",
                   "seconds": "CPU time of this process (wall time in wall_seconds)"},
        "machine": machine_facts(), "x_sum": reads, "rows": rows,
        "speedups": speedups(rows, t_load), "per_pass": per_pass(rows, reads), "sweep": sweep,
    }


def problem_size(doc, argv=None):
    """``(quick, n, d, rank, m)`` from the command line: ``--quick``, ``--n``,
    ``--d``, ``--rank`` and ``--m`` (default 4 r)."""
    options = parser(doc)
    options.add_argument("--n", type=int, default=None)
    options.add_argument("--d", type=int, default=None)
    options.add_argument("--rank", type=int, default=None)
    options.add_argument("--m", type=int, default=None, help="sketch_size (default 4 r)")
    args = options.parse_args(argv)
    rank = args.rank or (5 if args.quick else 20)
    return (args.quick, args.n or (400 if args.quick else 3000),
            args.d or (1600 if args.quick else 12000), rank, args.m or 4 * rank)


def main(argv=None):
    quick, n, d, rank, m = problem_size(__doc__, argv)
    with threadpool_limits(limits=1), dask.config.set(scheduler="synchronous"), \
            warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*fuse_ave_width", category=FutureWarning)
        result = run(n, d, rank, m)
    write_results("drp", result, plot, quick=quick)


if __name__ == "__main__":
    main()
