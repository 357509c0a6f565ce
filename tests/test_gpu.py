"""CuPy blocks on a CUDA device (``pytest -m gpu``, with ``pip install -e '.[gpu]'``).

The exact dense update in CuPy's array namespace equals the numpy path to
rounding (not bit for bit: other BLAS, another eigensolver), keeps its bound,
and its sketches merge with CPU sketches of other rows; ``dasketch.sketch`` and
``estimate_error`` read CuPy arrays and Dask arrays of CuPy blocks, on one GPU
and on a cluster of one GPU worker alike, and so do ``sketch_lstsq`` and
``SketchLstsqRegressor.fit`` (solution and certificates as numpy on the host);
``SketchPCA`` fits CuPy inputs as the numpy path does, to rounding and with the
same certificate, its projections as numpy unless scikit-learn's
``array_api_dispatch`` keeps them on the device; the entry points that compute
on numpy only refuse them by type. Skipped without CuPy or a device.
"""

import dask.array as da
import numpy as np
import pytest
import sklearn
import sklearn.base

import dasketch
from dasketch._blocks import as_row_blocks, merge_all_sketches, run_eagerly, sketch_block
from dasketch._blocks.array_libraries import block_namespace, to_host
from dasketch.linear_model import PWSGDRegressor
from tests.helpers import assert_sketched_alike_on_a_cluster

pytestmark = pytest.mark.gpu
cupy = pytest.importorskip("cupy")
pytest.importorskip("array_api_compat")


def _device_count():
    try:
        return cupy.cuda.runtime.getDeviceCount()
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


if _device_count() == 0:
    pytest.skip("CuPy finds no CUDA device", allow_module_level=True)

PARAMS = dict(failure_probability=0.0, seed=0, method="rfd", alpha0=0.0)


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * np.linspace(4, 0.1, shape[1])


def test_the_namespace_and_the_host_copy_of_a_cupy_block():
    import array_api_compat.cupy

    X = _data((20, 5))
    block = cupy.asarray(X)
    assert block_namespace(block) is array_api_compat.cupy
    host = to_host(block)
    assert isinstance(host, np.ndarray) and np.array_equal(host, X)


@pytest.mark.parametrize("shape", [(2000, 64), (100, 400)], ids=["column side", "row side"])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("update", ["auto", "block"])
def test_a_cupy_block_sketches_as_the_numpy_block(shape, center, update):
    X = _data(shape)
    ours = sketch_block(cupy.asarray(X), 0, shape[0], sketch_size=16, center=center,
                        update=update, **PARAMS)
    reference = sketch_block(X, 0, shape[0], sketch_size=16, center=center, update=update,
                             **PARAMS)
    assert isinstance(ours.B, np.ndarray)
    top = np.abs(reference.covariance()).max()
    assert np.abs(ours.covariance() - reference.covariance()).max() <= 1e-10 * top
    assert ours.shrinkage == pytest.approx(reference.shrinkage, rel=1e-9, abs=1e-10 * top)
    exact = X - X.mean(axis=0) if center else X
    assert np.linalg.norm(exact.T @ exact - ours.covariance(), 2) <= ours.error_bound


def test_gpu_block_sketches_merge_with_cpu_sketches_within_the_bound():
    X = _data((8000, 48), seed=1)
    parts = [sketch_block(cupy.asarray(X[s:s + 1000]), s, s + 1000, sketch_size=12,
                          center=True, update="block", **PARAMS) for s in range(0, 4000, 1000)]
    parts += [sketch_block(X[s:s + 1000], s, s + 1000, sketch_size=12, center=True,
                           update="block", **PARAMS) for s in range(4000, 8000, 1000)]
    merged = merge_all_sketches(*parts)
    centred = X - X.mean(axis=0)
    assert merged.n_rows == 8000
    assert np.linalg.norm(centred.T @ centred - merged.covariance(), 2) <= merged.error_bound
    cpu = dasketch.sketch(X, 12, center=True, block_rows=500, update="block",
                          working_size=12)
    # Within 5 % of the CPU path's error (the merge trees differ).
    error = np.linalg.norm(centred.T @ centred - merged.covariance(), 2)
    assert error <= 1.05 * np.linalg.norm(centred.T @ centred - cpu.covariance(), 2) + 1e-9


def _cupy_inputs(X, rows):
    on_device = cupy.asarray(X)
    return {"cupy array": on_device,
            "dask array of cupy": da.from_array(on_device, chunks=(rows, X.shape[1]),
                                                asarray=False)}


@pytest.mark.parametrize("center", [False, True])
def test_sketch_of_cupy_inputs_equals_the_cpu_path_to_rounding(center):
    X = _data((6000, 40), seed=2)
    reference = dasketch.sketch(X, 8, block_rows=1500, center=center)
    exact = X - X.mean(axis=0) if center else X
    for kind, data in _cupy_inputs(X, 500).items():
        ours = dasketch.sketch(data, 8, block_rows=1500, center=center)
        assert isinstance(ours.B, np.ndarray), kind
        top = np.abs(reference.covariance()).max()
        assert np.abs(ours.covariance() - reference.covariance()).max() <= 1e-10 * top, kind
        assert np.linalg.norm(exact.T @ exact - ours.covariance(), 2) <= ours.error_bound
        estimate = dasketch.estimate_error(data, ours, random_state=0)
        error = np.linalg.norm(exact.T @ exact - ours.covariance(), 2)
        assert estimate.lower <= error * (1 + 1e-9), kind


