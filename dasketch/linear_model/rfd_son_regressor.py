"""Least-squares regression by the sketched online Newton step (RFD-SON):
:class:`RFDSONRegressor`, on the machinery shared with the classifier
(:mod:`dasketch.linear_model._rfd_son_base`).

References
----------
.. [1] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019, Algorithms 3 and 6.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.metrics import r2_score

from dasketch._blocks import is_dask_collection
from dasketch.linear_model._rfd_son_base import _BaseRFDSON

__all__ = ["RFDSONRegressor"]


class RFDSONRegressor(RegressorMixin, _BaseRFDSON):
    """Least-squares regression by the sketched online Newton step (RFD-SON).

    Algorithm 3 (fast variant: Algorithm 6) of Luo, Chen, Zhang, Li, Zhang
    (JMLR 2019) with the squared loss ``(w^T x - y)^2``; see
    :class:`RFDSONClassifier` for the algorithm, the warm-up floor of alpha and
    the parameters. Predictions are kept in ``[-C, C]`` with ``C =
    prediction_bound``: ``"auto"`` (default) takes the largest ``|y|`` of the
    first fit; when later targets (or the targets of an explicit bound) exceed
    it, a warning says that predictions are clipped. ``mu="auto"`` is
    ``1 / (16 C^2)``, half the exp-concavity constant of the squared loss for
    ``|w^T x| <= C`` and ``|y| <= C``.

    Parameters
    ----------
    sketch_size : int, default 20
        ``l`` (the paper's ``m``); capped at the number of features.
    method : {"rfd", "fd", "full"}, default "rfd"
        Estimate of the Hessian, as for :class:`RFDSONClassifier`.
    alpha0 : float, default 0.0
        Initial regularisation ``alpha0 >= 0``.
    prediction_bound : float or "auto", default "auto"
        ``C``: predictions are kept in ``[-C, C]``; ``"auto"`` is the largest
        ``|y|`` of the first fit.
    eta : float, default 1.0
        ``eta_t = eta / t``.
    mu : float or "auto", default "auto"
        ``mu_t = mu``; ``"auto"`` is ``1 / (16 C^2)``.
    fit_intercept : bool, default True
        Learn an intercept (a constant feature appended to every row).
    update : {"buffered", "per_step"}, default "buffered"
        As for :class:`RFDSONClassifier`.
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
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    n_seen_ : int
    online_loss_ : float
        Mean squared error (weighted by ``sample_weight``) of the predictions
        made before each target was seen;
        ``fit`` issues a ConvergenceWarning when it exceeds the mean of ``y^2``
        (the error of predicting 0).
    alpha_, prediction_bound_, mu_ : float
    n_features_in_ : int
    learners_ : list of one OnlineNewton

    See Also
    --------
    RFDSONClassifier : The same online Newton step for classification.
    dasketch.linear_model.SketchLstsqRegressor : Batch least squares to a
        certified tolerance.
    dasketch.linear_model.PWSGDRegressor : Preconditioned weighted SGD for l2 and
        l1 regression.
    dasketch.linear_model.DualRandomProjectionRegressor : Ridge regression with
        ``d >> n`` by dual random projection.

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

    _y_numeric = True
    _measure_name, _baseline_name = "mean squared error", "mean of y^2"

    def __init__(self, sketch_size=20, *, method="rfd", alpha0=0.0, prediction_bound="auto",
                 eta=1.0, mu="auto", fit_intercept=True, update="buffered", alpha_floor=True,
                 block_rows=None, progress=False, random_state=None):
        super().__init__(sketch_size, method=method, alpha0=alpha0, loss="squared",
                         prediction_bound=prediction_bound, eta=eta, mu=mu,
                         fit_intercept=fit_intercept, update=update, alpha_floor=alpha_floor,
                         block_rows=block_rows, progress=progress, random_state=random_state)

    @staticmethod
    def _label_bound(bound):
        return bound

    @staticmethod
    def _target_bound(y):
        top = float(np.abs(y).max()) if y.size else 0.0
        return top if top > 0 else 1.0

    def _check_targets_within_bound(self, y):
        top = float(np.abs(y).max())
        if top > self.prediction_bound_:
            warnings.warn(
                f"targets reach |y| = {top:.4g}, beyond prediction_bound = "
                f"{self.prediction_bound_:.4g}: predictions are clipped to "
                f"[-{self.prediction_bound_:.4g}, {self.prediction_bound_:.4g}]; set "
                f"prediction_bound='auto' or at least {top:.4g}", UserWarning, stacklevel=4)

    @staticmethod
    def _prepare_targets(y, first, classes):
        targets = np.asarray(y, dtype=np.float64)[:, None]
        if not np.isfinite(targets).all():  # a None in y is a NaN here
            raise ValueError("y contains NaN or Inf; only finite values are accepted")
        return targets

    @staticmethod
    def _count_mistakes(z, targets, weights):
        return 0.0

    @staticmethod
    def _baseline(targets, weights):
        return float((weights * targets[:, 0]) @ targets[:, 0])

    @staticmethod
    def _online_measure(stats):
        return stats["loss_sum"] / stats["weight"]

    def partial_fit(self, X, y, sample_weight=None):
        """Make one pass over the rows of ``X`` in order, continuing from the current model.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame, dask.array.Array, zarr.Array or path
            A Dask array or zarr store is read one row block at a time.
        y : array_like or dask.array.Array of shape (n,)
            Targets, read block by block with ``X``.
        sample_weight : array_like or dask.array.Array of shape (n,), optional
            Finite weights ``>= 0`` (default 1): example ``t``'s loss is
            ``w_t (w^T x_t - y_t)^2``, so its gradient and its sketched row are
            scaled by ``w_t``; an example of weight 0 is skipped exactly as if it
            were absent (also for ``prediction_bound="auto"``). A weight is not a
            repetition of the example (see :meth:`RFDSONClassifier.partial_fit`).

        Returns
        -------
        self : RFDSONRegressor
            The estimator, updated.
        """
        return self._partial_fit(X, y, sample_weight=sample_weight)

    def _set_coef(self, coef, intercept):
        self.coef_, self.intercept_ = coef[0], float(intercept[0])

    def predict(self, X):
        """Predict ``clip(w^T x + b, -C, C)`` for every row.

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame or dask.array.Array
            Rows to predict.

        Returns
        -------
        ndarray or dask.array.Array of shape (n,)
            Predictions; lazy for Dask input.
        """
        return self._decision(X)

    def score(self, X, y, sample_weight=None):
        """Return the coefficient of determination R^2 (computed for Dask input).

        Parameters
        ----------
        X : ndarray, scipy.sparse matrix, DataFrame or dask.array.Array
            Rows to predict.
        y : array_like or dask.array.Array of shape (n,)
            True targets.
        sample_weight : array_like of shape (n,), optional
            Weights of the rows.

        Returns
        -------
        float
            ``1 - SS_res / SS_tot``, as :func:`sklearn.metrics.r2_score`.
        """
        pred = self.predict(X)
        pred, y = (v.compute() if is_dask_collection(v) else v for v in (pred, y))
        return float(r2_score(np.asarray(y), pred, sample_weight=sample_weight))
