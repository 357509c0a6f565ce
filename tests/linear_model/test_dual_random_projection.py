"""Dual random projection (Zhang, Mahdavi, Jin, Yang, Zhu, COLT 2013) and the
preconditioned solvers of the full problem built on it."""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.multiclass import OneVsRestClassifier

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.linear_model.dual_projection.losses import loss_derivative, loss_value

LOSSES = ["squared", "logistic", "smoothed_hinge"]


# ------------------------------------------------------------ reference solutions
def reference_loss(t, y, loss, smoothing=1.0):
    """Loss and derivative in the margin, written out independently of the package."""
    if loss == "squared":
        return 0.5 * (t - y) ** 2, t - y
    u = y * t
    if loss == "logistic":
        return np.logaddexp(0.0, -u), -y / (1.0 + np.exp(u))
    s = smoothing
    value = np.where(u >= 1, 0.0, np.where(u <= 1 - s, 1 - u - s / 2, (1 - u) ** 2 / (2 * s)))
    return value, -y * np.clip((1 - u) / s, 0, 1)


def objective(X, y, w, b, lam, loss, smoothing=1.0):
    return 0.5 * lam * w @ w + reference_loss(X @ w + b, y, loss, smoothing)[0].sum()


def optimality_residual(X, y, w, b, lam, loss, fit_intercept=True, smoothing=1.0):
    """``||grad F(w, b)|| / ||grad F(0, b0)||`` computed directly."""
    def grad(w, b):
        dl = reference_loss(X @ w + b, y, loss, smoothing)[1]
        return np.append(lam * w + X.T @ dl, dl.sum() if fit_intercept else [])
    b0 = 0.0
    if fit_intercept:
        b0 = scipy.optimize.minimize_scalar(
            lambda c: reference_loss(np.full(y.shape, c), y, loss, smoothing)[0].sum(),
            bounds=(-30, 30), method="bounded", options={"xatol": 1e-12}).x
    return np.linalg.norm(grad(w, b)) / np.linalg.norm(grad(np.zeros(X.shape[1]), b0))


def exact_solution(X, y, lam, loss, basis, fit_intercept=True, smoothing=1.0):
    """High-precision optimum ``(w, b)``: ``w* = -(1/lam) X^T alpha*`` lies in the row
    space of X; with ``basis`` orthonormal for it the problem is low-dimensional and
    solved with L-BFGS to a gradient of 1e-12."""
    Z = X @ basis
    k = Z.shape[1]

    def f(v):
        b = v[k] if fit_intercept else 0.0
        value, dl = reference_loss(Z @ v[:k] + b, y, loss, smoothing)
        grad = np.append(lam * v[:k] + Z.T @ dl, dl.sum() if fit_intercept else 0.0)
        return 0.5 * lam * v[:k] @ v[:k] + value.sum(), grad

    res = scipy.optimize.minimize(f, np.zeros(k + 1), jac=True, method="L-BFGS-B",
                                  options={"gtol": 1e-13, "ftol": 0.0, "maxiter": 100000,
                                           "maxcor": 50})
    assert np.linalg.norm(res.jac) < 1e-8 * max(1.0, np.abs(f(np.zeros(k + 1))[1]).max())
    return basis @ res.x[:k], (res.x[k] if fit_intercept else 0.0)


def low_rank_problem(n, d, rank, real_targets, seed=0, classes=2):
    """Rank-``rank`` data with entries of unit variance, real or +-1 targets (or
    ``classes`` labels), an orthonormal basis of the row space, and the mean
    non-zero eigenvalue of ``X^T X`` (``||X||_F^2 / rank``)."""
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((d, rank))
    X = rng.standard_normal((n, rank)) @ V.T / np.sqrt(rank)
    t = X @ rng.standard_normal(d) / np.sqrt(d) + 0.5
    if real_targets:
        y = t + 0.1 * rng.standard_normal(n)
    elif classes == 2:
        y = np.where(t + 0.3 * rng.standard_normal(n) > 0.5, 1.0, -1.0)
    else:
        scores = X @ rng.standard_normal((d, classes)) / np.sqrt(d)
        y = np.argmax(scores + 0.3 * rng.standard_normal((n, classes)), axis=1)
    return X, y, float(np.sum(X ** 2) / rank), np.linalg.qr(V)[0]


def relative_error(u, v):
    return np.linalg.norm(u - v) / np.linalg.norm(v)


