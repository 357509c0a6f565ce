"""What the dual random projection estimators share: the base class (parameters,
their rules, the fit through :func:`dual_random_projection`, the scores
``X w + b``) and the parts of their docstrings they have in common."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse
import sklearn
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import (
    RowBlocks,
    as_row_blocks,
    block_namespace,
    compute,
    foreign_array_type,
    host_dtype,
    is_dask_collection,
    matvec,
)
from dasketch.kernels.deprecation import DEPRECATED, REMOVED_IN, renamed_parameter
from dasketch.linear_model.dual_projection.checks import DEFAULT_TOL, SHARED_CONSTRAINTS
from dasketch.linear_model.dual_projection.positive import check_positive
from dasketch.linear_model.dual_projection.proximal import l1_share
from dasketch.linear_model.dual_projection.solve import dual_random_projection
from dasketch.utils.validation import validate_input

_ALPHA_DOC = """
    alpha : float, default 1.0
        ``lambda >= 0``, the weight of ``||w||^2 / 2``. ``alpha=0`` fits the
        unpenalised model (dual random projection itself needs ``lambda > 0``;
        :mod:`dasketch.linear_model.dual_projection.unpenalised`): least squares
        by sketch-preconditioned LSQR, minimum-norm for rank-deficient X, as
        ``LinearRegression``; logistic regression by the same
        projection-preconditioned Newton-CG without the ridge term, as
        ``LogisticRegression(C=np.inf)``, certified by its optimality residual
        (``coef_error_bound_`` is then infinite), with a ``ConvergenceWarning``
        on linearly separable data, whose optimum is at infinity. The smoothed
        hinge and ``solver="paper"`` refuse 0."""

_PARAMS_DOC = """
    sketch_size : int, default 100
        ``m``, the projection dimension (the columns of the sketch ``X R``);
        ``min(sketch_size, n_samples, n_features)`` is used, so the default
        works on small data (where the preconditioner is then exact). A modest
        multiple of the rank of X makes Algorithm 1 accurate and the default
        solver converge in a few iterations; when it is too small for the spectrum and the conjugate
        gradients contract slowly, ``solver="cg"`` grows the projection once, to
        ``min(4 m, n, d)``, unless the spectrum left out is too flat for that
        to capture a quarter of it (``sketch_size_`` says the size it ended
        with).
    solver : {"cg", "paper"}, default "cg"
        ``"cg"``: conjugate gradients (squared loss) or Newton-CG (other losses)
        on the full problem, preconditioned through the projection, from the
        Algorithm 1 solution. ``"paper"``: Algorithm 2 of the paper, with
        ``max_iter`` rounds (``max_iter=1``: Algorithm 1, one shot).
    tol : float, default 1e-4
        Stop when the coefficients are certified to relative accuracy ``tol``,
        ``coef_error_bound_ <= tol ||coef_||``; a ``ConvergenceWarning`` is
        raised exactly when that is not reached (ill-conditioned problems,
        ``max_iter`` too small, or accuracy below what floating point can
        certify). The default is scikit-learn's default ``tol`` of
        ``LogisticRegression`` and ``Ridge``, here a bound on the error of
        ``coef_`` where theirs bounds a gradient or a residual: a default fit
        is at least as accurate as theirs, in relative coefficient error and in
        relative optimality residual. Smaller values cost a few more passes.
    max_iter : int, default 100
        Iterations at most (conjugate-gradient iterations, Newton steps or rounds).
    fit_intercept : bool, default True
        Fit an unpenalised intercept.
    block_rows, split_every : int, optional
        Rows per block and fan-in of the reduction trees (see
        :func:`dasketch.sketch`); the model does not depend on them beyond rounding.
    random_state : None, int or numpy.random.Generator, optional
        Seed of the Gaussian projection ``R``.
    cache : {"auto", True, False}, default "auto"
        Keep the decoded blocks of X in (worker) memory after the first pass
        (``"auto"``: when they fit within a fraction of the workers' free
        memory, the Dask config ``dasketch.cache-fraction``); ``cache_`` records the
        choice. The model does not depend on it.
    positive : bool, default False
        Constrain the coefficients to be ``>= 0`` (the intercept stays free), as
        scikit-learn's ``positive=True``. With ``penalty="l2"``: squared loss
        only, solved by projected Newton with the projection's preconditioner
        restricted to the free coefficients
        (:mod:`dasketch.linear_model.dual_projection.positive`), or for
        ``alpha=0`` by nonnegative least squares
        (:mod:`dasketch.linear_model.nonnegative_lstsq`);
        ``optimality_residual_`` is then the KKT residual (the projected
        gradient) and ``coef_error_bound_`` its bound over ``alpha``. With an
        l1 part (``Lasso(positive=True)``, ``ElasticNet(positive=True)``, and
        the logistic loss at ``alpha > 0``): the proximal Newton method over
        ``w >= 0``, certified by its one-sided ``duality_gap_``. Any other
        combination (and ``solver="paper"``) raises ``InvalidParameterError``
        before anything is fitted.
    penalty : {"l2", "l1", "elasticnet"}, default "l2"
        As scikit-learn's ``LogisticRegression`` names it, weighted by
        ``alpha``: ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2)``
        (``l1_ratio = 1`` for ``"l1"``), so ``Lasso(alpha=alpha / n)`` and
        ``ElasticNet(alpha=alpha / n, l1_ratio=l1_ratio)`` for the squared
        loss and ``LogisticRegression(C=1 / alpha)``. An l1 part (squared and
        logistic losses, ``solver="cg"``) is fitted by a sketch-preconditioned
        proximal Newton method and certified by its duality gap
        (``duality_gap_``, :mod:`dasketch.linear_model.dual_projection.proximal`):
        ``tol`` then bounds ``duality_gap_`` relative to the objective of the
        best constant model.
    l1_ratio : float in [0, 1], optional
        The share of ``||w||_1`` in ``penalty="elasticnet"``, which needs it;
        ignored by the other penalties.
    n_components : int, default "deprecated"
        The former name of ``sketch_size``, served with a ``FutureWarning``
        until its removal in 0.3.
