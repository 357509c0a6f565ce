r"""Nonnegative least squares (``positive=True``) preconditioned by the sketch.

``min_{x >= 0} 1/2 ||A x - b||^2`` for ``A = W^(1/2) (X - 1 m^T)`` (weighted,
centred with an intercept, which is then unconstrained: ``mean(b) - m^T x``, as
scikit-learn's ``LinearRegression(positive=True)``), by the preconditioned
projected Newton method of :mod:`dasketch.linear_model.nonnegative` with
``M = R^T R``, ``R`` from the sketch ``QR(S A) = Q R`` of
:func:`~dasketch.linear_model.preconditioning.precondition_blocks`. Restricted
to the free coefficients ``F`` it is ``R_F^T R_F``, ``R_F = R[:, F]``, and
``A_F = Q R_F`` up to the embedding's distortion (``A_F R_F^+`` is
``A R^{-1}`` on the vectors supported on ``F``), so ``M_FF`` is as good a
preconditioner of ``A_F^T A_F`` as ``M`` is of ``A^T A``; it is applied through
the SVD of ``R_F``. Each product with ``A^T A`` is a pass for ``A^T`` and one
for ``A`` over out-of-core data.

Certificate: the projected gradient ``pg`` of ``g = A^T (A x - b)``
(:func:`~dasketch.linear_model.nonnegative.projected_gradient`), zero exactly
at a KKT point; ``optimality_residual = ||pg|| / ||A^T b||``, below ``tol``
when converged (as LSQR's relative normal-equation residual). When ``A`` has
full column rank the problem is ``mu``-strongly convex with ``mu =
sigma_min(A)^2 >= (sigma_min(R) sigma_min(A N))^2`` (``sigma_min(A N)`` from
the check sketch, as :func:`~dasketch.linear_model.lstsq_bounds.error_bound`)
and ``||x - x*|| <= ||pg|| / mu`` (the natural residual bound, see
:mod:`dasketch.linear_model.dual_projection.positive`), plus the rounding of
``g``; otherwise the minimiser need not be unique and the bound is infinite.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dasketch.linear_model.lstsq_bounds import (
    _EMBEDDING_SLACK,
    adjoint_rounding,
    residual_rounding,
)
from dasketch.linear_model.nonnegative import (
    column_norms,
    projected_gradient,
    projected_newton,
)

# istop of the result: certified to tol / stopped before (as LSQR's 1 and 7).
CERTIFIED, NOT_CERTIFIED = 1, 7


def solve_nonnegative(precond, products, centred, *, tol, max_iter):
    """``x >= 0`` per column of ``centred`` (the weighted, centred targets);
    returns ``x`` (d, k), the iterations, ``istop`` and the relative KKT
    residual per target."""
    problem = _NonnegativeProblem(precond, products, centred, tol)
    start = np.maximum(precond.x0.reshape(precond.R.shape[0], -1), 0.0)
    x, G, f, n_iter = projected_newton(problem, [start], max_iter=max_iter)
    bound, done, _ = problem.certify(x, G, f)
    istop = np.where(done, CERTIFIED, NOT_CERTIFIED)
    if not done.all():
        warnings.warn(f"nonnegative least squares: the KKT residual (projected gradient) "
                      f"{float(np.max(problem.residual(x, G))):.3g} relative to ||A^T b|| is "
                      f"not certified to tol={tol:g} after {n_iter} iterations "
                      f"(max_iter={max_iter}); increase max_iter or tol (ill-conditioned or "
                      "rank-deficient data reach a rounding floor)", ConvergenceWarning,
                      stacklevel=4)
    return x, n_iter, istop.tolist(), problem.residual(x, G).tolist()


def positive_bound(precond, x, full_gradient, residual, targets_norm):
    """``||x - x*||`` bound per target for the nonnegative solution (module
    docstring); ``full_gradient`` is ``A^T r`` at ``x``, computed."""
    mu, rounding = _modulus_and_rounding(precond, x, column_norms(residual), targets_norm,
                                         residual.shape[0])
    size = column_norms(projected_gradient(x, -full_gradient))
    return np.where(mu > 0, (size + rounding) / np.where(mu > 0, mu, 1.0), np.inf)


def _modulus_and_rounding(precond, x, residual_norm, targets_norm, n):
    """A lower bound on ``sigma_min(A)^2`` (0 below full column rank) and the
    rounding error of the computed gradient ``A^T r``: with ``F >= ||A||`` (see
    :func:`~dasketch.linear_model.lstsq_bounds.error_bound`), ``F`` times that of
    the residual (:func:`~dasketch.linear_model.lstsq_bounds.residual_rounding`)
    plus that of the product (:func:`~dasketch.linear_model.lstsq_bounds.adjoint_rounding`)."""
    d = x.shape[0]
    frobenius = _frobenius(precond)
    mu = 0.0
    if precond.rank == d and precond.check_singular_values is not None:
        low = precond.check_singular_values[-1] / _EMBEDDING_SLACK
        mu = (precond.singular_values[d - 1] * low) ** 2
    rounding = (frobenius * residual_rounding(d, frobenius, column_norms(x), targets_norm)
                + adjoint_rounding(n, frobenius, residual_norm))
    return mu, rounding


def _frobenius(precond):
    """``F >= ||A||_F`` for the centred ``A``: that of the weighted rows before
    centring plus ``sqrt(sum w) ||m||``."""
    centring = 0.0 if precond.mean is None else \
        np.sqrt(precond.weight_sum) * np.linalg.norm(precond.mean)
    return precond.frobenius + centring


class _NonnegativeProblem:
    """Nonnegative least squares as
    :func:`~dasketch.linear_model.nonnegative.projected_newton` sees it."""

    def __init__(self, precond, products, centred, tol):
        self.precond, self.products, self.centred, self.tol = precond, products, centred, tol
        d = precond.R.shape[0]
        self.bounded = np.ones(d, dtype=bool)
        self.g_zero = -products.adjoint(centred).reshape(d, -1)
        self.f_zero = 0.5 * column_norms(centred) ** 2
        self.reference = np.where(column_norms(self.g_zero) > 0, column_norms(self.g_zero),
                                  1.0)
        self.lipschitz = np.full(centred.shape[1],
                                 max(_frobenius(precond) ** 2, np.finfo(float).tiny))
        self.target_norms = column_norms(centred)

    def product(self, P, columns):
        return self.products.adjoint(self.products.forward(P))

    def preconditioner(self, k, free):
        return _SketchRestricted(self.precond.R[:, free])

    def residual(self, x, G):
        """``||pg|| / ||A^T b||`` per target."""
        return column_norms(projected_gradient(x, G)) / self.reference

    def certify(self, x, G, f):
        r_norm = np.sqrt(np.maximum(2.0 * f, 0.0))
        _, rounding = _modulus_and_rounding(self.precond, x, r_norm, self.target_norms,
                                            self.centred.shape[0])
        size = column_norms(projected_gradient(x, G))
        return size, size <= self.tol * self.reference, size <= rounding


class _SketchRestricted:
    """``(R_F^T R_F)^{-1}`` through the SVD of ``R_F``; directions of ``R_F``'s
    numerical null space get the smallest kept singular value."""

    def __init__(self, RF):
        _, s, self.Vt = np.linalg.svd(RF, full_matrices=False)
        floor = max(s[0] if s.size else 0.0, np.finfo(float).tiny) * \
            max(RF.shape) * np.finfo(float).eps
        kept = s[s > floor]
        self.inverse = 1.0 / np.maximum(s, kept[-1] if kept.size else 1.0) ** 2

    def apply(self, r):
        return self.Vt.T @ (self.inverse * (self.Vt @ r))