def solve(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return dual_random_projection(X, y, **params)


# ------------------------------------------------------------ recovery
@pytest.fixture(scope="module")
def weakly_regularised():
    """Rank 10, d >> n > r, alpha = 1e-3 of the mean non-zero eigenvalue, m = 20 r."""
    problems = {}
    for loss in LOSSES:
        X, y, mean_eigenvalue, basis = low_rank_problem(400, 3000, 10, loss == "squared")
        lam = 1e-3 * mean_eigenvalue
        smoothing = 0.5 if loss == "smoothed_hinge" else 1.0
        problems[loss] = (X, y, lam, smoothing,
                          exact_solution(X, y, lam, loss, basis, smoothing=smoothing))
    return problems


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.heavy
def test_recovery_one_shot_and_preconditioned(weakly_regularised, loss):
    X, y, lam, s, (w, b) = weakly_regularised[loss]
    common = dict(loss=loss, alpha=lam, smoothing=s, sketch_size=200, random_state=0)
    with pytest.warns(ConvergenceWarning, match="one-shot solution"):
        one = dual_random_projection(X, y, solver="paper", max_iter=1, **common)
    assert relative_error(one.coef, w) <= 0.3
    assert relative_error(one.naive_coef, w) > 1.0
    if loss == "squared":
        four = solve(X, y, max_iter=4, tol=0.0, **common)
        ten = solve(X, y, max_iter=10, tol=0.0, **common)
        assert relative_error(four.coef, w) <= 5e-3
        assert relative_error(ten.coef, w) <= 1e-6
    else:
        six = solve(X, y, max_iter=6, tol=0.0, **common)
        assert six.n_iter <= 6
        assert relative_error(six.coef, w) <= 1e-4
    # The certificate is the residual of the returned model, to 1%; the error
    # bound holds and certifies tol (above the worst-case rounding of the
    # gradient, gamma_{d+1} F^2 ||w|| / lambda with d = 3000 and F^2 / lambda = 1e4).
    full = solve(X, y, tol=1e-7, **common)
    assert full.converged and full.coef_error_bound <= 1e-7 * np.linalg.norm(full.coef)
    assert np.linalg.norm(full.coef - w) <= full.coef_error_bound
    assert relative_error(full.coef, w) <= 1e-6
    assert abs(full.intercept - b) <= 1e-6 * max(1.0, abs(b))
    for res in (one, full):
        direct = optimality_residual(X, y, res.coef, res.intercept, lam, loss, smoothing=s)
        assert res.optimality_residual == pytest.approx(direct, rel=1e-2)
        assert res.objective == pytest.approx(
            objective(X, y, res.coef, res.intercept, lam, loss, s), rel=1e-9)
    # Passes over X per iteration: one (squared loss), or Newton steps of one
    # Hessian product and one evaluation each when the preconditioner is exact.
    assert full.history[-1]["passes"] == full.n_passes
    if loss == "squared":
        assert full.n_passes == 2 + full.n_iter and full.n_iter <= 3
    else:
        assert all(h["cg_iterations"] <= 2 for h in full.history)


def test_certificate_on_every_iteration(weakly_regularised):
    X, y, lam, _, _ = weakly_regularised["squared"]
    res = solve(X, y, alpha=lam, sketch_size=40, max_iter=8, tol=0.0, random_state=1)
    assert len(res.history) == res.n_iter + 1
    for h in res.history[1:]:
        assert set(h) >= {"iteration", "passes", "optimality_residual", "objective"}
    direct = optimality_residual(X, y, res.coef, res.intercept, lam, "squared")
    assert res.history[-1]["optimality_residual"] == pytest.approx(direct, rel=1e-2)
    objectives = [h["objective"] for h in res.history]
    assert all(np.diff(objectives) <= 1e-9 * abs(objectives[0]))


# ------------------------------------------------------------ full rank, m < rank
def full_rank_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 30)) * (1.0 + np.arange(30)) ** -0.5
    return X, X @ rng.standard_normal(30) + 3.0 + rng.standard_normal(400)


def test_full_rank_converges_and_one_shot_warns():
    X, y = full_rank_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = DualRandomProjectionRegressor(sketch_size=10, tol=1e-8, max_iter=30,
                                              random_state=0).fit(X, y)
    assert model.optimality_residual_ <= 1e-8
    ridge = Ridge(alpha=1.0).fit(X, y)
    assert relative_error(model.coef_, ridge.coef_) <= 1e-7
    with pytest.warns(ConvergenceWarning, match=r"residual \d.*one-shot"):
        one = DualRandomProjectionRegressor(sketch_size=10, solver="paper", max_iter=1,
                                            random_state=0).fit(X, y)
    assert one.optimality_residual_ > 1.0


