"""dasketch.sketch of a Parquet dataset, side by side with pyarrow reading it into memory.

An ``n x d`` float64 dataset (columns of decaying scale) is written by pyarrow
with Spark's row groups (about 128 MiB: 65,536 rows at ``d = 256``; snappy).
Each run is a fresh process (``--child``) that reports its wall time, its CPU
time (all its threads: on a machine loaded by other jobs, the time it would
keep its cores busy) and the peak of its resident memory above its level once
the modules are imported (``ru_maxrss``): what pyarrow and dasketch allocate
outside Python's tracking included. Runs, interleaved over ``--repeat``
rounds, best wall time (and best CPU time) of each:

* ``pyarrow.read_table``: ``pyarrow.parquet.read_table`` of the dataset into
  memory (an Arrow table, pyarrow's threads);
* ``read_table + numpy``: that table as one float64 matrix, what an in-memory
  sketch needs first;
* ``dasketch.sketch``: ``dasketch.sketch(path, 32)`` on Dask's threaded
  scheduler, the block tasks reading the row groups;
* ``sketch in memory``: ``dasketch.sketch(X, 32)`` of the float64 matrix
  already in memory (read before the clock starts): the sketch's own
  arithmetic, which no reader can take away.

Every process imports what it runs before the clock starts (it sketches a
Parquet file of a few rows first), so no run pays for imports.

The ratio is the sketch's best wall time over ``pyarrow.read_table``'s
(``cpu_ratio``: of their best CPU times), and its
peak memory is compared with one block's bytes (``RowBlocks.read_bytes``, a
block and a row group). Writes ``results/parquet.json`` and ``.png``.

Run: ``python -m benchmarks.bench_parquet [--quick] [--rows N] [--features D]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_parquet.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import annotated_bars, machine_facts, parser, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SKETCH_SIZE = 32
GROUP_BYTES = 128 * 2 ** 20   # Spark's parquet.block.size
RUNS = ("pyarrow.read_table", "read_table + numpy", "dasketch.sketch", "sketch in memory")


def write_dataset(path, n_rows, n_features, seed=0):
    """Write the dataset in row groups of about :data:`GROUP_BYTES`, one at a
    time (the writer never holds more than one)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    group = max(GROUP_BYTES // (8 * n_features), 1)
    scale = 0.98 ** np.arange(n_features)
    names = [f"f{j}" for j in range(n_features)]
    with pq.ParquetWriter(path, pa.schema([(name, pa.float64()) for name in names])) as writer:
        for start in range(0, n_rows, group):
            block = rng.standard_normal((min(group, n_rows - start), n_features)) * scale
            writer.write_table(pa.table(dict(zip(names, block.T))), row_group_size=group)
    return group


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KiB on Linux


def child(kind, path):
    """One run in this (fresh) process: ``{"wall", "peak_mib", ...}`` on stdout."""
    import pyarrow.parquet as pq

    import dasketch
    from dasketch._blocks import as_row_blocks
    from dasketch._blocks.readers.arrow import fill_rows
    from dasketch.sketching import dense_block_rows as sketch_block_rows

    warm = os.path.join(os.path.dirname(path), f"warm-{os.getpid()}.parquet")
    write_dataset(warm, 256, 8)
    dasketch.sketch(warm, 4)   # every import and start-up a run needs, off the clock
    os.remove(warm)
    X = None
    if kind == "sketch in memory":
        table = pq.read_table(path)
        X = fill_rows(np.empty((table.num_rows, table.num_columns)), table, np.float64)
        del table
    base = _peak_rss_mib()
    facts = {}
    start, start_cpu = time.perf_counter(), time.process_time()
    if kind == "pyarrow.read_table":
        table = pq.read_table(path)
        facts["rows"] = table.num_rows
    elif kind == "read_table + numpy":
        table = pq.read_table(path)
        X = fill_rows(np.empty((table.num_rows, table.num_columns)), table, np.float64)
        facts["rows"] = X.shape[0]
    elif kind == "sketch in memory":
        facts["rows"] = dasketch.sketch(X, SKETCH_SIZE).n_rows
    else:
        sketch = dasketch.sketch(path, SKETCH_SIZE)
        blocks = as_row_blocks(path, default_rows=lambda v, d, sparse: sketch_block_rows(
            SKETCH_SIZE, d))
        facts.update(rows=sketch.n_rows, error_bound=sketch.error_bound,
                     block_rows=blocks.offsets[1], block_read_mib=blocks.read_bytes / 2 ** 20,
                     plan="row-group tasks" if blocks.reader is None else "block tasks")
    wall, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    print(json.dumps({"wall": wall, "cpu": cpu, "peak_mib": max(_peak_rss_mib() - base, 0.0),
                      **facts}))


def run_child(kind, path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_parquet", "--child", kind,
                          path], capture_output=True, text=True, cwd=ROOT, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def plot(report, path):
    import matplotlib.pyplot as plt

    runs = report["runs"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    annotated_bars(left, {name: (runs[name]["wall"], f"{runs[name]['wall']:.1f} s")
                          for name in RUNS}, highlight=("dasketch.sketch",))
    left.set_title(f"{report['rows']:,} x {report['features']} float64 Parquet: "
                   f"sketch / read_table = {report['ratio']:.2f}", fontsize=9)
    annotated_bars(right, {name: (runs[name]["peak_mib"], f"{runs[name]['peak_mib']:.0f} MiB")
                           for name in RUNS}, highlight=("dasketch.sketch",))
    right.set_ylabel("peak resident memory above imports, MiB")
    right.set_title(f"one block + row group: {report['block_read_mib']:.0f} MiB", fontsize=9)
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8, labelrotation=15)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    options = parser(__doc__, "20,000 x 32, seconds")
    options.add_argument("--rows", type=int, default=1_000_000)
    options.add_argument("--features", type=int, default=256)
    options.add_argument("--repeat", type=int, default=3)
    options.add_argument("--child", nargs=2, metavar=("RUN", "PATH"), help=argparse.SUPPRESS)
    args = options.parse_args(argv)
    if args.child:
        return child(*args.child)
    if args.quick:
        args.rows, args.features, args.repeat = 20_000, 32, 1
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "features.parquet")
        group_rows = write_dataset(path, args.rows, args.features)
        rounds = {name: [] for name in RUNS}
        for _ in range(args.repeat):
            for name in RUNS:
                rounds[name].append(run_child(name, path))
                print(name, rounds[name][-1], flush=True)
        file_mib = os.path.getsize(path) / 2 ** 20
    runs = {name: {**min(results, key=lambda r: r["wall"]),
                   "rounds_s": [r["wall"] for r in results],
                   "rounds_cpu_s": [r.get("cpu") for r in results],
                   "peak_mib": max(r["peak_mib"] for r in results)}
            for name, results in rounds.items()}
    sketch = runs["dasketch.sketch"]
    report = {"rows": args.rows, "features": args.features, "sketch_size": SKETCH_SIZE,
              "row_group_rows": group_rows, "file_mib": file_mib,
              "block_rows": sketch["block_rows"], "block_read_mib": sketch["block_read_mib"],
              "ratio": sketch["wall"] / runs["pyarrow.read_table"]["wall"],
              "cpu_ratio": (min(filter(None, sketch["rounds_cpu_s"]), default=np.nan)
                            / min(filter(None, runs["pyarrow.read_table"]["rounds_cpu_s"]),
                                  default=np.nan)),
              "goal_ratio": 1.3, "runs": runs, "machine": machine_facts()}
    print(json.dumps({k: report[k] for k in ("ratio", "block_read_mib")}))
    write_results("parquet", report, plot, quick=args.quick)
    return report


if __name__ == "__main__":
    main()
