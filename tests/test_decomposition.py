"""SketchPCA against exact PCA."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from sklearn.decomposition import PCA

from dasketch import SketchPCA
from dasketch._blocks.blocked_sketch import GRAM_MAX_FEATURES
from tests.helpers import exact_centred_gram, low_rank_plus_noise


@pytest.fixture(scope="module")
def data():
    return low_rank_plus_noise(4000, 30, 4, noise=0.05, seed=5) + 3.0


def test_agrees_with_exact_pca(data):
    exact = PCA(n_components=4).fit(data)
    sk = SketchPCA(n_components=4, sketch_size=12, block_rows=500).fit(
        da.from_array(data, chunks=700))
    np.testing.assert_allclose(sk.mean_, exact.mean_, rtol=1e-12)
    cosines = np.abs(np.sum(sk.components_ * exact.components_, axis=1))
    assert cosines.min() > 1 - 1e-4
    bound = sk.sketch_.error_bound / (data.shape[0] - 1)
    assert np.abs(sk.explained_variance_ - exact.explained_variance_).max() <= bound + 1e-9
    np.testing.assert_allclose(sk.explained_variance_ratio_, exact.explained_variance_ratio_,
                               atol=1e-3)
    np.testing.assert_allclose(sk.singular_values_, exact.singular_values_, rtol=1e-3)
    assert sk.n_features_in_ == 30


def test_transform_lazy_for_dask_and_matches_numpy(data):
    pca = SketchPCA(n_components=3).fit(data)
    X = da.from_array(data, chunks=1000)
    lazy = pca.transform(X)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), pca.transform(data), rtol=1e-10, atol=1e-10)
    exact = PCA(n_components=3).fit(data)
    # Projections agree with exact PCA up to the sign of each axis.
    np.testing.assert_allclose(np.abs(pca.transform(data)), np.abs(exact.transform(data)),
                               rtol=1e-2, atol=1e-2)
    restored = pca.inverse_transform(pca.transform(data))
    exact_restored = exact.inverse_transform(exact.transform(data))
    assert np.linalg.norm(restored - exact_restored) < 1e-2 * np.linalg.norm(data - data.mean(0))


@pytest.mark.parametrize("params,match", [
    (dict(n_components=-1), "n_components"),
    (dict(n_components=4, sketch_size=4), "sketch_size"),
    (dict(n_components=31), "n_components"),
    (dict(sketch_size=20), "sketch_size must exceed the min.* = 30 components"),
    (dict(n_components="mle", sketch_size=10), None),
])
def test_bad_parameters(data, params, match):
    if match is None:  # 'mle' needs n_samples >= n_features
        data = data[:20]
        match = "n_samples >= n_features"
    with pytest.raises(ValueError, match=match):
        SketchPCA(**params).fit(data)


def test_fraction_beyond_the_sketch_warns_with_the_fraction_reached():
    X = np.random.default_rng(10).standard_normal((500, 40))
    with pytest.warns(UserWarning, match=r"the 5 directions of the sketch explain 0\.1.* less "
                      r"than n_components=0\.9.*Increase sketch_size"):
        pca = SketchPCA(n_components=0.9, sketch_size=6).fit(X)
    assert pca.n_components_ == 5
    assert pca.explained_variance_ratio_.sum() < 0.2


def test_transform_checks_width(data):
    pca = SketchPCA(n_components=2).fit(data)
    with pytest.raises(ValueError, match="X has 5 features, but SketchPCA is expecting 30"):
        pca.transform(data[:, :5])
    with pytest.raises(ValueError, match="X has 5 features"):
        pca.transform(da.from_array(data[:, :5]))


def test_defaults_on_small_data_are_exact_and_score_as_pca():
    # 6 features: the default sketch size is capped at 7 = n_features + 1, which
    # keeps every direction, so components and likelihood match exact PCA
    X = np.random.default_rng(2).standard_normal((300, 6)) * [5, 4, 3, 2, 1, 0.5]
    pca = SketchPCA().fit(X)
    assert pca.n_components_ == 6 and pca.sketch_.sketch_size == 7
    exact = PCA(n_components=6).fit(X)
    np.testing.assert_allclose(pca.components_, exact.components_, atol=1e-8)  # svd_flip signs
    partial = SketchPCA(n_components=3).fit(X)
    exact3 = PCA(n_components=3).fit(X)
    assert partial.noise_variance_ == pytest.approx(exact3.noise_variance_, rel=1e-8)
    assert partial.score(X) == pytest.approx(exact3.score(X), rel=1e-8)
    np.testing.assert_allclose(partial.score_samples(X[:7]), exact3.score_samples(X[:7]),
                               rtol=1e-8)
    lazy = partial.score_samples(da.from_array(X, chunks=100))
    np.testing.assert_allclose(lazy.compute(), exact3.score_samples(X), rtol=1e-8)


def test_feature_names_set_output_and_float32(data):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(data.astype(np.float32), columns=[f"f{j}" for j in range(30)])
    pca = SketchPCA(n_components=2).set_output(transform="pandas").fit(frame)
    out = pca.transform(frame)
    assert list(out.columns) == ["sketchpca0", "sketchpca1"]
    assert list(pca.feature_names_in_) == list(frame.columns)
    assert pca.components_.dtype == np.float32 and out.dtypes.iloc[0] == np.float32
    exact = PCA(n_components=2).fit(data)
    np.testing.assert_allclose(np.abs(out.to_numpy()), np.abs(exact.transform(data)),
                               rtol=1e-2, atol=1e-2)


def _measured_variance(X, pca):
    """Variance of the data along each component, from the dense centred data."""
    dense = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=np.float64)
    return np.var((dense - dense.mean(0)) @ pca.components_.T.astype(np.float64), axis=0,
                  ddof=1)


def test_explained_variance_is_the_data_variance_dense_sparse_zarr(tmp_path):
    import scipy.sparse
    import zarr

    from tests.helpers import sparse_decaying

    rng = np.random.default_rng(3)
    dense = rng.standard_normal((900, 40)) * 0.9 ** np.arange(40) + 2.0
    store = str(tmp_path / "X.zarr")
    zarr.create_array(store, data=dense, chunks=(128, 40))
    sparse = sparse_decaying(900, 600, 8, seed=3)  # 600 >= 32 l: the randomized update
    for X, label in [(dense, "dense"), (store, "zarr"), (sparse, "sparse"),
                     (da.from_array(dense, chunks=200), "dask")]:
        pca = SketchPCA(n_components=4, sketch_size=8, block_rows=150, random_state=0).fit(X)
        reference = _measured_variance(sparse if label == "sparse" else dense, pca)
        np.testing.assert_allclose(pca.explained_variance_, reference, rtol=1e-10,
                                   err_msg=label)
        np.testing.assert_allclose(pca.singular_values_ ** 2 / 899, reference, rtol=1e-10)
        assert np.all(np.diff(pca.explained_variance_) <= 0), label
        np.testing.assert_allclose(pca.components_ @ pca.components_.T, np.eye(4), atol=1e-12)
    assert scipy.sparse.issparse(sparse)


@pytest.mark.heavy
def test_explained_variance_ratio_never_exceeds_the_optimum_on_a_flat_spectrum():
    # flat spectrum, small sketch: the sketch's eigenvalue estimates sum to more
    # than the best 5-dimensional subspace explains; the reported ratios do not.
    # Rows wider than Gram summaries take are sketched by a tree of block shrinks,
    # whose shrinkages add up on a flat spectrum.
    X = np.random.default_rng(4).standard_normal((1000, GRAM_MAX_FEATURES + 52))
    pca = SketchPCA(n_components=5, sketch_size=10, block_rows=50).fit(X)
    eigenvalues = np.linalg.svd(X - X.mean(0), compute_uv=False) ** 2 / 999
    optimum = eigenvalues[:5].sum() / eigenvalues.sum()
    assert pca.sketch_eigenvalues_.sum() / eigenvalues.sum() > 1.2 * optimum
    assert pca.explained_variance_ratio_.sum() <= optimum * (1 + 1e-12)
    np.testing.assert_allclose(pca.explained_variance_, _measured_variance(X, pca), rtol=1e-10)
    assert np.all(np.diff(pca.explained_variance_) <= 0)
    # Weyl: the exact eigenvalues lie in the sketch's certified intervals
    gap = np.abs(eigenvalues[:5] - pca.sketch_eigenvalues_)
    assert np.all(gap <= pca.eigenvalue_bound_ * (1 + 1e-9))
    total = eigenvalues.sum()
    assert pca.noise_variance_ == pytest.approx((total - pca.explained_variance_.sum())
                                                / (min(X.shape) - 5),
                                                rel=1e-10)


@pytest.mark.parametrize("whiten", [False, True])
def test_exact_sketch_equals_scikit_learn_pca(whiten):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((400, 12)) * np.linspace(4, 0.5, 12) + 1.0
    pca = SketchPCA(n_components=5, sketch_size=13, whiten=whiten).fit(X)
    exact = PCA(n_components=5, whiten=whiten).fit(X)
    for name in ("explained_variance_", "explained_variance_ratio_", "singular_values_",
                 "noise_variance_", "mean_"):
        np.testing.assert_allclose(getattr(pca, name), getattr(exact, name), rtol=1e-10,
                                   err_msg=name)
    signs = np.sign(np.sum(pca.components_ * exact.components_, axis=1))
    np.testing.assert_allclose(pca.components_ * signs[:, None], exact.components_, atol=1e-10)
    Z = pca.transform(X)
    np.testing.assert_allclose(Z * signs, exact.transform(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(pca.inverse_transform(Z),
                               exact.inverse_transform(exact.transform(X)), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(pca.get_precision(), exact.get_precision(), rtol=1e-10,
                               atol=1e-10)
    np.testing.assert_allclose(pca.get_covariance(), exact.get_covariance(), rtol=1e-10,
                               atol=1e-10)
    assert pca.score(X) == pytest.approx(exact.score(X), rel=1e-10)
    lazy = pca.inverse_transform(da.from_array(Z, chunks=100))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), pca.inverse_transform(Z), rtol=1e-12)


@pytest.mark.parametrize("n_components", [None, 0.8, "mle"])
def test_n_components_as_scikit_learn(n_components):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 3)) @ rng.standard_normal((3, 10)) * 3
    X += 0.3 * rng.standard_normal((300, 10))
    pca = SketchPCA(n_components=n_components).fit(X)
    exact = PCA(n_components=n_components).fit(X)
    assert pca.n_components_ == exact.n_components_
    np.testing.assert_allclose(pca.explained_variance_, exact.explained_variance_, rtol=1e-10)


def test_default_n_components_on_few_rows_is_min_of_the_shape():
    X = np.random.default_rng(8).standard_normal((5, 20))
    pca = SketchPCA().fit(X)
    exact = PCA().fit(X)
    assert pca.n_components_ == exact.n_components_ == 5
    # orthonormal components, the fifth orthogonal to the data's 4-dimensional span
    np.testing.assert_allclose(pca.components_ @ pca.components_.T, np.eye(5), atol=1e-12)
    np.testing.assert_allclose(pca.explained_variance_, exact.explained_variance_, rtol=1e-10,
                               atol=1e-12)
    assert pca.noise_variance_ == exact.noise_variance_ == 0.0


def test_constant_data_get_orthonormal_components_without_variance():
    # the sketch of constant rows is empty: the components complete an orthonormal basis
    pca = SketchPCA(n_components=2).fit(np.ones((50, 4)) * [1.0, 2.0, 3.0, 4.0])
    assert pca.n_components_ == 2 and pca.sketch_.B.shape[0] == 0
    np.testing.assert_allclose(pca.components_ @ pca.components_.T, np.eye(2), atol=1e-12)
    assert np.all(pca.explained_variance_ <= 1e-28) and pca.noise_variance_ == 0.0
    np.testing.assert_array_equal(pca.explained_variance_ratio_, 0.0)


def test_mle_from_a_partial_spectrum_pads_the_unmeasured_tail_with_its_mean():
    from dasketch.decomposition._variance import mle_components
    from dasketch.utils._sklearn_compat import infer_dimension

    # three strong directions in isotropic noise: six measured eigenvalues and
    # the tail's mean give the full spectrum's answer
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 3)) @ rng.standard_normal((3, 20)) * 2
    X += rng.standard_normal((400, 20))
    spectrum = np.linalg.svd(X - X.mean(0), compute_uv=False) ** 2 / 399
    expected = infer_dimension(spectrum, 400)
    assert mle_components(spectrum[:6], spectrum.sum(), 400, 20) == expected == 3


def test_singular_model_scores_minus_inf_as_scikit_learn():
    # 5 components for 5 rows of 20 features: no noise, a singular covariance.
    # scikit-learn inverts it anyway (with a LinAlgWarning) and gets -inf or a
    # finite value such as +270 depending on the rows and on the BLAS: rounding
    # decides; dasketch says -inf, the log-density of a degenerate Gaussian off its
    # (measure-zero) support
    X = np.random.default_rng(0).standard_normal((5, 20))
    pca = SketchPCA().fit(X)
    with pytest.warns(Warning, match="ill-conditioned"):
        PCA().fit(X).score(X)
    assert pca.noise_variance_ == 0.0
    assert pca.score(X) == -np.inf
    assert np.all(pca.score_samples(da.from_array(X, chunks=(2, 20))).compute() == -np.inf)
    with pytest.raises(np.linalg.LinAlgError, match="singular"):
        pca.get_precision()
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf in rows 3 "):
        pca.score_samples(da.from_array(bad, chunks=(2, 20))).compute()
    # fewer components than rows: noise, a proper model, scikit-learn's numbers
    partial = SketchPCA(n_components=3).fit(X)
    exact = PCA(n_components=3).fit(X)
    assert partial.noise_variance_ == pytest.approx(exact.noise_variance_, rel=1e-10)
    np.testing.assert_allclose(partial.score_samples(X), exact.score_samples(X), rtol=1e-10)


def test_same_random_state_same_fit_on_sparse_input():
    from tests.helpers import sparse_decaying

    X = sparse_decaying(800, 1000, 6, seed=1)  # 1000 >= 32 l: the randomized update
    fits = [SketchPCA(n_components=3, sketch_size=8, random_state=seed).fit(X)
            for seed in (0, 0, 1)]
    assert fits[0].sketch_.guarantee != "certified"
    for name in ("components_", "explained_variance_", "sketch_eigenvalues_"):
        np.testing.assert_array_equal(getattr(fits[0], name), getattr(fits[1], name))
    assert not np.array_equal(fits[0].sketch_eigenvalues_, fits[2].sketch_eigenvalues_)


def _batches(X, sizes):
    """Consecutive row batches of the given sizes (the last takes the rest)."""
    bounds = np.cumsum([0] + list(sizes) + [len(X)])
    return [X[a:b] for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


@pytest.mark.parametrize("sizes", [[150], [7, 1, 1, 90], [60] * 5])
def test_partial_fit_any_batching_with_an_exact_sketch_equals_fit(sizes):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((400, 9)) * np.linspace(5, 0.5, 9) + [10, -3, 0, 1, 2, 3, 4, 5, 6]
    fit = SketchPCA(n_components=4, sketch_size="exact").fit(X)
    streamed = SketchPCA(n_components=4, sketch_size="exact")
    for batch in _batches(X, sizes):
        streamed.partial_fit(batch)
    assert (fit.variance_source_, streamed.variance_source_) == ("data", "sketch")
    assert streamed.n_samples_seen_ == fit.n_samples_ == 400
    # Nothing shrunk away: the bound is the rounding term alone.
    assert streamed.sketch_.sketch_size == 10 and streamed.sketch_.shrinkage == 0
    assert 0 < streamed.eigenvalue_bound_ == streamed.sketch_.rounding / 399 < 1e-10
    exact = PCA(n_components=4).fit(X)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "noise_variance_", "mean_"):
        np.testing.assert_allclose(getattr(streamed, name), getattr(fit, name), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
        np.testing.assert_allclose(getattr(streamed, name), getattr(exact, name), rtol=1e-9,
                                   atol=1e-9, err_msg=name)
    assert streamed.score(X) == pytest.approx(exact.score(X), rel=1e-10)
    # rows appended after a fit
    appended = SketchPCA(n_components=4, sketch_size="exact").fit(X[:sizes[0]])
    appended.partial_fit(X[sizes[0]:])
    np.testing.assert_allclose(appended.components_, fit.components_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(appended.explained_variance_, fit.explained_variance_,
                               rtol=1e-10)


def test_partial_fit_keeps_the_certified_bound_against_every_row_seen():
    from tests.helpers import sparse_decaying

    X = low_rank_plus_noise(600, 20, 5, noise=0.3, seed=12) + 4.0
    centred = X - X.mean(0)
    gram = centred.T @ centred
    eigenvalues = np.linalg.eigvalsh(gram)[::-1] / 599
    fit = SketchPCA(n_components=3, sketch_size=6).fit(X)
    for sizes in ([3, 1, 2, 94, 200], [50] * 11):
        streamed = SketchPCA(n_components=3, sketch_size=6)
        for i, batch in enumerate(_batches(X, sizes)):
            streamed.partial_fit(da.from_array(batch, chunks=40) if i % 2 else batch)
        sk = streamed.sketch_
        assert sk.guarantee == "certified" and sk.shrinkage > 0  # the sketch is not exact
        np.testing.assert_allclose(sk.mean, X.mean(0), rtol=1e-12)
        assert np.linalg.norm(gram - sk.covariance(), 2) <= sk.error_bound * (1 + 1e-9)
        # the reported variances are the sketch's, within its bound of the data's
        # variance along each component and of the covariance eigenvalues (Weyl)
        np.testing.assert_array_equal(streamed.explained_variance_,
                                      streamed.sketch_eigenvalues_)
        bound = streamed.eigenvalue_bound_ * (1 + 1e-9)
        assert np.all(np.abs(streamed.explained_variance_ - _measured_variance(X, streamed))
                      <= bound)
        assert np.all(np.abs(streamed.explained_variance_ - eigenvalues[:3]) <= bound)
        # fit and partial_fit agree up to the two certified bounds
        gap = np.abs(fit.sketch_eigenvalues_ - streamed.sketch_eigenvalues_)
        assert np.all(gap <= bound + fit.eigenvalue_bound_ * (1 + 1e-9))
    # sparse batches are sketched without densifying, with the same guarantee
    S = sparse_decaying(300, 30, 6, seed=12)
    streamed = SketchPCA(n_components=2, sketch_size=5).partial_fit(S[:120]).partial_fit(S[120:])
    dense = S.toarray() - S.toarray().mean(0)
    assert np.linalg.norm(dense.T @ dense - streamed.sketch_.covariance(), 2) <= \
        streamed.sketch_.error_bound * (1 + 1e-9)


def test_partial_fit_refuses_changed_parameters_and_a_short_first_batch():
    X = np.random.default_rng(13).standard_normal((100, 8))
    pca = SketchPCA(n_components=3).partial_fit(X[:5])
    assert pca.sketch_.sketch_size == 9  # default capped by n_features + 1, not the rows
    for params, match in [(dict(n_components=2), "n_components changed from 3 to 2"),
                          (dict(sketch_size=5), "sketch_size changed from 9 to 5"),
                          (dict(method="fd"), "method changed from 'rfd' to 'fd'")]:
        with pytest.raises(ValueError, match=match):
            clone_params = pca.get_params()
            pca.set_params(**params).partial_fit(X[50:])
        pca.set_params(**clone_params)
    with pytest.raises(ValueError, match="X has 5 features, but SketchPCA is expecting 8"):
        pca.partial_fit(X[:, :5])
    assert pca.n_samples_seen_ == 5
    with pytest.raises(ValueError, match="n_components=3 must be less or equal to "
                                         r"min\(n_samples, n_features\) = 2 of X in the first"):
        SketchPCA(n_components=3).partial_fit(X[:2])
    # a fraction is re-chosen at every call; fit starts a new sketch
    pca = SketchPCA(n_components=0.5, sketch_size="exact").partial_fit(X[:30])
    pca.partial_fit(X[30:])
    exact = PCA(n_components=0.5).fit(X)
    assert pca.n_components_ == exact.n_components_
    np.testing.assert_allclose(pca.explained_variance_, exact.explained_variance_, rtol=1e-10)
    assert pca.fit(X[:40]).n_samples_seen_ == 40 and pca.variance_source_ == "data"


def test_zero_components_is_the_isotropic_model_as_scikit_learn():
    X = np.random.default_rng(14).standard_normal((200, 5)) * [3, 2, 1, 1, 1]
    pca, exact = SketchPCA(n_components=0).fit(X), PCA(n_components=0).fit(X)
    assert pca.components_.shape == (0, 5) and pca.transform(X).shape == (200, 0)
    assert pca.noise_variance_ == pytest.approx(exact.noise_variance_, rel=1e-12)
    assert pca.score(X) == pytest.approx(exact.score(X), rel=1e-12)


def _lognormalised_counts(n_cells, n_genes, seed=0):
    """Single-cell-like rows (flat spectrum): negative-binomial counts of six cell
    types, normalised to 1e4 per cell and log1p'd, CSR."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(6, size=n_cells)
    programmes = rng.lognormal(0.0, 1.0, (6, n_genes)) ** (rng.random(n_genes) < 0.1)
    mean = (rng.lognormal(0.0, 0.4, n_cells)[:, None] * rng.gamma(0.3, 1.0, n_genes)
            * programmes[kind])
    counts = scipy.sparse.csr_matrix(rng.negative_binomial(2, 2 / (2 + mean)).astype(float))
    counts = scipy.sparse.diags(1e4 / np.maximum(counts.sum(axis=1).A.ravel(), 1)) @ counts
    counts.data = np.log1p(counts.data)
    return counts.tocsr()


