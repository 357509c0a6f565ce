"""scikit-learn's estimator checks for every exported estimator, at default parameters."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from dasketch import RFDSONClassifier, RFDSONRegressor, SketchPCA
from dasketch.linear_model import (DualRandomProjectionClassifier,
                                   DualRandomProjectionRegressor, PWSGDRegressor,
                                   SketchLstsqRegressor)

ESTIMATORS = [
    DualRandomProjectionClassifier(),
    DualRandomProjectionRegressor(),
    PWSGDRegressor(),
    RFDSONClassifier(),
    RFDSONRegressor(),
    SketchLstsqRegressor(),
    SketchPCA(),
]


@parametrize_with_checks(ESTIMATORS)
def test_scikit_learn_conventions(estimator, check):
    check(estimator)
