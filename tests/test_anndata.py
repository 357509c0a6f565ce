"""AnnData matrices on disk (zarr, h5ad) and dasketch.anndata.pca against exact PCA."""

import os
import tracemalloc
import warnings

import dask
import numpy as np
import pytest
import scipy.sparse

ad = pytest.importorskip("anndata", reason="anndata is not installed (pip install "
                                           "'dasketch[anndata]'); AnnData input untested")
pytest.importorskip("h5py", reason="h5py is not installed; .h5ad input untested")

import dasketch  # noqa: E402
from dasketch import SketchPCA  # noqa: E402
from dasketch._blocks import as_row_blocks  # noqa: E402
from dasketch.anndata import pca  # noqa: E402

N_CELLS, N_GENES, BLOCK = 600, 1000, 128


def _counts(n, d, density, seed):
    """A CSR matrix of counts with genes of decreasing scale (a decaying spectrum)."""
    rng = np.random.default_rng(seed)
    X = scipy.sparse.random(n, d, density=density, format="csr", random_state=seed,
                            data_rvs=lambda size: rng.poisson(3.0, size) + 1.0)
    return scipy.sparse.csr_matrix(X @ scipy.sparse.diags(np.linspace(3.0, 0.2, d)))


def _write(adata, directory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata: zarr v2 is its current default
        adata.write_zarr(os.path.join(directory, "a.zarr"))
    adata.write_h5ad(os.path.join(directory, "a.h5ad"))
    return os.path.join(directory, "a.zarr"), os.path.join(directory, "a.h5ad")


def _exact_pca(dense):
    centred = dense - dense.mean(axis=0)
    _, s, Vt = np.linalg.svd(centred, full_matrices=False)
    return centred, Vt, s ** 2 / (dense.shape[0] - 1)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    X = _counts(N_CELLS, N_GENES, 0.015, 0)
    return (X, *_write(ad.AnnData(X), str(tmp_path_factory.mktemp("adata"))))


@pytest.mark.parametrize("kind", ["zarr", "h5ad"])
def test_csr_blocks_are_read_by_rows_never_dense(stored, kind):
    X, zarr_path, h5_path = stored
    path = {"zarr": zarr_path, "h5ad": h5_path}[kind] + "/X"
    blocks = as_row_blocks(path, block_rows=BLOCK)
    assert blocks.sparse and blocks.shape == X.shape
    dense_block = BLOCK * N_GENES * 8
    dask.compute(blocks.blocks[0], scheduler="sync")  # opens, checks and imports once
    tracemalloc.start()
    try:
        (block,) = dask.compute(blocks.blocks[1], scheduler="sync")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert scipy.sparse.issparse(block) and (block != X[BLOCK:2 * BLOCK]).nnz == 0
    # A dense read allocates at least one dense block; the CSR read about a fifth of
    # one here, and threads left by earlier tests in the process may add to the
    # traced peak (up to a third of one seen in a full run).
    assert peak < dense_block / 2, (peak, dense_block)


def test_a_zarr_csr_group_is_opened_once_to_plan_its_blocks(stored, monkeypatch):
    """Planning the blocks of an AnnData CSR group opens the store once (and
    once more to tell which reader takes it), not once for its encoding, once
    for its shape and once for its checks."""
    import zarr

    X, zarr_path, _ = stored
    opened, open_node, open_group = [], zarr.open, zarr.open_group
    monkeypatch.setattr(zarr, "open", lambda *a, **k: opened.append("open") or open_node(*a, **k))
    monkeypatch.setattr(zarr, "open_group",
                        lambda *a, **k: opened.append("group") or open_group(*a, **k))
    blocks = as_row_blocks(zarr_path, component="X", block_rows=BLOCK)
    assert blocks.shape == X.shape and opened == ["open", "open"]


@pytest.mark.heavy
def test_zarr_and_h5ad_sketch_as_the_matrix_in_memory(stored):
    X, zarr_path, h5_path = stored
    sketches = [dasketch.sketch(zarr_path, 24, component="X", block_rows=BLOCK, random_state=0),
                dasketch.sketch(h5_path + "/X", 24, block_rows=BLOCK, random_state=0),
                dasketch.sketch(X, 24, block_rows=BLOCK, random_state=0)]
    for other in sketches[1:]:
        np.testing.assert_allclose(other.B, sketches[0].B, atol=1e-10)
    dense = X.toarray()
    error = np.linalg.norm(dense.T @ dense - sketches[0].covariance(), 2)
    assert error <= sketches[0].error_bound * (1 + 1e-9)


def test_sketchpca_of_a_zarr_path_is_within_its_bound_of_exact_pca(stored):
    X, zarr_path, _ = stored
    k = 5
    model = SketchPCA(k, 20, block_rows=BLOCK, random_state=0).fit(zarr_path + "/X")
    in_memory = SketchPCA(k, 20, block_rows=BLOCK, random_state=0).fit(X)
    np.testing.assert_allclose(model.components_, in_memory.components_, atol=1e-10)
    _, Vt, lam = _exact_pca(X.toarray())
    bound = model.eigenvalue_bound_
    assert np.all(np.abs(lam[:k] - model.sketch_eigenvalues_) <= bound * (1 + 1e-9))
    captured = model.explained_variance_.sum()
    assert lam[:k].sum() - 2 * k * bound <= captured <= lam[:k].sum() * (1 + 1e-12)
    # sin^2 of the largest principal angle <= missed variance / eigengap
    cos = np.linalg.svd(model.components_ @ Vt[:k].T, compute_uv=False)
    assert 1 - cos.min() ** 2 <= (lam[:k].sum() - captured) / (lam[k - 1] - lam[k]) + 1e-10


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    X = _counts(200, 60, 0.2, 1)
    adata = ad.AnnData(X)
    adata.var["highly_variable"] = np.arange(60) % 4 != 0
    return adata, *_write(adata, str(tmp_path_factory.mktemp("small")))


def _check_exact(adata, X, mask, k):
    centred, Vt, lam = _exact_pca(X.toarray()[:, mask])
    PCs = adata.varm["PCs"]
    assert adata.obsm["X_pca"].shape == (X.shape[0], k) and PCs.shape == (X.shape[1], k)
    assert np.all(PCs[~mask] == 0)
    signs = np.sign(np.sum(PCs[mask].T * Vt[:k], axis=1))
    np.testing.assert_allclose(PCs[mask].T * signs[:, None], Vt[:k], atol=1e-8)
    np.testing.assert_allclose(adata.obsm["X_pca"] * signs, centred @ Vt[:k].T,
                               rtol=1e-5, atol=1e-5)
    info = adata.uns["pca"]
    np.testing.assert_allclose(info["variance"], lam[:k], rtol=1e-10)
    np.testing.assert_allclose(info["variance_ratio"], lam[:k] / lam.sum(), rtol=1e-10)
    assert info["params"] == {"zero_center": True, "use_highly_variable": True,
                              "mask_var": "highly_variable"}
    assert info["dasketch"]["guarantee"] == "certified"
    assert np.all(np.abs(lam[:k] - info["dasketch"]["sketch_eigenvalues"])
                  <= info["dasketch"]["eigenvalue_bound"] * (1 + 1e-9) + 1e-12)


def test_pca_in_memory_backed_and_zarr_equal_exact_pca(small):
    import zarr

    adata, zarr_path, h5_path = small
    mask = adata.var["highly_variable"].to_numpy()
    k = 6
    in_memory = adata.copy()
    pca(in_memory, n_comps=k)
    _check_exact(in_memory, adata.X, mask, k)
    backed = ad.read_h5ad(h5_path, backed="r")
    pca(backed, n_comps=k)
    on_zarr = ad.AnnData(X=ad.io.sparse_dataset(zarr.open(zarr_path, mode="r")["X"]),
                         var=adata.var)
    pca(on_zarr, n_comps=k)
    for other in (backed, on_zarr):
        _check_exact(other, adata.X, mask, k)
    # Every gene (no mask): the backed matrix is read as row blocks all the same.
    pca(backed, n_comps=k, mask_var=None)
    _, _, lam = _exact_pca(adata.X.toarray())
    np.testing.assert_allclose(backed.uns["pca"]["variance"], lam[:k], rtol=1e-10)
    backed.file.close()


def test_pca_agrees_with_scanpy(small):
    sc = pytest.importorskip("scanpy", reason="scanpy is not installed; comparison skipped")
    adata = small[0]
    ours, theirs = adata.copy(), adata.copy()
    pca(ours, n_comps=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sc.pp.pca(theirs, n_comps=6)
    assert set(ours.uns["pca"]) == set(theirs.uns["pca"]) | {"dasketch"}
    assert ours.uns["pca"]["params"] == theirs.uns["pca"]["params"]
    for key in ("variance", "variance_ratio"):
        np.testing.assert_allclose(ours.uns["pca"][key], theirs.uns["pca"][key], rtol=1e-4)
    signs = np.sign(np.sum(ours.varm["PCs"] * theirs.varm["PCs"], axis=0))
    np.testing.assert_allclose(ours.varm["PCs"] * signs, theirs.varm["PCs"], atol=1e-4)
    np.testing.assert_allclose(ours.obsm["X_pca"] * signs, theirs.obsm["X_pca"], atol=1e-3)


def test_csc_whole_stores_and_changed_files_are_errors(small, tmp_path):
    adata = small[0]
    zarr_path, h5_path = _write(ad.AnnData(adata.X.tocsc()), str(tmp_path))
    for path in (zarr_path + "/X", h5_path + "/X"):
        with pytest.raises(ValueError, match="csc_matrix.*tocsr"):
            as_row_blocks(path)
    with pytest.raises(ValueError, match="whole AnnData store; pass component='X'"):
        dasketch.sketch(small[1], 8)
    blocks = as_row_blocks(small[2] + "/X", block_rows=50)
    stat = os.stat(small[2])
    os.utime(small[2], ns=(stat.st_atime_ns, stat.st_mtime_ns + 10 ** 9))
    try:
        with pytest.raises(ValueError, match="changed while the job read it"):
            dask.compute(blocks.blocks[0], scheduler="sync")
    finally:
        os.utime(small[2], ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ValueError, match="zero_center must be True"):
        pca(adata.copy(), zero_center=False)
    with pytest.raises(ValueError, match="mask_var 'nope' is not a column"):
        pca(adata.copy(), mask_var="nope")
