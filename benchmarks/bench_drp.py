"""Dual random projection against scikit-learn and dask-ml, side by side in one run.

Zhang, Mahdavi, Jin, Yang, Zhu (COLT 2013), with the default solver that keeps
the projection as a preconditioner of the full problem (conjugate gradients for
ridge, Newton-CG for logistic regression). Low-rank-plus-noise data (dense,
written to a zarr store with :func:`dasketch.write_synthetic`; rank ``r``,
spectrum ``0.95 ** j``, noise 0.01):

* ridge to 1e-6 relative error: ``dual_random_projection`` against scikit-learn's
  ``Ridge`` on the data in memory (``cholesky``, the ``auto`` choice for dense data,
  and ``lsqr``; the fastest that reaches 1e-6 is the reference),
* logistic regression to 1e-4 relative error (no intercept, the one objective
  all three share: dask-glm penalises the intercept): against
  ``LogisticRegression(C=1/alpha)`` (lbfgs) in memory and dask-ml's
  ``LogisticRegression`` (dask-glm, lbfgs, ``normalize=False``),
* in two regimes: strong regularisation (``alpha = n / 2``, well conditioned; the
  setting where Algorithm 2 contracts at ``m = 20 r``), with dual random
  projection and dask-ml also reading the zarr store on every pass; and weak
  (``alpha`` = 1e-3 of the mean non-zero eigenvalue of ``X^T X``, as in the tests;
  ill-conditioned), everything in memory (dask-ml on a Dask array of the
  in-memory data),
* error against passes over X for the paper's Algorithm 2 and the new solver on
  a smaller problem.

Passes over X are counted, not assumed: a Dask callback adds up the rows of every
full-width block produced (zarr reads, and dask-glm's sweeps over the data it
keeps in memory); scikit-learn's are its lbfgs iterations (at least one pass
each). Relative errors are against scikit-learn's ``cholesky`` (ridge) and a
``tol=1e-12`` dual random projection fit (logistic), which scikit-learn's
tight-tolerance solution is checked to agree with.

All sides run on one core: single-threaded BLAS and Dask's synchronous
scheduler (the machine is shared; one core each keeps the comparison about the
algorithms). Writes ``benchmarks/results/drp.json`` and ``drp.png`` (``drp_quick``
with ``--quick``).

Usage: ``python -m benchmarks.bench_drp [--quick] [--n N] [--d D] [--rank R]``
"""

import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import matplotlib
from threadpoolctl import threadpool_limits

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402

from dasketch import write_synthetic  # noqa: E402
from dasketch.linear_model import dual_random_projection  # noqa: E402

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_drp.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import PassCounter, parser, write_results  # noqa: E402

DECAY, NOISE = 0.95, 0.01


def relative_error(w, reference):
    return float(np.linalg.norm(np.ravel(w) - np.ravel(reference))
                 / np.linalg.norm(reference))


def targets(X, seed):
    """Real targets and +-1 labels from a random direction of the signal."""
    rng = np.random.default_rng(seed)
    t = X @ rng.standard_normal(X.shape[1])
    t = t / t.std()
    y = t + 0.1 * rng.standard_normal(t.size)
    labels = np.where(t + 0.3 * rng.standard_normal(t.size) > 0, 1.0, -1.0)
    return y, labels


class Clock:
    """Wall and CPU seconds of the last ``timed`` call. Everything runs in this
    process on one thread (synchronous Dask scheduler, one BLAS thread), so CPU
    time is the work done, robust to a machine shared with other jobs; ratios
    are taken on it."""

    wall = cpu = 0.0


def timed(func, counter=None):
    start, start_cpu = time.perf_counter(), time.process_time()
    if counter is None:
        out = func()
    else:
        with counter:
            out = func()
    Clock.wall, Clock.cpu = time.perf_counter() - start, time.process_time() - start_cpu
    return out, Clock.cpu


