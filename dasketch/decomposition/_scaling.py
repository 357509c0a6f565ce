"""Column scaling applied inside the block tasks, for :class:`dasketch.SketchPCA`
(``scaling="standard"``) and :class:`dasketch.genotype.GenotypePCA`.

One blocked pass gives every column's moments
(:func:`dasketch._blocks.scaling.column_summary`); every later pass (the
sketch, the measured variances, :meth:`transform`) reads its blocks through a
:class:`~dasketch.kernels.column_scaling.ColumnScaler` that centres and scales
them in the task that reads them, so the scaled matrix is never stored.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import (
    RowBlocks,
    as_row_blocks,
    column_summary,
    compute,
    is_out_of_core,
    scaled_blocks,
    validate_input,
)
from dasketch.kernels.column_scaling import ColumnScaler, column_scaling


class ColumnScaling:
    """What an estimator that scales its columns in the block tasks shares: the
    pass that learns the scaling (:meth:`_fit_scaler`, setting
    ``scaler_mean_`` and ``scaler_scale_``) and the scaled blocks of any later
    input (:meth:`_scaled`). Subclasses say how missing entries are marked
    (:meth:`_missing_value`, none by default)."""

    def _blocks(self, X):
        """``X`` as row blocks, never converted whole (validated by the pass that
        reads it)."""
        if isinstance(X, RowBlocks):
            return X
        return as_row_blocks(X, block_rows=self.block_rows, name="X")

    def _validated_rows(self, X):
        """``X`` as :meth:`transform` and ``score_samples`` read it: its scaled
        blocks when the columns were scaled in ``fit`` (:meth:`_scaled`), else
        validated by :func:`~dasketch._blocks.validate_input` (an array of another
        library as its blocks)."""
        if hasattr(self, "scaler_mean_"):
            return self._scaled(X)
        return validate_input(self, X, reset=False, accept_sparse="csr", array_libraries="any",
                              library_blocks=True)

    def _missing_value(self, dtype):
        """The value that marks a missing entry of a matrix of ``dtype`` (None:
        nothing is missing)."""
        return None

    def _fit_scaler(self, blocks, scaling, ploidy=2):
        """One pass over ``blocks`` for the columns' moments; sets
        ``scaler_mean_`` and ``scaler_scale_`` by the rule ``scaling`` of
        :func:`~dasketch.kernels.column_scaling.column_scaling` and returns the
        :class:`~dasketch.kernels.column_scaling.ColumnScaler`, the moments and
        the missing entries per row."""
        if blocks.sparse:
            raise TypeError("X must be dense to be scaled by columns (centring sparse rows "
                            "would densify them), got sparse rows; scale it beforehand or "
                            "pass scaling=None")
        missing = self._missing_value(blocks.dtype)
        moments, row_missing = column_summary(blocks, missing, split_every=self.split_every)
        mean, scale = column_scaling(moments, scaling, ploidy, blocks.n_rows)
        self.scaler_mean_, self.scaler_scale_ = mean, scale
        return ColumnScaler(mean, scale, missing), moments, row_missing

    def _scaled(self, X):
        """Row blocks of ``X`` scaled as in :meth:`fit`, in the tasks that read them."""
        check_is_fitted(self, "scaler_mean_")
        blocks = self._blocks(X)
        if blocks.n_features != self.n_features_in_:
            raise ValueError(f"X has {blocks.n_features} features, but {type(self).__name__} "
                             f"is expecting {self.n_features_in_} features as input.")
        scaler = ColumnScaler(self.scaler_mean_, self.scaler_scale_,
                              self._missing_value(blocks.dtype))
        return scaled_blocks(blocks, scaler)

    @staticmethod
    def _in_kind_of(X, result):
        """``result`` computed for in-memory ``X``, lazy for out-of-core ``X``."""
        if is_out_of_core(X) or isinstance(result, np.ndarray):
            return result
        (result,) = compute(result)
        return result