@pytest.mark.parametrize("spectrum", ["flat", "steep"])
@pytest.mark.heavy
def test_default_sketch_size_captures_the_stated_fraction(spectrum):
    """SketchPCA's default sketch size meets its target: the k components capture at
    least 0.98 of the variance of the best k-dimensional subspace, on a flat
    spectrum (the top 20 of 3,000 directions explain a few per cent) and a steep
    one (a geometrically decaying signal under noise)."""
    from dasketch.decomposition._variance import CAPTURED_VARIANCE_TARGET

    if spectrum == "flat":
        X, k = _lognormalised_counts(2000, 3000), 20
    else:
        X, k = low_rank_plus_noise(2000, 400, 30, noise=0.3, seed=2), 10
    mean = np.asarray(X.mean(axis=0)).ravel()
    covariance = scipy.sparse.linalg.LinearOperator(
        (X.shape[1],) * 2, matvec=lambda v: (X.T @ (X @ v) - X.shape[0] * mean * (mean @ v))
        / (X.shape[0] - 1), dtype=np.float64)
    optimum = scipy.sparse.linalg.eigsh(covariance, k, tol=1e-12,
                                        return_eigenvectors=False).sum()
    model = SketchPCA(k, random_state=0).fit(X)
    assert model.sketch_.sketch_size == k + max(3 * k, 10)
    assert model.explained_variance_.sum() >= CAPTURED_VARIANCE_TARGET * optimum
    assert model.explained_variance_.sum() <= optimum * (1 + 1e-12)


