"""Least squares by iterative refinement on the exactly preconditioned normal equations.

The sketch's basis ``N`` (:mod:`dasketch.linear_model.preconditioning`) makes
``U = A N`` well conditioned (``cond(U)`` about 3), so the Gram matrix ``G = U^T
U`` (k x k), accumulated in one pass (:func:`basis_gram_pass`), is exact up to
rounding of relative size about ``eps d cond(A)`` (that of forming ``A N``),
and ``G = L L^T`` by Cholesky. With it:

1. ``z_0 = G^{-1} U^T c`` (the preconditioned normal equations, ``c`` the
   weighted, centred targets), ``x_0 = N z_0``;
2. ``z_{j+1} = z_j + G^{-1} N^T A^T (c - A x_j)``, each step one pass that
   multiplies every block by ``A`` and by ``A^T`` from one read
   (:meth:`~dasketch.linear_model._weighted_products.WeightedCentredProducts.residual_gradient`).

The error contracts by the relative error of ``G`` in every step, so two or
three passes reach what LSQR preconditioned by ``N`` alone reaches in
``log(tol) / log((kappa - 1) / (kappa + 1))`` iterations of two passes each
(about 30 at ``tol = 1e-10``). ``G`` is the Gram matrix of the randomized
preconditioned Cholesky QR of Garrison and Ipsen ("A randomized preconditioned
Cholesky-QR algorithm", arXiv:2406.11751, 2024), and the steps are the
iterative refinement of the normal equations (Björck, *Numerical Methods for
Least Squares Problems*, SIAM, 1996) on the preconditioned problem, as in the
sketch-and-precondition solvers with refinement of Epperly, Meier and
Nakatsukasa ("Fast randomized least-squares solvers can be just as accurate and
stable as classical direct solvers", arXiv:2406.03468, 2024). Every step recomputes the
true residual, so nothing drifts as LSQR's recurrences do. The iterates stay
in the range of ``N``, so the result is the minimum-norm solution, as LSQR's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from dasketch.linear_model._regression_passes import basis_gram_pass

# A step that does not shrink the gradient U^T r by this factor has reached the
# rounding of the products with A (or a Gram matrix too inaccurate to help).
STALL_FACTOR = 0.5

# The Gram pass is compute bound and a pass of LSQR's products memory bound:
# their times compare as the flops of the one over this many times the bytes of
# the other, the ratio of a core's double-precision rate to its share of memory
# bandwidth on current servers (about 10 to 20).
FLOPS_PER_BYTE = 16

# Passes the refinement itself takes at the tolerances used (2 to 4).
REFINEMENT_PASSES = 4


@dataclass(frozen=True)
class Refined:
    """What :func:`refine` gives: per target (columns), the solution ``x`` (d x K),
    ``A^T r`` at it (``gradient``, d x K), ``||r||`` (``residual_norm``), LSQR's
    stop code (``istop``: 1 residual small, 2 converged, 5 at the rounding
    floor, 7 at ``max_iter``) and ``||U^T r|| / (||U||_F ||r||)``
    (``optimality``); the passes taken (``n_iter``), ``G`` (``gram``) and the
    factor ``F`` with ``A = (A B) F`` for the basis ``B`` of ``G`` (``factor``:
    ``R`` or ``Sigma_k``, see
    :func:`~dasketch.linear_model._regression_passes.gram_singular_values`)."""

    x: np.ndarray
    gradient: np.ndarray
    residual_norm: np.ndarray
    istop: np.ndarray
    optimality: np.ndarray
    n_iter: int
    gram: np.ndarray
    factor: np.ndarray


@dataclass(frozen=True)
class _Basis:
    """The basis ``B`` of the refinement: ``matrix`` (``N``), or ``R^{-1}`` applied
    by triangular solves with ``R`` (``triangular``)."""

    matrix: np.ndarray
    triangular: np.ndarray

    def times(self, z):
        if self.triangular is None:
            return self.matrix @ z
        return scipy.linalg.solve_triangular(self.triangular, z, check_finite=False)

    def transpose_times(self, g):
        if self.triangular is None:
            return self.matrix.T @ g
        return scipy.linalg.solve_triangular(self.triangular, g, trans="T", check_finite=False)


def refinement_pays(precond, *, sparse, tol):
    """Whether the Gram pass and the refinement cost less than LSQR's passes.

    LSQR preconditioned by ``N`` alone needs about ``log(tol) / log((kappa - 1) /
    (kappa + 1))`` iterations of two passes (``kappa`` the check sketch's
    estimate of ``cond(A N)``), and each pass reads every stored value of ``A``
    (8 bytes a dense value, 12 a sparse one); the Gram pass costs ``2 s k + k^2``
    flops a row (``s`` stored values a row, ``k`` the rank), at
    :data:`FLOPS_PER_BYTE`. A sparse row is taken to hold one value (its
    nonzeros are not counted), which favours LSQR.
    """
    k = precond.rank
    kappa = precond.condition_number_estimate
    if not k or not np.isfinite(kappa):
        return False
    rate = (kappa - 1) / (kappa + 1)
    lsqr_passes = 2 * (math.log(tol) / math.log(rate) if rate > 0 else 1) + 4
    stored, value_bytes = (1, 12) if sparse else (precond.basis.shape[0], 8)
    gram_passes = (2 * stored * k + k * k) / (FLOPS_PER_BYTE * value_bytes * stored)
    return gram_passes + REFINEMENT_PASSES < lsqr_passes


def refine(blocks, products, precond, weights, shifted, *, tol, max_iter, client=None):
    """Solve ``min ||c - A x||`` per column of ``c = W^(1/2) shifted`` by the
    refinement of the module docstring; None when ``G`` is not numerically
    positive definite (the caller then runs LSQR).

    Parameters
    ----------
    blocks : RowBlocks
    products : WeightedCentredProducts
        Products with ``A``, whose weights and mean are the preconditioner's.
    precond : SketchPreconditioner
    weights : ndarray (n,)
    shifted : ndarray (n, K)
        The targets minus their (weighted) means (or unshifted without centring).
    tol : float
        Stop a target when ``||U^T r|| <= tol ||U||_F ||r||`` or ``||r|| <= tol
        ||c||``, as LSQR with ``atol = btol = tol``.
    max_iter : int
        Refinement passes at most.

    Returns
    -------
    Refined or None
    """
    # At full rank the basis is R^{-1} (the blocks' U = A R^{-1} by triangular
    # products, half the multiplications of A N); else N, over the numerical rank.
    R = precond.R if precond.rank == precond.R.shape[1] else None
    gram, projected = basis_gram_pass(blocks, precond, weights, shifted,
                                      triangular=R is not None, client=client)
    try:
        factor = scipy.linalg.cho_factor(gram, lower=True)
    except np.linalg.LinAlgError:
        return None
    basis = _Basis(precond.basis if R is None else None, R)
    u_norm = math.sqrt(float(np.trace(gram)))
    root = np.sqrt(weights)[:, None]
    c_norm = np.linalg.norm(shifted * root, axis=0)
    K = shifted.shape[1]
    z = scipy.linalg.cho_solve(factor, projected)
    x = basis.times(z)
    best = [None] * K
    istop, active, previous = np.zeros(K, int), np.ones(K, bool), np.full(K, np.inf)
    n_iter = 0
    while True:
        gradient, r_norm = products.residual_gradient(x, shifted)
        n_iter += 1
        projected_gradient = basis.transpose_times(gradient)
        g_norm = np.linalg.norm(projected_gradient, axis=0)
        denominator = u_norm * r_norm
        optimality = np.divide(g_norm, denominator, out=np.zeros(K), where=denominator > 0)
        for j in np.flatnonzero(active):
            if best[j] is None or g_norm[j] < best[j][3]:
                best[j] = (x[:, j].copy(), gradient[:, j].copy(), r_norm[j], g_norm[j],
                           optimality[j])
        small = r_norm <= tol * c_norm
        done = active & (small | (optimality <= tol))
        stalled = active & ~done & (g_norm > STALL_FACTOR * previous)
        istop[done] = np.where(small[done], 1, 2)
        istop[stalled] = 5
        active &= ~(done | stalled)
        if not active.any():
            break
        if n_iter >= max_iter:
            istop[active] = 7
            break
        previous = g_norm
        z[:, active] += scipy.linalg.cho_solve(factor, projected_gradient[:, active])
        x = basis.times(z)
    x, gradient, r_norm, _, optimality = (np.column_stack([b[i] for b in best]) if i < 2
                                          else np.array([b[i] for b in best])
                                          for i in range(5))
    factor = np.diag(precond.singular_values[:precond.rank]) if R is None else R
    return Refined(x, gradient, r_norm, istop, optimality, n_iter, gram, factor)
