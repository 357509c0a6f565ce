"""Genotype PCA (dasketch.genotype): int8 dosages with missing calls, centred,
scaled and imputed inside the block tasks, against the explicitly standardised
float matrix, scikit-learn's imputer and scaler, and scikit-allel."""

import subprocess
import sys
import tracemalloc
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import zarr
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from dasketch import SketchPCA
from dasketch.genotype import GenotypePCA, pca

N_SAMPLES, N_VARIANTS, BLOCK = 240, 600, 32


def _genotypes(n_samples=N_SAMPLES, n_variants=N_VARIANTS, missing_rate=0.02, seed=0):
    """int8 dosages (samples x variants) of three populations, -1 where a call
    is missing; every variant segregates."""
    rng = np.random.default_rng(seed)
    frequency = rng.uniform(0.05, 0.95, n_variants)
    population = rng.integers(0, 3, n_samples)
    drift = rng.normal(0.0, 0.15, (3, n_variants))
    G = rng.binomial(2, np.clip(frequency + drift[population], 0.01, 0.99)).astype(np.int8)
    G[0, :] = 0
    G[1, :] = 2  # no variant is monomorphic
    G[rng.random(G.shape) < missing_rate] = -1
    G[:2, :][G[:2, :] == -1] = 1
    return G


def _explicit(G, scaler, missing=-1):
    """The float matrix the block tasks make, computed whole."""
    if scaler == "standard":  # scikit-learn: mean imputation, then standardisation
        return make_pipeline(SimpleImputer(missing_values=missing, strategy="mean"),
                             StandardScaler()).fit_transform(G.astype(np.float64))
    F = G.astype(np.float64)
    F[G == missing] = np.nan
    mean = np.nanmean(F, axis=0)
    F = np.where(np.isnan(F), mean, F) - mean
    if scaler == "patterson":
        p = mean / 2
        F /= np.sqrt(p * (1 - p))
    return F


@pytest.fixture(scope="module")
def genotypes():
    return _genotypes()


@pytest.mark.parametrize("scaler", ["patterson", "standard", None])
def test_int8_with_missing_calls_gives_the_explicit_float_components(genotypes, scaler):
    G = genotypes
    model = GenotypePCA(5, 24, scaling=scaler, block_rows=BLOCK).fit(G)
    Z = _explicit(G, scaler)
    reference = SketchPCA(5, 24, block_rows=BLOCK).fit(Z)
    np.testing.assert_allclose(model.components_, reference.components_, atol=1e-10)
    np.testing.assert_allclose(model.explained_variance_, reference.explained_variance_,
                               rtol=1e-10)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               reference.explained_variance_ratio_, rtol=1e-10)
    scores = model.transform(G)  # in memory in, in memory out, as scikit-learn's PCA
    assert isinstance(scores, np.ndarray)
    np.testing.assert_allclose(scores, reference.transform(Z), atol=1e-9)
    missing = G == -1
    assert model.n_missing_ == missing.sum() > 0
    np.testing.assert_array_equal(model.missing_per_sample_, missing.sum(axis=1))
    np.testing.assert_array_equal(model.missing_per_variant_, missing.sum(axis=0))
    np.testing.assert_allclose(model.scaler_mean_, np.nanmean(np.where(missing, np.nan, G), 0),
                               rtol=1e-12)


