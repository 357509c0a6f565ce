"""Products with the weighted, centred matrix of a least-squares problem, without
forming it: the operator :func:`dasketch.linear_model.lstsq_solver.solve_lstsq`
runs LSQR on, and the fused pass of its refinement."""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.sparse

from dasketch._blocks import (
    add,
    as_row_aligned,
    compute,
    forward_backward,
    map_reduce,
    matvec,
    rmatvec,
)


def _residual_gradient_block(block, start, stop, shifted, *root, X, mean_product):
    """The block's part of ``A^T r`` for ``r = W^(1/2) shifted - A X``, packed with
    ``sum_i w_i^(1/2) r_i`` (for the centring term) and ``||r_b||^2`` per column:
    ``r_b`` and ``X_b^T (w^(1/2) r_b)`` from one read of the block
    (:func:`~dasketch._blocks.forward_backward`), the same operations as
    :meth:`WeightedCentredProducts.forward` and ``adjoint`` in the same order
    (``root``: the block's ``w^(1/2)``, none for unit weights)."""
    root = np.asarray(root[0], dtype=np.float64).ravel() if root else np.ones(stop - start)
    targets = np.asarray(shifted, dtype=np.float64).reshape(stop - start, -1) * root[:, None]

    def residuals(F, rows):
        return targets[rows] - (F - mean_product) * root[rows, None]

    def weighted(F, rows):
        return residuals(F, rows) * root[rows, None]

    F, U, backward = forward_backward(block, X, weighted)
    r = residuals(F, slice(None))
    return np.concatenate([backward.ravel(), U.sum(axis=0), np.einsum("ij,ij->j", r, r)])


class WeightedCentredProducts:
    """Products with ``A = W^(1/2) (X - 1 m^T)`` (``m`` None: no centring;
    ``W`` None: no weights) without forming ``A``: on ``X`` itself when it is
    in memory (numpy or scipy.sparse: one BLAS call, no task overhead per LSQR
    iteration), else one blocked pass per product over its row blocks.

    ``forward(V)`` is ``A V`` and ``adjoint(U)`` is ``A^T U`` for vectors or
    matrices of several columns (one pass for all of them); ``passes`` counts
    the passes over ``X`` made so far.
    """

    def __init__(self, X, blocks, *, root_weights=None, mean=None, client=None):
        self.data = X if (isinstance(X, np.ndarray) or scipy.sparse.issparse(X)) else None
        self.blocks, self.root_weights, self.mean, self.client = blocks, root_weights, mean, \
            client
        self.passes = 0

    def forward(self, V):
        V = np.asarray(V, dtype=np.float64)
        columns = V.reshape(V.shape[0], -1)
        self.passes += 1
        if self.data is not None:
            out = np.asarray(self.data @ columns, dtype=np.float64)
        else:
            (out,) = compute(matvec(self.blocks, columns), client=self.client)
            out = np.asarray(out, dtype=np.float64)
        if self.mean is not None:
            out = out - self.mean @ columns
        if self.root_weights is not None:
            out = out * self.root_weights[:, None]
        return out.reshape(out.shape[:1] + V.shape[1:])

    def residual_gradient(self, X, shifted):
        """``(A^T r, ||r||)`` for ``r = W^(1/2) shifted - A X`` per column of ``X``
        (d x K) and ``shifted`` (n x K): one pass over the blocks, each block's
        residual and its product with ``A^T`` from one read; the residual itself
        is never gathered."""
        X = np.asarray(X, dtype=np.float64).reshape(self.blocks.n_features, -1)
        K, d = X.shape[1], X.shape[0]
        n = self.blocks.n_rows
        mean_product = np.zeros(K) if self.mean is None else self.mean @ X
        func = partial(_residual_gradient_block, mean_product=mean_product)
        aligned = [as_row_aligned(np.reshape(shifted, (n, K)), self.blocks, name="b")]
        if self.root_weights is not None:
            aligned.append(as_row_aligned(self.root_weights, self.blocks, name="sample_weight"))
        lazy = map_reduce(self.blocks, func, add, *aligned, shared={"X": X}, keeps_block=False)
        (packed,) = compute(lazy, client=self.client)
        self.passes += 1
        gradient = packed[:d * K].reshape(d, K)
        if self.mean is not None:
            gradient = gradient - np.outer(self.mean, packed[d * K:(d + 1) * K])
        return gradient, np.sqrt(packed[(d + 1) * K:])

    def adjoint(self, U):
        U = np.asarray(U, dtype=np.float64)
        columns = U.reshape(U.shape[0], -1)
        self.passes += 1
        if self.root_weights is not None:
            columns = columns * self.root_weights[:, None]
        if self.data is not None:
            out = np.asarray(self.data.T @ columns, dtype=np.float64)
        else:
            (out,) = compute(rmatvec(self.blocks, columns), client=self.client)
            out = np.asarray(out, dtype=np.float64).reshape(-1, columns.shape[1])
        if self.mean is not None:
            out = out - np.outer(self.mean, columns.sum(axis=0))
        return out.reshape(out.shape[:1] + U.shape[1:])