def test_standard_scaling_in_the_tasks_equals_standardscaler_then_pca(tmp_path):
    """scaling="standard" on a zarr store gives StandardScaler + SketchPCA of the
    matrix in memory, to 1e-10: the scaling learned in one pass, applied by the
    tasks of fit, transform and inverse_transform."""
    import zarr
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(3)
    X = (low_rank_plus_noise(900, 40, 5, noise=0.3, seed=4) * rng.lognormal(0, 2, 40)
         + rng.normal(0, 50, 40))
    X[:, 7] = 2.5  # a constant column: scale 1, becomes zero
    path = str(tmp_path / "X.zarr")
    zarr.create_array(path, data=X, chunks=(128, 40))
    scaler = StandardScaler().fit(X)
    reference = SketchPCA(5, 12, block_rows=100).fit(scaler.transform(X))
    scaled = SketchPCA(5, 12, block_rows=100, scaling="standard").fit(path)
    np.testing.assert_allclose(scaled.scaler_mean_, scaler.mean_, rtol=1e-12)
    np.testing.assert_allclose(scaled.scaler_scale_, scaler.scale_, rtol=1e-12)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "sketch_eigenvalues_"):
        np.testing.assert_allclose(getattr(scaled, name), getattr(reference, name),
                                   rtol=1e-10, atol=1e-10, err_msg=name)
    scores = scaled.transform(path).compute()
    np.testing.assert_allclose(scores, reference.transform(scaler.transform(X)), atol=1e-10)
    np.testing.assert_allclose(scaled.transform(X), scores, atol=1e-10)  # in memory
    back = scaler.inverse_transform(reference.inverse_transform(scores))
    np.testing.assert_allclose(scaled.inverse_transform(scores), back, rtol=1e-10,
                               atol=1e-10 * np.abs(X).max())
    with pytest.raises(TypeError, match="dense to be scaled"):
        SketchPCA(2, scaling="standard").fit(scipy.sparse.random(50, 10, density=0.3))
    with pytest.raises(ValueError, match="use fit"):
        SketchPCA(2, scaling="standard").partial_fit(X)
    assert not hasattr(SketchPCA(2).fit(X), "scaler_mean_")


