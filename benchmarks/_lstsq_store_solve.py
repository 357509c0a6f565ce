"""One timed ``sketch_lstsq`` from a zarr store, by whichever ``dasketch`` is imported.

:mod:`benchmarks.bench_lstsq_store` calls :func:`solve` in its own process (the
code of this tree) and runs this file as a script in a subprocess whose
``PYTHONPATH`` puts another checkout first (the code before a change)::

    python benchmarks/_lstsq_store_solve.py A_STORE B_STORE OUT SEED BLOCK_ROWS

which solves after a warm-up on a small in-memory problem (imports, first
calls) and writes ``OUT.npy`` (the solution) and ``OUT.json`` (what
:func:`solve` measured). This module imports numpy, dask and ``dasketch`` only,
so that, run as a file, it sees no other copy of the package.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np


def bytes_read():
    """Bytes this process (all its threads) has read through system calls so far
    (``rchar`` of ``/proc/self/io``, page cache hits included), or None where
    the system does not count them."""
    try:
        for line in Path("/proc/self/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def warm_up():
    """A small in-memory solve: imports and first calls out of the timings."""
    from dasketch.linear_model import sketch_lstsq

    A = np.random.default_rng(0).standard_normal((2000, 5))
    sketch_lstsq(A, A.sum(axis=1), random_state=0)


def solve(a_store, b_store, seed, block_rows, **options):
    """``sketch_lstsq(a_store, da.from_zarr(b_store), ...)`` on Dask's threaded
    scheduler: ``(x, facts)``, the facts being its seconds, the bytes this
    process read meanwhile, the solver's iterations and passes over ``A`` and the
    result's diagnostics (the cache choice where the result has one)."""
    import dasketch
    from dasketch.linear_model import sketch_lstsq

    with dask.config.set(scheduler="threads"):
        start_bytes, start = bytes_read(), time.perf_counter()
        res = sketch_lstsq(a_store, da.from_zarr(b_store), random_state=seed,
                           block_rows=block_rows, **options)
        seconds = time.perf_counter() - start
        end_bytes = bytes_read()
    cache = getattr(res, "cache", None)
    facts = dict(seconds=seconds,
                 bytes_read=None if start_bytes is None else end_bytes - start_bytes,
                 n_iter=int(res.n_iter), n_passes=int(getattr(res, "n_passes", 0)),
                 istop=int(res.istop),
                 optimality_residual=float(res.optimality_residual),
                 coef_error_bound=None if res.coef_error_bound is None
                 else float(res.coef_error_bound),
                 condition_number_estimate=float(res.condition_number_estimate),
                 cache=None if cache is None else dict(cached=bool(cache.cached),
                                                       reason=cache.reason),
                 dasketch=str(Path(dasketch.__file__).parent))
    return res.x, facts


def main(argv):
    a_store, b_store, out, seed, block_rows = argv
    warm_up()
    x, facts = solve(a_store, b_store, int(seed), int(block_rows))
    np.save(f"{out}.npy", x)
    Path(f"{out}.json").write_text(json.dumps(facts))


if __name__ == "__main__":
    main(sys.argv[1:])
