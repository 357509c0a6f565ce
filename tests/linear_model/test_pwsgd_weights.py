"""PWSGDRegressor with sample_weight.

pwSGD is stochastic and its sketch depends on the rows' positions, so a weighted
fit and a fit on the repeated rows draw different preconditioners. What must be
equal is checked where it is deterministic: given one preconditioner (that of
the repeated rows, valid for both problems since ``X^T W X`` is the Gram matrix
of the repeated rows), the sampling distribution over the original rows, the
draws and every SGD step, hence the coefficients, are equal to rounding. End to
end, the weighted fit reaches the weighted optimum within pwSGD's stated
accuracy (relative objective error 1e-2 for l2, 5e-2 for l1).
"""

import dask.array as da
import numpy as np
import pytest

from dasketch._blocks import append_ones_column, as_row_blocks
from dasketch.datasets import ill_conditioned_regression, l1_regression_linprog
from dasketch.linear_model import PWSGDRegressor
from dasketch.linear_model.preconditioning import precondition_blocks


@pytest.fixture(scope="module")
def data():
    A, b, _ = ill_conditioned_regression(3000, 6, condition_number=1e4, random_state=5)
    w = np.random.default_rng(5).integers(0, 4, 3000)
    return A + 2.0, b + 5.0, w


def objective(A, b, w, coef, intercept, p):
    return np.sum(w * np.abs(A @ coef + intercept - b) ** p)


@pytest.mark.parametrize("p,params", [(2, {}), (1, dict(step_size=1e-3))])
def test_weighted_equals_repeated_given_one_preconditioner(data, p, params):
    A, b, w = data
    Ar, br = np.repeat(A, w, axis=0), np.repeat(b, w)  # copies adjacent, as the draws' CDF
    blocks_r = as_row_blocks(append_ones_column(Ar), name="X")
    precond = precondition_blocks(blocks_r, br, random_state=0, name="X")
    models = []
    for X, y, weights in ((A, b, w.astype(float)), (Ar, br, None)):
        model = PWSGDRegressor(p=p, n_iter=4000, random_state=0, **params)
        model.n_features_in_ = A.shape[1]
        models.append(model._fit_preconditioned(as_row_blocks(append_ones_column(X), name="X"),
                                                y, weights, precond))
    weighted, repeated = models
    # the same rows drawn as often: the sampling distribution over the original rows
    original = np.repeat(np.arange(len(b)), w)[repeated.sampled_rows_]
    rows, first = np.unique(original, return_index=True)
    counts = np.add.reduceat(repeated.sample_counts_, first)
    np.testing.assert_array_equal(weighted.sampled_rows_, rows)
    np.testing.assert_array_equal(weighted.sample_counts_, counts)
    assert not np.isin(weighted.sampled_rows_, np.flatnonzero(w == 0)).any()
    # and the same steps
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-10)
    assert weighted.intercept_ == pytest.approx(repeated.intercept_, rel=1e-10)
    np.testing.assert_allclose(weighted.objective_history_, repeated.objective_history_,
                               rtol=1e-10)


def test_weighted_l2_reaches_the_weighted_optimum(data):
    A, b, w = data
    sw = np.sqrt(w)[:, None]
    Aw = np.hstack([A, np.ones((len(b), 1))]) * sw
    x_opt = np.linalg.lstsq(Aw, b * sw[:, 0], rcond=None)[0]
    f_opt = objective(A, b, w, x_opt[:-1], x_opt[-1], 2)
    for seed in (0, 1):
        model = PWSGDRegressor(random_state=seed).fit(A, b, sample_weight=w)
        f = objective(A, b, w, model.coef_, model.intercept_, 2)
        assert (f - f_opt) / f_opt <= 1e-2
        assert not np.isin(model.sampled_rows_, np.flatnonzero(w == 0)).any()
    # the sketch-and-solve start is of the weighted problem too: far from the
    # unweighted optimum's objective... and SGD improved on it
    start = model.coef_history_[0]
    assert objective(A, b, w, start[:-1], start[-1], 2) > f


def test_weighted_l1_reaches_the_weighted_optimum(data):
    A, b, w = data
    A, b, w = A[:1500], b[:1500] + np.random.default_rng(0).laplace(size=1500), w[:1500]
    x_opt = l1_regression_linprog(np.repeat(A, w, axis=0), np.repeat(b, w))
    f_opt = objective(A, b, w, x_opt, 0.0, 1)
    model = PWSGDRegressor(p=1, fit_intercept=False, random_state=0).fit(A, b, sample_weight=w)
    assert (objective(A, b, w, model.coef_, 0.0, 1) - f_opt) / f_opt <= 5e-2


def test_weighted_fit_is_invariant_to_chunking(data):
    A, b, w = data
    params = dict(n_iter=3000, random_state=4)
    ref = PWSGDRegressor(**params).fit(A, b, sample_weight=w)
    for X, weights, extra in ((da.from_array(A, chunks=(700, 6)), da.from_array(w, chunks=450),
                               {}), (A, da.from_array(w, chunks=1000), dict(block_rows=512))):
        model = PWSGDRegressor(**params, **extra).fit(X, b, sample_weight=weights)
        np.testing.assert_allclose(model.coef_, ref.coef_, rtol=1e-7)
        assert model.intercept_ == pytest.approx(ref.intercept_, rel=1e-7)
        np.testing.assert_array_equal(model.sampled_rows_, ref.sampled_rows_)


def test_bad_sample_weight(data):
    A, b, w = data
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        PWSGDRegressor().fit(A, b, sample_weight=-np.ones(len(b)))
    with pytest.raises(ValueError, match=r"sample_weight.shape == \(5,\)"):
        PWSGDRegressor().fit(A, b, sample_weight=np.ones(5))
