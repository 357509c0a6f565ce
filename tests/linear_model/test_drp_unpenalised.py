"""alpha=0 on the dual random projection estimators: unpenalised least squares
(sketch-preconditioned LSQR) and logistic regression (Newton-CG without the
ridge term), against scikit-learn and numpy."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.model_selection import GridSearchCV

from dasketch.datasets import ill_conditioned_regression
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)


def rel(a, b):
    return np.linalg.norm(np.ravel(a) - np.ravel(b)) / np.linalg.norm(np.ravel(b))


def no_warnings(fit):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = fit()
    assert not [w for w in caught if not issubclass(w.category, FutureWarning)], \
        [str(w.message) for w in caught]
    return model


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_least_squares_full_rank_matches_linear_regression(fit_intercept):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 20)) * np.logspace(0, 3, 20)
    y = X @ rng.standard_normal(20) + 2.0 + rng.standard_normal(300)
    weights = rng.integers(1, 4, 300).astype(float)
    drp = no_warnings(lambda: DualRandomProjectionRegressor(
        alpha=0, tol=1e-10, random_state=0, fit_intercept=fit_intercept).fit(
            X, y, sample_weight=weights))
    ref = LinearRegression(fit_intercept=fit_intercept).fit(X, y, sample_weight=weights)
    assert rel(drp.coef_, ref.coef_) <= 1e-9
    assert abs(drp.intercept_ - ref.intercept_) <= 1e-9 * max(1.0, abs(ref.intercept_))
    # the certificate of the fit: LSQR's normal-equation residual and its bound
    assert drp.optimality_residual_ <= 1e-10
    assert np.linalg.norm(drp.coef_ - ref.coef_) <= drp.coef_error_bound_ + 1e-12
    assert drp.n_passes_ >= 3


@pytest.mark.parametrize("shape", [(200, 12), (40, 100)])
@pytest.mark.heavy
def test_least_squares_rank_deficient_is_minimum_norm(shape):
    rng = np.random.default_rng(1)
    n, d = shape
    X = rng.standard_normal((n, 6)) @ rng.standard_normal((6, d))     # rank 6
    y = rng.standard_normal(n)
    drp = DualRandomProjectionRegressor(alpha=0.0, tol=1e-10, fit_intercept=False,
                                        random_state=0).fit(X, y)
    ref = np.linalg.lstsq(X, y, rcond=None)[0]
    assert rel(drp.coef_, ref) <= 1e-8
    Y = np.column_stack([y, 2 * y + 1])       # several targets share the sketch
    both = DualRandomProjectionRegressor(alpha=0.0, tol=1e-10, fit_intercept=False,
                                         random_state=0).fit(X, Y)
    assert both.coef_.shape == (2, d)
    assert rel(both.coef_[1], np.linalg.lstsq(X, Y[:, 1], rcond=None)[0]) <= 1e-8


def test_least_squares_misses_tol_warns():
    # cond(X) = 1e8 in no column scaling: one pass of the refinement stops at
    # about 6e-10 (its Gram matrix of X N holds relative errors near eps d 1e8)
    X, y, _ = ill_conditioned_regression(400, 30, condition_number=1e8, random_state=2)
    with pytest.warns(ConvergenceWarning, match="normal-equation residual"):
        DualRandomProjectionRegressor(alpha=0, tol=1e-14, max_iter=1,
                                      random_state=0).fit(X, y)


def logistic_problem(seed=3, n=400, d=15):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 0.3
    y = (X @ rng.standard_normal(d) / np.sqrt(d) + rng.standard_normal(n) > 0.2)
    return X, y.astype(int)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_logistic_without_penalty_matches_scikit_learn(fit_intercept):
    X, y = logistic_problem()
    clf = no_warnings(lambda: DualRandomProjectionClassifier(
        alpha=0, tol=1e-10, fit_intercept=fit_intercept, random_state=0).fit(X, y))
    ref = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12, max_iter=1000,
                             fit_intercept=fit_intercept).fit(X, y)
    assert rel(clf.coef_, ref.coef_) <= 1e-8
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, atol=1e-8)
    assert clf.optimality_residual_ <= 1e-10
    assert clf.coef_error_bound_ == np.inf        # no strong convexity, nothing bounded
    # the gradient of the unpenalised objective vanishes at the returned model
    margins = X @ clf.coef_[0] + clf.intercept_[0]
    signs = np.where(y == 1, 1.0, -1.0)
    gradient = X.T @ (-signs / (1 + np.exp(signs * margins)))
    assert np.linalg.norm(gradient) <= 1e-8 * np.linalg.norm(X.T @ (signs / 2))


def test_logistic_without_penalty_wide_projection():
    """More features than n_components: the preconditioner is not exact and the
    Newton steps need inner conjugate-gradient iterations."""
    X, y = logistic_problem(seed=4, n=600, d=60)
    clf = no_warnings(lambda: DualRandomProjectionClassifier(
        alpha=0, tol=1e-9, sketch_size=10, random_state=0).fit(X, y))
    ref = LogisticRegression(C=np.inf, solver="newton-cholesky", tol=1e-12,
                             max_iter=1000).fit(X, y)
    assert rel(clf.coef_, ref.coef_) <= 1e-7


def test_logistic_separable_data_warns_optimum_at_infinity():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((100, 5))
    y = (X @ rng.standard_normal(5) > 0).astype(int)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf = DualRandomProjectionClassifier(alpha=0, random_state=0).fit(X, y)
    messages = [str(w.message) for w in caught if issubclass(w.category, Warning)]
    assert len(messages) == 1, messages
    assert issubclass(caught[0].category, ConvergenceWarning)
    assert "linearly separable" in messages[0] and "at infinity" in messages[0]
    assert clf.score(X, y) == 1.0      # the iterate reached separates the data


def test_unpenalised_refusals_and_functional_form():
    X, y = logistic_problem()
    signs = np.where(y == 1, 1, -1)
    with pytest.raises(ValueError, match="smoothed_hinge"):
        DualRandomProjectionClassifier(alpha=0, loss="smoothed_hinge").fit(X, y)
    with pytest.raises(ValueError, match="solver='paper'"):
        DualRandomProjectionRegressor(alpha=0, solver="paper").fit(X, signs)
    with pytest.raises(ValueError, match="0 for some targets only"):
        dual_random_projection(X, np.column_stack([signs, signs]), alpha=[0.0, 1.0])
    with pytest.raises(ValueError, match=">= 0"):
        DualRandomProjectionRegressor(alpha=-1.0).fit(X, signs)
    res = dual_random_projection(X, signs.astype(float), alpha=0, random_state=0)
    with pytest.raises(ValueError, match="no dual variables"):
        res.dual_coef()


def test_grid_search_over_alphas_including_zero():
    rng = np.random.default_rng(6)
    X = rng.standard_normal((120, 8))
    y = X @ rng.standard_normal(8) + 0.1 * rng.standard_normal(120)
    search = GridSearchCV(DualRandomProjectionRegressor(random_state=0),
                          {"alpha": [0.0, 0.1, 10.0]}, cv=3).fit(X, y)
    assert search.best_params_["alpha"] in (0.0, 0.1)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    labels = (y > 0).astype(int)
    clf = GridSearchCV(DualRandomProjectionClassifier(random_state=0),
                       {"alpha": [0.0, 1.0]}, cv=3, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # small folds may separate
        clf.fit(X, labels)
    assert np.all(np.isfinite(clf.cv_results_["mean_test_score"]))
