"""l1 and elastic-net penalties of dual random projection: the sketch-preconditioned
proximal Newton method, its duality gap, and agreement with scikit-learn."""

import warnings
from types import SimpleNamespace

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import ElasticNet, Lasso, LogisticRegression

from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.utils._sklearn_compat import InvalidParameterError


def low_rank_problem():
    """Low rank plus noise (not within the projection), a sparse truth."""
    rng = np.random.default_rng(3)
    n, d = 120, 90
    X = rng.standard_normal((n, 8)) @ rng.standard_normal((8, d))
    X += 0.3 * rng.standard_normal((n, d))
    truth = np.zeros(d)
    truth[:10] = rng.standard_normal(10)
    y = X @ truth + 0.5 * rng.standard_normal(n) + 2.0
    labels = np.where(X @ truth + rng.standard_normal(n) > 1.0, 1, -1)
    return X, y, labels


@pytest.fixture(scope="module")
def data():
    return low_rank_problem()


def gaps_at(X, target, w, b, loss, l1, l2, positive=False):
    """:func:`duality_gaps` at ``(w, b)``, the pass's sums computed directly."""
    from dasketch.linear_model.dual_projection.duality_gap import duality_gaps

    t = X @ w + b
    theta = t - target if loss == "squared" else -target / (1 + np.exp(target * t))
    state = SimpleNamespace(
        value=np.array([0.5 * np.sum((t - target) ** 2) if loss == "squared"
                        else np.logaddexp(0, -target * t).sum()]),
        xt_dual=(X.T @ theta)[:, None], dual_sum=np.array([theta.sum()]),
        xt_positive=(X.T @ (theta * (target > 0)))[:, None],
        positive_sum=np.array([theta[target > 0].sum()]))
    P, D, gap = duality_gaps(w[:, None], np.array([b]), state, loss=loss, l1=np.array([l1]),
                             l2=np.array([l2]), fit_intercept=True, column_sums=X.sum(axis=0),
                             weight_sum=float(X.shape[0]),
                             weighted_target_sums=np.array([target.sum()]), positive=positive)
    return P[0], D[0], gap[0]


def primal(X, y, w, b, alpha, rho, loss="squared"):
    """The objective, written out independently of the package."""
    t = X @ w + b
    fit = 0.5 * np.sum((t - y) ** 2) if loss == "squared" else np.logaddexp(0, -y * t).sum()
    return fit + alpha * (rho * np.abs(w).sum() + 0.5 * (1 - rho) * w @ w)


def _lasso(X, y, alpha, rho):
    n = X.shape[0]
    if rho == 1.0:
        return Lasso(alpha=alpha / n, tol=1e-14, max_iter=200_000).fit(X, y)
    return ElasticNet(alpha=alpha / n, l1_ratio=rho, tol=1e-14, max_iter=200_000).fit(X, y)


