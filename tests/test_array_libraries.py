"""The array seam: blocks of other array libraries than numpy.

``dasketch.sketch``, ``estimate_error``, ``SketchPCA``, ``sketch_lstsq`` and the
dual random projection read inputs of another library (in memory, or as the
blocks of a Dask array) as blocks of that library, on the default scheduler and
on a cluster; the other entry points (and ``SketchLstsqRegressor.predict``)
refuse them by type, with a ``TypeError`` naming the type and what is read,
before any task runs, and so does every entry point for a library without the
``linalg`` extension. The
exact dense update runs on a block's own array namespace (``array_api_strict``,
the array API standard's strictest implementation, stands for a GPU library
here) and equals the numpy path to rounding, with its bound.
"""

import importlib

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse

import dasketch
from dasketch._blocks.array_libraries import block_namespace, is_numpy_block, to_host
from dasketch._blocks.block_functions import merge_all_sketches, sketch_block
from dasketch.kernels.frequent_directions import sketch_rows
from dasketch.kernels.namespace_fd import sketch_dense_rows
from dasketch.linear_model import SketchLstsqRegressor
from tests.helpers import assert_sketched_alike_on_a_cluster

xps = pytest.importorskip("array_api_strict")


def _data(shape=(240, 12), seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape) * np.linspace(4, 0.1, shape[1])


def _never_computed():
    raise AssertionError("a block task ran")


def _dask_of_strict_blocks(X, rows=60, computed=False, device=None):
    """A Dask array whose blocks are array_api_strict arrays of the rows of
    ``X`` (on ``device``); unless ``computed``, its tasks fail if run."""
    name = "strict-blocks-" + dask.base.tokenize(X, rows, computed, str(device))
    starts = range(0, X.shape[0], rows)
    graph = {(name, i, 0): xps.asarray(X[s:s + rows], device=device) if computed
             else (_never_computed,)
             for i, s in enumerate(starts)}
    chunks = (tuple(min(rows, X.shape[0] - s) for s in starts), (X.shape[1],))
    return da.Array(graph, name, chunks, meta=xps.asarray(np.empty((0, 0))))


