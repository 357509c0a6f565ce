"""``dasketch demo``: write a synthetic data set, sketch it on a cluster, and check
the certified bound against the error measured from the exact Gram matrix."""

from __future__ import annotations

import os
import tempfile
import time

from dasketch.cli_cluster import _client
from dasketch.cli_format import number, percent, rate, size
from dasketch.cli_output import _check_writable_output, _ChunkProgress, _say

# Most directions of the demo data's spectrum.
DEMO_RANK = 512


def run_demo(args):
    out = args.out or tempfile.mkdtemp(prefix="dasketch-demo-")
    if os.path.isdir(out) and os.listdir(out) and not args.overwrite:
        raise FileExistsError(f"--out: directory {out!r} is not empty; pass --overwrite "
                              "to replace its contents")
    for name in ("data.zarr", "sketch.npz", "spectrum.png"):
        _check_writable_output(os.path.join(out, name), args.overwrite)
    import numpy as np

    import dasketch
    from dasketch.datasets import MAX_BASIS_BYTES, write_synthetic
    from dasketch.storage.outputs import remove_path

    os.makedirs(out, exist_ok=True)
    data_path = os.path.join(out, "data.zarr")
    start = time.perf_counter()
    # Half the features carry the spectrum, at most DEMO_RANK of them (the random
    # basis is orthogonalised in memory) and as many as MAX_BASIS_BYTES holds.
    rank = max(1, min(args.features // 2, DEMO_RANK, MAX_BASIS_BYTES // (8 * args.features)))
    X = write_synthetic(data_path, args.rows, args.features, rank=rank,
                        power=0.5, noise=0.01, overwrite=True,
                        progress=_ChunkProgress(args, f"writing {data_path}"))
    _say(args, f"wrote {data_path}: {X.shape[0]:,} x {X.shape[1]} float64, "
               f"{size(X.nbytes)} in {time.perf_counter() - start:.1f} s")
    try:
        with _client(args) as client:
            _say(args, f"cluster: {len(client.scheduler_info()['workers'])} workers, "
                       f"dashboard {client.dashboard_link}")
            start = time.perf_counter()
            sketch = dasketch.sketch(data_path, args.sketch_size, method=args.method,
                                     split_every=args.split_every, client=client,
                                     progress=not args.quiet)
            elapsed = time.perf_counter() - start
            gram = client.compute(X.T @ X).result()
    except BaseException:  # an interrupted or failed demo leaves no data store behind
        remove_path(data_path)
        raise
    if args.out is None:  # a temporary directory: the data store is not kept
        remove_path(data_path)
        _say(args, f"removed {data_path} ({size(X.nbytes)}); pass --out DIR to "
                   "keep the data")
    eig = np.linalg.eigvalsh(gram)[::-1]
    error = float(np.abs(np.linalg.eigvalsh(gram - sketch.covariance())).max())
    sketch_path = os.path.join(out, "sketch.npz")
    dasketch.save_sketch(sketch, sketch_path, overwrite=True)
    plot_path = os.path.join(out, "spectrum.png")
    _plot_spectrum(eig, sketch, plot_path)
    holds = error <= sketch.error_bound * (1 + 1e-9)
    print(f"sketch size l = {sketch.sketch_size} ({sketch.method.upper()}), "
          f"{sketch.n_rows:,} rows x {sketch.n_features} features")
    print(f"time {elapsed:.2f} s, throughput {rate(X.nbytes, elapsed)} "
          f"({number(sketch.n_rows / elapsed)} rows/s)")
    print(f"certified bound  ||A^T A - (B^T B + alpha I)||_2 <= {sketch.error_bound:.6g} "
          f"({percent(sketch.error_bound / eig[0])} of ||A||_2^2)")
    print(f"measured error   ||A^T A - (B^T B + alpha I)||_2  = {error:.6g} "
          f"({percent(error / eig[0])} of ||A||_2^2)  -> bound {'holds' if holds else 'VIOLATED'}")
    if holds and error >= sketch.error_bound * (1 - 1e-6):
        print(TIGHT_BOUND)
    print(f"wrote {sketch_path} and {plot_path}")
    return 0 if holds else 1


# Why the demo's measured error equals the bound (Ghashami et al. 2016; RFD paper, Thm 2).
TIGHT_BOUND = ("(equal, as expected: the leading directions lie in every shrink and lose the "
               "whole shrinkage; the bound is attained there, so it is tight, not loose)")


def _plot_spectrum(eig, sketch, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    k = min(len(eig), 2 * sketch.sketch_size)
    estimate = np.zeros(k)
    s2 = sketch.singular_values()[:k] ** 2
    estimate[:s2.size] = s2
    estimate += sketch.alpha
    fig, ax = plt.subplots(figsize=(6, 4))
    index = np.arange(1, k + 1)
    ax.semilogy(index, eig[:k], "k.-", label="exact eigenvalues of A^T A")
    ax.semilogy(index, estimate, "o", mfc="none", color="tab:orange",
                label="sketch: eigenvalues of B^T B + alpha I")
    ax.fill_between(index, np.maximum(estimate - sketch.error_bound, eig[k - 1] / 10),
                    estimate + sketch.error_bound, color="tab:orange", alpha=0.2,
                    label="certified bound")
    ax.axvline(sketch.sketch_size, color="grey", ls=":", label="sketch size l")
    ax.set_xlabel("index")
    ax.set_ylabel("eigenvalue")
    ax.legend(fontsize=8)
    fig.tight_layout()
    from dasketch.storage.outputs import PLOT_FORMAT, write_atomically

    try:  # replaced only when dasketch wrote it (its PNG text says so), never through a link
        write_atomically(lambda tmp: fig.savefig(tmp, dpi=110, format="png",
                                                 metadata={"format": PLOT_FORMAT}),
                         path, True, name="--out", flag="--overwrite")
    finally:
        plt.close(fig)
