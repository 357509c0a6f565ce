"""Dual random projection on blocks of another array library than numpy.

``array_api_strict`` (the array API standard's strictest implementation) stands
for CuPy: the fit multiplies the blocks in their own namespace, keeps the
projection ``X_hat`` there, and gives the numpy path's coefficients and
certificate to rounding, on the host; the estimators read such ``X`` (and
``y``) without converting them and predict on the host, or in ``X``'s namespace
under scikit-learn's ``array_api_dispatch``.
"""

import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import sklearn
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import as_row_blocks, compute, run_eagerly
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    dual_random_projection,
)
from dasketch.linear_model.dual_projection.passes import projection_pass

xps = pytest.importorskip("array_api_strict")

ROWS = 60
FIT = dict(sketch_size=10, random_state=0, block_rows=ROWS, tol=1e-8)


def _problem(n=240, d=30, seed=0):
    """A spectrum the 10 columns of the projection miss: the fit grows it."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.linspace(3, 1, d)
    y = X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)
    return X, y


def _dask_of_strict_blocks(X, rows=ROWS):
    """A Dask array whose (computed) blocks are array_api_strict arrays: Dask
    cannot make such arrays from numpy itself (no rechunk, no meta)."""
    name = "strict-drp-" + dask.base.tokenize(X, rows)
    starts = range(0, X.shape[0], rows)
    graph = {(name, i, 0): xps.asarray(X[s:s + rows]) for i, s in enumerate(starts)}
    chunks = (tuple(min(rows, X.shape[0] - s) for s in starts), (X.shape[1],))
    return da.Array(graph, name, chunks, meta=xps.asarray(np.empty((0, 0))))


def _on_device(values):
    """``values`` on array_api_strict's second device, which numpy cannot read
    (``numpy.asarray`` raises; ``numpy.from_dlpack`` copies), as a GPU's arrays."""
    return xps.asarray(values, device=xps.Device("device1"))


def _inputs(X):
    return {"in-memory": xps.asarray(X), "dask": _dask_of_strict_blocks(X),
            "on a device": _on_device(X)}


def _agree(ours, reference, scale):
    assert isinstance(ours.coef, np.ndarray)
    assert np.abs(ours.coef - reference.coef).max() <= 1e-9 * scale
    assert ours.intercept == pytest.approx(reference.intercept, rel=1e-9, abs=1e-9 * scale)
    assert ours.optimality_residual == pytest.approx(reference.optimality_residual,
                                                     rel=0.5, abs=1e-12)
    assert ours.converged and ours.coef_error_bound <= 1e-8 * np.linalg.norm(ours.coef)
    assert (ours.n_passes, ours.n_components) == (reference.n_passes, reference.n_components)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("kind", ["in-memory", "dask", "on a device"])
def test_fit_on_strict_blocks_equals_the_numpy_fit_to_rounding(loss, kind):
    X, y = _problem()
    targets = y if loss == "squared" else np.where(y > 0, 1.0, -1.0)
    reference = dual_random_projection(X, targets, loss=loss, **FIT)
    ours = dual_random_projection(_inputs(X)[kind], targets, loss=loss, **FIT)
    assert reference.n_components > FIT["sketch_size"]     # the growth pass ran too
    _agree(ours, reference, np.linalg.norm(reference.coef))


@pytest.mark.parametrize("solver", ["cg", "paper"])
def test_dask_of_strict_blocks_on_the_default_scheduler(solver):
    X, y = _problem(seed=1)
    labels = np.where(y > 0, 1.0, -1.0)
    options = dict(FIT, loss="logistic", solver=solver)
    if solver == "paper":   # three rounds of Algorithm 2, not converged: agreement only
        options.update(loss="squared", max_iter=3)
        labels = y
    with dask.config.set({"dasketch.eager": False}), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)   # Dask graphs, threaded scheduler
        reference = dual_random_projection(X, labels, **options)
        ours = dual_random_projection(_dask_of_strict_blocks(X), labels, **options)
    assert ours.converged == reference.converged == (solver == "cg")
    scale = np.linalg.norm(reference.coef)
    assert np.abs(ours.coef - reference.coef).max() <= 1e-9 * scale
    assert ours.optimality_residual == pytest.approx(reference.optimality_residual, rel=1e-6)
    assert ours.n_passes == reference.n_passes


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "dask"])
def test_the_projection_stays_in_the_library_of_the_blocks(lazy):
    X, y = _problem(n=120, d=8)
    X[3] *= 1e-170     # its squares underflow: its norm is summed again, scaled
    blocks = as_row_blocks(_inputs(X)["dask" if lazy else "on a device"], block_rows=ROWS,
                           array_libraries="any")
    blocks = blocks if lazy else run_eagerly(blocks, threaded=True)
    options = dict(b0=np.zeros(1), loss="squared", smoothing=1.0, split_every=None, client=None)
    xhat, *_, row_norms = projection_pass(blocks, y[:, None], np.ones(120), 4, 0, **options)
    pieces = [xhat] if not lazy else [compute(chunk)[0] for chunk in xhat.to_delayed().ravel()]
    assert all(type(piece) is type(xps.asarray(0.0)) for piece in pieces)
    numpy_xhat, *_, numpy_norms = projection_pass(as_row_blocks(X, block_rows=ROWS), y[:, None],
                                                  np.ones(120), 4, 0, **options)
    ours = np.concatenate([np.from_dlpack(piece) for piece in pieces])
    assert np.allclose(ours, np.asarray(numpy_xhat), rtol=1e-12, atol=1e-12)
    assert np.allclose(row_norms, numpy_norms, rtol=1e-12)


