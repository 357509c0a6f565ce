"""l1-penalised logistic regression from a zarr store: dasketch and dask-ml on one dask array.

X (dense low rank plus noise, :func:`dasketch.write_synthetic` as in
``benchmarks/bench_drp.py``: rank ``r``, spectrum ``0.95 ** j``, noise 0.01)
is written to a zarr store on disk and read back as ``da.from_zarr(path)``,
chunks of 1,024 rows; the +-1 labels of ``bench_drp.targets`` (a random
direction of the signal) stay in memory. Both fits minimise the same objective
``sum_i log(1 + exp(-y_i x_i^T w)) + alpha ||w||_1`` without an intercept
(``fit_intercept=False`` on both sides: dask-glm would penalise one, dasketch
does not), ``alpha`` = 1e-3 of the mean nonzero eigenvalue of ``X X^T``
(``--alpha-scale``), dask-ml's ``C = 1 / alpha``:

* dasketch: ``dual_random_projection(X, labels, loss="logistic",
  penalty="l1", tol=1e-6)`` (sketch-preconditioned proximal Newton, stopped
  when its certified duality gap is below 1e-6 of the objective at 0);
* dask-ml: ``LogisticRegression(penalty="l1", solver="admm")`` and
  ``solver="proximal_grad"`` on the same dask array, run with ``tol`` 1e-4,
  1e-6, ... (at most 1,000 iterations each, 300 with ``--quick``;
  ``admm`` ignores ``tol``, so its ``abstol`` and ``reltol`` are set to it)
  until the objective is within 1e-6 of the best or its budget of CPU seconds
  (``--budget``, 300; 60 with ``--quick``) is spent, the time of that last run
  reported.

Every fit's objective is reported relative to the best any run reached (a
``tol=1e-10`` dasketch fit among them): ``(F - F*) / F(0)``, so the ratios
compare the fits at the accuracy each reached. One core (single-threaded
BLAS, Dask's synchronous scheduler); seconds are CPU seconds of this process,
wall seconds beside them, with the load average. Writes
``benchmarks/results/l1_zarr.json`` and ``l1_zarr.png`` (``l1_zarr_quick``
with ``--quick``); without dask-ml (the ``bench`` extra) its rows are skipped
with a message.

Usage: ``python -m benchmarks.bench_l1_zarr [--quick] [--budget SECONDS]
[--alpha-scale S] [--solvers admm proximal_grad] [--n N] [--d D] [--rank R] [--m M]``
"""

import os
import sys
import tempfile
import warnings
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from dasketch import write_synthetic
from dasketch.linear_model import dual_random_projection

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_l1_zarr.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, write_results  # noqa: E402
from benchmarks.bench_drp import BLOCK_ROWS, DECAY, NOISE, Clock, targets, timed  # noqa: E402
from benchmarks.bench_l1 import ACCURACY, DASK_ML_ITERATIONS, TOLS, objective  # noqa: E402

SIZES = {False: (16_384, 500, 10), True: (8_192, 400, 5)}     # n, d, rank
# dask-ml's iterations per run at most (each a pass over the store, proximal_grad's
# line search several): without --quick more than bench_l1's, for its tight tols
ITERATIONS = {False: 1000, True: DASK_ML_ITERATIONS}
SOLVERS = ("admm", "proximal_grad")


def dasketch_fit(X, labels, alpha, m, tol, max_iter=100):
    res = dual_random_projection(X, labels, loss="logistic", alpha=alpha, penalty="l1",
                                 sketch_size=m, tol=tol, fit_intercept=False,
                                 block_rows=BLOCK_ROWS, random_state=0, max_iter=max_iter)
    return res.coef, {"passes": res.n_passes, "iterations": res.n_iter,
                      "certified_relative_gap": float(res.optimality_residual)}


def dask_ml_fit(solver, iterations):
    from dask_ml.linear_model import LogisticRegression

    def fit(X, labels, alpha, tol):
        # admm ignores tol: its stopping rule is dask-glm's abstol and reltol
        extra = {"abstol": tol, "reltol": tol} if solver == "admm" else None
        model = LogisticRegression(penalty="l1", C=1.0 / alpha, solver=solver, tol=tol,
                                   fit_intercept=False, max_iter=iterations,
                                   solver_kwargs=extra)
        model.fit(X, da.from_array((labels > 0).astype(int), chunks=X.chunks[0]))
        return np.ravel(model.coef_)
    return fit


