"""The projections of :class:`dasketch.SketchPCA`: :meth:`~Projections.transform`
and :meth:`~Projections.inverse_transform`, of numpy, out-of-core and other
array libraries' inputs alike."""

from __future__ import annotations

import numpy as np
from sklearn.base import TransformerMixin
from sklearn.utils import check_array
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import (
    RowBlocks,
    affine_rows,
    foreign_array_type,
    is_out_of_core,
    result_meta,
    row_blocks_in_library,
)


class Projections(TransformerMixin):
    """:meth:`transform` and :meth:`inverse_transform` of fitted ``components_``,
    ``explained_variance_`` and ``mean_`` (with ``whiten`` and the column scaling
    of :class:`dasketch.SketchPCA`). A :class:`~sklearn.base.TransformerMixin`,
    whose subclasses' own ``transform`` scikit-learn wraps for ``set_output``."""

    def _projection(self):
        """``(matrix, scale)`` of the transform: components scaled for ``whiten``
        (variances clipped below at the dtype's eps, as scikit-learn does)."""
        scale = np.ones(self.n_components_)
        if self.whiten:
            scale = np.maximum(np.sqrt(self.explained_variance_.astype(np.float64)),
                               np.finfo(self.components_.dtype).eps)
        return self.components_.T.astype(np.float64) / scale, scale

    def transform(self, X):
        """Project ``X`` on the principal axes.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts, validated exactly as there.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_components)
            The projections (divided by ``sqrt(explained_variance_)`` when
            ``whiten``), in the dtype of ``components_``; for out-of-core ``X``
            (Dask, ``zarr.Array``, zarr path or URL) a lazy Dask array whose blocks
            raise on NaN or Inf when computed. ``X`` of another array library
            (CuPy) is projected in its namespace and, by scikit-learn's array API
            convention, the result is numpy on the host (Dask: numpy blocks);
            with ``sklearn.set_config(array_api_dispatch=True)`` it stays in
            ``X``'s library, on its device (Dask: blocks of that library).
        """
        check_is_fitted(self, "components_")
        return self._in_kind_of(X, self._transform(self._validated_rows(X),
                                                   result_meta(X, 2, self.components_.dtype)))

    def _transform(self, X, meta=None):
        """:meth:`transform` of validated ``X`` (RowBlocks: lazy; results in the
        library of ``meta`` when given)."""
        projection = self._projection()[0]
        offset = -(self.mean_.astype(np.float64) @ projection)
        if not isinstance(X, RowBlocks):
            return (np.asarray(X @ projection) + offset).astype(self.components_.dtype,
                                                               copy=False)
        return affine_rows(X, projection, offset, self.components_.dtype, meta)

    def inverse_transform(self, X):
        """Map projections back to the input space (undoing ``whiten``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Projections, as :meth:`transform` returns them.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_features)
            Rows in the input space; lazy for out-of-core ``X``, in the library
            :meth:`transform` says.
        """
        check_is_fitted(self, "components_")
        meta, original = result_meta(X, 2, self.components_.dtype), X
        if is_out_of_core(X) or foreign_array_type(X) is not None:
            X = row_blocks_in_library(X, self.block_rows)
            width = X.n_features
        else:
            X = check_array(X, dtype=(np.float64, np.float32))
            width = X.shape[1]
        if width != self.n_components_:
            raise ValueError(f"X has {width} columns, but {type(self).__name__} has "
                             f"{self.n_components_} components")
        matrix = (self.components_.astype(np.float64).T * self._projection()[1]).T
        offset = self.mean_.astype(np.float64)
        if hasattr(self, "scaler_mean_"):  # undo the scaling too: x = z scale + mean
            matrix, offset = matrix * self.scaler_scale_, offset * self.scaler_scale_ \
                + self.scaler_mean_
        if isinstance(X, RowBlocks):
            return self._in_kind_of(original, affine_rows(X, matrix, offset,
                                                          self.components_.dtype, meta))
        return (X @ matrix + offset).astype(self.components_.dtype, copy=False)
