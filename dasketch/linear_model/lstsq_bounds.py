"""The a-posteriori error bound of sketch-preconditioned LSQR
(:func:`~dasketch.linear_model.lstsq_solver.sketch_lstsq`).

With ``U = A N`` for the preconditioner's basis ``N`` and the residual ``r``, the
distance of ``x`` to the minimum-norm least-squares solution is bounded by
``||N|| ||U^T r|| / sigma_min(U)^2`` plus rounding, ``sigma_min(U)`` estimated by
an independent check sketch (Meng, Saunders, Mahoney, SIAM J. Sci. Comput. 2014;
Paige and Saunders, ACM TOMS 1982).
"""

from __future__ import annotations

import numpy as np

# Unit of the rounding terms of the error bound (as the dual random projection's).
_ROUNDING = 2.0 * np.finfo(np.float64).eps
# The error bound holds when the check embedding S' neither stretches nor
# shrinks a vector of the range of A by more than this factor (an OSNAP
# embedding of 8 d rows distorts by about 1 +- 0.35).
_EMBEDDING_SLACK = 2.0


def error_bound(precond, x, residual, gradient, targets_norm):
    """A bound on ``||x - x*||`` per target (columns) for the minimum-norm
    least-squares solution ``x*`` of ``A``.

    With ``U = A N`` (``N`` the preconditioner's ``basis``, spanning the row
    space of ``A``), ``x = N z`` and ``x* = N z*`` with ``U^T U (z - z*) =
    -U^T r``, so ``||x - x*|| <= ||N|| ||U^T r|| / sigma_min(U)^2``, with
    ``||N|| = 1 / sigma_k(R)`` and ``sigma_min(U)`` at least the smallest
    singular value of the check sketch ``S' U`` over ``_EMBEDDING_SLACK``
    (a high-probability bound: it holds when ``S'`` distorts no vector of the
    range of ``A`` by more than that factor). ``U^T r`` is computed in floating
    point; with ``u = 2 eps``, ``F`` the Frobenius norm of the weighted rows
    before centring plus ``sqrt(sum w) ||m||`` and ``||b||`` the weighted
    targets' norm plus ``sqrt(sum w) |mean(b)|``, its rounding error is taken
    as ``sigma_max(U) u (sqrt(d) F ||x|| + ||b||) + ||N|| u sqrt(n) F ||r||``
    (the residual's entries, then the sums over rows, errors growing as the
    square root of the number of terms) and is added: the bound then also
    covers the accuracy floor of about ``eps kappa ||x||`` (plus ``eps
    kappa^2 ||r|| / ||A||``) of ill-conditioned problems.

    Parameters
    ----------
    precond : SketchPreconditioner
    x : ndarray (d, k)
    residual : ndarray (n, k)
        ``b - A x``.
    gradient : ndarray (rank, k)
        ``U^T r``, computed.
    targets_norm : ndarray (k,)
        ``||W^(1/2) b|| + sqrt(sum w) |mean(b)|`` per target.

    Returns
    -------
    ndarray (k,)
    """
    k = precond.rank
    if k == 0:
        return np.zeros(x.shape[1])
    n, d = residual.shape[0], x.shape[0]
    norm_n = 1.0 / precond.singular_values[k - 1]
    check = precond.check_singular_values
    low, high = check[-1] / _EMBEDDING_SLACK, check[0] * _EMBEDDING_SLACK
    frobenius = precond.frobenius
    if precond.mean is not None:
        frobenius += np.sqrt(precond.weight_sum) * np.linalg.norm(precond.mean)
    x_norm, r_norm = np.linalg.norm(x, axis=0), np.linalg.norm(residual, axis=0)
    rounding = (high * _ROUNDING * (np.sqrt(d) * frobenius * x_norm + targets_norm)
                + norm_n * _ROUNDING * np.sqrt(n) * frobenius * r_norm)
    return norm_n * (np.linalg.norm(gradient, axis=0) + rounding) / low ** 2


def _outside_sketch(precond, full_gradient, residual):
    """Per target, whether ``A^T r`` has a part outside the row space of the
    sketch beyond what rounding and the directions dropped as numerically null
    can put there (:func:`outside_allowance`): the sketch then lost directions of
    the row space of ``A`` that the targets see, and the error bound, which
    assumes that it spans them, does not hold."""
    V = precond.basis * precond.singular_values[:precond.rank]   # orthonormal
    part = np.linalg.norm(full_gradient - V @ (V.T @ full_gradient), axis=0)
    return part > outside_allowance(precond, full_gradient, residual)


def _gamma(k):
    """Higham's ``gamma_k = k u / (1 - k u)``, ``u = eps / 2``."""
    ku = k * np.finfo(np.float64).eps / 2
    return ku / (1.0 - ku)


def outside_allowance(precond, full_gradient, residual):
    """The most of the computed ``A^T r`` that rounding and the directions dropped
    as numerically null can put outside the sketch's row space, per target.

    Three terms (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd
    ed., 2002, eq. (3.5) and Lemma 3.3): ``fl(A^T r)`` is within ``gamma_{n+2}
    |A|^T |r|`` of ``A^T r`` (inner dimension ``n``, one rounding more for the
    centring term and one for the weights), of norm at most ``gamma_{n+2} F
    ||r||``, ``F`` the Frobenius norm of the weighted rows before centring plus
    ``sqrt(sum w) ||m||``; the directions dropped as null (singular values of
    ``S A`` below ``max(n, d) eps sigma_1``, which the embedding may shrink by
    ``_EMBEDDING_SLACK``) carry at most ``_EMBEDDING_SLACK max(n, d) eps sigma_1
    ||r||`` of it; and the projection ``g - V (V^T g)`` on the ``k`` orthonormal
    columns ``V`` rounds by at most ``gamma_{d+k+2} (2 sqrt(k) + 1) ||g||``
    (``|| |V| ||_2 <= sqrt(k)``). The sum is the threshold itself, with no
    factor of safety: a part of the gradient outside the sketch that exceeds it
    cannot be rounding.
    """
    n, d = residual.shape[0], full_gradient.shape[0]
    k = precond.rank
    frobenius = precond.frobenius + (0.0 if precond.mean is None else
                                     np.sqrt(precond.weight_sum) * np.linalg.norm(precond.mean))
    dropped = (_EMBEDDING_SLACK * max(n, d) * np.finfo(np.float64).eps
               * precond.singular_values[0])
    return ((_gamma(n + 2) * frobenius + dropped) * np.linalg.norm(residual, axis=0)
            + _gamma(d + k + 2) * (2 * np.sqrt(k) + 1) * np.linalg.norm(full_gradient, axis=0))