def rows_for(X, Xmem, labels, alpha, m, budget, iterations, solvers):
    """One row per method: CPU and wall seconds, objective relative to the best."""
    at_zero = objective(Xmem, labels, np.zeros(Xmem.shape[1]), 0.0, alpha, "logistic")
    with warnings.catch_warnings():     # the reference may stop at the rounding
        warnings.simplefilter("ignore", ConvergenceWarning)
        (best, _), _ = timed(lambda: dasketch_fit(X, labels, alpha, m, 1e-10, max_iter=300))
    values = {"reference": objective(Xmem, labels, best, 0.0, alpha, "logistic")}
    (coef, facts), seconds = timed(lambda: dasketch_fit(X, labels, alpha, m, ACCURACY))
    rows = [{"method": f"dasketch proximal Newton m={m}", "tol": ACCURACY, "seconds": seconds,
             "wall_seconds": Clock.wall, "nonzeros": int(np.count_nonzero(coef)),
             "objective": objective(Xmem, labels, coef, 0.0, alpha, "logistic"),
             "peer": False, **facts}]
    print(f"  dasketch: cpu {seconds:.2f}s wall {Clock.wall:.2f}s", flush=True)
    try:
        peers = {f"dask-ml {s}": dask_ml_fit(s, iterations) for s in solvers}
    except ImportError:
        peers, skipped = {}, ["dask-ml is not installed (pip install -e '.[bench]'): its "
                              "admm and proximal_grad rows are skipped"]
        print(skipped[0], flush=True)
    else:
        skipped = []
    for name, fit in peers.items():
        spent = 0.0
        for tol in TOLS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                coef, seconds = timed(lambda fit=fit, tol=tol: fit(X, labels, alpha, tol))
            value = objective(Xmem, labels, coef, 0.0, alpha, "logistic")
            print(f"  {name} tol={tol:g}: cpu {seconds:.2f}s wall {Clock.wall:.2f}s "
                  f"objective {value:.10g}", flush=True)
            spent += seconds
            optimum = min(values["reference"], value, rows[0]["objective"])
            if value - optimum <= ACCURACY * at_zero or spent >= budget:
                break
        rows.append({"method": name, "tol": tol, "seconds": seconds,
                     "wall_seconds": Clock.wall, "nonzeros": int(np.count_nonzero(coef)),
                     "objective": value, "peer": True, "budget_spent": spent >= budget})
    optimum = min([values["reference"]] + [r["objective"] for r in rows])
    for r in rows:
        r["relative_suboptimality"] = (r["objective"] - optimum) / at_zero
        print(f"{r['method']:34s} tol={r['tol']:g} cpu {r['seconds']:8.2f}s wall "
              f"{r['wall_seconds']:8.2f}s subopt {r['relative_suboptimality']:.1e} "
              f"nnz {r['nonzeros']}", flush=True)
    return rows, skipped


def ratios(rows):
    """``dask-ml seconds / dasketch seconds`` (CPU and wall), the goal being at
    least 3 where dask-ml reaches the accuracy; where it does not, the ratio is a
    lower bound at dasketch's far better accuracy."""
    ours = rows[0]
    out = []
    for peer in rows[1:]:
        entry = {"peer": peer["method"], "peer_tol": peer["tol"],
                 "peer_reached_accuracy": peer["relative_suboptimality"] <= ACCURACY,
                 "ratio_cpu": peer["seconds"] / ours["seconds"],
                 "ratio_wall": peer["wall_seconds"] / ours["wall_seconds"]}
        out.append(entry)
        print(f"{peer['method']}: {entry['ratio_cpu']:.1f}x CPU, {entry['ratio_wall']:.1f}x "
              f"wall (reached 1e-6: {entry['peer_reached_accuracy']})", flush=True)
    return out


def plot(result, path):
    import matplotlib.pyplot as plt

    from benchmarks._common import annotated_bars

    rows = result["rows"]
    fig, ax = plt.subplots(figsize=(8, 4))
    annotated_bars(ax, {r["method"]: (r["seconds"], f"{r['seconds']:.1f}s\nsubopt "
                                                    f"{r['relative_suboptimality']:.0e}")
                        for r in rows}, highlight={rows[0]["method"]})
    ax.set_ylabel("CPU seconds (one core)")
    cfg = result["config"]
    ax.set_title(f"l1 logistic from zarr, {cfg['n']:,} x {cfg['d']:,}, rank {cfg['rank']} + "
                 f"noise, alpha {cfg['alpha']:.3g}; load {result['machine'].get('load_average')}",
                 fontsize=9)
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(n, d, rank, m, budget, alpha_scale, iterations, solvers=SOLVERS):
    with tempfile.TemporaryDirectory(dir=os.environ.get("DASKETCH_BENCH_TMP")) as tmp:
        path = os.path.join(tmp, "X.zarr")
        write_synthetic(path, n, d, rank=rank, decay=DECAY, noise=NOISE,
                        chunk_rows=BLOCK_ROWS, random_state=0)
        X = da.from_zarr(path)
        Xmem = X.compute()
        _, labels = targets(Xmem, 0)
        alpha = alpha_scale * float(np.einsum("ij,ij->", Xmem, Xmem)) / min(n, d)
        facts = machine_facts()
        rows, skipped = rows_for(X, Xmem, labels, alpha, m, budget, iterations, solvers)
    facts["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return {"config": {"n": n, "d": d, "rank": rank, "sketch_size": m, "alpha": alpha,
                       "accuracy": ACCURACY, "block_rows": BLOCK_ROWS, "chunks": X.chunksize,
                       "peer_budget_seconds": budget, "peer_max_iter": iterations,
                       "fit_intercept": False,
                       "scheduler": "dask synchronous, single-threaded BLAS (one core)"},
            "machine": facts, "skipped": skipped, "rows": rows, "ratios": ratios(rows)}


def main(argv=None):
    from benchmarks._common import parser

    options = parser(__doc__)
    for name, kind in (("--budget", float), ("--alpha-scale", float), ("--n", int),
                       ("--d", int), ("--rank", int), ("--m", int)):
        options.add_argument(name, type=kind, default=None)
    options.add_argument("--solvers", nargs="+", choices=SOLVERS, default=SOLVERS,
                         help="dask-ml's solvers to run (default both)")
    args = options.parse_args(argv)
    n, d, rank = SIZES[args.quick]
    n, d, rank = args.n or n, args.d or d, args.rank or rank
    budget = args.budget if args.budget is not None else (60.0 if args.quick else 300.0)
    with threadpool_limits(limits=1), dask.config.set(scheduler="synchronous"):
        result = run(n, d, rank, args.m or 4 * rank, budget, args.alpha_scale or 1e-3,
                     ITERATIONS[args.quick], args.solvers)
    write_results("l1_zarr", result, plot, quick=args.quick)


if __name__ == "__main__":
    main()
