"""scikit-learn estimators on top of :func:`dual_random_projection`.

They hold no client: they compute on the current Dask scheduler (an active
``distributed.Client`` when there is one), so clone, pickle and GridSearchCV work.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.linear_model._base import SparseCoefMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_y, check_consistent_length, check_is_fitted

from dasketch._blocks import RowBlocks, compute, is_dask_collection, matvec
from dasketch._blocks.block_functions import class_labels
from dasketch.linear_model.dual_projection.solve import check_weights, dual_random_projection
from dasketch.utils.validation import validate_input

_ALPHA_DOC = """
    alpha : float, default 1.0
        ``lambda > 0``, the weight of ``||w||^2 / 2`` (0 is a ``ValueError``:
        the dual of the problem, and the method, need ``lambda > 0``)."""

_PARAMS_DOC = """
    n_components : int, default 100
        ``m``, the projection dimension; ``min(n_components, n_samples,
        n_features)`` is used, so the default works on small data (where the
        preconditioner is then exact). A modest multiple of the rank of X makes
        Algorithm 1 accurate and the default solver converge in a few
        iterations; when it is too small for the spectrum and the conjugate
        gradients contract slowly, ``solver="cg"`` grows the projection once, to
        ``min(4 m, n, d)``, unless the spectrum left out is too flat for that
        to capture a quarter of it (``n_components_`` says the size it ended
        with).
    solver : {"cg", "paper"}, default "cg"
        ``"cg"``: conjugate gradients (squared loss) or Newton-CG (other losses)
        on the full problem, preconditioned through the projection, from the
        Algorithm 1 solution. ``"paper"``: Algorithm 2 of the paper, with
        ``max_iter`` rounds (``max_iter=1``: Algorithm 1, one shot).
    tol : float, default 1e-6
        Stop when the coefficients are certified to relative accuracy ``tol``,
        ``coef_error_bound_ <= tol ||coef_||``; a ``ConvergenceWarning`` is
        raised exactly when that is not reached (ill-conditioned problems,
        ``max_iter`` too small, or accuracy below what floating point can
        certify).
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
        memory, see :mod:`dasketch._blocks.cache`); ``cache_`` records the
        choice. The model does not depend on it.
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
        The naive solution ``R z / sqrt(m)`` of the first projected problem.
    best_iteration_ : int
    n_components_ : int
        The projection dimension the fit ended with (see ``n_components``).
    cache_ : dasketch._blocks.CacheChoice
        Whether the decoded blocks of X were kept in (worker) memory after the
        first pass (``cached``), why (``reason``), the decoded size of X
        (``nbytes``) and the budget ``cache="auto"`` compared it with.
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
    _loss_name = "squared"

    def __init__(self, alpha=1.0, *, n_components=100, solver="cg", tol=1e-6, max_iter=100,
                 fit_intercept=True, block_rows=None, split_every=None, random_state=None,
                 cache="auto"):
        self.alpha = alpha
        self.n_components = n_components
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.block_rows = block_rows
        self.split_every = split_every
        self.random_state = random_state
        self.cache = cache

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _solve(self, X, targets, loss, smoothing=1.0, sample_weight=None):
        result = dual_random_projection(
            X, targets, loss=loss, alpha=self.alpha, smoothing=smoothing,
            n_components=self.n_components, solver=self.solver, tol=self.tol,
            max_iter=self.max_iter, fit_intercept=self.fit_intercept,
            block_rows=self.block_rows, split_every=self.split_every,
            random_state=self.random_state, sample_weight=sample_weight, cache=self.cache)
        dtype = X.dtype if getattr(X, "dtype", None) == np.float32 else np.float64
        self.coef_ = np.asarray(result.coef, dtype=dtype)
        self.intercept_ = np.asarray(result.intercept, dtype=dtype)[()]
        rounding = np.linalg.norm(np.atleast_2d(self.coef_ - result.coef), axis=1)
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
        self.n_components_ = result.n_components
        self.cache_ = result.cache
        return self

    def _decision(self, X):
        check_is_fitted(self, "coef_")
        X = validate_input(self, X, reset=False)
        dense = self.coef_.toarray() if scipy.sparse.issparse(self.coef_) else self.coef_
        coef = np.atleast_2d(dense).T.astype(np.float64)
        intercept = np.atleast_1d(self.intercept_).astype(np.float64)
        if isinstance(X, RowBlocks):
            scores = matvec(X, coef) + intercept
        else:
            scores = np.asarray(X @ coef) + intercept
        # float32 in, float32 out (as scikit-learn), computed in float64.
        scores = scores.astype(np.result_type(X.dtype, self.coef_.dtype), copy=False)
        return scores[:, 0] if np.ndim(self.coef_) == 1 or self.coef_.shape[0] == 1 \
            else scores


