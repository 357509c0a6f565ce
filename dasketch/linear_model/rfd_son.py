"""Online learners with a sketched Newton step (RFD-SON).

Thin estimators around :class:`dasketch.kernels.online_newton.OnlineNewton`: they
validate input, walk the rows in order (a Dask array or zarr store one row block
at a time, see :func:`dasketch._blocks.iter_row_blocks`) and expose the learned
model the scikit-learn way.

References
----------
.. [1] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019, Algorithms 3 and 6.
.. [2] H. Luo, A. Agarwal, N. Cesa-Bianchi, J. Langford, "Efficient second order
   online learning by sketching", NeurIPS 2016 (FD-SON).
"""

from __future__ import annotations

import numbers
import os
import sys

import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from dasketch._blocks import as_row_blocks, is_dask_collection, iter_row_blocks, matvec
from dasketch.kernels.frequent_directions import _check_finite
from dasketch.kernels.online_newton import DivergenceError, OnlineNewton

__all__ = ["DivergenceError", "RFDSONClassifier", "RFDSONRegressor"]


def _is_streamed(X):
    return is_dask_collection(X) or isinstance(X, (str, os.PathLike))


def _check_y_values(y, name="y"):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    if y.dtype.kind in "fc" and not np.isfinite(y).all():
        raise ValueError(f"{name} contains NaN or Inf")
    return y


def _with_intercept(block):
    ones = np.ones((block.shape[0], 1))
    if scipy.sparse.issparse(block):
        return scipy.sparse.hstack([block, ones], format="csr")
    return np.hstack([np.asarray(block, dtype=np.float64), ones])


