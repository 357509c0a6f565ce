"""Every exported estimator as a scikit-learn and Dask citizen: clone, pickle and
model selection with a live distributed Client; every input kind fit accepts;
predict / transform / score validating exactly as fit."""

import pickle

import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import zarr
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import dasketch
import dasketch.linear_model
from dasketch.linear_model import PWSGDRegressor, SketchLstsqRegressor


def exported_estimators():
    """Every estimator class among the public names of the package."""
    classes = set()
    for module in (dasketch, dasketch.linear_model):
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, type) and issubclass(obj, BaseEstimator):
                classes.add(obj)
    return sorted(classes, key=lambda c: c.__name__)


ESTIMATORS = exported_estimators()
OUTPUT_METHODS = ("predict", "transform", "decision_function", "predict_proba",
                  "score_samples")


def make(cls, **params):
    est = cls(**params)
    if "random_state" in est.get_params():
        est.set_params(random_state=0)
    return est


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((160, 4))
    y_reg = X @ np.array([1.0, -2.0, 0.5, 1.5]) + 0.1 * rng.standard_normal(160)
    y_clf = (X[:, 0] - X[:, 1] > 0).astype(int)
    return X, y_reg, y_clf


def target(est, data):
    _, y_reg, y_clf = data
    if is_classifier(est):
        return y_clf
    return y_reg if is_regressor(est) else None


def outputs(est, X):
    """What the fitted estimator says about X, method by method, computed."""
    out = {}
    for method in OUTPUT_METHODS:
        if hasattr(est, method):
            value = getattr(est, method)(X)
            out[method] = np.asarray(value.compute() if hasattr(value, "compute") else value)
    return out


def assert_same_outputs(a, b, rtol=1e-7):
    assert a.keys() == b.keys()
    for method in a:
        scale = np.abs(b[method]).max() if b[method].dtype.kind == "f" else 1.0
        np.testing.assert_allclose(a[method], b[method], rtol=rtol, atol=rtol * scale,
                                   err_msg=method)


def test_every_estimator_is_found():
    names = {cls.__name__ for cls in ESTIMATORS}
    assert {"SketchPCA", "PWSGDRegressor", "SketchLstsqRegressor", "RFDSONClassifier",
            "DualRandomProjectionRegressor"} <= names


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_clone_pickle_and_model_selection_with_a_live_client(cls, data, cluster_client):
    from distributed import get_task_stream

    X, _, _ = data
    est = make(cls)
    y = target(est, data)
    grid = ({"random_state": [0, 1]} if "random_state" in est.get_params()
            else {"n_components": [1, 2]})
    with cluster_client.as_current():
        with get_task_stream(cluster_client) as stream:  # Dask input runs on the client
            fitted = clone(est).fit(da.from_array(X, chunks=50), y)
        assert stream.data, "the fit did not run on the current distributed scheduler"
        assert not hasattr(clone(fitted), "n_features_in_")
        restored = pickle.loads(pickle.dumps(fitted))
        assert_same_outputs(outputs(restored, X), outputs(fitted, X), rtol=0)
        search = GridSearchCV(est, grid, cv=2).fit(X, y)
        assert np.isfinite(search.best_score_)
        scores = cross_val_score(make_pipeline(StandardScaler(), est), X, y, cv=2)
        assert np.all(np.isfinite(scores))


def _zarr_inputs(X, tmp_path):
    directory = str(tmp_path / "X.zarr")
    zarr.create_array(directory, data=X, chunks=(50, X.shape[1]))
    zip_path = str(tmp_path / "X.zip")
    store = zarr.storage.ZipStore(zip_path, mode="w")
    zarr.create_array(store, data=X, chunks=(70, X.shape[1]))
    store.close()
    return {"zarr path": directory, "zarr.Array": zarr.open_array(directory, mode="r"),
            "zip store": zip_path, "dask": da.from_array(X, chunks=45)}


SPARSE_FORMATS = ("csr", "csc", "coo", "bsr", "lil", "dok", "dia")


