"""Scaling of ``dasketch sketch``: wall time and peak worker memory against n.

For each n (default 1M, 2M, 4M, 8M rows x 256 float64 features on zarr), the
benchmark starts one LocalCluster (2 single-threaded worker processes), runs the
real ``dasketch sketch PATH --scheduler ADDRESS`` command against it, and samples
every worker's resident memory from the cluster while it runs. Goal: time per row
constant within 1.2x and peak worker memory flat within 1.2x across sizes.

A sparse case (default 200,000 rows x 100,000 features at density 1e-3, l = 64) is
timed against a sparse one-pass projection ``X @ G`` of the same width on the same
cluster.

``--wide`` runs the wide cases instead: a few hundred to a few thousand dense rows
of d = 1e5 and 1e6 features and sparse rows of d = 1e7 features, each sketched by
the same command on 2 workers with 2 GiB each, recording the peak worker memory,
whether a worker process was restarted (killed for memory), the time, and the
sketch's certified error bound beside a randomized estimate of its actual error
(:func:`dasketch.estimate_error`, one more pass). Its entries go to the key
``"wide"`` of the same JSON file; the other entries are kept.

Results: ``benchmarks/results/scale.json`` and ``scale.png`` (``scale_wide.png``
for the wide cases).
Usage: ``python -m benchmarks.bench_scale [--quick] [--sizes 1000000 2000000 ...]``
or ``python -m benchmarks.bench_scale --wide [--quick]``, or ``--sparse-only``.
"""

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

from dasketch._blocks import add, as_row_blocks, compute, map_reduce  # noqa: E402
from dasketch.datasets import write_sparse_synthetic  # noqa: E402
from dasketch.kernels.embeddings import gaussian_rows  # noqa: E402

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_scale.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import local_cluster, machine_facts, parser, result_path  # noqa: E402


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


def run_cli(client, path, sketch_size, out, check=True):
    with WorkerMemorySampler(client) as sampler:
        start = time.perf_counter()
        result = subprocess.run(
            [*dasketch_command(), "sketch", path, "-l", str(sketch_size), "--scheduler",
             client.scheduler.address, "--out", out, "--overwrite", "--quiet"],
            capture_output=True, text=True, check=check)
        wall = time.perf_counter() - start
    peak = max(sampler.peak.values())
    if result.returncode != 0:
        return wall, None, peak, result.stderr.strip().splitlines()[-1:]
    sketch_seconds = float(re.search(r"in ([0-9.]+) s", result.stdout).group(1))
    return wall, sketch_seconds, peak, None


def _projection_gram(block, start, stop, *, seed, width):
    Y = block @ gaussian_rows(seed, 0, 0, block.shape[1], width)
    return Y.T @ Y


def sparse_case(client, tmp, rows, features, density, sketch_size):
    from functools import partial

    path = os.path.join(tmp, "sparse.zarr")
    _, _, nnz = write_sparse_synthetic(path, rows, features, density=density)
    wall, sketch_seconds, peak, _ = run_cli(client, path, sketch_size,
                                         os.path.join(tmp, "sparse.npz"))
    blocks = as_row_blocks(path)
    start = time.perf_counter()
    compute(map_reduce(blocks, partial(_projection_gram, seed=0, width=sketch_size), add),
            client=client)
    projection = time.perf_counter() - start
    shutil.rmtree(path)
    return {"rows": rows, "features": features, "density": density, "nnz": nnz,
            "sketch_size": sketch_size, "cli_wall_seconds": wall,
            "sketch_seconds": sketch_seconds, "projection_seconds": projection,
            "sketch_over_projection": sketch_seconds / projection,
            "peak_worker_memory_mib": peak / 2 ** 20, "goal_sketch_over_projection": "<= 3"}


def _parse_case(text):
    """``D:ROWS`` (dense) or ``D:ROWS:NNZ_PER_ROW`` (sparse) as integers."""
    return tuple(int(float(part)) for part in text.split(":"))


