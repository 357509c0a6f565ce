"""Dual random projection (Zhang, Mahdavi, Jin, Yang, Zhu, COLT 2013)."""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from sklearn.linear_model import LogisticRegression, Ridge

from dasketch.linear_model import DualRandomProjectionClassifier, DualRandomProjectionRegressor

LOSSES = ["squared", "logistic", "smoothed_hinge"]


# ------------------------------------------------------------ reference solutions
def reference_loss(t, y, loss):
    """Loss and derivative in the margin, written out independently of the package."""
    if loss == "squared":
        return 0.5 * (t - y) ** 2, t - y
    u = y * t
    if loss == "logistic":
        return np.logaddexp(0.0, -u), -y / (1.0 + np.exp(u))
    value = np.where(u >= 1, 0.0, np.where(u <= 0, 0.5 - u, 0.5 * (1 - u) ** 2))
    return value, -y * np.clip(1 - u, 0, 1)


def objective(X, y, w, b, lam, loss):
    return 0.5 * lam * w @ w + reference_loss(X @ w + b, y, loss)[0].sum()


def exact_solution(X, y, lam, loss, basis):
    """High-precision optimum ``(w, b)`` of ``lam/2 ||w||^2 + sum l(x_i^T w + b, y_i)``.

    ``w* = -(1/lam) X^T alpha*`` lies in the row space of X; with ``basis`` an
    orthonormal basis of it, ``w = basis @ beta`` turns the problem into an exact
    low-dimensional one, solved with L-BFGS to a gradient of 1e-12.
    """
    Z = X @ basis
    k = Z.shape[1]

    def f(v):
        value, dl = reference_loss(Z @ v[:k] + v[k], y, loss)
        grad = np.append(lam * v[:k] + Z.T @ dl, dl.sum())
        return 0.5 * lam * v[:k] @ v[:k] + value.sum(), grad

    res = scipy.optimize.minimize(f, np.zeros(k + 1), jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-12, "ftol": 0.0, "maxiter": 100000,
                                           "maxcor": 50})
    assert np.linalg.norm(res.jac) < 1e-8 * max(1.0, np.abs(f(np.zeros(k + 1))[1]).max())
    return basis @ res.x[:k], res.x[k]