def row(task, method, seconds, error, passes, **extra):
    """One result; ``seconds`` is CPU time (see :class:`Clock`), wall time beside it."""
    print(f"{task:8s} {method:48s} cpu {seconds:7.1f}s (wall {Clock.wall:6.1f}s)  "
          f"error {error:.1e}  passes {passes}", flush=True)
    return {"task": task, "method": method, "seconds": seconds, "wall_seconds": Clock.wall,
            "relative_error": error, "passes": passes, **extra}


def to_accuracy(fit, error, accuracy, tols=(1e-6, 1e-8, 1e-10, 1e-12)):
    """Fit with the loosest tolerance whose solution is within ``accuracy``; returns
    the model, its CPU seconds, the tolerance and its error."""
    for tol in tols:
        model, seconds = timed(lambda: fit(tol))
        if error(model) <= accuracy:
            break
    return model, seconds, tol, error(model)


def drp(path, target, n, d, **params):
    counter = PassCounter(n, d)
    res, seconds = timed(lambda: dual_random_projection(path, target, **params), counter)
    return res, seconds, counter.passes


def ridge_rows(path, X, y, alpha, rank, block_rows, from_zarr):
    n, d = X.shape
    rows = []
    exact, t_chol = timed(lambda: Ridge(alpha=alpha, solver="cholesky").fit(X, y))
    rows.append(row("ridge", "sklearn Ridge cholesky", t_chol, 0.0, "direct (X X^T)"))
    lsqr, t_lsqr = timed(lambda: Ridge(alpha=alpha, solver="lsqr", tol=1e-10).fit(X, y))
    rows.append(row("ridge", "sklearn Ridge lsqr", t_lsqr,
                    relative_error(lsqr.coef_, exact.coef_), int(np.ravel(lsqr.n_iter_)[0]),
                    note="passes: lsqr iterations, one product with X and X^T each"))
    runs = [(4 * rank, X, "in memory"), (20 * rank, X, "in memory")]
    if from_zarr:
        runs.insert(0, (4 * rank, path, "zarr"))
    for m, source, where in runs:
        res, t, passes = drp(source, y, n, d, alpha=alpha, n_components=m, tol=1e-8,
                             block_rows=block_rows, random_state=0)
        rows.append(row("ridge", f"DRP cg, m = {m} ({where})", t,
                        relative_error(res.coef, exact.coef_), passes or res.n_passes,
                        n_passes_reported=res.n_passes, n_iter=res.n_iter,
                        optimality_residual=res.optimality_residual))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res, t, passes = drp(X, y, n, d, alpha=alpha, n_components=20 * rank,
                             solver="paper", max_iter=4, tol=0.0, block_rows=block_rows,
                             random_state=0)
    rows.append(row("ridge", f"DRP paper, 4 rounds, m = {20 * rank} (in memory)", t,
                    relative_error(res.coef, exact.coef_), passes or res.n_passes,
                    optimality_residual=res.optimality_residual))
    return rows


def logistic_rows(path, X, labels, alpha, rank, block_rows, from_zarr):
    n, d = X.shape
    rows = []
    reference = dual_random_projection(X, labels, loss="logistic", alpha=alpha,
                                       n_components=20 * rank, tol=1e-12,
                                       fit_intercept=False, block_rows=block_rows,
                                       random_state=1).coef
    lr, t, tol, error = to_accuracy(
        lambda tol: LogisticRegression(C=1.0 / alpha, fit_intercept=False, tol=tol,
                                       max_iter=100000).fit(X, labels),
        lambda model: relative_error(model.coef_, reference), 1e-4)
    rows.append(row("logistic", f"sklearn LogisticRegression lbfgs tol={tol:g}", t, error,
                    int(lr.n_iter_[0]), note="passes: lbfgs iterations (>= 1 pass each)"))
    from dask_ml.linear_model import LogisticRegression as DaskLogisticRegression

    # dask-ml reads the zarr store, or (in-memory comparisons) a persisted Dask array.
    Xd = da.from_zarr(path) if from_zarr else da.from_array(X, chunks=(block_rows, d))
    counter = PassCounter(n, d)

    def fit_daskml(tol):
        counter.rows.clear()
        with counter:
            return DaskLogisticRegression(
                C=1.0 / alpha, fit_intercept=False, solver="lbfgs", tol=tol, max_iter=100000,
                solver_kwargs={"normalize": False}).fit(Xd, (labels > 0).astype(int))

    dml, t, tol, error = to_accuracy(fit_daskml,
                                     lambda model: relative_error(model.coef_, reference), 1e-4)
    where = "zarr" if from_zarr else "in memory"
    rows.append(row("logistic", f"dask-ml LogisticRegression lbfgs tol={tol:g} ({where})",
                    t, error, counter.passes if from_zarr else "n/a (in-memory chunks)"))
    runs = [(4 * rank, X, "in memory")]
    if from_zarr:
        runs.insert(0, (4 * rank, path, "zarr"))
    for m, source, where in runs:
        res, t, passes = drp(source, labels, n, d, loss="logistic", alpha=alpha,
                             n_components=m, tol=1e-6, fit_intercept=False,
                             block_rows=block_rows, random_state=0)
        passes = passes or res.n_passes
        rows.append(row("logistic", f"DRP Newton-CG, m = {m} ({where})", t,
                        relative_error(res.coef, reference), passes,
                        n_passes_reported=res.n_passes, n_iter=res.n_iter,
                        optimality_residual=res.optimality_residual))
    return rows


