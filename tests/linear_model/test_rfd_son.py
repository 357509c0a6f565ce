"""RFD-SON (Luo et al., JMLR 2019, Algorithms 3 and 6): the O(l d) kernel against a
dense implementation of Algorithm 3, a9a accuracy and robustness to alpha0,
Dask/zarr streaming, numerical safety and input validation."""

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse

from dasketch import RFDSONClassifier, RFDSONRegressor
from dasketch.kernels.online_newton import (
    RCOND, DivergenceError, OnlineNewton, _Row, loss_derivative)


# ------------------------------------------------------------ dense reference
def dense_algorithm3(X, y, sketch_size, *, method="rfd", alpha0=0.0, loss="squared",
                     prediction_bound=1.0, eta=0.0, mu=0.1, capacity=None):
    """Algorithm 3 written directly: H formed as a d x d matrix, its pseudo-inverse
    by ``numpy.linalg.pinv``, the sketch shrunk by a dense SVD when it holds
    ``capacity`` rows (``l`` for Algorithm 3, ``2 l`` for the buffer of Algorithm 6).

    Returns the unconstrained iterates u_2, ..., u_{n+1} and alpha at every step.
    """
    n, d = X.shape
    capacity = sketch_size if capacity is None else capacity
    B = np.zeros((0, d))
    G = np.zeros((d, d))  # full-matrix sum of scaled gradient outer products
    shrinkage = 0.0
    u = np.zeros(d)
    us, alphas = [], []

    def current_H():
        if method == "full":
            return G + alpha0 * np.eye(d)
        alpha = alpha0 + (shrinkage / 2 if method == "rfd" else 0.0)
        return B.T @ B + alpha * np.eye(d), alpha

    H, alpha = (current_H(), alpha0) if method == "full" else current_H()
    for t in range(1, n + 1):
        x = X[t - 1]
        # Projection of u onto K_t = {|w^T x| <= C} in the H-(semi)norm.
        Hp = np.linalg.pinv(H, rtol=RCOND, hermitian=True)
        w = u
        zu = x @ u
        z = zu
        if abs(zu) > prediction_bound:
            hx = Hp @ x
            denom = x @ hx
            top = np.linalg.eigvalsh(H).max()
            null = x - H @ hx
            if np.linalg.norm(null) > 0 and denom <= RCOND * top * (x @ x):
                hx, denom = null, x @ null
            if denom > 0:
                w = u - np.sign(zu) * (abs(zu) - prediction_bound) / denom * hx
                z = np.sign(zu) * prediction_bound  # w^T x in exact arithmetic
        _, slope = loss_derivative(loss, z, y[t - 1])
        if slope != 0:
            g = slope * x
            a = np.sqrt(mu + eta / t) * g
            if method == "full":
                G += np.outer(a, a)
                H = current_H()
            else:
                B = np.vstack([B, a])
                if B.shape[0] == capacity:
                    _, s, vt = np.linalg.svd(B, full_matrices=False)
                    delta = s[sketch_size - 1] ** 2 if s.size >= sketch_size else 0.0
                    lead = s[:sketch_size - 1] ** 2 - delta
                    keep = lead > 0
                    B = np.sqrt(lead[keep])[:, None] * vt[:sketch_size - 1][keep]
                    shrinkage += delta
                H, alpha = current_H()
            u = w - np.linalg.pinv(H, rtol=RCOND, hermitian=True) @ g
        else:
            u = w
        us.append(u.copy())
        alphas.append(alpha)
    return np.array(us), np.array(alphas)


def kernel_iterates(X, y, sketch_size, **params):
    learner = OnlineNewton(X.shape[1], sketch_size, **params)
    us, alphas = [], []
    sparse = scipy.sparse.issparse(X)
    for i in range(X.shape[0]):
        if sparse:
            row = X.getrow(i)
            r = _Row(indices=row.indices, values=row.data.astype(float))
        else:
            r = _Row(dense=X[i])
        learner.step(r, y[i])
        us.append(learner.u.copy())
        alphas.append(learner.alpha)
    return np.array(us), np.array(alphas), learner


