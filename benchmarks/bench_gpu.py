"""dasketch on one GPU against the GPU's read, ``X @ G`` and the CPU path on every core.

Each case runs the public entry point on a CuPy array and on the same matrix in
host memory (numpy, Dask's threaded scheduler on every core), side by side in
this process; GPU times are synchronised with the device. Every time is the
best of ``--repeat`` runs after a warm-up on the GPU (the first call compiles
CuPy's kernels and loads cuBLAS and cuSOLVER).

* ``sketch``: ``dasketch.sketch(X, l)`` of a dense ``n x d`` float64 matrix
  with a decaying spectrum (2,000,000 x 256, ``l = 32``; ``--quick``: 100,000 x
  64), against the read (``X.sum()``, the floor of any pass) and ``X @ G`` with a
  Gaussian ``d x l`` ``G``. Each sketch's spectral error ``||X^T X - B^T B -
  alpha I||_2`` is measured against the Gram matrix computed on the GPU and
  checked against its certified bound.
* ``pca``: ``SketchPCA(n_components=8, sketch_size=l).fit`` of the same matrix,
  its explained variances against the CPU path's, and its certified
  ``eigenvalue_bound_``.
* ``ridge`` and ``logistic``: ``dual_random_projection`` of weakly regularised
  ridge and logistic regression on low-rank-plus-noise data (6,000 x 24,000,
  ``m = 320``, ``alpha`` = 1e-3 of the mean eigenvalue, ``tol = 1e-6``, as in
  ``bench_cores.py``; ``--quick``: 1,000 x 3,000, ``m = 60``): seconds, passes,
  the coefficients' difference from the CPU path's and both optimality residuals.
* ``lstsq``: ``sketch_lstsq`` of a tall least-squares problem (500,000 x 128;
  ``--quick``: 20,000 x 32): seconds, the solutions' difference and both
  optimality residuals.

A case that raises is recorded with its error, and the others still run.
``--library array_api_strict`` runs the same code with ``array_api_strict``
standing for CuPy on the CPU: a check of the script and of the namespace-generic
paths, whose times say nothing about a GPU. Writes ``results/gpu.json`` and
``.png`` (``gpu_quick`` with ``--quick``).

Needs CuPy and a CUDA device for ``--library cupy`` (``pip install -e '.[gpu]'``);
without them it exits with a message saying so.

Run: ``python -m benchmarks.bench_gpu [--quick] [--library {cupy,array_api_strict}]
[--cases sketch,pca,ridge,logistic,lstsq]``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
import warnings
from functools import partial
from pathlib import Path

import numpy as np

import dasketch

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_gpu.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    annotated_bars,
    best_time,
    machine_facts,
    parser,
    relative_error,
    write_results,
)
from benchmarks.bench_cores import low_rank_plus_noise  # noqa: E402

CASES = ("sketch", "pca", "ridge", "logistic", "lstsq")
SIZES = {  # case: (full, quick)
    "sketch": ((2_000_000, 256), (100_000, 64)),
    "drp": ((6000, 24000, 40, 320), (1000, 3000, 20, 60)),
    "lstsq": ((500_000, 128), (20_000, 32)),
}


class Device:
    """The array library standing for the GPU: moves host arrays there, waits
    for its work, names itself."""

    def __init__(self, library):
        self.library = library
        if library == "cupy":
            self.xp = gpu_or_exit()
            self.name = device_name(self.xp)
            self.version = self.xp.__version__
        else:
            import array_api_strict

            self.xp, self.name = array_api_strict, "array_api_strict on the CPU"
            self.version = array_api_strict.__version__

    def put(self, array):
        return self.xp.asarray(array)

    def host(self, array):
        return self.xp.asnumpy(array) if self.library == "cupy" else np.from_dlpack(array)

    def synchronize(self):
        if self.library == "cupy":
            self.xp.cuda.Device().synchronize()

    def time(self, func, repeat):
        """Best synchronised wall time of ``repeat`` runs of ``func`` after one
        warm-up, and the last result."""
        result = func()
        self.synchronize()
        best = np.inf
        for _ in range(repeat):
            start = time.perf_counter()
            result = func()
            self.synchronize()
            best = min(best, time.perf_counter() - start)
        return best, result


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


def side_by_side(device, gpu_run, cpu_run, repeat, cpu_repeat):
    """Seconds and results of ``gpu_run`` (on the device) and ``cpu_run``."""
    gpu_seconds, gpu_result = device.time(gpu_run, repeat)
    cpu_seconds, cpu_result = best_time(cpu_run, cpu_repeat)
    return {"gpu_s": gpu_seconds, "cpu_s": cpu_seconds,
            "cpu_over_gpu": cpu_seconds / gpu_seconds}, gpu_result, cpu_result


def decaying(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * np.linspace(4.0, 0.1, shape[1])


def sketch_case(device, X, host, args, repeat):
    l = args.sketch_size
    G = device.put(np.random.default_rng(1).standard_normal((X.shape[1], l)))
    read, _ = device.time(lambda: device.xp.sum(X), repeat)
    product, _ = device.time(lambda: X @ G, repeat)
    record, ours, cpu = side_by_side(device, lambda: dasketch.sketch(X, l),
                                     lambda: dasketch.sketch(host, l), repeat, repeat)
    parts = {"X^T X": lambda: X.T @ X, "max and min": lambda: (device.xp.max(X),
                                                               device.xp.min(X))}
    gram_on_device = X.T @ X
    parts["eigh of the d x d Gram"] = lambda: device.xp.linalg.eigh(gram_on_device)
    record["parts_s"] = {}
    for name, func in parts.items():
        try:
            record["parts_s"][name] = device.time(func, repeat)[0]
        except Exception as error:  # a part this CuPy lacks is recorded
            record["parts_s"][name] = f"{type(error).__name__}: {error}"
    gram = device.host(gram_on_device)
    errors = {name: float(np.linalg.norm(gram - s.covariance(), 2))
              for name, s in (("gpu", ours), ("cpu", cpu))}
    record.update({
        "read_s": read, "X_at_G_s": product, "gpu_over_read": record["gpu_s"] / read,
        "spectral_error": errors, "error_bound": {"gpu": ours.error_bound,
                                                  "cpu": cpu.error_bound},
        "bound_holds": {"gpu": errors["gpu"] <= ours.error_bound,
                        "cpu": errors["cpu"] <= cpu.error_bound},
        "gpu_over_cpu_error": errors["gpu"] / errors["cpu"],
    })
    return record


def pca_case(device, X, host, args, repeat):
    def fit(data):
        return dasketch.SketchPCA(n_components=8, sketch_size=args.sketch_size).fit(data)

    record, ours, cpu = side_by_side(device, lambda: fit(X), lambda: fit(host), repeat,
                                     repeat)
    record.update({
        "explained_variance_difference": float(np.max(
            np.abs(ours.explained_variance_ - cpu.explained_variance_)
            / cpu.explained_variance_)),
        "eigenvalue_bound": {"gpu": float(ours.eigenvalue_bound_),
                             "cpu": float(cpu.eigenvalue_bound_)},
    })
    return record


def drp_case(device, loss, args, repeat):
    from dasketch.linear_model import dual_random_projection

    n, d, rank, m = SIZES["drp"][int(args.quick)]
    host, y = low_rank_plus_noise(n, d, rank)
    if loss == "logistic":
        y = np.sign(y - np.median(y))
    alpha = 1e-3 * float(np.sum(host * host)) / min(host.shape)
    params = dict(loss=loss, alpha=alpha, sketch_size=m, tol=1e-6, random_state=0,
                  fit_intercept=False)
    X = device.put(host)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record, ours, cpu = side_by_side(
            device, lambda: dual_random_projection(X, y, **params),
            lambda: dual_random_projection(host, y, **params), repeat,
            max(1, min(repeat, 2)))
    record.update({
        "shape": [n, d], "m": m, "passes": {"gpu": ours.n_passes, "cpu": cpu.n_passes},
        "coef_difference": relative_error(ours.coef, cpu.coef),
        "optimality_residual": {"gpu": float(np.max(ours.optimality_residual)),
                                "cpu": float(np.max(cpu.optimality_residual))},
        "converged": {"gpu": bool(ours.converged), "cpu": bool(cpu.converged)},
    })
    return record


def lstsq_case(device, args, repeat):
    from dasketch.linear_model import sketch_lstsq

    n, d = SIZES["lstsq"][int(args.quick)]
    host = decaying((n, d), seed=3)
    b = host @ np.random.default_rng(4).standard_normal(d) + 0.1 * np.random.default_rng(
        5).standard_normal(n)
    A = device.put(host)
    record, ours, cpu = side_by_side(device, lambda: sketch_lstsq(A, b, random_state=0),
                                     lambda: sketch_lstsq(host, b, random_state=0), repeat,
                                     max(1, min(repeat, 2)))
    record.update({
        "shape": [n, d], "solution_difference": relative_error(ours.x, cpu.x),
        "optimality_residual": {"gpu": float(np.max(ours.optimality_residual)),
                                "cpu": float(np.max(cpu.optimality_residual))},
    })
    return record


def run_case(name, func, results):
    print(f"{name} ...", flush=True)
    try:
        results[name] = func()
    except Exception as error:  # recorded, and the other cases still run
        traceback.print_exc()
        results[name] = {"error": f"{type(error).__name__}: {error}"}
    print(name, results[name], flush=True)


def main(argv=None):
    options = parser(__doc__, "small matrices, two repeats, seconds")
    options.add_argument("--repeat", type=int, default=3)
    options.add_argument("--sketch-size", type=int, default=32)
    options.add_argument("--library", default="cupy", choices=("cupy", "array_api_strict"))
    options.add_argument("--cases", default=",".join(CASES))
    args = options.parse_args(argv)
    device = Device(args.library)
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        options.error(f"--cases: unknown {unknown}; choose from {CASES}")
    repeat = min(args.repeat, 2) if args.quick else args.repeat
    results = {}
    if {"sketch", "pca"} & set(cases):
        host = decaying(SIZES["sketch"][int(args.quick)])
        X = device.put(host)
        if "sketch" in cases:
            run_case("sketch", lambda: sketch_case(device, X, host, args, repeat), results)
        if "pca" in cases:
            run_case("pca", lambda: pca_case(device, X, host, args, repeat), results)
        del X, host
    for case, loss in (("ridge", "squared"), ("logistic", "logistic")):
        if case in cases:
            run_case(case, partial(drp_case, device, loss, args, repeat), results)
    if "lstsq" in cases:
        run_case("lstsq", lambda: lstsq_case(device, args, repeat), results)
    report = {
        "sizes": {k: v[int(args.quick)] for k, v in SIZES.items()},
        "sketch_size": args.sketch_size, "repeat": repeat, "library": args.library,
        "device": device.name, "library_version": device.version,
        "cpu_cores": os.cpu_count(), "cases": results, "machine": machine_facts(),
    }
    write_results("gpu", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    cases = {k: v for k, v in report["cases"].items() if "gpu_s" in v}
    fig, ax = plt.subplots(figsize=(8, 4))
    bars = {}
    for name, case in cases.items():
        bars[f"{name}\nGPU"] = (case["gpu_s"], f"{case['gpu_s'] * 1e3:.3g} ms")
        bars[f"{name}\nCPU"] = (case["cpu_s"], f"{case['cpu_over_gpu']:.3g}x")
    if not bars:
        bars = {"no case ran": (1.0, "")}
    annotated_bars(ax, bars, highlight=tuple(k for k in bars if k.endswith("GPU")))
    ax.set_yscale("log")
    ax.set_title(f"{report['device']} against {report['cpu_cores']} CPU cores", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
