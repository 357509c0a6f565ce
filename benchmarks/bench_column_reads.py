"""Column-chunked stores read by rows in the tasks, and int8 genotypes scaled in the tasks.

Climate: a (time x space) float32 field of a few smooth modes plus noise is stored
by time (row chunks of 365 days, whole rows) and by space (every time step of
256 grid points per chunk, the time-series layout). ``SketchPCA(10)`` is fitted
on a LocalCluster of two single-threaded worker processes to the time-chunked
store, to the space-chunked store by the plan SketchPCA chooses (the sketch of
its transpose, :mod:`dasketch.decomposition._transposed`), by column reads (each block
task reads its rows across all the column chunks,
:mod:`dasketch._blocks.column_reads`; the store passed as row blocks), and as
an opaque Dask array (the rechunk plan both replace). Wall time (interleaved
rounds, best of ``--repeat``), peak resident memory of a worker above its idle
level (one more run on a fresh cluster, ``ru_maxrss``), the plan's read
amplification, the largest principal angle of the EOFs to exact PCA and the
variance they capture over the optimum's.

Genotypes: int8 dosages (samples x variants of three populations, 1 % missing
calls) on zarr: ``GenotypePCA`` on the int8 store against ``SketchPCA`` on a
float64 store of the explicitly scaled matrix, and ``allel.pca`` in memory
(scikit-allel, when installed, given the mean-imputed dosages; its peak is the
traced allocations of the calling process), with the same measures; the angle
is that of the two axes of population structure (the other components are
noise of a flat spectrum, whose axes no method pins down).

Run: ``python -m benchmarks.bench_column_reads [--quick]``.
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import zarr
from scipy.linalg import subspace_angles

from dasketch import SketchPCA
from dasketch._blocks import as_row_blocks
from dasketch.genotype import GenotypePCA

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_column_reads.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    local_cluster,
    machine_facts,
    parser,
    side_by_side,
    traced,
    write_results,
)

K = 10


def climate(n_time, n_space, seed=0):
    """Anomalies of a few smooth space patterns with decaying amplitudes plus noise."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, n_space)
    patterns = np.array([np.cos((j + 1) * np.pi * x + j) for j in range(2 * K)])
    amplitudes = 4.0 * 0.8 ** np.arange(2 * K)
    X = (rng.standard_normal((n_time, 2 * K)) * amplitudes) @ patterns
    X += 0.5 * rng.standard_normal((n_time, n_space))
    return X.astype(np.float32)


def genotypes(n_samples, n_variants, seed=0):
    """int8 dosages of three populations with 1 % missing calls (-1)."""
    rng = np.random.default_rng(seed)
    frequency = rng.uniform(0.05, 0.95, n_variants)
    population = rng.integers(0, 3, n_samples)
    drift = rng.normal(0.0, 0.1, (3, n_variants))
    G = rng.binomial(2, np.clip(frequency + drift[population], 0.01, 0.99)).astype(np.int8)
    G[rng.random(G.shape) < 0.01] = -1
    return G


def patterson(G):
    """The float matrix GenotypePCA's tasks make, whole."""
    F = np.where(G == -1, np.nan, G.astype(np.float64))
    mean = np.nanmean(F, axis=0)
    p = mean / 2
    return (np.where(np.isnan(F), mean, F) - mean) / np.sqrt(p * (1 - p))


def accuracy(X, results, timings, k):
    """Largest principal angle of the first ``k`` components to exact PCA's, and
    the variance the components capture over the optimum's."""
    Xc = np.asarray(X, dtype=np.float64)
    Xc = Xc - Xc.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    optimum = float(np.sum(s[:K] ** 2))
    for name, model in results.items():
        V = model.components_.astype(np.float64)
        timings[name]["angle_deg"] = float(np.degrees(subspace_angles(V[:k].T,
                                                                      Vt[:k].T).max()))
        timings[name]["captured_over_optimum"] = float(np.sum((Xc @ V.T) ** 2)) / optimum


def _start_sampling(dask_worker):
    """In a worker: import what block tasks import, then record its resident
    memory every few milliseconds in a thread (:func:`_stop_sampling`)."""
    import threading
    import time

    import psutil

    import dasketch._blocks.column_reads  # noqa: F401
    import dasketch.kernels.column_scaling  # noqa: F401
    import dasketch.sketching  # noqa: F401

    process = psutil.Process()
    state = dict(base=process.memory_info().rss, peak=0, running=True)
    dask_worker.dasketch_memory_sampler = state  # kept on the worker between calls

    def sample():
        while state["running"]:
            state["peak"] = max(state["peak"], process.memory_info().rss)
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()


def _stop_sampling(dask_worker):
    state = dask_worker.dasketch_memory_sampler
    state["running"] = False
    return state["peak"] - state["base"]


def peak_worker_mib(run):
    """Peak resident memory of a worker running ``run`` on a fresh cluster, above
    its level before (with the modules of the block tasks imported)."""
    with local_cluster() as client:
        client.run(_start_sampling)
        run()
        return max(client.run(_stop_sampling).values()) / 2 ** 20