class DualRandomProjectionRegressor(RegressorMixin, _DualRandomProjectionBase):
    __doc__ = """Ridge regression by dual random projection (Zhang et al., COLT 2013).

    Minimises ``alpha/2 ||w||^2 + 1/2 sum_i s_i (x_i^T w + b - y_i)^2`` (``s`` the
    sample weights), whose minimiser is that of scikit-learn's
    ``Ridge(alpha=alpha, fit_intercept=fit_intercept)``, for one target or
    several (2-D ``y``, all sharing every pass over X, ``alpha`` a number or one
    per target). The default solver is preconditioned conjugate gradients on the
    full problem (see :func:`dasketch.linear_model.dual_random_projection`), one
    pass over X per iteration; ``solver="paper"`` runs the paper's Algorithms 1
    and 2.

    Differences from ``Ridge``: ``alpha`` must be > 0; the intercept is fitted as
    an unpenalised variable (not by centring X, which would densify sparse and
    out-of-core input), with the same minimiser; ``tol`` is the certified
    relative accuracy of ``coef_`` (``coef_error_bound_``).

    Parameters
    ----------""" + _ALPHA_DOC + _PARAMS_DOC + """
    Attributes
    ----------
    coef_ : ndarray (n_features,) or (n_targets, n_features)
        1-D for 1-D ``y`` (and for ``y`` of one column, as ``Ridge``); float32
        for float32 X.
    intercept_ : numpy float or ndarray (n_targets,)""" + _ATTRIBUTES_DOC + """
    See Also
    --------
    dual_random_projection : The solver, with its result and certificate.
    DualRandomProjectionClassifier : The same method for classification.
    SketchLstsqRegressor : Least squares with ``n >> d`` to a certified tolerance.
    PWSGDRegressor : Preconditioned weighted SGD for l2 and l1 regression.
    dasketch.RFDSONRegressor : Online regression in one pass.""" + _REFERENCES_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> from dasketch.linear_model import DualRandomProjectionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 1000))
    >>> y = X @ rng.standard_normal(1000) + rng.standard_normal(200)
    >>> drp = DualRandomProjectionRegressor(alpha=1.0, n_components=50,
    ...                                     random_state=0).fit(X, y)
    >>> exact = Ridge(alpha=1.0).fit(X, y).coef_
    >>> bool(np.linalg.norm(drp.coef_ - exact) <= 1e-6 * np.linalg.norm(exact))
    True
    >>> bool(np.linalg.norm(drp.coef_ - exact) <= drp.coef_error_bound_)
    True
    >>> drp.n_passes_, bool(drp.coef_error_bound_ <= 1e-6 * np.linalg.norm(drp.coef_))
    (4, True)
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y, sample_weight=None):
        """Fit the ridge coefficients and intercept.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            zarr array or zarr path.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Real targets.
        sample_weight : array-like of shape (n_samples,), optional
            Weights ``>= 0`` of the loss terms; default all 1.

        Returns
        -------
        self : DualRandomProjectionRegressor
            The fitted estimator.
        """
        X = validate_input(self, X, reset=True)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the "
                             "target y is None")
        if is_dask_collection(y):
            (y,) = compute(y)
        y = _check_y(y, multi_output=True, y_numeric=True, estimator=self)
        check_consistent_length(np.empty((X.shape[0], 0)), y)
        self._solve(X, y, "squared", sample_weight=sample_weight)
        if y.ndim == 2 and y.shape[1] == 1:      # as Ridge
            self.coef_ = self.coef_[0]
            if not self.fit_intercept:
                self.intercept_ = self.intercept_[0]
        return self

    def predict(self, X):
        """Predict ``X w + b``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input ``fit`` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,) or (n_samples, n_targets)
            The predictions: a lazy Dask array for out-of-core input; float32 when
            X and the model are.
        """
        return self._decision(X)


