"""Dual random projection on small in-memory problems: eager runs, Dask graphs, scikit-learn.

A problem whose ``X`` is one block in memory, with no ``distributed`` client,
runs eagerly (:func:`dasketch._blocks.run_eagerly`): every pass calls its
block function at once instead of building, optimising and scheduling a Dask
graph. This script fits, on one BLAS thread (threadpoolctl) and in interleaved
rounds in this process (best of ``--repeat``), low-rank-plus-noise problems
``n x 4n`` in memory (``n`` from 200 to 1,000; X up to 32 MiB, one block) to a
relative accuracy of 1e-6:

* ridge, ``alpha = n / 2`` (the strong regime of ``bench_drp.py``), against
  scikit-learn's ``Ridge`` with each of its solvers for the shape (cholesky,
  lsqr, sparse_cg; the fastest counts);
* logistic regression at the same ``alpha``, against ``LogisticRegression``
  with lbfgs and newton-cg (``C = 1 / alpha``);

each with dasketch's eager run and with ``dask.config`` ``dasketch.eager``
False (the graph of every pass computed by the synchronous scheduler). It
reports each time, the passes, the relative error against the exact solution
and the ratios scikit-learn / dasketch and graphs / eager, and writes
``results/drp_small.json`` and ``.png``.

Run: ``python -m benchmarks.bench_drp_small [--quick] [--repeat R]``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import dask
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from threadpoolctl import threadpool_limits

from dasketch.linear_model import dual_random_projection

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_drp_small.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    machine_facts,
    relative_error,
    side_by_side,
    sizes_and_repeats,
    write_results,
)

SIZES = (200, 400, 700, 1000)
QUICK_SIZES = (200, 400)
RANK, NOISE, M, ACCURACY = 10, 0.01, 40, 1e-6


def problem(n, seed=0):
    """``n x 4n`` rank-``RANK`` rows plus noise, real and +-1 targets."""
    rng = np.random.default_rng(seed)
    d = 4 * n
    X = rng.standard_normal((n, RANK)) @ rng.standard_normal((RANK, d)) / np.sqrt(RANK) \
        + NOISE * rng.standard_normal((n, d))
    t = X @ rng.standard_normal(d) / np.sqrt(d)
    return X, t + 0.1 * rng.standard_normal(n), np.where(t > 0, 1.0, -1.0)


def _quiet(func):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return func()
    return run


def case(n, repeat):
    X, y, labels = problem(n)
    alpha = 0.5 * n
    exact_ridge = Ridge(alpha=alpha, solver="cholesky", fit_intercept=False).fit(X, y).coef_
    exact_logistic = _quiet(lambda: dual_random_projection(
        X, labels, loss="logistic", alpha=alpha, sketch_size=M, tol=1e-12, random_state=0,
        fit_intercept=False))().coef

    def drp(target, loss, eager):
        def fit():
            with dask.config.set({"dasketch.eager": eager, "scheduler": "synchronous"}):
                return dual_random_projection(X, target, loss=loss, alpha=alpha,
                                              sketch_size=M, tol=ACCURACY, random_state=0,
                                              fit_intercept=False)
        return fit

    runs = {
        "ridge": ({"dasketch eager": drp(y, "squared", True),
                   "dasketch graphs": drp(y, "squared", False),
                   **{f"sklearn Ridge {s}": _quiet(lambda s=s: Ridge(
                       alpha=alpha, solver=s, tol=1e-8, fit_intercept=False).fit(X, y))
                      for s in ("cholesky", "lsqr", "sparse_cg")}}, exact_ridge),
        "logistic": ({"dasketch eager": drp(labels, "logistic", True),
                      "dasketch graphs": drp(labels, "logistic", False),
                      **{f"sklearn LogisticRegression {s}": _quiet(lambda s=s: LogisticRegression(
                          C=1.0 / alpha, solver=s, tol=1e-10, max_iter=10000,
                          fit_intercept=False).fit(X, labels))
                         for s in ("lbfgs", "newton-cg")}}, exact_logistic),
    }
    out = {"n": n, "d": 4 * n, "mib": X.nbytes / 2 ** 20, "alpha": alpha, "tasks": {}}
    for task, (task_runs, exact) in runs.items():
        timings, results = side_by_side(task_runs, repeat)
        rows = {}
        for name, result in results.items():
            coef = np.ravel(getattr(result, "coef_", getattr(result, "coef", None)))
            rows[name] = {"seconds": timings[name]["wall"],
                          "relative_error": relative_error(coef, exact),
                          "passes": getattr(result, "n_passes", None)}
        peers = [name for name in rows if name.startswith("sklearn")
                 and rows[name]["relative_error"] <= 10 * ACCURACY]
        fastest = min(peers, key=lambda name: rows[name]["seconds"])
        eager, graphs = rows["dasketch eager"]["seconds"], rows["dasketch graphs"]["seconds"]
        out["tasks"][task] = {"rows": rows, "fastest_peer": fastest,
                              "peer_over_eager": rows[fastest]["seconds"] / eager,
                              "peer_over_graphs": rows[fastest]["seconds"] / graphs,
                              "graphs_over_eager": graphs / eager}
    return out


def main(argv=None):
    args, sizes = sizes_and_repeats(__doc__, "two sizes, two rounds", SIZES, QUICK_SIZES, argv)
    with threadpool_limits(limits=1):
        cases = [case(n, args.repeat) for n in sizes]
    for c in cases:
        for task, t in c["tasks"].items():
            rows, eager = t["rows"], t["rows"]["dasketch eager"]
            print(f"{c['n']:5d} x {c['d']:5d} {task:8s} eager {eager['seconds'] * 1e3:7.1f} ms "
                  f"({eager['passes']} passes), graphs "
                  f"{rows['dasketch graphs']['seconds'] * 1e3:7.1f} ms, {t['fastest_peer']} "
                  f"{rows[t['fastest_peer']]['seconds'] * 1e3:7.1f} ms: peer / eager "
                  f"{t['peer_over_eager']:.2f}x, peer / graphs {t['peer_over_graphs']:.2f}x",
                  flush=True)
    report = {"machine": machine_facts(), "repeat": args.repeat, "blas_threads": 1,
              "rank": RANK, "noise": NOISE, "n_components": M, "accuracy": ACCURACY,
              "ratios": "peer / dasketch: above 1 dasketch is faster", "cases": cases}
    write_results("drp_small", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    tasks = list(report["cases"][0]["tasks"])
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.8), sharey=True)
    for ax, task in zip(np.atleast_1d(axes), tasks):
        sizes = [f"{c['n']} x {c['d']}" for c in report["cases"]]
        for key, label in (("peer_over_eager", "eager run"),
                           ("peer_over_graphs", "Dask graphs")):
            ax.plot(sizes, [c["tasks"][task][key] for c in report["cases"]], "o-",
                    label=label)
        ax.axhline(1.0, color="grey", ls=":")
        ax.set_title(f"{task}, alpha = n / 2, m = {report['n_components']}", fontsize=9)
        ax.set_xlabel("X in memory (one block)")
    np.atleast_1d(axes)[0].set_ylabel("fastest scikit-learn / dasketch (time)")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
