"""Estimators built on a Frequent Directions sketch."""

from __future__ import annotations

import numbers
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import RowBlocks, as_row_blocks, compute
from dasketch.kernels.frequent_directions import METHODS
from dasketch.sketching import sketch
from dasketch.utils.blockwise import affine_rows, gaussian_log_likelihood
from dasketch.utils.validation import validate_input

# Default number of components when n_components is None (capped by n_features).
DEFAULT_COMPONENTS = 10


class SketchPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Principal component analysis from a centred Robust Frequent Directions sketch.

    One pass over the data (block sketches merged in a tree, see
    :func:`dasketch.sketch`) gives ``B`` with ``B^T B + alpha I`` within
    ``error_bound`` of the centred Gram ``A_c^T A_c`` in spectral norm (Luo et al.,
    JMLR 2019, Algorithms 1-2 and Theorem 2). The principal axes are the top right
    singular vectors of ``B`` (signs fixed as :func:`sklearn.utils.extmath.svd_flip`
    does); the eigenvalue estimates ``s_i^2 + alpha`` are within ``error_bound``
    of the exact ones (Weyl's inequality).

    Parameters
    ----------
    n_components : int, optional
        Number of components to keep; default ``min(10, n_features)``. At most
        ``n_features``.
    sketch_size : int, optional
        ``l``, more than ``n_components``; default ``max(2 k, k + 10)`` for
        ``k = n_components``, capped at ``n_features + 1`` (a sketch of that
        size is exact), so the defaults work on data of any size.
    method : {"rfd", "fd"}
    split_every, block_rows
        See :func:`dasketch.sketch`.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
        In the dtype of ``X`` (float32 stays float32; the sketch accumulates in
        float64). Rows beyond the rank of the sketch are zero.
    singular_values_ : ndarray of shape (n_components,)
        Estimated singular values of the centred data, ``sqrt(s_i^2 + alpha)``.
    explained_variance_ : ndarray of shape (n_components,)
        ``singular_values_ ** 2 / (n_samples - 1)``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Relative to the exact total variance (tracked during the pass).
    noise_variance_ : float
        Mean variance outside the components (exact total variance minus
        ``explained_variance_``, over the remaining ``n_features - n_components``
        directions), as in the probabilistic PCA of :meth:`score`.
    mean_ : ndarray of shape (n_features,)
    n_components_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        For a pandas DataFrame ``X``.
    n_samples_ : int
    sketch_ : dasketch.Sketch
        The centred sketch, with its certified ``error_bound``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import SketchPCA
    >>> X = np.random.default_rng(0).standard_normal((500, 10)) * np.arange(10, 0, -1)
    >>> pca = SketchPCA(n_components=2, sketch_size=10).fit(X)
    >>> pca.transform(X).shape, pca.get_feature_names_out().tolist()
    ((500, 2), ['sketchpca0', 'sketchpca1'])
    """

    _parameter_constraints = {
        "n_components": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "sketch_size": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "method": [StrOptions(set(METHODS))],
        "split_every": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "block_rows": [Interval(numbers.Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_components=None, sketch_size=None, *, method="rfd", split_every=None,
                 block_rows=None):
        self.n_components = n_components
        self.sketch_size = sketch_size
        self.method = method
        self.split_every = split_every
        self.block_rows = block_rows

    def _sizes(self, n_features):
        """``(n_components, sketch_size)`` by the rule in the class docstring."""
        k = min(DEFAULT_COMPONENTS, n_features) if self.n_components is None \
            else self.n_components
        if k > n_features:
            raise ValueError(f"n_components ({k}) must not exceed the number of features "
                             f"of X ({n_features})")
        if self.sketch_size is None:
            return k, min(max(2 * k, k + 10), n_features + 1)
        if self.sketch_size <= k:
            raise ValueError(f"sketch_size must exceed n_components ({k}), got "
                             f"{self.sketch_size}")
        return k, self.sketch_size

    def fit(self, X, y=None):
        """Sketch the centred rows of ``X`` (numpy, pandas, scipy.sparse, Dask,
        ``zarr.Array`` or zarr path/URL) and extract the principal axes."""
        self._validate_params()
        X = validate_input(self, X, reset=True, accept_sparse="csr")
        blocks = as_row_blocks(X, block_rows=self.block_rows, name="X")
        k, sketch_size = self._sizes(blocks.n_features)
        sk = sketch(blocks, sketch_size, method=self.method, center=True,
                    split_every=self.split_every)
        s, Vt = sk.singular_values(), sk.components()
        rank = min(k, s.size)
        eigenvalues = np.zeros(k)
        eigenvalues[:rank] = s[:rank] ** 2
        eigenvalues += sk.alpha
        axes = np.zeros((k, sk.n_features))
        axes[:rank] = svd_flip(None, np.array(Vt[:rank]), u_based_decision=False)[1]
        dtype = blocks.dtype if blocks.dtype in (np.float32, np.float64) else np.float64
        dof = max(sk.n_rows - 1, 1)
        total = sk.frobenius_sq / dof
        self.sketch_ = sk
        self.components_ = axes.astype(dtype)
        self.singular_values_ = np.sqrt(eigenvalues).astype(dtype)
        self.explained_variance_ = (eigenvalues / dof).astype(dtype)
        self.explained_variance_ratio_ = (self.explained_variance_ / total if total > 0
                                          else np.zeros(k, dtype=dtype))
        remaining = sk.n_features - k
        self.noise_variance_ = (max(total - float(np.sum(eigenvalues / dof)), 0.0) / remaining
                                if remaining > 0 else 0.0)
        self.mean_ = np.asarray(sk.mean).astype(dtype)
        self.n_components_ = k
        self._n_features_out = k
        self.n_samples_ = sk.n_rows
        return self

    def transform(self, X):
        """Project ``X`` on the principal axes.

        ``X`` is validated exactly as in ``fit``; out-of-core ``X`` (Dask,
        ``zarr.Array``, zarr path or URL) gives a lazy Dask array whose blocks
        raise on NaN or Inf when computed. The result has the dtype of
        ``components_``.
        """
        check_is_fitted(self, "components_")
        X = validate_input(self, X, reset=False, accept_sparse="csr")
        projection = self.components_.T
        offset = -(self.mean_ @ projection)
        if not isinstance(X, RowBlocks):
            return (np.asarray(X @ projection) + offset).astype(self.components_.dtype,
                                                               copy=False)
        return affine_rows(X, projection, offset, self.components_.dtype)

    def inverse_transform(self, X):
        """Map projections ``X`` (n, n_components) back to the input space."""
        check_is_fitted(self, "components_")
        X = check_array(X, dtype=(np.float64, np.float32))
        if X.shape[1] != self.n_components_:
            raise ValueError(f"X has {X.shape[1]} columns, but {type(self).__name__} has "
                             f"{self.n_components_} components")
        return X @ self.components_ + self.mean_

    def get_covariance(self):
        """Covariance of the probabilistic PCA model (Tipping and Bishop, 1999):
        ``components_^T diag(explained_variance_ - noise) components_ + noise I``."""
        check_is_fitted(self, "components_")
        excess = np.maximum(self.explained_variance_ - self.noise_variance_, 0.0)
        covariance = (self.components_.T * excess) @ self.components_
        covariance[np.diag_indices_from(covariance)] += self.noise_variance_
        return covariance

    def score_samples(self, X):
        """Log-likelihood of each sample under the probabilistic PCA model (as
        :meth:`sklearn.decomposition.PCA.score_samples`); lazy for out-of-core X."""
        check_is_fitted(self, "components_")
        X = validate_input(self, X, reset=False, accept_sparse="csr")
        precision = np.linalg.pinv(self.get_covariance().astype(np.float64), hermitian=True)
        return gaussian_log_likelihood(X, self.mean_.astype(np.float64), precision)

    def score(self, X, y=None):
        """Average log-likelihood of the samples of ``X`` under the probabilistic
        PCA model (higher is better)."""
        log_likelihood = self.score_samples(X)
        if not isinstance(log_likelihood, np.ndarray):
            (log_likelihood,) = compute(log_likelihood)
        return float(np.mean(log_likelihood))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
