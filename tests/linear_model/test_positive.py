"""positive=True: ridge by dual random projection (projected Newton with the
restricted projection preconditioner) and least squares by the sketch, against
exact nonnegative least squares (scipy.optimize.nnls on the augmented system),
scikit-learn's Ridge and LinearRegression, and their own KKT certificates."""

from __future__ import annotations

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from scipy.optimize import nnls
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, RidgeClassifier

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
    sketch_lstsq,
)
from dasketch.linear_model.nonnegative import RestrictedPreconditioner, projected_gradient
from dasketch.utils._sklearn_compat import InvalidParameterError


def exact_positive_ridge(X, y, alpha, fit_intercept, weights):
    """``min_{w >= 0, b} alpha/2 ||w||^2 + 1/2 sum s_i (x_i w + b - y_i)^2`` by nnls
    on ``[S^(1/2) (X - m); sqrt(alpha) I] w = [S^(1/2) (y - m_y); 0]``."""
    if fit_intercept:
        mean, y_mean = weights @ X / weights.sum(), weights @ y / weights.sum()
        X, y = X - mean, y - y_mean
    root = np.sqrt(weights)[:, None]
    d = X.shape[1]
    A = np.vstack([root * X, np.sqrt(alpha) * np.eye(d)])
    w = nnls(A, np.concatenate([root[:, 0] * y, np.zeros(d)]), maxiter=50 * d)[0]
    return w, (y_mean - mean @ w) if fit_intercept else 0.0


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 40)) * np.logspace(0, 1, 40)
    y = X @ rng.standard_normal(40) + 5.0 + rng.standard_normal(120)
    return X, y, rng.uniform(0.5, 2.0, 120)


def as_input(X, kind, tmp_path):
    if kind == "csr":
        return scipy.sparse.csr_matrix(X)
    if kind == "zarr":
        path = str(tmp_path / "X.zarr")
        da.from_array(X, chunks=(50, 40)).to_zarr(path)
        return path
    return X