def test_a_cupy_array_is_one_block_by_default_and_refused_by_numpy_only_estimators():
    X = _data((3000, 16), seed=3)
    ours = dasketch.sketch(cupy.asarray(X), 6)
    one_block = dasketch.sketch(X, 6, block_rows=3000)
    assert ours.shrinkage == pytest.approx(one_block.shrinkage, rel=1e-9)
    with pytest.raises(TypeError, match=r"cupy\S*ndarray.*numpy blocks only"):
        PWSGDRegressor().fit(cupy.asarray(X), X[:, 0])


def _lstsq_problem(seed=5, n=20000, d=48):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * np.logspace(0, -3, d) + 0.5
    b = A @ rng.standard_normal((d, 2)) + 0.01 * rng.standard_normal((n, 2))
    return A, b, rng.random(n)


@pytest.mark.parametrize("fit_intercept", [False, True])
def test_sketch_lstsq_of_cupy_inputs_equals_the_cpu_path_to_rounding(fit_intercept):
    A, b, w = _lstsq_problem()
    options = dict(random_state=0, block_rows=5000, fit_intercept=fit_intercept)
    reference = dasketch.linear_model.sketch_lstsq(A, b, sample_weight=w, **options)
    for kind, data in _cupy_inputs(A, 5000).items():
        for targets in (b, cupy.asarray(b)):
            ours = dasketch.linear_model.sketch_lstsq(data, targets,
                                                      sample_weight=cupy.asarray(w), **options)
            assert isinstance(ours.x, np.ndarray), kind
            assert np.abs(ours.x - reference.x).max() <= 1e-8 * np.abs(reference.x).max()
            assert ours.rank == reference.rank
            np.testing.assert_allclose(ours.singular_values, reference.singular_values,
                                       rtol=1e-10)
            np.testing.assert_allclose(ours.residual_norm, reference.residual_norm, rtol=1e-10)
            np.testing.assert_allclose(ours.intercept, reference.intercept, rtol=1e-8)
            np.testing.assert_allclose(ours.coef_error_bound, reference.coef_error_bound,
                                       rtol=0.05)
            assert np.all(np.linalg.norm(ours.x - reference.x, axis=0)
                          <= ours.coef_error_bound + reference.coef_error_bound)


def test_the_lstsq_regressor_fits_cupy_inputs_as_numpy():
    A, b, _ = _lstsq_problem(seed=6)
    regressor = dasketch.linear_model.SketchLstsqRegressor(random_state=0, block_rows=5000)
    reference = regressor.fit(A, b[:, 0])
    for kind, data in _cupy_inputs(A, 5000).items():
        model = sklearn.base.clone(regressor).fit(data, cupy.asarray(b[:, 0]))
        assert isinstance(model.coef_, np.ndarray), kind
        assert np.abs(model.coef_ - reference.coef_).max() <= 1e-9 * np.abs(
            reference.coef_).max(), kind
        np.testing.assert_allclose(model.singular_, reference.singular_, rtol=1e-10)
        assert model.coef_error_bound_ == pytest.approx(reference.coef_error_bound_, rel=0.05)


@pytest.mark.parametrize("kind", ["cupy array", "dask array of cupy"])
def test_sketch_pca_of_cupy_inputs_equals_the_cpu_path_to_rounding(kind):
    X = _data((6000, 40), seed=5)
    params = dict(n_components=5, sketch_size=16, block_rows=1000, whiten=True)
    reference = dasketch.SketchPCA(**params).fit(X)
    data = _cupy_inputs(X, 1000)[kind]
    ours = dasketch.SketchPCA(**params).fit(data)
    assert isinstance(ours.components_, np.ndarray)
    signs = np.sign(np.sum(ours.components_ * reference.components_, axis=1))
    assert np.abs(ours.components_ * signs[:, None] - reference.components_).max() <= 1e-9
    for name in ("explained_variance_", "explained_variance_ratio_", "singular_values_"):
        np.testing.assert_allclose(getattr(ours, name), getattr(reference, name), rtol=1e-9)
    assert ours.eigenvalue_bound_ == pytest.approx(reference.eigenvalue_bound_, rel=1e-9)
    exact = np.linalg.eigvalsh(np.cov(X, rowvar=False))[::-1][:5]
    assert np.all(np.abs(exact - ours.sketch_eigenvalues_) <= ours.eigenvalue_bound_)
    projections = ours.transform(data)
    if kind == "dask array of cupy":
        assert isinstance(projections, da.Array)
        projections = projections.compute()
    assert isinstance(projections, np.ndarray)
    np.testing.assert_allclose(projections * signs, reference.transform(X), rtol=1e-8,
                               atol=1e-9)
    restored = ours.inverse_transform(cupy.asarray(projections))
    assert isinstance(restored, np.ndarray)
    np.testing.assert_allclose(restored, reference.inverse_transform(projections * signs),
                               rtol=1e-8, atol=1e-9)
    assert ours.score(data) == pytest.approx(reference.score(X), rel=1e-9)


