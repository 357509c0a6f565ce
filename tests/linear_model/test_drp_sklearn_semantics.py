"""Dual random projection estimators as drop-ins for scikit-learn's Ridge and
LogisticRegression: sample and class weights, several targets, the certified
coefficient error, the convergence warning's threshold, float32, alpha > 0."""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from scipy.special import expit
from sklearn.datasets import make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.utils._sklearn_compat import InvalidParameterError

ESTIMATORS = {"regressor": DualRandomProjectionRegressor,
              "classifier": DualRandomProjectionClassifier}


def quiet_fit(model, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(*args, **kwargs)


def small_problem(seed=0, n=60, d=40):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 0.5
    y = X @ rng.standard_normal(d) / np.sqrt(d) + 1.0 + 0.3 * rng.standard_normal(n)
    weights = rng.integers(0, 4, n)
    return X, y, weights


def targets(kind, y):
    return y if kind == "regressor" else np.where(y > np.median(y), "b", "a")


def assert_same(a, b, rtol=1e-10):
    scale = np.abs(b.coef_).max()
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=rtol, atol=rtol * scale)
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=rtol, atol=rtol * scale)


# ------------------------------------------------------------ sample weights
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("kind", sorted(ESTIMATORS))
def test_integer_weights_equal_repetition_and_chunking(kind, fit_intercept):
    X, y, weights = small_problem()
    labels = targets(kind, y)
    params = dict(alpha=2.0, sketch_size=40, tol=1e-12, fit_intercept=fit_intercept,
                  random_state=0)
    weighted = quiet_fit(ESTIMATORS[kind](**params), X, labels, sample_weight=weights)
    rows = np.repeat(np.arange(len(y)), weights)      # weight 0: the row is dropped
    repeated = quiet_fit(ESTIMATORS[kind](**params), X[rows], labels[rows])
    assert_same(weighted, repeated)
    chunked = quiet_fit(ESTIMATORS[kind](block_rows=7, **params),
                        da.from_array(X, chunks=(13, 40)), labels,
                        sample_weight=da.from_array(weights, chunks=17))
    assert_same(chunked, weighted)
    # The weighted minimiser is scikit-learn's.
    if kind == "regressor":
        exact = Ridge(alpha=2.0, fit_intercept=fit_intercept, solver="svd").fit(
            X, y, sample_weight=weights)
    else:
        exact = LogisticRegression(C=0.5, fit_intercept=fit_intercept, tol=1e-12,
                                   max_iter=10000).fit(X, labels, sample_weight=weights)
    assert_same(weighted, exact, rtol=1e-6)


def test_sample_weight_validation_and_class_weight():
    X, y, weights = small_problem(1)
    labels = targets("classifier", y)[:50]
    X = X[:50]
    with pytest.raises(ValueError, match="sample_weight"):
        DualRandomProjectionRegressor().fit(X, y[:50], sample_weight=-np.ones(50))
    with pytest.raises(ValueError, match="sample_weight.shape"):
        DualRandomProjectionRegressor().fit(X, y[:50], sample_weight=np.ones(49))
    # Unbalanced classes: 'balanced' and an explicit dict are LogisticRegression's.
    labels = np.where(np.arange(50) < 12, "a", "b")
    for class_weight in ("balanced", {"a": 3.0, "b": 0.5}):
        drp = DualRandomProjectionClassifier(alpha=2.0, sketch_size=40, tol=1e-12,
                                             class_weight=class_weight, random_state=0)
        quiet_fit(drp, X, labels, sample_weight=weights[:50] + 1.0)
        exact = LogisticRegression(C=0.5, tol=1e-12, max_iter=10000,
                                   class_weight=class_weight).fit(
            X, labels, sample_weight=weights[:50] + 1.0)
        assert_same(drp, exact, rtol=1e-6)