@pytest.mark.parametrize("exponent", [-700, -1000, -1060])
def test_tiny_data_gives_the_components_of_the_data_multiplied_up(data, exponent):
    """Data at 2**-700 to subnormal scale: the components, the ratios and the
    certified eigenvalue interval are those of the same data times 2**-exponent
    (the sketch is taken multiplied up), the variances scaled back."""
    tiny = np.ldexp(data[:1200], exponent)
    up = np.ldexp(tiny, -exponent)  # exact: the data the tiny rows hold
    for blocks in (None, 300):
        fitted = SketchPCA(n_components=3, sketch_size=8, block_rows=blocks).fit(tiny)
        reference = SketchPCA(n_components=3, sketch_size=8, block_rows=blocks).fit(up)
        cosines = np.abs(np.sum(fitted.components_ * reference.components_, axis=1))
        assert cosines.min() > 1 - 1e-9
        np.testing.assert_allclose(fitted.explained_variance_ratio_,
                                   reference.explained_variance_ratio_, rtol=1e-9)
        assert fitted.explained_variance_ratio_.sum() > 0.5
        with np.errstate(under="ignore"):
            np.testing.assert_array_equal(
                fitted.explained_variance_,
                np.ldexp(reference.explained_variance_, 2 * exponent))


def test_certified_eigenvalue_interval_holds_for_data_with_a_large_mean():
    """Data of unit spread around 1e7 in several blocks: the centring rows of the
    merges come from rounded means, and the certified interval
    sketch_eigenvalues_ +- eigenvalue_bound_ still holds every true eigenvalue of
    the exactly centred covariance."""
    for seed in range(3):
        X = np.random.default_rng(seed).standard_normal((240, 6)) * [4, 3, 2, 1, 1, 1] + 1e7
        pca = SketchPCA(n_components=3, sketch_size=4, block_rows=40).fit(X)
        true = np.linalg.eigvalsh(exact_centred_gram(X) / 239)[::-1][:3]
        gap = np.abs(true - pca.sketch_eigenvalues_)
        assert (gap <= pca.eigenvalue_bound_).all(), (seed, gap, pca.eigenvalue_bound_)


