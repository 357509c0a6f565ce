"""SketchPCA on arrays of another library than numpy (``array_api_strict``, the
array API standard's strictest implementation, stands for CuPy): the fit, its
certificate and its projections equal the numpy path's to rounding, in memory
and as a Dask array of such blocks; the fitted attributes are numpy, and the
results of transform, inverse_transform and score_samples are numpy unless
scikit-learn's ``array_api_dispatch`` keeps them in the input's library.
"""

import dask
import dask.array as da
import numpy as np
import pytest
import sklearn

import dasketch
from tests.test_array_libraries import _dask_of_strict_blocks, _data

xps = pytest.importorskip("array_api_strict")
ROWS = 150  # block rows, equal to the chunk rows of the Dask arrays
STRICT = type(xps.asarray(0.0))


def _inputs(X):
    return {"in-memory": xps.asarray(X), "dask": _dask_of_strict_blocks(X, ROWS, computed=True)}


def _host(result):
    """``result`` (numpy, or lazy with numpy blocks) as a numpy array."""
    if isinstance(result, da.Array):
        assert isinstance(result._meta, np.ndarray)
        result = result.compute()
    assert isinstance(result, np.ndarray)
    return result


def _pca(**params):
    return dasketch.SketchPCA(n_components=4, sketch_size=9, block_rows=ROWS, **params)


@pytest.mark.parametrize("kind", ["in-memory", "dask"])
@pytest.mark.parametrize("scale", [1.0, 1e-300], ids=["unit", "tiny"])
def test_sketch_pca_of_another_library_equals_numpys(kind, scale):
    X = _data((600, 12), seed=5) * scale
    reference = _pca(whiten=True).fit(X)
    data = _inputs(X)[kind]
    ours = _pca(whiten=True).fit(data)
    for name in ("components_", "explained_variance_", "explained_variance_ratio_",
                 "singular_values_", "sketch_eigenvalues_", "mean_"):
        assert isinstance(getattr(ours, name), np.ndarray), name
    signs = np.sign(np.sum(ours.components_ * reference.components_, axis=1))
    assert np.abs(ours.components_ * signs[:, None] - reference.components_).max() <= 1e-12
    for name in ("explained_variance_", "explained_variance_ratio_", "singular_values_",
                 "sketch_eigenvalues_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(reference, name),
                                   rtol=1e-12, err_msg=name)
    # The certificate, from the same quantities: and it holds.
    assert ours.eigenvalue_bound_ == pytest.approx(reference.eigenvalue_bound_, rel=1e-12)
    assert ours.noise_variance_ == pytest.approx(reference.noise_variance_, rel=1e-12)
    if scale == 1.0:
        exact = np.linalg.eigvalsh(np.cov(X, rowvar=False))[::-1][:4]
        assert np.all(np.abs(exact - ours.sketch_eigenvalues_) <= ours.eigenvalue_bound_)
        measured = np.var((X - X.mean(0)) @ ours.components_.T, axis=0, ddof=1)
        np.testing.assert_allclose(ours.explained_variance_, measured, rtol=1e-12)
    projections = _host(ours.transform(data))
    np.testing.assert_allclose(projections * signs, reference.transform(X), rtol=1e-10,
                               atol=1e-12 * np.abs(projections).max())
    assert isinstance(ours.transform(data), da.Array) == (kind == "dask")
    restored = _host(ours.inverse_transform(xps.asarray(projections)))
    np.testing.assert_allclose(restored, reference.inverse_transform(projections * signs),
                               rtol=1e-10, atol=1e-12 * np.abs(X).max())
    if scale == 1.0:
        np.testing.assert_allclose(_host(ours.score_samples(data)), reference.score_samples(X),
                                   rtol=1e-10)
        assert ours.score(data) == pytest.approx(reference.score(X), rel=1e-10)


