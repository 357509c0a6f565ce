"""Multinomial (softmax) logistic regression of DualRandomProjectionClassifier
against scikit-learn's LogisticRegression: the same probabilities, the
certificate ||W - W*||_F <= coef_error_bound_, dense, sparse and zarr input,
invariance to the blocking, and the rules of multi_class."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import dask.array as da
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from scipy.special import logsumexp, softmax
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from dasketch.linear_model import DualRandomProjectionClassifier
from dasketch.linear_model.dual_projection.multinomial import bound_parts
from dasketch.utils._sklearn_compat import InvalidParameterError


def exact(X, y, alpha, sample_weight=None, **kwargs):
    """scikit-learn's multinomial fit, to rounding (newton-cg, the tightest)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LogisticRegression(C=1.0 / alpha if alpha else np.inf, tol=1e-14,
                                  max_iter=10000, solver="newton-cg", **kwargs).fit(
            X, y, sample_weight=sample_weight)


def fit(X, y, sample_weight=None, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return DualRandomProjectionClassifier(**params).fit(X, y, sample_weight=sample_weight)


def certified(clf, reference):
    """The certificate holds against the exact fit and meets tol."""
    error = np.linalg.norm(clf.coef_ - reference.coef_)
    assert error <= clf.coef_error_bound_
    assert clf.coef_error_bound_ <= clf.tol * np.linalg.norm(clf.coef_)
    return error


@pytest.fixture(scope="module")
def iris():
    return load_iris(return_X_y=True)


def test_iris_gives_scikit_learn_probabilities(iris):
    X, y = iris
    clf = fit(X, y, alpha=1.0, tol=1e-8)
    reference = exact(X, y, 1.0)
    assert clf.multi_class_ == "multinomial"
    assert np.abs(clf.predict_proba(X) - reference.predict_proba(X)).max() <= 1e-4
    np.testing.assert_array_equal(clf.predict(X), reference.predict(X))
    certified(clf, reference)
    assert clf.intercept_.sum() == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(clf.intercept_, reference.intercept_, atol=1e-6)
    assert clf.optimality_residual_ <= 1e-8
    # one-vs-rest stays reachable, and is another model
    ovr = fit(X, y, alpha=1.0, tol=1e-8, multi_class="ovr")
    assert ovr.multi_class_ == "ovr"
    assert np.abs(ovr.predict_proba(X) - reference.predict_proba(X)).max() > 0.1


@pytest.mark.parametrize("params", [{"fit_intercept": False}, {"class_weight": "balanced"}])
def test_sample_weights_class_weights_and_no_intercept(iris, params):
    X, y = iris
    weights = np.random.default_rng(0).integers(0, 4, y.size).astype(float)
    clf = fit(X, y, weights, alpha=0.5, tol=1e-8, **params)
    reference = exact(X, y, 0.5, weights, **params)
    certified(clf, reference)
    assert np.abs(clf.predict_proba(X) - reference.predict_proba(X)).max() <= 1e-6


def test_sparse_input_with_an_inexact_preconditioner():
    rng = np.random.default_rng(1)
    X = scipy.sparse.random(200, 300, density=0.05, format="csr", random_state=2)
    y = rng.integers(0, 3, 200)
    clf = fit(X, y, alpha=0.5, sketch_size=20, tol=1e-8, random_state=0)
    assert clf.sketch_size_ == 20
    reference = exact(X, y, 0.5)
    certified(clf, reference)
    assert np.abs(clf.predict_proba(X) - reference.predict_proba(X)).max() <= 1e-6


def test_zarr_input_and_blocking_invariance(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((240, 12)) @ np.diag(np.logspace(0, 1, 12))
    y = np.argmax(X[:, :4] + rng.standard_normal((240, 4)), axis=1)
    path = str(tmp_path / "X.zarr")
    da.from_array(X, chunks=(50, 12)).to_zarr(path)
    params = dict(alpha=2.0, sketch_size=8, tol=1e-8, random_state=0)
    in_memory = fit(X, y, **params)
    stored = fit(path, y, block_rows=50, **params)
    other_blocks = fit(X, y, block_rows=37, **params)
    for clf in (stored, other_blocks):
        assert np.linalg.norm(clf.coef_ - in_memory.coef_) <= 1e-9 * np.linalg.norm(
            in_memory.coef_)
    certified(stored, exact(X, y, 2.0))
    np.testing.assert_allclose(np.asarray(stored.predict_proba(path)),
                               in_memory.predict_proba(X), atol=1e-10)


@pytest.mark.parametrize("params", [{"loss": "squared"}, {"loss": "smoothed_hinge"},
                                    {"solver": "paper"}])
def test_multinomial_is_refused_where_it_has_no_meaning(iris, params):
    X, y = iris
    clf = DualRandomProjectionClassifier(multi_class="multinomial", **params)
    with pytest.raises(InvalidParameterError, match="'multi_class'.*loss='logistic'"):
        clf.fit(X, y)
    assert not hasattr(clf, "coef_")
    # "auto" fits them one-vs-rest
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        assert DualRandomProjectionClassifier(**params).fit(X, y).multi_class_ == "ovr"


def test_two_classes_are_one_binary_model_either_way(iris):
    X, y = iris
    binary = y[y > 0]
    models = [fit(X[y > 0], binary, alpha=1.0, multi_class=option, random_state=0)
              for option in ("auto", "multinomial", "ovr")]
    for clf in models:
        assert clf.multi_class_ == "ovr" and clf.coef_.shape == (1, 4)
        np.testing.assert_array_equal(clf.coef_, models[-1].coef_)


def test_unpenalised_fit_and_separable_data(iris):
    X, y = iris
    clf = fit(X, y, alpha=0, tol=1e-8)
    assert clf.coef_error_bound_ == np.inf and clf.optimality_residual_ <= 1e-8
    assert np.abs(clf.predict_proba(X) - exact(X, y, 0).predict_proba(X)).max() <= 1e-4
    rng = np.random.default_rng(0)
    centres = 6.0 * np.array([[1.0, 0.0], [-0.5, 0.9], [-0.5, -0.9]])
    Xs = np.vstack([c + rng.standard_normal((20, 2)) for c in centres])
    with pytest.warns(ConvergenceWarning, match="linearly separable"):
        DualRandomProjectionClassifier(alpha=0).fit(Xs, np.repeat([0, 1, 2], 20))


@pytest.mark.parametrize("max_iter", [1, 2, 3])
def test_a_missed_tolerance_warns_and_its_bound_still_holds(iris, max_iter):
    X, y = iris
    with pytest.warns(ConvergenceWarning, match=r"error bound .* <= (inf|[0-9.e+-]+) > tol=1e-08"):
        clf = DualRandomProjectionClassifier(alpha=1.0, tol=1e-8, max_iter=max_iter).fit(X, y)
    error = np.linalg.norm(clf.coef_ - exact(X, y, 1.0).coef_)
    assert error <= clf.coef_error_bound_ < np.inf


@pytest.mark.parametrize("shift", [0.01, 0.3])
def test_bound_covers_the_intercept_error(iris, shift):
    """At ``W`` optimal for wrong intercepts ``b`` the coefficient gradient is 0:
    only the intercept's part of the bound covers ``||W - W*||``."""
    X, y = iris
    n, d = X.shape
    Y = np.eye(3)[y]
    reference = exact(X, y, 1.0)
    b = reference.intercept_ + shift * np.array([1.0, -1.0, 0.0])

    def objective(w):
        W = w.reshape(d, 3)
        T = X @ W + b
        value = np.sum(logsumexp(T, axis=1) - np.sum(Y * T, axis=1)) + 0.5 * np.sum(W * W)
        return value, (X.T @ (softmax(T, axis=1) - Y) + W).ravel()

    W = scipy.optimize.minimize(objective, reference.coef_.T.ravel(), jac=True,
                                method="BFGS", options={"gtol": 1e-12}).x.reshape(d, 3)
    P = softmax(X @ W + b, axis=1)
    G = np.vstack([X.T @ (P - Y) + W, (P - Y).sum(axis=0)])
    H = np.diag(P.sum(axis=0)) - P.T @ P        # the intercepts' Hessian
    problem = SimpleNamespace(split=lambda V: (V[:-1], V[-1]), lam=1.0, fit_intercept=True)
    coupling = (float(n), float(np.sum(X ** 2)), float(np.linalg.norm(X, axis=1).max()),
                (n, d))
    gradient, rounding = bound_parts(problem, np.vstack([W, b]), G, H, coupling, 1.0)
    error = np.linalg.norm(W.T - reference.coef_)
    assert np.linalg.norm(G[:-1]) + rounding < error <= gradient + rounding < np.inf


def test_a_class_of_no_weight_gets_probability_zero(iris):
    """Its intercept has no finite optimum: the limit (coef 0, intercept -inf) and
    the other classes fitted alone."""
    X, y = iris
    clf = fit(X, y, alpha=1.0, tol=1e-8, class_weight={0: 1.0, 1: 2.0, 2: 0.0})
    assert clf.intercept_[2] == -np.inf and not clf.coef_[2].any()
    assert np.all(clf.predict_proba(X)[:, 2] == 0.0)
    assert set(clf.predict(X)) == {0, 1}
    # two classes alone: the binary model at half the penalty, w = w_1 - w_0
    binary = exact(X[y < 2], y[y < 2], 0.5, np.where(y[y < 2] == 1, 2.0, 1.0))
    optimum = np.vstack([-binary.coef_ / 2, binary.coef_ / 2, np.zeros((1, 4))])
    assert np.linalg.norm(clf.coef_ - optimum) <= clf.coef_error_bound_
    assert clf.coef_error_bound_ <= 1e-8 * np.linalg.norm(clf.coef_)
