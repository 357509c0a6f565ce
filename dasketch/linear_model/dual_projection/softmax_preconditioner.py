"""The preconditioner of multinomial logistic regression (:mod:`.multinomial`),
built from the random projection as that of the binary losses
(:mod:`.preconditioner`), one block per pair of classes.

numpy/scipy only.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from dasketch.linear_model.dual_projection.preconditioner import SHIFT_FLOOR

__all__ = ["SoftmaxPreconditioner"]


class SoftmaxPreconditioner:
    """``M^{-1}`` for the block Hessian at one Newton point.

    ``M`` is the Hessian with X replaced by ``P X``, ``P = Q Q^T`` the projector
    onto the range of ``[X_hat 1]`` (see :mod:`.preconditioner`, whose
    :class:`~.preconditioner.ProjectedBasis` ``B^T = X_a^T Q = [V F; q^T]``
    is shared): with ``C`` the projected block Hessian ``[Q^T D_kl Q]_{kl}``,
    ``M_ww = (I (x) V F) C (I (x) F^T V^T) + lambda I`` on the range of
    ``I (x) V`` and ``lambda`` plus its smallest eigenvalue outside (the rule
    of Frangella, Tropp and Udell); the intercepts by a K x K Schur complement,
    with ``spread`` added to the curvature along a common shift of all
    intercepts (which changes no loss) so that M stays positive definite.
    Everything is k x k or K k x K k except the basis ``V``.
    """

    def __init__(self, basis, curvature, lam, spread, n_classes):
        size, K = basis.size, n_classes
        m1, k = curvature.shape[0] // K, basis.F.shape[0]
        blocks = curvature.reshape(K, m1, K, m1)[:, :size, :, :size].reshape(K * size, -1)
        T = np.kron(np.eye(K), basis.T)
        C = T.T @ blocks @ T                                      # [Q^T D_kl Q]_kl
        F = np.kron(np.eye(K), basis.F)
        core = F @ C @ F.T
        # a common shift of all w_k changes no loss, so the core is singular along
        # it; the Newton directions have none of it (:func:`_centred`), and a
        # curvature above all others there leaves the smallest eigenvalue that
        # of the directions across the classes
        top = max(float(np.trace(core)), 0.0)          # at least the largest eigenvalue
        core = 0.5 * (core + core.T) + top * np.kron(np.full((K, K), 1.0 / K), np.eye(k))
        smallest = 0.0
        if k < basis.V.shape[0]:        # directions outside the captured subspace
            eigenvalues = np.linalg.eigvalsh(core)
            smallest, top = max(float(eigenvalues[0]), 0.0), float(eigenvalues[-1])
        shift = max(lam, SHIFT_FLOOR * top, np.finfo(float).tiny)
        self.outside = max(lam + smallest, shift)
        self.V, self.K, self.k = basis.V, K, k
        self.factor = scipy.linalg.cho_factor(core + shift * np.eye(K * k))
        self.fit_intercept = basis.fit_intercept
        if self.fit_intercept:
            ones = np.kron(np.eye(K), basis.ones[:, None])
            Cq = C @ ones                                           # C (I (x) q)
            self.c = F @ Cq
            self.Ac = scipy.linalg.cho_solve(self.factor, self.c)
            e = ones.T @ Cq + spread
            schur = e - self.c.T @ self.Ac
            schur = 0.5 * (schur + schur.T)
            floor = max(1e-12 * float(np.trace(e)) / K, np.finfo(float).tiny)
            ev, U = np.linalg.eigh(schur)
            self.schur_inverse = (U / np.maximum(ev, floor)) @ U.T

    def _solve_weights(self, R):
        """``M_ww^{-1} R`` for ``R`` (d x K), by Woodbury through ``I (x) V``."""
        inside = (self.V.T @ R).T.reshape(-1)                  # class-major
        solved = scipy.linalg.cho_solve(self.factor, inside).reshape(self.K, self.k).T
        return self.V @ solved + (R - self.V @ (self.V.T @ R)) / self.outside

    def apply(self, R):
        """``M^{-1} R`` for ``R`` ((d [+1]) x K)."""
        if not self.fit_intercept:
            return self._solve_weights(R)
        X = self._solve_weights(R[:-1])
        inside = (self.V.T @ X).T.reshape(-1)
        t = self.schur_inverse @ (R[-1] - self.c.T @ inside)
        X = X - self.V @ (self.Ac @ t).reshape(self.K, self.k).T
        return np.vstack([X, t])
