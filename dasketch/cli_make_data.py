"""``dasketch make-data``: write a synthetic dense or sparse zarr data set."""

from __future__ import annotations

import time

from dasketch.cli_format import size
from dasketch.cli_output import _check_writable_output, _ChunkProgress


def run_make_data(args):
    _check_writable_output(args.path, args.overwrite, option="PATH")
    from dasketch.datasets import write_sparse_synthetic, write_synthetic

    start = time.perf_counter()
    progress = _ChunkProgress(args, f"writing {args.path}")
    if args.density is None:
        X = write_synthetic(args.path, args.rows, args.features, chunk_rows=args.chunks,
                            random_state=args.seed, overwrite=args.overwrite,
                            progress=progress)
        what = f"dense {X.shape[0]:,} x {X.shape[1]} float64 ({size(X.nbytes)})"
    else:
        n, d, nnz = write_sparse_synthetic(args.path, args.rows, args.features,
                                           density=args.density,
                                           chunk_rows=args.chunks or 16384,
                                           random_state=args.seed, overwrite=args.overwrite,
                                           progress=progress)
        what = f"sparse {n:,} x {d} with {nnz:,} nonzeros"
    print(f"wrote {what} to {args.path} in {time.perf_counter() - start:.1f} s")
    return 0
