"""What the sketch-preconditioned regressors share: input validation, the
intercept column and a prediction that validates exactly as ``fit``."""

from __future__ import annotations

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import RowBlocks, append_ones_column
from dasketch.utils.blockwise import affine_rows
from dasketch.utils.validation import validate_input


class SketchedRegressorMixin(RegressorMixin):
    """Regressors solved through ``QR(S [X 1])`` (pwSGD, sketch-preconditioned LSQR).

    The intercept is the coefficient of an appended column of ones: the sketch
    preconditioner absorbs the different scale of that column, so no centring
    pass over ``X`` is needed and sparse ``X`` stays sparse.
    """

    def _validate_fit_data(self, X, y):
        """``(design, y, dtype)``: ``X`` validated by :func:`validate_input`
        (setting ``n_features_in_``), with a column of ones when
        ``fit_intercept`` (in memory stays in memory, out-of-core stays row
        blocks); ``y`` finite float64; ``dtype`` that of ``X``."""
        X, y = validate_input(self, X, y, reset=True, accept_sparse="csr", y_numeric=True)
        design = append_ones_column(X) if self.fit_intercept else X
        n, d = design.shape
        if n <= d:
            extra = " plus one for the intercept" if self.fit_intercept else ""
            raise ValueError(f"X has n_samples={n} and n_features={self.n_features_in_}"
                             f"{extra}; {type(self).__name__} solves overdetermined problems "
                             "and needs more samples than that")
        return design, np.asarray(y, dtype=np.float64), design.dtype

    def _set_coef(self, solution, dtype):
        """``coef_`` and ``intercept_`` from the solution over ``[X 1]``, in the
        dtype of ``X`` (float32 stays float32; the solve ran in float64)."""
        dtype = np.dtype(dtype if dtype in (np.float32, np.float64) else np.float64)
        solution = np.asarray(solution)
        if self.fit_intercept:
            self.coef_, self.intercept_ = solution[:-1].astype(dtype), dtype.type(solution[-1])
        else:
            self.coef_, self.intercept_ = solution.astype(dtype), dtype.type(0.0)

    def predict(self, X):
        """Predict ``X @ coef_ + intercept_``.

        ``X`` is validated exactly as in ``fit`` (finite values, 2-D,
        ``n_features_in_`` columns, feature names).

        Parameters
        ----------
        X : array-like of shape (n, n_features_in_)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL.

        Returns
        -------
        ndarray or dask.array.Array of shape (n,)
            The predictions; for out-of-core ``X`` (Dask, ``zarr.Array``, zarr
            path or URL) a lazy Dask array whose blocks raise on NaN or Inf when
            computed.
        """
        check_is_fitted(self)
        X = validate_input(self, X, reset=False, accept_sparse="csr")
        if not isinstance(X, RowBlocks):
            return np.asarray(X @ self.coef_).ravel() + self.intercept_
        return affine_rows(X, self.coef_[:, None], self.intercept_, self.coef_.dtype)[:, 0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
