"""Drop-in stand-ins for scikit-learn estimators, built on dasketch's.

Each shim has the scikit-learn class's name and constructor, so
``get_params``, ``clone``, ``repr`` and ``get_feature_names_out`` behave as the
original's; the parameters that choose scikit-learn's solver are stored and
ignored, and what a shim cannot fit is refused, never ignored. The PCA shims
sketch exactly (``sketch_size="exact"``, ``n_features + 1`` rows), so results
equal exact PCA's up to rounding; the linear-model shims precondition exactly
(projection dimension ``min(n_samples, n_features)``) and certify their
coefficients to relative accuracy 1e-10. The tests measure dasketch's
estimators, not the approximation of a small sketch.

A shim records that it was fitted (:data:`FITS`), so the report counts only the
tests that reached dasketch.
"""

import warnings

import numpy as np
import scipy.sparse

from dasketch import SketchPCA
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    SketchLstsqRegressor,
)

FITS = []


class _Counted:
    """Records every fit / partial_fit in :data:`FITS`."""

    def fit(self, X, y=None):
        FITS.append(type(self).__name__)
        return super().fit(X, y)

    def partial_fit(self, X, y=None):
        FITS.append(type(self).__name__)
        return super().partial_fit(X, y)


class PCA(_Counted, SketchPCA):
    """:class:`sklearn.decomposition.PCA` as an exact :class:`dasketch.SketchPCA`
    (``svd_solver``, ``tol``, ``iterated_power``, ``n_oversamples`` and
    ``power_iteration_normalizer`` are ignored; ``copy`` too: X is never
    modified)."""

    sketch_size = "exact"
    scaling = None
    method = "rfd"
    split_every = None
    block_rows = None

    def __init__(self, n_components=None, *, copy=True, whiten=False, svd_solver="auto",
                 tol=0.0, iterated_power="auto", n_oversamples=10,
                 power_iteration_normalizer="auto", random_state=None):
        self.n_components = n_components
        self.copy = copy
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.tol = tol
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.power_iteration_normalizer = power_iteration_normalizer
        self.random_state = random_state


class IncrementalPCA(_Counted, SketchPCA):
    """:class:`sklearn.decomposition.IncrementalPCA` as an exact
    :class:`dasketch.SketchPCA`: ``batch_size`` rows per block of :meth:`fit`
    (block sketches merged in a tree), ``copy`` ignored."""

    sketch_size = "exact"
    scaling = None
    method = "rfd"
    split_every = None
    random_state = None

    def __init__(self, n_components=None, *, whiten=False, copy=True, batch_size=None):
        self.n_components = n_components
        self.whiten = whiten
        self.copy = copy
        self.batch_size = batch_size

    @property
    def block_rows(self):
        return self.batch_size


# --- linear models -----------------------------------------------------------------
#
# scikit-learn's Ridge, LogisticRegression and LinearRegression share the names
# ``tol``, ``max_iter``, ``solver`` and ``random_state`` with dasketch's
# estimators but not their meaning. A shim keeps scikit-learn's values
# (get_params, clone and repr show them) and fits with dasketch's
# (:attr:`_Solving._dasketch_params`).

# Dual random projection with m = min(n_samples, n_features): the preconditioner
# is exact and tol is the certified relative accuracy of coef_; a fixed seed of
# the projection, so that every run of a suite gives the same results.
_DRP = {"sketch_size": 10 ** 9, "solver": "cg", "tol": 1e-10, "max_iter": 100,
        "random_state": 0}


