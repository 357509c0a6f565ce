r"""The preconditioner of the full problem built from the random projection.

numpy/scipy only; the ``d x k`` products of the basis may run on a device
through the functions a caller passes (:class:`ProjectedBasis`). With
``X_a = [X, 1]`` (``[X]`` without an intercept) and ``Q`` an orthonormal basis
of the range of ``[X_hat, 1]`` (``X_hat = X R / sqrt(m)``), the Hessian
``X_a^T D X_a + diag(lambda, ..., lambda, 0)`` of the full problem is approximated by

.. math:: M = X_a^T P D P X_a + \mathrm{diag}(\lambda I, 0) = B^T (Q^T D Q) B + ...,
          \qquad P = Q Q^T, \quad B = Q^T X_a,

i.e. X is replaced by its projection onto the range of its own random projection.
``B^T = X_a^T Q`` comes from ``X^T [X_hat, 1]``, computed in the same pass as
``X_hat``; ``Q^T D Q`` from ``[X_hat 1]^T D [X_hat 1]``, the Hessian of the
projected problem of Zhang et al. (COLT 2013). When the rank of X is at most m
the range of ``X_hat`` is that of X (almost surely), ``P X = X`` and ``M`` is the
exact Hessian; for squared loss ``M`` is then the randomized Nystrom
approximation of ``X^T X`` with test matrix ``R`` (Frangella, Tropp, Udell, SIAM
J. Matrix Anal. Appl. 2023), whose rule of giving the directions outside the
captured subspace the smallest captured eigenvalue plus lambda is used here as
well. ``M^{-1}`` is applied by the Woodbury identity (through a d x k basis, never
a d x d matrix) and a Schur complement for the unpenalised intercept.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

# Directions of [X_hat 1] whose Gram eigenvalue is below this fraction of the
# largest are dropped from the basis Q (rank deficiency, e.g. m > rank X).
RANK_TOLERANCE = 1e-10
# The shift of the captured part is at least this fraction of its largest
# eigenvalue, so that M stays positive definite for lambda = 0 (the unpenalised
# problem) or lambda below rounding; it changes the preconditioner, not the
# solution.
SHIFT_FLOOR = 1e-12


# CholeskyQR2 is accurate while the condition number of the factored matrix stays
# below about eps^(-1/2) (Yamamoto, Nakatsukasa, Yanagisawa and Fukaya, ETNA 2015);
# the ratio of the first Cholesky factor's extreme diagonal entries, a lower
# estimate of that condition number, is kept below this bound, else the SVD is used.
CHOLESKY_QR_CONDITION = 1e6


def _inverse_transpose(lower):
    """``L^{-T}`` of a lower-triangular ``k x k`` ``L``, applied to the tall
    factor by one matrix product (a level-3 product of ``d x k`` by ``k x k``
    instead of a triangular solve with ``d`` right-hand sides)."""
    eye = np.eye(lower.shape[0])
    return scipy.linalg.solve_triangular(lower, eye, lower=True, check_finite=False).T


def orthonormal_factor(A, device=None):
    """``(V, F)`` with ``A = V F``, ``V`` (d x k) with orthonormal columns and
    ``F`` (k x k), for a tall ``A`` of full column rank.

    CholeskyQR2: two Cholesky factorisations of ``k x k`` Grams, each followed
    by a product with the inverse transposed factor: matrix-matrix products
    throughout, where the tall SVD needs Householder reflections and a
    bidiagonalisation (Yamamoto et al., ETNA 2015). Falls back to the thin SVD
    ``A = V (S W^T)`` when the Gram is not numerically positive definite or
    ``A`` is too ill-conditioned (:data:`CHOLESKY_QR_CONDITION`). The
    preconditioner depends on the factor only through ``V F``, so either gives
    the same ``M``.

    ``device``, ``(put, host)``: ``A`` is an array of another library whose
    ``d x k`` products run on its device, and ``V`` is on that device; ``put``
    moves a host matrix there and ``host`` brings one back, and the ``k x k``
    factorisations (and the SVD, whose ``V`` is moved there) run on the host.
    """
    put, host = device if device is not None else (np.asarray, np.asarray)
    try:
        first = scipy.linalg.cholesky(host(A.T @ A), lower=True, check_finite=False)
        diagonal = np.abs(np.diag(first))
        if diagonal.min() > diagonal.max() / CHOLESKY_QR_CONDITION:
            Q = A @ put(_inverse_transpose(first))
            second = scipy.linalg.cholesky(host(Q.T @ Q), lower=True, check_finite=False)
            return Q @ put(_inverse_transpose(second)), second.T @ first.T
    except np.linalg.LinAlgError:
        pass
    V, S, wt = np.linalg.svd(host(A), full_matrices=False)
    return put(V), S[:, None] * wt


class ProjectedBasis:
    """What all targets and Newton steps share: ``Q = [X_hat 1] T`` and a
    factorisation ``B^T = V F`` of ``B^T = X_a^T Q`` (d x k), ``V`` with
    orthonormal columns (:func:`orthonormal_factor`). ``device``, ``(put, host)``,
    runs the ``d x k`` products on a device (that of a projection of another
    library); ``V`` and ``F`` are on the host either way, and ``on_device``
    holds ``(V, put, host)`` with ``V`` on the device (else None)."""

    def __init__(self, products, gram, fit_intercept, device=None):
        m1 = gram.shape[0]
        size = m1 if fit_intercept else m1 - 1
        eigenvalues, vectors = np.linalg.eigh(gram[:size, :size])
        keep = eigenvalues > RANK_TOLERANCE * max(eigenvalues.max(), np.finfo(float).tiny)
        self.T = vectors[:, keep] / np.sqrt(eigenvalues[keep])   # Q = [X_hat 1][:, :size] T
        self.ones = self.T.T @ gram[:size, m1 - 1] if fit_intercept else None  # Q^T 1
        put = device[0] if device is not None else np.asarray
        bt = put(products[:, :size]) @ put(self.T)                     # X^T Q
        V, self.F = orthonormal_factor(bt, device)                     # B^T = V F
        self.V = device[1](V) if device is not None else V
        self.on_device = (V,) + tuple(device) if device is not None else None
        self.captured = float(np.sum(self.F ** 2))                   # ||X^T S Q||_F^2
        self.size = size
        self.fit_intercept = fit_intercept


class Preconditioner:
    """``M^{-1}`` for one target at one Newton point (see the module docstring).

    Parameters
    ----------
    basis : ProjectedBasis
    curvature_gram : ndarray (m+1, m+1)
        ``[X_hat 1]^T D [X_hat 1]`` at the current point (``D = I`` for squared loss).
    lam : float
    intercept_curvature : float
        Added to the intercept's curvature (see :func:`newton_cg`); 0 for squared loss.
    """

    def __init__(self, basis, curvature_gram, lam, intercept_curvature=0.0):
        size = basis.size
        C = basis.T.T @ curvature_gram[:size, :size] @ basis.T          # Q^T D Q
        core = basis.F @ C @ basis.F.T                                 # F C F^T
        core = 0.5 * (core + core.T)
        eigenvalues = np.maximum(np.linalg.eigvalsh(core), 0.0) if core.size else np.zeros(1)
        smallest = float(eigenvalues[0])
        # the captured eigenvalue at half the captured dimension: the largest
        # ones are accurate with the other half as oversampling (Halko, Martinsson
        # and Tropp, SIAM Review 2011), and no uncaptured eigenvalue exceeds it much
        self.middle = float(eigenvalues[(eigenvalues.size - 1) // 2])
        self.V, self.on_device = basis.V, basis.on_device
        self.lam = lam
        shift = max(lam, SHIFT_FLOOR * float(eigenvalues[-1]), np.finfo(float).tiny)
        self.outside = max(lam + smallest, shift)
        self.captured = basis.captured
        # the curvature of the captured part, averaged over its mass
        self.mean_curvature = float(np.trace(core)) / max(basis.captured, np.finfo(float).tiny)
        self.core, self.shift = core, shift
        self.factor = scipy.linalg.cho_factor(core + shift * np.eye(core.shape[0]))
        self.fit_intercept = basis.fit_intercept
        if self.fit_intercept:
            Cq = C @ basis.ones
            self.c = self.V @ (basis.F @ Cq)                             # B^T C q
            self.Ac = self._solve_weights(self.c)
            e = float(basis.ones @ Cq) + intercept_curvature
            self.intercept_curvature = e
            self.schur = max(e - float(self.c @ self.Ac), 1e-12 * e, np.finfo(float).tiny)

    def uncaptured_dimension(self, total_mass):
        """An estimate of the effective dimension ``sum_i mu_i / (mu_i + lambda)``
        of the Hessian outside the captured subspace, whose eigenvalues ``mu_i``
        the preconditioner sets to :attr:`outside`: the mass left outside,
        ``total_mass - ||X^T S Q||_F^2`` (``total_mass = sum_i s_i ||x_i||^2``),
        weighted by the captured part's mean curvature, over the largest such
        eigenvalue plus lambda, the largest taken as the captured eigenvalue at
        half the captured dimension (:attr:`middle`). Each eigenvalue then
        contributes at least its share of the mass, so it is a lower estimate
        while the uncaptured eigenvalues lie below that one."""
        left = max(float(total_mass) - self.captured, 0.0) * self.mean_curvature
        return left / (self.middle + self.lam)

    def _solve_weights(self, r):
        """``(B^T C B + lambda I)^{-1} r`` by Woodbury through the basis V (its
        products on the device that holds a copy of V, if any)."""
        if self.on_device is not None:
            V, put, host = self.on_device
            r_there = put(r)
            inside = host(V.T @ r_there)
            solved = put(scipy.linalg.cho_solve(self.factor, inside))
            return host(V @ solved + (r_there - V @ put(inside)) / float(self.outside))
        inside = self.V.T @ r
        return (self.V @ scipy.linalg.cho_solve(self.factor, inside)
                + (r - self.V @ inside) / self.outside)

    def metric(self):
        """``M`` itself, as ``(U, a, o, c, e)``: the weights' block
        ``o I + U diag(a) U^T`` (``U`` orthonormal, d x k), the intercept's
        coupling ``c`` (zeros without an intercept) and curvature ``e`` (0
        without)."""
        eigenvalues, vectors = np.linalg.eigh(self.core)
        a = np.maximum(eigenvalues, 0.0) + self.shift - self.outside
        c = self.c if self.fit_intercept else np.zeros(self.V.shape[0])
        e = self.intercept_curvature if self.fit_intercept else 0.0
        return np.ascontiguousarray(self.V @ vectors), a, self.outside, c, e

    def apply(self, r):
        """``M^{-1} r`` for ``r`` of length d (+1 with the intercept)."""
        if not self.fit_intercept:
            return self._solve_weights(r)
        x = self._solve_weights(r[:-1])
        t = (r[-1] - self.c @ x) / self.schur
        return np.append(x - self.Ac * t, t)