"""

_ATTRIBUTES_DOC = """
    coef_error_bound_ : float or ndarray (n_targets,)
        ``||coef_ - w*|| <= coef_error_bound_`` per target, ``w*`` the exact
        minimiser: the gradient of the objective with the intercept profiled out
        over ``alpha`` (strong convexity; derived in
        :meth:`dasketch.linear_model.dual_projection.solvers.FullProblem.error_bound`),
        plus the rounding to float32 for float32 input.
    optimality_residual_ : float or ndarray (n_targets,)
        ``||grad F(w, b)|| / ||grad F(0, b0)||`` of the full problem at the
        returned model (``b0`` the best constant model): the accuracy
        certificate, computed in the last pass over X.
    objective_ : float or ndarray
    n_iter_ : int, or ndarray (1,) for the classifier
        Iterations of the solver (all targets, or classes, share them); the
        classifier's is an array of one, as ``LogisticRegression``'s.
    n_passes_ : int
        Passes over X, the projection included.
    history_ : list of dict
        Per iteration: passes so far, optimality residual, objective.
    naive_coef_, naive_intercept_ : ndarray
        The naive solution ``R z / sqrt(m)`` of the first projected problem (NaN
        for the multinomial model, fitted from the best constant model).
    best_iteration_ : int
    sketch_size_ : int
        The projection dimension the fit ended with (see ``sketch_size``).
    cache_ : CacheChoice
        Whether the decoded blocks of X were kept in (worker) memory after the
        first pass (``cached``), why (``reason``), the decoded size of X
        (``nbytes``) and the budget ``cache="auto"`` compared it with.
    duality_gap_ : float, ndarray (n_targets,) or None
        With an l1 part in the penalty, a bound on ``objective_`` minus the
        minimum (a duality gap); None for ``penalty="l2"``.
    n_features_in_ : int
    feature_names_in_ : ndarray, only for DataFrame input
"""

_REFERENCES_DOC = """

    References
    ----------
    L. Zhang, M. Mahdavi, R. Jin, T. Yang, S. Zhu, "Recovering the Optimal Solution
    by Dual Random Projection", COLT 2013.
