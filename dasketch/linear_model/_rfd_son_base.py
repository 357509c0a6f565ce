"""Shared machinery of the RFD-SON estimators (:mod:`dasketch.linear_model.rfd_son`,
:mod:`dasketch.linear_model.rfd_son_regressor`):
parameter resolution, validation, the walk over row blocks that feeds the compiled
kernel of :mod:`dasketch.kernels.online_newton`, online statistics and predictions."""

from __future__ import annotations

import numbers
import sys
import warnings

import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from dasketch._blocks import RowBlocks, iter_row_blocks, progress_wanted
from dasketch.kernels.online_newton import ONLINE_METHODS, ONLINE_UPDATES, OnlineNewton
from dasketch.kernels.shrink import check_finite_rows
from dasketch.linear_model._sketched_regression import check_sample_weight
from dasketch.utils._sklearn_compat import StrOptions, validate_parameter_constraints
from dasketch.utils.blockwise import affine_rows
from dasketch.utils.params import POSITIVE_INT, Interval
from dasketch.utils.validation import validate_input

_IN_MEMORY_BLOCK_ROWS = 65536
_NONNEGATIVE = Interval(numbers.Real, 0, np.inf, closed="left")


def _with_intercept(block):
    ones = np.ones((block.shape[0], 1))
    if scipy.sparse.issparse(block):
        return scipy.sparse.hstack([block, ones], format="csr")
    return np.hstack([np.asarray(block, dtype=np.float64), ones])


