"""Renamed names keep working for two releases with a FutureWarning naming the
new one (scikit-learn's deprecation cycle), and give the same objects."""

import importlib
import inspect
import pickle

import numpy as np
import pytest

from dasketch.genotype import GenotypePCA
from dasketch.genotype import pca as genotype_pca
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    PWSGDRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
)

RENAMED_CONSTANTS = [
    ("dasketch.kernels.sketch_checks", "METHODS", "SKETCH_METHODS"),
    ("dasketch.kernels.frequent_directions", "METHODS", "SKETCH_METHODS"),
    ("dasketch.kernels.shrink", "UPDATES", "SHRINK_UPDATES"),
    ("dasketch.kernels.online_newton", "METHODS", "ONLINE_METHODS"),
    ("dasketch.kernels.online_newton", "LOSSES", "ONLINE_LOSSES"),
    ("dasketch.kernels.online_newton", "UPDATES", "ONLINE_UPDATES"),
    ("dasketch.kernels.column_scaling", "SCALERS", "SCALINGS"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED_CONSTANTS)
def test_a_renamed_constant_is_served_under_its_old_name_with_a_warning(module, old, new):
    module = importlib.import_module(module)
    with pytest.warns(FutureWarning, match=f"{old} was renamed {new}"):
        assert getattr(module, old) is getattr(module, new)
    with pytest.raises(AttributeError, match="no attribute 'NOT_A_NAME'"):
        module.NOT_A_NAME  # noqa: B018


def test_each_new_constant_name_names_its_own_list():
    lists = {new: getattr(importlib.import_module(module), new)
             for module, _, new in RENAMED_CONSTANTS}
    assert len(set(lists.values())) == len(lists) == 6


def _genotypes():
    rng = np.random.default_rng(0)
    return rng.binomial(2, rng.uniform(0.1, 0.9, 30), size=(80, 30)).astype(np.int8)


def test_genotype_scaler_is_the_former_name_of_scaling():
    G = _genotypes()
    expected = GenotypePCA(3, 12, scaling="standard", random_state=0).fit(G)
    with pytest.warns(FutureWarning, match="scaler was renamed scaling"):
        old = GenotypePCA(3, 12, scaler="standard", random_state=0).fit(G)
    np.testing.assert_allclose(old.scaler_scale_, expected.scaler_scale_)
    np.testing.assert_allclose(old.components_, expected.components_)
    with pytest.warns(FutureWarning, match="scaler was renamed scaling"):
        coords, _ = genotype_pca(G.T, 3, scaler="standard", sketch_size=12, random_state=0)
    np.testing.assert_allclose(coords, expected.transform(G))
    with pytest.raises(ValueError, match="both scaler='standard' and scaling=None"):
        GenotypePCA(3, scaler="standard", scaling=None).fit(G)


def test_a_genotype_pca_pickled_with_scaler_loads_with_scaling_and_transforms():
    G = _genotypes()
    model = GenotypePCA(3, 12, scaling="standard", random_state=0).fit(G)
    # the state a GenotypePCA had before the rename: scaler set, scaling None
    old = GenotypePCA.__new__(GenotypePCA)
    old.__dict__.update({**model.__dict__, "scaler": "standard", "scaling": None})
    old = pickle.loads(pickle.dumps(old))
    assert old.get_params()["scaling"] == "standard" and old.scaler == "deprecated"
    np.testing.assert_allclose(old.transform(G), model.transform(G))


@pytest.mark.parametrize(("cls", "args", "kwargs"), [
    (SketchLstsqRegressor, (False, 1e-8), {"fit_intercept": False, "tol": 1e-8}),
    (PWSGDRegressor, (1, False), {"p": 1, "fit_intercept": False}),
])
def test_positional_parameters_are_served_with_a_warning(cls, args, kwargs):
    with pytest.warns(FutureWarning, match="as keyword args"):
        positional = cls(*args)
    assert positional.get_params() == cls(**kwargs).get_params()
    assert "fit_intercept" in [name for name, parameter in
                               inspect.signature(cls).parameters.items()
                               if parameter.kind is parameter.KEYWORD_ONLY]


def _ridge_problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 30))
    return X, X @ rng.standard_normal(30) + 0.1 * rng.standard_normal(60)


def test_drp_n_components_is_the_former_name_of_sketch_size():
    X, y = _ridge_problem()
    expected = DualRandomProjectionRegressor(sketch_size=12, random_state=0).fit(X, y)
    with pytest.warns(FutureWarning, match="n_components was renamed sketch_size"):
        old = DualRandomProjectionRegressor(n_components=12, random_state=0).fit(X, y)
    assert old.sketch_size_ == expected.sketch_size_
    np.testing.assert_array_equal(old.coef_, expected.coef_)
    with pytest.warns(FutureWarning, match="n_components_ was renamed sketch_size_"):
        assert old.n_components_ == old.sketch_size_
    with pytest.warns(FutureWarning, match="n_components was renamed sketch_size"):
        res = dual_random_projection(X, y, n_components=12, random_state=0)
    np.testing.assert_array_equal(res.coef, expected.coef_)
    with pytest.raises(ValueError, match="both n_components=12 and sketch_size=20"):
        DualRandomProjectionClassifier(n_components=12, sketch_size=20).fit(X, y > 0)
    with pytest.raises(ValueError, match="both n_components=12 and sketch_size=20"):
        dual_random_projection(X, y, n_components=12, sketch_size=20)


@pytest.mark.parametrize("cls", [DualRandomProjectionRegressor, DualRandomProjectionClassifier])
def test_a_drp_estimator_pickled_with_n_components_loads_and_predicts(cls):
    X, y = _ridge_problem()
    y = y > 0 if cls is DualRandomProjectionClassifier else y
    model = cls(sketch_size=12, random_state=0).fit(X, y)
    # the state of an estimator fitted before the rename: n_components, n_components_
    state = {key: value for key, value in model.__dict__.items()
             if key not in ("sketch_size", "sketch_size_")}
    old = cls.__new__(cls)
    old.__dict__.update({**state, "n_components": 12, "n_components_": 12})
    restored = pickle.loads(pickle.dumps(old))
    np.testing.assert_array_equal(restored.predict(X), model.predict(X))
    assert restored.get_params() == model.get_params()
    assert restored.sketch_size_ == 12 and "n_components_" not in vars(restored)
