"""Probabilistic certificates of a sketch's error: the Lanczos bound on the loss of
a randomized step and the a-posteriori bracket of the spectral error.

The loss of a randomized Frequent Directions step (:mod:`dasketch.kernels.sparse_fd`)
is positive semi-definite but not known exactly; its largest eigenvalue is bounded
a posteriori by a few Lanczos steps from a random start ([2]_ Theorem 4.2): with
``k`` steps and relative tolerance ``eps`` the Ritz value ``theta`` satisfies
``lambda_max <= theta / (1 - eps)`` except with probability ``1.648 sqrt(d)
exp(-sqrt(eps) (2k - 1))``. The spectral error of any sketch is bracketed from
``A^T A Omega`` for a few Gaussian vectors ``Omega`` ([1]_ Lemma 4.1).

References
----------
.. [1] N. Halko, P.-G. Martinsson, J. A. Tropp, "Finding structure with
   randomness", SIAM Review 53(2), 2011 (Section 4.3, Lemma 4.1).
.. [2] J. Kuczynski, H. Wozniakowski, "Estimating the largest eigenvalue by the
   power and Lanczos algorithms with a random start", SIAM J. Matrix Anal. Appl.
   13(4), 1992 (Theorem 4.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg

from dasketch.kernels.shrink import EPS
from dasketch.kernels.sketch_checks import scaled_norm

DEFAULT_FAILURE_PROBABILITY = 1e-6
# Relative accuracy asked of the Lanczos estimate: the certified loss is the Ritz
# value divided by (1 - LANCZOS_TOLERANCE).
LANCZOS_TOLERANCE = 0.25


def check_failure_probability(failure_probability):
    """Raise ValueError unless ``0 < failure_probability < 1``."""
    if (not isinstance(failure_probability, (int, float, np.floating))
            or isinstance(failure_probability, bool)
            or not 0 < failure_probability < 1):
        raise ValueError("failure_probability must be a number in (0, 1), got "
                         f"{failure_probability!r}")
    return float(failure_probability)


# ------------------------------------------------------------------- Lanczos
def lanczos_steps(dim, failure_probability, tolerance=LANCZOS_TOLERANCE):
    """Lanczos steps ``k`` such that ``1.648 sqrt(dim) exp(-sqrt(tol) (2k - 1))``
    is at most ``failure_probability`` ([2]_ Theorem 4.2)."""
    steps = (math.log(1.648 * math.sqrt(dim) / failure_probability)
             / math.sqrt(tolerance) + 1.0) / 2.0
    return int(min(max(math.ceil(steps), 1), dim))


def largest_eigenvalue(matvec, dim, steps, rng):
    """Largest Ritz value of a symmetric PSD operator after ``steps`` Lanczos steps.

    Hand-written because the bound of [2]_ is for plain Lanczos with a fixed
    number of steps from one uniformly random start; ARPACK (``eigsh``) restarts
    and stops on its own criteria. Full reorthogonalisation keeps the recurrence
    close to exact arithmetic. The Ritz value never exceeds the largest eigenvalue.
    """
    basis = np.empty((steps, dim))
    v = rng.standard_normal(dim)
    basis[0] = v / np.linalg.norm(v)
    diagonal, offdiagonal = [], []
    for j in range(steps):
        w = matvec(basis[j])
        diagonal.append(float(basis[j] @ w))
        # Classical Gram-Schmidt, repeated while it removes more than half of the
        # norm ("twice is enough", Daniel, Gragg, Kaufman and Stewart 1976).
        beta = float(np.linalg.norm(w))
        for _ in range(3):
            w -= basis[:j + 1].T @ (basis[:j + 1] @ w)
            beta, before = float(np.linalg.norm(w)), beta
            if beta > 0.5 * before:
                break
        if j == steps - 1 or beta <= 1e-13 * max(abs(diagonal[-1]), np.finfo(float).tiny):
            break  # an invariant subspace holding the start vector: exact
        offdiagonal.append(beta)
        basis[j + 1] = w / beta
    ritz = scipy.linalg.eigvalsh_tridiagonal(np.array(diagonal), np.array(offdiagonal),
                                             select="i", select_range=(len(diagonal) - 1,) * 2)
    return max(float(ritz[0]), 0.0)


def certified_largest_eigenvalue(matvec, dim, failure_probability, rng):
    """``(theta, theta / (1 - tol), steps)``: the Ritz value of
    :func:`largest_eigenvalue` after :func:`lanczos_steps` steps, and its bound.

    ``theta <= lambda_max`` always; ``lambda_max <= theta / (1 - tol)`` except with
    probability ``failure_probability`` over the random start, for every PSD
    spectrum ([2]_ Theorem 4.2, ``tol = LANCZOS_TOLERANCE``).
    """
    steps = lanczos_steps(dim, failure_probability)
    theta = largest_eigenvalue(matvec, dim, steps, rng)
    return theta, theta / (1.0 - LANCZOS_TOLERANCE), steps


# --------------------------------------------------- a-posteriori estimate
@dataclass(frozen=True)
class ErrorEstimate:
    """Bracket of the spectral error ``||A^T A + alpha0 I - (B^T B + alpha I)||_2``.

    Attributes
    ----------
    lower : float
        ``||E Q||_2`` for an orthonormal basis ``Q`` of the test vectors, less the
        rounding of the products (:func:`product_rounding`): always at most the
        true error (deterministic).
    upper : float
        ``10 sqrt(2/pi) max_i ||E w_i||`` ([1]_ Lemma 4.1), each norm plus its
        rounding: at least the true error except with probability
        ``failure_probability = 10 ** -n_vectors``.
    n_vectors : int
    failure_probability : float
    """

    lower: float
    upper: float
    n_vectors: int
    failure_probability: float


def error_from_products(sketch, omega, gram_omega, column_sums=None):
    """:class:`ErrorEstimate` from ``Omega`` (d x r Gaussian) and ``A^T A Omega``.

    ``gram_omega`` is ``X^T X Omega`` of the raw rows; for a centred sketch the
    rank-one term ``n mu mu^T Omega`` is removed here with the sketch's mean.
    Every vector norm is taken scaled by its largest entry (as LAPACK's ``dnrm2``,
    and the spectral norm by LAPACK's SVD), so no square underflows: an error
    near ``1e-198`` (data at ``1e-100``) is bracketed, never collapsed to 0.
    """
    E_omega = np.array(gram_omega, dtype=np.float64)
    if sketch.centered:
        E_omega -= sketch.n_rows * np.outer(sketch.mean, sketch.mean @ omega)
    E_omega -= sketch.B.T @ (sketch.B @ omega) + (sketch.alpha - sketch.alpha0) * omega
    r = omega.shape[1]
    _, R = scipy.linalg.qr(omega, mode="economic")
    # Each column E omega_i is computed to within rounding * ||omega_i||: the
    # bracket widens by that much on both sides.
    rounding = product_rounding(sketch)
    column_norms = _column_norms(omega)
    smallest = float(np.linalg.svd(R, compute_uv=False)[-1])
    # E Q = E Omega R^{-1}; its norm is a max over unit vectors in range(Omega).
    lower = float(np.linalg.norm(scipy.linalg.solve_triangular(R, E_omega.T, trans="T"), 2))
    lower = max(lower - rounding * scaled_norm(column_norms) / smallest, 0.0)
    upper = float(10.0 * math.sqrt(2.0 / math.pi)
                  * (_column_norms(E_omega) + rounding * column_norms).max())
    return ErrorEstimate(lower=lower, upper=max(upper, lower), n_vectors=int(r),
                         failure_probability=10.0 ** (-r))


def _column_norms(matrix):
    """Euclidean norm of every column of ``matrix``, each scaled by its largest
    entry (:func:`~dasketch.kernels.sketch_checks.scaled_norm`)."""
    return np.array([scaled_norm(column) for column in matrix.T])


def product_rounding(sketch):
    """Bound on ``||fl(E omega) - E omega|| / ||omega||`` for the products of
    :func:`error_from_products`: ``gamma_k (||X||_F^2 + alpha)`` with
    ``gamma_k = k u / (1 - k u)``, ``u = eps / 2`` and ``k = n + 3 d + l + 9``.

    With Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002
    (eq. (3.5) for a product, Lemma 3.3 for ``gamma_j + gamma_k + gamma_j gamma_k
    <= gamma_{j+k}``): ``X^T (X omega)`` (inner dimensions ``d``, then ``n`` summed
    over blocks in any order) is exact up to ``gamma_{n+d} |X|^T |X| |omega|``,
    ``B^T (B omega)`` up to ``gamma_{l+d} |B|^T |B| |omega|`` and the centring term
    ``n mu (mu^T omega)`` up to ``gamma_{d+2}`` times its absolute value; the three
    subtractions that combine them and ``(alpha - alpha0) omega`` add ``gamma_3``
    to each. The norms of the absolute products are at most ``||X||_F^2`` (the raw
    rows: ``||A||_F^2 + n ||mu||^2`` when centred), ``||B||_F^2 <= ||X||_F^2`` and
    ``n ||mu||^2 <= ||X||_F^2`` per unit vector, so the sum is at most
    ``gamma_{n+3d+l+9} (||X||_F^2 + alpha)``. No slack is left: a product rounded
    as badly as (3.5) allows, on rank-one data with ``n`` much larger than ``d``
    and ``l``, reaches more than half of it.
    """
    n, d, l = sketch.n_rows, sketch.n_features, sketch.sketch_size
    raw_norm_sq = sketch.frobenius_sq
    if sketch.centered:
        raw_norm_sq += n * float(sketch.mean @ sketch.mean)
    k = (n + 3 * d + l + 9) * EPS / 2
    return k / (1.0 - k) * (raw_norm_sq + sketch.alpha)
