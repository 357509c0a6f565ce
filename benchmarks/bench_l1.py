"""l1-penalised least squares and logistic regression: dual random projection and scikit-learn.

The data of ``benchmarks/bench_drp.py`` (dense low rank plus noise written to a
zarr store by :func:`dasketch.write_synthetic`, rank ``r``, spectrum
``0.95 ** j``, noise 0.01) and its weak regularisation, ``alpha`` = 1e-3 of the
mean non-zero eigenvalue of ``X X^T``, here the weight of ``||w||_1`` (the
loss summed; an unpenalised intercept):

* dasketch: ``dual_random_projection(penalty="l1")`` (sketch-preconditioned
  proximal Newton, certified by its duality gap) with ``tol=1e-6``, reading the
  store (``cache="auto"``) and on the array in memory;
* peers on the array in memory: ``Lasso`` (coordinate descent,
  ``alpha / n``) and ``LogisticRegression(l1_ratio=1, solver="saga",
  C=1/alpha)``, each run with tolerances 1e-4, 1e-6, ... until it reaches the
  accuracy or its budget of CPU seconds (``--budget``, 600; 20 with
  ``--quick``) is spent, the time of that last run reported. dask-ml
  (``admm``, ``proximal_grad``) is run from the store when it is installed
  (the ``bench`` extra), skipped with a message otherwise.

Accuracy is the relative suboptimality ``(F - F*) / F(0, b0)`` (``F(0, b0)``
the objective of the best constant model), with ``F*`` the lowest objective
any run reached (a ``tol=1e-10`` dasketch fit among them); 1e-6 is asked of
every method, dasketch certifying it by its gap, the peers measured
against ``F*``. Everything runs on one core (single-threaded BLAS, Dask's
synchronous scheduler); seconds are CPU seconds of this process. Writes
``benchmarks/results/l1.json`` and ``l1.png`` (``l1_quick`` with ``--quick``).

Usage: ``python -m benchmarks.bench_l1 [--quick] [--budget SECONDS] [--n N] [--d D]
[--rank R] [--m M]``
"""

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Lasso, LogisticRegression
from threadpoolctl import threadpool_limits

from dasketch import write_synthetic
from dasketch.linear_model import dual_random_projection

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_l1.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, write_results  # noqa: E402
from benchmarks.bench_drp import (  # noqa: E402
    BLOCK_ROWS,
    DECAY,
    NOISE,
    Clock,
    problem_size,
    targets,
    timed,
)

ACCURACY = 1e-6
TOLS = (1e-4, 1e-6, 1e-8, 1e-10)
SKIPPED = []
# dask-glm's iterations (each one pass over the store) per run at most: a run
# at a tight tol would otherwise outlast any budget
DASK_ML_ITERATIONS = 300


def objective(X, target, w, b, alpha, loss):
    """``sum_i l(x_i^T w + b, y_i) + alpha ||w||_1``, written out here."""
    t = X @ w + b
    fit = 0.5 * np.sum((t - target) ** 2) if loss == "squared" \
        else np.logaddexp(0.0, -target * t).sum()
    return float(fit + alpha * np.abs(w).sum())


def peer_fits(loss, alpha, n):
    """``{name: fit(X, target, tol) -> (coef, intercept, iterations)}``."""
    def lasso(X, target, tol):
        model = Lasso(alpha=alpha / n, tol=tol, max_iter=1_000_000).fit(X, target)
        return model.coef_, model.intercept_, int(model.n_iter_)

    def saga(X, target, tol):
        model = LogisticRegression(l1_ratio=1.0, C=1.0 / alpha, solver="saga", tol=tol,
                                   max_iter=1_000_000).fit(X, target)
        return model.coef_[0], model.intercept_[0], int(model.n_iter_[0])

    fits = {"sklearn Lasso (coordinate descent)": lasso} if loss == "squared" \
        else {"sklearn LogisticRegression saga": saga}
    try:
        from dask_ml.linear_model import LinearRegression
        from dask_ml.linear_model import LogisticRegression as DaskLogistic
    except ImportError:
        if not SKIPPED:
            SKIPPED.append("dask-ml is not installed (pip install -e '.[bench]'): "
                           "its admm and proximal_grad rows are skipped")
            print(SKIPPED[0], flush=True)
        return fits
    for solver in ("admm", "proximal_grad"):
        def dask_ml(X, target, tol, solver=solver):
            cls = LinearRegression if loss == "squared" else DaskLogistic
            labels = target if loss == "squared" else (target > 0).astype(int)
            model = cls(penalty="l1", C=1.0 / alpha, solver=solver, tol=tol,
                        max_iter=DASK_ML_ITERATIONS)
            model.fit(X, da.from_array(labels, chunks=X.chunks[0]))
            return np.ravel(model.coef_), float(np.ravel(model.intercept_)[0]), None
        fits[f"dask-ml {solver} (zarr)"] = dask_ml
    return fits


