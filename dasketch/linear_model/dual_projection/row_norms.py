"""The row norms a dual random projection fit certifies with: ``sum_i s_i
||x_i||^2`` and the largest norm of a row of positive weight, from one block,
without overflow or underflow of the squares, in the block's own library."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from dasketch._blocks import float_rows, is_numpy_block, like, to_host

# Squared row norms below this are summed again scaled: entries whose squares
# underflow (below about 1e-154) are then under 1e-108 of the row's norm.
SMALLEST_SQUARE = 1e-200


def _squared_row_norms(rows):
    return np.ravel(rows.multiply(rows).sum(axis=1, dtype=np.float64)
                    if scipy.sparse.issparse(rows)
                    else np.einsum("ij,ij->i", rows, rows, dtype=np.float64))


def _scaled_row_norms(rows):
    """Row norms scaled as LAPACK's ``nrm2`` (finite rows never overflow); NaN
    or Inf gives Inf."""
    values = rows.data if scipy.sparse.issparse(rows) else rows
    scale = max(float(values.max()), -float(values.min())) if values.size else 0.0
    if not 0.0 < scale < np.inf:
        return np.full(rows.shape[0], 0.0 if np.isfinite(scale) else np.inf)
    return scale * np.sqrt(_squared_row_norms(rows / scale))


def row_norm_terms(block, s):
    """``sum_i s_i ||x_i||^2`` and the largest norm of a row of weight > 0.

    Squares are summed as they are; rows whose sum overflows, is not finite, or
    lies below :data:`SMALLEST_SQUARE` (where squares of entries may have
    underflowed) are summed again scaled (:func:`_scaled_row_norms`)."""
    positive = np.flatnonzero(s[:, 0] > 0)
    if is_numpy_block(block):
        rows = block if positive.size == block.shape[0] else block[positive]
        squares, take = _squared_row_norms(rows), rows.__getitem__
    else:   # squares in the block's namespace, the few rows summed again on the host
        xp, rows = float_rows(block)
        squares = to_host(xp.vecdot(rows, rows, axis=-1))[positive]   # no n x d temporary

        def take(index):
            return to_host(xp.take(rows, like(rows, positive[index]), axis=0))
    norms = np.sqrt(squares)
    again = np.flatnonzero(~(squares >= SMALLEST_SQUARE) | ~np.isfinite(squares))
    if again.size:
        norms[again] = _scaled_row_norms(take(again))
    return [float(s[positive, 0] @ norms ** 2), norms.max() if norms.size else 0.0]
