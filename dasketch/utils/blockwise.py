"""What the estimators compute block by block for out-of-core ``X``.

The block functions live here, apart from the estimators, so that a worker
unpickling one imports numpy and the bridge only, not scikit-learn (about
110 MiB per worker process).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse

from dasketch._blocks import RowBlocks, map_rows


def check_finite_rows(out, start, stop):
    if not np.all(np.isfinite(out)):
        raise ValueError(f"X contains NaN or Inf in rows [{start}, {stop}) (or the result "
                         "overflows); only finite values are accepted")
    return out


def _affine_block(block, start, stop, matrix, offset, dtype):
    out = np.asarray(block @ matrix) + offset
    return check_finite_rows(out, start, stop).astype(dtype, copy=False)


def affine_rows(blocks, matrix, offset, dtype):
    """Lazy ``X @ matrix + offset`` over :class:`~dasketch._blocks.RowBlocks`, in
    ``dtype``; a block with NaN or Inf raises a ``ValueError`` naming its rows
    when computed (as ``fit`` does for out-of-core input).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks
    >>> blocks = as_row_blocks(np.arange(6.0).reshape(3, 2), block_rows=2)
    >>> affine_rows(blocks, np.ones((2, 1)), 0.5, np.float64).compute().ravel()
    array([1.5, 5.5, 9.5])
    """
    matrix = np.asarray(matrix)
    func = partial(_affine_block, matrix=matrix, offset=offset, dtype=np.dtype(dtype))
    return map_rows(blocks, func, matrix.shape[1], dtype=dtype)


def _gaussian_log_likelihood_block(block, start, stop, mean, precision, constant):
    dense = block.toarray() if scipy.sparse.issparse(block) else np.asarray(block)
    centred = dense - mean
    out = -0.5 * np.einsum("ij,ij->i", centred @ precision, centred) + constant
    return check_finite_rows(out.reshape(-1, 1), start, stop)


def gaussian_log_likelihood(X, mean, precision):
    """Log-density of each row of ``X`` under ``N(mean, precision^{-1})``: an
    ndarray for in-memory ``X``, a lazy Dask array for RowBlocks."""
    d = mean.shape[0]
    sign, logdet = np.linalg.slogdet(precision)
    constant = -0.5 * (d * np.log(2.0 * np.pi) - (logdet if sign > 0 else -np.inf))
    func = partial(_gaussian_log_likelihood_block, mean=mean, precision=precision,
                   constant=constant)
    if isinstance(X, RowBlocks):
        return map_rows(X, func, 1)[:, 0]
    return func(X, 0, X.shape[0]).ravel()