class DualRandomProjectionClassifier(SparseCoefMixin, ClassifierMixin,
                                     _DualRandomProjectionBase):
    __doc__ = """Linear classifier by dual random projection (Zhang et al., COLT 2013).

    Minimises ``alpha/2 ||w||^2 + sum_i l(y_i (x_i^T w + b))`` with labels mapped
    to ``{-1, +1}``; more than two classes are fitted one-vs-rest, all classes
    sharing the projection and every pass over X. Losses:

    * ``"logistic"``: ``log(1 + exp(-u))``; the minimiser is that of
      ``LogisticRegression(C=1/alpha)`` (binary) or of ``OneVsRestClassifier``
      around it.
    * ``"smoothed_hinge"``: 0 for ``u >= 1``, ``1 - u - s/2`` for ``u <= 1 - s``,
      ``(1 - u)^2 / (2 s)`` between (``s = smoothing``).
    * ``"squared"``: ``(1 - u)^2 / 2``, i.e. ``Ridge(alpha)`` on ``+-1`` targets.

    Each term is multiplied by its sample weight ``s_i`` (``sample_weight``
    times the weight of its class from ``class_weight``).

    Differences from ``LogisticRegression``: ``alpha = 1 / C`` must be > 0;
    more than two classes are always one-vs-rest (never multinomial), and
    ``predict_proba`` normalises the one-vs-rest sigmoids; ``class_weight=
    "balanced"`` weighs the classes of the multiclass labels (by their weighted
    counts, as ``LogisticRegression``), the same weights in every one-vs-rest
    problem (``OneVsRestClassifier`` balances each binary problem); ``tol`` is
    the certified relative accuracy of ``coef_`` (``coef_error_bound_``).

    Parameters
    ----------""" + _ALPHA_DOC + """
    loss : {"logistic", "smoothed_hinge", "squared"}, default "logistic"
        The loss ``l`` above.
    smoothing : float, default 1.0
        ``s > 0`` of the smoothed hinge loss.
    class_weight : "balanced" or dict, optional
        Weights of the classes, multiplied into ``sample_weight`` (see
        :func:`sklearn.utils.class_weight.compute_class_weight`, given the
        sample weights, as in ``LogisticRegression``); default all 1.""" + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    coef_ : ndarray (1, n_features) or (n_classes, n_features)
        float32 for float32 X, as ``decision_function`` and ``predict_proba``.
    intercept_ : ndarray (1,) or (n_classes,)""" + _ATTRIBUTES_DOC + """
    See Also
    --------
    dual_random_projection : The solver, with its result and certificate.
    DualRandomProjectionRegressor : The same method for ridge regression.
    dasketch.RFDSONClassifier : Online classification in one pass.""" + _REFERENCES_DOC + """
    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import DualRandomProjectionClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 2000))
    >>> y = np.where(X @ rng.standard_normal(2000) > 0, "spam", "ham")
    >>> clf = DualRandomProjectionClassifier(alpha=10.0, n_components=50,
    ...                                      random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    (['ham', 'spam'], True)
    """

    def __init__(self, alpha=1.0, *, loss="logistic", smoothing=1.0, class_weight=None,
                 n_components=100, solver="cg", tol=1e-6, max_iter=100, fit_intercept=True,
                 block_rows=None, split_every=None, random_state=None, cache="auto"):
        super().__init__(alpha=alpha, n_components=n_components, solver=solver, tol=tol,
                         max_iter=max_iter, fit_intercept=fit_intercept,
                         block_rows=block_rows, split_every=split_every,
                         random_state=random_state, cache=cache)
        self.loss = loss
        self.smoothing = smoothing
        self.class_weight = class_weight

    def fit(self, X, y, sample_weight=None):
        """Fit one linear model per class (one for two classes).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            zarr array or zarr path.
        y : array-like of shape (n_samples,)
            Class labels, two or more classes (one-vs-rest).
        sample_weight : array-like of shape (n_samples,), optional
            Weights ``>= 0`` of the loss terms; default all 1.

        Returns
        -------
        self : DualRandomProjectionClassifier
            The fitted estimator.
        """
        X, y = validate_input(self, X, y, reset=True)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"y must hold at least two classes, got {classes.size} class: "
                             f"{classes.tolist()}")
        self.classes_ = classes
        if classes.size == 2:
            targets = np.where(codes == 1, 1.0, -1.0)[:, None]
        else:
            targets = np.where(codes[:, None] == np.arange(classes.size), 1.0, -1.0)
        if self.class_weight is not None:     # as LogisticRegression
            sample_weight = check_weights(sample_weight, y.shape[0])
            sample_weight = sample_weight * compute_class_weight(
                self.class_weight, classes=classes, y=y, sample_weight=sample_weight)[codes]
        self._solve(X, targets, self.loss, self.smoothing, sample_weight)
        self.n_iter_ = np.array([self.n_iter_])     # as LogisticRegression
        return self

    def decision_function(self, X):
        """Compute the scores ``X w + b`` of every class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input ``fit`` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,) or (n_samples, n_classes)
            One column per class, or one for two classes, positive for
            ``classes_[1]``; lazy for out-of-core input.
        """
        return self._decision(X)

    def predict(self, X):
        """Predict the class labels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input ``fit`` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,)
            Labels from ``classes_``; lazy for out-of-core input.
        """
        scores = self._decision(X)
        if isinstance(scores, np.ndarray):
            return class_labels(scores, self.classes_)
        # A module-level block function: the workers never unpickle the estimator.
        return scores.map_blocks(class_labels, self.classes_, dtype=self.classes_.dtype,
                                 drop_axis=1 if scores.ndim == 2 else None)

    @available_if(lambda self: self.loss == "logistic")
    def predict_proba(self, X):
        """Estimate the class probabilities (logistic loss only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input ``fit`` accepts.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``sigmoid(X w + b)`` for two classes, normalised one-vs-rest sigmoids
            otherwise (as scikit-learn's one-vs-rest).
        """
        p = expit(np.asarray(self._decision(X)))
        if p.ndim == 1:
            return np.column_stack([1.0 - p, p])
        return p / p.sum(axis=1, keepdims=True)

    @available_if(lambda self: self.loss == "logistic")
    def predict_log_proba(self, X):
        """Estimate the logarithms of the class probabilities (logistic loss only).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input ``fit`` accepts.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            ``log(predict_proba(X))``.
        """
        return np.log(self.predict_proba(X))