def classification_problem(n, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    w = rng.standard_normal(d)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("method,update,alpha0", [
    ("rfd", "per_step", 0.0), ("rfd", "buffered", 0.0), ("rfd", "buffered", 0.5),
    ("fd", "buffered", 0.5), ("fd", "per_step", 0.0), ("full", "buffered", 0.0),
    ("full", "buffered", 0.5)])
def test_kernel_matches_dense_algorithm3(loss, method, update, alpha0):
    d, l, n = 12, 4, 60
    X, y = classification_problem(n, d, seed=1)
    eta, mu = (1.0, 0.0) if loss == "hinge" else (0.5, 0.1)
    # With C = 1 a projected prediction lands on the hinge's kink (margin exactly 1),
    # where rounding alone decides the subgradient; C = 1.5 keeps away from it.
    bound = 1.5 if loss == "hinge" else 1.0
    params = dict(method=method, alpha0=alpha0, loss=loss, prediction_bound=bound, eta=eta,
                  mu=mu)
    ours, alphas, learner = kernel_iterates(X, y, l, update=update, **params)
    capacity = l if update == "per_step" else 2 * l
    ref, ref_alphas = dense_algorithm3(X, y, l, capacity=capacity, **params)
    scale = np.abs(ref).max(axis=1, keepdims=True) + 1.0
    np.testing.assert_allclose(ours / scale, ref / scale, rtol=0, atol=1e-9)
    np.testing.assert_allclose(alphas, ref_alphas, rtol=1e-10, atol=1e-14)
    if method == "rfd" and alpha0 == 0:
        # The first steps run at alpha = 0 on a rank-deficient sketch (pseudo-inverse).
        assert alphas[0] == 0 and (alphas == 0).sum() >= l - 1
        assert learner.n_shrinks > 0 and alphas[-1] > 0
    if method != "full":
        # H of the kernel is the dense H of the reference sketch.
        assert learner.B.shape[0] < capacity


def test_sparse_rows_give_the_dense_iterates():
    X, y = classification_problem(80, 30, seed=2)
    X[np.abs(X) < 1.0] = 0.0
    dense, _, _ = kernel_iterates(X, y, 5, mu=0.1, eta=0.0)
    sparse, _, _ = kernel_iterates(scipy.sparse.csr_matrix(X), y, 5, mu=0.1, eta=0.0)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)


def test_no_d_by_d_matrix_is_formed():
    # d = 100,000: a d x d float64 matrix needs 80 GB, more than this machine has,
    # so any step that formed one would fail.
    d, n, nnz = 100_000, 60, 40
    rng = np.random.default_rng(3)
    X = scipy.sparse.csr_matrix(
        (rng.standard_normal(n * nnz), rng.integers(0, d, n * nnz), np.arange(0, n * nnz + 1, nnz)),
        shape=(n, d))
    X.sum_duplicates()
    y = np.where(rng.standard_normal(n) > 0, 1, -1)
    clf = RFDSONClassifier(sketch_size=5).fit(X, y)
    assert clf.learner_.n_shrinks >= 5 and np.isfinite(clf.coef_).all()
    assert clf.learner_._Q.shape == (10, d)