@pytest.mark.parametrize("kind", ["dense", "csr", "zarr"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_positive_ridge_matches_exact_nonnegative_solution(data, kind, fit_intercept,
                                                           tmp_path):
    X, y, weights = data
    alpha = 3.0
    w, b = exact_positive_ridge(X, y, alpha, fit_intercept, weights)
    assert (w == 0).sum() >= 5 and (w > 0).sum() >= 5       # constraints bind
    model = DualRandomProjectionRegressor(
        alpha=alpha, positive=True, fit_intercept=fit_intercept, sketch_size=20, tol=1e-8,
        random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model.fit(as_input(X, kind, tmp_path), y, sample_weight=weights)
    assert model.coef_.min() >= 0.0
    error = np.linalg.norm(model.coef_ - w)
    assert error <= 1e-8 * np.linalg.norm(w)
    assert error <= model.coef_error_bound_ <= 1e-8 * np.linalg.norm(model.coef_)
    assert abs(model.intercept_ - b) <= 1e-8 * max(1.0, abs(b))
    assert model.optimality_residual_ <= 1e-10


def test_certificate_bounds_the_error_before_convergence(data):
    X, y, weights = data
    w, _ = exact_positive_ridge(X, y, 0.3, True, weights)
    for max_iter in (1, 2):      # the fit converges in three iterations
        with pytest.warns(Warning):
            model = DualRandomProjectionRegressor(
                alpha=0.3, positive=True, sketch_size=5, max_iter=max_iter,
                random_state=0).fit(X, y, sample_weight=weights)
        error = np.linalg.norm(model.coef_ - w)
        assert 1e-9 < error <= model.coef_error_bound_


def test_several_targets_and_ridge_classifier(data):
    X, y, _ = data
    Y = np.column_stack([y, -y + 3.0, np.abs(y)])
    alphas = np.array([0.5, 2.0, 8.0])
    model = DualRandomProjectionRegressor(alpha=alphas, positive=True, sketch_size=40,
                                          tol=1e-8, random_state=0).fit(X, Y)
    ones = np.ones(len(y))
    for k in range(3):
        w, b = exact_positive_ridge(X, Y[:, k], alphas[k], True, ones)
        assert np.linalg.norm(model.coef_[k] - w) <= 1e-8 * np.linalg.norm(w)
        assert abs(model.intercept_[k] - b) <= 1e-8 * max(1.0, abs(b))
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    clf = DualRandomProjectionClassifier(alpha=1.0, loss="squared", positive=True,
                                         sketch_size=40, tol=1e-8,
                                         random_state=0).fit(X, labels)
    ref = RidgeClassifier(alpha=1.0, positive=True, tol=1e-12).fit(X, labels)
    assert clf.coef_.min() >= 0.0
    assert np.abs(clf.coef_ - ref.coef_).max() <= 1e-5 * np.abs(ref.coef_).max()
    assert (clf.predict(X) == ref.predict(X)).mean() == 1.0


@pytest.mark.parametrize("kind", ["dense", "csr"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_positive_least_squares_matches_linear_regression(data, kind, fit_intercept, tmp_path):
    X, y, weights = data
    ref = LinearRegression(positive=True, fit_intercept=fit_intercept).fit(
        X, y, sample_weight=weights)
    w, b = exact_positive_ridge(X, y, 0.0, fit_intercept, weights)
    assert np.linalg.norm(ref.coef_ - w) <= 1e-9 * np.linalg.norm(w)
    assert (w == 0).sum() >= 5
    for model in (SketchLstsqRegressor(positive=True, fit_intercept=fit_intercept,
                                       random_state=0),
                  DualRandomProjectionRegressor(alpha=0.0, positive=True,
                                                fit_intercept=fit_intercept, tol=1e-10,
                                                random_state=0)):
        model.fit(as_input(X, kind, tmp_path), y, sample_weight=weights)
        error = np.linalg.norm(model.coef_ - w)
        assert model.coef_.min() >= 0.0
        assert error <= 1e-8 * np.linalg.norm(w)
        assert error <= model.coef_error_bound_ <= 1e-6 * np.linalg.norm(w)
        assert abs(model.intercept_ - b) <= 1e-8 * max(1.0, abs(b))
        assert model.optimality_residual_ <= 1e-10


def test_sketch_lstsq_positive_reports_its_kkt_residual():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((500, 15))
    b = A @ rng.standard_normal(15) + 0.1 * rng.standard_normal(500)
    res = sketch_lstsq(A, b, positive=True, random_state=0)
    x = nnls(A, b)[0]
    assert np.linalg.norm(res.x - x) <= res.coef_error_bound <= 1e-6
    kkt = projected_gradient(res.x[:, None], (A.T @ (A @ res.x - b))[:, None])
    assert np.linalg.norm(kkt) <= 1e-9 * np.linalg.norm(A.T @ b)
    assert res.istop == 1 and res.optimality_residual <= 1e-10


@pytest.mark.parametrize("params", [{"loss": "logistic"}, {"loss": "smoothed_hinge"},
                                    {"loss": "squared", "solver": "paper"}])
def test_refused_where_there_is_no_method_and_nothing_is_fitted(data, params):
    X, y, _ = data
    clf = DualRandomProjectionClassifier(positive=True, **params)
    with pytest.raises(InvalidParameterError, match="positive=True"):
        clf.fit(X, y > 0)
    assert not hasattr(clf, "classes_") and not hasattr(clf, "coef_")
    with pytest.raises(InvalidParameterError, match="positive=True"):
        dual_random_projection(X, np.sign(y), positive=True, **params)
    with pytest.raises(InvalidParameterError, match="positive"):
        DualRandomProjectionRegressor(positive="yes").fit(X, y)


def test_restricted_preconditioner_is_the_inverse_of_the_principal_submatrix():
    rng = np.random.default_rng(4)
    d, k = 12, 5
    V = np.linalg.qr(rng.standard_normal((d, k)))[0]
    B = rng.standard_normal((k, k))
    E = B @ B.T + 0.5 * np.eye(k)
    M = 2.0 * np.eye(d) + V @ E @ V.T
    c, e = rng.standard_normal(d), 50.0
    full = np.block([[M, c[:, None]], [c[None, :], np.array([[e]])]])
    free = rng.random(d) < 0.6
    rows = np.append(free, True)
    r = rng.standard_normal(rows.sum())
    z = RestrictedPreconditioner(2.0, V, E, free, (c, e)).apply(r)
    np.testing.assert_allclose(full[np.ix_(rows, rows)] @ z, r, rtol=1e-10, atol=1e-12)