# ------------------------------------------------------------ several targets
def test_two_dimensional_targets_with_alpha_per_target():
    X, y, weights = small_problem(2)
    Y = np.column_stack([y, -2.0 * y + 1.0, np.sin(y)])
    alpha = np.array([0.5, 2.0, 8.0])
    drp = quiet_fit(DualRandomProjectionRegressor(alpha=alpha, sketch_size=40, tol=1e-12,
                                                  random_state=0), X, Y, sample_weight=weights)
    ridge = Ridge(alpha=alpha, solver="svd").fit(X, Y, sample_weight=weights)
    assert drp.coef_.shape == (3, 40) and drp.intercept_.shape == (3,)
    assert_same(drp, ridge, rtol=1e-8)
    assert drp.predict(X).shape == (60, 3)
    np.testing.assert_allclose(drp.predict(X), ridge.predict(X), rtol=1e-8, atol=1e-8)
    # One target: 1-D y gives a numpy float intercept, a column gives Ridge's shapes.
    one = quiet_fit(DualRandomProjectionRegressor(sketch_size=40, tol=1e-12), X, y)
    assert isinstance(one.intercept_, np.float64) and one.coef_.shape == (40,)
    column = quiet_fit(DualRandomProjectionRegressor(sketch_size=40, tol=1e-12), X, y[:, None])
    ridge = Ridge().fit(X, y[:, None])
    assert column.coef_.shape == ridge.coef_.shape
    assert np.shape(column.intercept_) == np.shape(ridge.intercept_)
    assert column.predict(X).shape == ridge.predict(X).shape
    with pytest.raises(ValueError, match="alpha given per target must hold 3"):
        DualRandomProjectionRegressor(alpha=[1.0, 2.0]).fit(X, Y)


# ------------------------------------------------------------ certified error
def exact_ridge(X, y, alpha, weights=None):
    """Weighted ridge with an intercept by weighted centring and an SVD."""
    s = np.ones(len(y)) if weights is None else weights
    mean_x, mean_y = s @ X / s.sum(), s @ y / s.sum()
    root = np.sqrt(s)[:, None]
    U, S, Vt = np.linalg.svd(root * (X - mean_x), full_matrices=False)
    w = Vt.T @ (S / (S ** 2 + alpha) * (U.T @ (root[:, 0] * (y - mean_y))))
    return w, mean_y - mean_x @ w


def exact_logistic(X, labels, alpha, scale):
    """Binary logistic optimum in the variables ``u = w * scale`` to a gradient of
    about 1e-13."""
    sign = np.where(labels == labels.max(), 1.0, -1.0)

    def f(v):
        u, b = v[:-1], v[-1]
        t = sign * (X @ u + b)
        dl = -sign * expit(-t)
        value = np.logaddexp(0, -t).sum() + 0.5 * alpha * u @ u / scale ** 2
        return value, np.append(X.T @ dl + alpha * u / scale ** 2, dl.sum())

    res = scipy.optimize.minimize(f, np.zeros(X.shape[1] + 1), jac=True, method="BFGS",
                                  options={"gtol": 1e-13, "maxiter": 20000})
    res = scipy.optimize.minimize(f, res.x, jac=True, method="Newton-CG",
                                  hess=lambda v: scipy.optimize.approx_fprime(
                                      v, lambda x: f(x)[1], 1e-7),
                                  options={"xtol": 1e-14})
    return res.x[:-1] / scale, res.x[-1]


def test_coef_error_bound_holds_and_warns_when_unattainable():
    rng = np.random.default_rng(3)
    # Wide, off-centre, alpha = 1e-8, intercept: the intercept nearly trades
    # against w (the ones vector is in the range of X), ill-conditioned.
    X = rng.standard_normal((100, 400)) + 3.0
    y = X @ rng.standard_normal(400) / 20.0 + 5.0 + rng.standard_normal(100)
    w, _ = exact_ridge(X, y, 1e-8)
    with pytest.warns(ConvergenceWarning, match="coefficient error bound"):
        drp = DualRandomProjectionRegressor(alpha=1e-8, sketch_size=100,
                                            random_state=0).fit(X, y)
    error = np.linalg.norm(drp.coef_ - w)
    assert error <= drp.coef_error_bound_
    assert drp.coef_error_bound_ > 1e-6 * np.linalg.norm(drp.coef_)
    # Rows scaled by 1e8, logistic, alpha = 1: a small relative residual, the
    # coefficients far off; the bound says so.
    X = rng.standard_normal((200, 20))
    labels = (X @ rng.standard_normal(20) + 0.5 * rng.standard_normal(200) > 0).astype(int)
    w, _ = exact_logistic(X, labels, 1.0, 1e8)
    with pytest.warns(ConvergenceWarning, match="coefficient error bound"):
        clf = DualRandomProjectionClassifier(alpha=1.0, sketch_size=20,
                                             random_state=0).fit(X * 1e8, labels)
    assert np.linalg.norm(clf.coef_[0] - w) <= clf.coef_error_bound_
    # Well-conditioned, weighted, float32 and without warning: certified to tol.
    X, y, weights = small_problem(4)
    for X_in, rtol in ((X, 1e-6), (X.astype(np.float32), 1e-5)):
        with warnings.catch_warnings():
            warnings.simplefilter("error", ConvergenceWarning)
            drp = DualRandomProjectionRegressor(alpha=0.1, sketch_size=10, max_iter=200,
                                                random_state=0)
            drp.fit(X_in, y, sample_weight=weights)
        w, b = exact_ridge(X_in.astype(np.float64), y, 0.1, weights.astype(float))
        error = np.linalg.norm(drp.coef_ - w)
        assert error <= drp.coef_error_bound_ <= rtol * np.linalg.norm(drp.coef_)


