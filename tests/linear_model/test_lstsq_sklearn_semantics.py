"""SketchLstsqRegressor / sketch_lstsq with scikit-learn's LinearRegression
semantics: sample_weight (equal to row repetition, invariant to chunking and
scheduler), 2-D targets, the minimum-norm solution of rank-deficient X with an
error bound that holds, and dtypes. The peers are numpy.linalg.lstsq and
LinearRegression itself."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from sklearn.linear_model import LinearRegression

from dasketch.datasets import ill_conditioned_regression
from dasketch.linear_model import SketchLstsqRegressor, sketch_lstsq


def rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 6)) * [1.0, 3.0, 0.1, 10.0, 1.0, 2.0] + 4.0
    y = X @ rng.standard_normal(6) + 7.0 + rng.standard_normal(1500)
    weights = rng.integers(0, 4, 1500)  # zeros included
    return X, y, weights


def min_norm(X, y, weights=None, fit_intercept=True):
    """Minimum-norm weighted least squares by numpy.linalg.lstsq (coef, intercept)."""
    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    xm = w @ X / w.sum() if fit_intercept else np.zeros(X.shape[1])
    ym = w @ y / w.sum() if fit_intercept else np.zeros(np.shape(y)[1:])
    root = np.sqrt(w).reshape((-1,) + (1,) * (np.ndim(y) - 1))
    coef = np.linalg.lstsq(np.sqrt(w)[:, None] * (X - xm), root * (y - ym), rcond=None)[0]
    return coef, ym - xm @ coef


# ------------------------------------------------------------------ sample_weight
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_integer_weights_equal_row_repetition(data, fit_intercept):
    X, y, w = data
    params = dict(fit_intercept=fit_intercept, tol=1e-14, random_state=0)
    weighted = SketchLstsqRegressor(**params).fit(X, y, sample_weight=w)
    repeated = SketchLstsqRegressor(**params).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    assert rel(weighted.coef_, repeated.coef_) <= 1e-10
    assert abs(weighted.intercept_ - repeated.intercept_) <= 1e-10 * abs(repeated.intercept_ or 1)
    # and both are the exact weighted solution, within their bounds
    coef, intercept = min_norm(X, y, w, fit_intercept)
    assert np.linalg.norm(weighted.coef_ - coef) <= weighted.coef_error_bound_ <= 1e-8
    assert abs(weighted.intercept_ - intercept) <= weighted.intercept_error_bound_


def test_weights_match_linear_regression_sparse_and_zero_weights(data):
    X, y, w = data
    real = np.random.default_rng(1).uniform(0.1, 3.0, len(y)) * (w > 0)
    ref = LinearRegression().fit(X, y, sample_weight=real)
    for Xin in (X, scipy.sparse.csr_matrix(X)):
        model = SketchLstsqRegressor(tol=1e-14, random_state=1).fit(Xin, y, sample_weight=real)
        assert rel(model.coef_, ref.coef_) <= 1e-10
        assert model.intercept_ == pytest.approx(ref.intercept_, rel=1e-10)
    # a zero weight is a removed row, whatever the row holds
    keep = real > 0
    y_wild = np.where(keep, y, 1e6)
    dropped = SketchLstsqRegressor(tol=1e-14, random_state=2).fit(X[keep], y[keep],
                                                                 sample_weight=real[keep])
    zeroed = SketchLstsqRegressor(tol=1e-14, random_state=2).fit(X, y_wild, sample_weight=real)
    assert rel(zeroed.coef_, dropped.coef_) <= 1e-10
    # a scalar weight is every row's: the unweighted fit
    plain = SketchLstsqRegressor(tol=1e-14, random_state=2).fit(X, y)
    scalar = SketchLstsqRegressor(tol=1e-14, random_state=2).fit(X, y, sample_weight=123.0)
    assert rel(scalar.coef_, plain.coef_) <= 1e-10


def test_weights_invariant_to_chunking_and_scheduler(data, cluster_client):
    X, y, w = data
    ref = SketchLstsqRegressor(random_state=3, tol=1e-14).fit(X, y, sample_weight=w)
    runs = [(da.from_array(X, chunks=(700, 6)), da.from_array(w, chunks=200), {}),
            (da.from_array(X, chunks=(128, 6)), w, {}),
            (X, da.from_array(w, chunks=999), dict(block_rows=256))]
    for Xin, win, params in runs:
        model = SketchLstsqRegressor(random_state=3, tol=1e-14, **params).fit(
            Xin, y, sample_weight=win)
        assert rel(model.coef_, ref.coef_) <= 1e-12
        assert model.intercept_ == pytest.approx(ref.intercept_, rel=1e-12)
    with cluster_client.as_current():
        model = SketchLstsqRegressor(random_state=3, tol=1e-14).fit(
            da.from_array(X, chunks=(500, 6)), y, sample_weight=da.from_array(w, chunks=300))
    assert rel(model.coef_, ref.coef_) <= 1e-12


@pytest.mark.parametrize("weights,match", [
    (-np.ones(1500), "Negative values in data passed to `sample_weight`"),
    (np.zeros(1500), "sample_weight is all zero"),
    (np.ones(10), r"sample_weight.shape == \(10,\), expected \(1500,\)"),
    (np.ones((1500, 2)), "Sample weights must be 1D"),
    (np.full(1500, np.nan), "sample_weight contains NaN"),
])
def test_bad_sample_weight_is_named(data, weights, match):
    X, y, _ = data
    with pytest.raises(ValueError, match=match):
        SketchLstsqRegressor().fit(X, y, sample_weight=weights)
    with pytest.raises(ValueError, match=match):
        sketch_lstsq(X, y, sample_weight=weights)


# ------------------------------------------------------------------ 2-D targets
def test_several_targets_as_linear_regression(data):
    X, y, w = data
    Y = np.column_stack([y, -2.0 * y + X[:, 0], np.sin(y)])
    model = SketchLstsqRegressor(random_state=0).fit(X, Y, sample_weight=w)
    ref = LinearRegression().fit(X, Y, sample_weight=w)
    assert model.coef_.shape == (3, 6) and model.intercept_.shape == (3,)
    np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(model.intercept_, ref.intercept_, rtol=1e-8)
    assert model.predict(X).shape == (1500, 3)
    lazy = model.predict(da.from_array(X, chunks=400))
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), ref.predict(X), rtol=1e-8)
    # every target has its own accuracy figures, and each bound holds
    coef, _ = min_norm(X, Y, w)
    for name in ("coef_error_bound_", "intercept_error_bound_", "optimality_residual_"):
        assert np.shape(getattr(model, name)) == (3,)
    assert np.all(np.linalg.norm(model.coef_ - coef.T, axis=1) <= model.coef_error_bound_)
    # one target per column equals the 1-D fit; 1-D y keeps 1-D outputs
    single = SketchLstsqRegressor(random_state=0).fit(X, Y[:, 1], sample_weight=w)
    assert single.coef_.shape == (6,) and np.ndim(single.intercept_) == 0
    assert single.predict(X).shape == (1500,)
    assert np.ndim(single.coef_error_bound_) == 0
    np.testing.assert_allclose(single.coef_, model.coef_[1], rtol=1e-8)
    column = SketchLstsqRegressor(random_state=0).fit(X, Y[:, :1])
    assert column.coef_.shape == LinearRegression().fit(X, Y[:, :1]).coef_.shape == (1, 6)


# ------------------------------------------------------------------ rank deficiency
def test_duplicated_column_gives_the_minimum_norm_solution():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3000, 5))
    X = np.column_stack([X, X[:, 2], 2.0 * X[:, 4]])
    y = X @ rng.standard_normal(7) + rng.standard_normal(3000)
    res = sketch_lstsq(X, y, random_state=0)
    x_ref = np.linalg.lstsq(X, y, rcond=None)[0]
    assert res.rank == 5
    assert np.linalg.norm(res.x - x_ref) <= res.coef_error_bound <= 1e-8 * np.linalg.norm(x_ref)
    assert res.x[2] == pytest.approx(res.x[5], rel=1e-10)  # the split of the minimum norm
    model = SketchLstsqRegressor(fit_intercept=False, random_state=0).fit(X, y)
    assert model.rank_ == LinearRegression(fit_intercept=False).fit(X, y).rank_ == 5
    assert np.linalg.norm(model.coef_ - x_ref) <= model.coef_error_bound_


def test_one_hot_columns_with_an_intercept_as_linear_regression():
    rng = np.random.default_rng(6)
    n = 4000
    groups = rng.integers(0, 5, n)
    X = np.column_stack([rng.standard_normal((n, 3)), np.eye(5)[groups]])
    y = X @ rng.standard_normal(8) + 3.0 + rng.standard_normal(n)
    w = rng.uniform(0.0, 2.0, n)
    for weights in (None, w):
        model = SketchLstsqRegressor(random_state=0).fit(X, y, sample_weight=weights)
        ref = LinearRegression().fit(X, y, sample_weight=weights)
        coef, intercept = min_norm(X, y, weights)
        assert model.rank_ == ref.rank_ == 7
        assert np.linalg.norm(model.coef_ - coef) <= model.coef_error_bound_ <= 1e-9
        assert abs(model.intercept_ - intercept) <= model.intercept_error_bound_ <= 1e-9
        # the one-hot coefficients sum to 0 (the minimum norm leaves the mean to the intercept)
        assert abs(model.coef_[3:].sum()) <= 1e-9
        np.testing.assert_allclose(model.coef_, ref.coef_, atol=1e-8)
        np.testing.assert_allclose(model.predict(X), ref.predict(X), atol=1e-8)
    # the singular values of the weighted, centred X, 0 beyond the rank
    assert model.singular_.shape == (8,) and model.singular_[-1] == 0
    np.testing.assert_allclose(model.singular_[:7], ref.singular_[:7], rtol=1e-8)
    assert ref.singular_[7] <= 1e-12 * ref.singular_[0]


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_singular_values_are_those_of_linear_regression(fit_intercept):
    """``singular_`` is exact, not the sketch's: LinearRegression's (of
    ``W^(1/2) (X - 1 m^T)``) to 1e-8 relative, on data of condition number 1e7
    with a large mean, weighted or not, dense, sparse or a chunked Dask array."""
    rng = np.random.default_rng(8)
    n, d = 3000, 7
    rotation = np.linalg.qr(rng.standard_normal((d, d)))[0]
    X = rng.standard_normal((n, d)) * np.logspace(0, 7, d) @ rotation + 100.0
    y = X @ rng.standard_normal(d) + rng.standard_normal(n)
    w = rng.integers(0, 4, n).astype(float)
    for weights in (None, w):
        ref = LinearRegression(fit_intercept=fit_intercept).fit(X, y, sample_weight=weights)
        sketched = sketch_lstsq(X, y, random_state=0, sample_weight=weights,
                                fit_intercept=fit_intercept).singular_values
        assert np.max(np.abs(sketched / ref.singular_ - 1)) > 1e-3  # the sketch's are not
        for rows, block_rows in ((X, None), (scipy.sparse.csr_matrix(X), 700),
                                 (da.from_array(X, chunks=(450, -1)), 800)):
            model = SketchLstsqRegressor(fit_intercept=fit_intercept, random_state=0,
                                         block_rows=block_rows)
            model.fit(rows, y, sample_weight=weights)
            np.testing.assert_allclose(model.singular_, ref.singular_, rtol=1e-8)


def test_fewer_rows_than_columns_and_degenerate_input():
    rng = np.random.default_rng(7)
    X, y = rng.standard_normal((12, 40)), rng.standard_normal(12)
    res = sketch_lstsq(X, y, random_state=0)
    x_ref = np.linalg.lstsq(X, y, rcond=None)[0]
    assert res.rank == 12 and np.linalg.norm(res.x - x_ref) <= res.coef_error_bound <= 1e-10
    # LinearRegression's own small cases (scikit-learn's test_linear_regression)
    model = SketchLstsqRegressor().fit([[1.0], [2.0]], [1.0, 2.0])
    np.testing.assert_allclose([model.coef_[0], model.intercept_], [1.0, 0.0], atol=1e-12)
    model = SketchLstsqRegressor().fit([[1.0]], [0.0])
    assert model.rank_ == 0 and model.coef_[0] == 0.0 and model.intercept_ == 0.0


@pytest.mark.parametrize("kind", ["ill-conditioned", "scaled", "off-centre", "near-singular"])
def test_error_bound_holds_with_an_intercept(kind):
    # cond(A) = 1e6; off-centre by 1e3 (cond 1e9 without centring); near-singular:
    # off-centre by 1e6, cond 1e12 without centring, where the error is at the
    # rounding floor and only the bound's rounding term covers it
    A, b, _ = ill_conditioned_regression(6000, 12, condition_number=1e6, random_state=8)
    A, b = {"scaled": (A * 1e8, b * 1e-3), "off-centre": (A + 1e3, b),
            "near-singular": (A + 1e6, b)}.get(kind, (A, b))
    for fit_intercept in (True, False):
        model = SketchLstsqRegressor(fit_intercept=fit_intercept, random_state=0).fit(A, b)
        coef, intercept = min_norm(A, b, fit_intercept=fit_intercept)
        error = np.linalg.norm(model.coef_ - coef)
        assert error <= model.coef_error_bound_
        assert abs(model.intercept_ - intercept) <= model.intercept_error_bound_
        if kind != "near-singular":
            # off-centre, the worst-case rounding of products with the raw rows
            # (entries near 1e3) puts the bound near 1e-1 of ||coef||
            tight = 2e-1 if kind == "off-centre" else 1e-2
            assert model.coef_error_bound_ <= tight * np.linalg.norm(coef)


# ------------------------------------------------------------------ dtypes
def test_float32_in_float32_out_and_numpy_intercepts(data):
    X, y, w = data
    X32, Y = X.astype(np.float32), np.column_stack([y, 2 * y]).astype(np.float32)
    model = SketchLstsqRegressor(random_state=0).fit(X32, Y[:, 0], sample_weight=w)
    assert model.coef_.dtype == np.float32 and type(model.intercept_) is np.float32
    assert model.predict(X32).dtype == np.float32
    assert model.predict(da.from_array(X32, chunks=500)).dtype == np.float32
    # the bound includes the rounding to float32
    coef, _ = min_norm(X32.astype(float), Y[:, 0].astype(float), w)
    assert np.linalg.norm(model.coef_ - coef) <= model.coef_error_bound_
    two = SketchLstsqRegressor(random_state=0).fit(X32, Y)
    assert two.intercept_.dtype == np.float32 and two.intercept_.shape == (2,)
    assert two.predict(X32).dtype == np.float32
    plain = SketchLstsqRegressor(random_state=0).fit(X, y)
    assert type(plain.intercept_) is np.float64
    assert type(SketchLstsqRegressor(fit_intercept=False).fit(X, y).intercept_) is np.float64
