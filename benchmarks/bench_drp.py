"""Dual random projection against scikit-learn's exact solvers, side by side in one run.

Zhang, Mahdavi, Jin, Yang, Zhu (COLT 2013). Low-rank-plus-noise data (dense,
written to a zarr store with :func:`dasketch.write_synthetic`; rank ``r``,
spectrum ``0.95 ** j``, noise 0.01), ``m = 20 r``:

* ridge regression: ``DualRandomProjectionRegressor`` (1 and 4 iterations) from the
  zarr store against ``sklearn.linear_model.Ridge(alpha)`` on the data in memory,
* logistic regression: ``DualRandomProjectionClassifier`` (1 and 4 iterations)
  against ``LogisticRegression(C=1/alpha)`` (lbfgs, tol 1e-8),

with the same objective (see the estimators' docstrings for the mapping).
Reported: wall time (DRP times include reading X from zarr on every pass; the
exact solvers' do not include loading X into memory), the relative recovery
error ``||w - w*|| / ||w*||`` against the exact solution, and the time ratio.

A second, in-memory problem (same generator, smaller) gives the recovery error
against ``m`` and the number of iterations (Theorems 1 and 2 of the paper).

Both sides run on one core: single-threaded BLAS and Dask's synchronous scheduler
(on a shared machine, multi-threaded BLAS spin-waits and is slower than one
thread; one core each keeps the comparison about the algorithms).

Writes ``benchmarks/results/drp.json`` and ``drp.png``.

Usage: ``python benchmarks/bench_drp.py [--quick] [--n N] [--d D]``
"""

import argparse
import json
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

import dask
import matplotlib
from threadpoolctl import threadpool_limits

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402

from dasketch import write_synthetic  # noqa: E402
from dasketch.linear_model import (  # noqa: E402
    DualRandomProjectionClassifier, DualRandomProjectionRegressor)

RESULTS = Path(__file__).resolve().parent / "results"
DECAY, NOISE = 0.95, 0.01


def relative_error(w, reference):
    return float(np.linalg.norm(w - reference) / np.linalg.norm(reference))


def targets(X, seed):
    """Real targets and +-1 labels from a random direction of the signal."""
    rng = np.random.default_rng(seed)
    t = X @ rng.standard_normal(X.shape[1])
    t = t / t.std()
    y = t + 0.1 * rng.standard_normal(t.size)
    labels = np.where(t + 0.3 * rng.standard_normal(t.size) > 0, 1.0, -1.0)
    return y, labels


def timed(func):
    start = time.perf_counter()
    out = func()
    return out, time.perf_counter() - start


def head_to_head(X_path, X, y, labels, alpha, m, block_rows):
    """DRP (1 and 4 iterations, from zarr) against the exact solvers (in memory)."""
    rows = []
    ridge, t_ridge = timed(lambda: Ridge(alpha=alpha).fit(X, y))
    logistic, t_logistic = timed(lambda: LogisticRegression(
        C=1.0 / alpha, tol=1e-8, max_iter=10000).fit(X, labels))
    for task, exact, t_exact, make, target in [
        ("ridge", ridge.coef_, t_ridge, DualRandomProjectionRegressor, y),
        ("logistic", logistic.coef_[0], t_logistic, DualRandomProjectionClassifier, labels),
    ]:
        for n_iter in (1, 4):
            model, t = timed(lambda: make(alpha=alpha, n_components=m, n_iter=n_iter, tol=0,
                                          block_rows=block_rows, random_state=0)
                             .fit(X_path, target))
            rows.append({"task": task, "n_iter": n_iter, "n_components": m,
                         "drp_seconds": t, "exact_seconds": t_exact,
                         "speedup": t_exact / t,
                         "recovery_error": relative_error(model.coef_, exact),
                         "naive_error": relative_error(model.naive_coef_, exact),
                         "history": model.history_})
            print(f"{task:8s} n_iter={n_iter} DRP {t:7.1f}s  exact {t_exact:7.1f}s  "
                  f"speedup {t_exact / t:5.2f}x  error {rows[-1]['recovery_error']:.2e}  "
                  f"naive {rows[-1]['naive_error']:.2f}", flush=True)
    return rows


