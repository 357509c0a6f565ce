"""Drop-in stand-ins for dask-ml's generalised linear models, built on dasketch's.

:class:`dask_ml.linear_model.LogisticRegression` and ``LinearRegression``
(dask-glm's solvers) minimise ``L(beta) + (1 / C) R(beta)`` over
``beta = (w, b)``: the loss summed over the samples (the log loss, or
``||y - X beta||^2`` without a half), the regulariser
``R = ||.||_1``, ``||.||^2 / 2`` or ``r ||.||_1 + (1 - r) ||.||^2 / 2``
(``ElasticNet(weight=r)``, ``r = 0.5`` by default) applied to the intercept
too: dask-glm fits it as the coefficient of a column of ones. The shims solve
that same problem with dual random projection: the column of ones appended as
dask-ml appends it (:func:`dask_glm.utils.add_intercept`) and fitted with
``fit_intercept=False``, ``alpha = 1 / C`` for the log loss and ``1 / (2 C)``
for the squared one (dasketch halves the sum of squares), ``penalty`` and
``l1_ratio`` from the regulariser. dask-ml gives its ``"newton"`` and
``"gradient_descent"`` solvers no regulariser: there ``alpha = 0``. Otherwise
the solver is ignored, as are ``tol``, ``max_iter``, ``random_state`` and
the parameters dask-ml itself ignores: the fit is certified to ``tol=1e-10``
with an exact preconditioner. ``PoissonRegression`` is refused (dasketch has
no Poisson loss). ``coef_`` is one vector and ``intercept_`` a
number, as dask-ml's; ``predict`` is dasketch's: labels from ``classes_`` where
dask-ml returns booleans.

Fitting needs dask-ml (and with it dask-glm) installed; importing this module
does not.
"""

from dasketch.linear_model import DualRandomProjectionClassifier, DualRandomProjectionRegressor
from tests.sklearn_conformance.shims import _DRP, FITS, _keep, _Solving

SOLVERS = ("admm", "gradient_descent", "newton", "lbfgs", "proximal_grad")
UNPENALISED = ("gradient_descent", "newton")     # dask-ml passes them no regularizer
PENALTIES = {"l1": ("l1", 1.0), "l2": ("l2", 0.0), "elastic_net": ("elasticnet", None)}


class _GLM(_Solving):
    """dask-ml's ``_GLM`` parameters and fit, on dasketch's estimator."""

    _halves = 1.0   # dask-glm's loss over dasketch's
    n_components = "deprecated"     # dasketch's former name of sketch_size, unset

    def __init__(self, penalty="l2", dual=False, tol=1e-4, C=1.0, fit_intercept=True,
                 intercept_scaling=1.0, class_weight=None, random_state=None,
                 solver="admm", max_iter=100, multi_class="ovr", verbose=0,
                 warm_start=False, n_jobs=1, solver_kwargs=None):
        _keep(self, locals())

    def _penalty(self):
        """``(penalty, l1_ratio)`` of dasketch for dask-ml's ``penalty``, or refused."""
        from dask_glm.regularizers import Regularizer

        regularizer = self.penalty
        if isinstance(regularizer, str) and regularizer in PENALTIES:
            regularizer = Regularizer.get(regularizer)
        if not isinstance(regularizer, Regularizer) or regularizer.name not in PENALTIES:
            raise ValueError(f"penalty must be one of {sorted(PENALTIES)} or a dask-glm "
                             f"L1, L2 or ElasticNet regularizer, got {self.penalty!r}")
        name, l1_ratio = PENALTIES[regularizer.name]
        return name, regularizer.weight if l1_ratio is None else l1_ratio

    def fit(self, X, y=None):
        from dask_glm.utils import add_intercept

        if self.solver not in SOLVERS:
            raise ValueError(f"'solver' must be {set(SOLVERS)}. Got {self.solver!r} instead")
        penalty, l1_ratio = self._penalty()
        alpha = 0.0 if self.solver in UNPENALISED else self._halves / self.C
        self._dasketch_params = {**_DRP, "max_iter": 300, "fit_intercept": False,
                                 "alpha": alpha, "penalty": penalty,
                                 "l1_ratio": l1_ratio if penalty == "elasticnet" else None}
        try:
            super().fit(add_intercept(X) if self.fit_intercept else X, y)
        finally:
            del self._dasketch_params
        coef = self.coef_.reshape(-1)   # one vector, as dask-glm's solvers return it
        if self.fit_intercept:      # the last coefficient is the intercept
            self.coef_, self.intercept_ = coef[:-1], coef[-1]
            self.n_features_in_ -= 1
        else:
            self.coef_, self.intercept_ = coef, 0.0
        return self


class LogisticRegression(_GLM, DualRandomProjectionClassifier):
    """:class:`dask_ml.linear_model.LogisticRegression` as
    :class:`dasketch.linear_model.DualRandomProjectionClassifier` with
    ``loss="logistic"``, ``alpha = 1 / C`` (see the module's docstring)."""

    loss = "logistic"
    smoothing = 1.0
    positive = False


class LinearRegression(_GLM, DualRandomProjectionRegressor):
    """:class:`dask_ml.linear_model.LinearRegression` as
    :class:`dasketch.linear_model.DualRandomProjectionRegressor`,
    ``alpha = 1 / (2 C)`` (see the module's docstring)."""

    _halves = 0.5
    positive = False


class PoissonRegression(_GLM, DualRandomProjectionRegressor):
    """:class:`dask_ml.linear_model.PoissonRegression`: refused, dasketch has no
    Poisson loss (nothing is fitted and the fit is not counted as reaching
    dasketch)."""

    def fit(self, X, y=None):
        raise NotImplementedError("PoissonRegression: dasketch has no Poisson loss "
                                  "(dual random projection fits the squared, logistic "
                                  "and smoothed hinge losses)")


__all__ = ["FITS", "LinearRegression", "LogisticRegression", "PoissonRegression"]
