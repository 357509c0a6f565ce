"""positive=True with an l1 or elastic-net penalty: proximal Newton over ``w >= 0``
against scikit-learn's Lasso / ElasticNet(positive=True) and an independent
high-accuracy reference (L-BFGS-B on the bound-constrained problem, where the
penalty is smooth), its one-sided duality gap, and the case ``w = 0``."""

import warnings

import numpy as np
import pytest
import scipy.sparse
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.linear_model.dual_projection.proximal import penalty_path
from dasketch.utils._sklearn_compat import InvalidParameterError
from tests.linear_model.test_drp_l1 import gaps_at, low_rank_problem


@pytest.fixture(scope="module")
def data():
    """A truth of both signs: the constraint binds."""
    return low_rank_problem()


def objective(X, y, w, b, alpha, rho, loss="squared"):
    """The objective over ``w >= 0``, written out independently of the package."""
    if np.any(w < 0):
        return np.inf
    t = X @ w + b
    fit = 0.5 * np.sum((t - y) ** 2) if loss == "squared" else np.logaddexp(0, -y * t).sum()
    return fit + alpha * (rho * w.sum() + 0.5 * (1 - rho) * w @ w)


def reference(X, y, alpha, rho, loss="squared"):
    """``min_{w >= 0, b}`` by L-BFGS-B: on ``w >= 0`` the penalty is smooth
    (``||w||_1 = sum(w)``)."""
    d = X.shape[1]

    def value_and_gradient(v):
        w, b = v[:d], v[d]
        t = X @ w + b
        if loss == "squared":
            r = t - y
            value, dual = 0.5 * r @ r, r
        else:
            value = np.logaddexp(0, -y * t).sum()
            dual = -y / (1 + np.exp(y * t))
        value += alpha * (rho * w.sum() + 0.5 * (1 - rho) * w @ w)
        grad_w = X.T @ dual + alpha * (rho + (1 - rho) * w)
        return value, np.append(grad_w, dual.sum())

    found = minimize(value_and_gradient, np.zeros(d + 1), jac=True, method="L-BFGS-B",
                     bounds=[(0, None)] * d + [(None, None)],
                     options={"maxiter": 50_000, "maxfun": 100_000, "ftol": 1e-16,
                              "gtol": 1e-13, "maxcor": 50})
    return found.x[:d], found.x[d]


@pytest.fixture(scope="module")
def minimum(data):
    """``(w, b, objective)`` of :func:`reference` per ``(loss, alpha, rho)``, once."""
    X, y, labels = data
    found = {}

    def get(loss, alpha, rho):
        if (loss, alpha, rho) not in found:
            target = y if loss == "squared" else labels
            w, b = reference(X, target, alpha, rho, loss)
            found[loss, alpha, rho] = w, b, objective(X, target, w, b, alpha, rho, loss)
        return found[loss, alpha, rho]
    return get


def _sklearn(X, y, alpha, rho):
    n = X.shape[0]
    options = dict(alpha=alpha / n, positive=True, tol=1e-14, max_iter=200_000)
    if rho == 1.0:
        return Lasso(**options).fit(X, y)
    return ElasticNet(l1_ratio=rho, **options).fit(X, y)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("rho", [1.0, 0.5])