def error_against_passes(n, d, rank, alpha, path, rounds):
    """Relative error against passes over X: Algorithm 2 and the new solver."""
    X = np.asarray(write_synthetic(path, n, d, rank=rank, decay=DECAY, noise=NOISE,
                                   chunk_rows=2048, random_state=1))
    y, labels = targets(X, 1)
    exact = Ridge(alpha=alpha, solver="cholesky").fit(X, y).coef_
    curves = {}
    for solver in ("paper", "cg"):
        points = []
        for t in range(1, rounds + 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                res = dual_random_projection(X, y, alpha=alpha, n_components=20 * rank,
                                             solver=solver, max_iter=t, tol=0.0,
                                             random_state=0)
            points.append((res.n_passes, relative_error(res.coef, exact)))
        curves[solver] = points
        print(f"{solver:5s} " + " ".join(f"{p}:{e:.1e}" for p, e in points), flush=True)
    return {"n": n, "d": d, "rank": rank, "alpha": alpha, "n_components": 20 * rank,
            "curves": curves}


def plot(result, path):
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 7), width_ratios=(1, 1.4))
    sweep = result["sweep"]
    names = {"paper": "Algorithm 2 (paper)", "cg": "preconditioned CG (default)"}
    for solver, points in sweep["curves"].items():
        passes, errors = zip(*points)
        left.semilogy(passes, np.maximum(errors, 1e-17), marker="o", label=names[solver])
    left.axhline(1e-6, color="grey", ls=":", lw=1)
    left.set_xlabel("passes over X (projection included)")
    left.set_ylabel("||w - w*|| / ||w*||")
    left.set_title(f"Ridge, rank {sweep['rank']} + noise, n = {sweep['n']}, d = {sweep['d']}, "
                   f"m = {sweep['n_components']}", fontsize=9)
    left.legend(fontsize=8)
    rows = result["rows"]
    x = np.arange(len(rows))
    colors = ["tab:orange" if r["method"].startswith("DRP") else "tab:blue" for r in rows]
    right.barh(x, [r["seconds"] for r in rows], color=colors)
    for i, r in enumerate(rows):
        passes = r["passes"] if isinstance(r["passes"], str) else round(r["passes"], 1)
        right.annotate(f" {r['seconds']:.1f}s, err {r['relative_error']:.0e}, passes {passes}",
                       (r["seconds"], i), va="center", fontsize=7)
    right.set_yticks(x, [f"{r['regime']} {r['task']}: {r['method']}" for r in rows], fontsize=6)
    right.invert_yaxis()
    right.set_xlabel("CPU seconds (one core)")
    cfg = result["config"]
    right.set_title(f"n = {cfg['n']}, d = {cfg['d']}, rank {cfg['rank']}", fontsize=9)
    right.set_xlim(0, 1.8 * max(r["seconds"] for r in rows))
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--n", type=int, default=None)
    options.add_argument("--d", type=int, default=None)
    options.add_argument("--rank", type=int, default=None)
    args = options.parse_args(argv)
    n = args.n or (400 if args.quick else 10000)
    d = args.d or (1600 if args.quick else 40000)
    rank = args.rank or (5 if args.quick else 20)
    with threadpool_limits(limits=1), dask.config.set(scheduler="synchronous"):
        result = run(n, d, rank, args.quick)
    write_results("drp", result, plot, quick=args.quick)


