"""Linear models solved through random projections and sketches."""

from dasketch.linear_model.dual_random_projection import (
    DualRandomProjectionClassifier, DualRandomProjectionRegressor)
from dasketch.linear_model.lstsq import LstsqResult, SketchLstsqRegressor, sketch_lstsq
from dasketch.linear_model.preconditioning import (
    SketchPreconditioner, leverage_scores, sketch_precondition)
from dasketch.linear_model.pwsgd import PWSGDRegressor

__all__ = ["DualRandomProjectionClassifier", "DualRandomProjectionRegressor",
           "SketchPreconditioner", "leverage_scores", "sketch_precondition",
           "LstsqResult", "PWSGDRegressor", "SketchLstsqRegressor", "sketch_lstsq"]
