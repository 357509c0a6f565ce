"""RFD-SON with sample_weight.

A weight scales one example's loss, so its gradient and its sketched row
``sqrt(mu_t + eta_t) g_t`` are scaled by it (scikit-learn's SGD semantics); an
example of weight 0 is skipped as if absent. Checked exactly: the compiled loop
against the dense Algorithm 3 with weighted gradients; weight 1 equals no weight
and weight 0 equals dropping the row, to the bit; for the squared loss a weight
``w`` equals the unweighted example ``(sqrt(w) x, sqrt(w) y)`` (same gradient
``2 w (w^T x - y) x``), to the bit for powers of 4; any Dask chunking gives the
in-memory model. A weight is not row repetition (an online step depends on the
iterate it meets): scikit-learn's equivalence checks are declared expected
failures in tests/test_estimator_checks.py.
"""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse

from dasketch import RFDSONClassifier, RFDSONRegressor
from tests.linear_model.test_rfd_son import (
    classification_problem,
    dense_algorithm3,
    kernel_iterates,
)


def _same_model(a, b, rel=0.0):
    """The same iterates, bit for bit; the online means to ``rel`` (a sum over other
    blocks adds in another order)."""
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    np.testing.assert_array_equal(a.alpha_, b.alpha_)
    assert a.n_seen_ == b.n_seen_
    assert a.online_loss_ == pytest.approx(b.online_loss_, rel=rel, abs=0)
    assert getattr(a, "online_error_rate_", 0) == pytest.approx(
        getattr(b, "online_error_rate_", 0), rel=rel, abs=0)


@pytest.fixture(scope="module")
def weighted():
    X, y = classification_problem(400, 15, seed=3)
    w = np.random.default_rng(3).choice([0.0, 0.5, 1.0, 2.0, 3.0], size=400)
    return X, y, w


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("method,update,alpha_floor", [
    ("rfd", "buffered", False), ("rfd", "per_step", True), ("fd", "buffered", True),
    ("full", "buffered", False)])
def test_kernel_matches_dense_algorithm3_with_weighted_gradients(loss, method, update,
                                                                 alpha_floor):
    d, l, n = 10, 3, 50
    X, y = classification_problem(n, d, seed=4)
    weights = np.random.default_rng(4).choice([0.0, 0.3, 1.0, 2.5], size=n)
    eta, mu = (1.0, 0.0) if loss == "hinge" else (0.5, 0.1)
    C = 1.5 if loss == "hinge" else 1.0
    params = dict(method=method, alpha0=0.5 if method == "fd" else 0.0, loss=loss,
                  prediction_bound=C, eta=eta, mu=mu, alpha_floor=alpha_floor)
    ref, ref_alphas = dense_algorithm3(X, y, l, capacity=l if update == "per_step" else 2 * l,
                                       weights=weights, **params)
    unweighted, _ = dense_algorithm3(X, y, l, capacity=l if update == "per_step" else 2 * l,
                                     **params)
    scale = np.abs(ref).max(axis=1, keepdims=True) + 1.0
    assert np.abs(unweighted - ref).max() > 1e-3  # the weights matter
    for rows in (X, scipy.sparse.csr_matrix(X)):
        ours, alphas, learner = kernel_iterates(rows, y, l, weights=weights, update=update,
                                                **params)
        np.testing.assert_allclose(ours / scale, ref / scale, rtol=0, atol=1e-10)
        np.testing.assert_allclose(alphas, ref_alphas, rtol=1e-10, atol=1e-14)
        assert learner.t == np.count_nonzero(weights)  # weight-0 examples are not counted


