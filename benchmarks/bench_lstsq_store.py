"""sketch_lstsq from a zarr store, before and after a change, against NumPy and Dask's TSQR.

``A`` (default 1,000,000 x 200, ``cond(A) = 1e6``, float64, from
``dasketch.datasets.ill_conditioned_regression``) is written to a zarr store in
row chunks of ``dasketch._blocks.default_block_rows(d)`` rows (about 32 MiB;
16,384 rows, 25 MiB at d = 200), ``b`` to a second store with the same row
chunks, both in a temporary directory removed at the end. Then, side by side in
``--repeat`` interleaved rounds (best of them), all on Dask's threaded scheduler
(``dask.config`` ``scheduler="threads"``, one thread per core) with NumPy's BLAS
on every core:

* the read of ``A`` by Dask's threads, ``da.from_zarr(store).sum()``: what a
  pass over the store costs;
* ``sketch_lstsq(store, da.from_zarr(b_store))`` of this tree, to its default
  ``tol``, with ``cache="auto"`` and ``cache=False`` (its default solver), and
  with ``solver="lsqr"`` and ``cache="auto"``, ``block_rows`` the store's chunk
  rows;
* the same call by the code of another checkout (``--before PATH``, e.g. the
  tree before the bridge change, whose ``sketch_lstsq`` has no ``cache``
  argument and reads the store on every pass), in a subprocess with
  ``PYTHONPATH=PATH`` that is timed around the call only, after a warm-up
  (``benchmarks/_lstsq_store_solve.py``); left out, with a note, without
  ``--before``;
* ``numpy.linalg.lstsq`` in memory, the read of the store into memory
  (``zarr.open_array(store)[:]``) and the solve timed separately;
* ``dask.array.linalg.lstsq`` (TSQR) on ``da.from_zarr`` of the two stores.

Recorded per method: seconds, the relative error of ``x`` against NumPy's
solution, and for ``sketch_lstsq`` its iterations and passes, the cache choice, its
optimality residual and error bound (``coef_error_bound``, and over the norm of
NumPy's solution), and the store reads: the bytes the process
read during the call (``rchar`` of ``/proc/self/io``, page-cache hits included)
over the bytes of ``A``'s store on disk (a pass over ``A`` is one read; ``b``
adds ``1 / d``). Ratios: sketch_lstsq (both solvers) over the read, LSQR over
the refinement, NumPy (read + solve, and solve alone) / sketch_lstsq,
TSQR / sketch_lstsq, before / after (against ``cache="auto"`` and ``cache=False``).

Writes benchmarks/results/lstsq_store.json and lstsq_store.png.
Run: ``python -m benchmarks.bench_lstsq_store [--quick] [--before PATH]``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr

from dasketch._blocks import default_block_rows
from dasketch.datasets import ill_conditioned_regression

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_lstsq_store.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    annotated_bars,
    machine_facts,
    parser,
    relative_error,
    side_by_side,
    write_results,
)
from benchmarks._lstsq_store_solve import solve, warm_up  # noqa: E402

SOLVE_SCRIPT = Path(__file__).resolve().parent / "_lstsq_store_solve.py"
CONDITION = 1e6


def write_stores(n, d, folder, seed, chunk_rows):
    """``A`` and ``b`` as two zarr stores in ``folder``: their paths and the bytes
    of ``A``'s store on disk."""
    A, b, _ = ill_conditioned_regression(n, d, condition_number=CONDITION, random_state=seed)
    a_store, b_store = os.path.join(folder, "A.zarr"), os.path.join(folder, "b.zarr")
    da.to_zarr(da.from_array(A, chunks=(chunk_rows, d)), a_store)
    da.to_zarr(da.from_array(b, chunks=(chunk_rows,)), b_store)
    stored = sum(p.stat().st_size for p in Path(a_store).rglob("*") if p.is_file())
    return a_store, b_store, stored


def numpy_lstsq(a_store, b_store):
    """Read both stores into memory, then ``numpy.linalg.lstsq``, timed apart."""
    start = time.perf_counter()
    A, b = zarr.open_array(a_store, mode="r")[:], zarr.open_array(b_store, mode="r")[:]
    read = time.perf_counter() - start
    start = time.perf_counter()
    x = np.linalg.lstsq(A, b, rcond=None)[0]
    solve_s = time.perf_counter() - start
    return x, dict(seconds=read + solve_s, read_seconds=read, solve_seconds=solve_s)


