"""scikit-learn estimators on top of :func:`dual_random_projection`; what they
share is in :mod:`.estimator_base`.

They hold no client: they compute on the current Dask scheduler (an active
``distributed.Client`` when there is one), so clone, pickle and GridSearchCV work.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_consistent_length

from dasketch._blocks import class_labels
from dasketch.kernels.deprecation import DEPRECATED
from dasketch.linear_model.dual_projection.checks import (
    DEFAULT_TOL,
    LOSS_CONSTRAINTS,
    check_weights,
)
from dasketch.linear_model.dual_projection.estimator_base import (
    _ALPHA_DOC,
    _ATTRIBUTES_DOC,
    _PARAMS_DOC,
    _REFERENCES_DOC,
    _DualRandomProjectionBase,
    in_namespace_of,
)
from dasketch.linear_model.dual_projection.multinomial import (
    check_multi_class,
    multinomial_logistic_regression,
)
from dasketch.utils._sklearn_compat import SparseCoefMixin, StrOptions, check_y
from dasketch.utils.validation import host_targets, validate_input


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

    Differences from ``Ridge``: the intercept is fitted as
    an unpenalised variable (not by centring X, which would densify sparse and
    out-of-core input), with the same minimiser; ``tol`` is the certified
    relative accuracy of ``coef_`` (``coef_error_bound_``); ``alpha`` given per
    target is 0 for every target or for none (the unpenalised problem is solved
    by another method: fit such targets separately).

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
    >>> drp = DualRandomProjectionRegressor(alpha=1.0, sketch_size=50,
    ...                                     random_state=0).fit(X, y)
    >>> exact = Ridge(alpha=1.0).fit(X, y).coef_
    >>> bool(np.linalg.norm(drp.coef_ - exact) <= 1e-4 * np.linalg.norm(exact))
    True
    >>> bool(np.linalg.norm(drp.coef_ - exact) <= drp.coef_error_bound_)
    True
    >>> drp.n_passes_, bool(drp.coef_error_bound_ <= drp.tol * np.linalg.norm(drp.coef_))
    (3, True)
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
        self._validate_params()
        X = validate_input(self, X, reset=True, array_libraries="any")
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the "
                             "target y is None")
        y = check_y(host_targets(y), multi_output=True, y_numeric=True, estimator=self)
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
            X and the model are. For a CuPy X, numpy, or CuPy under
            ``sklearn.set_config(array_api_dispatch=True)`` (as scikit-learn).
        """
        return in_namespace_of(X, self._decision(X))


