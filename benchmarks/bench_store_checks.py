"""What the store checks cost: a checked read of a zarr store against a plain one.

dasketch fingerprints a store when it opens it (metadata, key listing, a ``stat``
of every local chunk file), compares the fingerprint once per worker, and has
every read task ``stat`` its chunk files before and after reading
(:mod:`dasketch.store_checks`). This script times ``X.sum()`` over the same
local store read by ``dasketch.io.open_zarr_array`` (checks included, opening
included in every repeat) and by ``dask.array.from_zarr`` (no checks), side by
side in one process on the threaded scheduler, for stores of several chunk
counts, and writes ``results/store_checks.json`` and ``.png``.

Run: ``python benchmarks/bench_store_checks.py [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import dask  # noqa: E402
import dask.array as da  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from dasketch.datasets import write_synthetic  # noqa: E402
from dasketch.io import open_zarr_array  # noqa: E402
from timing import best_time  # noqa: E402

RESULTS = Path(__file__).parent / "results"


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small stores, seconds")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    if args.quick:
        cases = [(20_000, 32, 1_000), (20_000, 32, 200)]
    else:
        cases = [(400_000, 64, 8_000), (400_000, 64, 2_000), (400_000, 64, 500)]
    with tempfile.TemporaryDirectory() as folder:
        rows = [measure(*case, args.repeat, folder) for case in cases]
    for row in rows:
        print(f"{row['chunks']:5d} chunks, {row['bytes'] / 2 ** 20:6.0f} MiB: plain "
              f"{row['plain_s']:.3f} s, checked {row['checked_s']:.3f} s "
              f"({row['ratio']:.3f}x), opening {row['opening_s'] * 1e3:.1f} ms")
    if args.quick:
        return rows
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                          "load_average": os.getloadavg()},
              "repeat": args.repeat, "cases": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "store_checks.json").write_text(json.dumps(result, indent=2))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot([r["chunks"] for r in rows], [r["ratio"] for r in rows], "o-")
    ax.axhline(1.0, color="grey", ls=":")
    ax.set_xscale("log")
    ax.set_xlabel("chunks in the store")
    ax.set_ylabel("checked read / plain read (time)")
    ax.set_title("X.sum() of a local zarr store, best of %d" % args.repeat, fontsize=9)
    fig.tight_layout()
    fig.savefig(RESULTS / "store_checks.png", dpi=110)
    return rows


if __name__ == "__main__":
    main()