def test_agrees_with_scikit_learn(data, rho, sparse):
    X, y, _ = data
    alpha = 40.0
    model = DualRandomProjectionRegressor(
        alpha=alpha, penalty="l1" if rho == 1.0 else "elasticnet", l1_ratio=rho,
        positive=True, sketch_size=20, tol=1e-12, random_state=0)
    model.fit(scipy.sparse.csr_matrix(X) if sparse else X, y)
    exact = _sklearn(X, y, alpha, rho)
    ours = objective(X, y, model.coef_, model.intercept_, alpha, rho)
    theirs = objective(X, y, exact.coef_, exact.intercept_, alpha, rho)
    start = objective(X, y, 0 * model.coef_, y.mean(), alpha, rho)
    assert model.coef_.min() >= 0 and 0 < np.count_nonzero(model.coef_)
    # the constraint binds: the unconstrained fit has negative coefficients
    assert Lasso(alpha=alpha / X.shape[0]).fit(X, y).coef_.min() < 0
    assert model.duality_gap_ <= 1e-12 * start
    assert ours - theirs <= model.duality_gap_
    np.testing.assert_allclose(model.objective_, ours, rtol=1e-12)
    np.testing.assert_allclose(model.coef_, exact.coef_, atol=1e-6 * np.abs(exact.coef_).max())
    np.testing.assert_allclose(model.intercept_, exact.intercept_, rtol=1e-6)
    assert np.array_equal(model.coef_ > 0, exact.coef_ > 0)
    if rho < 1:     # strong convexity bounds the coefficients' error
        assert np.linalg.norm(model.coef_ - exact.coef_) <= model.coef_error_bound_ + 1e-9


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("max_iter", [1, 3])
def test_gap_bounds_the_suboptimality(data, minimum, loss, max_iter):
    """Early iterates: ``objective - min <= duality_gap`` with the minimum from
    L-BFGS-B on the bound-constrained problem; the gap is also not vacuous."""
    X, y, labels = data
    target = y if loss == "squared" else labels
    alpha, rho = (40.0, 0.8) if loss == "squared" else (2.0, 1.0)
    w_ref, b_ref, best = minimum(loss, alpha, rho)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        early = dual_random_projection(X, target, loss=loss, alpha=alpha,
                                       penalty="elasticnet", l1_ratio=rho, positive=True,
                                       sketch_size=20, tol=1e-13, max_iter=max_iter,
                                       random_state=0)
    rounding = 1e-13 * best
    assert early.coef.min() >= 0
    assert early.objective - best <= early.duality_gap + rounding
    assert early.duality_gap <= 1e4 * max(early.objective - best, rounding)
    full = dual_random_projection(X, target, loss=loss, alpha=alpha, penalty="elasticnet",
                                  l1_ratio=rho, positive=True, sketch_size=20, tol=1e-12,
                                  random_state=0)
    assert full.converged and full.objective - best <= full.duality_gap + rounding
    np.testing.assert_allclose(full.coef, w_ref, atol=1e-5 * np.abs(w_ref).max())


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("rho", [1.0, 0.7])
def test_gap_of_any_nonnegative_point_bounds_its_suboptimality(data, minimum, loss, rho):
    """The one-sided gap at arbitrary ``w >= 0`` (intercepts far off included, and
    ``w = 0``, where the gradient points into ``w > 0``) is at least the
    suboptimality, with the minimum from L-BFGS-B, and closes at that minimum."""
    X, y, labels = data
    target = y if loss == "squared" else labels
    alpha = 40.0 if loss == "squared" else 2.0
    w_ref, b_ref, best = minimum(loss, alpha, rho)
    rng = np.random.default_rng(0)
    for shift, spread, scale in ((-3.0, 0.0, 1.0), (0.0, 0.05, 1.0), (3.0, 0.3, 1.0),
                                 (0.0, 0.0, 0.0), (0.0, 0.0, 0.5), (0.0, 0.0, 1.0)):
        w = np.maximum(scale * w_ref + spread * rng.standard_normal(X.shape[1]), 0.0)
        b = b_ref + shift
        P, D, gap = gaps_at(X, target, w, b, loss, alpha * rho, alpha * (1 - rho),
                            positive=True)
        assert np.isclose(P, objective(X, target, w, b, alpha, rho, loss), rtol=1e-12)
        assert D <= best * (1 + 1e-12)
        assert P - best <= gap
    assert gap <= 1e-5 * best      # the last point: the minimum (as L-BFGS-B finds it)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_every_coefficient_zero_when_no_feature_helps():
    """``max_j X_j^T (y - mean y) <= 0``: ``w = 0`` is optimal at any penalty (the
    two-sided fit is not 0), certified at once without a continuation."""
    rng = np.random.default_rng(1)
    n, d = 80, 12
    y = rng.standard_normal(n) + 3.0
    centred = y - y.mean()
    X = -np.outer(centred, rng.uniform(0.5, 2.0, d)) + 0.1 * rng.standard_normal((n, d))
    correlation = (X - X.mean(axis=0)).T @ centred
    assert correlation.max() < 0
    alpha = 1e-3
    assert np.abs(Lasso(alpha=alpha / n).fit(X, y).coef_).max() > 0.1
    assert np.all(Lasso(alpha=alpha / n, positive=True, tol=1e-12).fit(X, y).coef_ == 0)
    for rho in (1.0, 0.5):
        res = dual_random_projection(X, y, alpha=alpha, penalty="elasticnet", l1_ratio=rho,
                                     positive=True, sketch_size=12, tol=1e-12,
                                     random_state=0)
        assert np.all(res.coef == 0) and res.converged and res.n_iter == 0
        np.testing.assert_allclose(res.intercept, y.mean(), rtol=1e-12)
        assert res.duality_gap <= 1e-12 * res.objective
    # no stage of the continuation before the target
    l1, l2 = np.array([alpha]), np.array([0.0])
    gradient = -correlation[:, None]        # X^T (X 0 + b0 - y)
    assert len(penalty_path(gradient, l1, l2, positive=True)) == 1
    assert len(penalty_path(gradient, l1, l2)) > 1


@pytest.mark.heavy
def test_logistic_one_vs_rest_against_the_reference(data):
    X, y, _ = data
    labels = np.digitize(y, np.quantile(y, [0.3, 0.6]))      # three classes
    clf = DualRandomProjectionClassifier(alpha=2.0, penalty="l1", positive=True,
                                         sketch_size=20, tol=1e-12, random_state=0)
    clf.fit(X, labels)
    assert clf.multi_class_ == "ovr" and clf.coef_.min() >= 0
    assert np.all(clf.duality_gap_ <= 1e-12 * X.shape[0])
    binary = np.where(labels == 2, 1, -1)      # each class's model is its binary one's
    w_ref, b_ref = reference(X, binary, 2.0, 1.0, "logistic")
    ours = objective(X, binary, clf.coef_[2], clf.intercept_[2], 2.0, 1.0, "logistic")
    best = objective(X, binary, w_ref, b_ref, 2.0, 1.0, "logistic")
    assert ours - best <= clf.duality_gap_[2] + 1e-13 * best
    np.testing.assert_allclose(clf.coef_[2], w_ref, atol=1e-5 * np.abs(w_ref).max())


@pytest.mark.parametrize("params, match", [
    ({"loss": "logistic", "alpha": 0.0, "penalty": "l1"}, "positive=True with loss"),
    ({"loss": "logistic", "penalty": "elasticnet", "l1_ratio": 0.0}, "positive=True needs"),
    ({"loss": "smoothed_hinge", "penalty": "l2"}, "positive=True needs"),
])
def test_refused_where_there_is_no_method(data, params, match):
    X, _, labels = data
    clf = DualRandomProjectionClassifier(positive=True, **params)
    with pytest.raises(InvalidParameterError, match=match):
        clf.fit(X, labels)
    assert not hasattr(clf, "classes_") and not hasattr(clf, "coef_")
    with pytest.raises(InvalidParameterError, match=match):
        dual_random_projection(X, labels, positive=True, **params)
