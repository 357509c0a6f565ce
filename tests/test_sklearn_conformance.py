"""scikit-learn's own test files for the estimators dasketch replaces, run on the
installed scikit-learn through the shims of tests/sklearn_conformance (see
suites.py for what each suite replaces, skips and expects to fail, and why)."""

import inspect

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
