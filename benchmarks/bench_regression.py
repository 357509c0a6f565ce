"""pwSGD and sketch-preconditioned LSQR against their peers, in one run.

1. l2: A (2,000,000 x 100, cond 1e6, heavy-leverage rows) on zarr; PWSGDRegressor
   (p = 2) against scikit-learn SGDRegressor on the same data in memory: time to
   relative objective error 1e-1, 1e-2, 1e-3 (exact objective of the recorded
   iterates; reference by numpy.linalg.lstsq).
2. l1: the same kind of problem with Laplace noise, small enough for
   linprog/HiGHS (the reference and a peer); PWSGDRegressor (p = 1) against
   SGDRegressor(loss="epsilon_insensitive", epsilon=0) (the l1 loss).
   The passes over that store (``S [A b]``, leverage, ``A x``, ``A^T r``, the row
   gather), each against a plain ``dask.array.from_zarr(path).sum()``.
3. Full accuracy: A (cond 1e6) in memory: sketch_lstsq, numpy.linalg.lstsq and
   dask.array.linalg.lstsq (TSQR), time and relative error of x against
   numpy.linalg.lstsq. Default 100,000 x 500 (the aspect ratio n/d = 200 of
   200,000 x 1,000, which needs about 8x longer for the peers: pass
   ``--lstsq-shape 200000 1000``).

Writes benchmarks/results/regression.json and regression.png.
Run: ``python -m benchmarks.bench_regression [--quick]``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import dask
import dask.array as da
import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import SGDRegressor  # noqa: E402

from dasketch.datasets import ill_conditioned_regression, l1_regression_linprog  # noqa: E402
from dasketch.linear_model import PWSGDRegressor, sketch_lstsq  # noqa: E402

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_regression.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    annotated_bars,
    best_time,
    machine_facts,
    parser,
    relative_error,
    write_results,
)

LEVELS = (1e-1, 1e-2, 1e-3)


def objective(A, b, x, p):
    r = A @ x - b
    return float(np.sum(np.abs(r) ** p))


def time_to_levels(times, errors):
    """First time at which the relative error is at or below each level (None if never)."""
    out = {}
    for level in LEVELS:
        hit = [t for t, e in zip(times, errors) if np.isfinite(e) and e <= level]
        out[f"{level:g}"] = hit[0] if hit else None
    return out


def run_pwsgd(X, A, b, p, f_opt, n_iter, seed):
    model = PWSGDRegressor(p=p, fit_intercept=False, n_iter=n_iter, random_state=seed)
    start = time.perf_counter()
    model.fit(X, b)
    wall = time.perf_counter() - start
    errors = [(objective(A, b, x, p) - f_opt) / f_opt for x in model.coef_history_]
    times = [float(t) for t in model.history_times_]
    return dict(times=times, errors=errors, fit_seconds=wall, n_iter=model.n_iter_,
                condition_number_estimate=model.condition_number_estimate_,
                time_to=time_to_levels(times, errors))


def run_sgd(A, b, p, f_opt, budget_s, seed, slices=8, **params):
    """SGDRegressor by partial_fit over slices of a shuffled copy (several slices per
    epoch, for a finer time axis); the clock stops while the objective is measured."""
    loss = dict(loss="squared_error") if p == 2 else dict(loss="epsilon_insensitive",
                                                           epsilon=0.0)
    model = SGDRegressor(penalty=None, fit_intercept=False, random_state=seed, **loss,
                         **params)
    rng = np.random.default_rng(seed)
    order = rng.permutation(A.shape[0])
    A_shuf, b_shuf = A[order], b[order]
    bounds = np.linspace(0, A.shape[0], slices + 1).astype(int)
    elapsed, times, errors, epochs = 0.0, [], [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        while elapsed < budget_s:
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                start = time.perf_counter()
                model.partial_fit(A_shuf[lo:hi], b_shuf[lo:hi])
                elapsed += time.perf_counter() - start
                x = model.coef_
                err = (objective(A, b, x, p) - f_opt) / f_opt if np.all(np.isfinite(x)) \
                    else float("inf")
                times.append(elapsed)
                errors.append(err if np.isfinite(err) else float("inf"))
            epochs += 1
            if not np.isfinite(errors[-1]) or errors[-1] <= LEVELS[-1]:
                break
    del A_shuf, b_shuf
    return dict(times=times, errors=errors, epochs=epochs, params=params,
                time_to=time_to_levels(times, errors))


def ratio(a, b):
    """How many times sooner ``a`` reaches a level than ``b`` (inf if b never does)."""
    if a is None:
        return None
    if b is None:
        return float("inf")
    return b / a


def bench_passes(path, b, seed, repeat=3):
    """Best seconds of each blocked pass of pwSGD and sketch_lstsq over the zarr
    store (each task reads its own rows), and as a multiple of a plain
    ``dask.array`` sum of the store."""
    from dasketch._blocks import as_row_blocks, compute, gather_rows, matvec, rmatvec
    from dasketch.linear_model import leverage_scores
    from dasketch.linear_model.preconditioning import precondition_blocks

    blocks = as_row_blocks(path)
    n, d = blocks.shape
    precond = precondition_blocks(blocks, b, random_state=seed)
    drawn = np.unique(np.random.default_rng(seed).integers(0, n, 20_000))
    passes = {
        "X.sum()": lambda: da.from_zarr(path).sum().compute(),
        "S [A b]": lambda: precondition_blocks(blocks, b, random_state=seed),
        "leverage": lambda: leverage_scores(blocks, precond),
        "A x": lambda: compute(matvec(blocks, np.ones(d))),
        "A^T r": lambda: compute(rmatvec(blocks, b)),
        "row gather (20,000 draws)": lambda: gather_rows(blocks, drawn),
    }
    seconds = {name: best_time(run, repeat)[0] for name, run in passes.items()}
    base = seconds["X.sum()"]
    print("passes over the store (x X.sum()): " + ", ".join(
        f"{name} {t:.3f} s ({t / base:.2f}x)" for name, t in seconds.items()), flush=True)
    return dict(seconds=seconds, relative_to_sum={k: t / base for k, t in seconds.items()})


def bench_l2(n, d, tmp, seed, budget_s, n_iter):
    A, b, _ = ill_conditioned_regression(n, d, condition_number=1e6, random_state=seed)
    path = os.path.join(tmp, "A.zarr")
    da.to_zarr(da.from_array(A, chunks=(32768, d)), path)
    start = time.perf_counter()
    x_opt = np.linalg.lstsq(A, b, rcond=None)[0]
    lstsq_s = time.perf_counter() - start
    f_opt = objective(A, b, x_opt, 2)
    pw = run_pwsgd(path, A, b, 2, f_opt, n_iter, seed)
    print(f"l2 pwSGD: {pw['time_to']} (fit {pw['fit_seconds']:.1f} s)", flush=True)
    passes = bench_passes(path, b, seed)
    peers = {}
    for name, params in (("sgd_default", {}),
                         ("sgd_eta0_1e-4", dict(eta0=1e-4))):
        peers[name] = run_sgd(A, b, 2, f_opt, budget_s, seed, **params)
        print(f"l2 {name}: {peers[name]['time_to']} "
              f"(final error {peers[name]['errors'][-1]:.3g})", flush=True)
    best = {lv: min((r["time_to"][lv] for r in peers.values()
                     if r["time_to"][lv] is not None), default=None)
            for lv in pw["time_to"]}
    return dict(n=n, d=d, storage="zarr (pwSGD); in memory (SGDRegressor)",
                numpy_lstsq_seconds=lstsq_s, pwsgd=pw, sgd=peers, passes=passes,
                speedup_vs_best_sgd={lv: ratio(pw["time_to"][lv], best[lv]) for lv in best})


def bench_l1(n, d, seed, budget_s, n_iter):
    A, b, _ = ill_conditioned_regression(n, d, condition_number=1e6, noise="laplace",
                                         random_state=seed + 1)
    start = time.perf_counter()
    x_opt = l1_regression_linprog(A, b)
    linprog_s = time.perf_counter() - start
    f_opt = objective(A, b, x_opt, 1)
    pw = run_pwsgd(A, A, b, 1, f_opt, n_iter, seed)
    print(f"l1 pwSGD: {pw['time_to']}; linprog {linprog_s:.1f} s", flush=True)
    peers = {}
    for name, params in (("sgd_default", {}), ("sgd_eta0_1e-4", dict(eta0=1e-4))):
        peers[name] = run_sgd(A, b, 1, f_opt, budget_s, seed, slices=4, **params)
        print(f"l1 {name}: {peers[name]['time_to']} "
              f"(final error {peers[name]['errors'][-1]:.3g})", flush=True)
    best = {lv: min((r["time_to"][lv] for r in peers.values()
                     if r["time_to"][lv] is not None), default=None)
            for lv in pw["time_to"]}
    return dict(n=n, d=d, linprog_highs_seconds=linprog_s, pwsgd=pw, sgd=peers,
                speedup_vs_best_sgd={lv: ratio(pw["time_to"][lv], best[lv]) for lv in best},
                speedup_vs_linprog={lv: ratio(pw["time_to"][lv], linprog_s)
                                    for lv in pw["time_to"]})


def bench_lstsq(n, d, seed):
    A, b, _ = ill_conditioned_regression(n, d, condition_number=1e6, random_state=seed + 2)
    out = {}
    start = time.perf_counter()
    x_np = np.linalg.lstsq(A, b, rcond=None)[0]
    out["numpy_lstsq"] = dict(seconds=time.perf_counter() - start, rel_error=0.0)
    print(f"lstsq numpy: {out['numpy_lstsq']['seconds']:.1f} s", flush=True)

    start = time.perf_counter()
    res = sketch_lstsq(A, b, random_state=seed)
    out["sketch_lstsq"] = dict(seconds=time.perf_counter() - start,
                               rel_error=relative_error(res.x, x_np), n_iter=res.n_iter,
                               condition_number_estimate=res.condition_number_estimate)
    print(f"lstsq sketch: {out['sketch_lstsq']}", flush=True)
    start = time.perf_counter()
    Ad = da.from_array(A, chunks=(max(n // 16, d), d))
    bd = da.from_array(b, chunks=(Ad.chunks[0],))
    x_tsqr = da.linalg.lstsq(Ad, bd)[0].compute()
    out["dask_tsqr_lstsq"] = dict(seconds=time.perf_counter() - start,
                                  rel_error=relative_error(x_tsqr, x_np))
    print(f"lstsq dask TSQR: {out['dask_tsqr_lstsq']}", flush=True)
    s = out["sketch_lstsq"]["seconds"]
    return dict(n=n, d=d, solvers=out,
                speedup_vs_numpy=out["numpy_lstsq"]["seconds"] / s,
                speedup_vs_dask_tsqr=out["dask_tsqr_lstsq"]["seconds"] / s,
                reference="numpy.linalg.lstsq (gelsd)")


def plot(results, path):
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8))
    for ax, key, title in ((axes[0], "l2", "l2 regression"), (axes[1], "l1", "l1 regression")):
        r = results[key]
        pw = r["pwsgd"]
        ax.loglog(pw["times"], np.maximum(pw["errors"], 1e-12), "-", lw=2,
                  label=f"PWSGDRegressor (p={1 if key == 'l1' else 2})")
        for name, run in r["sgd"].items():
            errs = np.minimum(np.maximum(run["errors"], 1e-12), 1e12)
            ax.loglog(run["times"], errs, "--", label=f"SGDRegressor ({name[4:]})")
        if key == "l1":
            ax.axvline(r["linprog_highs_seconds"], color="k", ls=":", label="linprog HiGHS")
        for level in LEVELS:
            ax.axhline(level, color="grey", lw=0.5)
        ax.set_xlabel("seconds")
        ax.set_ylabel("(f(x) - f*) / f*")
        ax.set_title(f"{title}: {r['n']:,} x {r['d']}, cond 1e6")
        ax.legend(fontsize=8)
    r = results["lstsq"]["solvers"]
    annotated_bars(axes[2], {k: (v["seconds"], f"{v['seconds']:.1f} s\nerr {v['rel_error']:.0e}")
                             for k, v in r.items()}, highlight=("sketch_lstsq",))
    axes[2].set_title(f"least squares to 1e-8: {results['lstsq']['n']:,} x "
                      f"{results['lstsq']['d']:,}, cond 1e6")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    options = parser(__doc__, "small smoke-test sizes")
    options.add_argument("--seed", type=int, default=0)
    options.add_argument("--lstsq-shape", type=int, nargs=2, metavar=("N", "D"),
                         help="shape of the least-squares problem (default 100000 500)")
    args = options.parse_args(argv)
    if args.quick:
        sizes = dict(l2=(100_000, 50), l1=(10_000, 10), lstsq=(20_000, 200))
        budget, n_iter2, n_iter1 = 10.0, 300_000, 100_000
    else:
        sizes = dict(l2=(2_000_000, 100), l1=(30_000, 20), lstsq=(100_000, 500))
        budget, n_iter2, n_iter1 = 45.0, 1_000_000, 300_000
    if args.lstsq_shape:
        sizes["lstsq"] = tuple(args.lstsq_shape)
    dask.config.set(scheduler="threads")
    tmp = tempfile.mkdtemp(prefix="bench_regression_")
    start = time.perf_counter()
    try:
        results = dict(
            machine=machine_facts(),
            quick=args.quick,
            l2=bench_l2(*sizes["l2"], tmp, args.seed, budget, n_iter2),
            l1=bench_l1(*sizes["l1"], args.seed, budget, n_iter1),
            lstsq=bench_lstsq(*sizes["lstsq"], args.seed))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results["total_seconds"] = time.perf_counter() - start
    # float() of numpy scalars: the harness writes plain JSON
    results = json.loads(json.dumps(results, default=float))
    write_results("regression", results, plot, quick=args.quick)
    print(json.dumps({k: results[k].get("speedup_vs_best_sgd", None) for k in ("l2", "l1")}))
    print(f"lstsq speedups: numpy {results['lstsq']['speedup_vs_numpy']:.2f}x, "
          f"dask TSQR {results['lstsq']['speedup_vs_dask_tsqr']:.2f}x")
    print(f"total {results['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
