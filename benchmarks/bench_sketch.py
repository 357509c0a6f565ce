"""dasketch.sketch against its peers on one zarr store, side by side in one run.

Writes a zarr store of n x d float64 rows with a decaying spectrum, then on one
LocalCluster (2 single-threaded worker processes) times:

* reading the store (``X.sum()``, Dask's read: a fresh array per chunk),
* reading it as dasketch's block tasks do (into buffers each worker reuses),
* a one-pass random projection ``X @ G`` with ``l`` columns,
* the exact Gram ``X.T @ X``,
* ``dask.array.linalg.svd_compressed(X, k=l, n_power_iter=2)``,
* ``dasketch.sketch(X, l)`` (RFD),

and reports each one's relative spectral error ``||A^T A - approx||_2 / ||A||_2^2``
against the exact Gram, with the best possible RFD error ``(lambda_l - lambda_d) / 2``.
For ``X @ G`` the estimate is ``A^T Q Q^T A`` with ``Q = orth(X G)`` (a second pass,
not timed). The methods run in ``--repeat`` interleaved rounds; times are medians
and ratios the medians of each round's ratio, as load on the machine drifts.
Results go to ``benchmarks/results/sketch.json`` and ``sketch.png``.

Usage: ``python -m benchmarks.bench_sketch [--quick] [--rows N] [--features D]``
"""

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import futures_of, wait

import dasketch
from dasketch._blocks import add, as_row_blocks, compute, map_reduce

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_sketch.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import local_cluster, machine_facts, parser, side_by_side, write_results  # noqa: E402


def persisted(array):
    """Compute ``array`` into worker memory and wait for it."""
    array = array.persist()
    wait(futures_of(array))
    return array


def block_sum(block, start, stop):
    return np.array(block.sum())


