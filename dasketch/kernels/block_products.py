"""Products of a block of rows with a few columns, in the layout BLAS runs fastest.

A dense block ``B`` (``rows x d``, C order) times a thin matrix ``P``
(``d x j``) is a GEMM whose output has only ``j`` columns. For ``j`` up to
:data:`THIN`, or ``d`` up to :data:`SHORT`, the transposed product
``(P^T B^T)^T`` runs faster than ``B @ P`` in OpenBLAS, and ``(U^T B)^T``
faster than ``B^T @ U`` at every width; the results are equal to rounding (the
same sums, in another order).
:func:`rows_forward_backward` also keeps panels of rows in cache between a
forward and a backward product when both are at most :data:`PANEL_COLUMNS`
wide (with more columns a panel of a few rows is too small a GEMM).
``benchmarks/bench_block_products.py`` measures the layouts side by side.

Sparse blocks and other array kinds keep their own ``@``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["rows_forward_backward", "rows_times", "rows_transpose_times"]


# Widest right-hand side, and longest one of any width, computed in the
# transposed layout by :func:`rows_times`.
THIN, SHORT = 16, 16384
# Widest forward or backward product taken in panels of rows.
PANEL_COLUMNS = 8


def _dense_2d(block, matrix):
    return (type(block) is np.ndarray and block.ndim == 2 and isinstance(matrix, np.ndarray)
            and matrix.ndim == 2)


def rows_times(block, matrix):
    """``block @ matrix`` for a block of rows (``rows x d``) and ``matrix``
    (``d x j``).

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (rows, d)
    matrix : ndarray of shape (d, j) or (d,)

    Returns
    -------
    product : ndarray or sparse result of shape (rows, j) (or (rows,))
        Dense blocks with at most :data:`THIN` columns in ``matrix``, or at most
        :data:`SHORT` rows, give an ndarray computed as ``(matrix^T block^T)^T``.
    """
    if _dense_2d(block, matrix) and (matrix.shape[1] <= THIN or matrix.shape[0] <= SHORT):
        return (np.ascontiguousarray(matrix.T) @ block.T).T
    return block @ matrix


def rows_transpose_times(block, matrix):
    """``block^T @ matrix`` for a block of rows (``rows x d``) and ``matrix``
    (``rows x j``): the block's share of ``X^T U``.

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (rows, d)
    matrix : ndarray of shape (rows, j) or (rows,)

    Returns
    -------
    product : ndarray or sparse result of shape (d, j) (or (d,))
        Dense blocks give an ndarray computed as ``(matrix^T block)^T``.
    """
    if _dense_2d(block, matrix):
        return (np.ascontiguousarray(matrix.T) @ block).T
    return block.T @ matrix


# Bytes of a panel of rows that stays in a core's cache between its forward
# and its backward product.
PANEL_BYTES = 1 << 20
# Fewer rows than this per panel and the panel products run below BLAS speed:
# the block is then read twice, once per product.
MIN_PANEL_ROWS = 8


def _whole_block(block, matrix, rowwise):
    F = np.asarray(rows_times(block, matrix), dtype=np.float64)
    U = np.asarray(rowwise(F, slice(0, block.shape[0])), dtype=np.float64)
    return F, U, np.asarray(rows_transpose_times(block, U), dtype=np.float64)


def rows_forward_backward(block, matrix, rowwise):
    """``F = block @ matrix``, ``U = rowwise(F, rows)`` and ``block^T U`` with one
    read of a dense block from memory.

    The block is taken in panels of rows small enough to stay in cache (about
    ``PANEL_BYTES``) between the product that gives ``F`` and the product with
    ``U``; ``rowwise`` must act row by row (row ``i`` of ``U`` depends on row
    ``i`` of ``F`` and data of row ``i`` only). Sparse blocks, dense ones too
    wide for a panel of ``MIN_PANEL_ROWS`` rows, and products wider than
    :data:`PANEL_COLUMNS` are multiplied whole.

    Parameters
    ----------
    block : ndarray or sparse matrix of shape (rows, d)
    matrix : ndarray of shape (d, j)
    rowwise : callable
        ``rowwise(F_panel, rows)`` with ``rows`` the slice of the panel's rows
        within the block, returning ``U_panel`` of shape (panel rows, k).

    Returns
    -------
    F : ndarray of shape (rows, j), float64
    U : ndarray of shape (rows, k), float64
    backward : ndarray of shape (d, k), float64
        ``block^T U``.
    """
    n, d = block.shape
    panel = PANEL_BYTES // max(1, block.dtype.itemsize * d)
    if not _dense_2d(block, matrix) or not block.flags.c_contiguous \
            or panel < MIN_PANEL_ROWS or panel >= n or matrix.shape[1] > PANEL_COLUMNS:
        return _whole_block(block, matrix, rowwise)
    forward_t = np.ascontiguousarray(matrix.T, dtype=np.float64)
    F = np.empty((n, matrix.shape[1]))
    U = backward_t = scratch = None
    for lo in range(0, n, panel):
        rows = slice(lo, min(lo + panel, n))
        rows_panel = block[rows]
        F[rows] = (forward_t @ rows_panel.T).T
        u = np.asarray(rowwise(F[rows], rows), dtype=np.float64)
        if U is None:
            if u.shape[1] > PANEL_COLUMNS:
                return _whole_block(block, matrix, rowwise)
            U = np.empty((n, u.shape[1]))
            backward_t = np.zeros((u.shape[1], d))
            scratch = np.empty_like(backward_t)
        U[rows] = u
        backward_t += np.matmul(np.ascontiguousarray(u.T), rows_panel, out=scratch)
    return F, U, backward_t.T