@pytest.mark.parametrize("sparse", [False, True])
def test_unit_weights_equal_no_weights_and_zero_weights_equal_dropping(weighted, sparse):
    X, y, w = weighted
    Xs = scipy.sparse.csr_matrix(X) if sparse else X
    target = X[:, 0] - y
    target[np.flatnonzero(w == 0)[0]] = 50.0  # an outlier of weight 0 sets no bound
    for est, labels in ((RFDSONClassifier(sketch_size=5, block_rows=64), y),
                        (RFDSONClassifier(sketch_size=5, loss="hinge"), y),
                        (RFDSONRegressor(sketch_size=5, block_rows=64), target)):
        ref = est.__class__(**est.get_params()).fit(Xs, labels, n_epochs=2)
        ones = est.__class__(**est.get_params()).fit(Xs, labels, n_epochs=2,
                                                     sample_weight=np.ones(400, dtype=int))
        _same_model(ref, ones)
        keep = w != 0
        binary = np.where(keep, 1, 0)
        dropped = est.__class__(**est.get_params()).fit(Xs[keep], labels[keep], n_epochs=2)
        zeroed = est.__class__(**est.get_params()).fit(Xs, labels, n_epochs=2,
                                                       sample_weight=binary)
        _same_model(dropped, zeroed, rel=1e-14)
        assert zeroed.n_seen_ == 2 * keep.sum()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_weighted_squared_loss_equals_rescaled_examples(weighted):
    """Loss ``w (u^T x - y)^2`` has the gradient of ``(u^T x' - y')^2`` at
    ``x' = sqrt(w) x``, ``y' = sqrt(w) y``: with the constraint inactive (a large
    prediction_bound), no floor (it uses ``max ||x||``) and no intercept column
    (it would be scaled too), the runs are the same; powers of 4 keep it exact."""
    X, y, _ = weighted
    w = np.random.default_rng(5).choice([0.25, 1.0, 4.0, 16.0], size=400)
    root = np.sqrt(w)
    target = X[:, :3].sum(axis=1) + 0.1 * y
    for method in ("rfd", "fd", "full"):
        params = dict(sketch_size=4, method=method, alpha0=100.0, prediction_bound=1e6,
                      mu=0.05, fit_intercept=False, alpha_floor=False)
        for rows, scaled in ((X, root[:, None] * X),
                             (scipy.sparse.csr_matrix(X),
                              scipy.sparse.csr_matrix(root[:, None] * X))):
            ours = RFDSONRegressor(**params).fit(rows, target, sample_weight=w)
            ref = RFDSONRegressor(**params).fit(scaled, root * target)
            np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-13,
                                       atol=1e-13 * np.abs(ref.coef_).max())
            assert ours.alpha_ == pytest.approx(ref.alpha_, rel=1e-13)
            assert ours.online_loss_ == pytest.approx(ref.online_loss_ * 400 / w.sum(),
                                                      rel=1e-12)
            unweighted = RFDSONRegressor(**params).fit(rows, target)
            assert np.abs(unweighted.coef_ - ref.coef_).max() > 1e-3 * np.abs(ref.coef_).max()


@pytest.mark.parametrize("chunks", [400, 64, (100, 7, 200, 93)])
def test_weighted_dask_input_any_chunking_gives_the_numpy_model(weighted, chunks):
    X, y, w = weighted
    labels = np.where(y > 0, 2, np.where(X[:, 1] > 0, 0, 1))  # three classes
    ref = RFDSONClassifier(sketch_size=4).fit(X, labels, n_epochs=2, sample_weight=w)
    model = RFDSONClassifier(sketch_size=4, block_rows=96).fit(
        da.from_array(X, chunks=(chunks, -1)), da.from_array(labels, chunks=50), n_epochs=2,
        sample_weight=da.from_array(w, chunks=70))
    _same_model(ref, model, rel=1e-14)
    pieces = RFDSONClassifier(sketch_size=4)
    for start in range(0, 400, 150):
        part = slice(start, start + 150)
        pieces.partial_fit(X[part], labels[part], classes=[0, 1, 2], sample_weight=w[part])
    once = RFDSONClassifier(sketch_size=4).partial_fit(X, labels, sample_weight=w)
    _same_model(once, pieces, rel=1e-14)


def test_online_measures_are_weighted_means(weighted):
    X, y, w = weighted
    clf = RFDSONClassifier(sketch_size=5).fit(X, y, sample_weight=w)
    learner = clf._new_learner(X.shape[1] + 1)  # the same run, by hand
    z, losses = learner.fit_rows(np.hstack([X, np.ones((400, 1))]), y, weights=w)
    np.testing.assert_array_equal(learner.u[:-1], clf.coef_[0])
    wrong = np.where(z > 0, 1.0, -1.0) != y
    assert clf.online_error_rate_ == pytest.approx(w[wrong].sum() / w.sum(), rel=1e-14)
    assert clf.online_loss_ == pytest.approx(losses.sum() / w.sum(), rel=1e-14)
    np.testing.assert_array_equal(losses[w == 0], 0.0)
    assert learner.t == np.count_nonzero(w) == clf.n_seen_


@pytest.mark.parametrize("sample_weight,match", [
    (-np.ones(400), "sample_weight"), (np.ones(399), "sample_weight"),
    (np.zeros(400), "sample_weight is all zero"), (np.full(400, np.nan), "NaN")])
def test_bad_weights_are_rejected(weighted, sample_weight, match):
    X, y, _ = weighted
    with pytest.raises(ValueError, match=match):
        RFDSONClassifier(sketch_size=3).fit(X, y, sample_weight=sample_weight)
