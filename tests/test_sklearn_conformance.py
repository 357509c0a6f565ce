"""scikit-learn's own test files for the estimators dasketch replaces, run on the
installed scikit-learn through the shims of tests/sklearn_conformance (see
suites.py for what each suite replaces, skips and expects to fail, and why)."""

import inspect

import pytest
import sklearn.decomposition

from tests.sklearn_conformance import shims
from tests.sklearn_conformance.runner import run_suite
from tests.sklearn_conformance.suites import SUITES


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=() if suite.fast else pytest.mark.slow)
    for name, suite in SUITES.items()])
def test_scikit_learn_suite_passes_through_the_shims(name):
    result = run_suite(name)
    assert result.failures() == {}, result.output[-3000:]
    # every test that ran a shim fitted dasketch, and most tests did
    assert result.count(reached=True) >= 0.5 * len(result.records)
    # every exception of the table still matches a test and, for xfail, still fails
    reasons = set(result.reasons("skipped")) | set(result.reasons("xfailed"))
    stale = [pattern for pattern, _, reason in SUITES[name].exceptions if reason not in reasons]
    assert stale == []


@pytest.mark.parametrize("shim,original", [(shims.PCA, sklearn.decomposition.PCA),
                                           (shims.IncrementalPCA,
                                            sklearn.decomposition.IncrementalPCA)])
def test_shims_take_the_parameters_of_the_scikit_learn_class(shim, original):
    assert inspect.signature(shim.__init__) == inspect.signature(original.__init__)
    assert shim().get_params() == original().get_params()
    assert shim.__name__ == original.__name__