def _keep(estimator, params):
    """What a scikit-learn ``__init__`` does: store every parameter unchanged."""
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class _Solving:
    """``fit`` with dasketch's values of the parameters in ``_dasketch_params``
    (scikit-learn's restored afterwards), recorded in :data:`FITS`; what dasketch
    cannot fit, dasketch refuses. ``solver_`` records the solver asked for, where
    scikit-learn's estimator has that attribute."""

    _dasketch_params = {}
    block_rows = None
    split_every = None
    cache = "auto"
    multi_class = "auto"
    penalty = "l2"    # Ridge's and RidgeClassifier's
    l1_ratio = None
    n_components = "deprecated"     # dasketch's former name of sketch_size, unset

    def fit(self, X, y, sample_weight=None):
        FITS.append(type(self).__name__)
        ours = self._dasketch_params
        theirs = {name: vars(self)[name] for name in ours if name in vars(self)}
        vars(self).update(ours)
        try:
            if sample_weight is None:
                super().fit(X, y)
            else:
                super().fit(X, y, sample_weight=sample_weight)
        finally:
            for name in ours:
                vars(self).pop(name, None)
            vars(self).update(theirs)
        if isinstance(self, (Ridge, RidgeClassifier)):
            self.solver_ = self.solver
        return self


class Ridge(_Solving, DualRandomProjectionRegressor):
    """:class:`sklearn.linear_model.Ridge` as
    :class:`dasketch.linear_model.DualRandomProjectionRegressor` (exact
    preconditioner, ``tol=1e-10``; ``solver``, ``tol``, ``max_iter``,
    ``random_state`` and ``copy_X`` are ignored)."""

    _dasketch_params = _DRP

    def __init__(self, alpha=1.0, *, fit_intercept=True, copy_X=True, max_iter=None,
                 tol=1e-4, solver="auto", positive=False, random_state=None):
        _keep(self, locals())


class RidgeClassifier(_Solving, DualRandomProjectionClassifier):
    """:class:`sklearn.linear_model.RidgeClassifier` as
    :class:`dasketch.linear_model.DualRandomProjectionClassifier` with
    ``loss="squared"``: Ridge on +-1 targets, one-vs-rest for more classes, as
    RidgeClassifier (parameters as the Ridge shim)."""

    _dasketch_params = _DRP
    loss = "squared"
    smoothing = 1.0

    def __init__(self, alpha=1.0, *, fit_intercept=True, copy_X=True, max_iter=None,
                 tol=1e-4, class_weight=None, solver="auto", positive=False,
                 random_state=None):
        _keep(self, locals())


class LogisticRegression(_Solving, DualRandomProjectionClassifier):
    """:class:`sklearn.linear_model.LogisticRegression` as
    :class:`dasketch.linear_model.DualRandomProjectionClassifier` with
    ``loss="logistic"``, ``alpha = 1 / C`` (exact preconditioner, ``tol=1e-10``;
    ``tol``, ``max_iter``, ``solver``, ``random_state``, ``dual``,
    ``intercept_scaling``, ``warm_start``, ``verbose`` and ``n_jobs`` are
    ignored). The penalty is resolved as scikit-learn's ``fit`` resolves it
    (``penalty`` where it is set, ``l1_ratio`` and ``C`` otherwise):
    scikit-learn's objective ``C sum_i loss_i + l1_ratio ||w||_1 +
    (1 - l1_ratio) ||w||^2 / 2`` is ``C`` times dasketch's elastic-net objective
    at ``alpha = 1 / C``, and no penalty (``penalty=None`` or ``C=np.inf``) is
    ``alpha=0``. More than two classes are multinomial with the l2 penalty,
    one-vs-rest with an l1 part."""

    loss = "logistic"
    smoothing = 1.0
    positive = False

    def __init__(self, penalty="deprecated", *, C=1.0, l1_ratio=0.0, dual=False, tol=1e-4,
                 fit_intercept=True, intercept_scaling=1, class_weight=None,
                 random_state=None, solver="lbfgs", max_iter=100, verbose=0,
                 warm_start=False, n_jobs=None):
        _keep(self, locals())

    @property
    def _dasketch_params(self):
        # as scikit-learn: penalty where it is set, l1_ratio otherwise; an
        # elastic-net penalty without l1_ratio is dasketch's to refuse
        l1 = {"l1": 1.0, "l2": 0.0, "deprecated": self.l1_ratio or 0.0}.get(
            self.penalty, self.l1_ratio)
        none = self.penalty is None or self.C == np.inf    # no penalty: alpha=0
        if self.penalty is None and self.C != 1.0:      # scikit-learn's warning
            warnings.warn("Setting penalty=None will ignore the C and l1_ratio parameters",
                          stacklevel=3)
        alpha = 0.0 if none else 1.0 / self.C if self.C != 0 else np.inf
        l1 = 0.0 if none else l1
        penalty = {0.0: "l2", 1.0: "l1"}.get(l1, "elasticnet")
        return {**_DRP, "alpha": alpha, "penalty": penalty,
                "l1_ratio": l1 if penalty == "elasticnet" else None}


