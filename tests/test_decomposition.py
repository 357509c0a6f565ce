"""SketchPCA against exact PCA."""

import dask.array as da
import numpy as np
import pytest
from sklearn.decomposition import PCA

from dasketch import SketchPCA
from tests.helpers import low_rank_plus_noise


@pytest.fixture(scope="module")
def data():
    return low_rank_plus_noise(4000, 30, 4, noise=0.05, seed=5) + 3.0


def test_agrees_with_exact_pca(data):
    exact = PCA(n_components=4).fit(data)
    sk = SketchPCA(n_components=4, sketch_size=12, block_rows=500).fit(da.from_array(data, chunks=700))
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
    (dict(n_components=0), "n_components"),
    (dict(n_components=4, sketch_size=4), "sketch_size"),
    (dict(n_components=31), "n_components"),
])
def test_bad_parameters(data, params, match):
    with pytest.raises(ValueError, match=match):
        SketchPCA(**params).fit(data)


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
