"""CuPy blocks on a CUDA device (``pytest -m gpu``, with ``pip install -e '.[gpu]'``).

The exact dense update in CuPy's array namespace equals the numpy path to
rounding (not bit for bit: other BLAS, another eigensolver), keeps its bound,
and its sketches merge with CPU sketches of other rows; CuPy inputs are refused
by the readers with a ``TypeError`` naming the type. Skipped without CuPy or a
device.
"""

import dask.array as da
import numpy as np
import pytest

import dasketch
from dasketch._blocks import merge_all_sketches, sketch_block
from dasketch._blocks.array_libraries import block_namespace, to_host

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
    cpu = dasketch.sketch(X, 12, center=True, block_rows=1000, update="block",
                          working_size=12)
    # Within 5 % of the CPU path's error (the merge trees differ).
    error = np.linalg.norm(centred.T @ centred - merged.covariance(), 2)
    assert error <= 1.05 * np.linalg.norm(centred.T @ centred - cpu.covariance(), 2) + 1e-9


@pytest.mark.parametrize("lazy", [False, True], ids=["cupy array", "dask array of cupy"])
def test_cupy_inputs_are_refused_by_type(lazy):
    X = cupy.asarray(_data((300, 8)))
    data = da.from_array(X, chunks=(100, 8), asarray=False) if lazy else X
    for run in (lambda: dasketch.sketch(data, 4),
                lambda: dasketch.SketchPCA(n_components=2).fit(data)):
        with pytest.raises(TypeError, match=r"cupy\S*ndarray") as error:
            run()
        assert "GPU (CuPy) blocks are not supported yet" in str(error.value)