class LinearRegression(_Solving, SketchLstsqRegressor):
    """:class:`sklearn.linear_model.LinearRegression` as
    :class:`dasketch.linear_model.SketchLstsqRegressor` (``tol=1e-10``;
    ``copy_X`` and ``n_jobs`` are ignored)."""

    _dasketch_params = {"tol": 1e-10}
    max_iter = None
    sketch_size = None
    embedding = "osnap"
    random_state = 0
    solver = "auto"

    def __init__(self, *, fit_intercept=True, copy_X=True, tol=1e-6, n_jobs=None,
                 positive=False):
        _keep(self, locals())


class ElasticNet(_Solving, DualRandomProjectionRegressor):
    """:class:`sklearn.linear_model.ElasticNet` as
    :class:`dasketch.linear_model.DualRandomProjectionRegressor` with
    ``penalty="elasticnet"`` (``"l1"`` at ``l1_ratio=1``): scikit-learn's
    objective, ``1 / (2 n)`` times the loss, times ``n`` (the sum of the
    sample weights) is dasketch's, so ``alpha`` is multiplied by ``n``
    (exact preconditioner, ``tol=1e-10``; ``precompute``, ``copy_X``,
    ``max_iter``, ``tol``, ``warm_start``, ``random_state`` and ``selection``
    are ignored)."""

    n_components = "deprecated"     # dasketch's former name of sketch_size, unset

    def __init__(self, alpha=1.0, *, l1_ratio=0.5, fit_intercept=True, precompute=False,
                 max_iter=1000, copy_X=True, tol=1e-4, warm_start=False, positive=False,
                 random_state=None, selection="cyclic"):
        _keep(self, locals())

    def fit(self, X, y, sample_weight=None, check_input=True):
        n = X.shape[0] if hasattr(X, "shape") else len(X)
        if sample_weight is not None:      # a scalar weighs every sample
            n = float(np.sum(np.broadcast_to(sample_weight, (n,))))
        # dasketch's values for this fit only (scikit-learn's restored after it)
        self._dasketch_params = {**_DRP, "max_iter": 300, "alpha": self.alpha * n,
                                 "penalty": "l1" if self.l1_ratio == 1 else "elasticnet"}
        try:
            super().fit(X, y, sample_weight=sample_weight)
        finally:
            del self._dasketch_params
        if self.duality_gap_ is not None:      # None at alpha=0: no penalty, no dual
            self.dual_gap_ = self.duality_gap_ / n     # scikit-learn's objective: 1 / n of ours
        return self

    @property
    def sparse_coef_(self):
        return scipy.sparse.csr_matrix(np.atleast_2d(self.coef_))


class Lasso(ElasticNet):
    """:class:`sklearn.linear_model.Lasso` as the :class:`ElasticNet` shim at
    ``l1_ratio=1``."""

    l1_ratio = 1.0

    def __init__(self, alpha=1.0, *, fit_intercept=True, precompute=False, copy_X=True,
                 max_iter=1000, tol=1e-4, warm_start=False, positive=False,
                 random_state=None, selection="cyclic"):
        _keep(self, locals())
