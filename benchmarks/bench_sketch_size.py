"""Captured variance of SketchPCA's top-k subspace against the sketch size, flat and steep spectra.

For each spectrum and each ``k``, ``SketchPCA(k, sketch_size=l)`` is fitted for
several ``l`` and the variance its ``k`` components capture (their measured
``explained_variance_``) is divided by the optimum's, the sum of the ``k`` largest
eigenvalues of the exact covariance. The default sketch size
(:func:`dasketch.decomposition._variance.default_sketch_size`) is chosen from these
fractions; the FD bound ``k Delta <= k ||A_c - [A_c]_k||_F^2 / (l - k)`` on the
loss (DESIGN section 2) is reported beside them, relative to the optimum.

* **Flat** (single-cell-like): negative-binomial counts of six cell types,
  normalised to 10,000 per cell and log1p'd, CSR; the top 50 components explain a
  few per cent of the variance.
* **Steep** (climate-like): the SST anomaly field of bench_user_data.py (four
  large-scale AR(1) patterns, noise, land dropped, weights ``sqrt(cos lat)``).

Run: ``python -m benchmarks.bench_sketch_size [--quick]``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_sketch_size.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, parser, write_results  # noqa: E402
from benchmarks.bench_user_data import sst_field  # noqa: E402


def flat_matrix(n_cells, n_genes, n_types=6, seed=0):
    """Log-normalised negative-binomial counts (CSR float64), as scanpy's
    ``normalize_total(target_sum=1e4)`` and ``log1p`` leave them."""
    rng = np.random.default_rng(seed)
    cell_type = rng.integers(n_types, size=n_cells)
    baseline = rng.gamma(0.3, 1.0, n_genes)
    programmes = rng.lognormal(0.0, 1.0, (n_types, n_genes)) ** (rng.random(n_genes) < 0.1)
    library = rng.lognormal(0.0, 0.4, n_cells)
    mean = library[:, None] * baseline * programmes[cell_type]
    counts = scipy.sparse.csr_matrix(rng.negative_binomial(2, 2 / (2 + mean)).astype(float))
    totals = np.maximum(np.asarray(counts.sum(axis=1)).ravel(), 1.0)
    counts = scipy.sparse.diags(1e4 / totals) @ counts
    counts.data = np.log1p(counts.data)
    return counts.tocsr()


def steep_matrix(n_days, n_lat, n_lon):
    """The weighted ocean columns of the SST anomaly field, float64."""
    field, lat, _, land = sst_field(n_days, n_lat, n_lon)
    weights = np.broadcast_to(np.sqrt(np.cos(np.deg2rad(lat)))[:, None], land.shape)
    return field.reshape(n_days, -1)[:, ~land.ravel()] * weights[~land].astype(np.float64)


def spectrum(X, n_top):
    """The ``n_top`` largest eigenvalues of the covariance of ``X``, decreasing (Lanczos
    on the implicitly centred Gram), and their total (the trace)."""
    n, d = X.shape
    mean = np.asarray(X.mean(axis=0)).ravel()
    gram = scipy.sparse.linalg.LinearOperator(
        (d, d), dtype=np.float64, matvec=lambda v: X.T @ (X @ v) - n * mean * (mean @ v))
    top = scipy.sparse.linalg.eigsh(gram, k=n_top, tol=1e-10, return_eigenvectors=False)
    squares = X.multiply(X).sum() if scipy.sparse.issparse(X) else np.square(X).sum()
    return np.sort(top)[::-1] / (n - 1), float(squares - n * mean @ mean) / (n - 1)


def captured_fractions(X, ks, factors):
    """For each ``k``: the captured fraction and the FD loss bound at ``l = k + f k``
    for every ``f`` of ``factors``, and at scikit-learn-style ``l = k + 10``."""
    from dasketch import SketchPCA

    eigenvalues, total = spectrum(X, max(ks))
    rows = []
    for k in ks:
        optimum = eigenvalues[:k].sum()
        tail = total - optimum
        sizes = sorted({k + 10, *(k + max(int(round(f * k)), 1) for f in factors)})
        for size in sizes:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = SketchPCA(k, sketch_size=size, random_state=0).fit(X)
            rows.append({"k": k, "sketch_size": size, "factor": (size - k) / k,
                         "captured_fraction": float(model.explained_variance_.sum() / optimum),
                         "fd_loss_bound": float(k * tail / (size - k) / optimum),
                         "certified_loss": float(k * model.eigenvalue_bound_ * 2 / optimum),
                         "top_k_evr": float(optimum / total)})
            print(f"k={k:3d} l={size:4d} captured {rows[-1]['captured_fraction']:.4f} "
                  f"(FD bound on the loss {rows[-1]['fd_loss_bound']:.3g}, "
                  f"certified {rows[-1]['certified_loss']:.3g})", flush=True)
    return rows


def main(argv=None):
    import dask

    args = parser(__doc__, "small sizes, seconds").parse_args(argv)
    factors = (0.5, 1, 2, 3, 4)
    if args.quick:
        flat_size, steep_size, ks = (4_000, 5_000), (730, 18, 36), (10, 30)
    else:
        flat_size, steep_size, ks = (20_000, 4_000), (2_920, 36, 72), (10, 30, 50)
    with dask.config.set(scheduler="threads"):
        flat, steep = flat_matrix(*flat_size), steep_matrix(*steep_size)
        report = {"machine": machine_facts(),
                  "flat": {"shape": list(flat.shape), "density": flat.nnz / np.prod(flat.shape),
                           "runs": captured_fractions(flat, ks, factors)},
                  "steep": {"shape": list(steep.shape),
                            "runs": captured_fractions(steep, ks, factors)}}
    write_results("sketch_size", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
    for ax, case in zip(axes, ("flat", "steep"), strict=True):
        runs = report[case]["runs"]
        for k in sorted({r["k"] for r in runs}):
            mine = [r for r in runs if r["k"] == k]
            ax.plot([r["sketch_size"] / k for r in mine],
                    [r["captured_fraction"] for r in mine], "o-", label=f"k = {k}")
        ax.axhline(0.99, color="grey", ls=":")
        ax.set_xlabel("sketch size l / k")
        ax.set_title(f"{case} spectrum {tuple(report[case]['shape'])}", fontsize=9)
        ax.legend(fontsize=8)
    axes[0].set_ylabel("captured variance / optimum")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
