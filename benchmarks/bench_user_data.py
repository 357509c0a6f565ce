"""Users' data where it lives: climate EOFs against xeofs, single-cell PCA against scanpy.

Two cases, each timed side by side in this process on Dask's threaded scheduler,
with the peak of Python-tracked memory (``tracemalloc``, which sees numpy's
buffers) and the largest principal angle of each answer's subspace to the exact one
(an SVD of the whole matrix in memory, untimed):

* **Climate**: a synthetic daily SST anomaly field ``(time, lat, lon)`` float32 on
  zarr with a land mask, weights ``sqrt(cos(lat))``; ``dasketch.xarray.eofs`` on
  the store chunked along time and on the store chunked along space, against
  ``xeofs.single.EOF`` on the field loaded into memory (its fastest path; xeofs
  computes eagerly).
* **Single cell**: synthetic negative-binomial counts of six cell types,
  normalised and log1p'd by scanpy, as CSR; ``dasketch.anndata.pca`` from a backed
  ``.h5ad`` and from an AnnData zarr store, against ``scanpy.pp.pca`` in memory
  (arpack, the solver scanpy uses for sparse input).

The angles are taken over the modes the exact spectrum separates (a gap to the
next eigenvalue of at least 10 %), where a subspace is well defined.

Run: ``python -m benchmarks.bench_user_data [--quick]`` (xeofs and scanpy from
the ``bench`` and ``test`` extras).
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse
import scipy.sparse.linalg
from scipy.linalg import subspace_angles

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_user_data.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, parser, traced, write_results  # noqa: E402


def largest_angle(basis, exact):
    """Largest principal angle (degrees) between the row spaces of two bases."""
    return float(np.degrees(subspace_angles(basis.T, exact.T).max()))


def separated_modes(eigenvalues, n_modes):
    """The number of leading modes whose eigenvalue exceeds the next by 10 %."""
    gaps = eigenvalues[:n_modes] > 1.1 * eigenvalues[1:n_modes + 1]
    return int(np.flatnonzero(gaps)[-1] + 1) if gaps.any() else 0


# --------------------------------------------------------------------- climate
def sst_field(n_days, n_lat, n_lon, seed=0):
    """Anomalies of four smooth large-scale patterns with AR(1) series, noise 0.3,
    and a land mask (NaN at every day)."""
    rng = np.random.default_rng(seed)
    lat = np.linspace(-90 + 90 / n_lat, 90 - 90 / n_lat, n_lat)
    lon = np.linspace(0, 360, n_lon, endpoint=False)
    LON, LAT = np.meshgrid(np.deg2rad(lon), np.deg2rad(lat))
    patterns = np.stack([np.exp(-((LAT / 0.3) ** 2)) * np.cos(LON - 3.5),
                         np.sin(LAT) * (1 + 0.3 * np.cos(2 * LON)),
                         np.cos(2 * LAT) * np.sin(LON + 1.0),
                         np.exp(-(((LAT - 0.8) / 0.25) ** 2)) * np.cos(3 * LON)])
    memory, amplitudes = np.array([0.99, 0.97, 0.95, 0.9]), np.array([3.0, 1.5, 1.0, 0.6])
    series = np.zeros((n_days, 4))
    for t in range(1, n_days):
        series[t] = memory * series[t - 1] + np.sqrt(1 - memory ** 2) * rng.standard_normal(4)
    field = np.einsum("tk,kij->tij", series * amplitudes, patterns)
    field = (field + 0.3 * rng.standard_normal(field.shape)).astype(np.float32)
    land = (np.abs(np.sin(LON * 1.5 + 0.5) * np.cos(LAT)) > 0.7) & (np.abs(LAT) < 1.2)
    field[:, land] = np.nan
    return field, lat, lon, land


def climate(n_days, n_lat, n_lon, n_modes, folder):
    import xarray as xr
    import xeofs

    from dasketch.xarray import eofs

    field, lat, lon, land = sst_field(n_days, n_lat, n_lon)
    data = xr.DataArray(field, dims=("time", "lat", "lon"),
                        coords={"time": np.arange(n_days), "lat": lat, "lon": lon}, name="sst")
    weights = np.sqrt(np.cos(np.deg2rad(data.lat)))
    stores = {"time-chunked": {"time": max(n_days // 8, 1), "lat": -1, "lon": -1},
              "space-chunked": {"time": -1, "lat": max(n_lat // 4, 1), "lon": -1}}
    for name, chunks in stores.items():
        data.to_dataset().chunk(chunks).to_zarr(os.path.join(folder, f"{name}.zarr"), mode="w")
    # The exact weighted EOFs, untimed.
    ocean = ~land.ravel()
    w = np.broadcast_to(weights.values[:, None], (n_lat, n_lon)).ravel()[ocean]
    matrix = field.reshape(n_days, -1)[:, ocean].astype(np.float64) * w
    matrix -= matrix.mean(axis=0)
    _, s, vt = np.linalg.svd(matrix, full_matrices=False)
    exact_variance = s ** 2 / (n_days - 1)
    k = separated_modes(exact_variance, n_modes)
    exact = vt[:k]

    def ours(store):
        opened = xr.open_zarr(os.path.join(folder, f"{store}.zarr"))
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            result = eofs(opened, "time", n_modes, variable="sst", weights=weights)
            result["scores"].load()
        plan = "; ".join(str(w.message)[:120] for w in seen)
        return result.components.values.reshape(n_modes, -1)[:, ocean], result, plan

    def peer():
        model = xeofs.single.EOF(n_modes=n_modes)
        model.fit(data, dim="time", weights=weights)
        comps = model.components().transpose("mode", "lat", "lon").values
        return comps.reshape(n_modes, -1)[:, ocean], model

    rows = {}
    for name in stores:
        (comps, result, plan), wall, peak = traced(lambda name=name: ours(name))
        rows[f"dasketch, {name}"] = {
            "wall_s": wall, "peak_mib": peak,
            "angle_deg": largest_angle(comps[:k], exact),
            "evr": [float(v) for v in result.explained_variance_ratio.values],
            "warnings": plan}
    (comps, _), wall, peak = traced(peer)
    rows["xeofs EOF, in memory"] = {"wall_s": wall, "peak_mib": peak,
                                    "angle_deg": largest_angle(comps[:k], exact)}
    return {"shape": [n_days, n_lat, n_lon], "ocean_points": int(ocean.sum()),
            "n_modes": n_modes, "separated_modes": k,
            "exact_evr": [float(v) for v in (exact_variance / exact_variance.sum())[:n_modes]],
            "data_mib": field.nbytes / 2 ** 20, "runs": rows}


# ----------------------------------------------------------------- single cell
def lognormalised_counts(n_cells, n_genes, n_types=6, seed=0):
    import anndata
    import scanpy as sc

    rng = np.random.default_rng(seed)
    cell_type = rng.integers(n_types, size=n_cells)
    baseline = rng.gamma(0.3, 1.0, n_genes)
    programmes = rng.lognormal(0.0, 1.0, (n_types, n_genes)) ** (rng.random(n_genes) < 0.1)
    library = rng.lognormal(0.0, 0.4, n_cells)
    rows = []
    for start in range(0, n_cells, 2_000):
        stop = min(start + 2_000, n_cells)
        mean = library[start:stop, None] * baseline * programmes[cell_type[start:stop]]
        counts = rng.negative_binomial(2, 2 / (2 + mean)).astype(np.float32)
        rows.append(scipy.sparse.csr_matrix(counts))
    adata = anndata.AnnData(scipy.sparse.vstack(rows).tocsr())
    sc.pp.normalize_total(adata, target_sum=1e4)
    sc.pp.log1p(adata)
    return adata


def single_cell(n_cells, n_genes, n_comps, folder):
    import anndata
    import scanpy as sc
    import zarr

    import dasketch.anndata

    adata = lognormalised_counts(n_cells, n_genes)
    h5ad, zarr_path = os.path.join(folder, "cells.h5ad"), os.path.join(folder, "cells.zarr")
    adata.write_h5ad(h5ad)
    adata.write_zarr(zarr_path)
    # The exact answer, untimed: the top eigenpairs of the implicitly centred Gram.
    X = adata.X.astype(np.float64)
    mean = np.asarray(X.mean(axis=0)).ravel()
    gram = scipy.sparse.linalg.LinearOperator(
        (n_genes, n_genes), dtype=np.float64,
        matvec=lambda v: X.T @ (X @ v) - n_cells * mean * (mean @ v))
    values, vectors = scipy.sparse.linalg.eigsh(gram, k=n_comps + 1, tol=1e-12)
    order = np.argsort(values)[::-1]
    exact_variance, vt = values[order] / (n_cells - 1), vectors[:, order].T
    k = separated_modes(exact_variance, n_comps)
    exact = vt[:k]

    def from_h5ad():
        backed = anndata.read_h5ad(h5ad, backed="r")
        dasketch.anndata.pca(backed, n_comps=n_comps)
        return backed.varm["PCs"].T, backed.uns["pca"]

    def from_zarr():
        group = zarr.open(zarr_path, mode="r")
        on_disk = anndata.AnnData(X=anndata.io.sparse_dataset(group["X"]))
        dasketch.anndata.pca(on_disk, n_comps=n_comps)
        return on_disk.varm["PCs"].T, on_disk.uns["pca"]

    def peer():
        copy = adata.copy()
        sc.pp.pca(copy, n_comps=n_comps, svd_solver="arpack")
        return copy.varm["PCs"].T, copy.uns["pca"]

    rows = {}
    for name, func in {"dasketch, backed .h5ad": from_h5ad, "dasketch, zarr": from_zarr,
                       "scanpy pp.pca (arpack), in memory": peer}.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (loadings, info), wall, peak = traced(func)
        rows[name] = {"wall_s": wall, "peak_mib": peak,
                      "angle_deg": largest_angle(loadings[:k], exact),
                      "captured_variance": float(np.sum(info["variance"])
                                                 / exact_variance[:n_comps].sum())}
    return {"shape": [n_cells, n_genes], "density": adata.X.nnz / (n_cells * n_genes),
            "n_comps": n_comps, "separated_modes": k,
            "csr_mib": (adata.X.data.nbytes + adata.X.indices.nbytes) / 2 ** 20,
            "runs": rows}


def main(argv=None):
    import dask

    args = parser(__doc__, "small sizes, seconds").parse_args(argv)
    if args.quick:
        climate_size, cell_size = (365, 18, 36), (2_000, 1_000)
    else:
        climate_size, cell_size = (2_920, 72, 144), (30_000, 5_000)
    with tempfile.TemporaryDirectory() as folder, dask.config.set(scheduler="threads"):
        report = {"machine": machine_facts(),
                  "climate": climate(*climate_size, 10, folder),
                  "single_cell": single_cell(*cell_size, 30, folder)}
    for case in ("climate", "single_cell"):
        runs = report[case]["runs"]
        peer = next(name for name in runs if not name.startswith("dasketch"))
        for name, row in runs.items():
            print(f"{case:11s} {name:36s} {row['wall_s']:7.2f} s "
                  f"({row['wall_s'] / runs[peer]['wall_s']:.2f}x the peer), peak "
                  f"{row['peak_mib']:7.1f} MiB, angle {row['angle_deg']:.3f} deg")
    write_results("user_data", report, plot, quick=args.quick)
    return report


def plot(report, path):
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, case in zip(axes, ("climate", "single_cell"), strict=True):
        runs = report[case]["runs"]
        names = list(runs)
        ax.barh(names, [runs[n]["wall_s"] for n in names], color="tab:blue")
        for i, n in enumerate(names):
            ax.text(runs[n]["wall_s"], i, f" {runs[n]['angle_deg']:.2f} deg, "
                    f"{runs[n]['peak_mib']:.0f} MiB", va="center", fontsize=8)
        ax.set_xlabel("wall time (s)")
        ax.set_title(f"{case.replace('_', ' ')} {tuple(report[case]['shape'])}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
