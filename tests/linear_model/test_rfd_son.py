"""RFD-SON (Luo et al., JMLR 2019, Algorithms 3 and 6): the compiled kernel against a
dense implementation of Algorithm 3, the data-derived floor of alpha on sparse
imbalanced data, a9a accuracy and robustness to alpha0, one-vs-rest, Dask/zarr
streaming, numerical safety and input validation."""

import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning

from dasketch import RFDSONClassifier, RFDSONRegressor
from dasketch.datasets import imbalanced_sparse_classification
from dasketch.kernels.online_newton import RCOND, DivergenceError, OnlineNewton, loss_derivative


# ------------------------------------------------------------ dense reference
def dense_algorithm3(X, y, sketch_size, *, method="rfd", alpha0=0.0, loss="squared",
                     prediction_bound=1.0, eta=0.0, mu=0.1, capacity=None, alpha_floor=False,
                     weights=None):
    """Algorithm 3 written directly: H formed as a d x d matrix, its pseudo-inverse
    by ``numpy.linalg.pinv``, the sketch shrunk by a dense SVD when it holds
    ``capacity`` rows (``l`` for Algorithm 3, ``2 l`` for the buffer of Algorithm 6),
    alpha optionally kept above ``max ||g|| max ||x|| / (2 C)``. Example ``i``'s loss
    is scaled by ``weights[i]`` (its gradient is); an example of weight 0 is skipped.

    Returns the unconstrained iterates u_2, ..., u_{n+1} and alpha at every step.
    """
    n, d = X.shape
    C = prediction_bound
    capacity = sketch_size if capacity is None else capacity
    B = np.zeros((0, d))
    G = np.zeros((d, d))  # full-matrix sum of scaled gradient outer products
    shrinkage = grad_max = row_max = 0.0
    u = np.zeros(d)
    us, alphas = [], []

    def current_H():
        alpha = alpha0 + (shrinkage / 2 if method == "rfd" else 0.0)
        if alpha_floor:
            alpha = max(alpha, grad_max * row_max / (2 * C))
        return (G if method == "full" else B.T @ B) + alpha * np.eye(d), alpha

    H, alpha = current_H()
    weights = np.ones(n) if weights is None else weights
    t = 0
    for i in range(n):
        if weights[i] == 0:
            us.append(u.copy())
            alphas.append(alpha)
            continue
        t += 1
        x = X[i]
        # Projection of u onto K_t = {|w^T x| <= C} in the H-(semi)norm.
        w, zu = u, x @ u
        z = zu
        if abs(zu) > C:
            hx = np.linalg.pinv(H, rtol=RCOND, hermitian=True) @ x
            denom = x @ hx
            null = x - H @ hx
            if np.linalg.norm(null) > 0 and denom <= RCOND * np.linalg.eigvalsh(H).max() * (x @ x):
                hx, denom = null, x @ null
            if denom > 0:
                w = u - np.sign(zu) * (abs(zu) - C) / denom * hx
                z = np.sign(zu) * C  # w^T x in exact arithmetic
        _, slope = loss_derivative(loss, z, y[i])
        slope *= weights[i]
        row_max = max(row_max, np.linalg.norm(x))
        if slope != 0:
            g = slope * x
            a = np.sqrt(mu + eta / t) * g
            grad_max = max(grad_max, np.linalg.norm(g))
            if method == "full":
                G += np.outer(a, a)
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
            H, alpha = current_H()  # the floor counts the row all the same
        us.append(u.copy())
        alphas.append(alpha)
    return np.array(us), np.array(alphas)


def kernel_iterates(X, y, sketch_size, weights=None, **params):
    """The compiled kernel fed one row per call, its iterate read after each."""
    learner = OnlineNewton(X.shape[1], sketch_size, **params)
    weights = np.ones(X.shape[0]) if weights is None else weights
    us, alphas = [], []
    for i in range(X.shape[0]):
        learner.fit_rows(X[i:i + 1], y[i:i + 1], weights=weights[i:i + 1])
        us.append(learner.u)
        alphas.append(learner.alpha)
    return np.array(us), np.array(alphas), learner