def test_solve_is_the_pseudo_inverse_of_H():
    X, y = classification_problem(25, 10, seed=5)
    for alpha0 in (0.0, 0.3):
        _, _, learner = kernel_iterates(X[:3], y[:3], 6, alpha0=alpha0)  # rank 3 < l
        H = learner.covariance()
        v = np.random.default_rng(6).standard_normal(10)
        expected = np.linalg.pinv(H, rtol=RCOND, hermitian=True) @ v
        np.testing.assert_allclose(learner.solve(v), expected, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------- a9a
def _a9a_accuracy(train, test, **params):
    clf = RFDSONClassifier(sketch_size=20, loss="squared", prediction_bound=1.0, **params)
    clf.fit(*train)
    return clf.score(*test), clf


def test_a9a_rfd0_son_accuracy(a9a_train, a9a_test):
    acc, clf = _a9a_accuracy(a9a_train, a9a_test, alpha0=0.0)
    # The paper's Table 2: 83.27 % for RFD0-SON at m = 20.
    assert acc >= 0.828, acc
    assert clf.n_seen_ == a9a_train[0].shape[0]
    assert 0.1 < clf.online_error_rate_ < 0.2
    assert clf.alpha_ > 0


@pytest.mark.slow
def test_a9a_rfd_son_is_robust_to_alpha0_fd_son_is_not(a9a_train, a9a_test):
    alphas = (0.0, 1e-3, 1.0, 1e3)
    rfd = [_a9a_accuracy(a9a_train, a9a_test, alpha0=a)[0] for a in alphas]
    fd = [_a9a_accuracy(a9a_train, a9a_test, alpha0=a, method="fd")[0] for a in alphas]
    print("RFD-SON", dict(zip(alphas, rfd)), "FD-SON", dict(zip(alphas, fd)))
    assert max(rfd) - min(rfd) <= 0.01, rfd
    assert max(fd) - min(fd) > max(rfd) - min(rfd), (fd, rfd)
    assert min(rfd) >= 0.82


# ---------------------------------------------------------------- streaming
@pytest.fixture(scope="module")
def stream_problem():
    X, y = classification_problem(700, 25, seed=7)
    return X, y


def _same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.online_error_rate_ == b.online_error_rate_
    assert a.alpha_ == b.alpha_ and a.n_seen_ == b.n_seen_


@pytest.mark.parametrize("chunks", [700, 64, (100, 7, 300, 293), (50, 5)])
def test_dask_input_any_chunking_gives_the_numpy_model(stream_problem, chunks):
    X, y = stream_problem
    ref = RFDSONClassifier(sketch_size=6, fit_intercept=True).fit(X, y, n_epochs=2)
    if isinstance(chunks, tuple) and len(chunks) == 2:
        Xd = da.from_array(X, chunks=chunks)  # chunked along columns too
        with pytest.warns(UserWarning, match="chunked along columns"):
            model = RFDSONClassifier(sketch_size=6, fit_intercept=True, block_rows=128)
            model.fit(Xd, da.from_array(y, chunks=77), n_epochs=2)
    else:
        Xd = da.from_array(X, chunks=(chunks, -1))
        model = RFDSONClassifier(sketch_size=6, fit_intercept=True, block_rows=96)
        model.fit(Xd, da.from_array(y, chunks=50), n_epochs=2)
    _same_model(ref, model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the column-chunking warning
        lazy = model.decision_function(Xd)
    assert isinstance(lazy, da.Array)
    np.testing.assert_allclose(lazy.compute(), ref.decision_function(X))


def test_zarr_path_on_a_cluster_gives_the_numpy_model(stream_problem, tmp_path,
                                                      cluster_client):
    import zarr

    X, y = stream_problem
    path = tmp_path / "X.zarr"
    z = zarr.create_array(str(path), shape=X.shape, chunks=(33, 25), dtype="f8")
    z[:] = X
    ref = RFDSONClassifier(sketch_size=6).fit(X, y)
    model = RFDSONClassifier(sketch_size=6, block_rows=200)
    with cluster_client.as_current():
        model.fit(str(path), y)
    _same_model(ref, model)


def test_partial_fit_in_pieces_equals_one_pass(stream_problem):
    X, y = stream_problem
    ref = RFDSONClassifier(sketch_size=6).fit(X, y)
    model = RFDSONClassifier(sketch_size=6)
    for start in range(0, 700, 123):
        model.partial_fit(X[start:start + 123], y[start:start + 123], classes=[-1.0, 1.0])
    _same_model(ref, model)


def test_progress_bar_counts_rows(stream_problem, capsys):
    X, y = stream_problem
    RFDSONClassifier(sketch_size=4, progress=True).fit(X, y)
    assert "700/700" in capsys.readouterr().err


# --------------------------------------------------------- numerical safety
@pytest.mark.parametrize("method", ["rfd", "fd", "full"])
@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
def test_no_overflow_nan_or_linalgerror_for_any_step_size(method, loss):
    X, y = classification_problem(150, 15, seed=8)
    X[40:60] = X[0]          # repeated rows: a rank-deficient sketch
    X[70:75] = 0.0           # zero rows
    X[90:] *= 1e3            # badly scaled rows
    for eta, mu in [(1e-12, 0.0), (1e-6, 0.0), (1.0, 0.0), (1e6, 0.0), (0.0, 1e-9),
                    (0.0, 1e9), (1e-3, 1e-3)]:
        for alpha0 in (0.0, 1e-8, 1.0):
            clf = RFDSONClassifier(sketch_size=5, method=method, loss=loss, eta=eta, mu=mu,
                                   alpha0=alpha0)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    clf.fit(X, y)
                except DivergenceError:
                    assert not hasattr(clf, "coef_")
                    continue
            assert np.isfinite(clf.coef_).all() and np.isfinite(clf.online_loss_)
            # the clipped linear model itself (a bound alone holds for any clipped output)
            linear = X @ np.ravel(clf.coef_) + np.ravel(clf.intercept_)[0]
            np.testing.assert_allclose(clf.decision_function(X), np.clip(linear, -1.0, 1.0),
                                       rtol=1e-10, atol=1e-12)


def test_divergence_is_reported_and_the_previous_model_kept():
    X, y = classification_problem(200, 10, seed=9)
    fresh = RFDSONClassifier(sketch_size=3, eta=0.0, mu=1e-300)  # steps ~ 1 / mu
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError, match="diverged at example 1"):
            fresh.fit(X, y)
    assert not hasattr(fresh, "coef_")
    clf = RFDSONClassifier(sketch_size=3).fit(X[:100], y[:100])
    coef = clf.coef_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(DivergenceError):
            clf.partial_fit(X[100:] * 1e200, y[100:])  # gradients overflow
    np.testing.assert_array_equal(clf.coef_, coef)
    assert clf.n_seen_ == 100
    assert clf.partial_fit(X[100:], y[100:]).n_seen_ == 200


def test_regressor_fits_a_linear_model():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((3000, 20))
    w = rng.uniform(-0.1, 0.1, 20)
    y = X @ w + 0.3 + 0.01 * rng.standard_normal(3000)
    reg = RFDSONRegressor(sketch_size=8, prediction_bound=2.0, fit_intercept=True).fit(X, y, n_epochs=3)
    assert reg.score(X, y) > 0.98
    assert abs(reg.intercept_ - 0.3) < 0.02
    np.testing.assert_allclose(reg.coef_, w, atol=0.02)


def test_classifier_beats_chance_with_any_labels():
    X, y = classification_problem(2000, 10, seed=11)
    labels = np.where(y > 0, "spam", "ham")
    clf = RFDSONClassifier(sketch_size=4, loss="logistic").fit(X, labels)
    assert list(clf.classes_) == ["ham", "spam"]
    assert clf.score(X, labels) > 0.85
    assert clf.online_error_rate_ < 0.25


# -------------------------------------------------------------- bad input
def test_bad_input_is_rejected():
    X, y = classification_problem(50, 6)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        RFDSONClassifier(sketch_size=2).fit(X, np.arange(50) % 3)
    with pytest.raises(ValueError, match="exactly 2 classes"):
        RFDSONClassifier(sketch_size=2).fit(X, np.ones(50))
    clf = RFDSONClassifier(sketch_size=2).fit(X, y)
    with pytest.raises(ValueError, match="outside the two classes"):
        clf.partial_fit(X, np.where(y > 0, 2.0, -1.0))
    for bad in (0, -3, 7):
        with pytest.raises(ValueError, match="sketch_size"):
            RFDSONClassifier(sketch_size=bad).fit(X, y)
    with pytest.raises(TypeError, match="sketch_size"):
        RFDSONClassifier(sketch_size=2.5).fit(X, y)
    with pytest.raises(ValueError, match="alpha0"):
        RFDSONClassifier(sketch_size=2, alpha0=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.partial_fit(X[:, :5], y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :5])
    for value in (np.nan, np.inf):
        Xbad = X.copy()
        Xbad[17, 3] = value
        with pytest.raises(ValueError, match="NaN or Inf in rows 17"):
            RFDSONClassifier(sketch_size=2).fit(Xbad, y)
        with pytest.raises(ValueError, match="NaN or Inf"):
            RFDSONRegressor(sketch_size=2).fit(X, np.where(np.arange(50) == 3, value, 0.0))
    with pytest.raises(ValueError, match="one entry per row"):
        RFDSONClassifier(sketch_size=2).fit(X, y[:-1])
    with pytest.raises(ValueError, match="loss"):
        RFDSONClassifier(sketch_size=2, loss="cubic").fit(X, y)
    with pytest.raises(ValueError, match="method must be"):
        RFDSONClassifier(sketch_size=2, method="oja").fit(X, y)
    with pytest.raises(ValueError, match="prediction_bound must be"):
        RFDSONClassifier(sketch_size=2, prediction_bound=0.0).fit(X, y)
    with pytest.raises(ValueError, match="eta"):
        RFDSONClassifier(sketch_size=2, eta=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="n_epochs"):
        RFDSONClassifier(sketch_size=2).fit(X, y, n_epochs=0)
    with pytest.raises(ValueError, match="2-D"):
        RFDSONClassifier(sketch_size=2).fit(X[0], y[:1])


def test_mu_auto_is_half_the_exp_concavity_constant():
    X, y = classification_problem(300, 8, seed=12)
    bound = 2.0
    for loss, mu in (("logistic", np.exp(-bound) / 2), ("squared", 1 / (4 * (bound + 1) ** 2))):
        auto = RFDSONClassifier(sketch_size=4, loss=loss, prediction_bound=bound).fit(X, y)
        given = RFDSONClassifier(sketch_size=4, loss=loss, prediction_bound=bound,
                                 mu=mu).fit(X, y)
        other = RFDSONClassifier(sketch_size=4, loss=loss, prediction_bound=bound,
                                 mu=2 * mu).fit(X, y)
        np.testing.assert_allclose(auto.coef_, given.coef_, rtol=1e-12)
        assert not np.allclose(auto.coef_, other.coef_, rtol=1e-3)  # mu matters here
    regressor = RFDSONRegressor(sketch_size=4, prediction_bound=bound).fit(X, y)
    given = RFDSONRegressor(sketch_size=4, prediction_bound=bound,
                            mu=1 / (16 * bound ** 2)).fit(X, y)
    np.testing.assert_allclose(regressor.coef_, given.coef_, rtol=1e-12)


def test_second_fit_starts_from_scratch():
    X, y = classification_problem(300, 8, seed=13)
    for model in (RFDSONClassifier(sketch_size=4), RFDSONRegressor(sketch_size=4)):
        refit = model.fit(X[:150], y[:150]).fit(X[150:], y[150:])
        fresh = type(model)(sketch_size=4).fit(X[150:], y[150:])
        np.testing.assert_array_equal(refit.coef_, fresh.coef_)
        assert refit.n_seen_ == fresh.n_seen_ == 150