def test_paper_divergence_is_reported_and_never_returned():
    # m far below the rank: Algorithm 2 does not contract.
    rng = np.random.default_rng(1)
    n, d, r = 300, 2000, 60
    X = rng.standard_normal((n, r)) @ rng.standard_normal((r, d)) / np.sqrt(r)
    y = X @ rng.standard_normal(d) / np.sqrt(d) + 0.1 * rng.standard_normal(n)
    lam = 0.01 * np.sum(X ** 2) / r
    with pytest.warns(ConvergenceWarning, match="stopped contracting"):
        res = dual_random_projection(X, y, alpha=lam, sketch_size=20, solver="paper",
                                     max_iter=8, random_state=0)
    objectives = [h["objective"] for h in res.history]
    assert res.n_iter < 8 and objectives[-1] > objectives[0]
    assert res.best_iteration == int(np.argmin(objectives)) + 1
    returned = objective(X, y, res.coef, res.intercept, lam, "squared")
    assert returned == pytest.approx(min(objectives), rel=1e-9)
    # The preconditioned solver converges on the same problem and projection.
    cg = dual_random_projection(X, y, alpha=lam, sketch_size=20, random_state=0)
    assert cg.converged and cg.objective < returned


@pytest.mark.slow
def test_smoothed_hinge_far_from_low_rank():
    """Full-rank data, weak regularisation: Newton-CG starts no worse than the
    intercept-only model, and its steps are cut by the line search by orders of
    magnitude, each cut costing at most one extra pass. (At tol=1e-6 it reaches a
    residual of 7e-16, but the certificate's rounding part, the worst case over
    alpha = 1e-2, is 2.5e-6 of ||w||: tol=1e-5 is the accuracy it can certify.)"""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((150, 600)), np.sign(rng.standard_normal(150))
    res = dual_random_projection(X, y, loss="smoothed_hinge", smoothing=0.5, alpha=1e-2,
                                 sketch_size=150, tol=1e-5, random_state=0)
    assert res.converged
    b0 = scipy.optimize.minimize_scalar(
        lambda c: reference_loss(np.full(150, c), y, "smoothed_hinge", 0.5)[0].sum(),
        bounds=(-30, 30), method="bounded").fun
    assert res.history[0]["objective"] <= b0
    assert min(h["step_size"] for h in res.history[1:]) < 1e-3
    for before, after in zip(res.history, res.history[1:]):
        assert after["passes"] - before["passes"] <= after["cg_iterations"] + 2
    direct = optimality_residual(X, y, res.coef, res.intercept, 1e-2, "smoothed_hinge",
                                 smoothing=0.5)
    assert res.optimality_residual == pytest.approx(direct, rel=1e-2)


def test_newton_never_starts_worse_than_the_constant_model():
    """Two targets on data far from low rank: where the Algorithm 1 solution has a
    higher objective than the intercept-only model, Newton-CG starts from the latter."""
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((200, 600)), np.sign(rng.standard_normal((200, 2)))
    res = solve(X, Y, loss="smoothed_hinge", smoothing=0.5, alpha=0.1, sketch_size=20,
                max_iter=2, tol=0.0, random_state=0)
    for k in range(2):
        constant = scipy.optimize.minimize_scalar(
            lambda c, k=k: reference_loss(np.full(200, c), Y[:, k], "smoothed_hinge",
                                          0.5)[0].sum(),
            bounds=(-30, 30), method="bounded", options={"xatol": 1e-12}).fun
        assert res.history[0]["objective"][k] == pytest.approx(constant, rel=1e-9)
        assert res.objective[k] < constant
        direct = optimality_residual(X, Y[:, k], res.coef[k], res.intercept[k], 0.1,
                                     "smoothed_hinge", smoothing=0.5)
        assert res.optimality_residual[k] == pytest.approx(direct, rel=1e-2)


# ------------------------------------------------------------ losses
@pytest.mark.parametrize("smoothing", [0.3, 2.0])
def test_smoothed_hinge_derivative_and_dual_coefficients(smoothing):
    t = np.linspace(-3, 3, 601)
    for label in (-1.0, 1.0):
        h = 1e-6
        numeric = (loss_value(t + h, label, "smoothed_hinge", smoothing)
                   - loss_value(t - h, label, "smoothed_hinge", smoothing)) / (2 * h)
        np.testing.assert_allclose(loss_derivative(t, label, "smoothed_hinge", smoothing),
                                   numeric, atol=1e-6)
    X, y, lam, _ = low_rank_problem(200, 800, 5, False, seed=3)
    res = dual_random_projection(X, y, loss="smoothed_hinge", smoothing=smoothing,
                                 alpha=0.01 * lam, sketch_size=100, tol=1e-12,
                                 random_state=0)
    dual = res.dual_coef().compute()
    margin = y * (X @ res.coef + res.intercept)
    np.testing.assert_allclose(dual, -y * np.clip((1 - margin) / smoothing, 0, 1), atol=1e-6)
    np.testing.assert_allclose(res.coef, -X.T @ dual / (0.01 * lam), rtol=1e-6,
                               atol=1e-9 * np.abs(res.coef).max())