@pytest.mark.parametrize("rho", [1.0, 0.5])
@pytest.mark.heavy
def test_least_squares_agrees_with_scikit_learn(data, rho):
    X, y, _ = data
    alpha = 40.0
    penalty = "l1" if rho == 1.0 else "elasticnet"
    model = DualRandomProjectionRegressor(alpha=alpha, penalty=penalty, l1_ratio=rho,
                                          sketch_size=20, tol=1e-12,
                                          random_state=0).fit(X, y)
    exact = _lasso(X, y, alpha, rho)
    assert 0 < np.count_nonzero(model.coef_) < X.shape[1]
    np.testing.assert_allclose(model.coef_, exact.coef_, atol=1e-6 * np.abs(exact.coef_).max())
    np.testing.assert_allclose(model.intercept_, exact.intercept_, rtol=1e-6)
    # zero where scikit-learn's coefficients are zero
    assert np.array_equal(model.coef_ != 0, exact.coef_ != 0)
    assert model.duality_gap_ <= 1e-12 * primal(X, y, 0 * model.coef_, y.mean(), alpha, rho)
    np.testing.assert_allclose(model.objective_, primal(X, y, model.coef_, model.intercept_,
                                                         alpha, rho), rtol=1e-12)
    if rho < 1:
        assert np.linalg.norm(model.coef_ - exact.coef_) <= model.coef_error_bound_ + 1e-9
    else:
        assert model.coef_error_bound_ == np.inf


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("max_iter", [1, 2, 4])
def test_gap_bounds_the_suboptimality(data, loss, max_iter):
    """Early iterates: ``objective - min <= duality_gap`` (the certificate), with the
    minimum from a converged fit."""
    X, y, labels = data
    target = y if loss == "squared" else labels
    alpha = 40.0 if loss == "squared" else 2.0
    options = dict(loss=loss, alpha=alpha, penalty="elasticnet", l1_ratio=0.8,
                   sketch_size=20, random_state=0)
    best = dual_random_projection(X, target, tol=1e-13, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        early = dual_random_projection(X, target, tol=1e-13, max_iter=max_iter, **options)
    rounding = 1e-13 * best.objective
    assert early.objective - best.objective <= early.duality_gap + rounding
    assert best.objective <= early.objective + rounding
    if max_iter == 1:
        assert early.duality_gap > 1e-6 * best.objective and not early.converged
    # the gap is tight enough to be useful: within a few orders of the truth
    assert early.duality_gap <= 1e4 * max(early.objective - best.objective, rounding)


@pytest.mark.parametrize("rho", [1.0, 0.5])
def test_logistic_agrees_with_saga(data, rho):
    X, _, labels = data
    Xs = X[:, :30] / X[:, :30].std(axis=0)    # saga converges slowly on wider data
    alpha = 2.0
    model = DualRandomProjectionClassifier(
        alpha=alpha, penalty="l1" if rho == 1 else "elasticnet", l1_ratio=rho,
        sketch_size=20, tol=1e-12, random_state=0).fit(Xs, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)     # penalty's deprecation in 1.8
        warnings.simplefilter("ignore", UserWarning)
        saga = LogisticRegression(penalty="elasticnet", l1_ratio=rho, C=1 / alpha,
                                  solver="saga", tol=1e-12, max_iter=100_000).fit(Xs, labels)
    np.testing.assert_allclose(model.coef_, saga.coef_, atol=1e-5 * np.abs(saga.coef_).max())
    np.testing.assert_allclose(model.intercept_, saga.intercept_, atol=1e-5)
    ours = primal(Xs, labels, model.coef_[0], model.intercept_[0], alpha, rho, "logistic")
    theirs = primal(Xs, labels, saga.coef_[0], saga.intercept_[0], alpha, rho, "logistic")
    assert ours - theirs <= model.duality_gap_
    assert model.duality_gap_ <= 1e-12 * ours


def test_sparse_zarr_and_several_targets(data, tmp_path):
    X, y, _ = data
    Y = np.column_stack([y, -2 * y + 1])
    options = dict(alpha=np.array([40.0, 80.0]), penalty="l1", sketch_size=20, tol=1e-12,
                   random_state=0)
    dense = dual_random_projection(X, Y, **options)
    path = str(tmp_path / "X.zarr")
    da.from_array(X, chunks=(50, 90)).to_zarr(path)
    for source in (scipy.sparse.csr_matrix(X), path):
        other = dual_random_projection(source, Y, block_rows=50, **options)
        np.testing.assert_allclose(other.coef, dense.coef, atol=1e-9 * np.abs(dense.coef).max())
    for k, alpha in enumerate((40.0, 80.0)):
        exact = _lasso(X, Y[:, k], alpha, 1.0)
        np.testing.assert_allclose(dense.coef[k], exact.coef_,
                                   atol=1e-6 * np.abs(exact.coef_).max())
    assert dense.duality_gap.shape == (2,) and dense.converged


def test_convergence_warning_names_the_gap(data):
    X, y, _ = data
    with pytest.warns(ConvergenceWarning, match="relative duality gap .* max_iter"):
        res = dual_random_projection(X, y, alpha=40.0, penalty="l1", max_iter=1,
                                     sketch_size=20, random_state=0)
    assert not res.converged and res.optimality_residual > 1e-6


@pytest.mark.parametrize("params, name", [
    ({"penalty": "l1", "l1_ratio": 1.5}, "l1_ratio"),
    ({"penalty": "elasticnet", "l1_ratio": -0.1}, "l1_ratio"),
    ({"penalty": "elasticnet"}, "l1_ratio"),
    ({"penalty": "l3"}, "penalty"),
    ({"penalty": "l1", "solver": "paper"}, "solver"),
    ({"penalty": "l1", "loss": "smoothed_hinge"}, "penalty"),
])
def test_bad_parameters_fit_nothing(data, params, name):
    X, _, labels = data
    model = DualRandomProjectionClassifier(**params)
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        model.fit(X, labels)
    assert not hasattr(model, "coef_") and not hasattr(model, "classes_")
    function_params = {k: v for k, v in params.items()}
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter"):
        dual_random_projection(X, labels, loss=function_params.pop("loss", "logistic"),
                               **function_params)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("rho", [1.0, 0.7])
def test_gap_bounds_the_suboptimality_anywhere(data, loss, rho):
    """The gap of arbitrary points, intercepts far off included (the dual point
    must be made feasible for the intercept), bounds their suboptimality."""
    X, y, labels = data
    target = y if loss == "squared" else labels
    alpha = 40.0 if loss == "squared" else 2.0
    best = dual_random_projection(X, target, loss=loss, alpha=alpha, penalty="elasticnet",
                                  l1_ratio=rho, sketch_size=20, tol=1e-13, random_state=0)
    rng = np.random.default_rng(0)
    for shift in (-3.0, 0.0, 3.0):
        w = best.coef + 0.05 * rng.standard_normal(X.shape[1]) * (best.coef != 0)
        b = best.intercept + shift
        P, D, gap = gaps_at(X, target, w, b, loss, alpha * rho, alpha * (1 - rho))
        assert np.isclose(P, primal(X, target, w, b, alpha, rho, loss), rtol=1e-12)
        assert D <= best.objective * (1 + 1e-12)
        assert P - best.objective <= gap


def test_without_intercept_and_one_vs_rest(data):
    X, y, _ = data
    model = DualRandomProjectionRegressor(alpha=40.0, penalty="l1", fit_intercept=False,
                                          sketch_size=20, tol=1e-12, random_state=0)
    exact = Lasso(alpha=40.0 / X.shape[0], fit_intercept=False, tol=1e-14,
                  max_iter=200_000).fit(X, y)
    np.testing.assert_allclose(model.fit(X, y).coef_, exact.coef_,
                               atol=1e-6 * np.abs(exact.coef_).max())
    labels = np.digitize(y, np.quantile(y, [0.3, 0.6]))      # three classes
    clf = DualRandomProjectionClassifier(alpha=2.0, penalty="l1", sketch_size=20,
                                         tol=1e-11, random_state=0).fit(X, labels)
    for k in range(3):      # each class's model is its binary problem's
        alone = dual_random_projection(X, np.where(labels == k, 1, -1), loss="logistic",
                                       alpha=2.0, penalty="l1", sketch_size=20, tol=1e-11,
                                       random_state=0)
        np.testing.assert_allclose(clf.coef_[k], alone.coef, atol=1e-5 * np.abs(alone.coef).max())


def test_l1_penalties_refuse_the_multinomial_model(data):
    X, y, _ = data
    labels = np.digitize(y, np.quantile(y, [0.3, 0.6]))      # three classes
    clf = DualRandomProjectionClassifier(alpha=2.0, penalty="l1", multi_class="multinomial")
    with pytest.raises(InvalidParameterError, match="penalty='l2'"):
        clf.fit(X, labels)
    assert not hasattr(clf, "classes_")
    clf = DualRandomProjectionClassifier(alpha=2.0, penalty="elasticnet", l1_ratio=0.5,
                                         sketch_size=20, tol=1e-6, random_state=0)
    assert clf.fit(X, labels).multi_class_ == "ovr"


def test_penalty_path_starts_near_zero_and_ends_at_the_target():
    """The continuation: geometric stages from a share of the penalty at which
    ``w = 0`` is the solution down to the target (kept exactly), the l1 : l2
    ratio of each stage that of the target, no stage at or above the target."""
    from dasketch.linear_model.dual_projection.proximal import (
        PATH_FACTOR,
        PATH_START,
        penalty_path,
    )

    gradient = np.array([[3.0, -1.0], [-50.0, 2.0], [1.0, 0.5]])     # d x K
    l1, l2 = np.array([0.05, 4.0]), np.array([0.05, 0.0])
    stages = penalty_path(gradient, l1, l2)
    assert stages[-1][0] is l1 and stages[-1][1] is l2
    first_l1 = stages[0][0]
    assert first_l1[0] == pytest.approx(PATH_START * 50.0, rel=1e-12)
    # the second target's penalty is already above PATH_START ||g||_inf: no stage
    assert np.all([s[0][1] == 4.0 and s[1][1] == 0.0 for s in stages])
    l1_path = np.array([s[0][0] for s in stages])
    steps = l1_path[:-1] / l1_path[1:]
    np.testing.assert_allclose(steps[1:], PATH_FACTOR, rtol=1e-12)
    assert 1.0 < steps[0] <= PATH_FACTOR
    np.testing.assert_allclose([s[1][0] / s[0][0] for s in stages], 1.0)
    assert len(penalty_path(gradient, 100 * l1 + 100, l2)) == 1    # w = 0 solves it


def test_continuation_reaches_a_weak_penalty(data):
    """A penalty far below the one at which ``w = 0`` solves: the warm-started path
    certifies a tight gap at the target, with the same answer as scikit-learn."""
    X, y, _ = data
    alpha = 0.05
    model = DualRandomProjectionRegressor(alpha=alpha, penalty="l1", sketch_size=20,
                                          tol=1e-8, random_state=0).fit(X, y)
    exact = _lasso(X, y, alpha, 1.0)
    assert model.duality_gap_ <= 1e-8 * primal(X, y, 0 * model.coef_, y.mean(), alpha, 1.0)
    assert primal(X, y, model.coef_, model.intercept_, alpha, 1.0) \
        <= primal(X, y, exact.coef_, exact.intercept_, alpha, 1.0) + model.duality_gap_
    assert len(model.history_) > 1
