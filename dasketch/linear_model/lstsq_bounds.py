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

from dasketch.kernels.shrink import gamma

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
    point; its rounding error is at most ``sigma_max(U)`` times that of the
    residual (:func:`residual_rounding`) plus ``||N||`` times that of ``A^T r``
    (:func:`adjoint_rounding`) plus that of the product with ``N^T``
    (:func:`basis_rounding`, with ``||fl(A^T r)|| <= F ||r|| + adjoint_rounding``),
    and is added: the bound then also covers the accuracy floor of about ``eps
    kappa ||x||`` (plus ``eps kappa^2 ||r|| / ||A||``) of ill-conditioned problems.

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
    return norms_error_bound(precond, x, residual.shape[0], np.linalg.norm(residual, axis=0),
                             gradient, targets_norm)


def norms_error_bound(precond, x, n_rows, residual_norm, gradient, targets_norm):
    """:func:`error_bound` from the residual's number of rows and its norm per
    target (``residual_norm``, (k,)): all it needs of the residual."""
    k = precond.rank
    if k == 0:
        return np.zeros(x.shape[1])
    low = precond.check_singular_values[-1] / _EMBEDDING_SLACK
    rounding = gradient_rounding(precond, x, n_rows, residual_norm, targets_norm)
    norm_n = 1.0 / precond.singular_values[k - 1]
    return norm_n * (np.linalg.norm(gradient, axis=0) + rounding) / low ** 2


def gradient_rounding(precond, x, n_rows, residual_norm, targets_norm):
    """Bound on ``||fl(U^T r) - U^T r||`` per target, as :func:`error_bound`
    adds it: a computed ``U^T r`` within it of 0 is as small as rounding lets
    it be. The preconditioner must have rank ``>= 1``."""
    k = precond.rank
    d = x.shape[0]
    norm_n = 1.0 / precond.singular_values[k - 1]
    high = precond.check_singular_values[0] * _EMBEDDING_SLACK
    frobenius = precond.frobenius
    if precond.mean is not None:
        frobenius += np.sqrt(precond.weight_sum) * np.linalg.norm(precond.mean)
    x_norm = np.linalg.norm(x, axis=0)
    adjoint = adjoint_rounding(n_rows, frobenius, residual_norm)
    return (high * residual_rounding(d, frobenius, x_norm, targets_norm) + norm_n * adjoint
            + basis_rounding(d, k, norm_n, frobenius * residual_norm + adjoint))


def basis_rounding(d, rank, basis_norm, gradient_norm):
    """Bound on ``||fl(N^T g) - N^T g||`` for the basis ``N`` (``d x rank``, of
    spectral norm ``basis_norm``) and a vector ``g`` of norm ``gradient_norm``:
    ``gamma_d sqrt(rank) ||N|| ||g||``.

    Each entry is an inner product of ``d`` terms, exact up to ``gamma_d |N|^T |g|``
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002,
    eq. (3.5)), and ``|| |N| ||_2 <= ||N||_F <= sqrt(rank) ||N||_2``, equalities
    for a basis of equal-magnitude entries (a scaled Hadamard matrix).
    """
    return gamma(d) * np.sqrt(rank) * basis_norm * gradient_norm


def residual_rounding(d, frobenius, x_norm, targets_norm):
    """Bound on ``||fl(r) - r||`` for the residual ``r = W^(1/2) (b - mean(b)) - A x``
    of ``x`` with ``d`` entries: ``gamma_{d+3} (F ||x|| + ||b||)``.

    ``F`` is the Frobenius norm of the weighted rows before centring plus
    ``sqrt(sum w) ||m||`` and ``||b||`` the weighted targets' norm plus ``sqrt(sum
    w) |mean(b)|``. Entry ``i`` is ``w_i^(1/2) ((b_i - mean(b)) - (x_i^T x - m^T x))``:
    with Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002,
    eq. (3.5) and Lemma 3.3, the inner products of ``d`` terms, the centring, the
    weight and the final subtraction make it exact up to ``gamma_{d+3} w_i^(1/2)
    (|x_i|^T |x| + |m|^T |x| + |b_i| + |mean(b)|)``, whose norm over the rows is at
    most ``gamma_{d+3} (F ||x|| + ||b||)``. No slack is left: rows of equal positive
    entries reach it to first order.
    """
    return gamma(d + 3) * (frobenius * x_norm + targets_norm)


def adjoint_rounding(n, frobenius, residual_norm):
    """Bound on ``||fl(A^T r) - A^T r||`` for ``A`` of ``n`` rows: ``gamma_{n+2} F ||r||``.

    ``A^T r`` is ``X^T (W^(1/2) r) - m sum(W^(1/2) r)``: inner dimension ``n``,
    one rounding more for the weights and one for the centring term, so it is
    exact up to ``gamma_{n+2} |A|^T |r|`` (Higham, 2nd ed., eq. (3.5)), of norm at
    most ``gamma_{n+2} F ||r||`` (``F`` as in :func:`residual_rounding`). No slack
    is left: a column of equal entries against a residual of equal magnitudes
    reaches it.
    """
    return gamma(n + 2) * frobenius * residual_norm


def intercept_rounding(shift, mean, coef):
    """Bound on the rounding error of the intercept ``shift - m^T x`` per target:
    ``gamma_{d+1} (|shift| + |m|^T |x|)``.

    An inner product of ``d`` terms and one subtraction (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., 2002, eq. (3.5)). No slack is
    left: with one feature, the product and the subtraction can each round by
    nearly half an ulp in the same direction.
    """
    return gamma(mean.shape[0] + 1) * (np.abs(shift) + np.abs(mean) @ np.abs(coef))


def _outside_sketch(precond, full_gradient, residual):
    """:func:`outside_sketch` of the residual's rows and norms."""
    return outside_sketch(precond, full_gradient, residual.shape[0],
                          np.linalg.norm(residual, axis=0))


def outside_sketch(precond, full_gradient, n_rows, residual_norm):
    """Per target, whether ``A^T r`` has a part outside the row space of the
    sketch beyond what rounding and the directions dropped as numerically null
    can put there (:func:`outside_allowance`): the sketch then lost directions of
    the row space of ``A`` that the targets see, and the error bound, which
    assumes that it spans them, does not hold."""
    V = precond.basis * precond.singular_values[:precond.rank]   # orthonormal
    part = np.linalg.norm(full_gradient - V @ (V.T @ full_gradient), axis=0)
    return part > outside_allowance(precond, full_gradient, n_rows, residual_norm)


def outside_allowance(precond, full_gradient, n_rows, residual_norm):
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
    n, d = n_rows, full_gradient.shape[0]
    k = precond.rank
    frobenius = precond.frobenius + (0.0 if precond.mean is None else
                                     np.sqrt(precond.weight_sum) * np.linalg.norm(precond.mean))
    dropped = (_EMBEDDING_SLACK * max(n, d) * np.finfo(np.float64).eps
               * precond.singular_values[0])
    r_norm = residual_norm
    return (adjoint_rounding(n, frobenius, r_norm) + dropped * r_norm
            + gamma(d + k + 2) * (2 * np.sqrt(k) + 1) * np.linalg.norm(full_gradient, axis=0))