def run(n, d, rank, quick):
    block_rows = 1024
    with tempfile.TemporaryDirectory(dir=os.environ.get("DASKETCH_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "X.zarr")
        print(f"writing {n} x {d} to zarr ...", flush=True)
        lazy, t_write = timed(lambda: write_synthetic(
            path, n, d, rank=rank, decay=DECAY, noise=NOISE, chunk_rows=block_rows,
            random_state=0))
        X, t_load = timed(lambda: np.asarray(lazy))
        y, labels = targets(X, 0)
        print(f"written in {t_write:.1f}s, loaded in {t_load:.1f}s", flush=True)
        mean_eigenvalue = float(np.sum(X ** 2)) / rank
        rows = []
        # Strong: far above the noise eigenvalues (~ noise^2 (sqrt n + sqrt d)^2) and within
        # the signal's (~ n 0.95^(2j), j < r), the setting where Algorithm 2 contracts
        # at m = 20 r and Krylov solvers need few iterations. Weak: 1e-3 of the mean
        # non-zero eigenvalue of X^T X, as in the tests; ill-conditioned.
        # The zarr runs (every pass re-reads the store) only in the first regime: on a
        # loaded machine they dominate the run time.
        for regime, alpha, from_zarr in (("strong", 0.5 * n, True),
                                         ("weak", 1e-3 * mean_eigenvalue, False)):
            print(f"-- {regime} regularisation, alpha = {alpha:.4g}", flush=True)
            part = ridge_rows(path, X, y, alpha, rank, block_rows, from_zarr)
            part += logistic_rows(path, X, labels, alpha, rank, block_rows, from_zarr)
            rows += [dict(r, regime=regime, alpha=alpha) for r in part]
        del X, lazy
        sweep_n, sweep_d = (400, 1600) if quick else (2000, 8000)
        sweep = error_against_passes(sweep_n, sweep_d, rank, 0.5 * sweep_n,
                                     os.path.join(tmp, "sweep.zarr"), 8)
    ratios = {}
    for regime in ("strong", "weak"):
        for task, accuracy in (("ridge", 1e-6), ("logistic", 1e-4)):
            here = [r for r in rows if r["task"] == task and r["regime"] == regime]
            peers = [r for r in here if not r["method"].startswith("DRP")]
            # The fastest scikit-learn solver that reaches the accuracy is the reference.
            sklearn = [r for r in peers if r["method"].startswith("sklearn")
                       and r["relative_error"] <= accuracy]
            if sklearn:
                peers = [min(sklearn, key=lambda r: r["seconds"])] + [
                    r for r in peers if not r["method"].startswith("sklearn")]
            ours = [r for r in here if r["method"].startswith("DRP")
                    and "paper" not in r["method"]]
            for peer in peers:
                for mine in ours:
                    ratios[f"{regime}, {task}: {peer['method']} / {mine['method']}"] = \
                        peer["seconds"] / mine["seconds"]
    for key, value in ratios.items():
        print(f"{value:6.2f}x  {key}")
    return {
        "config": {"n": n, "d": d, "rank": rank, "decay": DECAY,
                   "noise": NOISE, "block_rows": block_rows, "dtype": "float64",
                   "write_seconds": t_write, "load_seconds": t_load,
                   "scheduler": "dask synchronous, single-threaded BLAS (one core)",
                   "seconds": "CPU time of this process (wall time in wall_seconds)",
                   "cpus": os.cpu_count(), "machine": platform.platform(),
                   "loaded_machine": "shared with other developers' jobs"},
        "rows": rows, "speedups": ratios, "sweep": sweep,
    }


if __name__ == "__main__":
    main()
