"""Products of a block in its own array library, for the block functions
(:mod:`.block_functions`): a numpy or scipy.sparse block takes the numpy
kernels (:mod:`dasketch.kernels.block_products`), a block of another library
(CuPy) computes in its namespace (:mod:`.array_libraries`), its host operands
moved to its device, and hands back what the caller needs on the host."""

from __future__ import annotations

from functools import partial

import numpy as np

from dasketch._blocks.array_libraries import block_namespace, is_numpy_block, to_host
from dasketch.kernels.block_products import (
    rows_forward_backward,
    rows_times,
    rows_transpose_times,
)


def join_columns(*arrays):
    """Arrays of one library with the same rows, side by side (a new array)."""
    return block_namespace(arrays[0]).concat(arrays, axis=1)


def float_rows(block):
    """``(xp, rows)``: the namespace of a block of another library than numpy
    and the block in its float64 (the dtype the numpy path computes in)."""
    xp = block_namespace(block)
    return xp, xp.astype(block, xp.float64, copy=False)


def like(array, values):
    """Host ``values`` (numpy) as an array of ``array``'s library on its device:
    moved there by ``xp.asarray`` for another library, unchanged for numpy."""
    if is_numpy_block(array):
        return values
    return block_namespace(array).asarray(values, device=array.device)


def device_transfers(array):
    """``(put, host)`` for an array of another library than numpy held here (an
    eager result on its device, not a Dask array): ``put`` moves a host matrix
    to its device (:func:`like`), ``host`` copies one back (``to_host``); None
    for numpy arrays and Dask collections, whose products stay where they are."""
    if is_numpy_block(array) or hasattr(array, "__dask_graph__"):
        return None
    return partial(like, array), to_host


def rows_product(block, matrix):
    """``block @ matrix`` (``matrix`` on the host) as a float64 ndarray on the host,
    computed in the block's namespace."""
    if is_numpy_block(block):
        return np.asarray(rows_times(block, matrix), dtype=np.float64)
    return to_host(float_rows(block)[1] @ like(block, matrix))


def transpose_product(block, columns):
    """``block^T @ columns`` (``columns`` on the host or, for a block of another
    library, on its device) as a float64 ndarray on the host."""
    if is_numpy_block(block):
        return np.asarray(rows_transpose_times(block, columns), dtype=np.float64)
    return to_host(float_rows(block)[1].T @ like(block, columns))


def forward_backward(block, matrix, rowwise):
    """:func:`~dasketch.kernels.block_products.rows_forward_backward` in the
    block's namespace: ``F = block @ matrix`` and ``block^T U`` in the block's
    library, ``F`` and ``U = rowwise(F, rows)`` (a few columns) on the host."""
    if is_numpy_block(block):
        return rows_forward_backward(block, matrix, rowwise)
    rows = float_rows(block)[1]
    F = to_host(rows @ like(block, matrix))
    U = np.asarray(rowwise(F, slice(0, F.shape[0])), dtype=np.float64)
    return F, U, to_host(rows.T @ like(block, U))
