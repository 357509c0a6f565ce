"""Column centring and scaling inside the block tasks.

A first pass (:func:`column_summary`, one :func:`~dasketch._blocks.map_reduce`)
gives the moments of every column's called entries and the missing entries of
every row; :func:`scaled_blocks` then appends a
:class:`~dasketch.kernels.column_scaling.ColumnScaler` to the steps that every
block task applies to the rows it reads. So an integer matrix (genotype
dosages in ``int8``) is never copied whole as floats: each task converts its
own block, and holds one float block at a time.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from dasketch._blocks.mapping import map_reduce
from dasketch._blocks.row_blocks import transformed_blocks
from dasketch._blocks.scheduler import compute
from dasketch.kernels.column_scaling import (
    COUNT,
    HIGH,
    LOW,
    MEAN,
    ColumnScaler,
    column_moments_block,
    merge_column_moments,
)


def column_summary(blocks, missing, *, split_every=None, name="X"):
    """Moments of the called entries of every column of ``blocks``
    (:class:`~dasketch._blocks.RowBlocks`, dense) and the missing entries of
    every row, in one blocked pass.

    Returns
    -------
    moments : ndarray of shape (5, n_features)
        See :func:`~dasketch.kernels.column_scaling.column_moments_block`.
    row_missing : ndarray of shape (n_rows,)

    Raises
    ------
    TypeError
        For sparse rows.
    ValueError
        Naming the first column with NaN or Inf among its called entries.
    """
    if blocks.sparse:
        raise TypeError(f"{name} must be dense to be scaled by columns, got sparse rows")
    root = map_reduce(blocks, partial(column_moments_block, missing=missing),
                      merge_column_moments, split_every=split_every, keeps_block=False)
    ((moments, row_missing),) = compute(root)
    finite = np.isfinite(moments[[MEAN, LOW, HIGH]]).all(axis=0)
    bad = (moments[COUNT] > 0) & ~finite
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} has NaN or Inf in {int(bad.sum())} columns (first: column "
                         f"{first}) that are not missing={missing!r}; pass missing=np.nan "
                         "to impute NaN entries to the column mean")
    return moments, row_missing


def scaled_blocks(blocks, scaler):
    """``blocks`` with ``scaler`` (a
    :class:`~dasketch.kernels.column_scaling.ColumnScaler`) applied by every
    block task to the rows it reads: float64 (float32 for float32 rows) blocks,
    each converted in its own task."""
    dtype = np.dtype(np.float32) if blocks.dtype == np.float32 else np.dtype(np.float64)
    if not isinstance(scaler, ColumnScaler):
        raise TypeError(f"scaler must be a ColumnScaler, got {type(scaler).__name__}")
    rows = max(stop - start for start, stop in blocks.ranges())
    scaled = transformed_blocks(blocks, scaler, blocks.n_features)
    return replace(scaled, dtype=dtype,
                   read_bytes=int(blocks.read_bytes + rows * blocks.n_features * dtype.itemsize))
