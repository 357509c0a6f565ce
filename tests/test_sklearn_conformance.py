"""scikit-learn's (and dask-ml's) own test files for the estimators dasketch
replaces, run on the installed library through the shims of
tests/sklearn_conformance (see suites.py for what each suite replaces, skips and
expects to fail, and why)."""

import inspect

import numpy as np
import pytest
import sklearn.decomposition
import sklearn.linear_model

from tests.sklearn_conformance import shims
from tests.sklearn_conformance.runner import run_suite
from tests.sklearn_conformance.suites import SUITES


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=() if suite.fast else pytest.mark.slow)
    for name, suite in SUITES.items()])
@pytest.mark.heavy
def test_scikit_learn_suite_passes_through_the_shims(name):
    test_file, why = SUITES[name].location()
    if test_file is None:
        pytest.skip(f"suite {name}: {why}")
    result = run_suite(name)
    assert result.failures() == {}, result.output[-3000:]
    # the shims are reached, and the tests that reach dasketch pass
    assert result.count(reached=True) >= SUITES[name].min_reach * len(result.records)
    assert (result.pass_rate() or 0.0) >= SUITES[name].min_pass_rate
    # every exception of the table still matches a test and, for xfail, still fails
    reasons = set(result.reasons("skipped")) | set(result.reasons("xfailed"))
    stale = [pattern for pattern, _, reason in SUITES[name].exceptions if reason not in reasons]
    assert stale == []


@pytest.mark.parametrize("shim,original", [
    (shims.PCA, sklearn.decomposition.PCA),
    (shims.IncrementalPCA, sklearn.decomposition.IncrementalPCA),
    *[(getattr(shims, name), getattr(sklearn.linear_model, name))
      for name in ("Ridge", "RidgeClassifier", "LogisticRegression", "LinearRegression",
                   "Lasso", "ElasticNet")]])
def test_shims_take_the_parameters_of_the_scikit_learn_class(shim, original):
    assert inspect.signature(shim.__init__) == inspect.signature(original.__init__)
    assert shim().get_params() == original().get_params()
    assert shim.__name__ == original.__name__


@pytest.mark.parametrize("name", ["LogisticRegression", "LinearRegression", "PoissonRegression"])
def test_dask_ml_shims_take_the_parameters_of_the_dask_ml_class(name):
    original = getattr(pytest.importorskip(
        "dask_ml.linear_model", reason="dask-ml is not installed (pip install dask-ml)"), name)
    from tests.sklearn_conformance import dask_ml_shims

    shim = getattr(dask_ml_shims, name)
    assert inspect.signature(shim.__init__) == inspect.signature(original.__init__)
    assert shim().get_params() == original().get_params()


@pytest.mark.parametrize("name,solver,C", [("LogisticRegression", "lbfgs", 0.5),
                                           ("LinearRegression", "admm", 0.01),
                                           ("LogisticRegression", "newton", 0.5)])
def test_dask_ml_shims_minimise_dask_glms_objective(name, solver, C):
    """At the shim's coefficients the gradient of dask-glm's objective vanishes:
    its loss (the sum of squares without a half), ``(1 / C) ||beta||^2 / 2``
    with the intercept in ``beta``, and no penalty for the newton solver."""
    pytest.importorskip("dask_ml", reason="dask-ml is not installed (pip install dask-ml)")
    from dask_glm.families import Logistic, Normal
    from dask_ml.datasets import make_classification, make_regression

    from tests.sklearn_conformance import dask_ml_shims

    make, family = (make_classification, Logistic) if name == "LogisticRegression" \
        else (make_regression, Normal)
    X, y = make(n_samples=300, n_features=6, chunks=100, random_state=0)
    model = getattr(dask_ml_shims, name)(C=C, solver=solver).fit(X, y)
    X1, y = np.c_[np.asarray(X), np.ones(X.shape[0])], np.asarray(y, dtype=float)
    beta = np.r_[np.ravel(model.coef_), np.ravel(model.intercept_)]
    penalty = 0.0 if solver == "newton" else 1.0 / C
    gradient = family.gradient(X1 @ beta, X1, y) + penalty * beta
    scale = np.linalg.norm(family.gradient(np.zeros(len(y)), X1, y))
    assert np.linalg.norm(gradient) <= 1e-6 * scale