def wide_case(client, tmp, features, rows, sketch_size, nnz_per_row=None):
    """Sketch ``rows`` wide rows with the command line; peak worker memory, whether a
    worker was restarted, time, and the certified bound beside an estimate of the
    actual error."""
    import dasketch

    path = os.path.join(tmp, "wide.zarr")
    if nnz_per_row is None:
        subprocess.run([*dasketch_command(), "make-data", path, "--rows", str(rows),
                        "--features", str(features), "--quiet"], check=True,
                       capture_output=True)
        store_gib = rows * features * 8 / 2 ** 30
    else:
        _, _, nnz = write_sparse_synthetic(path, rows, features,
                                           density=nnz_per_row / features)
        store_gib = nnz * 16 / 2 ** 30
    pids = client.run(os.getpid)
    out = os.path.join(tmp, "wide.npz")
    wall, sketch_seconds, peak, error = run_cli(client, path, sketch_size, out, check=False)
    entry = {"kind": "dense" if nnz_per_row is None else "sparse", "features": features,
             "rows": rows, "nnz_per_row": nnz_per_row, "sketch_size": sketch_size,
             "store_gib": store_gib, "cli_wall_seconds": wall,
             "sketch_seconds": sketch_seconds, "peak_worker_memory_mib": peak / 2 ** 20,
             "worker_restarted": client.run(os.getpid) != pids, "error": error}
    if error is None:
        sketch = dasketch.load_sketch(out)
        # A few d-long test vectors (10 up to d = 1e6, 2 beyond) so that the check itself
        # fits the workers: its block tasks hold d x n_vectors float64 values each.
        n_vectors = 10 if features <= 1_000_000 else 2
        estimate = dasketch.estimate_error(path, sketch, n_vectors=n_vectors, random_state=0,
                                           split_every=2, client=client)
        entry.update(error_bound=sketch.error_bound, guarantee=sketch.guarantee,
                     estimated_error_lower=estimate.lower,
                     estimated_error_upper=estimate.upper, estimate_vectors=n_vectors,
                     within_bound=bool(estimate.lower <= sketch.error_bound * (1 + 1e-9)))
        os.remove(out)
    shutil.rmtree(path)
    return entry


def run_sparse_only(args):
    """The sparse case alone, replacing the key ``"sparse"`` of the JSON file."""
    out = Path(args.out).with_suffix(".json")
    report = json.loads(out.read_text()) if out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.tmp) as tmp, \
            local_cluster(memory_limit=args.memory_limit) as client:
        report["sparse"] = sparse_case(client, tmp, args.sparse_rows, args.sparse_features,
                                       1e-3, 64)
    print(json.dumps(report["sparse"]), flush=True)
    report.setdefault("ratios", {})["sparse_sketch_over_projection"] = \
        report["sparse"]["sketch_over_projection"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))


def run_wide(args):
    """The wide cases, added to the key ``"wide"`` of the JSON file (replacing
    entries of the same kind, width, rows and sketch size)."""
    out = Path(args.out).with_suffix(".json")
    report = json.loads(out.read_text()) if out.exists() else {}
    entries = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.tmp) as tmp, \
            local_cluster(memory_limit=args.memory_limit) as client:
        for case in args.dense_wide + args.sparse_wide:
            features, rows, *nnz = case
            entry = wide_case(client, tmp, features, rows, args.sketch_size, *nnz)
            entry["workers"] = f"LocalCluster, 2 processes x 1 thread, {args.memory_limit} each"
            print(json.dumps(entry), flush=True)
            entries.append(entry)
    def key(entry):
        return entry["kind"], entry["features"], entry["rows"], entry["sketch_size"]

    new_keys = {key(entry) for entry in entries}
    report["wide"] = [e for e in report.get("wide", []) if key(e) not in new_keys] + entries
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    plot_wide(report["wide"], args.memory_limit, out.with_name(out.stem + "_wide.png"))


