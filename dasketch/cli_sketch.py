"""``dasketch sketch``: sketch a zarr data set on a cluster and save the sketch."""

from __future__ import annotations

import os
import time

from dasketch.cli_cluster import _client
from dasketch.cli_format import number, times_power_of_two
from dasketch.cli_output import _check_writable_output, _say
from dasketch.cli_parser import PATH


def _default_sketch_path(path):
    base = os.path.basename(os.path.normpath(str(path))) or "data"
    return os.path.join(os.path.dirname(os.path.normpath(str(path))) or ".",
                        f"{base}.sketch.npz") if "://" not in str(path) else f"{base}.sketch.npz"


def run_sketch(args):
    out = args.out or _default_sketch_path(args.path)
    _check_writable_output(out, args.overwrite, inputs=[args.path])
    import dasketch
    from dasketch._blocks import as_row_blocks

    # Opens the store's metadata here: a missing path, a group without
    # --component or a 1-D array fails before any cluster starts.
    blocks = as_row_blocks(args.path, component=args.component, name=PATH,
                           missing_chunks=args.missing_chunks, block_rows=args.block_rows)
    with _client(args) as client:
        _say(args, f"dashboard: {client.dashboard_link}")
        start = time.perf_counter()
        sketch = dasketch.sketch(blocks, args.sketch_size, method=args.method,
                                 alpha0=args.alpha0, center=args.center,
                                 split_every=args.split_every, client=client,
                                 progress=not args.quiet)
        elapsed = time.perf_counter() - start
    dasketch.save_sketch(sketch, out, overwrite=args.overwrite)
    bound = times_power_of_two(sketch.scaled().error_bound, 2 * sketch.scale_exponent)
    print(f"sketched {sketch.n_rows:,} x {sketch.n_features} in {elapsed:.2f} s "
          f"({number(sketch.n_rows / elapsed)} rows/s); certified bound {bound}; saved {out}")
    return 0