# ------------------------------------------------------------ scikit-learn agreement
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_regressor_matches_ridge(fit_intercept):
    X, y, _, _ = low_rank_problem(120, 600, 5, True, seed=1)
    drp = DualRandomProjectionRegressor(alpha=3.0, sketch_size=100, tol=1e-12,
                                        fit_intercept=fit_intercept, random_state=1).fit(X, y)
    ridge = Ridge(alpha=3.0, fit_intercept=fit_intercept).fit(X, y)
    assert relative_error(drp.coef_, ridge.coef_) < 1e-7
    assert drp.intercept_ == pytest.approx(ridge.intercept_, rel=1e-7, abs=1e-9)
    np.testing.assert_allclose(drp.predict(X), ridge.predict(X), rtol=1e-6, atol=1e-8)


def test_classifier_matches_logistic_regression():
    X, y, _, _ = low_rank_problem(150, 500, 5, False, seed=2)
    drp = DualRandomProjectionClassifier(alpha=20.0, sketch_size=100, tol=1e-12,
                                         random_state=2).fit(X, y)
    lr = LogisticRegression(C=1.0 / 20.0, tol=1e-12, max_iter=10000).fit(X, y)
    assert relative_error(drp.coef_, lr.coef_) < 1e-5
    assert drp.intercept_[0] == pytest.approx(lr.intercept_[0], rel=1e-5, abs=1e-7)
    np.testing.assert_allclose(drp.predict_proba(X), lr.predict_proba(X), atol=1e-6)


class _ExactBinaryLogistic(ClassifierMixin, BaseEstimator):
    """Exact binary solver (the same objective, in the row-space basis)."""

    def __init__(self, alpha=1.0, basis=None):
        self.alpha = alpha
        self.basis = basis

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        w, b = exact_solution(X, np.where(y == self.classes_[1], 1.0, -1.0), self.alpha,
                              "logistic", self.basis)
        self.coef_, self.intercept_ = w[None, :], np.array([b])
        return self

    def decision_function(self, X):
        return X @ self.coef_[0] + self.intercept_[0]


@pytest.mark.heavy
def test_multiclass_one_vs_rest_matches_exact():
    X, y, lam, basis = low_rank_problem(300, 1500, 8, False, seed=4, classes=4)
    labels = np.array(["a", "b", "c", "d"])[y]
    clf = DualRandomProjectionClassifier(alpha=1e-2 * lam, sketch_size=160, tol=1e-10,
                                         multi_class="ovr", random_state=0).fit(X, labels)
    ovr = OneVsRestClassifier(_ExactBinaryLogistic(1e-2 * lam, basis)).fit(X, labels)
    assert clf.classes_.tolist() == ["a", "b", "c", "d"]
    for k, est in enumerate(ovr.estimators_):
        assert relative_error(clf.coef_[k], est.coef_[0]) <= 1e-4
        assert clf.intercept_[k] == pytest.approx(est.intercept_[0], abs=1e-4)
    np.testing.assert_array_equal(clf.predict(X), ovr.predict(X))
    # One projection pass shared by all classes, and every later pass too.
    one_class = DualRandomProjectionClassifier(alpha=1e-2 * lam, sketch_size=160, tol=1e-10,
                                               random_state=0).fit(X, labels == "a")
    assert clf.n_passes_ <= one_class.n_passes_ + 4


# ------------------------------------------------------------ invariance
@pytest.fixture(scope="module")
def invariance_data():
    # d > TILE so that R spans several tiles.
    X, y, lam, _ = low_rank_problem(300, 5000, 5, False, seed=5)
    return X, y, lam


def _fit(X, y, lam, **params):
    params = {"alpha": lam, "sketch_size": 60, "tol": 1e-10, "random_state": 7, **params}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*chunked along columns")
        warnings.simplefilter("ignore", ConvergenceWarning)
        return DualRandomProjectionClassifier(**params).fit(X, y)