"""


class _DualRandomProjectionBase(BaseEstimator):
    """What the regressor and the classifier share: the parameters and their rules,
    the call of :func:`dual_random_projection` and the fitted attributes it sets,
    and the scores ``X w + b``."""

    _parameter_constraints: dict = {**SHARED_CONSTRAINTS}

    def __init__(self, alpha=1.0, *, sketch_size=100, solver="cg", tol=DEFAULT_TOL, max_iter=100,
                 fit_intercept=True, block_rows=None, split_every=None, random_state=None,
                 cache="auto", positive=False, penalty="l2", l1_ratio=None,
                 n_components=DEPRECATED):
        self.alpha = alpha
        self.sketch_size = sketch_size
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.block_rows = block_rows
        self.split_every = split_every
        self.random_state = random_state
        self.cache = cache
        self.positive = positive
        self.penalty = penalty
        self.l1_ratio = l1_ratio

    def __setstate__(self, state):
        # an estimator pickled before n_components was renamed sketch_size
        if "sketch_size" not in state:
            state = {**state, "sketch_size": state.get("n_components", 100),
                     "n_components": DEPRECATED}
            if "n_components_" in state:
                state["sketch_size_"] = state.pop("n_components_")
        super().__setstate__(state)

    @property
    def n_components_(self):
        """The former name of ``sketch_size_``, until its removal in 0.3."""
        warnings.warn(f"n_components_ was renamed sketch_size_ and is removed in {REMOVED_IN}",
                      FutureWarning, stacklevel=2)
        return self.sketch_size_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_params(self):
        super()._validate_params()
        # the rules between parameters, before fit sets anything
        loss = getattr(self, "loss", "squared")
        check_positive(self.positive, loss, self.solver,
                       l1_share(self.penalty, self.l1_ratio, solver=self.solver, loss=loss),
                       self.alpha)

    def _solve(self, X, targets, loss, smoothing=1.0, sample_weight=None, solve=None):
        """Fit through :func:`dual_random_projection`, or through ``solve`` (a
        function of X, the targets and the shared parameters, returning its
        result) when given."""
        sketch_size = renamed_parameter(type(self).__name__, "n_components", "sketch_size",
                                        self.n_components, self.sketch_size, 100)
        options = dict(alpha=self.alpha, sketch_size=sketch_size, tol=self.tol,
                       max_iter=self.max_iter, fit_intercept=self.fit_intercept,
                       block_rows=self.block_rows, split_every=self.split_every,
                       random_state=self.random_state, sample_weight=sample_weight,
                       cache=self.cache)
        result = solve(X, targets, **options) if solve is not None else \
            dual_random_projection(X, targets, loss=loss, smoothing=smoothing,
                                   solver=self.solver, positive=self.positive,
                                   penalty=self.penalty, l1_ratio=self.l1_ratio,
                                   **options)
        dtype = np.float32 if _input_dtype(X) == np.float32 else np.float64
        self.coef_ = np.asarray(result.coef, dtype=dtype)
        self.intercept_ = np.asarray(result.intercept, dtype=dtype)[()]
        # one bound for all rows of coef_ when the result has one (multinomial)
        rounding = np.linalg.norm(np.atleast_2d(self.coef_ - result.coef),
                                  axis=None if np.size(result.objective) == 1 else 1)
        scalar = (lambda v: float(np.ravel(v)[0])) if np.size(result.objective) == 1 \
            else np.asarray
        self.coef_error_bound_ = scalar(result.coef_error_bound + rounding)
        self.optimality_residual_ = scalar(result.optimality_residual)
        self.objective_ = scalar(result.objective)
        self.n_iter_ = result.n_iter
        self.n_passes_ = result.n_passes
        self.history_ = result.history
        self.naive_coef_ = result.naive_coef
        self.naive_intercept_ = result.naive_intercept
        self.best_iteration_ = result.best_iteration
        self.sketch_size_ = result.n_components
        self.cache_ = result.cache
        self.duality_gap_ = result.duality_gap
        return self

    def _decision(self, X):
        check_is_fitted(self, "coef_")
        X = validate_input(self, X, reset=False, array_libraries="any")
        dense = self.coef_.toarray() if scipy.sparse.issparse(self.coef_) else self.coef_
        coef = np.atleast_2d(dense).T.astype(np.float64)
        intercept = np.atleast_1d(self.intercept_).astype(np.float64)
        if foreign_array_type(X) is not None:   # in X's library, scores on the host
            scores = matvec(as_row_blocks(X, block_rows=self.block_rows,
                                          array_libraries="any"), coef) + intercept
            if not is_dask_collection(X):
                (scores,) = compute(scores)
        elif isinstance(X, RowBlocks):
            scores = matvec(X, coef) + intercept
        else:
            scores = np.asarray(X @ coef) + intercept
        # float32 in, float32 out (as scikit-learn), computed in float64.
        scores = scores.astype(np.result_type(_input_dtype(X), self.coef_.dtype), copy=False)
        return scores[:, 0] if np.ndim(self.coef_) == 1 or self.coef_.shape[0] == 1 \
            else scores


def _input_dtype(X):
    """The numpy dtype of ``X`` (of its blocks' standard dtype for an array of
    another library), None when it has none."""
    dtype = getattr(X, "dtype", None)
    if dtype is None or foreign_array_type(X) is None:
        return dtype
    return host_dtype(getattr(X, "_meta", X), dtype)


def in_namespace_of(X, result):
    """``result`` (on the host) as scikit-learn's array API convention returns
    it: in the namespace of an in-memory ``X`` of another library (CuPy) when
    ``sklearn.set_config(array_api_dispatch=True)``, else as it is (numpy; a
    Dask array stays lazy). Labels that are not numbers stay numpy."""
    if (not sklearn.get_config()["array_api_dispatch"] or is_dask_collection(X)
            or foreign_array_type(X) is None or np.asarray(result).dtype.kind not in "biuf"):
        return result
    return block_namespace(X).asarray(result, device=X.device)