def test_lazy_transform_and_inverse_transform_are_valid_dask_graphs():
    """The lazy results pass dask's own checks (graph dependencies, chunks, meta)
    and equal the in-memory results."""
    from dask.array.utils import assert_eq

    X = np.random.default_rng(0).standard_normal((400, 8))
    Xd = da.from_array(X, chunks=100)
    pca = SketchPCA(n_components=3).fit(Xd)
    Z = pca.transform(Xd)
    assert_eq(Z, pca.transform(X))
    assert_eq(pca.inverse_transform(Z), pca.inverse_transform(pca.transform(X)))


@pytest.mark.parametrize("chunks", [3000, 400])
def test_exact_sketch_keeps_near_null_directions_to_relative_accuracy(chunks):
    """Centred singular values from ``1e3`` down to ``1e-6`` (``sigma / sigma_1``
    down to ``1e-9``), in one block and in eight merged ones: the exact sketch holds
    the stack's own SVD, so every singular value is within ``1e-6`` relative of
    numpy's (a Gram matrix would lose the last four entirely, as
    :class:`sklearn.decomposition.IncrementalPCA` does not), the whitened scores
    of every component match PCA's, and the certified bound still holds."""
    from sklearn.decomposition import IncrementalPCA

    rng = np.random.default_rng(0)
    n, d = 3000, 12
    U = np.linalg.qr(rng.standard_normal((n, d)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    X = (U * np.logspace(3, -6, d)) @ V.T + 5.0
    reference = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    pca = SketchPCA(n_components=d, sketch_size="exact", whiten=True).fit(
        da.from_array(X, chunks=(chunks, d)))
    np.testing.assert_allclose(pca.singular_values_, reference, rtol=1e-6)
    incremental = IncrementalPCA(n_components=d, batch_size=500).fit(X)
    np.testing.assert_allclose(incremental.singular_values_, reference, rtol=1e-6)
    exact = PCA(n_components=d, whiten=True, svd_solver="full").fit(X)
    Z, Z_exact = pca.transform(X), exact.transform(X)
    Z *= np.sign(np.sum(Z * Z_exact, axis=0))
    np.testing.assert_allclose(Z, Z_exact, atol=1e-5)
    sketch = pca.sketch_
    A, B = X - X.astype(np.longdouble).mean(axis=0), sketch.B.astype(np.longdouble)
    E = A.T @ A - B.T @ B
    E[np.diag_indices_from(E)] -= np.longdouble(sketch.alpha - sketch.alpha0)
    error = float(np.abs(np.linalg.eigvalsh(E.astype(np.float64))).max())
    assert error <= sketch.error_bound