def classification_problem(n, d, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * scale
    w = rng.standard_normal(d)
    y = np.where(X @ w + 0.5 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


@pytest.mark.parametrize("alpha_floor", [False, True])
@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("method,update,alpha0", [
    ("rfd", "per_step", 0.0), ("rfd", "buffered", 0.0), ("rfd", "buffered", 0.5),
    ("fd", "buffered", 0.5), ("fd", "per_step", 0.0), ("full", "buffered", 0.0),
    ("full", "buffered", 0.5)])
def test_kernel_matches_dense_algorithm3(loss, method, update, alpha0, alpha_floor):
    d, l, n = 12, 4, 60
    X, y = classification_problem(n, d, seed=1)
    eta, mu = (1.0, 0.0) if loss == "hinge" else (0.5, 0.1)
    # With C = 1 a projected prediction lands on the hinge's kink (margin exactly 1),
    # where rounding alone decides the subgradient; C = 1.5 keeps away from it.
    C = 1.5 if loss == "hinge" else 1.0
    params = dict(method=method, alpha0=alpha0, loss=loss, prediction_bound=C, eta=eta,
                  mu=mu, alpha_floor=alpha_floor)
    capacity = l if update == "per_step" else 2 * l
    ref, ref_alphas = dense_algorithm3(X, y, l, capacity=capacity, **params)
    scale = np.abs(ref).max(axis=1, keepdims=True) + 1.0
    # FD at alpha0 = 0 without the floor inverts a singular H whose smallest kept
    # eigenvalues are a 1e-4 fraction of the largest: the pseudo-inverse amplifies
    # rounding differences between any two implementations to about 1e-10.
    tol = 1e-9 if (method == "fd" and alpha0 == 0 and not alpha_floor) else 1e-10
    for rows in (X, scipy.sparse.csr_matrix(X)):  # dense and sparse rows
        ours, alphas, learner = kernel_iterates(rows, y, l, update=update, **params)
        np.testing.assert_allclose(ours / scale, ref / scale, rtol=0, atol=tol)
        np.testing.assert_allclose(alphas, ref_alphas, rtol=1e-10, atol=1e-14)
    if method == "rfd" and alpha0 == 0 and not alpha_floor:
        # The first steps run at alpha = 0 on a rank-deficient sketch (pseudo-inverse).
        assert alphas[0] == 0 and (alphas == 0).sum() >= l - 1
        assert learner.n_shrinks > 0 and alphas[-1] > 0
    if alpha_floor:
        assert alphas[0] > 0 and np.all(np.diff(alphas) >= 0)  # H only grows
    if method != "full":
        assert learner.n_rows < capacity


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
    assert clf.learners_[0].n_shrinks >= 5 and np.isfinite(clf.coef_).all()
    assert clf.learners_[0]._Q.shape == (10, d + 1)


def _largest_newton_move(X, y, prediction_bound=1.0):
    """Largest ``|x_s^T H_t^+ g_t|`` over steps t and rows s <= t seen so far, in
    units of the width ``2 C`` of the constraint set (hinge loss, the floor on)."""
    learner = OnlineNewton(X.shape[1], 2, loss="hinge", prediction_bound=prediction_bound)
    largest = 0.0
    for t in range(len(y)):
        z = learner.fit_rows(X[t:t + 1], y[t:t + 1])[0][0]
        _, slope = loss_derivative("hinge", z, y[t])
        if slope != 0:
            step = learner.solve(slope * X[t])  # H_t^+ g_t, H_t after the append
            largest = max(largest, np.abs(X[:t + 1] @ step).max() / (2 * prediction_bound))
    return largest


def test_the_floor_bounds_every_newton_step_for_every_row_seen():
    """The floor counts every row seen in R_t, with a gradient or not: rows e1,
    100 e1 (no hinge gradient), e1 + e2 once moved the prediction of 100 e1 by
    33 = 16.7 x 2C."""
    X = np.array([[1.0, 0.0], [100.0, 0.0], [1.0, 1.0]])
    assert _largest_newton_move(X, np.array([1.0, 1.0, -1.0])) <= 1.0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((60, 5)) * np.exp(rng.uniform(-3, 3, (60, 1)))
        assert _largest_newton_move(X, np.sign(rng.standard_normal(60)), 0.5) <= 1.0


def test_solve_is_the_pseudo_inverse_of_H():
    X, y = classification_problem(25, 10, seed=5)
    for alpha0 in (0.0, 0.3):
        _, _, learner = kernel_iterates(X[:3], y[:3], 6, alpha0=alpha0, alpha_floor=False)
        H = learner.covariance()  # rank 3 < l: singular at alpha0 = 0
        v = np.random.default_rng(6).standard_normal(10)
        expected = np.linalg.pinv(H, rtol=RCOND, hermitian=True) @ v
        np.testing.assert_allclose(learner.solve(v), expected, rtol=1e-9, atol=1e-9)


# ------------------------------------------- the warm-up: sparse, imbalanced data
@pytest.fixture(scope="module")
def imbalanced():
    X, y = imbalanced_sparse_classification(12000, 2000, random_state=0)
    return X[:8000], y[:8000], X[8000:], y[8000:]


@pytest.mark.heavy
def test_default_is_robust_on_sparse_imbalanced_data(imbalanced):
    X, y, X_test, y_test = imbalanced
    majority = max(y_test.mean(), 1 - y_test.mean())
    without_floor = []
    for l in (10, 20, 50):
        default = RFDSONClassifier(l).fit(X, y)
        tuned = RFDSONClassifier(l, alpha0=1.0, alpha_floor=False).fit(X, y)
        assert default.online_error_rate_ <= 1.5 * tuned.online_error_rate_, l
        assert default.score(X_test, y_test) > majority, l
        assert default.online_error_rate_ < 1 - majority
        raw = RFDSONClassifier(l, alpha_floor=False).fit(X, y)
        without_floor.append(raw.online_error_rate_ / tuned.online_error_rate_)
    # Algorithms 3/6 as written (alpha = 0 until the first shrink) fail here.
    assert max(without_floor) > 1.5, without_floor


def test_default_is_invariant_to_feature_scale(imbalanced):
    X, y, _, _ = imbalanced
    X, y = X[:2000], y[:2000]
    # (without an intercept: its constant column would not scale with the data)
    a = RFDSONClassifier(10, fit_intercept=False).fit(X, y)
    b = RFDSONClassifier(10, fit_intercept=False).fit(X * 1000.0, y)
    np.testing.assert_allclose(b.coef_ * 1000.0, a.coef_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(b.alpha_, a.alpha_ * 1e6, rtol=1e-9)
    assert a.online_error_rate_ == b.online_error_rate_


# --------------------------------------------------------------------- a9a
def _a9a_accuracy(train, test, **params):
    clf = RFDSONClassifier(sketch_size=20, loss="squared", **params).fit(*train)
    return clf.score(*test), clf


@pytest.mark.heavy
def test_a9a_default_accuracy_and_robustness_to_alpha0(a9a_train, a9a_test):
    acc, clf = _a9a_accuracy(a9a_train, a9a_test)
    # The paper's Table 2: 83.27 % for RFD0-SON at m = 20.
    assert acc >= 0.833, acc
    assert clf.n_seen_ == a9a_train[0].shape[0]
    assert 0.1 < clf.online_error_rate_ < 0.2 and clf.alpha_ > 0
    accs = [acc] + [_a9a_accuracy(a9a_train, a9a_test, alpha0=a)[0] for a in (1e-3, 1.0, 1e3)]
    assert max(accs) - min(accs) < 0.01, accs


@pytest.mark.slow
def test_a9a_fd_son_is_sensitive_to_alpha0_rfd_son_is_not(a9a_train, a9a_test):
    alphas = (0.0, 1e-3, 1.0, 1e3)
    rfd = [_a9a_accuracy(a9a_train, a9a_test, alpha0=a, alpha_floor=False)[0] for a in alphas]
    fd = [_a9a_accuracy(a9a_train, a9a_test, alpha0=a, method="fd", alpha_floor=False)[0]
          for a in alphas]
    assert max(fd) - min(fd) > max(rfd) - min(rfd), (fd, rfd)
    assert min(rfd) >= 0.82


# ------------------------------------------------------------- one-vs-rest
def test_multiclass_is_one_binary_learner_per_class_in_one_pass():
    rng = np.random.default_rng(12)
    centers = 3.0 * rng.standard_normal((4, 6))
    labels = rng.integers(0, 4, 1500)
    X = centers[labels] + rng.standard_normal((1500, 6))
    names = np.array(["a", "b", "c", "d"])[labels]
    clf = RFDSONClassifier(sketch_size=4).fit(X, names)
    assert list(clf.classes_) == ["a", "b", "c", "d"]
    assert clf.coef_.shape == (4, 6) and clf.decision_function(X).shape == (1500, 4)
    for k, name in enumerate(clf.classes_):
        binary = RFDSONClassifier(sketch_size=4).fit(X, names == name)
        np.testing.assert_array_equal(clf.coef_[k], binary.coef_[0])
    assert clf.score(X, names) > 0.9
    assert clf.online_error_rate_ < 0.15


# ---------------------------------------------------------------- streaming
@pytest.fixture(scope="module")
def stream_problem():
    return classification_problem(700, 25, seed=7)


def _same_model(a, b):
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert a.online_error_rate_ == b.online_error_rate_
    assert a.alpha_ == b.alpha_ and a.n_seen_ == b.n_seen_


@pytest.mark.parametrize("chunks", [700, 64, (100, 7, 300, 293), (50, 5)])
def test_dask_input_any_chunking_gives_the_numpy_model(stream_problem, chunks):
    X, y = stream_problem
    ref = RFDSONClassifier(sketch_size=6).fit(X, y, n_epochs=2)
    if isinstance(chunks, tuple) and len(chunks) == 2:
        Xd = da.from_array(X, chunks=chunks)  # chunked along columns too
        with pytest.warns(UserWarning, match="chunked along columns"):
            model = RFDSONClassifier(sketch_size=6, block_rows=128)
            model.fit(Xd, da.from_array(y, chunks=77), n_epochs=2)
    else:
        Xd = da.from_array(X, chunks=(chunks, -1))
        model = RFDSONClassifier(sketch_size=6, block_rows=96)
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
    with cluster_client.as_current():
        model = RFDSONClassifier(sketch_size=6, block_rows=200).fit(str(path), y)
    _same_model(ref, model)


def test_partial_fit_in_pieces_equals_one_pass(stream_problem):
    X, y = stream_problem
    ref = RFDSONClassifier(sketch_size=6, block_rows=50).fit(X, y)
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
            for alpha_floor in (True, False):
                clf = RFDSONClassifier(sketch_size=5, method=method, loss=loss, eta=eta,
                                       mu=mu, alpha0=alpha0, alpha_floor=alpha_floor)
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    try:
                        clf.fit(X, y)
                    except DivergenceError:
                        assert not alpha_floor  # the floor bounds every step
                        assert not hasattr(clf, "coef_")
                        continue
                assert np.isfinite(clf.coef_).all() and np.isfinite(clf.online_loss_)
                # the clipped linear model itself (a bound alone holds for any clipped output)
                linear = X @ np.ravel(clf.coef_) + np.ravel(clf.intercept_)[0]
                np.testing.assert_allclose(clf.decision_function(X),
                                           np.clip(linear, -1.0, 1.0), rtol=1e-10, atol=1e-12)


def test_divergence_is_reported_and_the_previous_model_kept():
    X, y = classification_problem(200, 10, seed=9)
    fresh = RFDSONClassifier(sketch_size=3, eta=0.0, mu=1e-300, alpha_floor=False)
    with pytest.raises(DivergenceError, match="diverged at example 1"):
        fresh.fit(X, y)  # steps ~ 1 / mu
    assert not hasattr(fresh, "coef_")
    clf = RFDSONClassifier(sketch_size=3).fit(X[:100], y[:100])
    coef = clf.coef_.copy()
    with pytest.raises(DivergenceError, match="overflowed"):
        clf.partial_fit(X[100:] * 1e200, y[100:])  # gradients overflow
    np.testing.assert_array_equal(clf.coef_, coef)
    assert clf.n_seen_ == 100
    assert clf.partial_fit(X[100:], y[100:]).n_seen_ == 200


def test_poor_online_error_is_reported():
    X, y = classification_problem(300, 10, seed=13)
    with pytest.warns(ConvergenceWarning, match="majority-class rate"):
        RFDSONClassifier(sketch_size=3).fit(X, np.where(np.arange(300) % 7 == 0, 1, -1))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        RFDSONClassifier(sketch_size=3).fit(X, y)


# --------------------------------------------------------------- regression
def test_regressor_fits_a_linear_model():
    rng = np.random.default_rng(10)
    X = rng.standard_normal((3000, 20))
    w = rng.uniform(-0.1, 0.1, 20)
    y = X @ w + 0.3 + 0.01 * rng.standard_normal(3000)
    reg = RFDSONRegressor(sketch_size=8).fit(X, y, n_epochs=3)
    assert reg.score(X, y) > 0.98
    assert abs(reg.intercept_ - 0.3) < 0.02
    np.testing.assert_allclose(reg.coef_, w, atol=0.02)


def test_regressor_bound_is_set_from_the_targets_or_warns():
    rng = np.random.default_rng(14)
    X = rng.standard_normal((4000, 8))
    z = X @ np.array([4.0, -3.0, 2.0, 1.0, 0.5, 0.0, 0.0, 1.5])
    y = -11.0 + 29.0 * (z - z.min()) / (z.max() - z.min())  # linear, in [-11, 18]
    reg = RFDSONRegressor(sketch_size=8).fit(X, y, n_epochs=3)
    assert reg.prediction_bound_ == 18.0
    assert reg.score(X, y) > 0.95  # not clipped to [-1, 1]
    with pytest.warns(UserWarning, match="beyond prediction_bound"):
        clipped = RFDSONRegressor(sketch_size=8, prediction_bound=1.0).fit(X, y)
    assert np.abs(clipped.predict(X)).max() <= 1.0
    with pytest.warns(UserWarning, match="beyond prediction_bound"):
        reg.partial_fit(X[:10], 2 * y[:10])


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
    with pytest.raises(ValueError, match="only one class"):
        RFDSONClassifier(sketch_size=2).fit(X, np.ones(50))
    with pytest.raises(ValueError, match="Unknown label type"):
        RFDSONClassifier(sketch_size=2).fit(X, np.linspace(0, 1, 50))
    clf = RFDSONClassifier(sketch_size=2).fit(X, y)
    with pytest.raises(ValueError, match="outside the classes"):
        clf.partial_fit(X, np.where(y > 0, 2.0, -1.0))
    for bad in (0, -3):
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
        with pytest.raises(ValueError, match="NaN|infinity"):
            RFDSONClassifier(sketch_size=2).fit(Xbad, y)
        with pytest.raises(ValueError, match="NaN|infinity"):
            RFDSONRegressor(sketch_size=2).fit(X, np.where(np.arange(50) == 3, value, 0.0))
        with pytest.raises(ValueError, match="NaN or Inf in rows 17"):
            RFDSONClassifier(sketch_size=2, block_rows=20).fit(da.from_array(Xbad, chunks=20), y)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        RFDSONClassifier(sketch_size=2).fit(X, y[:-1])
    with pytest.raises(ValueError, match="loss"):
        RFDSONClassifier(sketch_size=2, loss="cubic").fit(X, y)
    with pytest.raises(ValueError, match="'method' parameter of RFDSONClassifier must be a "
                                         "str among"):
        RFDSONClassifier(sketch_size=2, method="oja").fit(X, y)
    with pytest.raises(ValueError, match=r"'prediction_bound' parameter of RFDSONClassifier "
                                         r"must be a float in the range \(0.0, inf\)"):
        RFDSONClassifier(sketch_size=2, prediction_bound=0.0).fit(X, y)
    with pytest.raises(ValueError, match="eta"):
        RFDSONClassifier(sketch_size=2, eta=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="n_epochs"):
        RFDSONClassifier(sketch_size=2).fit(X, y, n_epochs=0)
    with pytest.raises(ValueError, match="X must be 2-D"):
        RFDSONClassifier(sketch_size=2).fit(X[0], y[:6])


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
