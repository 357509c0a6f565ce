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
    with pytest.raises(ValueError, match="30"):
        pca.transform(data[:, :5])