class _BaseRFDSON(BaseEstimator):
    """Shared machinery of :class:`RFDSONClassifier` and :class:`RFDSONRegressor`."""

    _default_loss = "squared"
    _losses = ("squared",)

    def __init__(self, sketch_size=20, *, method="rfd", alpha0=0.0, loss="squared", prediction_bound=1.0,
                 eta=1.0, mu="auto", fit_intercept=False, update="buffered",
                 block_rows=None, progress=False, random_state=None):
        self.sketch_size = sketch_size
        self.method = method
        self.alpha0 = alpha0
        self.loss = loss
        self.prediction_bound = prediction_bound
        self.eta = eta
        self.mu = mu
        self.fit_intercept = fit_intercept
        self.update = update
        self.block_rows = block_rows
        self.progress = progress
        self.random_state = random_state

    # ------------------------------------------------------------ parameters
    def _label_bound(self):
        return 1.0

    def _step_constants(self):
        """Resolve ``mu="auto"``.

        ``mu`` defaults to half the exp-concavity constant of the loss on the
        constraint set ``|w^T x| <= prediction_bound`` (the ``mu_t`` of [1]_, the online Newton
        step's curvature): ``1 / (4 (prediction_bound + |y|max)^2)`` for the squared loss,
        ``exp(-prediction_bound) / 2`` for the logistic loss, 0 for the hinge loss (not
        exp-concave).
        """
        if self.loss not in self._losses:
            raise ValueError(f"loss must be one of {self._losses}, got {self.loss!r}")
        prediction_bound = self.prediction_bound
        if isinstance(prediction_bound, (bool, np.bool_)) or not isinstance(prediction_bound, numbers.Real) \
                or not np.isfinite(prediction_bound) or prediction_bound <= 0:
            raise ValueError(f"prediction_bound must be a finite number > 0, got {prediction_bound!r}")
        mu, eta = self.mu, self.eta
        if isinstance(mu, str):
            if mu != "auto":
                raise ValueError(f"mu must be a number >= 0 or 'auto', got {mu!r}")
            if self.loss == "squared":
                mu = 1.0 / (4.0 * (prediction_bound + self._label_bound()) ** 2)
            elif self.loss == "logistic":
                mu = float(np.exp(-prediction_bound)) / 2.0
            else:
                mu = 0.0
        return eta, mu

    def _new_learner(self, n_features):
        eta, mu = self._step_constants()
        if isinstance(self.alpha0, (bool, np.bool_)) or not isinstance(
                self.alpha0, numbers.Real) or not np.isfinite(self.alpha0) or self.alpha0 < 0:
            raise ValueError(f"alpha0 must be a finite number >= 0, got {self.alpha0!r}")
        sketch_size = self.sketch_size
        if self.method == "full":
            sketch_size = n_features
        return OnlineNewton(n_features, sketch_size, method=self.method,
                            alpha0=self.alpha0, loss=self.loss, prediction_bound=self.prediction_bound, eta=eta, mu=mu,
                            update=self.update)

    def _reset(self):
        for attr in ("learner_", "coef_", "intercept_", "n_seen_", "n_features_in_",
                     "online_loss_", "online_error_rate_", "alpha_", "classes_",
                     "_loss_sum", "_mistakes"):
            if hasattr(self, attr):
                delattr(self, attr)

    # ---------------------------------------------------------------- input
    def _check_X(self, X):
        """Validate the shape of ``X``; return (blocks or None, n_rows, n_features)."""
        if _is_streamed(X):
            blocks = as_row_blocks(X, block_rows=self.block_rows, name="X")
            return blocks, blocks.n_rows, blocks.n_features
        if not scipy.sparse.issparse(X):
            X = np.asarray(X)
            if X.dtype.kind not in "biuf":
                raise TypeError(f"X must hold real numbers, got dtype {X.dtype}")
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (rows are samples), got shape {X.shape}")
        if X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must have at least one row and one column, got shape "
                             f"{X.shape}")
        return None, X.shape[0], X.shape[1]

    def _iter_blocks(self, X, y, blocks):
        """Yield ``(start, X_block, y_block)`` in row order."""
        if blocks is None:
            step = self.block_rows or 65536
            X = scipy.sparse.csr_matrix(X) if scipy.sparse.issparse(X) else np.asarray(X)
            for start in range(0, X.shape[0], step):
                yield start, X[start:start + step], y[start:start + step]
        else:
            for start, _, block, y_block in iter_row_blocks(blocks, y):
                yield start, block, y_block

    def _progress_bar(self, n_rows):
        if not self.progress:
            return None
        from tqdm.auto import tqdm

        return tqdm(total=n_rows, unit="rows", desc=type(self).__name__,
                    disable=not (self.progress is True or sys.stderr.isatty()))

    # ------------------------------------------------------------- learning
    def partial_fit(self, X, y, **kwargs):
        """One pass over the rows of ``X`` in order, continuing from the current model.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, dask.array.Array or zarr path of shape (n, d)
            A Dask array or zarr store is read one row block at a time.
        y : array_like or dask.array.Array of shape (n,)

        Returns
        -------
        self

        Raises
        ------
        DivergenceError
            When the iterates diverge (step size too large for the data); the
            model is then left as it was before the call.
        """
        blocks, n_rows, n_features = self._check_X(X)
        if isinstance(y, (list, tuple)):
            y = np.asarray(y)
        if getattr(y, "ndim", None) != 1 or y.shape[0] != n_rows:
            raise ValueError(f"y must be 1-D with one entry per row of X ({n_rows}), got "
                             f"shape {getattr(y, 'shape', None)}")
        first = not hasattr(self, "learner_")
        if not first and n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} was "
                             f"fitted with {self.n_features_in_} features")
        self._prepare_targets(y, first, **kwargs)
        dim = n_features + bool(self.fit_intercept)
        if first:
            if self.method != "full" and isinstance(self.sketch_size, numbers.Integral) \
                    and not isinstance(self.sketch_size, (bool, np.bool_)) \
                    and self.sketch_size > n_features + bool(self.fit_intercept):
                raise ValueError(f"sketch_size must be an integer in [1, n_features={dim}]"
                                 f", got {self.sketch_size}")
            learner = self._new_learner(dim)
            loss_sum, mistakes, seen = 0.0, 0, 0
        else:
            learner = self.learner_.copy()
            loss_sum, mistakes, seen = self._loss_sum, self._mistakes, self.n_seen_
        bar = self._progress_bar(n_rows)
        try:
            for start, X_block, y_block in self._iter_blocks(X, y, blocks):
                _check_finite(X_block, start)
                target = self._encode(_check_y_values(y_block))
                if self.fit_intercept:
                    X_block = _with_intercept(X_block)
                # Each step is a few products with an l x d matrix: threaded BLAS
                # only adds synchronisation (several times slower on a busy machine).
                with threadpool_limits(limits=1, user_api="blas"):
                    z, losses = learner.fit_rows(
                        X_block, target, callback=None if bar is None else bar.update)
                loss_sum += float(losses.sum())
                mistakes += self._count_mistakes(z, target)
                seen += X_block.shape[0]
        finally:
            if bar is not None:
                bar.close()
        self.learner_ = learner
        self.n_features_in_ = n_features
        self._loss_sum, self._mistakes, self.n_seen_ = loss_sum, mistakes, seen
        self.online_loss_ = loss_sum / seen
        self.alpha_ = learner.alpha
        self._set_coef(learner.u)
        return self

    def fit(self, X, y, n_epochs=1, **kwargs):
        """Learn from scratch with ``n_epochs`` passes over the rows in order.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, dask.array.Array or zarr path
        y : array_like or dask.array.Array of shape (n,)
        n_epochs : int
            Number of passes (the paper's online setting is one pass).

        Returns
        -------
        self
        """
        if isinstance(n_epochs, (bool, np.bool_)) or not isinstance(
                n_epochs, numbers.Integral) or n_epochs < 1:
            raise ValueError(f"n_epochs must be a positive integer, got {n_epochs!r}")
        self._reset()
        for _ in range(int(n_epochs)):
            self.partial_fit(X, y, **kwargs)
        return self

    def _raw_decision(self, X):
        check_is_fitted(self, "learner_")
        u = self.learner_.u
        coef, intercept = u[:self.n_features_in_], (u[-1] if self.fit_intercept else 0.0)
        if _is_streamed(X):
            blocks = as_row_blocks(X, block_rows=self.block_rows, name="X")
            if blocks.n_features != self.n_features_in_:
                raise ValueError(f"X has {blocks.n_features} features, but "
                                 f"{type(self).__name__} was fitted with "
                                 f"{self.n_features_in_} features")
            return (matvec(blocks, coef)[:, 0] + intercept).clip(-self.prediction_bound, self.prediction_bound)
        _, _, n_features = self._check_X(X)
        if n_features != self.n_features_in_:
            raise ValueError(f"X has {n_features} features, but {type(self).__name__} was "
                             f"fitted with {self.n_features_in_} features")
        _check_finite(X if scipy.sparse.issparse(X) else np.asarray(X), 0)
        z = np.asarray(X @ coef, dtype=np.float64).ravel() + intercept
        return np.clip(z, -self.prediction_bound, self.prediction_bound)


