"""Exact updates of dense rows by width: Gram summaries against block shrinks, and the read.

For each width ``d`` of ``--features`` (default 256, 512, 1,024 and 2,048), a zarr
store of about ``--values`` float64 values (default ``2**26``, 512 MiB) with a
decaying spectrum, written by ``dask.array.to_zarr`` (its default codec, chunks of
25,000 rows or fewer), and on one LocalCluster of ``--workers`` single-threaded
worker processes, in ``--repeat`` interleaved rounds (best wall time of each):

* the read, ``X.sum()``;
* ``dasketch.sketch(path, l, update="gram")``, the default for ``d <= 2,048``: the
  blocks' exact Gram matrices summed over the tree, one shrink at the root;
* ``dasketch.sketch(path, l, update="block")``: one shrink of every block, the
  block sketches merged by Frequent Directions merges (the default before).

Each sketch's error ``||A^T A - B^T B||_2``, against the exact Gram computed once,
is reported beside its certified bound (``loss_bound``) and the best any sketch of
``l - 1`` rows can do, ``sigma_l^2``. Results go to ``benchmarks/results/gram.json``
and ``gram.png``.

Usage: ``python -m benchmarks.bench_gram [--quick] [--features 256,1024] [--values V]
[--workers W] [--sketch-size L] [--repeat R]``
"""

import os
import sys
import tempfile
from pathlib import Path

import dask.array as da
import numpy as np
import scipy.linalg

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_gram.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dasketch
from benchmarks._common import (
    local_cluster,
    machine_facts,
    parser,
    side_by_side,
    write_results,
)


def write_store(path, n, d, seed=0):
    """``n x d`` Gaussian rows with column scales ``0.99**j`` (a slowly decaying
    spectrum), written by ``to_zarr`` with its default codec."""
    rows = min(25_000, n)
    gaussian = da.random.default_rng(seed).standard_normal((n, d), chunks=(rows, d))
    (gaussian * (0.99 ** np.arange(d))).to_zarr(path)


def errors(sketch, gram, top):
    """The sketch's error, its certified bound and the best possible, relative to
    ``||A||_2^2``."""
    error = np.linalg.norm(gram - sketch.B.T @ sketch.B, 2)
    return {"error": error / top, "loss_bound": sketch.loss_bound / top,
            "shrinkage": sketch.shrinkage / top}


def one_width(d, args, client, folder):
    n = max(args.values // d, 2 * d)
    path = os.path.join(folder, f"X{d}.zarr")
    write_store(path, n, d)
    X = da.from_zarr(path)
    runs = {"read": lambda: X.sum().compute(),
            "gram": lambda: dasketch.sketch(path, args.sketch_size, update="gram",
                                            client=client),
            "block": lambda: dasketch.sketch(path, args.sketch_size, update="block",
                                             client=client)}
    for run in runs.values():  # warm up: imports and first-use costs on the workers
        run()
    timings, results = side_by_side(runs, args.repeat)
    gram = (X.T @ X).compute()
    eigenvalues = scipy.linalg.eigvalsh(gram)[::-1]
    top = float(eigenvalues[0])
    row = {"rows": n, "read_s": timings["read"]["wall"],
           "best_possible": float(eigenvalues[args.sketch_size - 1]) / top}
    for name in ("gram", "block"):
        row[name] = {"seconds": timings[name]["wall"],
                     "over_read": timings[name]["wall"] / timings["read"]["wall"],
                     **errors(results[name], gram, top)}
    row["block_over_gram"] = row["block"]["seconds"] / row["gram"]["seconds"]
    print(f"d={d:5d} n={n:8d}: read {row['read_s']:.2f} s, gram {row['gram']['seconds']:.2f} s "
          f"({row['gram']['over_read']:.2f}x read, error {row['gram']['error']:.4g}, bound "
          f"{row['gram']['loss_bound']:.4g}), block {row['block']['seconds']:.2f} s "
          f"({row['block']['over_read']:.2f}x, error {row['block']['error']:.4g}, bound "
          f"{row['block']['loss_bound']:.4g}); best {row['best_possible']:.4g}", flush=True)
    return row


def plot(report, path):
    import matplotlib.pyplot as plt

    widths = list(report["widths"])
    rows = [report["widths"][w] for w in widths]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    x = np.arange(len(widths))
    for offset, (name, colour) in enumerate((("gram", "C0"), ("block", "C7"))):
        left.bar(x + 0.4 * offset - 0.2, [r[name]["over_read"] for r in rows], 0.4,
                 color=colour, label=f'update="{name}"')
        right.plot(x, [r[name]["error"] for r in rows], "o-", color=colour,
                   label=f'update="{name}"')
    right.plot(x, [r["best_possible"] for r in rows], "k--", label="sigma_l^2 (best)")
    left.axhline(1.3, color="C3", lw=0.8, ls=":", label="1.3x the read")
    for ax in (left, right):
        ax.set_xticks(x, [f"d = {w}" for w in widths])
        ax.legend(fontsize=8)
    left.set_ylabel("sketch time / read time")
    right.set_ylabel("||A^T A - B^T B||_2 / ||A||_2^2")
    right.set_yscale("log")
    fig.suptitle(f"{report['workers']} workers, l = {report['sketch_size']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    options = parser(__doc__, "d = 256 and 1,024 at 2**23 values: about a minute on 2 cores")
    options.add_argument("--features", default="256,512,1024,2048")
    options.add_argument("--values", type=int, default=2 ** 26)
    options.add_argument("--workers", type=int, default=min(2, os.cpu_count()))
    options.add_argument("--sketch-size", type=int, default=32)
    options.add_argument("--repeat", type=int, default=2)
    args = options.parse_args(argv)
    if args.quick:
        args.features, args.values, args.repeat = "256,1024", 2 ** 23, min(args.repeat, 2)
    widths = [int(w) for w in args.features.split(",")]
    report = {"machine": machine_facts(), "workers": args.workers,
              "sketch_size": args.sketch_size, "values": args.values, "widths": {}}
    with tempfile.TemporaryDirectory(prefix="bench-gram-") as folder, \
            local_cluster(n_workers=args.workers) as client:
        for d in widths:
            report["widths"][str(d)] = one_width(d, args, client, folder)
    write_results("gram", report, plot, quick=args.quick)
    return report


if __name__ == "__main__":
    main()