def test_fit_transform_and_partial_fit_of_another_library():
    X = _data((600, 12), seed=6)
    reference = _pca().fit(X)
    fitted = _pca().fit_transform(xps.asarray(X))
    assert isinstance(fitted, np.ndarray)
    np.testing.assert_allclose(np.abs(fitted), np.abs(reference.transform(X)), rtol=1e-10)
    batches, numpy_batches = _pca(), _pca()
    for start in range(0, 600, 200):
        batches.partial_fit(xps.asarray(X[start:start + 200]))
        numpy_batches.partial_fit(X[start:start + 200])
    assert batches.variance_source_ == "sketch" and batches.n_samples_seen_ == 600
    np.testing.assert_allclose(batches.explained_variance_, numpy_batches.explained_variance_,
                               rtol=1e-12)
    assert batches.sketch_.error_bound == pytest.approx(numpy_batches.sketch_.error_bound,
                                                        rel=1e-12)


@pytest.fixture
def array_api_dispatch(monkeypatch):
    # scikit-learn checks that scipy was told too (read when the option is set).
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    with sklearn.config_context(array_api_dispatch=True):
        yield


def _blocks_of(lazy):
    """The computed blocks of a Dask array, one by one (dask cannot join
    array_api_strict blocks)."""
    return [dask.compute(block)[0] for block in lazy.to_delayed().ravel()]


@pytest.mark.parametrize("block_rows", [ROWS, None], ids=["blocks", "one block"])
def test_array_api_dispatch_keeps_results_in_the_inputs_library(array_api_dispatch,
                                                                block_rows):
    X = _data((600, 12), seed=7)
    reference = dasketch.SketchPCA(n_components=4, sketch_size=9, block_rows=ROWS).fit(X)
    pca = dasketch.SketchPCA(n_components=4, sketch_size=9, block_rows=block_rows)
    pca.fit(xps.asarray(X))
    assert isinstance(pca.components_, np.ndarray)  # fitted attributes stay numpy
    projections = pca.transform(xps.asarray(X))
    assert isinstance(projections, STRICT) and projections.dtype == xps.float64
    np.testing.assert_allclose(np.abs(np.asarray(projections)),
                               np.abs(reference.transform(X)), rtol=1e-10)
    restored = pca.inverse_transform(projections)
    assert isinstance(restored, STRICT)
    np.testing.assert_allclose(np.asarray(restored),
                               reference.inverse_transform(reference.transform(X)), rtol=1e-9)
    log_likelihoods = pca.score_samples(xps.asarray(X))
    assert isinstance(log_likelihoods, STRICT) and log_likelihoods.shape == (600,)
    assert isinstance(pca.score(xps.asarray(X)), float)
    assert isinstance(pca.transform(X), np.ndarray)  # numpy input keeps numpy results
    if block_rows is None:  # dask cannot rechunk array_api_strict blocks
        return
    # A Dask array of such blocks: lazy, its blocks and meta of that library.
    lazy = pca.transform(_dask_of_strict_blocks(X, ROWS, computed=True))
    assert isinstance(lazy, da.Array) and isinstance(lazy._meta, STRICT)
    blocks = _blocks_of(lazy)
    assert all(isinstance(block, STRICT) for block in blocks)
    np.testing.assert_allclose(np.concatenate([np.asarray(b) for b in blocks]),
                               np.asarray(projections), rtol=1e-12)
    lazy_scores = pca.score_samples(_dask_of_strict_blocks(X, ROWS, computed=True))
    assert all(isinstance(block, STRICT) for block in _blocks_of(lazy_scores))


def test_bad_input_of_another_library_is_named():
    X = _data((600, 12), seed=8)
    with pytest.raises(TypeError, match="scaling='standard' reads numpy blocks only"):
        _pca(scaling="standard").fit(xps.asarray(X))
    pca = _pca().fit(xps.asarray(X))
    X[417, 3] = np.nan
    for data in _inputs(X).values():
        with pytest.raises(ValueError, match=r"NaN or Inf in rows \[300, 450\)"):
            _host(pca.transform(data))
        with pytest.raises(ValueError, match="NaN or Inf in rows 417"):
            _host(pca.score_samples(data))
        with pytest.raises(ValueError, match="NaN or Inf in rows 417"):
            _pca().fit(data)
    with pytest.raises(ValueError, match="X has 5 features, but SketchPCA is expecting 12"):
        pca.transform(xps.asarray(X[:, :5]))
