"""Scaling of ``dasketch sketch``: wall time and peak worker memory against n.

For each n (default 1M, 2M, 4M, 8M rows x 256 float64 features on zarr), the
benchmark starts one LocalCluster (2 single-threaded worker processes), runs the
real ``dasketch sketch PATH --scheduler ADDRESS`` command against it, and samples
every worker's resident memory from the cluster while it runs. Goal: time per row
constant within 1.2x and peak worker memory flat within 1.2x across sizes.

A sparse case (default 200,000 rows x 100,000 features at density 1e-3, l = 64) is
timed against a sparse one-pass projection ``X @ G`` of the same width on the same
cluster.

Results: ``benchmarks/results/scale.json`` and ``scale.png``.
Usage: ``python benchmarks/bench_scale.py [--quick] [--sizes 1000000 2000000 ...]``
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from dasketch._blocks import as_row_blocks, compute, tree_sum  # noqa: E402
from dasketch.datasets import write_sparse_synthetic  # noqa: E402
from dasketch.kernels.embeddings import gaussian_rows  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


class WorkerMemorySampler:
    """Samples every worker's resident memory on a background thread."""

    def __init__(self, client, interval=0.2):
        self.client, self.interval = client, interval
        self.peak = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            for worker, rss in self.client.run(_rss).items():
                self.peak[worker] = max(self.peak.get(worker, 0), rss)
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def dasketch_command():
    exe = shutil.which("dasketch")
    return [exe] if exe else [sys.executable, "-m", "dasketch.cli"]


def run_cli(client, path, sketch_size, out):
    with WorkerMemorySampler(client) as sampler:
        start = time.perf_counter()
        result = subprocess.run(
            [*dasketch_command(), "sketch", path, "-l", str(sketch_size), "--scheduler",
             client.scheduler.address, "--out", out, "--overwrite", "--quiet"],
            capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    sketch_seconds = float(re.search(r"in ([0-9.]+) s", result.stdout).group(1))
    return wall, sketch_seconds, max(sampler.peak.values())


def _projection_gram(block, start, stop, *, seed, width):
    Y = block @ gaussian_rows(seed, 0, 0, block.shape[1], width)
    return Y.T @ Y


def sparse_case(client, tmp, rows, features, density, sketch_size):
    from functools import partial

    path = os.path.join(tmp, "sparse.zarr")
    _, _, nnz = write_sparse_synthetic(path, rows, features, density=density)
    wall, sketch_seconds, peak = run_cli(client, path, sketch_size,
                                         os.path.join(tmp, "sparse.npz"))
    blocks = as_row_blocks(path)
    start = time.perf_counter()
    compute(tree_sum(blocks, partial(_projection_gram, seed=0, width=sketch_size)),
            client=client)
    projection = time.perf_counter() - start
    shutil.rmtree(path)
    return {"rows": rows, "features": features, "density": density, "nnz": nnz,
            "sketch_size": sketch_size, "cli_wall_seconds": wall,
            "sketch_seconds": sketch_seconds, "projection_seconds": projection,
            "sketch_over_projection": sketch_seconds / projection,
            "peak_worker_memory_mib": peak / 2 ** 20, "goal_sketch_over_projection": "<= 3"}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[1_000_000, 2_000_000, 4_000_000, 8_000_000])
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--sketch-size", type=int, default=32)
    parser.add_argument("--sparse-rows", type=int, default=200_000)
    parser.add_argument("--sparse-features", type=int, default=100_000)
    parser.add_argument("--memory-limit", default="2GiB")
    parser.add_argument("--tmp", default=None, help="where the stores are written")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(RESULTS / "scale"))
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.sparse_rows, args.sparse_features = [50_000, 100_000], 20_000, 20_000

    report = {"features": args.features, "sketch_size": args.sketch_size,
              "workers": f"LocalCluster, 2 processes x 1 thread, {args.memory_limit} each",
              "dense": []}
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.tmp) as tmp, \
            LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=args.memory_limit,
                         dashboard_address=":0") as cluster, Client(cluster) as client:
        for n in args.sizes:
            path = os.path.join(tmp, f"X{n}.zarr")
            subprocess.run([*dasketch_command(), "make-data", path, "--rows", str(n),
                            "--features", str(args.features), "--quiet"], check=True,
                           capture_output=True)
            wall, sketch_seconds, peak = run_cli(client, path, args.sketch_size,
                                                 os.path.join(tmp, "s.npz"))
            entry = {"rows": n, "store_gib": n * args.features * 8 / 2 ** 30,
                     "cli_wall_seconds": wall, "sketch_seconds": sketch_seconds,
                     "microseconds_per_row": sketch_seconds / n * 1e6,
                     "peak_worker_memory_mib": peak / 2 ** 20}
            print(json.dumps(entry), flush=True)
            report["dense"].append(entry)
            shutil.rmtree(path)
        report["sparse"] = sparse_case(client, tmp, args.sparse_rows, args.sparse_features,
                                       1e-3, 64)
        print(json.dumps(report["sparse"]), flush=True)
    per_row = [e["microseconds_per_row"] for e in report["dense"]]
    memory = [e["peak_worker_memory_mib"] for e in report["dense"]]
    report["ratios"] = {
        "time_per_row_max_over_min": max(per_row) / min(per_row),
        "peak_memory_largest_over_smallest": memory[-1] / memory[0],
        "sparse_sketch_over_projection": report["sparse"]["sketch_over_projection"],
    }
    report["goals"] = {"time_per_row_max_over_min": "<= 1.2",
                       "peak_memory_largest_over_smallest": "<= 1.2",
                       "sparse_sketch_over_projection": "<= 3"}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(report, indent=2))
    plot(report, out.with_suffix(".png"))
    print(json.dumps(report["ratios"], indent=2))


def plot(report, path):
    rows = np.array([e["rows"] for e in report["dense"]])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(rows, [e["sketch_seconds"] for e in report["dense"]], "o-", label="measured")
    first = report["dense"][0]
    left.plot(rows, first["sketch_seconds"] * rows / rows[0], "k--", label="linear in n")
    left.set_xlabel("rows n")
    left.set_ylabel("sketch time (s)")
    left.legend()
    left.set_title(f"dasketch sketch, d = {report['features']}, l = {report['sketch_size']}")
    right.plot(rows, [e["peak_worker_memory_mib"] for e in report["dense"]], "o-")
    right.set_ylim(bottom=0)
    right.set_xlabel("rows n")
    right.set_ylabel("peak worker memory (MiB)")
    right.set_title(report["workers"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