def _assert_same_model(a, b):
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-8, atol=1e-11 * np.abs(a.coef_).max())
    np.testing.assert_allclose(a.naive_coef_, b.naive_coef_, rtol=1e-8,
                               atol=1e-11 * np.abs(a.naive_coef_).max())
    np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-8, atol=1e-11)
    assert a.n_iter_ == b.n_iter_


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
        _assert_same_model(reference, _fit(da.from_array(X, chunks=(100, 5000)), y, lam))


def test_sparse_and_zarr_inputs(invariance_data, tmp_path):
    X, y, lam = invariance_data
    reference = _fit(X, y, lam)
    _assert_same_model(reference, _fit(scipy.sparse.csr_matrix(X), y, lam))
    path = str(tmp_path / "X.zarr")
    da.from_array(X, chunks=(64, 1000)).to_zarr(path)
    model = _fit(path, y, lam)
    _assert_same_model(reference, model)
    scores = model.decision_function(path)
    assert isinstance(scores, da.Array)
    np.testing.assert_allclose(scores.compute(), reference.decision_function(X), rtol=1e-9)


def test_float32_input(invariance_data):
    X, y, lam = invariance_data
    a = _fit(X.astype(np.float32), y, lam)
    b = _fit(X.astype(np.float32).astype(np.float64), y, lam)
    assert a.coef_.dtype == np.float32
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-6 * np.abs(b.coef_).max())


# ------------------------------------------------------------ real data
@pytest.mark.slow  # run by .ci/run's slow step
def test_a9a_accuracy_matches_exact_solver(a9a_train, a9a_test):
    X_train, y_train = a9a_train
    X_test, y_test = a9a_test
    # 8,100 random sparse binary features appended to the 123 of a9a: d > n / 4.
    rng = np.random.default_rng(0)

    def augment(X):
        noise = scipy.sparse.random(X.shape[0], 8100, density=1e-4, format="csr",
                                    random_state=rng, data_rvs=np.ones)
        return scipy.sparse.hstack([X, noise], format="csr")

    A_train, A_test = augment(X_train), augment(X_test)
    exact = LogisticRegression(C=1.0 / 100.0, tol=1e-8, max_iter=5000).fit(A_train, y_train)
    drp = DualRandomProjectionClassifier(alpha=100.0, sketch_size=300, tol=1e-6,
                                         random_state=0).fit(A_train, y_train)
    assert drp.optimality_residual_ <= 1e-6
    assert relative_error(drp.coef_, exact.coef_) <= 1e-3
    assert abs(drp.score(A_test, y_test) - exact.score(A_test, y_test)) <= 1e-3


# ------------------------------------------------------------ bad input
def test_bad_input():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((40, 30)), np.where(rng.standard_normal(40) > 0, 1, -1)
    reg = DualRandomProjectionRegressor(sketch_size=5)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        reg.fit(X, y[:-1])
    with pytest.raises(ValueError, match="at least two classes, got 1"):
        DualRandomProjectionClassifier().fit(X, np.ones(40))
    reg_, clf_ = ("parameter of DualRandomProjectionRegressor must be",
                  "parameter of DualRandomProjectionClassifier must be")
    for m in (0, -3, 2.5):
        with pytest.raises(ValueError, match=rf"'sketch_size' {reg_} an int in the range "
                                             r"\[1, inf\)"):
            DualRandomProjectionRegressor(sketch_size=m).fit(X, y)
    for alpha in (-1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
            DualRandomProjectionRegressor(alpha=alpha).fit(X, y)
    with pytest.raises(ValueError, match=f"'loss' {clf_} a str among"):
        DualRandomProjectionClassifier(loss="hinge").fit(X, y)
    with pytest.raises(ValueError, match=f"'solver' {clf_} a str among"):
        DualRandomProjectionClassifier(solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match=rf"'max_iter' {reg_} an int in the range \[1, inf\)"):
        DualRandomProjectionRegressor(max_iter=0).fit(X, y)
    with pytest.raises(ValueError, match="labels -1 and \\+1"):
        dual_random_projection(X, np.arange(40) % 3, loss="logistic")
    Xb = X.copy()
    Xb[3, 4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        reg.fit(Xb, y)
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        reg.fit(da.from_array(Xb, chunks=10), y)
    with pytest.raises(ValueError, match="X contains NaN or infinity"):
        dual_random_projection(scipy.sparse.csr_matrix(Xb), y)
    with pytest.raises(ValueError, match="30 features"):
        reg.fit(X, y).predict(X[:, :10])
