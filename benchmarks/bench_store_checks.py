"""What the store checks cost: a checked read of a zarr store against a plain one.

dasketch fingerprints a store when it opens it (metadata, key listing, a ``stat``
of every local chunk file), compares the fingerprint once per worker, and has
every read task ``stat`` its chunk files before and after reading
(:mod:`dasketch.storage.store_checks`). This script times ``X.sum()`` over the same
local store read by ``dasketch._blocks.stores.open_zarr_array`` (checks included, opening
included in every repeat) and by ``dask.array.from_zarr`` (no checks), side by
side in one process on the threaded scheduler, for stores of several chunk
counts, and writes ``results/store_checks.json`` and ``.png``.

Run: ``python -m benchmarks.bench_store_checks [--quick]``.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da

from dasketch._blocks.stores import open_zarr_array
from dasketch.datasets import write_synthetic

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_store_checks.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import best_time, machine_facts, parser, write_results  # noqa: E402


def measure(n_rows, n_features, chunk_rows, repeat, folder):
    path = os.path.join(folder, f"X-{n_rows}-{chunk_rows}.zarr")
    write_synthetic(path, n_rows, n_features, chunk_rows=chunk_rows)
    with dask.config.set(scheduler="threads"):
        plain, _ = best_time(lambda: da.from_zarr(path).sum().compute(), repeat)
        checked, _ = best_time(lambda: open_zarr_array(path).sum().compute(), repeat)
        start = time.perf_counter()
        open_zarr_array(path)
        opening = time.perf_counter() - start
    return {"rows": n_rows, "features": n_features, "chunk_rows": chunk_rows,
            "chunks": -(-n_rows // chunk_rows), "bytes": n_rows * n_features * 8,
            "plain_s": plain, "checked_s": checked, "ratio": checked / plain,
            "opening_s": opening}


def main(argv=None):
    options = parser(__doc__, "small stores, seconds")
    options.add_argument("--repeat", type=int, default=5)
    args = options.parse_args(argv)
    if args.quick:
        cases = [(20_000, 32, 1_000), (20_000, 32, 200)]
        args.repeat = min(args.repeat, 2)
    else:
        cases = [(400_000, 64, 8_000), (400_000, 64, 2_000), (400_000, 64, 500)]
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(*case, args.repeat, folder) for case in cases]
    for row in rows:
        print(f"{row['chunks']:5d} chunks, {row['bytes'] / 2 ** 20:6.0f} MiB: plain "
              f"{row['plain_s']:.3f} s, checked {row['checked_s']:.3f} s "
              f"({row['ratio']:.3f}x), opening {row['opening_s'] * 1e3:.1f} ms")
    result = {"machine": machine_facts(), "repeat": args.repeat, "cases": rows}
    write_results("store_checks", result, plot, quick=args.quick)
    return rows


def plot(result, path):
    import matplotlib.pyplot as plt

    rows = result["cases"]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([r["chunks"] for r in rows], [r["ratio"] for r in rows], "o-")
    ax.axhline(1.0, color="grey", ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("chunks in the store")
    ax.set_ylabel("checked read / plain read (time)")
    ax.set_title("X.sum() of a local zarr store, best of %d" % result["repeat"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