class _BaseRFDSON(BaseEstimator):
    """Shared machinery of :class:`RFDSONClassifier` and :class:`RFDSONRegressor`."""

    _parameter_constraints: dict = {
        "sketch_size": [POSITIVE_INT],
        "method": [StrOptions(set(ONLINE_METHODS))],
        "alpha0": [_NONNEGATIVE],
        "prediction_bound": [Interval(numbers.Real, 0, np.inf, closed="neither"),
                             StrOptions({"auto"})],
        "eta": [_NONNEGATIVE],
        "mu": [_NONNEGATIVE, StrOptions({"auto"})],
        "fit_intercept": ["boolean"],
        "update": [StrOptions(set(ONLINE_UPDATES))],
        "alpha_floor": ["boolean"],
        "block_rows": [POSITIVE_INT, None],
        "progress": ["boolean", StrOptions({"auto"})],
        "random_state": "no_validation",   # unused: the algorithm is deterministic
    }

    def __init__(self, sketch_size=20, *, method="rfd", alpha0=0.0, loss="squared",
                 prediction_bound="auto", eta=1.0, mu="auto", fit_intercept=True,
                 update="buffered", alpha_floor=True, block_rows=None, progress=False,
                 random_state=None):
        self.sketch_size = sketch_size
        self.method = method
        self.alpha0 = alpha0
        self.loss = loss
        self.prediction_bound = prediction_bound
        self.eta = eta
        self.mu = mu
        self.fit_intercept = fit_intercept
        self.update = update
        self.alpha_floor = alpha_floor
        self.block_rows = block_rows
        self.progress = progress
        self.random_state = random_state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------ parameters
    def _resolve_constants(self, target_bound):
        """Resolve ``prediction_bound="auto"`` and ``mu="auto"`` on the first fit.

        ``mu`` defaults to half the exp-concavity constant of the loss on the
        constraint set ``|w^T x| <= C`` (the ``mu_t`` of [1]_):
        ``1 / (4 (C + |y|max)^2)`` for the squared loss, ``exp(-C) / 2`` for the
        logistic loss, 0 for the hinge loss (not exp-concave).
        """
        bound = self.prediction_bound
        if isinstance(bound, str) and bound == "auto":
            bound = target_bound
        mu = self.mu
        if isinstance(mu, str) and mu == "auto":
            if self.loss == "squared":
                mu = 1.0 / (4.0 * (bound + self._label_bound(bound)) ** 2)
            else:
                mu = float(np.exp(-bound)) / 2.0 if self.loss == "logistic" else 0.0
        return float(bound), float(mu)

    def _new_learner(self, n_features):
        # A sketch as large as the dimension is exact: l is capped at d.
        return OnlineNewton(n_features, min(int(self.sketch_size), n_features),
                            method=self.method, alpha0=self.alpha0, loss=self.loss,
                            prediction_bound=self.prediction_bound_, eta=self.eta,
                            mu=self.mu_, update=self.update,
                            alpha_floor=bool(self.alpha_floor))

    # ---------------------------------------------------------------- input
    def _iter_blocks(self, X):
        """Yield ``(start, X_block)`` in row order (out-of-core: one block read at a
        time, its values checked as it arrives)."""
        if isinstance(X, RowBlocks):
            for start, _, block in iter_row_blocks(X):
                check_finite_rows(block, start)
                yield start, block
            return
        step = self.block_rows or _IN_MEMORY_BLOCK_ROWS
        if scipy.sparse.issparse(X):
            X = scipy.sparse.csr_matrix(X)
        for start in range(0, X.shape[0], step):
            yield start, X[start:start + step]

    def _progress_bar(self, n_rows):
        # progress=False leaves the choice to the Dask config "dasketch.progress"
        shown = self.progress is True or (not self.progress and progress_wanted())
        if not (shown or self.progress == "auto"):
            return None
        from tqdm.auto import tqdm

        return tqdm(total=n_rows, unit="rows", desc=type(self).__name__,
                    disable=not (shown or sys.stderr.isatty()))

    # ------------------------------------------------------------- learning
    def _partial_fit(self, X, y, classes=None, sample_weight=None):
        first = not hasattr(self, "learners_")
        if first:  # as scikit-learn's partial_fit: parameters are read on the first call
            self._validate_params()
        X, y = validate_input(self, X, y, reset=first, accept_sparse=("csr", "csc", "coo"),
                              y_numeric=self._y_numeric)
        weights = check_sample_weight(sample_weight, y.shape[0])
        if weights is None:
            weights = np.ones(y.shape[0])
        targets = self._prepare_targets(y, first, classes)
        counted = weights > 0  # examples of weight 0 are skipped as if absent
        if first:
            self.prediction_bound_, self.mu_ = self._resolve_constants(
                self._target_bound(y[counted]))
            dim = self.n_features_in_ + bool(self.fit_intercept)
            learners = [self._new_learner(dim) for _ in range(targets.shape[1])]
            stats = dict(loss_sum=0.0, mistakes=0.0, seen=0, weight=0.0, baseline=0.0)
        else:
            learners = [learner.copy() for learner in self.learners_]
            stats = dict(self._stats)
        self._check_targets_within_bound(y[counted])
        bar = self._progress_bar(X.shape[0])
        try:
            for start, X_block in self._iter_blocks(X):
                if self.fit_intercept:
                    X_block = _with_intercept(X_block)
                rows = slice(start, start + X_block.shape[0])
                z = np.empty((X_block.shape[0], len(learners)))
                # Each step is a few products with an l x d matrix: threaded BLAS
                # only adds synchronisation (several times slower on a busy machine).
                with threadpool_limits(limits=1, user_api="blas"):
                    for j, learner in enumerate(learners):
                        z[:, j], losses = learner.fit_rows(
                            X_block, targets[rows, j], weights=weights[rows],
                            callback=bar.update if bar is not None and j == 0 else None)
                        stats["loss_sum"] += float(losses.sum()) / len(learners)
                stats["mistakes"] += self._count_mistakes(z, targets[rows], weights[rows])
        finally:
            if bar is not None:
                bar.close()
        stats["seen"] += int(np.count_nonzero(counted))
        stats["weight"] += float(weights.sum())
        stats["baseline"] += self._baseline(targets, weights)
        self.learners_ = learners
        self._stats = stats
        self.n_seen_ = stats["seen"]
        self.online_loss_ = stats["loss_sum"] / stats["weight"]
        alphas = np.array([learner.alpha for learner in learners])
        self.alpha_ = float(alphas[0]) if alphas.size == 1 else alphas
        coef = np.array([learner.u for learner in learners])
        self._set_coef(coef[:, :self.n_features_in_],
                       coef[:, -1] if self.fit_intercept else np.zeros(len(learners)))
        return self

    def fit(self, X, y, n_epochs=1, sample_weight=None, **kwargs):
        """Learn from scratch with ``n_epochs`` passes over the rows in order.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame, dask.array.Array, zarr.Array or path
            A Dask array or zarr store is read one row block at a time.
        y : array_like or dask.array.Array of shape (n,)
            Labels or targets, read block by block with ``X``.
        n_epochs : int, default 1
            Number of passes (the paper's online setting is one pass).
        sample_weight : array_like or dask.array.Array of shape (n,), optional
            Weights ``>= 0`` of the examples, as in ``partial_fit``.
        **kwargs : dict
            Passed to ``partial_fit`` (the classifier's ``classes``).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        validate_parameter_constraints({"n_epochs": [POSITIVE_INT]}, {"n_epochs": n_epochs},
                                       caller_name=f"{type(self).__name__}.fit")
        for attr in ("learners_", "classes_"):
            if hasattr(self, attr):
                delattr(self, attr)
        for _ in range(int(n_epochs)):
            self.partial_fit(X, y, sample_weight=sample_weight, **kwargs)
        self._warn_if_worse_than_baseline(self._stats)
        return self

    def _warn_if_worse_than_baseline(self, stats):
        """ConvergenceWarning at the end of ``fit`` when the online predictions did
        worse than the trivial predictor (majority class, or predicting 0); chunks of
        ``partial_fit`` are not judged one by one (early chunks always look poor)."""
        measured, baseline = self._online_measure(stats), stats["baseline"] / stats["weight"]
        if measured > baseline:
            warnings.warn(
                f"{type(self).__name__}: the online {self._measure_name} over "
                f"{stats['seen']} examples is {measured:.4g}, worse than the "
                f"{self._baseline_name} ({baseline:.4g}); more passes (n_epochs), a larger "
                f"sketch_size or a larger alpha0 may help", ConvergenceWarning, stacklevel=3)

    def _decision(self, X):
        check_is_fitted(self, "learners_")
        X = validate_input(self, X, reset=False, accept_sparse=("csr", "csc", "coo"))
        coef, intercept = np.atleast_2d(self.coef_).T, np.atleast_1d(self.intercept_)
        bound = self.prediction_bound_
        if isinstance(X, RowBlocks):  # lazy; a block with NaN or Inf raises when computed
            z = affine_rows(X, coef, intercept, np.float64).clip(-bound, bound)
        else:
            z = np.clip(np.asarray(X @ coef, dtype=np.float64) + intercept, -bound, bound)
        return z[:, 0] if coef.shape[1] == 1 else z
