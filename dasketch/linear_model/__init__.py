"""Linear models solved through random projections and sketches.

The public names are imported on first use (PEP 562), so importing one model
(e.g. on a worker) does not load the others.
"""

from dasketch.utils.lazy import lazy_attributes

_PUBLIC = {
    "DualRandomProjectionClassifier": "dasketch.linear_model.dual_projection.estimators",
    "DualRandomProjectionRegressor": "dasketch.linear_model.dual_projection.estimators",
    "DualRandomProjectionResult": "dasketch.linear_model.dual_projection.result",
    "LstsqResult": "dasketch.linear_model.lstsq_solver",
    "PWSGDRegressor": "dasketch.linear_model.pwsgd",
    "RFDSONClassifier": "dasketch.linear_model.rfd_son",
    "RFDSONRegressor": "dasketch.linear_model.rfd_son_regressor",
    "SketchLstsqRegressor": "dasketch.linear_model.lstsq",
    "SketchPreconditioner": "dasketch.linear_model.preconditioner",
    "dual_random_projection": "dasketch.linear_model.dual_projection.solve",
    "leverage_scores": "dasketch.linear_model.preconditioner",
    "sketch_lstsq": "dasketch.linear_model.lstsq_solver",
    "sketch_precondition": "dasketch.linear_model.preconditioning",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)