def error_against_m(n, d, rank, alpha, multiples, iterations, path):
    """Recovery error against m and iterations on an in-memory problem."""
    X = np.asarray(write_synthetic(path, n, d, rank=rank, decay=DECAY, noise=NOISE,
                                   chunk_rows=2048, random_state=1))
    y, _ = targets(X, 1)
    exact = Ridge(alpha=alpha).fit(X, y).coef_
    curves = {}
    for k in multiples:
        errors = []
        for n_iter in range(1, iterations + 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                model = DualRandomProjectionRegressor(alpha=alpha, n_components=k * rank,
                                                      n_iter=n_iter, tol=0,
                                                      random_state=0).fit(X, y)
            errors.append(relative_error(model.coef_, exact))
        curves[str(k * rank)] = errors
        print(f"m = {k * rank:4d} ({k} r): " + " ".join(f"{e:.1e}" for e in errors),
              flush=True)
    return {"n": n, "d": d, "rank": rank, "alpha": alpha, "errors": curves}


def plot(result, path):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    sweep = result["sweep"]
    for m, errors in sweep["errors"].items():
        left.semilogy(range(1, len(errors) + 1), errors, marker="o", label=f"m = {m}")
    left.axhline(1e-2, color="grey", ls=":", lw=1)
    left.set_xlabel("iterations (1 = Algorithm 1)")
    left.set_ylabel("||w - w*|| / ||w*||")
    left.set_title(f"Ridge, rank {sweep['rank']}, n = {sweep['n']}, d = {sweep['d']}")
    left.legend(fontsize=8)
    rows = result["head_to_head"]
    labels = [f"{r['task']}\n{r['n_iter']} it" for r in rows]
    x = np.arange(len(rows))
    right.bar(x - 0.2, [r["drp_seconds"] for r in rows], 0.4, label="DRP (zarr)")
    right.bar(x + 0.2, [r["exact_seconds"] for r in rows], 0.4, label="scikit-learn exact")
    for i, r in enumerate(rows):
        right.annotate(f"{r['speedup']:.1f}x\nerr {r['recovery_error']:.0e}",
                       (i, max(r["drp_seconds"], r["exact_seconds"])), ha="center",
                       va="bottom", fontsize=7)
    right.set_xticks(x, labels)
    right.set_ylabel("seconds")
    cfg = result["config"]
    right.set_title(f"n = {cfg['n']}, d = {cfg['d']}, m = {cfg['n_components']}")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small smoke-test size")
    parser.add_argument("--n", type=int, default=None)
    parser.add_argument("--d", type=int, default=None)
    parser.add_argument("--rank", type=int, default=20)
    args = parser.parse_args()
    n = args.n or (2000 if args.quick else 10000)
    d = args.d or (8000 if args.quick else 40000)
    rank = args.rank
    m = 20 * rank
    # Far above the noise eigenvalues (~ noise^2 (sqrt n + sqrt d)^2) and within the
    # signal's (~ n 0.95^(2j), j < r): the solution is effectively of rank r. The
    # contraction of Algorithm 2 at m = 20 r improves with alpha (see the sweep).
    alpha = 0.5 * n
    block_rows = 1024
    name = "drp_quick" if args.quick else "drp"
    with threadpool_limits(limits=1), dask.config.set(scheduler="synchronous"):
        result = run(n, d, rank, m, alpha, block_rows, args.quick)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    plot(result, RESULTS / f"{name}.png")
    print(f"wrote {RESULTS / (name + '.json')} and {name}.png")


def run(n, d, rank, m, alpha, block_rows, quick):
    with tempfile.TemporaryDirectory(dir=os.environ.get("DASKETCH_BENCH_TMP")) as tmp:
        print(f"writing {n} x {d} to zarr ...", flush=True)
        lazy, t_write = timed(lambda: write_synthetic(
            os.path.join(tmp, "X.zarr"), n, d, rank=rank, decay=DECAY, noise=NOISE,
            chunk_rows=block_rows, random_state=0))
        X, t_load = timed(lambda: np.asarray(lazy))
        y, labels = targets(X, 0)
        print(f"written in {t_write:.1f}s, loaded in {t_load:.1f}s", flush=True)
        rows = head_to_head(os.path.join(tmp, "X.zarr"), X, y, labels, alpha, m, block_rows)
        del X, lazy
        sweep_n, sweep_d = (1000, 4000) if quick else (2000, 10000)
        sweep = error_against_m(sweep_n, sweep_d, rank, 0.5 * sweep_n, (2, 5, 10, 20, 40),
                                6, os.path.join(tmp, "sweep.zarr"))
    return {
        "config": {"n": n, "d": d, "rank": rank, "n_components": m, "alpha": alpha,
                   "decay": DECAY, "noise": NOISE, "block_rows": block_rows,
                   "dtype": "float64", "write_seconds": t_write, "load_seconds": t_load,
                   "scheduler": "dask synchronous, single-threaded BLAS (one core)",
                   "cpus": os.cpu_count(),
                   "machine": platform.platform()},
        "head_to_head": rows,
        "sweep": sweep,
    }


if __name__ == "__main__":
    main()