def dask_read(a_store):
    """The read of ``A`` by Dask's threads, as every pass from the store reads it:
    ``da.from_zarr(a_store).sum()``."""
    start = time.perf_counter()
    da.from_zarr(a_store).sum().compute()
    return None, dict(seconds=time.perf_counter() - start)


def dask_tsqr(a_store, b_store):
    """``dask.array.linalg.lstsq`` (TSQR) on ``da.from_zarr`` of the stores."""
    start = time.perf_counter()
    x = da.linalg.lstsq(da.from_zarr(a_store), da.from_zarr(b_store))[0].compute()
    return x, dict(seconds=time.perf_counter() - start)


def before_subprocess(checkout, a_store, b_store, seed, chunk_rows, folder):
    """:func:`benchmarks._lstsq_store_solve.solve` by the code of ``checkout``, in a
    subprocess; its solution and facts (``process_seconds``: the whole
    subprocess, interpreter start and warm-up included)."""
    out = os.path.join(folder, "before")
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(SOLVE_SCRIPT), a_store, b_store, out,
                           str(seed), str(chunk_rows)], capture_output=True, text=True,
                          env=env, cwd=folder)
    if done.returncode:
        raise RuntimeError(f"the solve by {checkout} failed:\n{done.stderr[-4000:]}")
    facts = json.loads(Path(f"{out}.json").read_text())
    if Path(facts["dasketch"]).resolve() != Path(checkout, "dasketch").resolve():
        raise RuntimeError(f"the subprocess imported dasketch from {facts['dasketch']}, "
                           f"not from {checkout}")
    facts["process_seconds"] = time.perf_counter() - start
    return np.load(f"{out}.npy"), facts