def test_the_iterate_of_smallest_bound_is_returned():
    """Wide X and alpha = 1e-5 with an intercept (scikit-learn's RidgeCV test
    data): CG reaches the rounding floor in two iterations and then wanders at
    rounding level, where objectives differ by rounding only; the fit returns
    the iterate of smallest error bound, scikit-learn's solution to 1e-8 (the
    iterate of lowest computed objective was 2e-5 off)."""
    X, y = make_regression(n_samples=10, n_features=50, n_targets=2, random_state=0)
    train = np.arange(10) != 1
    alpha = np.logspace(-5, 7, 5)[0]
    exact = Ridge(alpha=alpha, solver="svd").fit(X[train], y[train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # the bound is ~2e-5
        fit = DualRandomProjectionRegressor(alpha=alpha, sketch_size=9, tol=1e-10,
                                            random_state=0).fit(X[train], y[train])
    np.testing.assert_allclose(fit.predict(X[1:2]), exact.predict(X[1:2]), rtol=1e-8)
    np.testing.assert_allclose(fit.coef_, exact.coef_, rtol=1e-7, atol=1e-7)
    error = np.linalg.norm(fit.coef_ - exact.coef_, axis=1)
    assert (error <= fit.coef_error_bound_).all()


@pytest.mark.heavy
def test_error_bound_covers_rounding():
    """Converged to rounding (residual ~1e-16): the bound still covers the error."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 1000))
    y = X @ rng.standard_normal(1000) + rng.standard_normal(200)
    drp = quiet_fit(DualRandomProjectionRegressor(alpha=1.0, sketch_size=50, tol=1e-14,
                                                  random_state=0), X, y)
    w, _ = exact_ridge(X, y, 1.0)
    assert np.linalg.norm(drp.coef_ - w) <= drp.coef_error_bound_


# ------------------------------------------------------------ the warning's threshold
@pytest.mark.parametrize("loss,solver", [("squared", "cg"), ("logistic", "cg"),
                                         ("squared", "paper"), ("logistic", "paper")])
def test_convergence_warning_exactly_when_bound_exceeds_tol(loss, solver):
    # A threshold moved to 10 tol (in the stopping test, the certificate or the
    # paper solver's verdict) fails the first check; one below tol the second.
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 60)) * (1.0 + np.arange(60)) ** -0.3
    y = X @ rng.standard_normal(60) + rng.standard_normal(300)
    if loss != "squared":
        y = np.sign(y)
    common = dict(loss=loss, alpha=1.0, sketch_size=4, max_iter=2, random_state=0,
                  solver=solver)
    reached = quiet_solve(X, y, tol=0.0, **common)
    relative = reached.coef_error_bound / np.linalg.norm(reached.coef)
    assert relative > 1e-9
    # Between tol and 10 tol: warned, with the number.
    with pytest.warns(ConvergenceWarning, match=f"{relative:.3g} > tol"):
        res = dual_random_projection(X, y, tol=relative / 3, **common)
    assert not res.converged
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = dual_random_projection(X, y, tol=relative * 1.001, **common)
    assert res.converged
    assert res.coef_error_bound <= relative * 1.001 * np.linalg.norm(res.coef)


def quiet_solve(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return dual_random_projection(X, y, **params)


# ------------------------------------------------------------ dtypes, alpha
def test_float32_in_float32_out_as_scikit_learn():
    X, y, _ = small_problem(6)
    X32 = X.astype(np.float32)
    labels = np.where(y > np.median(y), 1, 0)
    reg = quiet_fit(DualRandomProjectionRegressor(sketch_size=10), X32, y)
    clf = quiet_fit(DualRandomProjectionClassifier(sketch_size=10), X32, labels)
    ridge, lr = Ridge().fit(X32, y), LogisticRegression().fit(X32, labels)
    assert reg.coef_.dtype == ridge.coef_.dtype == np.float32
    assert np.asarray(reg.intercept_).dtype == np.asarray(ridge.intercept_).dtype
    assert reg.predict(X32).dtype == ridge.predict(X32).dtype == np.float32
    assert reg.predict(da.from_array(X32, chunks=20)).compute().dtype == np.float32
    for method in ("decision_function", "predict_proba", "predict_log_proba"):
        assert getattr(clf, method)(X32).dtype == np.float32
    assert clf.intercept_.dtype == np.float32
    if lr.coef_.dtype == np.float32:  # the releases whose LogisticRegression keeps float32
        for method in ("decision_function", "predict_proba", "predict_log_proba"):
            assert getattr(lr, method)(X32).dtype == np.float32
        assert clf.intercept_.dtype == lr.intercept_.dtype
    assert reg.predict(X).dtype == ridge.predict(X).dtype == np.float64
    np.testing.assert_allclose(reg.predict(X32), ridge.predict(X32), rtol=1e-4, atol=1e-4)


def _no_computing(dsk, keys, **kwargs):
    raise AssertionError("a pass over X ran before the parameters were checked")


BAD_PARAMS = [dict(sketch_size=0), dict(sketch_size=True), dict(tol=-1),
              dict(solver="bogus"), dict(cache="sometimes"), dict(alpha="x"),
              dict(max_iter=1.5), dict(split_every=1), dict(random_state=-1)]
BAD_CLASSIFIER_PARAMS = [dict(loss="hinge"), dict(smoothing=0.0),
                         dict(class_weight="uniform")]


BAD_CASES = ([(kind, p) for kind in sorted(ESTIMATORS) for p in BAD_PARAMS]
             + [("classifier", p) for p in BAD_CLASSIFIER_PARAMS])


@pytest.mark.parametrize("kind, params", BAD_CASES,
                         ids=[f"{kind}-{name}={value!r}" for kind, p in BAD_CASES
                              for name, value in p.items()])
def test_bad_parameters_are_named_before_any_pass(kind, params):
    """The estimators check their parameters first: a bad one raises scikit-learn's
    InvalidParameterError (a ValueError) naming it and the estimator, before any
    pass over X (no Dask computation) and with no attribute fitted."""
    X, y, _ = small_problem(9)
    model = ESTIMATORS[kind](**params)
    (name,) = params
    with dask.config.set(scheduler=_no_computing), pytest.raises(
            InvalidParameterError,
            match=rf"^The '{name}' parameter of {type(model).__name__} must be .* Got "):
        model.fit(da.from_array(X, chunks=20), targets(kind, y))
    assert issubclass(InvalidParameterError, ValueError)
    assert not [key for key in vars(model) if key.endswith("_")], vars(model)


def test_classifier_attributes_as_logistic_regression():
    X, y, _ = small_problem(8)
    labels = targets("classifier", y)
    clf = quiet_fit(DualRandomProjectionClassifier(sketch_size=10), X, labels)
    lr = LogisticRegression().fit(X, labels)
    assert clf.n_iter_.shape == lr.n_iter_.shape == (1,)
    scores, predicted = clf.decision_function(X), clf.predict(X)
    clf.sparsify()                       # as LogisticRegression's SparseCoefMixin
    assert scipy.sparse.issparse(clf.coef_)
    np.testing.assert_allclose(clf.decision_function(X), scores, rtol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), predicted)
    assert isinstance(clf.densify().coef_, np.ndarray)


@pytest.mark.parametrize("shape", [(50, 200), (60, 60)])
def test_tiny_alpha_gives_one_warning_that_the_certificate_is_useless(shape):
    rng = np.random.default_rng(0)
    X = rng.standard_normal(shape)
    y = (X @ rng.standard_normal(shape[1]) > 0).astype(int)      # separable
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DualRandomProjectionClassifier(alpha=1e-30, random_state=0).fit(X, y)
    assert [w.category for w in caught] == [ConvergenceWarning], \
        [f"{w.category.__name__}: {w.message}" for w in caught]
    message = str(caught[0].message)
    assert "certificate is useless" in message and "e+" in message   # names the bound
    assert "increase alpha" in message and "alpha=0" in message
