"""The exact sketch of CuPy blocks on one GPU against its read, ``X @ G`` and the CPU path.

A dense ``n x d`` float64 matrix (2,000,000 x 256; ``--quick``: 100,000 x 64)
with a decaying spectrum is made on the GPU. Timed there, each best of
``--repeat`` after a warm-up and synchronised with the device:

* read: ``X.sum()``, the floor of any pass;
* ``X @ G``: a product with a Gaussian ``d x l`` matrix (``l`` the sketch size);
* GPU sketch: every block of ``--block-rows`` rows sketched in CuPy's array
  namespace by the bridge's block function (``sketch_block``, the exact update
  ``--update``, one Gram and one ``eigh`` per block for ``"block"``), the block
  sketches (on the host) merged by ``merge_all_sketches`` and resized to ``l``;

and on the host, with every core (Dask's threaded scheduler), ``dasketch.sketch``
of the same matrix copied there. Each sketch's spectral error
``||X^T X - B^T B - alpha I||_2`` is measured against the Gram matrix computed on
the GPU, and checked against its certified bound. Writes ``results/gpu.json``
and ``.png``.

Needs CuPy and a CUDA device (``pip install -e '.[gpu]'``); without them it
exits with a message saying so.

Run: ``python -m benchmarks.bench_gpu [--quick]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

import dasketch
from dasketch._blocks import merge_all_sketches, sketch_block

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_gpu.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    annotated_bars,
    best_time,
    machine_facts,
    parser,
    write_results,
)

FULL = (2_000_000, 256)
QUICK = (100_000, 64)


def gpu_or_exit():
    """CuPy, or exit with a message when it or a CUDA device is missing."""
    try:
        import array_api_compat  # noqa: F401 - CuPy's array namespace needs it
        import cupy
    except ImportError as error:
        sys.exit(f"bench_gpu needs CuPy and array-api-compat (pip install -e '.[gpu]'): "
                 f"{error}")
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError as error:
        count, reason = 0, str(error)
    else:
        reason = "no device"
    if count == 0:
        sys.exit(f"bench_gpu needs a CUDA device; CuPy finds none ({reason})")
    return cupy


def device_name(cupy):
    """The name of the current CUDA device."""
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def gpu_time(cupy, func, repeat):
    """Best wall time of ``repeat`` synchronised runs of ``func`` after one warm-up,
    and the last result."""
    result = func()
    cupy.cuda.Device().synchronize()
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        cupy.cuda.Device().synchronize()
        best = min(best, time.perf_counter() - start)
    return best, result


def gpu_sketch(X, sketch_size, block_rows, update):
    """The sketch of the CuPy matrix ``X``: each block by ``sketch_block``, then merged."""
    n = X.shape[0]
    parts = [sketch_block(X[start:start + block_rows], start, min(start + block_rows, n),
                          sketch_size=sketch_size, method="rfd", alpha0=0.0, center=False,
                          update=update, failure_probability=0.0, seed=0)
             for start in range(0, n, block_rows)]
    return merge_all_sketches(*parts).resize(sketch_size)


def spectral_error(gram, sketch):
    """``||X^T X - (B^T B + alpha I)||_2`` on the host."""
    return float(np.linalg.norm(gram - sketch.covariance(), 2))


def main(argv=None):
    options = parser(__doc__, "100,000 x 64, two repeats, seconds")
    options.add_argument("--repeat", type=int, default=3)
    options.add_argument("--sketch-size", type=int, default=32)
    options.add_argument("--block-rows", type=int, default=65536)
    options.add_argument("--update", default="block", choices=("block", "auto", "buffered"))
    args = options.parse_args(argv)
    cupy = gpu_or_exit()
    n, d = QUICK if args.quick else FULL
    repeat = min(args.repeat, 2) if args.quick else args.repeat
    l = args.sketch_size
    rng = cupy.random.default_rng(0)
    X = rng.standard_normal((n, d)) * cupy.linspace(4.0, 0.1, d)
    G = rng.standard_normal((d, l))
    seconds, errors, bounds = {}, {}, {}
    seconds["read, X.sum()"], _ = gpu_time(cupy, lambda: X.sum(), repeat)
    seconds["X @ G"], _ = gpu_time(cupy, lambda: X @ G, repeat)
    seconds["GPU sketch"], ours = gpu_time(
        cupy, lambda: gpu_sketch(X, l, args.block_rows, args.update), repeat)
    gram = cupy.asnumpy(X.T @ X)
    host = cupy.asnumpy(X)
    seconds["CPU sketch (all cores)"], cpu = best_time(lambda: dasketch.sketch(host, l), repeat)
    for name, sketch in (("GPU sketch", ours), ("CPU sketch (all cores)", cpu)):
        errors[name], bounds[name] = spectral_error(gram, sketch), sketch.error_bound
    read = seconds["read, X.sum()"]
    report = {
        "n": n, "d": d, "sketch_size": l, "block_rows": args.block_rows,
        "update": args.update, "repeat": repeat,
        "device": device_name(cupy),
        "cupy": cupy.__version__, "seconds": seconds,
        "over_read": {k: v / read for k, v in seconds.items()},
        "cpu_over_gpu_sketch": seconds["CPU sketch (all cores)"] / seconds["GPU sketch"],
        "spectral_error": errors, "error_bound": bounds,
        "bound_holds": {k: errors[k] <= bounds[k] for k in errors},
        "gpu_over_cpu_error": errors["GPU sketch"] / errors["CPU sketch (all cores)"],
        "machine": machine_facts(),
    }
    for key in ("seconds", "over_read", "spectral_error", "bound_holds"):
        print(key, report[key], flush=True)
    write_results("gpu", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    annotated_bars(ax, {k: (v, f"{v * 1e3:.3g} ms\n{report['over_read'][k]:.3g}x read")
                        for k, v in report["seconds"].items()},
                   highlight=("GPU sketch",))
    ax.set_yscale("log")
    ax.set_title(f"{report['n']:,} x {report['d']} float64, l = {report['sketch_size']}, "
                 f"{report['device']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
