"""CuPy blocks on a CUDA device (``pytest -m gpu``, with ``pip install -e '.[gpu]'``).

The exact dense update in CuPy's array namespace equals the numpy path to
rounding (not bit for bit: other BLAS, another eigensolver), keeps its bound,
and its sketches merge with CPU sketches of other rows; ``dasketch.sketch`` and
``estimate_error`` read CuPy arrays and Dask arrays of CuPy blocks, on one GPU
and on a cluster of one GPU worker alike, and the entry points that compute on
numpy only refuse them by type. ``SketchPCA`` fits CuPy inputs as the numpy
path does, to rounding and with the same certificate; its projections come back
as numpy unless scikit-learn's ``array_api_dispatch`` keeps them on the device.
Skipped without CuPy or a device.
"""

import dask.array as da
import numpy as np
import pytest
import sklearn

import dasketch
from dasketch._blocks import merge_all_sketches, sketch_block
from dasketch._blocks.array_libraries import block_namespace, gram_of, to_host
from dasketch.linear_model import PWSGDRegressor

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


def test_the_gram_of_a_cupy_block_is_symmetric_and_the_product_to_rounding():
    X = cupy.asarray(_data((5000, 24)))
    gram = gram_of(X)
    assert bool((gram == gram.T).all())
    product = X.T @ X
    assert float(cupy.abs(gram - product).max()) <= 1e-13 * float(cupy.abs(product).max())
    assert float(cupy.abs(gram_of(X[:, ::2]) - X[:, ::2].T @ X[:, ::2]).max()) \
        <= 1e-13 * float(cupy.abs(product).max())  # strided: the product


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
    cpu = dasketch.sketch(X, 12, center=True, block_rows=1000, update="block",
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
    for kind, data in _cupy_inputs(X, 1000).items():
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
    from distributed import Client, LocalCluster

    X = _data((8000, 32), seed=4)
    single = dasketch.sketch(cupy.asarray(X), 8, block_rows=2000)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for kind, data in _cupy_inputs(X, 2000).items():
            ours = dasketch.sketch(data, 8, block_rows=2000, client=client)
            assert np.abs(ours.covariance() - single.covariance()).max() \
                <= 1e-12 * np.abs(single.covariance()).max(), kind