class RFDSONClassifier(ClassifierMixin, _BaseRFDSON):
    """Binary classifier trained by the sketched online Newton step (RFD-SON).

    Implements Algorithm 3 of Luo, Chen, Zhang, Li, Zhang, "Robust Frequent
    Directions with application in online learning" (JMLR 2019) with the fast
    update of its Algorithm 6 (Appendix A): the Hessian estimate
    ``H = B^T B + alpha I`` comes from a Robust Frequent Directions sketch of the
    scaled gradients, each step and the closed-form projection onto
    ``K_t = {w : |w^T x_t| <= prediction_bound}`` cost O(l d) (O(l d + nnz) for sparse rows) by
    the Woodbury identity, and ``alpha0 = 0`` needs no tuning.
    ``method="fd"`` gives FD-SON (Luo, Agarwal, Cesa-Bianchi, Langford, NeurIPS
    2016) and ``method="full"`` the full-matrix online Newton step (FULL-ON,
    O(d^2) per step with ``alpha0 > 0``, O(d^3) with ``alpha0 = 0``; small d).

    Parameters
    ----------
    sketch_size : int
        ``l`` in ``[1, n_features]`` (the paper's ``m``).
    method : {"rfd", "fd", "full"}
    alpha0 : float
        Initial regularisation ``alpha0 >= 0``.
    loss : {"squared", "logistic", "hinge"}
        Loss of the margin ``w^T x`` against labels mapped to {-1, +1}.
    prediction_bound : float
        Predictions are kept in ``[-prediction_bound, prediction_bound]`` (the constraint set ``K_t``).
    eta : float
        ``eta_t = eta / t`` (Algorithm 3's ``eta_t = O(1/t)``).
    mu : float or "auto"
        ``mu_t = mu``; the sketched rows are ``sqrt(mu_t + eta_t) g_t``.
        ``"auto"``: half the loss's exp-concavity constant on ``|w^T x| <= prediction_bound``
        (``1 / (4 (prediction_bound + 1)^2)`` squared, ``exp(-prediction_bound) / 2`` logistic, 0 hinge).
        Larger ``eta`` and ``mu`` mean smaller steps; with ``eta = mu = 0``
        nothing is learned and a ValueError is raised.
    fit_intercept : bool
        Learn an intercept (a constant feature appended to every row).
    update : {"buffered", "per_step"}
        ``"buffered"``: the ``2 l`` buffer of Algorithm 6, O(l d) amortised per
        step; ``"per_step"``: a shrink after every example, as written in
        Algorithm 3 (O(l^2 d) per step).
    block_rows : int, optional
        Rows per block when reading a Dask array or zarr store.
    progress : bool or "auto"
        Show a tqdm progress bar over the rows of each pass; ``"auto"`` only
        when stderr is a terminal. Off by default.
    random_state : None
        Unused (the algorithm is deterministic); kept for API compatibility.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    n_seen_ : int
        Examples processed, over all passes.
    online_error_rate_ : float
        Fraction of examples misclassified by the prediction made before their
        label was revealed (the paper's online error rate).
    online_loss_ : float
        Mean loss suffered online.
    alpha_ : float
        ``alpha`` of the sketch (``alpha0 + shrinkage / 2`` for RFD).
    n_features_in_ : int
    learner_ : OnlineNewton
        The kernel state (sketch, iterate).

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

    _losses = ("squared", "logistic", "hinge")

    def _prepare_targets(self, y, first, classes=None):
        if first:
            if classes is None:
                values = y.compute() if is_dask_collection(y) else y
                classes = np.unique(_check_y_values(values))
            classes = np.asarray(classes)
            if classes.ndim != 1 or len(np.unique(classes)) != 2:
                raise ValueError(
                    f"{type(self).__name__} is a binary classifier: y must hold exactly "
                    f"2 classes (or pass classes= with 2 labels), got {classes!r}")
            self.classes_ = np.unique(classes)
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes={classes!r} differs from the classes seen before, "
                             f"{self.classes_!r}")

    def _encode(self, y):
        pos = y == self.classes_[1]
        if not np.all(pos | (y == self.classes_[0])):
            bad = np.unique(y[~(pos | (y == self.classes_[0]))])[:5]
            raise ValueError(f"y has labels {bad!r} outside the two classes "
                             f"{self.classes_!r}")
        return np.where(pos, 1.0, -1.0)

    @staticmethod
    def _count_mistakes(z, target):
        return int(np.count_nonzero(np.where(z > 0, 1.0, -1.0) != target))

    def partial_fit(self, X, y, classes=None):
        """One pass over the rows of ``X`` in order, continuing from the current model.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, dask.array.Array or zarr path of shape (n, d)
            A Dask array or zarr store is read one row block at a time.
        y : array_like or dask.array.Array of shape (n,)
        classes : array_like of shape (2,), optional
            The two labels; inferred from ``y`` on the first call when omitted.

        Returns
        -------
        self

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
        super().partial_fit(X, y, classes=classes)
        self.online_error_rate_ = self._mistakes / self.n_seen_
        return self

    def _set_coef(self, u):
        d = self.n_features_in_
        self.coef_ = u[:d].reshape(1, d).copy()
        self.intercept_ = np.array([u[d] if self.fit_intercept else 0.0])

    def decision_function(self, X):
        """Margin ``clip(w^T x, -prediction_bound, prediction_bound)``: the prediction of the projected iterate.

        The H-norm projection of the iterate onto ``{|w^T x| <= prediction_bound}`` moves the
        prediction exactly to the nearest of ``-prediction_bound, prediction_bound``. Lazy for Dask input.

        Examples
        --------
        >>> import numpy as np
        >>> from dasketch import RFDSONClassifier
        >>> X = np.random.default_rng(2).standard_normal((200, 5))
        >>> clf = RFDSONClassifier(sketch_size=2, prediction_bound=1.0).fit(X, X[:, 0] > 0)
        >>> bool(np.abs(clf.decision_function(X)).max() <= 1.0)
        True
        """
        return self._raw_decision(X)

    def predict(self, X):
        """Class labels (``classes_[1]`` where the margin is positive).

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
        if is_dask_collection(z):
            return z.map_blocks(lambda b: self.classes_[(b > 0).astype(int)],
                                dtype=self.classes_.dtype)
        return self.classes_[(z > 0).astype(int)]

    def score(self, X, y, sample_weight=None):
        """Accuracy on ``(X, y)`` (computed for Dask input)."""
        pred = self.predict(X)
        if is_dask_collection(pred):
            pred = pred.compute()
        if is_dask_collection(y):
            y = y.compute()
        return float(np.average(pred == np.asarray(y), weights=sample_weight))


class RFDSONRegressor(RegressorMixin, _BaseRFDSON):
    """Least-squares regression by the sketched online Newton step (RFD-SON).

    Algorithm 3 (fast variant: Algorithm 6) of Luo, Chen, Zhang, Li, Zhang
    (JMLR 2019) with the squared loss ``(w^T x - y)^2``; see
    :class:`RFDSONClassifier` for the algorithm and the parameters. Predictions
    are kept in ``[-prediction_bound, prediction_bound]``: choose ``prediction_bound`` at least as large as the targets.
    ``mu="auto"`` is ``1 / (16 prediction_bound^2)``, half the exp-concavity constant of the
    squared loss for ``|w^T x| <= prediction_bound`` and ``|y| <= prediction_bound``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_seen_ : int
    online_loss_ : float
        Mean squared error of the predictions made before each target was seen.
    alpha_ : float
    n_features_in_ : int
    learner_ : OnlineNewton

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import RFDSONRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((3000, 20)); y = X @ np.full(20, 0.05)
    >>> reg = RFDSONRegressor(sketch_size=10).fit(X, y, n_epochs=2)
    >>> bool(reg.score(X, y) > 0.9)
    True
    """

    def __init__(self, sketch_size=20, *, method="rfd", alpha0=0.0, prediction_bound=1.0, eta=1.0,
                 mu="auto", fit_intercept=False, update="buffered", block_rows=None,
                 progress=False, random_state=None):
        super().__init__(sketch_size, method=method, alpha0=alpha0, loss="squared", prediction_bound=prediction_bound,
                         eta=eta, mu=mu, fit_intercept=fit_intercept, update=update,
                         block_rows=block_rows, progress=progress,
                         random_state=random_state)

    def _label_bound(self):
        return self.prediction_bound

    def _prepare_targets(self, y, first):
        if y.dtype.kind not in "biuf":
            raise TypeError(f"y must hold real numbers, got dtype {y.dtype}")

    @staticmethod
    def _encode(y):
        return np.asarray(y, dtype=np.float64)

    @staticmethod
    def _count_mistakes(z, target):
        return 0

    def _set_coef(self, u):
        d = self.n_features_in_
        self.coef_ = u[:d].copy()
        self.intercept_ = float(u[d]) if self.fit_intercept else 0.0

    def predict(self, X):
        """Predictions ``clip(w^T x + b, -prediction_bound, prediction_bound)`` (lazy for Dask input)."""
        return self._raw_decision(X)

    def score(self, X, y, sample_weight=None):
        """Coefficient of determination R^2 (computed for Dask input)."""
        from sklearn.metrics import r2_score

        pred = self.predict(X)
        if is_dask_collection(pred):
            pred = pred.compute()
        if is_dask_collection(y):
            y = y.compute()
        return float(r2_score(np.asarray(y), pred, sample_weight=sample_weight))
