"""Eager passes by part: block work, the tree's sums and block size, against numpy.

Where the time of a fit's eager passes (:func:`dasketch._blocks.run_eagerly`)
goes, with every core of the machine:

* **A pool's product.** ``X^T (X w)`` of a dense matrix in memory by numpy
  (multithreaded BLAS) against the same product over row blocks, one block a
  thread of a pool of ``os.cpu_count()`` threads at one BLAS thread each (as
  eager passes run them), for several block heights.
* **Fits by pass.** Weakly regularised ridge and logistic regression by
  ``dual_random_projection`` (the fits of ``bench_cores.py``) at the default
  blocks and at ``--old-rows`` rows a block, with every eager pass timed by its
  block function: the pass's wall time, the seconds its blocks took on the pool
  threads, and the seconds the calling thread spent summing the parts
  (``streamed_tree``); the rest of the fit is its own algebra between passes.
  Beside them numpy's ``X R`` and ``X^T Z`` (``Z`` of ``m + 2`` columns), the
  products of the projection pass.

Times are the best of ``--repeat`` runs. Writes
``benchmarks/results/eager_passes.json`` and ``.png`` (``eager_passes_quick``
with ``--quick``: 1,500 x 6,000, m = 80, seconds on two cores).

Usage: ``python -m benchmarks.bench_eager_passes [--quick] [--n N] [--d D]
[--m M] [--old-rows ROWS] [--repeat K]``
"""

import os
import sys
import time
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    __package__ = "benchmarks"

import dasketch._blocks.mapping as mapping
from benchmarks._common import best_time, machine_facts, parser, write_results
from benchmarks.bench_cores import low_rank_plus_noise
from dasketch.linear_model import dual_random_projection
from dasketch.linear_model.dual_projection.checks import fit_blocks


class PassTimers:
    """Times every eager pass by its block function while active (it wraps the
    bridge's eager ``map_reduce``, its pool and its tree in this process)."""

    def __init__(self):
        self.passes = defaultdict(lambda: {"calls": 0, "wall_s": 0.0, "block_s": 0.0,
                                           "sum_s": 0.0, "blocks": 0})
        self._now = None

    def __enter__(self):
        self._saved = (mapping._eager_map_reduce, mapping.in_order, mapping.streamed_tree)
        eager_map_reduce, in_order, streamed_tree = self._saved
        timers = self

        def timed_calls(calls, threads=1):
            def timed(call):
                def run():
                    start = time.perf_counter()
                    out = call()
                    timers._now["block_s"] += time.perf_counter() - start
                    timers._now["blocks"] += 1
                    return out
                return run
            return in_order((timed(call) for call in calls), threads)

        def timed_tree(parts, combine, split_every, *, fresh_parts=False):
            def timed(func):
                def run(*values):
                    start = time.perf_counter()
                    out = func(*values)
                    timers._now["sum_s"] += time.perf_counter() - start
                    return out
                return run
            summed = timed(combine)
            if getattr(combine, "into", None) is not None:
                summed.into = timed(combine.into)
            return streamed_tree(parts, summed, split_every, fresh_parts=fresh_parts)

        def timed_pass(blocks, func, *args, **kwargs):
            name = getattr(getattr(func, "func", func), "__name__", repr(func))
            timers._now = record = self.passes[name]
            start = time.perf_counter()
            out = eager_map_reduce(blocks, func, *args, **kwargs)
            record["calls"] += 1
            record["wall_s"] += time.perf_counter() - start
            return out

        mapping._eager_map_reduce, mapping.in_order, mapping.streamed_tree = (
            timed_pass, timed_calls, timed_tree)
        return self

    def __exit__(self, *exc):
        mapping._eager_map_reduce, mapping.in_order, mapping.streamed_tree = self._saved


def _pooled_product(pool, blocks, w):
    return sum(pool.map(lambda block: block.T @ (block @ w), blocks))


def pool_products(X, heights, repeat):
    """``X^T (X w)`` by numpy, and over blocks of each height on a pool."""
    w = np.ones(X.shape[1])
    numpy_s, _ = best_time(lambda: X.T @ (X @ w), repeat)
    threads, pools = os.cpu_count(), {}
    with threadpool_limits(1, "blas"), ThreadPoolExecutor(threads) as pool:
        for rows in heights:
            blocks = [X[i:i + rows] for i in range(0, X.shape[0], rows)]
            seconds, _ = best_time(partial(_pooled_product, pool, blocks, w), repeat)
            pools[str(rows)] = {"blocks": len(blocks), "seconds": seconds,
                                "over_numpy": seconds / numpy_s}
            print(f"pool of {threads}: {len(blocks)} blocks of {rows} rows {seconds:.4f} s "
                  f"({seconds / numpy_s:.2f}x numpy)", flush=True)
    return {"threads": threads, "numpy_s": numpy_s, "blocks": pools}


