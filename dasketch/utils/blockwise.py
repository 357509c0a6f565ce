"""What the estimators compute block by block for out-of-core ``X``:
``X @ matrix + offset`` (transform, predict), squared norms along axes and
Gaussian log-likelihoods, each one pass of the bridge's primitives
(:func:`~dasketch._blocks.map_rows`, :func:`~dasketch._blocks.map_reduce`) over
functions of :mod:`dasketch._blocks.block_functions` (so that workers never
import scikit-learn).
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks import RowBlocks, add, map_reduce, map_rows
from dasketch._blocks.block_functions import (
    affine_block,
    gaussian_log_likelihood_block,
    squared_norms_block,
)


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
    return map_rows(blocks, affine_block, n_columns=matrix.shape[1], dtype=dtype,
                    shared={"matrix": matrix, "offset": offset, "dtype": np.dtype(dtype)},
                    keeps_block=False)


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
    shift = np.asarray(shift, dtype=np.float64)
    return map_reduce(blocks, squared_norms_block, add, split_every=split_every,
                      shared={"axes_t": axes_t, "shift": shift}, keeps_block=False)


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
    shared = {"mean": mean, "precision": precision, "constant": constant}
    if isinstance(X, RowBlocks):
        return map_rows(X, gaussian_log_likelihood_block, n_columns=1, shared=shared,
                        keeps_block=False)[:, 0]
    return gaussian_log_likelihood_block(X, 0, X.shape[0], **shared).ravel()