def run(n, d, chunk_rows, seed, repeat, before, folder):
    a_store, b_store, stored = write_stores(n, d, folder, seed, chunk_rows)
    methods = {
        "numpy.linalg.lstsq (in memory)": lambda: numpy_lstsq(a_store, b_store),
        "dask TSQR (from zarr)": lambda: dask_tsqr(a_store, b_store),
        "read of A (da.from_zarr(A).sum())": lambda: dask_read(a_store),
        'sketch_lstsq, cache="auto"': lambda: solve(a_store, b_store, seed, chunk_rows,
                                                    cache="auto"),
        'sketch_lstsq, solver="lsqr", cache="auto"': lambda: solve(
            a_store, b_store, seed, chunk_rows, cache="auto", solver="lsqr"),
        "sketch_lstsq, cache=False": lambda: solve(a_store, b_store, seed, chunk_rows,
                                                   cache=False),
    }
    if before is not None:
        methods["sketch_lstsq, before"] = lambda: before_subprocess(
            before, a_store, b_store, seed, chunk_rows, folder)
    rounds = {name: [] for name in methods}

    def recorded(name, func):
        def call():
            x, facts = func()
            rounds[name].append(facts)
            return x
        return call

    with dask.config.set(scheduler="threads"):
        warm_up()
        harness, solutions = side_by_side(
            {name: recorded(name, func) for name, func in methods.items()}, repeat)
    reference = solutions["numpy.linalg.lstsq (in memory)"]
    results = {}
    for name, facts in rounds.items():
        best = dict(min(facts, key=lambda f: f["seconds"]))
        best["rounds_seconds"] = [f["seconds"] for f in facts]
        if solutions[name] is None:  # the read alone
            results[name] = best
            continue
        best["relative_error"] = relative_error(solutions[name], reference)
        if best.get("coef_error_bound") is not None:
            best["relative_error_bound"] = best["coef_error_bound"] / np.linalg.norm(reference)
        if best.get("bytes_read") is not None:
            best["store_reads"] = best["bytes_read"] / stored
        best["harness_wall_seconds"] = harness[name]["wall"]
        results[name] = best
    return dict(n=n, d=d, condition_number=CONDITION, chunk_rows=chunk_rows,
                chunks=-(-n // chunk_rows), store_bytes=stored,
                reference_norm=float(np.linalg.norm(reference)),
                decoded_bytes=n * d * 8, solvers=results, ratios=ratios(results))


def ratios(results):
    """How many times longer the peers take than sketch_lstsq (and the code before
    than the current one)."""
    auto = results['sketch_lstsq, cache="auto"']["seconds"]
    streamed = results["sketch_lstsq, cache=False"]["seconds"]
    numpy_run = results["numpy.linalg.lstsq (in memory)"]
    read = results["read of A (da.from_zarr(A).sum())"]["seconds"]
    out = {"sketch_lstsq auto / read": auto / read,
           "sketch_lstsq lsqr auto / read":
               results['sketch_lstsq, solver="lsqr", cache="auto"']["seconds"] / read,
           "lsqr / refinement (both auto)":
               results['sketch_lstsq, solver="lsqr", cache="auto"']["seconds"] / auto,
           "numpy (read + solve) / sketch_lstsq auto": numpy_run["seconds"] / auto,
           "numpy (solve only) / sketch_lstsq auto": numpy_run["solve_seconds"] / auto,
           "tsqr / sketch_lstsq auto": results["dask TSQR (from zarr)"]["seconds"] / auto,
           "tsqr / sketch_lstsq cache=False":
               results["dask TSQR (from zarr)"]["seconds"] / streamed}
    if "sketch_lstsq, before" in results:
        before = results["sketch_lstsq, before"]["seconds"]
        out["before / after auto"] = before / auto
        out["before / after cache=False"] = before / streamed
    return out


def plot(report, path):
    import matplotlib.pyplot as plt

    solvers = report["solvers"]

    def note(facts):
        error = facts.get("relative_error", 0.0)
        text = f"{facts['seconds']:.1f} s\n" + (f"err {error:.0e}" if error else "reference"
                                                 if "relative_error" in facts else "read")
        if "n_iter" in facts:
            text += f"\n{facts['n_iter']} it."
        if "store_reads" in facts:
            text += f"\n{facts['store_reads']:.1f} reads"
        if "read_seconds" in facts:
            text += f"\n(read {facts['read_seconds']:.2f} s)"
        return text

    def label(name):
        return name.replace(", ", ",\n").replace(" (", "\n(")

    fig, ax = plt.subplots(figsize=(10, 5))
    annotated_bars(ax, {label(name): (f["seconds"], note(f)) for name, f in solvers.items()},
                   highlight=[label(name) for name in solvers
                              if name.startswith("sketch_lstsq")])
    numpy_run = "numpy.linalg.lstsq (in memory)"
    ax.bar(label(numpy_run), solvers[numpy_run]["read_seconds"], color="C1",
           label="numpy: read of the store into memory")
    ax.legend(fontsize=8)
    ax.set_ylim(0, 1.3 * max(f["seconds"] for f in solvers.values()))
    ax.set_title(f"least squares from zarr: {report['n']:,} x {report['d']}, cond "
                 f"{report['condition_number']:.0e}, Dask threads "
                 f"({report['machine']['cpus']} cores); err vs numpy")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    options = parser(__doc__, "50,000 x 50 in chunks of 8,192 rows")
    options.add_argument("--shape", type=int, nargs=2, metavar=("N", "D"),
                         help="shape of A (default 1000000 200)")
    options.add_argument("--before", type=Path, metavar="PATH",
                         help="a checkout whose sketch_lstsq runs in a subprocess "
                         "(PYTHONPATH=PATH) beside this tree's")
    options.add_argument("--repeat", type=int, default=1, help="interleaved rounds (best of)")
    options.add_argument("--seed", type=int, default=0)
    args = options.parse_args(argv)
    n, d = args.shape or ((50_000, 50) if args.quick else (1_000_000, 200))
    chunk_rows = 8192 if args.quick else default_block_rows(d)
    before = args.before.resolve() if args.before else None
    if before is not None and not (before / "dasketch" / "__init__.py").is_file():
        options.error(f"--before {args.before}: no dasketch package in that directory")
    if before is None:
        print("no --before PATH: the code before the change is not run", flush=True)
    folder = tempfile.mkdtemp(prefix="bench_lstsq_store_")
    start = time.perf_counter()
    try:
        report = dict(machine=machine_facts(), quick=args.quick,
                      scheduler="dask threads", before=None if before is None else str(before),
                      **run(n, d, chunk_rows, args.seed, args.repeat, before, folder))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report["machine_after"] = {"load_average": machine_facts().get("load_average")}
    report["total_seconds"] = time.perf_counter() - start
    if before is None:
        report["note"] = "no --before PATH given: the code before the change was not run"
    write_results("lstsq_store", report, plot, quick=args.quick)
    for name, facts in report["solvers"].items():
        extra = "".join(f", {key} {facts[key]}" for key in ("n_iter", "n_passes") if key in facts)
        reads = f", {facts['store_reads']:.2f} store reads" if "store_reads" in facts else ""
        print(f"{name}: {facts['seconds']:.2f} s, relative error "
              f"{facts.get('relative_error', float('nan')):.1e}{extra}{reads}")
    print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in report["ratios"].items()))
    print(f"total {report['total_seconds']:.0f} s")


if __name__ == "__main__":
    main()