def test_array_api_dispatch_keeps_sketch_pca_results_on_the_device(monkeypatch):
    X = _data((4000, 24), seed=6)
    pca = dasketch.SketchPCA(n_components=4, block_rows=1000).fit(cupy.asarray(X))
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    with sklearn.config_context(array_api_dispatch=True):
        for kind, data in _cupy_inputs(X, 1000).items():
            projections = pca.transform(data)
            if kind == "dask array of cupy":
                assert isinstance(projections._meta, cupy.ndarray)
                projections = projections.compute()
            assert isinstance(projections, cupy.ndarray), kind
            np.testing.assert_allclose(cupy.asnumpy(projections), pca.transform(X),
                                       rtol=1e-8, atol=1e-9)
            assert isinstance(pca.inverse_transform(projections), cupy.ndarray)
            assert isinstance(pca.score_samples(cupy.asarray(X)), cupy.ndarray)
    assert isinstance(pca.transform(cupy.asarray(X)), np.ndarray)


@pytest.mark.cluster
def test_a_gpu_worker_gives_the_single_gpu_result():
    X = _data((8000, 32), seed=4)
    single = dasketch.sketch(cupy.asarray(X), 8, block_rows=2000)
    assert_sketched_alike_on_a_cluster(_cupy_inputs(X, 2000), single, 8, 2000, n_workers=1)


def _drp_problem(n=2000, d=30, seed=5):
    """A spectrum a projection of 10 columns misses: the fit grows it."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.linspace(3, 1, d)
    return X, X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_dual_random_projection_of_cupy_inputs_equals_the_cpu_path(loss):
    from dasketch.linear_model import dual_random_projection

    X, y = _drp_problem()
    targets = y if loss == "squared" else np.where(y > 0, 1.0, -1.0)
    options = dict(loss=loss, alpha=10.0, sketch_size=10, random_state=0, block_rows=500,
                   tol=1e-6)
    reference = dual_random_projection(X, targets, **options)
    for kind, data in _cupy_inputs(X, 500).items():
        ours = dual_random_projection(data, targets, **options)
        assert isinstance(ours.coef, np.ndarray), kind
        assert ours.converged and ours.n_components == reference.n_components, kind
        # both certified: the two solutions lie within the sum of their bounds
        assert np.linalg.norm(ours.coef - reference.coef) \
            <= ours.coef_error_bound + reference.coef_error_bound, kind
        assert ours.coef_error_bound <= 1e-6 * np.linalg.norm(ours.coef), kind


def test_dual_random_projection_estimators_fit_cupy_and_predict_on_the_host():
    from dasketch.linear_model import DualRandomProjectionClassifier, DualRandomProjectionRegressor
    from dasketch.linear_model.dual_projection.passes import projection_pass

    X, y = _drp_problem(seed=6)
    options = dict(alpha=10.0, sketch_size=10, random_state=0, block_rows=500, tol=1e-6)
    for kind, data in _cupy_inputs(X, 500).items():
        ridge = DualRandomProjectionRegressor(**options).fit(data, cupy.asarray(y))
        reference = DualRandomProjectionRegressor(**options).fit(X, y)
        predicted = np.asarray(ridge.predict(data))
        assert isinstance(ridge.coef_, np.ndarray), kind
        assert np.abs(predicted - reference.predict(X)).max() <= 1e-4 * np.abs(y).max(), kind
        labels = np.where(y > 0, "yes", "no")
        scores = DualRandomProjectionClassifier(**options).fit(data, labels).decision_function(data)
        expected = DualRandomProjectionClassifier(**options).fit(X, labels).decision_function(X)
        assert np.abs(np.asarray(scores) - expected).max() <= 1e-4 * np.abs(expected).max(), kind
    three = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    ours = DualRandomProjectionClassifier(**options).fit(cupy.asarray(X), three)
    expected = DualRandomProjectionClassifier(**options).fit(X, three)
    assert ours.multi_class_ == "multinomial"
    assert np.linalg.norm(ours.coef_ - expected.coef_) \
        <= ours.coef_error_bound_ + expected.coef_error_bound_
    # the projection X_hat stays on the device for the passes that follow it
    blocks = run_eagerly(as_row_blocks(cupy.asarray(X), block_rows=500,
                                       array_libraries="any"), threaded=True)
    xhat = projection_pass(blocks, y[:, None], np.ones(X.shape[0]), 10, 0, b0=np.zeros(1),
                           loss="squared", smoothing=1.0, split_every=None, client=None)[0]
    assert isinstance(xhat, cupy.ndarray)