class DualRandomProjectionClassifier(SparseCoefMixin, ClassifierMixin,
                                     _DualRandomProjectionBase):
    __doc__ = """Linear classifier by dual random projection (Zhang et al., COLT 2013).

    Minimises ``alpha/2 ||w||^2 + sum_i l(y_i (x_i^T w + b))`` with labels mapped
    to ``{-1, +1}``. More than two classes are fitted by the multinomial
    (softmax) model with the logistic loss, as ``LogisticRegression``
    (``multi_class``; :mod:`dasketch.linear_model.dual_projection.multinomial`),
    and one-vs-rest otherwise, all classes sharing the projection and every
    pass over X. Losses:

    * ``"logistic"``: ``log(1 + exp(-u))``; the minimiser is that of
      ``LogisticRegression(C=1/alpha)`` (binary, and multinomial for more
      classes), or of ``OneVsRestClassifier`` around it with
      ``multi_class="ovr"``.
    * ``"smoothed_hinge"``: 0 for ``u >= 1``, ``1 - u - s/2`` for ``u <= 1 - s``,
      ``(1 - u)^2 / (2 s)`` between (``s = smoothing``).
    * ``"squared"``: ``(1 - u)^2 / 2``, i.e. ``Ridge(alpha)`` on ``+-1`` targets.

    Each term is multiplied by its sample weight ``s_i`` (``sample_weight``
    times the weight of its class from ``class_weight``).

    Differences from ``LogisticRegression``: ``alpha = 1 / C`` (``alpha=0``
    for ``C=np.inf``, no penalty); ``multi_class`` chooses between the
    multinomial model and one-vs-rest (scikit-learn, which has no such
    parameter, wraps ``LogisticRegression`` in ``OneVsRestClassifier`` for
    the latter); one-vs-rest ``predict_proba`` normalises the sigmoids, and
    ``class_weight="balanced"`` weighs the classes of the multiclass labels (by
    their weighted counts, as ``LogisticRegression``), the same weights in
    every one-vs-rest problem (``OneVsRestClassifier`` balances each binary
    problem); ``tol`` is the certified relative accuracy of ``coef_``
    (``coef_error_bound_``, over all classes together for the multinomial
    model).

    Parameters
    ----------""" + _ALPHA_DOC + """
    loss : {"logistic", "smoothed_hinge", "squared"}, default "logistic"
        The loss ``l`` above.
    smoothing : float, default 1.0
        ``s > 0`` of the smoothed hinge loss.
    class_weight : "balanced" or dict, optional
        Weights of the classes, multiplied into ``sample_weight`` (see
        :func:`sklearn.utils.class_weight.compute_class_weight`, given the
        sample weights, as in ``LogisticRegression``); default all 1.
    multi_class : {"auto", "multinomial", "ovr"}, default "auto"
        How more than two classes are fitted: ``"multinomial"``, the softmax
        model (logistic loss, ``solver="cg"`` and ``penalty="l2"`` only: the
        other losses have none, Algorithm 2 and the l1 penalties are
        one-vs-rest; any of them is refused with ``InvalidParameterError``);
        ``"ovr"``, one binary model per class;
        ``"auto"``, multinomial where it is allowed, one-vs-rest otherwise.
        Two classes are one binary model either way.""" + _PARAMS_DOC + """
    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    coef_ : ndarray (1, n_features) or (n_classes, n_features)
        float32 for float32 X, as ``decision_function`` and ``predict_proba``.
    intercept_ : ndarray (1,) or (n_classes,)
        Summing to 0 for the multinomial model (the softmax does not change
        when every intercept is shifted by one constant), as ``LogisticRegression``;
        ``-inf`` for a class of no weight (``class_weight`` or ``sample_weight``
        0), with its ``coef_`` 0: the limit the objective approaches, its
        probability 0.
    multi_class_ : {"multinomial", "ovr"}
        How the classes were fitted (``"ovr"`` for two classes: one binary
        model).""" + _ATTRIBUTES_DOC + """
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
    >>> clf = DualRandomProjectionClassifier(alpha=10.0, sketch_size=50,
    ...                                      random_state=0).fit(X, y)
    >>> clf.classes_.tolist(), bool(clf.score(X, y) > 0.9)
    (['ham', 'spam'], True)
    """

    _parameter_constraints: dict = {
        **_DualRandomProjectionBase._parameter_constraints,
        **LOSS_CONSTRAINTS,
        "class_weight": [StrOptions({"balanced"}), dict, None],
        "multi_class": [StrOptions({"auto", "multinomial", "ovr"})],
    }

    def __init__(self, alpha=1.0, *, loss="logistic", smoothing=1.0, class_weight=None,
                 multi_class="auto", sketch_size=100, solver="cg", tol=DEFAULT_TOL, max_iter=100,
                 fit_intercept=True, block_rows=None, split_every=None, random_state=None,
                 cache="auto", positive=False, penalty="l2", l1_ratio=None,
                 n_components=DEPRECATED):
        super().__init__(alpha=alpha, sketch_size=sketch_size, solver=solver, tol=tol,
                         max_iter=max_iter, fit_intercept=fit_intercept,
                         block_rows=block_rows, split_every=split_every,
                         random_state=random_state, cache=cache, positive=positive, penalty=penalty,
                         l1_ratio=l1_ratio,
                         n_components=n_components)
        self.loss = loss
        self.smoothing = smoothing
        self.class_weight = class_weight
        self.multi_class = multi_class

    def fit(self, X, y, sample_weight=None):
        """Fit the multinomial model, or one binary model per class (``multi_class``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            zarr array or zarr path.
        y : array-like of shape (n_samples,)
            Class labels, two or more classes.
        sample_weight : array-like of shape (n_samples,), optional
            Weights ``>= 0`` of the loss terms; default all 1.

        Returns
        -------
        self : DualRandomProjectionClassifier
            The fitted estimator.
        """
        self._validate_params()
        multinomial = check_multi_class(self.multi_class, self.loss, self.solver, self.penalty)
        X, y = validate_input(self, X, y, reset=True, array_libraries="any")
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
        multinomial = multinomial and classes.size > 2
        self.multi_class_ = "multinomial" if multinomial else "ovr"
        self._solve(X, codes if multinomial else targets, self.loss, self.smoothing,
                    sample_weight, solve=multinomial_logistic_regression if multinomial
                    else None)
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
            ``classes_[1]``; lazy for out-of-core input. For a CuPy X, numpy,
            or CuPy under ``sklearn.set_config(array_api_dispatch=True)``.
        """
        return in_namespace_of(X, self._decision(X))

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
            return in_namespace_of(X, class_labels(scores, self.classes_))
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
            ``sigmoid(X w + b)`` for two classes, the softmax of the scores for
            the multinomial model, normalised one-vs-rest sigmoids otherwise (as
            scikit-learn's one-vs-rest).
        """
        scores = np.asarray(self._decision(X))
        if self.multi_class_ == "multinomial":
            return in_namespace_of(X, softmax(scores, axis=1))
        p = expit(scores)
        if p.ndim == 1:
            return in_namespace_of(X, np.column_stack([1.0 - p, p]))
        return in_namespace_of(X, p / p.sum(axis=1, keepdims=True))

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
        return in_namespace_of(X, np.log(np.asarray(self.predict_proba(X))))
