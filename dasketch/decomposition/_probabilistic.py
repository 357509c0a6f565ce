"""The probabilistic PCA model (Tipping and Bishop, 1999) of the fitted
components, variances and noise of :class:`dasketch.SketchPCA`: its precision
and the likelihood of samples under it."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import (
    RowBlocks,
    compute,
    gaussian_log_likelihood_block,
    map_rows,
    result_meta,
)


def gaussian_log_likelihood(X, mean, precision, meta=None):
    """Log-density of each row of ``X`` under ``N(mean, precision^{-1})``: an
    ndarray for in-memory ``X``, a lazy Dask array for RowBlocks (whose blocks
    raise on NaN or Inf when computed), in the library of ``meta`` when given
    (:func:`~dasketch._blocks.result_meta`). ``precision=None`` stands for a
    singular covariance: every row gets ``-inf``, as a degenerate Gaussian puts
    no density off a set of measure zero."""
    d = mean.shape[0]
    constant = 0.0
    if precision is not None:
        sign, logdet = np.linalg.slogdet(precision)
        constant = -0.5 * (d * np.log(2.0 * np.pi) - (logdet if sign > 0 else -np.inf))
    shared = {"mean": mean, "precision": precision, "constant": constant}
    if isinstance(X, RowBlocks):
        if meta is not None:
            shared["on_host"] = False
        return map_rows(X, gaussian_log_likelihood_block, shared=shared, keeps_block=False,
                        meta=meta)
    return gaussian_log_likelihood_block(X, 0, X.shape[0], **shared)


class ProbabilisticPCA:
    """The probabilistic PCA model of fitted ``components_``,
    ``explained_variance_``, ``noise_variance_`` and ``mean_`` (with ``whiten``
    and the column scaling of :class:`dasketch.SketchPCA`)."""

    def _singular(self):
        """Whether the probabilistic PCA covariance is singular: no noise, and fewer
        components than features or a component of (numerically) zero variance."""
        variances = np.asarray(self.explained_variance_, dtype=np.float64)
        if self.noise_variance_ > 0:
            return False
        eps = np.finfo(self.components_.dtype).eps
        return self.n_components_ < self.n_features_in_ or \
            variances.min() <= self.n_features_in_ * eps * variances.max()

    def get_precision(self):
        """Compute the precision of the probabilistic PCA model (Tipping and Bishop, 1999).

        It is the inverse of :meth:`get_covariance` as scikit-learn's PCA defines it
        (with ``whiten``, its covariance scales the components by
        ``sqrt(explained_variance_)``). With the orthonormal components ``V`` and
        ``e`` the variances in excess of the noise ``s2``, ``C = V^T diag(e) V +
        s2 I`` and ``C^{-1} = I / s2 - V^T diag(e / (s2 (s2 + e))) V``, which stays
        finite when a component has no excess variance.

        Returns
        -------
        ndarray of shape (n_features, n_features)
            ``C^{-1}``, in the dtype of ``components_``.

        Raises
        ------
        numpy.linalg.LinAlgError
            When the covariance is singular (``noise_variance_ == 0`` with fewer
            components than features, or a component without variance).
        """
        check_is_fitted(self, "components_")
        if self._singular():
            raise np.linalg.LinAlgError(
                f"the model's covariance is singular (noise_variance_ = 0 with "
                f"{self.n_components_} components for {self.n_features_in_} features, or "
                "a component without variance): it has no precision; fit fewer components "
                "than min(n_samples, n_features) for a proper model")
        axes = self.components_.astype(np.float64)
        variances = self.explained_variance_.astype(np.float64)
        noise = float(self.noise_variance_)
        excess = np.maximum(variances - noise, 0.0)
        if self.whiten:
            excess *= variances
        if noise == 0:
            return ((axes.T / excess) @ axes).astype(self.components_.dtype)
        precision = -(axes.T * (excess / (noise * (noise + excess)))) @ axes
        precision[np.diag_indices_from(precision)] += 1.0 / noise
        return precision.astype(self.components_.dtype)

    def score_samples(self, X):
        """Compute the log-likelihood of each sample under the probabilistic PCA model.

        As :meth:`sklearn.decomposition.PCA.score_samples`. A singular model (see
        :meth:`get_precision`) gives ``-inf`` for every sample, as scikit-learn's PCA
        does.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,)
            Log-likelihoods; lazy for out-of-core ``X``. For ``X`` of another array
            library (CuPy), computed in its namespace and returned as
            :meth:`transform` returns projections (numpy on the host unless
            scikit-learn's ``array_api_dispatch`` is on).
        """
        return self._log_likelihoods(X, result_meta(X, 1, np.float64))

    def _log_likelihoods(self, X, meta=None):
        """:meth:`score_samples`, in the library of ``meta`` when given."""
        check_is_fitted(self, "components_")
        return self._in_kind_of(X, self._score_samples(self._validated_rows(X), meta))

    def _score_samples(self, X, meta=None):
        """:meth:`score_samples` of validated ``X`` (RowBlocks: lazy)."""
        precision = None if self._singular() else self.get_precision().astype(np.float64)
        return gaussian_log_likelihood(X, self.mean_.astype(np.float64), precision, meta)

    def score(self, X, y=None):
        """Return the average log-likelihood of the samples under the probabilistic PCA model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts.
        y : None, optional
            Ignored.

        Returns
        -------
        float
            The mean of :meth:`score_samples` (higher is better).
        """
        log_likelihood = self._log_likelihoods(X)
        if not isinstance(log_likelihood, np.ndarray):
            (log_likelihood,) = compute(log_likelihood)
        return float(np.mean(log_likelihood))