def test_zarr_store_on_a_cluster_gives_the_in_memory_fit(tmp_path, genotypes,
                                                         cluster_client):
    G = genotypes
    path = str(tmp_path / "dosages.zarr")
    zarr.create_array(path, data=G, chunks=(64, 200))  # int8 on disk, chunked both ways
    expected = GenotypePCA(4, 16, block_rows=BLOCK).fit(G)
    with cluster_client.as_current(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the plan's read amplification
        model = GenotypePCA(4, 16, block_rows=BLOCK).fit(path)
        scores = model.transform(path).compute()
    np.testing.assert_allclose(model.components_, expected.components_, atol=1e-10)
    np.testing.assert_allclose(scores, expected.transform(G), atol=1e-9)
    assert model.n_missing_ == expected.n_missing_


class _LargestResult(dask.callbacks.Callback):
    """Records the largest array any task returns (inside tuples too)."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def _posttask(self, key, result, dsk, state, worker_id):
        stack = [result]
        while stack:
            value = stack.pop()
            if isinstance(value, (tuple, list)):
                stack.extend(value)
            elif isinstance(value, np.ndarray):
                self.largest = max(self.largest, value.nbytes)


def _peak(fit, path, callback=None):
    """Peak traced memory of ``fit(path)`` with one task at a time."""
    fit(path)  # first-use allocations
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="sync"), callback or dask.callbacks.Callback():
            fit(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.heavy
def test_no_task_holds_more_than_one_float_block(tmp_path):
    G = _genotypes(n_samples=2048, n_variants=1024, seed=1)
    dosages, scaled = str(tmp_path / "dosages.zarr"), str(tmp_path / "scaled.zarr")
    zarr.create_array(dosages, data=G, chunks=(128, 1024))
    zarr.create_array(scaled, data=_explicit(G, "patterson"), chunks=(128, 1024))
    float_block = 128 * G.shape[1] * 8  # 1 MiB; the matrix as floats: 16 MiB
    largest = _LargestResult()
    peak = _peak(GenotypePCA(4, 12, block_rows=128).fit, dosages, largest)
    # No task returns a float block (the scaled rows never leave their task) ...
    assert largest.largest < float_block / 4, largest.largest
    # ... and the int8 fit holds no more than the fit of the float matrix on disk,
    # whose tasks read float blocks (11.8 MiB both, with the sketch's own work).
    reference = _peak(SketchPCA(4, 12, block_rows=128).fit, scaled)
    assert peak < reference + float_block / 4, (peak / 2 ** 20, reference / 2 ** 20)


def test_pca_of_a_variants_by_samples_store_reads_no_rechunk(tmp_path, genotypes):
    gn = np.ascontiguousarray(genotypes.T)  # variants x samples, as sgkit and plink store it
    path = str(tmp_path / "gn.zarr")
    zarr.create_array(path, data=gn, chunks=(100, 64))
    expected_coords, expected = pca(gn, 4, sketch_size=16, block_rows=BLOCK)
    reference = SketchPCA(4, 16, block_rows=BLOCK).fit(_explicit(genotypes, "patterson"))
    np.testing.assert_allclose(expected.components_, reference.components_, atol=1e-10)
    in_memory = da.from_array(gn, chunks=(100, -1))  # no store to read by samples
    for dosages in (path, da.from_zarr(path), in_memory):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            coords, model = pca(dosages, 4, sketch_size=16, block_rows=BLOCK)
        rechunked = [w for w in caught if "rechunking" in str(w.message)]
        assert len(rechunked) == (dosages is in_memory), rechunked
        np.testing.assert_allclose(coords, expected_coords, atol=1e-9)
        assert model.n_missing_ == (gn == -1).sum()


def test_pca_matches_scikit_allel():
    allel = pytest.importorskip("allel", reason="scikit-allel is not installed (test extra)")
    gn = np.ascontiguousarray(_genotypes(n_samples=120, n_variants=400, missing_rate=0,
                                         seed=3).T)
    expected_coords, expected = allel.pca(gn, n_components=4, scaler="patterson")
    coords, model = pca(gn, 4, sketch_size=24)
    assert model.n_missing_ == 0
    # scikit-allel computes in float32; its variances divide by n, ours by n - 1.
    scale = np.abs(expected_coords).max()
    np.testing.assert_allclose(np.abs(coords), np.abs(expected_coords), atol=3e-3 * scale)
    np.testing.assert_allclose(model.explained_variance_ratio_,
                               expected.explained_variance_ratio_, rtol=1e-4)
    np.testing.assert_allclose(model.explained_variance_ * (gn.shape[1] - 1) / gn.shape[1],
                               expected.explained_variance_, rtol=1e-4)


def test_nan_gaps_in_float_dosages_are_missing_calls(genotypes):
    F = np.where(genotypes == -1, np.nan, genotypes).astype(np.float32)
    expected = GenotypePCA(3, 12, block_rows=BLOCK).fit(genotypes)
    model = GenotypePCA(3, 12, missing=np.nan, block_rows=BLOCK).fit(F)
    assert model.components_.dtype == np.float32
    np.testing.assert_allclose(model.components_, expected.components_, atol=2e-5)
    assert model.n_missing_ == expected.n_missing_


def test_bad_genotypes_and_parameters_are_named(genotypes):
    G = genotypes.copy()
    G[5, 7] = -9  # another sentinel than missing=-1
    with pytest.raises(ValueError, match=r"outside \[0, ploidy=2\].*column 7.*missing="):
        GenotypePCA(2, block_rows=BLOCK).fit(G)
    GenotypePCA(2, scaling="standard", block_rows=BLOCK).fit(G)  # any values standardise
    F = genotypes.astype(np.float64)
    F[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"NaN or Inf in 1 columns \(first: column 4\).*np\.nan"):
        GenotypePCA(2, block_rows=BLOCK).fit(F)
    with pytest.raises(ValueError, match="missing must be None, NaN or a value of .* uint8"):
        GenotypePCA(2).fit(np.abs(genotypes).astype(np.uint8))
    with pytest.raises(ValueError, match="scaling"):
        GenotypePCA(2, scaling="unit").fit(genotypes)
    model = GenotypePCA(2, block_rows=BLOCK).fit(genotypes)
    with pytest.raises(ValueError, match="X has 10 features, but GenotypePCA is expecting 600"):
        model.transform(genotypes[:, :10])
    with pytest.raises(NotImplementedError, match="use fit"):
        model.partial_fit(genotypes)
    with pytest.raises(ValueError, match=r"dosages must be 2-D \(variants, samples\)"):
        pca(genotypes[0])


@pytest.mark.heavy
def test_block_functions_import_neither_scikit_learn_nor_dask_in_kernels():
    code = ("import sys, dasketch.kernels.column_scaling; assert 'dask' not in sys.modules; "
            "import dasketch._blocks.scaling, dasketch._blocks.column_reads, "
            "dasketch._blocks.transposed_store; assert 'sklearn' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