@pytest.mark.filterwarnings(
    "ignore:Constructing a DIA matrix:scipy.sparse.SparseEfficiencyWarning")
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
@pytest.mark.heavy
def test_every_input_kind_gives_the_numpy_result(cls, data, tmp_path):
    pd = pytest.importorskip("pandas")
    X, _, _ = data
    est = make(cls)
    y = target(est, data)
    reference = outputs(clone(est).fit(X, y), X)

    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    fitted = clone(est).fit(frame, y)
    assert list(fitted.feature_names_in_) == list(frame.columns)
    assert_same_outputs(outputs(fitted, frame), reference)

    for kind, X_kind in _zarr_inputs(X, tmp_path).items():
        fitted = clone(est).fit(X_kind, y)
        assert fitted.n_features_in_ == 4 and not hasattr(fitted, "feature_names_in_"), kind
        assert_same_outputs(outputs(fitted, X_kind), reference)

    sparse_X = X * (np.abs(X) > 0.5)
    sparse_reference = outputs(clone(est).fit(sparse_X, y), sparse_X)
    for fmt in SPARSE_FORMATS:
        for container in (scipy.sparse.csr_matrix, scipy.sparse.csr_array):
            X_sparse = container(sparse_X).asformat(fmt)
            fitted = clone(est).fit(X_sparse, y)
            assert_same_outputs(outputs(fitted, X_sparse), sparse_reference, rtol=1e-6)


def _calls(est, X, y):
    """Every method that reads X after fit, as ``(name, call)``."""
    calls = [(m, lambda X, m=m: getattr(est, m)(X)) for m in OUTPUT_METHODS if hasattr(est, m)]
    calls.append(("score", lambda X: est.score(X, y)))
    return calls


@pytest.mark.parametrize("out_of_core", [False, True], ids=["in_memory", "dask"])
@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_methods_after_fit_validate_x_as_fit_does(cls, out_of_core, data):
    X, _, _ = data
    est = make(cls)
    y = target(est, data)
    est.fit(X, y)
    as_input = (lambda A: da.from_array(A, chunks=50)) if out_of_core else (lambda A: A)
    with_nan = X.copy()
    with_nan[3, 1] = np.nan
    for _name, call in _calls(est, X, y):
        with pytest.raises(ValueError, match=r"\bX\b.*NaN"):
            # out of core, the values are checked when the blocks are read, as in fit
            np.asarray(call(as_input(with_nan)))
        with pytest.raises(ValueError, match=r"\bX\b.*1-D|Reshape"):
            call(as_input(X[:, 0]))
        with pytest.raises(ValueError, match="X has 3 features"):
            call(as_input(X[:, :3]))


@pytest.mark.parametrize("cls", [SketchLstsqRegressor, PWSGDRegressor, dasketch.SketchPCA],
                         ids=lambda c: c.__name__)
def test_float32_stays_float32(cls, data):
    X, y, _ = data
    learned = "components_" if cls is dasketch.SketchPCA else "coef_"
    for dtype in (np.float32, np.float64):
        est = make(cls).fit(X.astype(dtype), y)
        assert getattr(est, learned).dtype == dtype
        output = est.transform if hasattr(est, "transform") else est.predict
        assert output(X.astype(dtype)).dtype == dtype
        assert output(da.from_array(X.astype(dtype), chunks=50)).dtype == dtype


@pytest.mark.parametrize("cls", [SketchLstsqRegressor, PWSGDRegressor],
                         ids=lambda c: c.__name__)
def test_intercept_after_standard_scaler(cls):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((3000, 6)) * [1, 5, 0.2, 3, 1, 10] + 4.0
    y = X @ rng.standard_normal(6) + 0.5 * rng.standard_normal(3000)
    y = y - y.mean() + 10.0  # targets of mean 10
    exact = make_pipeline(StandardScaler(), LinearRegression()).fit(X, y).score(X, y)
    sketched = make_pipeline(StandardScaler(), make(cls)).fit(X, y)
    assert sketched.score(X, y) == pytest.approx(exact, abs=1e-3)
    assert sketched[-1].intercept_ == pytest.approx(10.0, abs=0.1)
