"""sketch_lstsq and SketchLstsqRegressor on blocks of another array library.

``array_api_strict`` (the array API standard's strictest implementation) on a
device other than the CPU stands for CuPy: numpy cannot convert its arrays
implicitly, nor can they meet arrays of another device. Its arrays in memory and
Dask arrays of its blocks give the numpy path's solution, sketch quantities and
certificates to rounding, as numpy on the host; the sparse embedding of a block
in its own namespace is the numpy path's.
"""

import importlib

import numpy as np
import pytest
import scipy.optimize

from dasketch._blocks.array_libraries import to_host
from dasketch.kernels.embeddings import embedding_entries, entries_matrix
from dasketch.kernels.namespace_embeddings import embed_dense_rows
from dasketch.linear_model import SketchLstsqRegressor, sketch_lstsq
from tests.test_array_libraries import _dask_of_strict_blocks

xps = pytest.importorskip("array_api_strict")

ROWS = 300
DEVICE = xps.Device("device1")


def _problem(seed=0, n=1200, d=10, targets=2):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d)) * np.logspace(0, -4, d) + 0.5
    b = A @ rng.standard_normal((d, targets)) + 0.1 * rng.standard_normal((n, targets))
    return A, b, rng.random(n) * 2


def _on_device(values):
    return xps.asarray(values, device=DEVICE)


def _inputs(A):
    return {"in-memory": _on_device(A),
            "dask": _dask_of_strict_blocks(A, ROWS, computed=True, device=DEVICE)}


def _assert_same_solution(ours, reference, exact):
    assert isinstance(ours.x, np.ndarray) and ours.x.shape == reference.x.shape
    scale = np.abs(reference.x).max()
    assert np.abs(ours.x - reference.x).max() <= 1e-10 * scale
    assert ours.rank == reference.rank
    np.testing.assert_allclose(ours.singular_values, reference.singular_values, rtol=1e-12)
    assert ours.condition_number_estimate == pytest.approx(
        reference.condition_number_estimate, rel=1e-12)
    np.testing.assert_allclose(ours.residual_norm, reference.residual_norm, rtol=1e-12)
    np.testing.assert_allclose(ours.sketch_solution, reference.sketch_solution, rtol=1e-9)
    # The certificate comes from the same quantities; its leading term, the gradient
    # at the solution (the projected one with positive=True), is of rounding size.
    np.testing.assert_allclose(ours.coef_error_bound, reference.coef_error_bound, rtol=0.05)
    assert np.all(np.linalg.norm(ours.x - exact, axis=0) <= ours.coef_error_bound)


@pytest.mark.parametrize("options", [{}, {"fit_intercept": True, "weighted": True},
                                     {"positive": True}],
                         ids=["plain", "weighted intercept", "positive"])
def test_sketch_lstsq_of_another_library_equals_the_numpy_path(options):
    A, b, w = _problem()
    options = dict(options)
    weights = w if options.pop("weighted", False) else None
    reference = sketch_lstsq(A, b, random_state=0, block_rows=ROWS, sample_weight=weights,
                             **options)
    root = np.sqrt(np.ones(len(b)) if weights is None else weights)[:, None]
    design = A - np.average(A, axis=0, weights=weights) if options.get("fit_intercept") else A
    target = b - np.average(b, axis=0, weights=weights) if options.get("fit_intercept") else b
    exact = np.linalg.lstsq(root * design, root * target, rcond=None)[0]
    if options.get("positive"):
        exact = np.column_stack([scipy.optimize.nnls(A, column)[0] for column in b.T])
    for data in _inputs(A).values():
        ours = sketch_lstsq(data, _on_device(b), random_state=0, block_rows=ROWS,
                            sample_weight=None if weights is None else _on_device(weights),
                            **options)
        _assert_same_solution(ours, reference, exact)
        np.testing.assert_allclose(ours.intercept, reference.intercept, rtol=1e-9, atol=0)
        np.testing.assert_allclose(ours.intercept_error_bound, reference.intercept_error_bound,
                                   rtol=0.05)


def test_the_regressor_fits_another_library_as_numpy():
    A, b, w = _problem(seed=1, targets=1)
    y = b[:, 0]
    reference = SketchLstsqRegressor(random_state=0, block_rows=ROWS).fit(A, y, w)
    for kind, data in _inputs(A).items():
        model = SketchLstsqRegressor(random_state=0, block_rows=ROWS).fit(
            data, _on_device(y), sample_weight=_on_device(w))
        assert isinstance(model.coef_, np.ndarray), kind
        assert np.abs(model.coef_ - reference.coef_).max() <= 1e-10 * np.abs(
            reference.coef_).max()
        assert model.intercept_ == pytest.approx(reference.intercept_, rel=1e-9)
        np.testing.assert_allclose(model.singular_, reference.singular_, rtol=1e-12)
        assert model.coef_error_bound_ == pytest.approx(reference.coef_error_bound_, rel=1e-3)
        assert model.n_features_in_ == A.shape[1] and model.rank_ == reference.rank_


# array_api_compat.numpy runs the same wrappers as array_api_compat.cupy, CuPy's namespace.
@pytest.mark.parametrize("module", ["array_api_strict", "array_api_compat.numpy"])
@pytest.mark.parametrize("embedding", ["osnap", "countsketch", "cauchy"])
def test_the_embedding_of_a_block_in_its_namespace_is_the_numpy_paths(module, embedding):
    pytest.importorskip(module.split(".")[0])
    xp = importlib.import_module(module)
    rows = np.random.default_rng(2).standard_normal((950, 7)).astype(np.float32)
    k = 4 if embedding == "osnap" else 1
    buckets, values = embedding_entries(5, 1, 4000, 4950, 24, embedding=embedding,
                                        nnz_per_column=k)
    reference = entries_matrix(buckets, values, 24) @ rows.astype(np.float64)
    # Tiles of 100 columns of S: ten tiles, the last one short.
    on_device = _on_device(rows) if xp is xps else xp.asarray(rows)
    ours = to_host(embed_dense_rows(on_device, buckets, values, 24, xp=xp, tile_values=2400))
    assert ours.dtype == np.float64 and ours.shape == (24, 7)
    assert np.abs(ours - reference).max() <= 1e-12 * np.abs(reference).max()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # 0 * inf
def test_non_finite_values_of_another_library_are_named():
    A, b, _ = _problem(n=600, targets=1)
    A[123, 4] = np.inf
    for data in _inputs(A).values():
        with pytest.raises(ValueError, match="A contains NaN or Inf"):
            sketch_lstsq(data, b[:, 0], random_state=0, block_rows=ROWS)
    b[7, 0] = np.nan
    with pytest.raises(ValueError, match="b contains NaN or Inf"):
        sketch_lstsq(_on_device(A[:, :3]), _on_device(b[:, 0]), random_state=0)