def relative_error(gram, approx, top):
    return float(np.abs(np.linalg.eigvalsh(gram - approx)).max() / top)


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--rows", type=int, default=1_000_000)
    options.add_argument("--features", type=int, default=256)
    options.add_argument("--sketch-size", type=int, default=32)
    options.add_argument("--chunk-rows", type=int, default=16384)
    options.add_argument("--repeat", type=int, default=5, help="interleaved rounds")
    args = options.parse_args(argv)
    if args.quick:
        args.rows, args.features, args.repeat = 20_000, 64, 1
    l = args.sketch_size

    with tempfile.TemporaryDirectory(prefix="bench-sketch-") as tmp, \
            local_cluster(n_workers=2) as client:
        path = os.path.join(tmp, "X.zarr")
        start = time.perf_counter()
        # Power-law spectrum s_j = (j + 1)^(-1/2) on d/2 directions, plus a small noise floor.
        dasketch.write_synthetic(path, args.rows, args.features, rank=args.features // 2,
                                 power=0.5, noise=0.01,
                                 chunk_rows=args.chunk_rows)
        write_time = time.perf_counter() - start
        X = da.from_zarr(path)
        rng = np.random.default_rng(1)

        def projection():
            # A fresh G each run, so no repeat finds its result already on the workers.
            G = da.from_array(rng.standard_normal((args.features, l)))
            return persisted(X @ G)

        def svd_compressed():
            u, s, v = da.linalg.svd_compressed(X, k=l, n_power_iter=2, seed=0)
            s, v = dask.compute(s, v)
            return (v.T * s ** 2) @ v

        def reused_read():
            blocks = as_row_blocks(path)
            return compute(map_reduce(blocks, block_sum, add, keeps_block=False),
                           client=client)[0]

        runs = {
            "read (X.sum())": lambda: X.sum().compute(),
            "read into reused buffers": reused_read,
            "random projection X @ G": projection,
            "exact Gram X.T @ X": lambda: (X.T @ X).compute(),
            "svd_compressed (k=l, 2 power iters)": svd_compressed,
            "dasketch.sketch (RFD)": lambda: dasketch.sketch(path, l, client=client),
        }
        timings, outputs = side_by_side(runs, args.repeat)
        rounds = {name: t["rounds"] for name, t in timings.items()}
        for name, t in rounds.items():
            print(f"{name:40s} " + " ".join(f"{s:8.2f}" for s in t) + " s", flush=True)
        times = {name: float(np.median(t)) for name, t in rounds.items()}

        gram = outputs["exact Gram X.T @ X"]
        eig = np.linalg.eigvalsh(gram)[::-1]
        top = eig[0]
        Y = outputs["random projection X @ G"]
        Q, _ = da.linalg.qr(Y)
        QtX = (Q.T @ X).compute()
        sketch = outputs["dasketch.sketch (RFD)"]
        errors = {
            "random projection X @ G": relative_error(gram, QtX.T @ QtX, top),
            "exact Gram X.T @ X": 0.0,
            "svd_compressed (k=l, 2 power iters)": relative_error(
                gram, outputs["svd_compressed (k=l, 2 power iters)"], top),
            "dasketch.sketch (RFD)": relative_error(gram, sketch.covariance(), top),
        }
        best = float((eig[l - 1] - eig[-1]) / 2 / top)

    def median_ratio(numerator, denominator):
        return float(np.median(np.array(rounds[numerator]) / np.array(rounds[denominator])))

    ours = "dasketch.sketch (RFD)"
    report = {
        "rows": args.rows, "features": args.features, "sketch_size": l,
        "chunk_rows": args.chunk_rows, "store_gib": args.rows * args.features * 8 / 2 ** 30,
        "workers": "LocalCluster, 2 processes x 1 thread", "machine": machine_facts(),
        "cpu_count": os.cpu_count(), "write_seconds": write_time,
        "seconds": times, "seconds_per_round": rounds,
        "relative_spectral_error": errors,
        "best_possible_rfd_error": best,
        "certified_bound": sketch.error_bound / top,
        "ratios": {
            "sketch_time_over_read_time": median_ratio(ours, "read (X.sum())"),
            "sketch_time_over_reused_buffer_read_time": median_ratio(
                ours, "read into reused buffers"),
            "reused_buffer_read_time_over_read_time": median_ratio(
                "read into reused buffers", "read (X.sum())"),
            "svd_compressed_time_over_sketch_time": median_ratio(
                "svd_compressed (k=l, 2 power iters)", ours),
            "sketch_error_over_best_possible": errors["dasketch.sketch (RFD)"] / best,
            "sketch_error_over_svd_compressed_error":
                errors["dasketch.sketch (RFD)"] / errors["svd_compressed (k=l, 2 power iters)"],
        },
        "goals": {"sketch_time_over_read_time": "<= 1.3",
                  "svd_compressed_time_over_sketch_time": ">= 2",
                  "sketch_error_over_best_possible": "<= 1.1",
                  "sketch_error_over_svd_compressed_error": "<= 0.55"},
    }
    write_results("sketch", report, plot, quick=args.quick)
    print(json.dumps(report["ratios"], indent=2))
    return report


def plot(report, path):
    names = list(report["seconds"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    left.barh(names, [report["seconds"][n] for n in names], color="tab:blue")
    left.set_xlabel("wall time (s)")
    left.invert_yaxis()
    left.set_title(f"{report['rows']:,} x {report['features']} float64 zarr, l = "
                   f"{report['sketch_size']}")
    err_names = [n for n in report["relative_spectral_error"] if "exact" not in n]
    right.barh(err_names, [report["relative_spectral_error"][n] for n in err_names],
               color="tab:orange")
    right.axvline(report["best_possible_rfd_error"], color="k", ls="--",
                  label="best possible (RFD Thm. 1)")
    right.axvline(report["certified_bound"], color="tab:green", ls=":",
                  label="dasketch certified bound")
    right.set_xlabel("||A^T A - approx||_2 / ||A||_2^2")
    right.invert_yaxis()
    right.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