def low_rank_problem(n, d, rank, real_targets, seed=0):
    """Rank-``rank`` data with entries of unit variance, real or +-1 targets, a
    basis of the row space, and ``lam`` equal to the mean non-zero eigenvalue of
    ``X^T X`` (``||X||_F^2 / rank``)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((d, rank))
    X = rng.standard_normal((n, rank)) @ V.T / np.sqrt(rank)
    t = X @ rng.standard_normal(d) / np.sqrt(d) + 0.5
    if real_targets:
        y = t + 0.1 * rng.standard_normal(n)
    else:
        y = np.where(t + 0.3 * rng.standard_normal(n) > 0.5, 1.0, -1.0)
    lam = float(np.sum(X ** 2) / rank)
    return X, y, lam, np.linalg.qr(V)[0]


def make(loss, **params):
    if loss == "squared" and "regressor" in params and params.pop("regressor"):
        return DualRandomProjectionRegressor(**params)
    params.pop("regressor", None)
    return DualRandomProjectionClassifier(loss=loss, **params)


def relative_error(u, v):
    return np.linalg.norm(u - v) / np.linalg.norm(v)


# ------------------------------------------------------------ recovery (Theorems 1, 2)
def check_recovery(n, d, rank, loss, regressor):
    X, y, lam, basis = low_rank_problem(n, d, rank, regressor)
    w, b = exact_solution(X, y, lam, loss, basis)
    m = 20 * rank
    one = make(loss, regressor=regressor, alpha=lam, n_components=m, n_iter=1,
               random_state=0).fit(X, y)
    four = make(loss, regressor=regressor, alpha=lam, n_components=m, n_iter=4, tol=0,
                random_state=0).fit(X, y)
    assert relative_error(one.coef_, w) <= 0.25
    assert relative_error(one.naive_coef_, w) > 1.0
    assert four.n_iter_ == 4 and four.best_iteration_ == 4
    assert relative_error(four.coef_, w) <= 1e-2
    assert abs(four.intercept_ - b) <= 1e-2 * max(1.0, abs(b))
    # The same projection: the first round of Algorithm 2 is Algorithm 1.
    np.testing.assert_allclose(four.naive_coef_, one.naive_coef_, rtol=1e-9, atol=1e-12)
    # Objectives decrease towards the optimum's.
    objectives = [h["objective"] for h in four.history_]
    assert objectives[-1] <= objectives[0]
    assert objectives[-1] == pytest.approx(objective(X, y, w, b, lam, loss), rel=1e-3)


@pytest.mark.parametrize("loss", LOSSES)
def test_recovery_one_shot_and_iterative(loss):
    check_recovery(1000, 4000, 10, loss, regressor=loss == "squared")


def test_recovery_classifier_squared_loss():
    check_recovery(600, 3000, 8, "squared", regressor=False)


@pytest.mark.slow
@pytest.mark.parametrize("loss", LOSSES)
def test_recovery_full_size(loss):
    check_recovery(5000, 20000, 20, loss, regressor=loss == "squared")


# ------------------------------------------------------------ agreement with scikit-learn
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_regressor_matches_ridge(fit_intercept):
    X, y, _, _ = low_rank_problem(120, 600, 5, True, seed=1)
    alpha = 3.0
    drp = DualRandomProjectionRegressor(alpha=alpha, n_components=100, n_iter=30, tol=1e-12,
                                        fit_intercept=fit_intercept, random_state=1).fit(X, y)
    ridge = Ridge(alpha=alpha, fit_intercept=fit_intercept).fit(X, y)
    assert relative_error(drp.coef_, ridge.coef_) < 1e-7
    assert drp.intercept_ == pytest.approx(ridge.intercept_, rel=1e-7, abs=1e-9)
    np.testing.assert_allclose(drp.predict(X), ridge.predict(X), rtol=1e-6, atol=1e-8)


def test_classifier_matches_logistic_regression():
    X, y, _, _ = low_rank_problem(150, 500, 5, False, seed=2)
    alpha = 20.0
    drp = DualRandomProjectionClassifier(alpha=alpha, n_components=100, n_iter=30, tol=1e-12,
                                         random_state=2).fit(X, y)
    lr = LogisticRegression(C=1.0 / alpha, tol=1e-12, max_iter=10000).fit(X, y)
    assert relative_error(drp.coef_, lr.coef_[0]) < 1e-5
    assert drp.intercept_ == pytest.approx(lr.intercept_[0], rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(drp.predict_proba(X), lr.predict_proba(X), atol=1e-6)


def test_dual_variables_satisfy_optimality_conditions():
    X, y, lam, _ = low_rank_problem(200, 800, 5, False, seed=3)
    clf = DualRandomProjectionClassifier(alpha=lam, n_components=100, n_iter=20, tol=1e-12,
                                         random_state=3).fit(X, y)
    # coef_ is the recovery -(1/lambda) X^T alpha of the returned dual variables,
    # and the free intercept makes them sum to zero.
    np.testing.assert_allclose(clf.coef_, -X.T @ clf.dual_coef_ / lam, rtol=1e-10, atol=1e-14)
    assert abs(clf.dual_coef_.sum()) < 1e-8 * np.abs(clf.dual_coef_).sum()
    # At convergence they are the derivatives of the loss at the solution (KKT).
    _, derivative = reference_loss(X @ clf.coef_ + clf.intercept_, y, "logistic")
    np.testing.assert_allclose(clf.dual_coef_, derivative, atol=1e-8)


def test_two_arbitrary_classes():
    X, y, lam, _ = low_rank_problem(200, 800, 5, False, seed=4)
    labels = np.where(y > 0, "spam", "ham")
    a = DualRandomProjectionClassifier(alpha=lam, n_components=80, random_state=0).fit(X, y)
    b = DualRandomProjectionClassifier(alpha=lam, n_components=80, random_state=0).fit(X, labels)
    assert b.classes_.tolist() == ["ham", "spam"]
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(b.predict(X), np.where(a.predict(X) > 0, "spam", "ham"))


# ------------------------------------------------------------ invariance
@pytest.fixture(scope="module")
def invariance_data():
    # d > TILE so that R spans several tiles.
    X, y, lam, _ = low_rank_problem(300, 5000, 5, False, seed=5)
    return X, y, lam


def _fit(X, y, lam, **params):
    params = {"alpha": lam, "n_components": 60, "n_iter": 2, "random_state": 7, **params}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*chunked along columns")
        return DualRandomProjectionClassifier(**params).fit(X, y)


def _assert_same_model(a, b):
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-9, atol=1e-12 * np.abs(a.coef_).max())
    np.testing.assert_allclose(a.naive_coef_, b.naive_coef_, rtol=1e-9,
                               atol=1e-12 * np.abs(a.naive_coef_).max())
    assert a.intercept_ == pytest.approx(b.intercept_, rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(a.dual_coef_, b.dual_coef_, rtol=1e-8, atol=1e-12)


def test_invariant_to_chunking(invariance_data):
    X, y, lam = invariance_data
    reference = _fit(X, y, lam)
    _assert_same_model(reference, _fit(X, y, lam, block_rows=37))
    _assert_same_model(reference, _fit(da.from_array(X, chunks=(71, 5000)), y, lam))
    _assert_same_model(reference, _fit(da.from_array(X, chunks=(128, 1000)), y, lam,
                                       block_rows=64, split_every=3))
    _assert_same_model(reference, _fit(X, da.from_array(y, chunks=50), lam))


def test_invariant_to_scheduler(invariance_data, cluster_client):
    X, y, lam = invariance_data
    with dask.config.set(scheduler="threads"):
        reference = _fit(X, y, lam)
    with cluster_client.as_current():
        on_cluster = _fit(da.from_array(X, chunks=(100, 5000)), y, lam)
    _assert_same_model(reference, on_cluster)


def test_sparse_and_zarr_inputs(invariance_data, tmp_path):
    X, y, lam = invariance_data
    reference = _fit(X, y, lam, n_iter=1)
    _assert_same_model(reference, _fit(scipy.sparse.csr_matrix(X), y, lam, n_iter=1))
    path = str(tmp_path / "X.zarr")
    da.from_array(X, chunks=(64, 1000)).to_zarr(path)
    model = _fit(path, y, lam, n_iter=1)
    _assert_same_model(reference, model)
    scores = model.decision_function(path)
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), reference.decision_function(X), rtol=1e-9)


def test_float32_input(invariance_data):
    X, y, lam = invariance_data
    a = _fit(X.astype(np.float32), y, lam)
    b = _fit(X.astype(np.float32).astype(np.float64), y, lam)
    _assert_same_model(a, b)


# ------------------------------------------------------------ divergence
def test_divergence_is_reported_and_never_returned():
    # m far below the rank: Algorithm 2 does not contract.
    rng = np.random.default_rng(1)
    n, d, r = 300, 2000, 60
    X = rng.standard_normal((n, r)) @ rng.standard_normal((r, d)) / np.sqrt(r)
    y = X @ rng.standard_normal(d) / np.sqrt(d) + 0.1 * rng.standard_normal(n)
    lam = 0.01 * np.sum(X ** 2) / r
    with pytest.warns(RuntimeWarning, match="stopped contracting"):
        model = DualRandomProjectionRegressor(alpha=lam, n_components=20, n_iter=8,
                                              random_state=0).fit(X, y)
    objectives = [h["objective"] for h in model.history_]
    assert model.n_iter_ < 8
    assert objectives[-1] > objectives[0]
    assert model.best_iteration_ == int(np.argmin(objectives)) + 1
    assert np.all(np.isfinite(model.coef_))
    returned = objective(X, y, model.coef_, model.intercept_, lam, "squared")
    assert returned == pytest.approx(min(objectives), rel=1e-9)
    assert returned < objectives[-1]


# ------------------------------------------------------------ real data
def test_a9a_accuracy_matches_exact_solver(a9a_train, a9a_test):
    X_train, y_train = a9a_train
    X_test, y_test = a9a_test
    # 8,100 random sparse binary features appended to the 123 of a9a, so that
    # d = 8,223 > n / 4 = 8,140.
    rng = np.random.default_rng(0)

    def augment(X):
        noise = scipy.sparse.random(X.shape[0], 8100, density=1e-4, format="csr",
                                    random_state=rng, data_rvs=np.ones)
        return scipy.sparse.hstack([X, noise], format="csr")

    A_train, A_test = augment(X_train), augment(X_test)
    assert A_train.shape[1] > A_train.shape[0] / 4
    alpha = 100.0
    exact = LogisticRegression(C=1.0 / alpha, tol=1e-8, max_iter=5000).fit(A_train, y_train)
    drp = DualRandomProjectionClassifier(alpha=alpha, n_components=1000, n_iter=3,
                                         solver="lbfgs", random_state=0).fit(A_train, y_train)
    exact_accuracy = exact.score(A_test, y_test)
    drp_accuracy = drp.score(A_test, y_test)
    assert abs(drp_accuracy - exact_accuracy) <= 0.005, (drp_accuracy, exact_accuracy)


# ------------------------------------------------------------ bad input
@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 30)), np.where(rng.standard_normal(40) > 0, 1, -1)


def test_bad_input(small):
    X, y = small
    reg = DualRandomProjectionRegressor(n_components=5)
    with pytest.raises(ValueError, match="y has 39 entries but X has 40 rows"):
        reg.fit(X, y[:-1])
    with pytest.raises(ValueError, match="exactly two classes, got 3"):
        DualRandomProjectionClassifier(n_components=5).fit(X, np.arange(40) % 3)
    with pytest.raises(ValueError, match="exactly two classes, got 1"):
        DualRandomProjectionClassifier(n_components=5).fit(X, np.ones(40))
    for m in (0, -3, 2.5):
        with pytest.raises(ValueError, match="n_components must be a positive integer"):
            DualRandomProjectionRegressor(n_components=m).fit(X, y)
    for m in (30, 31):
        with pytest.raises(ValueError, match="n_components must be smaller than the number "
                                             "of features.*pointless"):
            DualRandomProjectionRegressor(n_components=m).fit(X, y)
    for alpha in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="alpha must be a finite number > 0"):
            DualRandomProjectionRegressor(alpha=alpha, n_components=5).fit(X, y)
    with pytest.raises(ValueError, match="loss must be one of"):
        DualRandomProjectionClassifier(loss="hinge", n_components=5).fit(X, y)
    with pytest.raises(ValueError, match="n_iter must be a positive integer"):
        DualRandomProjectionRegressor(n_components=5, n_iter=0).fit(X, y)
    for bad in (np.nan, np.inf):
        Xb = X.copy()
        Xb[3, 4] = bad
        with pytest.raises(ValueError, match="X contains NaN or infinity"):
            reg.fit(Xb, y)
        with pytest.raises(ValueError, match="X contains NaN or infinity"):
            reg.fit(scipy.sparse.csr_matrix(Xb), y)
        with pytest.raises(ValueError, match="X contains NaN or infinity"):
            reg.fit(da.from_array(Xb, chunks=10), y)
        yb = y.astype(float)
        yb[5] = bad
        with pytest.raises(ValueError, match="y contains NaN or Inf"):
            reg.fit(X, yb)
    with pytest.raises(ValueError, match="X must be a 2-D array"):
        reg.fit(X[0], y)
    with pytest.raises(ValueError, match="X must have shape"):
        reg.fit(X, y).predict(X[:, :10])
