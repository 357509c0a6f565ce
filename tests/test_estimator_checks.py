"""scikit-learn's estimator checks for every exported estimator, at default parameters."""

import pytest
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from tests.test_conventions import exported_estimators

ESTIMATORS = [cls() for cls in exported_estimators()]

# Checks an estimator cannot meet by nature, with the reason.
_PWSGD_WEIGHTS = ("pwSGD is stochastic: a weighted fit sketches the rows w_i^(1/p) x_i, a "
                  "different random draw from the sketch of the repeated rows, so the two "
                  "fits use different preconditioners, hence different draws and steps "
                  "(given one preconditioner, with the copies adjacent, the draws and "
                  "steps are equal: tests/linear_model/test_pwsgd_weights.py); it also "
                  "needs n_samples > n_features, and the check's data are 15 x 30")
_ONLINE_WEIGHTS = ("RFD-SON is an online learner: a weight scales one example's gradient "
                   "in one step, as scikit-learn's SGD estimators do, while a repeated row "
                   "takes several steps from different iterates, so the two differ (weight "
                   "1 equals no weight and weight 0 equals dropping the row, exactly: "
                   "tests/linear_model/test_rfd_son_weights.py)")
EXPECTED_FAILURES = {
    "PWSGDRegressor": {"check_sample_weight_equivalence_on_dense_data": _PWSGD_WEIGHTS,
                       "check_sample_weight_equivalence_on_sparse_data": _PWSGD_WEIGHTS},
    **{name: {"check_sample_weight_equivalence_on_dense_data": _ONLINE_WEIGHTS,
              "check_sample_weight_equivalence_on_sparse_data": _ONLINE_WEIGHTS}
       for name in ("RFDSONClassifier", "RFDSONRegressor")},
}


def _expected_failures(estimator):
    return EXPECTED_FAILURES.get(type(estimator).__name__, {})


def test_every_estimator_is_checked():
    assert len(ESTIMATORS) >= 7


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_failures)
def test_scikit_learn_conventions(estimator, check):
    check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_parameter_constraints_cover_every_parameter_and_are_enforced(estimator):
    """scikit-learn's check_param_validation (not among the checks above): every
    parameter has a constraint in ``_parameter_constraints``, and a value of a bad
    type or out of range makes fit raise InvalidParameterError naming it."""
    check_param_validation(type(estimator).__name__, estimator)