def plot_wide(entries, memory_limit, path):
    """Peak worker memory of every wide case against the limit and its pause and
    restart fractions (80 % and 95 %)."""
    from dask.utils import parse_bytes

    limit = parse_bytes(memory_limit) / 2 ** 20
    labels = [f"{e['kind']} d={e['features']:.0e}\n{e['rows']:,} rows, l={e['sketch_size']}"
              + ("\n(refused: too large)" if e["error"] else "") for e in entries]
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(entries)), 4.5))
    ax.bar(range(len(entries)), [e["peak_worker_memory_mib"] for e in entries],
           color=["tab:red" if e["worker_restarted"] else "tab:blue" for e in entries])
    for fraction, style, name in ((1.0, "-", "limit"), (0.95, "--", "restart (95 %)"),
                                  (0.8, ":", "pause (80 %)")):
        ax.axhline(fraction * limit, color="k", ls=style, lw=1, label=name)
    ax.set_xticks(range(len(entries)), labels, fontsize=7)
    ax.set_ylabel("peak worker memory (MiB)")
    ax.set_title(f"dasketch sketch, 2 workers x {memory_limit}; red: a worker was restarted",
                 fontsize=9)
    ax.set_ylim(0, 1.25 * limit)
    ax.legend(fontsize=8, loc="upper left", ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--sizes", type=int, nargs="+",
                        default=[1_000_000, 2_000_000, 4_000_000, 8_000_000])
    options.add_argument("--features", type=int, default=256)
    options.add_argument("--sketch-size", type=int, default=32)
    options.add_argument("--sparse-rows", type=int, default=200_000)
    options.add_argument("--sparse-features", type=int, default=100_000)
    options.add_argument("--memory-limit", default="2GiB")
    options.add_argument("--tmp", default=None, help="where the stores are written")
    options.add_argument("--out", default=None,
                         help="path of the results without suffix (default "
                              "results/scale, or scale_quick with --quick)")
    options.add_argument("--wide", action="store_true",
                        help="run the wide cases (--dense-wide, --sparse-wide) only")
    options.add_argument("--dense-wide", type=_parse_case, nargs="*", metavar="D:ROWS",
                        default=[(100_000, 2048), (100_000, 4096), (1_000_000, 256),
                                 (1_000_000, 1024)])
    options.add_argument("--sparse-wide", type=_parse_case, nargs="*",
                        metavar="D:ROWS:NNZ_PER_ROW", default=[(10_000_000, 100_000, 100)])
    options.add_argument("--sparse-only", action="store_true",
                        help="rerun the sparse case only (the JSON file's other entries "
                             "are kept)")
    args = options.parse_args(argv)
    args.out = args.out or str(result_path("scale", args.quick, ""))
    if args.sparse_only:
        return run_sparse_only(args)
    if args.wide:
        if args.quick:
            args.dense_wide, args.sparse_wide = [(20_000, 512)], [(200_000, 5_000, 20)]
        return run_wide(args)
    if args.quick:
        args.sizes, args.sparse_rows, args.sparse_features = [20_000, 40_000], 5_000, 5_000

    report = {"features": args.features, "sketch_size": args.sketch_size,
              "workers": f"LocalCluster, 2 processes x 1 thread, {args.memory_limit} each",
              "machine": machine_facts(), "dense": []}
    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.tmp) as tmp, \
            local_cluster(memory_limit=args.memory_limit) as client:
        for n in args.sizes:
            path = os.path.join(tmp, f"X{n}.zarr")
            subprocess.run([*dasketch_command(), "make-data", path, "--rows", str(n),
                            "--features", str(args.features), "--quiet"], check=True,
                           capture_output=True)
            wall, sketch_seconds, peak, _ = run_cli(client, path, args.sketch_size,
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
