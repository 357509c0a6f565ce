"""Estimators built on a Frequent Directions sketch."""

from __future__ import annotations

import numbers

import dask.array as da
import numpy as np
import scipy.sparse
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import as_row_blocks
from dasketch.sketching import sketch


class SketchPCA(TransformerMixin, BaseEstimator):
    """Principal component analysis from a centred Robust Frequent Directions sketch.

    One pass over the data (block sketches merged in a tree, see
    :func:`dasketch.sketch`) gives ``B`` with ``B^T B + alpha I`` within
    ``error_bound`` of the centred Gram ``A_c^T A_c`` in spectral norm (Luo et al.,
    JMLR 2019, Theorem 2). The principal axes are the top right singular vectors
    of ``B``; the eigenvalue estimates ``s_i^2 + alpha`` are within
    ``error_bound`` of the exact ones (Weyl's inequality).

    Parameters
    ----------
    n_components : int
        Number of components to keep.
    sketch_size : int, optional
        ``l``; default ``max(2 * n_components, n_components + 10)``.
    method : {"rfd", "fd"}
    split_every, block_rows
        See :func:`dasketch.sketch`.

    Attributes
    ----------
    components_ : ndarray of shape (n_components, n_features)
    singular_values_ : ndarray of shape (n_components,)
        Estimated singular values of the centred data, ``sqrt(s_i^2 + alpha)``.
    explained_variance_ : ndarray of shape (n_components,)
        ``singular_values_ ** 2 / (n_samples - 1)``.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        Relative to the exact total variance (tracked during the pass).
    mean_ : ndarray of shape (n_features,)
    n_features_in_ : int
    n_samples_ : int
    sketch_ : dasketch.Sketch
        The centred sketch, with its certified ``error_bound``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import SketchPCA
    >>> X = np.random.default_rng(0).standard_normal((500, 10)) * np.arange(10, 0, -1)
    >>> pca = SketchPCA(n_components=2, sketch_size=10).fit(X)
    >>> pca.transform(X).shape
    (500, 2)
    """

    def __init__(self, n_components=None, sketch_size=None, *, method="rfd", split_every=None,
                 block_rows=None):
        self.n_components = n_components
        self.sketch_size = sketch_size
        self.method = method
        self.split_every = split_every
        self.block_rows = block_rows

    def fit(self, X, y=None):
        """Sketch the centred rows of ``X`` and extract the principal axes."""
        if isinstance(self.n_components, (bool, np.bool_)) or not isinstance(
            self.n_components, numbers.Integral
        ) or self.n_components < 1:
            raise ValueError(f"n_components must be a positive integer, got "
                             f"{self.n_components!r}")
        sketch_size = self.sketch_size
        if sketch_size is None:
            sketch_size = max(2 * self.n_components, self.n_components + 10)
        if sketch_size <= self.n_components:
            raise ValueError(f"sketch_size must exceed n_components ({self.n_components}), "
                             f"got {sketch_size}")
        blocks = as_row_blocks(X, block_rows=self.block_rows)
        if self.n_components > blocks.n_features:
            raise ValueError(f"n_components ({self.n_components}) must not exceed the number "
                             f"of features ({blocks.n_features})")
        sk = sketch(blocks, sketch_size, method=self.method, center=True,
                    split_every=self.split_every)
        s, Vt = sk.singular_values(), sk.components()
        k = self.n_components
        top = np.zeros(k)
        top[:min(k, s.size)] = s[:k] ** 2
        eigenvalues = top + sk.alpha
        axes = np.zeros((k, sk.n_features))
        axes[:min(k, Vt.shape[0])] = Vt[:k]
        self.sketch_ = sk
        self.components_ = axes
        self.singular_values_ = np.sqrt(eigenvalues)
        dof = max(sk.n_rows - 1, 1)
        self.explained_variance_ = eigenvalues / dof
        total = sk.frobenius_sq / dof
        self.explained_variance_ratio_ = (self.explained_variance_ / total if total > 0
                                          else np.zeros(k))
        self.mean_ = sk.mean
        self.n_features_in_ = sk.n_features
        self.n_samples_ = sk.n_rows
        return self

    def transform(self, X):
        """Project ``X`` on the principal axes; lazy for Dask input."""
        check_is_fitted(self, "components_")
        projection = self.components_.T
        if isinstance(X, da.Array):
            if X.ndim != 2 or X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
            return (X - self.mean_) @ projection
        if scipy.sparse.issparse(X):
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X must have {self.n_features_in_} columns, got {X.shape[1]}")
            return np.asarray(X @ projection) - self.mean_ @ projection
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        return (X - self.mean_) @ projection

    def inverse_transform(self, Z):
        """Map projections back to the input space."""
        check_is_fitted(self, "components_")
        return Z @ self.components_ + self.mean_
