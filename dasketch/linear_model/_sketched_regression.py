"""What the sketch-preconditioned regressors share: input validation (``X``,
``y``, ``sample_weight``), the fitted coefficients in the dtype of ``X`` and a
prediction that validates exactly as ``fit``."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_consistent_length, check_is_fitted, validate_data

from dasketch._blocks import (
    RowBlocks,
    append_ones_column,
    compute,
    host_values,
    is_dask_collection,
)
from dasketch.linear_model.dual_projection.checks import check_weights
from dasketch.utils.blockwise import affine_rows
from dasketch.utils.validation import validate_input


def check_sample_weight(sample_weight, n):
    """``sample_weight`` as a float64 vector of ``n`` finite weights ``>= 0``,
    not all 0 (None stays None; a scalar is broadcast; a Dask array of any
    chunking is computed, ``n`` values like ``y``); errors name
    ``sample_weight``."""
    if sample_weight is None:
        return None
    if is_dask_collection(sample_weight):
        (sample_weight,) = compute(sample_weight)
    values = np.asarray(sample_weight)
    if values.dtype.kind in "biuf" and values.size and not np.any(values):
        raise ValueError("sample_weight is all zero: at least one weight must be > 0")
    return check_weights(values if values.ndim else values.item(), n)


class SketchedRegressorMixin(RegressorMixin):
    """Regressors solved through a sketch preconditioner (pwSGD, sketch-preconditioned LSQR).

    ``coef_`` is ``(n_features,)`` for 1-D ``y`` and ``(n_targets, n_features)``
    for 2-D ``y``, in the dtype of ``X`` (float32 stays float32; the solve runs
    in float64); ``intercept_`` is a numpy scalar or an ``(n_targets,)`` array
    of that dtype.
    """

    def _validate_fit_data(self, X, y, sample_weight=None, *, ones_column=True,
                           multi_output=False, array_libraries="numpy"):
        """``(design, y, weights, dtype)``: ``X`` validated by
        :func:`validate_input` (setting ``n_features_in_``), with a column of
        ones when ``ones_column`` and ``fit_intercept`` (in memory stays in
        memory, out-of-core stays row blocks); ``y`` finite float64, 1-D or,
        with ``multi_output``, 2-D; the weights of :func:`check_sample_weight`;
        ``dtype`` that of ``X``. With ``array_libraries="any"`` an ``X`` of
        another library stays one (row blocks, see :func:`validate_input`) and
        ``y`` and the weights of one are copied to the host."""
        if array_libraries == "any":
            y, sample_weight = host_values(y), host_values(sample_weight)
        if is_dask_collection(y):
            (y,) = compute(y)
        # y first: validating y alone resets the feature names that X then sets
        y = validate_data(self, "no_validation", y, multi_output=multi_output, y_numeric=True)
        X = validate_input(self, X, reset=True, accept_sparse="csr",
                           array_libraries=array_libraries)
        n = X.shape[0]
        check_consistent_length(np.empty((n, 0)), y)
        weights = check_sample_weight(sample_weight, n)
        design = append_ones_column(X) if ones_column and self.fit_intercept else X
        return design, np.asarray(y, dtype=np.float64), weights, X.dtype

    def _set_coef(self, coef, intercept, dtype):
        """``coef_`` ((d,) or, given as (d, k), (k, d)) and ``intercept_`` (scalar
        or (k,)) in the dtype of ``X`` (float32 stays float32)."""
        dtype = np.dtype(dtype if dtype in (np.float32, np.float64) else np.float64)
        coef = np.asarray(coef)
        self.coef_ = (coef if coef.ndim == 1 else coef.T).astype(dtype)
        intercept = np.zeros(coef.shape[1:]) if intercept is None else intercept
        self.intercept_ = np.asarray(intercept, dtype=dtype)[()]

    def predict(self, X):
        """Predict ``X @ coef_.T + intercept_``.

        ``X`` is validated exactly as in ``fit`` (finite values, 2-D,
        ``n_features_in_`` columns, feature names).

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL.

        Returns
        -------
        ndarray or dask.array.Array of shape (n,) or (n, n_targets)
            The predictions, in the dtype of the model (float32 for float32
            ``X``); for out-of-core ``X`` (Dask, ``zarr.Array``, zarr path or
            URL) a lazy Dask array whose blocks raise on NaN or Inf when
            computed.
        """
        check_is_fitted(self)
        X = validate_input(self, X, reset=False, accept_sparse="csr")
        coef = np.atleast_2d(self.coef_).T
        if isinstance(X, RowBlocks):
            out = affine_rows(X, coef, self.intercept_, self.coef_.dtype)
        else:
            out = (np.asarray(X @ coef) + self.intercept_).astype(
                np.result_type(X.dtype, self.coef_.dtype), copy=False)
        return out[:, 0] if self.coef_.ndim == 1 else out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


def check_lstsq_targets(b, n):
    """``b`` as a finite float64 array of shape ``(n,)`` or ``(n, k)`` on the host."""
    b = host_values(b)
    if is_dask_collection(b):
        (b,) = compute(b)
    b = np.asarray(b)
    if b.ndim not in (1, 2) or b.shape[0] != n:
        raise ValueError(f"b has shape {b.shape} but A has {n} rows; b must be (n,) or "
                         "(n, k) with one row per row of A")
    if b.dtype.kind not in "biuf":
        raise TypeError(f"b must hold real numbers, got dtype {b.dtype}")
    b = b.astype(np.float64)
    if not np.isfinite(b).all():
        raise ValueError("b contains NaN or Inf; only finite values are accepted")
    return b