def task_rows(task, loss, path, X, target, alpha, m, budget):
    n = X.shape[0]
    rows = []
    with warnings.catch_warnings():     # the reference may stop at the rounding
        warnings.simplefilter("ignore", ConvergenceWarning)
        best, _ = timed(lambda: dual_random_projection(
            X, target, loss=loss, alpha=alpha, penalty="l1", sketch_size=m, tol=1e-10,
            block_rows=BLOCK_ROWS, random_state=0, max_iter=300))
    reference = objective(X, target, 0 * best.coef, best.naive_intercept, alpha, loss)
    values = {"reference (tol=1e-10)": objective(X, target, best.coef, best.intercept,
                                                 alpha, loss)}
    for source, where in ((path, "zarr, cache='auto'"), (X, "in memory")):
        res, seconds = timed(lambda source=source: dual_random_projection(
            source, target, loss=loss, alpha=alpha, penalty="l1", sketch_size=m,
            tol=ACCURACY, block_rows=BLOCK_ROWS, random_state=0))
        values[f"dasketch proximal Newton m={m} ({where})"] = objective(
            X, target, res.coef, res.intercept, alpha, loss)
        rows.append({"task": task, "method": f"dasketch proximal Newton m={m} ({where})",
                     "seconds": seconds, "wall_seconds": Clock.wall, "passes": res.n_passes,
                     "certified_relative_gap": float(res.optimality_residual),
                     "nonzeros": int(np.count_nonzero(res.coef)), "peer": None})
    for name, fit in peer_fits(loss, alpha, n).items():
        source = da.from_zarr(path) if "zarr" in name else X
        spent = 0.0
        for tol in TOLS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                (coef, intercept, iterations), seconds = timed(
                    lambda fit=fit, tol=tol, source=source: fit(source, target, tol))
            value = objective(X, target, coef, intercept, alpha, loss)
            print(f"  {name} tol={tol:g}: cpu {seconds:.2f}s", flush=True)
            values[name] = min(values.get(name, np.inf), value)
            spent += seconds
            if value - min(values.values()) <= ACCURACY * reference or spent >= budget:
                break
        rows.append({"task": task, "method": f"{name} tol={tol:g}", "seconds": seconds,
                     "wall_seconds": Clock.wall, "passes": iterations, "objective": value,
                     "nonzeros": int(np.count_nonzero(coef)), "peer": name})
    optimum = min(values.values())
    for r in rows:
        value = r.pop("objective", None) if r["peer"] else values[r["method"]]
        r.update(alpha=alpha, relative_suboptimality=(value - optimum) / reference)
        print(f"{task:9s} {r['method']:52s} cpu {r['seconds']:7.2f}s  subopt "
              f"{r['relative_suboptimality']:.1e}  nnz {r['nonzeros']}", flush=True)
    return rows


def ratios(rows):
    """``peer seconds / dasketch seconds`` (zarr and in memory), the goal being at
    least 1 for scikit-learn on the in-memory array."""
    out = []
    for task in sorted({r["task"] for r in rows}):
        here = [r for r in rows if r["task"] == task]
        ours = {w: next(r for r in here if r["method"].endswith(f"({w})"))
                for w in ("zarr, cache='auto'", "in memory")}
        for peer in (r for r in here if r["peer"]):
            entry = {"task": task, "peer": peer["method"],
                     "peer_reached_accuracy": peer["relative_suboptimality"] <= ACCURACY,
                     **{f"ratio_{w.split(',')[0].replace(' ', '_')}": peer["seconds"]
                        / ours[w]["seconds"] for w in ours}}
            out.append(entry)
            print(f"{task}: {peer['method']}: {entry['ratio_in_memory']:.2f}x in memory, "
                  f"{entry['ratio_zarr']:.2f}x from zarr", flush=True)
    return out


def plot(result, path):
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in result["rows"]})
    fig, axes = plt.subplots(1, len(tasks), figsize=(8 * len(tasks), 4))
    for ax, task in zip(np.atleast_1d(axes), tasks):
        rows = [r for r in result["rows"] if r["task"] == task]
        y = np.arange(len(rows))
        ax.barh(y, [r["seconds"] for r in rows],
                color=["tab:blue" if r["peer"] else "tab:orange" for r in rows])
        for i, r in enumerate(rows):
            ax.annotate(f" {r['seconds']:.2f}s, subopt {r['relative_suboptimality']:.0e}",
                        (r["seconds"], i), va="center", fontsize=7)
        ax.set_yticks(y, [r["method"] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.8 * max(r["seconds"] for r in rows))
        ax.set_xlabel("CPU seconds (one core)")
        ax.set_title(f"{task}, alpha = {rows[0]['alpha']:.3g}", fontsize=9)
    cfg = result["config"]
    fig.suptitle(f"l1 penalty, {cfg['n']:,} x {cfg['d']:,}, rank {cfg['rank']} + noise, "
                 f"to relative suboptimality {ACCURACY:g}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(n, d, rank, m, budget):
    with tempfile.TemporaryDirectory(dir=os.environ.get("DASKETCH_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "X.zarr")
        X = np.asarray(write_synthetic(path, n, d, rank=rank, decay=DECAY, noise=NOISE,
                                       chunk_rows=BLOCK_ROWS, random_state=0))
        y, labels = targets(X, 0)
        alpha = 1e-3 * float(np.einsum("ij,ij->", X, X)) / min(n, d)
        rows = task_rows("lasso", "squared", path, X, y, alpha, m, budget)
        rows += task_rows("logistic", "logistic", path, X, labels, alpha, m, budget)
    return {"config": {"n": n, "d": d, "rank": rank, "sketch_size": m, "alpha": alpha,
                       "accuracy": ACCURACY, "block_rows": BLOCK_ROWS,
                       "peer_budget_seconds": budget,
                       "scheduler": "dask synchronous, single-threaded BLAS (one core)"},
            "machine": machine_facts(), "skipped": SKIPPED, "rows": rows,
            "ratios": ratios(rows)}


def main(argv=None):
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--budget", type=float, default=None)
    known, rest = options.parse_known_args(argv)
    quick, n, d, rank, m = problem_size(__doc__, rest)
    budget = known.budget if known.budget is not None else (20.0 if quick else 600.0)
    with threadpool_limits(limits=1), dask.config.set(scheduler="synchronous"):
        result = run(n, d, rank, m, budget)
    write_results("l1", result, plot, quick=quick)


if __name__ == "__main__":
    main()
