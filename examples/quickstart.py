"""Quickstart: write a zarr store, sketch it on an embedded Dask cluster, check the bound.

Run with ``python examples/quickstart.py [--rows N] [--features D] [--sketch-size L]``.
"""

import argparse
import os
import tempfile
import time

import numpy as np
from distributed import Client, LocalCluster

import dasketch


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--features", type=int, default=128)
    parser.add_argument("--sketch-size", type=int, default=32)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="dasketch-quickstart-") as tmp:
        path = os.path.join(tmp, "data.zarr")
        X = dasketch.write_synthetic(path, args.rows, args.features, decay=0.9,
                                     chunk_rows=16384)
        print(f"wrote {path}: {X.shape[0]:,} x {X.shape[1]} float64, "
              f"{X.nbytes / 2**20:.0f} MiB in {X.numblocks[0]} chunks")
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                          dashboard_address=None) as cluster, Client(cluster) as client:
            start = time.perf_counter()
            sketch = dasketch.sketch(path, args.sketch_size, client=client)
            elapsed = time.perf_counter() - start
            gram = client.compute(X.T @ X).result()
        error = np.linalg.norm(gram - sketch.covariance(), 2)
        top = np.linalg.eigvalsh(gram)[-1]
        print(sketch)
        print(f"sketched in {elapsed:.2f} s on 2 worker processes")
        print(f"certified bound  ||A^T A - (B^T B + alpha I)||_2 <= {sketch.error_bound:.6g}"
              f"  ({sketch.error_bound / top:.4%} of ||A||_2^2)")
        print(f"measured error   ||A^T A - (B^T B + alpha I)||_2  = {error:.6g}"
              f"  ({error / top:.4%} of ||A||_2^2)")
        print("bound holds" if error <= sketch.error_bound * (1 + 1e-9) else "BOUND VIOLATED")
        return error <= sketch.error_bound * (1 + 1e-9)


if __name__ == "__main__":
    raise SystemExit(0 if main() else 1)
