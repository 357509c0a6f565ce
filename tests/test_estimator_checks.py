"""scikit-learn's estimator checks for every exported estimator, at default parameters."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from tests.test_conventions import exported_estimators

ESTIMATORS = [cls() for cls in exported_estimators()]


def test_every_estimator_is_checked():
    assert len(ESTIMATORS) >= 7


@parametrize_with_checks(ESTIMATORS)
def test_scikit_learn_conventions(estimator, check):
    check(estimator)
