"""Online learners with a sketched Newton step (RFD-SON).

Thin estimators around :class:`dasketch.kernels.online_newton.OnlineNewton`
(:class:`RFDSONClassifier` here, :class:`RFDSONRegressor` in
:mod:`dasketch.linear_model.rfd_son_regressor`, re-exported here): they
validate input, walk the rows in order (a Dask array or zarr store one row block
at a time, see :func:`dasketch._blocks.iter_row_blocks`), hand each block to the
compiled per-example loop and expose the learned model the scikit-learn way.

References
----------
.. [1] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019, Algorithms 3 and 6.
.. [2] H. Luo, A. Agarwal, N. Cesa-Bianchi, J. Langford, "Efficient second order
   online learning by sketching", NeurIPS 2016 (FD-SON).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets

from dasketch._blocks import is_dask_collection
from dasketch.kernels.online_newton import ONLINE_LOSSES, DivergenceError
from dasketch.linear_model._rfd_son_base import _BaseRFDSON
from dasketch.linear_model.rfd_son_regressor import RFDSONRegressor
from dasketch.utils._sklearn_compat import StrOptions

__all__ = ["DivergenceError", "RFDSONClassifier", "RFDSONRegressor"]


class RFDSONClassifier(ClassifierMixin, _BaseRFDSON):
    """Classifier trained by the sketched online Newton step (RFD-SON).

    Implements Algorithm 3 of Luo, Chen, Zhang, Li, Zhang, "Robust Frequent
    Directions with application in online learning" (JMLR 2019) with the fast
    update of its Algorithm 6 (Appendix A): the Hessian estimate
    ``H = B^T B + alpha I`` comes from a Robust Frequent Directions sketch of the
    scaled gradients, each step and the closed-form projection onto
    ``K_t = {w : |w^T x_t| <= prediction_bound}`` cost O(l d) (O(l d + nnz) for
    sparse rows) by the Woodbury identity, in a compiled loop over the examples.
    ``method="fd"`` gives FD-SON (Luo, Agarwal, Cesa-Bianchi, Langford, NeurIPS
    2016) and ``method="full"`` the full-matrix online Newton step (O(d^2) per
    step; small d). More than two classes: one-vs-rest, one learner per class,
    all trained in the same pass over the data.

    ``alpha0 = 0`` needs no tuning. alpha is kept above a floor derived from the
    data seen so far, ``max ||g|| max ||x|| / (2 prediction_bound)``, so that no
    Newton step can move the prediction of a row seen so far by more than the
    width of the constraint set while the sketch is still nearly empty; the
    projection steps are not bounded by it, and the paper's regret bound is
    claimed only without it (see
    :class:`~dasketch.kernels.online_newton.OnlineNewton`). ``alpha_floor=False``
    runs the paper's algorithm as written, which on sparse data with rare
    features can take huge first steps.

    Parameters
    ----------
    sketch_size : int, default 20
        ``l`` (the paper's ``m``); capped at the number of features.
    method : {"rfd", "fd", "full"}, default "rfd"
        Estimate of the Hessian: a Robust Frequent Directions sketch (RFD-SON), a
        Frequent Directions sketch (FD-SON) or the full ``d x d`` matrix.
    alpha0 : float, default 0.0
        Initial regularisation ``alpha0 >= 0``.
    loss : {"squared", "logistic", "hinge"}, default "squared"
        Loss of the margin ``w^T x`` against labels mapped to {-1, +1}.
    prediction_bound : float or "auto", default "auto"
        Margins are kept in ``[-prediction_bound, prediction_bound]`` (the
        constraint set ``K_t``); ``"auto"`` is 1, the size of the labels.
    eta : float, default 1.0
        ``eta_t = eta / t`` (Algorithm 3's ``eta_t = O(1/t)``).
    mu : float or "auto", default "auto"
        ``mu_t = mu``; the sketched rows are ``sqrt(mu_t + eta_t) g_t``.
        ``"auto"``: half the loss's exp-concavity constant on the constraint set
        (``1 / (4 (C + 1)^2)`` squared, ``exp(-C) / 2`` logistic, 0 hinge).
    fit_intercept : bool, default True
        Learn an intercept (a constant feature appended to every row).
    update : {"buffered", "per_step"}, default "buffered"
        ``"buffered"``: the ``2 l`` buffer of Algorithm 6, O(l d) amortised per
        step; ``"per_step"``: a shrink after every example, as written in
        Algorithm 3 (O(l^2 d) per step).
    alpha_floor : bool, default True
        Keep alpha above the data-derived floor; False runs Algorithms 3 and 6 as
        written.
    block_rows : int, optional
        Rows per block handed to the compiled loop (and read from a Dask array or
        zarr store at a time).
    progress : bool or "auto", default False
        Show a tqdm progress bar over the rows of each pass (``"auto"``: when stderr
        is a terminal). False leaves it to the Dask config ``dasketch.progress``.
    random_state : None, optional
        Unused (the algorithm is deterministic); kept for API compatibility.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_seen_ : int
        Examples processed (those of weight > 0), over all passes.
    online_error_rate_ : float
        Fraction of examples (weighted by ``sample_weight``) misclassified by the
        prediction made before their label was revealed (the paper's online error
        rate); ``fit`` issues a ConvergenceWarning when it exceeds the
        majority-class rate.
    online_loss_ : float
        Mean loss suffered online (per learner; weighted mean).
    alpha_ : float or ndarray of shape (n_classes,)
        ``alpha`` of the sketch of each learner.
    prediction_bound_, mu_ : float
        The resolved constants.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when X was a DataFrame.
    learners_ : list of OnlineNewton
        The kernel states (sketch, iterate), one per binary problem.

    See Also
    --------
    RFDSONRegressor : The same online Newton step with the squared loss.
    dasketch.linear_model.DualRandomProjectionClassifier : Batch logistic
        regression or smoothed-hinge SVM, many passes, certified error bound.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import RFDSONClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((2000, 30)); y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> clf = RFDSONClassifier(sketch_size=5).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9), clf.n_seen_
    (True, 2000)
    """

    _parameter_constraints: dict = {**_BaseRFDSON._parameter_constraints,
                                    "loss": [StrOptions(set(ONLINE_LOSSES))]}
    _y_numeric = False
    _measure_name, _baseline_name = "error rate", "majority-class rate"

    @staticmethod
    def _label_bound(bound):
        return 1.0

    @staticmethod
    def _target_bound(y):
        return 1.0

    def _check_targets_within_bound(self, y):
        pass

    def _prepare_targets(self, y, first, classes):
        """+-1 targets, one column per binary problem (one-vs-rest)."""
        check_classification_targets(y)
        if first:
            classes = np.unique(y) if classes is None else np.unique(np.asarray(classes))
            if classes.size < 2:
                raise ValueError(f"{type(self).__name__} needs samples of at least 2 classes "
                                 f"in the data, but the data contains only one class: "
                                 f"{classes[0]!r}")
            self.classes_ = classes
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes={classes!r} differs from the classes seen before, "
                             f"{self.classes_!r}")
        known = np.isin(y, self.classes_)
        if not known.all():
            raise ValueError(f"y has labels {np.unique(y[~known])[:5]!r} outside the classes "
                             f"{self.classes_!r}")
        index = np.searchsorted(self.classes_, y)
        if self.classes_.size == 2:
            return np.where(index == 1, 1.0, -1.0)[:, None]
        return np.where(index[:, None] == np.arange(self.classes_.size), 1.0, -1.0)

    @staticmethod
    def _count_mistakes(z, targets, weights):
        """Weight of the examples misclassified online."""
        if z.shape[1] == 1:
            wrong = np.where(z[:, 0] > 0, 1.0, -1.0) != targets[:, 0]
        else:
            wrong = z.argmax(axis=1) != targets.argmax(axis=1)
        return float(weights[wrong].sum())

    @staticmethod
    def _baseline(targets, weights):
        """Weight of the mistakes of always predicting the majority class."""
        counts = weights @ (targets > 0)
        if targets.shape[1] == 1:
            counts = np.array([weights.sum() - counts[0], counts[0]])
        return float(weights.sum() - counts.max())

    @staticmethod
    def _online_measure(stats):
        return stats["mistakes"] / stats["weight"]

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One pass over the rows of ``X`` in order, continuing from the current model.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame, dask.array.Array, zarr.Array or path
            A Dask array or zarr store is read one row block at a time.
        y : array_like or dask.array.Array of shape (n,)
            Class labels, read block by block with ``X``.
        classes : array_like, optional
            All labels; inferred from ``y`` on the first call when omitted.
        sample_weight : array_like or dask.array.Array of shape (n,), optional
            Finite weights ``>= 0`` (default 1). Example ``t``'s loss is scaled by
            its weight, so its gradient and its sketched row are too (as in
            :class:`sklearn.linear_model.SGDClassifier`); an example of weight 0
            is skipped exactly as if it were absent. The online measures are
            weighted means. A weight is not a repetition of the example: an
            online step depends on the iterate each example meets.

        Returns
        -------
        self : RFDSONClassifier
            The estimator, updated.

        Raises
        ------
        DivergenceError
            When the iterates diverge (step size too large for the data); the
            model is then left as it was before the call.

        Examples
        --------
        >>> import numpy as np
        >>> from dasketch import RFDSONClassifier
        >>> X = np.random.default_rng(1).standard_normal((100, 8))
        >>> clf = RFDSONClassifier(sketch_size=4)
        >>> clf = clf.partial_fit(X[:50], X[:50, 0] > 0, classes=[False, True])
        >>> clf.partial_fit(X[50:], X[50:, 0] > 0).n_seen_
        100
        """
        self._partial_fit(X, y, classes, sample_weight)
        self.online_error_rate_ = self._stats["mistakes"] / self._stats["weight"]
        return self

    def _set_coef(self, coef, intercept):
        self.coef_, self.intercept_ = coef, intercept

    def decision_function(self, X):
        """Compute the margins ``clip(w^T x + b, -C, C)``.

        The H-norm projection of the iterate onto ``{|w^T x| <= C}`` moves the
        prediction exactly to the nearest of ``-C, C``.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame or dask.array.Array
            Rows to score.

        Returns
        -------
        ndarray or dask.array.Array of shape (n,) or (n, n_classes)
            One margin per row (per class for more than two classes); lazy for
            Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dasketch import RFDSONClassifier
        >>> X = np.random.default_rng(2).standard_normal((200, 5))
        >>> clf = RFDSONClassifier(sketch_size=2).fit(X, X[:, 0] > 0)
        >>> bool(np.abs(clf.decision_function(X)).max() <= 1.0)
        True
        """
        return self._decision(X)

    def predict(self, X):
        """Predict class labels: the class of the largest margin (binary: positive margin).

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame or dask.array.Array
            Rows to classify.

        Returns
        -------
        ndarray or dask.array.Array of shape (n,)
            Labels from ``classes_``; lazy for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dasketch import RFDSONClassifier
        >>> X = np.random.default_rng(3).standard_normal((500, 5))
        >>> y = np.where(X[:, 0] > 0, "yes", "no")
        >>> clf = RFDSONClassifier(sketch_size=3).fit(X, y)
        >>> bool(np.mean(clf.predict(X) == y) > 0.9)
        True
        """
        z = self.decision_function(X)
        classes = self.classes_
        if is_dask_collection(z):
            if z.ndim == 1:
                return z.map_blocks(lambda b: classes[(b > 0).astype(int)], dtype=classes.dtype)
            return z.map_blocks(lambda b: classes[b.argmax(axis=1)], drop_axis=1,
                                dtype=classes.dtype)
        return classes[(z > 0).astype(int)] if z.ndim == 1 else classes[z.argmax(axis=1)]

    def score(self, X, y, sample_weight=None):
        """Return the accuracy on ``(X, y)`` (computed for Dask input).

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame or dask.array.Array
            Rows to classify.
        y : array_like or dask.array.Array of shape (n,)
            True labels.
        sample_weight : array_like of shape (n,), optional
            Weights of the rows in the mean.

        Returns
        -------
        float
            Fraction of rows whose predicted label equals ``y``.
        """
        pred = self.predict(X)
        pred, y = (v.compute() if is_dask_collection(v) else v for v in (pred, y))
        return float(np.average(pred == np.asarray(y).ravel(), weights=sample_weight))
