"""Sketch-preconditioned LSQR against numpy.linalg.lstsq; in-memory and blocked paths."""

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning

from dasketch.datasets import ill_conditioned_regression
from dasketch.linear_model import SketchLstsqRegressor, sketch_lstsq


@pytest.fixture(scope="module")
def problem():
    A, b, _ = ill_conditioned_regression(12000, 40, condition_number=1e6, random_state=6)
    return A, b, np.linalg.lstsq(A, b, rcond=None)[0]


def rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("solver", ["lsqr", "refinement"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_lstsq_to_1e_8(problem, seed, solver):
    A, b, x_ref = problem
    res = sketch_lstsq(A, b, random_state=seed, solver=solver)
    assert rel(res.x, x_ref) <= 1e-8
    assert rel(res.sketch_solution, x_ref) > 1e-4  # the iterations did the work
    # conditioned: iterations independent of cond(A) = 1e6; the refinement's Gram
    # matrix of A N is exact to about eps d cond(A), so a pass or two reach tol
    assert res.n_iter < (80 if solver == "lsqr" else 3)
    assert res.optimality_residual <= 1e-10 and res.istop == 2
    assert res.condition_number_estimate < 10


def test_auto_refines_when_the_gram_pass_costs_less_than_lsqr(problem):
    from dasketch.linear_model.lstsq_refinement import refinement_pays
    from dasketch.linear_model.preconditioning import sketch_precondition

    A, b, _ = problem
    precond = sketch_precondition(A, b, random_state=0)
    assert refinement_pays(precond, sparse=False, tol=1e-10)
    # a sparse row is taken to hold one value: k^2 flops a row against 12 bytes
    assert refinement_pays(precond, sparse=True, tol=1e-10)
    wide = sketch_precondition(np.random.default_rng(0).standard_normal((3000, 400)),
                               random_state=0)
    assert not refinement_pays(wide, sparse=True, tol=1e-10)
    assert refinement_pays(wide, sparse=False, tol=1e-10)
    assert not refinement_pays(wide, sparse=False, tol=0.3)  # LSQR needs a pass or two
    res = sketch_lstsq(A, b, random_state=0)
    assert res.n_iter == sketch_lstsq(A, b, random_state=0, solver="refinement").n_iter


def test_the_refinement_at_the_rounding_floor_is_silent_and_no_less_accurate():
    """Off-centre by 1e6 (cond 1e12 without centring) the computed ``U^T r`` stops
    shrinking at its rounding, above ``tol``: the refinement stops there (istop 5)
    without a warning, as LSQR does, and is at least as accurate."""
    A, b, _ = ill_conditioned_regression(6000, 12, condition_number=1e6, random_state=8)
    A = A + 1e6
    x_ref = np.linalg.lstsq(A, b, rcond=None)[0]
    lsqr = sketch_lstsq(A, b, random_state=0, solver="lsqr")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = sketch_lstsq(A, b, random_state=0, solver="refinement")
    assert res.istop == 5 and res.optimality_residual > 1e-10
    assert np.linalg.norm(res.x - x_ref) <= res.coef_error_bound
    assert rel(res.x, x_ref) <= 1.05 * rel(lsqr.x, x_ref)


def test_sparse_input(problem):
    rng = np.random.default_rng(0)
    A = scipy.sparse.random(6000, 30, density=0.2, random_state=1, format="csr")
    A = A @ scipy.sparse.diags(np.logspace(0, 5, 30))
    b = rng.standard_normal(6000)
    x_ref = np.linalg.lstsq(A.toarray(), b, rcond=None)[0]
    assert rel(sketch_lstsq(A, b, random_state=0).x, x_ref) <= 1e-8


def test_blocked_path_dask_and_local_cluster(problem, cluster_client):
    A, b, x_ref = problem
    in_memory = sketch_lstsq(A, b, random_state=3)
    A_dask = da.from_array(A, chunks=(2500, 40))
    # on the cluster, A is held in worker memory: each LSQR product is one pass
    A_held = cluster_client.persist(A_dask.rechunk((3000, 40)))
    for X, kwargs in ((A_dask, {}), (A_held, dict(client=cluster_client, block_rows=3000))):
        res = sketch_lstsq(X, b, random_state=3, **kwargs)
        assert rel(res.x, x_ref) <= 1e-8
        # same preconditioner, same warm start, products equal to rounding
        np.testing.assert_allclose(res.sketch_solution, in_memory.sketch_solution, rtol=1e-6)
        assert abs(res.n_iter - in_memory.n_iter) <= 2


def test_estimator(problem):
    A, b, x_ref = problem
    model = SketchLstsqRegressor(fit_intercept=False, random_state=0).fit(A, b)
    assert rel(model.coef_, x_ref) <= 1e-8 and model.intercept_ == 0.0
    np.testing.assert_allclose(model.predict(A[:5]), A[:5] @ x_ref, rtol=1e-6)
    assert model.n_features_in_ == 40
    assert model.optimality_residual_ <= 1e-10


@pytest.mark.parametrize("solver, max_iter, tol", [("lsqr", 2, 1e-10), ("refinement", 1, 1e-15)])
def test_iteration_limit_warns_with_the_residual(problem, solver, max_iter, tol):
    A, b, x_ref = problem
    with pytest.warns(ConvergenceWarning, match=rf"max_iter={max_iter} .*residual \d"):
        res = sketch_lstsq(A, b, max_iter=max_iter, tol=tol, random_state=0, solver=solver)
    assert res.istop == 7 and res.optimality_residual > tol
    assert res.n_iter == (2 * max_iter if solver == "lsqr" else max_iter)


def test_bad_input(problem):
    A, b, _ = problem
    with pytest.raises(ValueError, match="tol"):
        sketch_lstsq(A, b, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        sketch_lstsq(A, b, max_iter=0)
    with pytest.raises(ValueError, match="'solver' parameter"):
        sketch_lstsq(A, b, solver="qr")
    with pytest.raises(ValueError, match="b has"):
        sketch_lstsq(A, b[:10])
    with pytest.raises(ValueError, match="b has shape"):
        sketch_lstsq(A, np.ones((len(b), 2, 2)))
    with pytest.raises(ValueError, match="sketch_size must be >= d"):
        sketch_lstsq(A, b, sketch_size=10)
    bad = A.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf"):
        sketch_lstsq(bad, b)


def test_intercept_with_a_constant_column_gives_the_minimum_norm_solution(problem):
    # a constant column is in the span of the intercept: centring makes it zero,
    # and its minimum-norm coefficient is 0, as with LinearRegression
    A, b, _ = problem
    X = np.column_stack([A[:, :5], np.full(A.shape[0], 3.0)])
    model = SketchLstsqRegressor(random_state=0).fit(X, b)
    Xc = X - X.mean(axis=0)
    x_ref = np.linalg.lstsq(Xc, b - b.mean(), rcond=None)[0]
    assert model.rank_ == 5 and model.coef_[5] == pytest.approx(0.0, abs=1e-12)
    error = np.linalg.norm(model.coef_ - x_ref)
    assert error <= model.coef_error_bound_ <= 1e-7 * np.linalg.norm(x_ref)
    model = SketchLstsqRegressor(fit_intercept=False).fit(X, b)  # no intercept: full rank
    x_ref = np.linalg.lstsq(X, b, rcond=None)[0]
    assert model.rank_ == 6 and rel(model.coef_, x_ref) <= 1e-8


def _collapsing_seeds(count):
    """Seeds whose sketch of the centred rows [-0.5, 0.5] is zero (both rows hash
    to the same rows of S with the same signs; about 6 % of seeds)."""
    from dasketch._blocks import as_row_blocks
    from dasketch.linear_model.preconditioning import precondition_blocks

    blocks = as_row_blocks(np.array([[1.0], [2.0]]))
    seeds = [seed for seed in range(400)
             if precondition_blocks(blocks, random_state=seed, centre=True,
                                    full_rank=False, check_size=0).rank == 0]
    assert len(seeds) >= count
    return seeds[:count]


@pytest.mark.heavy
def test_a_sketch_that_loses_rank_is_factored_with_its_check_sketch():
    """Two rows colliding in S: the check sketch S' has the rank S lost, and the
    preconditioner is factored from both, so the answer is LinearRegression's."""
    X, y = np.array([[1.0], [2.0]]), np.array([1.0, 2.0])
    for seed in _collapsing_seeds(5):
        res = sketch_lstsq(X, y, fit_intercept=True, random_state=seed)
        assert res.rank == 1
        np.testing.assert_allclose([res.x[0], res.intercept], [1.0, 0.0], atol=1e-12)


@pytest.mark.heavy
def test_a_solution_outside_the_sketch_is_not_certified(monkeypatch):
    """Without the check sketch's help, the rank the sketch lost shows in the
    gradient A^T r: no certificate (infinite bound) and a warning saying what to
    change."""
    from dasketch.linear_model import preconditioning

    seeds = _collapsing_seeds(2)
    monkeypatch.setattr(preconditioning, "_rank", lambda matrix, rcond: 0)
    X, y = np.array([[1.0], [2.0]]), np.array([1.0, 2.0])
    for seed in seeds:
        with pytest.warns(ConvergenceWarning, match="below that of A.*sketch_size"):
            res = sketch_lstsq(X, y, fit_intercept=True, random_state=seed)
        assert res.rank == 0 and res.coef_error_bound == np.inf


@pytest.mark.parametrize("part", [1.5e-6, 1e-3])
def test_a_target_just_outside_the_sketch_is_not_certified(monkeypatch, part):
    """``A`` of rank 5 whose smallest singular value ``1e-6`` the sketch loses (its
    factorisation made to drop one direction), and ``b`` with a part ``c`` along
    that direction: ``A^T r`` then has a part ``1e-6 c`` outside the sketch's row
    space, ``1.5e-12`` or ``1e-9`` of ``||r||``, where rounding and the directions
    dropped as null account for at most ``9.6e-13`` (1.56 times less than the
    first: twice that allowance would let it through). The solution misses
    ``c / 1e-6`` (1.5 or 1000) of ``x*``: the bound must not be finite."""
    from dasketch.linear_model import preconditioning

    factored = preconditioning._factored

    def losing_one_direction(sketch, rcond):
        *factors, rank = factored(sketch, rcond)
        return (*factors, rank - 1)

    monkeypatch.setattr(preconditioning, "_factored", losing_one_direction)
    n, d = 1000, 5
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((n, d + 1)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    A = (Q[:, :d] * [1, 1, 1, 1, 1e-6]) @ V.T
    b = Q[:, :4] @ rng.standard_normal(4) + part * Q[:, 4] + Q[:, d]
    with pytest.warns(ConvergenceWarning, match="below that of A"):
        res = sketch_lstsq(A, b, random_state=0)
    error = np.linalg.norm(res.x - np.linalg.lstsq(A, b, rcond=None)[0])
    assert res.rank == 4 and error == pytest.approx(part / 1e-6, rel=1e-6)
    assert res.coef_error_bound >= error


def test_a_direction_dropped_as_null_is_not_taken_for_a_lost_one():
    """The worst case of a direction the sketch rightly drops: ``A`` with singular
    values 1 and ``s`` just under ``_EMBEDDING_SLACK max(n, d) eps``, the
    embedding shrinking the second by the whole slack (below the rank threshold),
    and the residual along its left vector. ``A^T r`` then has a part ``s ||r||``
    outside the sketch, 0.79 of the allowance: it must not be flagged, and half
    the allowance would flag it."""
    from types import SimpleNamespace

    from dasketch.linear_model.lstsq_bounds import (
        _EMBEDDING_SLACK,
        _outside_sketch,
        outside_allowance,
    )

    n, d = 1000, 2
    s = 0.99 * _EMBEDDING_SLACK * max(n, d) * np.finfo(np.float64).eps
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.standard_normal((n, d)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    A = (U * [1.0, s]) @ V.T
    precond = SimpleNamespace(basis=V[:, :1], singular_values=np.array([1.0, s / _EMBEDDING_SLACK]),
                              rank=1, frobenius=float(np.linalg.norm(A)), mean=None,
                              weight_sum=float(n))
    residual = U[:, 1:]
    gradient = A.T @ residual
    part = np.linalg.norm(gradient - V[:, :1] @ (V[:, :1].T @ gradient))
    allowance = outside_allowance(precond, gradient, n, np.linalg.norm(residual, axis=0))[0]
    assert 0.75 * allowance < part < allowance
    assert not _outside_sketch(precond, gradient, residual)[0]


def test_the_check_sketch_may_stretch_the_basis_by_its_slack():
    """One column: ``||x - x*|| = ||N|| ||U^T r|| / ||U||^2`` exactly, the error
    bound with ``sigma_min(U)`` estimated by the check sketch ``||S' U||`` over the
    slack. The check sketch stretches ``U`` by up to 1.67 in these draws (by more
    than 1 in about half of them), so a slack of 1 misses the error; 2 covers it."""
    from dasketch.linear_model import sketch_precondition
    from dasketch.linear_model.lstsq_bounds import error_bound

    stretched = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        A, b = rng.standard_normal((2000, 1)), rng.standard_normal(2000)
        precond = sketch_precondition(A, random_state=seed)
        x = np.array([[(A[:, 0] @ b) / (A[:, 0] @ A[:, 0]) + 1e-3]])   # error 1e-3
        residual = (b - A @ x[:, 0])[:, None]
        gradient = precond.basis.T @ (A.T @ residual)
        bound = error_bound(precond, x, residual, gradient, np.array([np.linalg.norm(b)]))
        assert bound[0] >= 1e-3 * (1 - 1e-9), seed
        stretched += precond.check_singular_values[-1] > np.linalg.norm(A @ precond.basis)
    assert stretched >= 5
