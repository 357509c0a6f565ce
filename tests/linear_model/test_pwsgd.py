"""PWSGDRegressor: accuracy against exact solvers, the gap to plain SGD, box
constraints, invariance to chunking, storage (Dask, zarr, scipy.sparse) and
scheduler, bad input."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from scipy.optimize import lsq_linear
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDRegressor

from dasketch.datasets import ill_conditioned_regression, l1_regression_linprog
from dasketch.linear_model import PWSGDRegressor


def rel_error(A, b, x, x_opt, p):
    def f(v):
        return np.sum(np.abs(A @ v - b) ** p)

    return (f(x) - f(x_opt)) / f(x_opt)


@pytest.fixture(scope="module")
def l2_problem():
    A, b, _ = ill_conditioned_regression(20000, 20, condition_number=1e6, random_state=1)
    return A, b, np.linalg.lstsq(A, b, rcond=None)[0]


@pytest.fixture(scope="module")
def l1_problem():
    A, b, _ = ill_conditioned_regression(4000, 10, condition_number=1e6, noise="laplace",
                                         random_state=2)
    return A, b, l1_regression_linprog(A, b)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_l2_reaches_1e_2(l2_problem, seed):
    A, b, x_opt = l2_problem
    model = PWSGDRegressor(fit_intercept=False, p=2, random_state=seed).fit(A, b)
    assert rel_error(A, b, model.coef_, x_opt, 2) <= 1e-2
    # it improves on the sketch-and-solve start by SGD, not by luck of the start
    assert rel_error(A, b, model.sketch_solution_, x_opt, 2) > 3e-2
    assert model.condition_number_estimate_ < 10
    assert model.n_features_in_ == 20 and model.history_steps_[-1] == model.n_iter_


@pytest.mark.parametrize("seed", [0, 1])
def test_l1_reaches_5e_2(l1_problem, seed):
    A, b, x_opt = l1_problem
    model = PWSGDRegressor(fit_intercept=False, p=1, random_state=seed).fit(A, b)
    assert rel_error(A, b, model.coef_, x_opt, 1) <= 5e-2
    assert rel_error(A, b, model.sketch_solution_, x_opt, 1) > 0.1  # SGD did the work
    # the objective estimate on the fixed sample tracks the true objective
    f_true = np.sum(np.abs(A @ model.coef_ - b))
    assert model.objective_history_[-1] == pytest.approx(f_true, rel=0.2)


def test_plain_uniform_sgd_is_far_worse(l2_problem):
    A, b, x_opt = l2_problem
    n_visits = A.shape[0]  # one epoch of plain SGD
    pw = PWSGDRegressor(fit_intercept=False, p=2, n_iter=n_visits, random_state=0).fit(A, b)
    plain = SGDRegressor(loss="squared_error", penalty=None, fit_intercept=False,
                         max_iter=1, tol=None, shuffle=True, random_state=0)
    plain.fit(A, b)
    err_pw = rel_error(A, b, pw.coef_, x_opt, 2)
    err_plain = rel_error(A, b, plain.coef_, x_opt, 2)
    assert err_pw <= 1e-2
    assert err_plain > 100 * err_pw and err_plain > 0.5


@pytest.fixture(scope="module")
def box_problem():
    # ill-conditioned by column scaling, which the diagonal metric removes
    A, b, x_true = ill_conditioned_regression(8000, 10, condition_number=1e6, rotate=False,
                                              random_state=3)
    lower = np.full(10, -0.5)
    upper = np.full(10, 0.5)
    lower[0], upper[3] = -np.inf, np.inf
    return A, b, (lower, upper)


def _feasible(x, bounds):
    return np.all(x >= bounds[0]) and np.all(x <= bounds[1])


def test_box_constrained_l2(box_problem):
    A, b, bounds = box_problem
    x_opt = lsq_linear(A, b, bounds=bounds, tol=1e-12, lsmr_tol="auto").x
    assert not _feasible(np.linalg.lstsq(A, b, rcond=None)[0], bounds)  # box is active
    model = PWSGDRegressor(fit_intercept=False, p=2, preconditioner="diag", bounds=bounds,
                           random_state=0).fit(A, b)
    assert all(_feasible(x, bounds) for x in model.coef_history_)
    assert rel_error(A, b, model.coef_, x_opt, 2) <= 1e-2


def test_box_constrained_l1(box_problem):
    A, b, bounds = box_problem
    A, b = A[:3000], b[:3000] + np.random.default_rng(0).laplace(size=3000)
    x_opt = l1_regression_linprog(A, b, bounds)
    model = PWSGDRegressor(fit_intercept=False, p=1, preconditioner="diag", bounds=bounds,
                           random_state=0).fit(A, b)
    assert all(_feasible(x, bounds) for x in model.coef_history_)
    assert rel_error(A, b, model.coef_, x_opt, 1) <= 5e-2


def test_no_preconditioner_keeps_the_box_and_converges_when_conditioned():
    A, b, _ = ill_conditioned_regression(8000, 10, condition_number=10, rotate=False,
                                         random_state=3)
    bounds = (np.full(10, -0.5), np.full(10, 0.5))
    x_opt = lsq_linear(A, b, bounds=bounds, tol=1e-12, lsmr_tol="auto").x
    model = PWSGDRegressor(fit_intercept=False, preconditioner="none", bounds=bounds,
                           random_state=0).fit(A, b)
    assert all(_feasible(x, bounds) for x in model.coef_history_)
    assert rel_error(A, b, model.coef_, x_opt, 2) <= 1e-2
    assert rel_error(A, b, model.coef_history_[0], x_opt, 2) > 2e-2  # SGD did the work


def test_no_preconditioner_on_an_ill_conditioned_box_warns(box_problem):
    A, b, bounds = box_problem
    with pytest.warns(ConvergenceWarning, match="above the .* sketch-and-solve start"):
        model = PWSGDRegressor(fit_intercept=False, preconditioner="none", bounds=bounds,
                               n_iter=3000, random_state=0).fit(A, b)
    assert all(_feasible(x, bounds) for x in model.coef_history_)


def test_diagonal_metric_is_the_column_scaling(box_problem):
    # Jacobi scaling by the column norms of R (= column norms of S A, close to those
    # of A) removes an ill-conditioning that comes from column scales
    A, b, bounds = box_problem
    model = PWSGDRegressor(fit_intercept=False, preconditioner="diag", bounds=bounds,
                           n_iter=2000, random_state=0).fit(A, b)
    scaled = np.linalg.cond(A / np.linalg.norm(A, axis=0))
    assert np.linalg.cond(A) > 1e5 and scaled < 3
    assert model.metric_condition_number_ == pytest.approx(scaled, rel=0.5)


def test_draws_follow_the_leverage_scores():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((20000, 10))
    A[:20] *= 100  # 20 rows of 20000 hold most of the leverage
    b = A @ np.ones(10) + rng.standard_normal(20000)
    Q, _ = np.linalg.qr(A)
    heavy_share = np.sum(Q[:20] ** 2) / 10  # leverage scores sum to d
    model = PWSGDRegressor(fit_intercept=False, n_iter=4000, random_state=0).fit(A, b)
    assert model.sample_counts_.sum() == model.n_iter_ == 4000
    drawn_heavy = model.sample_counts_[model.sampled_rows_ < 20].sum() / model.n_iter_
    assert heavy_share > 0.5  # uniform draws would put 0.1% there
    assert drawn_heavy == pytest.approx(heavy_share, abs=0.05)


def test_invariant_to_chunking_scheduler_and_storage(l2_problem, cluster_client, tmp_path):
    A, b, _ = l2_problem
    params = dict(p=2, n_iter=5000, random_state=11)
    ref = PWSGDRegressor(fit_intercept=False, **params).fit(A, b).coef_
    scale = np.abs(ref).max()
    A_dask = da.from_array(A, chunks=(2999, 20))
    path = str(tmp_path / "A.zarr")
    da.to_zarr(da.from_array(A, chunks=(4096, 20)), path)
    for X, extra in ((A, dict(block_rows=1500)), (A_dask, {}), (path, {}),
                     (scipy.sparse.csr_matrix(A), dict(block_rows=4000))):
        coef = PWSGDRegressor(fit_intercept=False, **params, **extra).fit(X, b).coef_
        np.testing.assert_allclose(coef, ref, rtol=1e-7, atol=1e-9 * scale)
    with cluster_client.as_current():
        coef = PWSGDRegressor(fit_intercept=False, **params).fit(A_dask, b).coef_
    np.testing.assert_allclose(coef, ref, rtol=1e-7, atol=1e-9 * scale)


@pytest.mark.parametrize("params,match", [
    (dict(p=3), "'p' parameter of PWSGDRegressor must be"),
    (dict(preconditioner="jacobi"), "preconditioner"),
    (dict(bounds=(-1.0, 1.0)), "bounds need preconditioner"),
    (dict(preconditioner="diag", bounds=(1.0, -1.0)), "inconsistent"),
    (dict(preconditioner="diag", bounds=(np.zeros(3), 1.0)), "length n_features"),
    (dict(preconditioner="diag", bounds=(np.nan, 1.0)), "NaN"),
    (dict(sketch_size=5), "sketch_size must be >= d = 11"),
    (dict(n_iter=0), "n_iter"),
    (dict(step_size=-1.0), "step_size"),
])
def test_bad_parameters(l1_problem, params, match):
    A, b, _ = l1_problem
    with pytest.raises(ValueError, match=match):
        PWSGDRegressor(**params).fit(A, b)


def test_bad_data(l1_problem):
    A, b, _ = l1_problem
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        PWSGDRegressor().fit(A, b[:-1])
    with pytest.raises(ValueError, match="n_samples=11 and n_features=10 plus one"):
        PWSGDRegressor().fit(A[:11], b[:11])
    bad = A.copy()
    bad[10, 2] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        PWSGDRegressor().fit(bad, b)
    # out of core, the values are checked in the sketch pass that reads them
    with pytest.raises(ValueError, match="X contains NaN or Inf"):
        PWSGDRegressor().fit(da.from_array(bad, chunks=1000), b)
    b_bad = b.copy()
    b_bad[0] = -np.inf
    with pytest.raises(ValueError, match="y contains infinity"):
        PWSGDRegressor().fit(A, b_bad)