ENTRY_POINTS = {  # the others read them (tests/test_*_array_libraries.py)
    "SketchLstsqRegressor.predict": lambda X, y: SketchLstsqRegressor().fit(_data(), y).predict(X),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("lazy", [False, True], ids=["in-memory", "dask"])
def test_arrays_of_other_libraries_are_refused_by_type(entry, lazy):
    X = _data()
    y = X[:, 0].copy()
    data = _dask_of_strict_blocks(X) if lazy else xps.asarray(X)
    with pytest.raises(TypeError) as error:
        ENTRY_POINTS[entry](data, y)
    message = str(error.value)
    assert "array_api_strict.Array" in message
    assert ("Dask collection of" in message) == lazy
    assert "numpy array" in message and "reads as numpy blocks only" in message
    assert "dasketch.sketch" in message and "cupy.asnumpy" in message
    assert "dasketch.SketchPCA" in message


@pytest.mark.parametrize("lazy", [False, True], ids=["in-memory", "dask"])
def test_a_library_without_linalg_is_refused_by_every_entry_point(lazy):
    X = _data()
    with xps.ArrayAPIStrictFlags(enabled_extensions=()):
        data = _dask_of_strict_blocks(X) if lazy else xps.asarray(X)
        for run in (lambda: dasketch.sketch(data, 4),
                    lambda: dasketch.SketchPCA(n_components=2).fit(data)):
            with pytest.raises(TypeError, match="array_api_strict.Array") as error:
                run()
            assert "no array API namespace with the linalg extension" in str(error.value)


def _strict_inputs(X, rows):
    return {"in-memory": xps.asarray(X), "dask": _dask_of_strict_blocks(X, rows, computed=True)}


@pytest.mark.parametrize("center", [False, True])
def test_sketch_reads_another_library_as_numpy_to_rounding(center):
    X = _data((1200, 12), seed=2)
    reference = dasketch.sketch(X, 5, block_rows=300, center=center)
    for kind, data in _strict_inputs(X, 300).items():
        ours = dasketch.sketch(data, 5, block_rows=300, center=center)
        assert isinstance(ours.B, np.ndarray), kind
        top = np.abs(reference.covariance()).max()
        assert np.abs(ours.covariance() - reference.covariance()).max() <= 1e-12 * top, kind
        assert ours.error_bound == pytest.approx(reference.error_bound, rel=1e-12), kind
        exact = X - X.mean(axis=0) if center else X
        assert np.linalg.norm(exact.T @ exact - ours.covariance(), 2) <= ours.error_bound
    # One block of another library by default: as the numpy path's one block.
    one_block = dasketch.sketch(X, 5, block_rows=1200, center=center)
    ours = dasketch.sketch(xps.asarray(X), 5, center=center)
    assert ours.shrinkage == pytest.approx(one_block.shrinkage, rel=1e-12)


def test_estimate_error_reads_another_library():
    X = _data((900, 10), seed=3)
    sketch = dasketch.sketch(X, 4)
    reference = dasketch.estimate_error(X, sketch, random_state=1)
    for kind, data in _strict_inputs(X, 300).items():
        ours = dasketch.estimate_error(data, sketch, random_state=1, block_rows=300)
        assert ours.lower == pytest.approx(reference.lower, rel=1e-10), kind
        assert ours.upper == pytest.approx(reference.upper, rel=1e-10), kind


@pytest.mark.cluster
def test_another_librarys_blocks_sketch_alike_on_a_cluster():
    X = _data((1200, 12), seed=4)
    local = dasketch.sketch(_dask_of_strict_blocks(X, 300, computed=True), 5, block_rows=300)
    assert_sketched_alike_on_a_cluster(_strict_inputs(X, 300), local, 5, 300, n_workers=2)


def test_numpy_like_inputs_are_still_read():
    X = _data((50, 4))
    for data in (X, np.ma.asarray(X), X.tolist(), scipy.sparse.csr_matrix(X)):
        assert dasketch.sketch(data, 3).n_rows == 50


def test_the_namespace_of_a_block():
    assert block_namespace(np.ones((2, 2))) is np
    assert block_namespace(scipy.sparse.csr_matrix((2, 2))) is np
    strict = xps.asarray(np.ones((2, 2)))
    assert block_namespace(strict) is xps
    assert not is_numpy_block(strict) and is_numpy_block(np.ones(2))
    assert is_numpy_block([[1.0, 2.0]])  # array-likes stay on the numpy path
    host = to_host(strict)
    assert isinstance(host, np.ndarray) and np.array_equal(host, np.ones((2, 2)))
    with pytest.raises(TypeError, match="names no array namespace"):
        block_namespace(object())


CASES = {  # shape, sketch size, center, update, scale
    "column side": ((300, 10), 6, False, "auto", 1.0),
    "row side": ((40, 120), 8, False, "auto", 1.0),
    "centred": ((300, 10), 6, True, "block", 1.0),
    "buffered": ((90, 30), 5, True, "buffered", 1.0),
    "huge entries": ((60, 20), 5, False, "auto", 1e250),
    "tiny entries": ((60, 20), 5, False, "auto", 1e-300),
    "subnormal entries": ((60, 20), 5, True, "auto", 1e-318),
    "l above d": ((200, 5), 9, False, "auto", 1.0),
    "fewer rows than l": ((3, 10), 6, False, "auto", 1.0),
}


# array_api_compat.numpy runs the same wrappers as array_api_compat.cupy, CuPy's namespace.
@pytest.fixture(params=["array_api_strict", "array_api_compat.numpy"])
def namespace(request):
    pytest.importorskip(request.param.split(".")[0])
    return importlib.import_module(request.param)


@pytest.mark.parametrize("case", list(CASES))
def test_the_exact_update_on_another_namespace_equals_numpys(case, namespace):
    shape, size, center, update, scale = CASES[case]
    X = _data(shape) * scale
    if case == "l above d":  # an ill-conditioned Gram: the stack's own SVD
        X[:, 4] = X[:, 3] + 1e-9 * X[:, 4]
    reference = sketch_rows(X, size, center=center, update=update)
    ours = sketch_dense_rows(namespace.asarray(X), size, xp=namespace, to_host=to_host,
                             center=center, update=update)
    assert isinstance(ours.B, np.ndarray) and ours.B.shape == reference.B.shape
    assert ours.scale_exponent == reference.scale_exponent
    top = np.abs(reference.scaled().covariance()).max()
    assert np.abs(ours.scaled().covariance() - reference.scaled().covariance()).max() \
        <= 1e-12 * top
    assert ours.scaled().shrinkage == pytest.approx(reference.scaled().shrinkage,
                                                    rel=1e-12, abs=1e-12 * top)
    assert ours.rounding == pytest.approx(reference.rounding, rel=1e-12)
    if scale == 1.0:  # the bound holds against the exact Gram
        exact = X - X.mean(axis=0) if center else X
        error = np.linalg.norm(exact.T @ exact - ours.covariance(), 2)
        assert error <= ours.error_bound * (1 + 1e-12) + 1e-12


def test_block_sketches_on_another_namespace_merge_within_the_bound():
    X = _data((400, 16), seed=1)
    params = dict(update="auto", failure_probability=0.0, seed=0, sketch_size=6,
                  method="rfd", alpha0=0.0, center=True)
    parts, reference = [], []
    for start in range(0, 400, 100):
        block = X[start:start + 100]
        parts.append(sketch_block(xps.asarray(block), start, start + 100, **params))
        reference.append(sketch_block(block, start, start + 100, **params))
    merged, expected = merge_all_sketches(*parts), merge_all_sketches(*reference)
    assert np.allclose(merged.covariance(), expected.covariance(), rtol=0, atol=1e-10)
    centred = X - X.mean(axis=0)
    error = np.linalg.norm(centred.T @ centred - merged.covariance(), 2)
    assert error <= merged.error_bound * (1 + 1e-12)


def test_non_finite_rows_on_another_namespace_are_named():
    X = _data((80, 6))
    X[17, 2] = np.nan
    with pytest.raises(ValueError, match="rows 117 "):
        sketch_block(xps.asarray(X), 100, 180, update="auto", failure_probability=0.0,
                     seed=0, sketch_size=4, method="rfd", alpha0=0.0, center=False)
    with pytest.raises(TypeError, match="randomized update sketches numpy blocks only"):
        sketch_block(xps.asarray(X), 0, 80, update="randomized", failure_probability=0.1,
                     seed=0, sketch_size=4, method="rfd", alpha0=0.0, center=False)