def timed_fit(X, y, params, block_rows, repeat):
    """The best of ``repeat`` fits, with the pass timers of that fit."""
    best = None
    for _ in range(repeat):
        with PassTimers() as timers:
            start = time.perf_counter()
            result = dual_random_projection(X, y, block_rows=block_rows, **params)
            seconds = time.perf_counter() - start
        if best is None or seconds < best["fit_s"]:
            passes = {name: dict(record) for name, record in timers.passes.items()}
            in_passes = sum(record["wall_s"] for record in passes.values())
            offsets = fit_blocks(X, block_rows).offsets
            best = {"block_rows": block_rows, "rows": offsets[1] - offsets[0],
                    "blocks": len(offsets) - 1, "fit_s": seconds, "n_passes": result.n_passes,
                    "passes": passes, "between_passes_s": seconds - in_passes}
    return best


def fits(X, y, m, old_rows, repeat):
    scale = float(np.sum(X * X)) / min(X.shape)
    out = {}
    for loss in ("squared", "logistic"):
        target = y if loss == "squared" else np.sign(y - np.median(y))
        params = dict(loss=loss, alpha=1e-3 * scale, sketch_size=m, tol=1e-6,
                      random_state=0, fit_intercept=loss != "squared")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dual_random_projection(X, target, **params)    # R's tiles drawn, caches warm
            out[loss] = {label: timed_fit(X, target, params, rows, repeat)
                         for label, rows in (("default", None), ("old", old_rows))}
        for label, run in out[loss].items():
            print(f"{loss} {label} blocks ({run['blocks']} x {run['rows']} rows): "
                  f"{run['fit_s']:.3f} s, between passes "
                  f"{run['between_passes_s']:.3f} s", flush=True)
            for name, record in run["passes"].items():
                print(f"   {name}: {record}", flush=True)
    return out


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    pools = report["pool"]["blocks"]
    axes[0].bar(["numpy"] + [f"{v['blocks']} x {k}" for k, v in pools.items()],
                [report["pool"]["numpy_s"]] + [v["seconds"] for v in pools.values()],
                color=["C7"] + ["C0"] * len(pools))
    axes[0].set_ylabel("seconds")
    axes[0].set_title(f"X^T (X w): numpy, and blocks of rows on {report['pool']['threads']} "
                      "threads", fontsize=9)
    labels, bottoms = [], []
    parts = ("projection", "other passes", "between passes")
    heights = {part: [] for part in parts}
    for loss, runs in report["fits"].items():
        for label, run in runs.items():
            labels.append(f"{loss}, {label}\n{run['blocks']} x {run['rows']} rows")
            projection = run["passes"].get("_projection_block", {}).get("wall_s", 0.0)
            others = sum(r["wall_s"] for r in run["passes"].values()) - projection
            heights["projection"].append(projection)
            heights["other passes"].append(others)
            heights["between passes"].append(run["between_passes_s"])
    bottoms = np.zeros(len(labels))
    for part in parts:
        axes[1].bar(labels, heights[part], bottom=bottoms, label=part)
        bottoms += np.asarray(heights[part])
    axes[1].set_ylabel("seconds")
    axes[1].legend(fontsize=8)
    axes[1].set_title("dual random projection fits by part", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    options = parser(__doc__, "1,500 x 6,000, m = 80: seconds on two cores")
    options.add_argument("--n", type=int, default=6000)
    options.add_argument("--d", type=int, default=24000)
    options.add_argument("--m", type=int, default=320)
    options.add_argument("--old-rows", type=int, default=128,
                         help="rows a block of the comparison fits (the readers' default "
                              "for d = 24,000)")
    options.add_argument("--repeat", type=int, default=3)
    args = options.parse_args(argv)
    if args.quick:
        args.n, args.d, args.m, args.repeat = 1500, 6000, 80, min(args.repeat, 2)
    X, y = low_rank_plus_noise(args.n, args.d, 40)
    heights = sorted({args.old_rows, 375, 512, 750})
    report = {"machine": machine_facts(), "shape": [args.n, args.d], "m": args.m,
              "pool": pool_products(X, heights, args.repeat),
              "fits": fits(X, y, args.m, args.old_rows, args.repeat)}
    R = np.random.default_rng(0).standard_normal((args.d, args.m))
    Z = np.ones((args.n, args.m + 2))
    report["numpy_projection_s"] = {"X R": best_time(lambda: X @ R, args.repeat)[0],
                                    "X^T Z": best_time(lambda: X.T @ Z, args.repeat)[0]}
    write_results("eager_passes", report, plot, quick=args.quick)
    return report


if __name__ == "__main__":
    main()
