"""Products with the weighted, centred matrix of a least-squares problem, without
forming it: the operator :func:`dasketch.linear_model.lstsq_solver.solve_lstsq`
runs LSQR on."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from dasketch._blocks import compute, matvec, rmatvec


class WeightedCentredProducts:
    """Products with ``A = W^(1/2) (X - 1 m^T)`` (``m`` None: no centring;
    ``W`` None: no weights) without forming ``A``: on ``X`` itself when it is
    in memory (numpy or scipy.sparse: one BLAS call, no task overhead per LSQR
    iteration), else one blocked pass per product over its row blocks.

    ``forward(V)`` is ``A V`` and ``adjoint(U)`` is ``A^T U`` for vectors or
    matrices of several columns (one pass for all of them).
    """

    def __init__(self, X, blocks, *, root_weights=None, mean=None, client=None):
        self.data = X if (isinstance(X, np.ndarray) or scipy.sparse.issparse(X)) else None
        self.blocks, self.root_weights, self.mean, self.client = blocks, root_weights, mean, \
            client

    def forward(self, V):
        V = np.asarray(V, dtype=np.float64)
        columns = V.reshape(V.shape[0], -1)
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

    def adjoint(self, U):
        U = np.asarray(U, dtype=np.float64)
        columns = U.reshape(U.shape[0], -1)
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
