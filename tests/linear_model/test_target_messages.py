"""A missing or non-finite target is reported as the target's, not the data's."""

import numpy as np
import pytest

from dasketch.linear_model import (
    DualRandomProjectionRegressor,
    PWSGDRegressor,
    RFDSONRegressor,
    SketchLstsqRegressor,
)


@pytest.mark.parametrize("estimator", [DualRandomProjectionRegressor, PWSGDRegressor,
                                       RFDSONRegressor, SketchLstsqRegressor])
@pytest.mark.parametrize("bad", [None, np.nan, np.inf])
def test_a_bad_target_names_y(estimator, bad):
    X = np.random.default_rng(0).standard_normal((60, 3))
    y = list(X @ [1.0, -2.0, 0.5])
    y[7] = bad
    with pytest.raises(ValueError, match=r"^(Input )?y contains"):
        estimator().fit(X, y)
