"""What the estimators compute block by block for out-of-core ``X``.

The block functions live here, apart from the estimators, so that a worker
unpickling one imports numpy and the bridge only, not scikit-learn (about
110 MiB per worker process).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse

from dasketch._blocks import RowBlocks, map_rows, tree_sum
from dasketch.kernels.shrink import check_finite_rows as check_finite_input


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


def _squared_norms_block(block, start, stop, axes_t, shift):
    projected = np.asarray(block @ axes_t, dtype=np.float64)
    projected -= shift
    return np.einsum("ij,ij->j", projected, projected)


def squared_norms_along(blocks, axes, shift, *, split_every=None):
    """Delayed ``||X v_j - shift_j||^2`` for the rows ``v_j`` of ``axes`` over
    :class:`~dasketch._blocks.RowBlocks`: with ``shift = axes @ mean`` the squared
    norms of the centred data along the axes, ``||X_c v||^2``, without centring
    (or densifying) a block.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, compute
    >>> X = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]])
    >>> axes = np.eye(2)
    >>> compute(squared_norms_along(as_row_blocks(X, block_rows=2), axes, X.mean(0)))[0]
    array([8., 8.])
    """
    axes_t = np.ascontiguousarray(np.asarray(axes, dtype=np.float64).T)
    func = partial(_squared_norms_block, axes_t=axes_t,
                   shift=np.asarray(shift, dtype=np.float64))
    return tree_sum(blocks, func, split_every=split_every, keeps_block=False)


def _gaussian_log_likelihood_block(block, start, stop, mean, precision, constant):
    check_finite_input(block, start)  # names the rows of X, never the result
    if precision is None:
        return np.full((stop - start, 1), -np.inf)
    dense = block.toarray() if scipy.sparse.issparse(block) else np.asarray(block)
    centred = dense - mean
    out = -0.5 * np.einsum("ij,ij->i", centred @ precision, centred) + constant
    return out.reshape(-1, 1)


def gaussian_log_likelihood(X, mean, precision):
    """Log-density of each row of ``X`` under ``N(mean, precision^{-1})``: an
    ndarray for in-memory ``X``, a lazy Dask array for RowBlocks (whose blocks
    raise on NaN or Inf when computed). ``precision=None`` stands for a singular
    covariance: every row gets ``-inf``, as a degenerate Gaussian puts no density
    off a set of measure zero."""
    d = mean.shape[0]
    constant = 0.0
    if precision is not None:
        sign, logdet = np.linalg.slogdet(precision)
        constant = -0.5 * (d * np.log(2.0 * np.pi) - (logdet if sign > 0 else -np.inf))
    func = partial(_gaussian_log_likelihood_block, mean=mean, precision=precision,
                   constant=constant)
    if isinstance(X, RowBlocks):
        return map_rows(X, func, 1)[:, 0]
    return func(X, 0, X.shape[0]).ravel()