@pytest.mark.parametrize("kind", ["on a device", "dask"])
def test_estimators_read_strict_inputs_and_predict_on_the_host(kind):
    X, y = _problem(seed=2)
    labels = np.where(y > 0, "yes", "no")
    data = _inputs(X)[kind]
    regressor = DualRandomProjectionRegressor(**FIT).fit(data, _on_device(y))
    reference = DualRandomProjectionRegressor(**FIT).fit(X, y)
    assert isinstance(regressor.coef_, np.ndarray)
    assert np.abs(regressor.coef_ - reference.coef_).max() <= 1e-9 * np.abs(
        reference.coef_).max()
    predicted = regressor.predict(data)
    assert isinstance(predicted, da.Array if kind == "dask" else np.ndarray)
    assert np.allclose(np.asarray(predicted), reference.predict(X), rtol=1e-9, atol=1e-9)
    classifier = DualRandomProjectionClassifier(**FIT).fit(data, labels)
    expected = DualRandomProjectionClassifier(**FIT).fit(X, labels)
    assert np.abs(classifier.coef_ - expected.coef_).max() <= 1e-9 * np.abs(
        expected.coef_).max()
    assert np.array_equal(np.asarray(classifier.predict(data)), expected.predict(X))
    assert np.allclose(classifier.predict_proba(data), expected.predict_proba(X), atol=1e-9)


@pytest.mark.parametrize("kind", ["on a device", "dask"])
def test_the_multinomial_classifier_on_strict_blocks_equals_the_numpy_fit(kind):
    X, y = _problem(seed=7)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))     # three classes
    options = dict(FIT, tol=1e-6)
    ours = DualRandomProjectionClassifier(**options).fit(_inputs(X)[kind], labels)
    reference = DualRandomProjectionClassifier(**options).fit(X, labels)
    assert ours.multi_class_ == "multinomial" and isinstance(ours.coef_, np.ndarray)
    # the same iterates to rounding, and both within their certified bounds
    gap = np.linalg.norm(ours.coef_ - reference.coef_)
    assert gap <= min(1e-7 * np.linalg.norm(reference.coef_),
                      ours.coef_error_bound_ + reference.coef_error_bound_)
    assert ours.coef_error_bound_ <= 1e-6 * np.linalg.norm(ours.coef_)
    assert np.allclose(np.asarray(ours.predict_proba(_inputs(X)[kind])),
                       reference.predict_proba(X), atol=1e-7)


def test_unpenalised_logistic_regression_on_strict_blocks_equals_the_numpy_fit():
    X, y = _problem(seed=8)
    noisy = y + 3 * np.random.default_rng(1).standard_normal(y.size)    # not separable
    labels = np.where(noisy > 0, 1.0, -1.0)
    options = dict(FIT, loss="logistic", alpha=0.0)
    reference = dual_random_projection(X, labels, **options)
    ours = dual_random_projection(_on_device(X), labels, **options)
    assert ours.converged and ours.optimality_residual <= 1e-8
    assert np.abs(ours.coef - reference.coef).max() <= 1e-9 * np.abs(reference.coef).max()


def test_float32_strict_input_gives_a_float32_model_and_predictions():
    X, y = _problem(seed=3)
    X32 = X.astype(np.float32)
    ours = DualRandomProjectionRegressor(**FIT).fit(xps.asarray(X32), y)
    reference = DualRandomProjectionRegressor(**FIT).fit(X32, y)
    assert ours.coef_.dtype == np.float32 and ours.predict(xps.asarray(X32)).dtype == np.float32
    assert np.allclose(ours.coef_, reference.coef_, rtol=1e-6, atol=1e-6)


def test_predictions_follow_array_api_dispatch(monkeypatch):
    X, y = _problem(seed=4)
    data = _on_device(X)
    regressor = DualRandomProjectionRegressor(**FIT).fit(data, y)
    classifier = DualRandomProjectionClassifier(**FIT).fit(data, (y > 0).astype(np.int64))
    # what sklearn.config_context(array_api_dispatch=True) sets, without the check that
    # scipy was imported with SCIPY_ARRAY_API=1 (which these predictions do not use)
    monkeypatch.setitem(sklearn._config._get_threadlocal_config(), "array_api_dispatch", True)
    strict = type(data)
    assert isinstance(regressor.predict(data), strict)
    assert regressor.predict(data).device == data.device
    assert isinstance(classifier.predict(data), strict)
    assert isinstance(classifier.predict_proba(data), strict)
    assert isinstance(regressor.coef_, np.ndarray)
    monkeypatch.undo()
    assert isinstance(regressor.predict(data), np.ndarray)


@pytest.mark.parametrize("options", [dict(penalty="l1"), dict(positive=True), dict(alpha=0.0)],
                         ids=["l1", "positive", "alpha=0"])
def test_options_without_a_library_path_are_refused_before_fitting(options):
    X, y = _problem(n=120, d=8)
    estimator = DualRandomProjectionRegressor(**FIT, **options)
    with pytest.raises(TypeError, match="another library than numpy.*copy X to the host"):
        estimator.fit(xps.asarray(X), y)
    assert not hasattr(estimator, "coef_")