def traced_peak_mib(run):
    """Peak traced memory (MiB) of one call of ``run`` in this process."""
    return traced(run)[2]


def measure(runs, repeat, in_memory=()):
    """Timings (interleaved) and the peak memory of each run (one more call)."""
    timings, results = side_by_side(runs, repeat)
    for name, run in runs.items():
        timings[name]["peak_mib"] = (traced_peak_mib if name in in_memory
                                     else peak_worker_mib)(run)
    return timings, results


def climate_case(folder, n_time, n_space, repeat):
    X = climate(n_time, n_space)
    by_time, by_space = f"{folder}/time.zarr", f"{folder}/space.zarr"
    zarr.create_array(by_time, data=X, chunks=(365, n_space))
    zarr.create_array(by_space, data=X, chunks=(n_time, 256))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = as_row_blocks(by_space, default_rows=None)
    amplification = [str(w.message) for w in caught]

    def fit(source):
        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return SketchPCA(K).fit(source() if callable(source) else source)
        return run

    runs = {"time-chunked": fit(by_time), "space-chunked, plan chosen": fit(by_space),
            "space-chunked, column reads": fit(lambda: as_row_blocks(by_space)),
            "space-chunked, rechunk": fit(lambda: da.from_zarr(by_space) * 1)}
    timings, results = measure(runs, repeat)
    accuracy(X, results, timings, K)
    for name, model in results.items():
        timings[name]["plan"] = model.plan_
    return {"shape": [n_time, n_space], "store_mib": X.nbytes / 2 ** 20, "plan": plan.plan,
            "plan_warning": amplification, "runs": timings}


def genotype_case(folder, n_samples, n_variants, repeat):
    G = genotypes(n_samples, n_variants)
    Z = patterson(G)
    dosages, scaled = f"{folder}/dosages.zarr", f"{folder}/scaled.zarr"
    zarr.create_array(dosages, data=G, chunks=(500, 5000))
    zarr.create_array(scaled, data=Z, chunks=(500, 5000))

    def fit(estimator, source):
        def run():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return estimator.fit(source)
        return run

    runs = {"GenotypePCA, int8 store": fit(GenotypePCA(K), dosages),
            "SketchPCA, float64 store": fit(SketchPCA(K), scaled)}
    in_memory = ()
    try:
        import allel

        imputed = np.where(G == -1, np.round(np.nanmean(np.where(G == -1, np.nan, G), 0)),
                           G).T.astype(np.float32)
        in_memory = ("allel.pca, in memory",)
        runs[in_memory[0]] = lambda: allel.pca(imputed, n_components=K)[1]
    except ImportError:
        pass
    timings, results = measure(runs, repeat, in_memory)
    accuracy(Z, results, timings, 2)
    return {"shape": [n_samples, n_variants], "int8_mib": G.nbytes / 2 ** 20,
            "float64_mib": Z.nbytes / 2 ** 20, "runs": timings,
            "note": "allel.pca gets the dosages with missing calls imputed to the rounded "
                    "mean (it takes no missing calls) and in float32; its angle is to the "
                    "same exact axes"}


def main(argv=None):
    options = parser(__doc__, "small stores, seconds")
    options.add_argument("--repeat", type=int, default=3)
    args = options.parse_args(argv)
    if args.quick:
        args.repeat = 1
        sizes = dict(climate=(2190, 2048), genotype=(400, 2000))  # 2 blocks of rows
    else:
        sizes = dict(climate=(7300, 4096), genotype=(2000, 20000))
    with tempfile.TemporaryDirectory() as folder:
        with local_cluster():
            report = {"machine": machine_facts(), "repeat": args.repeat,
                      "climate": climate_case(folder, *sizes["climate"], args.repeat),
                      "genotype": genotype_case(folder, *sizes["genotype"], args.repeat)}
    for case in ("climate", "genotype"):
        for name, row in report[case]["runs"].items():
            print(f"{case:9s} {name:30s} {row['wall']:7.2f} s  peak {row['peak_mib']:7.1f} MiB"
                  f"  angle {row['angle_deg']:.3f} deg  captured "
                  f"{row['captured_over_optimum']:.4f}")
    write_results("column_reads", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, case in zip(axes, ("climate", "genotype")):
        runs = report[case]["runs"]
        names = list(runs)
        ax.barh(names, [runs[n]["wall"] for n in names], color="tab:blue")
        for i, n in enumerate(names):
            ax.text(runs[n]["wall"], i, f" {runs[n]['wall']:.1f} s, "
                    f"{runs[n]['peak_mib']:.0f} MiB", va="center", fontsize=8)
        ax.set_xlabel("wall time (s), best of %d (label: peak worker memory)" % report["repeat"],
                      fontsize=8)
        ax.set_title(f"{case}: {report[case]['shape'][0]} x {report[case]['shape'][1]}",
                     fontsize=9)
        ax.set_xlim(0, 1.6 * max(runs[n]["wall"] for n in names))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
