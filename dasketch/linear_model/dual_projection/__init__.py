"""Dual random projection (Zhang, Mahdavi, Jin, Yang, Zhu, COLT 2013) and past it.

:func:`dual_random_projection` (module :mod:`.solve`) is the functional form,
its result :class:`DualRandomProjectionResult` (:mod:`.result`), the rules of
its arguments and its convergence warning (:mod:`.checks`);
:class:`DualRandomProjectionRegressor` and :class:`DualRandomProjectionClassifier`
(:mod:`.estimators`, their shared base in :mod:`.estimator_base`) are thin
scikit-learn estimators on top. The losses
(:mod:`.losses`), the blocked passes over X (:mod:`.passes`), the preconditioner
built from the projection (:mod:`.preconditioner`) and its growth
(:mod:`.growth`), the preconditioned solvers of the full problem (:mod:`.solvers`,
:mod:`.newton`), the paper's Algorithms 1 and 2
(:mod:`.paper`), and the l1 and elastic-net penalties (:mod:`.proximal`, its
pass :mod:`.l1_passes` and certificate :mod:`.duality_gap`) live in their own
modules. Names are imported on first use, so a
worker unpickling a block task loads only the modules it runs.
"""

from dasketch.utils.lazy import lazy_attributes

_PUBLIC = {
    "DualRandomProjectionClassifier": "dasketch.linear_model.dual_projection.estimators",
    "DualRandomProjectionRegressor": "dasketch.linear_model.dual_projection.estimators",
    "DualRandomProjectionResult": "dasketch.linear_model.dual_projection.result",
    "dual_random_projection": "dasketch.linear_model.dual_projection.solve",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)
