"""The defaults of dual random projection against scikit-learn's defaults, and the fit
of sparse X on the columns some sample uses."""

import warnings

import numpy as np
import pytest
import scipy.sparse
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.linear_model.dual_projection.columns import used_columns


def sparse_text_like(n=600, d=5000, used=900, seed=0):
    """Rows of unit norm on ``used`` of ``d`` columns (Zipf-like column use), and
    labels of a noisy linear score: hashed text in small."""
    rng = np.random.default_rng(seed)
    columns = rng.choice(d, size=used, replace=False)
    p = 1.0 / np.arange(1, used + 1)
    X = scipy.sparse.lil_matrix((n, d))
    for i in range(n):
        X[i, columns[rng.choice(used, size=30, p=p / p.sum())]] = 1.0
    X = X.tocsr()
    X = scipy.sparse.diags(1.0 / np.sqrt(X.multiply(X).sum(axis=1)).A1) @ X
    score = X @ (rng.standard_normal(d) * 3.0)
    y = (score + 0.3 * rng.standard_normal(n) > np.median(score)).astype(int)
    return X.tocsr(), y


def relative_residual(X, s, coef, intercept, b0, loss):
    """``||grad F(w, b)|| / ||grad F(0, b0)||`` for alpha = 1 (``s``: the targets,
    +-1 labels for the logistic loss)."""
    def gradient(w, b):
        t = X @ w + b
        dual = -s * expit(-s * t) if loss == "logistic" else t - s
        return np.append(w + X.T @ dual, dual.sum())
    return (np.linalg.norm(gradient(coef, intercept))
            / np.linalg.norm(gradient(np.zeros(X.shape[1]), b0)))


def test_default_fit_is_as_accurate_as_scikit_learns_default():
    """The rule the default tol states: at their defaults, dasketch's coefficients
    are at least as close to the optimum as scikit-learn's, and its relative
    optimality residual at least as small (LogisticRegression's lbfgs and Ridge's
    sparse_cg, both at tol=1e-4)."""
    X, y = sparse_text_like()
    s = 2.0 * y - 1.0
    p = y.mean()
    cases = [("logistic", LogisticRegression, DualRandomProjectionClassifier, y,
              np.log(p / (1 - p)),
              LogisticRegression(solver="newton-cg", tol=1e-12, max_iter=1000)),
             ("squared", Ridge, DualRandomProjectionRegressor, s, s.mean(),
              Ridge(solver="lsqr", tol=1e-14, max_iter=100_000))]
    for loss, Peer, Ours, target, b0, tight in cases:
        reference = tight.fit(X, target).coef_.ravel()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            peer = Peer().fit(X, target)
        ours = Ours(random_state=0).fit(X, target)
        errors, residuals = [], []
        for model in (peer, ours):
            coef, intercept = model.coef_.ravel(), float(np.ravel(model.intercept_)[0])
            errors.append(np.linalg.norm(coef - reference) / np.linalg.norm(reference))
            residuals.append(relative_residual(X, s, coef, intercept, b0, loss))
        assert errors[1] <= errors[0], (loss, errors)
        assert residuals[1] <= residuals[0], (loss, residuals)
        # and the certificate: the bound holds, within the default tol
        assert np.linalg.norm(ours.coef_.ravel() - reference) <= ours.coef_error_bound_ + 1e-9
        assert ours.coef_error_bound_ <= ours.tol * np.linalg.norm(ours.coef_)


def test_used_columns_of_sparse_input_only():
    X, _ = sparse_text_like(n=50, d=400, used=60)
    used = used_columns(X)
    assert np.array_equal(used, np.flatnonzero(X.getnnz(axis=0)))
    assert np.array_equal(used_columns(X.tocsc()), used)
    assert np.array_equal(used_columns(X.tocoo()), used)
    assert used_columns(X.toarray()) is None                     # dense: not inspected
    assert used_columns(X[:, used]) is None                      # every column used
    assert used_columns(scipy.sparse.csr_matrix((5, 7))) is None  # none used


@pytest.mark.parametrize("classes", [2, pytest.param(3, marks=pytest.mark.slow)])
def test_unused_columns_are_zero_and_the_rest_is_the_fit_without_them(classes):
    """The fit on all columns is the fit on the used ones (the same computation,
    bit for bit, with the same seed), with zeros in the unused columns; it
    matches scikit-learn within its certificate."""
    X, y = sparse_text_like(n=150, d=1000, used=150)
    if classes == 3:
        y = np.where(np.arange(y.size) % 3 == 0, 2, y)
    used = np.flatnonzero(X.getnnz(axis=0))
    full = DualRandomProjectionClassifier(random_state=0).fit(X, y)
    packed = DualRandomProjectionClassifier(random_state=0).fit(X[:, used], y)
    unused = np.setdiff1d(np.arange(X.shape[1]), used)
    assert full.coef_.shape == (1 if classes == 2 else classes, X.shape[1])
    assert full.n_features_in_ == X.shape[1]
    assert not full.coef_[:, unused].any()
    np.testing.assert_array_equal(full.coef_[:, used], packed.coef_)
    np.testing.assert_array_equal(full.intercept_, packed.intercept_)
    assert full.coef_error_bound_ == packed.coef_error_bound_
    if classes == 2:
        np.testing.assert_array_equal(full.naive_coef_[:, used], packed.naive_coef_)
        assert not full.naive_coef_[:, unused].any()
    reference = LogisticRegression(solver="newton-cg", tol=1e-12, max_iter=1000).fit(X, y)
    assert (np.linalg.norm(full.coef_ - reference.coef_)
            <= np.sum(full.coef_error_bound_) + 1e-9)
    np.testing.assert_array_equal(full.predict(X), packed.predict(X[:, used]))


def test_function_fits_used_columns_and_keeps_its_dual():
    """``dual_random_projection`` on sparse X: coefficients over all columns, and
    its dual variables those of the fit (``coef = -X^T dual / alpha``)."""
    X, y = sparse_text_like(n=200, d=2000, used=300)
    res = dual_random_projection(X, 2.0 * y - 1.0, loss="logistic", alpha=2.0, tol=1e-10,
                                 random_state=0)
    assert res.coef.shape == (X.shape[1],)
    dual = np.asarray(res.dual_coef())
    np.testing.assert_allclose(res.coef, -(X.T @ dual) / 2.0,
                               atol=1e-8 * np.abs(res.coef).max())


def test_warning_on_sparse_input_names_the_callers_line():
    """Fitting on the used columns adds no frame between the caller and the
    warning: a fit that misses tol is reported at the line that asked for it."""
    X, y = sparse_text_like(n=100, d=1000, used=200)
    for solve in (lambda: dual_random_projection(X, 2.0 * y - 1.0, loss="logistic",
                                                 tol=1e-14, max_iter=1, random_state=0),
                  lambda: dual_random_projection(X, 2.0 * y - 1.0, tol=1e-14, max_iter=1,
                                                 random_state=0)):
        with pytest.warns(ConvergenceWarning) as caught:
            solve()
        assert caught[0].filename == __file__
