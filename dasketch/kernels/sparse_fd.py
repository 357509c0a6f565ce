"""Randomized Frequent Directions for sparse and wide rows, with probabilistic
certificates.

Deterministic FD rewrites the dense ``l x d`` sketch at every shrink, O(n d l) work
however sparse the rows are. Here a whole block of rows ``C`` (b x d, CSR or dense)
is first compressed to ``Z = Q^T C`` (s x d) with ``Q`` an orthonormal basis of
the randomized range of ``C`` (Halko, Martinsson, Tropp 2011, Algorithm 4.4 with
a random-sign test matrix and ``q`` power iterations), then FD-shrunk to the working
size. The passes over the data cost O(nnz s) each; the power iterations run in
float32 and the last pass, which forms the compression (in Nystrom form, without
``Q`` or ``Z``), in float64. As in Ghashami, Liberty, Phillips (KDD 2016),
the dense O(s d) work is paid once per block instead of once per few rows.

The loss of such a step, ``C^T C - B^T B = C^T (I - Q Q^T) C + (Z^T Z - B^T B)``,
is positive semi-definite but no longer known exactly. Its largest eigenvalue is
bounded a posteriori by a few Lanczos steps from a random start (Kuczynski and
Wozniakowski 1992, Theorem 4.2): with ``k`` steps and relative tolerance ``eps``
the Ritz value ``theta`` satisfies ``lambda_max <= theta / (1 - eps)`` except with
probability ``1.648 sqrt(d) exp(-sqrt(eps) (2k - 1))``. The sketch records
``theta`` (which is also a deterministic lower bound of the loss) as its shrinkage
and ``theta / (1 - eps)`` as its shrinkage bound, and the failure probabilities of
its blocks add up (union bound).

The bound, and the a-posteriori bracket of a sketch's error, are in
:mod:`dasketch.kernels.certificates`.

References
----------
.. [1] N. Halko, P.-G. Martinsson, J. A. Tropp, "Finding structure with
   randomness", SIAM Review 53(2), 2011 (Algorithm 4.4; Section 4.3, Lemma 4.1).
.. [2] M. Ghashami, E. Liberty, J. M. Phillips, "Efficient Frequent Directions
   algorithm for sparse matrices", KDD 2016.
.. [3] J. Kuczynski, H. Wozniakowski, "Estimating the largest eigenvalue by the
   power and Lanczos algorithms with a random start", SIAM J. Matrix Anal. Appl.
   13(4), 1992 (Theorem 4.2).
.. [4] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.linalg
import scipy.sparse

from dasketch.kernels.certificates import (  # noqa: F401 - re-exported
    DEFAULT_FAILURE_PROBABILITY,
    LANCZOS_TOLERANCE,
    ErrorEstimate,
    certified_largest_eigenvalue,
    check_failure_probability,
    error_from_products,
    lanczos_steps,
    largest_eigenvalue,
    product_rounding,
)
from dasketch.kernels.frequent_directions import Sketch, sketch_rows
from dasketch.kernels.shrink import EPS, check_finite_rows, shrink, shrink_rounding
from dasketch.kernels.sketch_checks import (
    centring_rounding,
    check_sketch_parameters,
    checked_mass,
    scaled_mean,
    scaled_norm,
)
from dasketch.kernels.sketch_scaling import (
    block_scale_exponent,
    divide_by_power_of_two,
    scaled_block_sketch,
)

# Four float32 power iterations: on slowly decaying sparse spectra each one cuts the
# error for two cheap float32 passes, up to the fourth (measured by
# benchmarks/bench_sparse_wide.py; figures in benchmarks/README.md).
POWER_ITERATIONS = 4


# ------------------------------------------------------------ the row operator
# Blocks whose largest entry is within 2**+-FLOAT32_SAFE_EXPONENT go to float32 as they
# are. A power iteration multiplies by C^T C twice before it orthonormalises (Y^T Y),
# raising the scale to its fourth power: 2**64 leaves 2**62 for the sums of products
# inside float32's 2**+-126.
FLOAT32_SAFE_EXPONENT = 16

class _CenteredRows:
    """``C = X - 1 mu^T`` (mu may be None) applied without densifying ``X``, in
    float64 for what enters the sketch, and in float32 for the range finder,
    divided by the power of two that brings the largest entry near 1 (float32's
    range is about 1e+-38; the range finder only needs the span of its products,
    which the exact division does not change)."""

    def __init__(self, rows, mean):
        sparse = scipy.sparse.issparse(rows)
        self.rows = rows
        # Explicit CSR transposes: C^T Q on a CSC view was measured 2x slower.
        self.rows_t = rows.T.tocsr() if sparse else rows.T
        values = rows.data if sparse else rows
        top = max(float(values.max()), -float(values.min())) if values.size else 0.0
        exponent = math.frexp(top)[1] if 0 < top < math.inf else 0
        if abs(exponent) <= FLOAT32_SAFE_EXPONENT:
            exponent = 0  # no float64 copy of the block where float32 holds it as it is
        self.rows32 = (divide_by_power_of_two(rows, exponent) if exponent else rows
                       ).astype(np.float32)
        self.rows32_t = self.rows32.T.tocsr() if sparse else self.rows32.T
        self.mean = mean
        self.mean32 = None if mean is None else np.ldexp(mean, -exponent).astype(np.float32)

    def matmat(self, W, low_precision=False):
        """``C W`` (divided by the power of two with ``low_precision``)."""
        out = (self.rows32 if low_precision else self.rows) @ W
        mean = self.mean32 if low_precision else self.mean
        if mean is not None:
            out = out - (mean.astype(W.dtype) @ W)
        return np.asarray(out)

    def rmatmat(self, Q, low_precision=False):
        """``C^T Q`` (divided by the power of two with ``low_precision``)."""
        out = (self.rows32_t if low_precision else self.rows_t) @ Q
        mean = self.mean32 if low_precision else self.mean
        if mean is not None:
            out = out - np.outer(mean.astype(Q.dtype), Q.sum(axis=0))
        return np.asarray(out)

    def gram_vec(self, y):
        """``C^T C y`` in float64."""
        return self.rmatmat(self.matmat(y[:, None]))[:, 0]


def _dominant_eigenpairs(gram, floor=1e-10):
    """Eigenpairs of a PSD Gram matrix above ``floor`` times the largest: the
    directions whose rounding cannot spoil an orthonormal basis built from them."""
    if not gram.size:
        return np.zeros(0), np.zeros((gram.shape[0], 0))
    eigvals, eigvecs = scipy.linalg.eigh(gram, check_finite=False)
    keep = eigvals > eigvals[-1] * floor if eigvals[-1] > 0 else eigvals > 0
    return eigvals[keep], eigvecs[:, keep]


def _orthonormal_columns(Y):
    """Orthonormal basis of the range of ``Y`` (steers the power iterations only)
    from the eigendecomposition of ``Y^T Y``: BLAS-3, far cheaper than numpy's
    Householder QR of a tall ``Y``."""
    eigvals, eigvecs = _dominant_eigenpairs(Y.T @ Y, floor=1e-12)
    return Y @ (eigvecs / np.sqrt(eigvals)).astype(Y.dtype)


def random_signs(rng, shape):
    """A float32 matrix of independent random signs (Rademacher). As a test matrix
    of the range finder it works as well as a Gaussian one ([1]_ Section 4.6) and
    is drawn several times faster; the certificate does not depend on it."""
    bits = np.unpackbits(rng.integers(0, 256, size=-(-math.prod(shape) // 8), dtype=np.uint8))
    signs = bits[:math.prod(shape)].astype(np.float32)
    signs *= 2
    signs -= 1
    return signs.reshape(shape)


def randomized_shrink(operator, n_features, sketch_size, rng,
                      power_iterations=POWER_ITERATIONS):
    """``B = shrink(Q^T C)`` to ``sketch_size`` with ``C^T C - B^T B`` PSD ([1]_
    Alg. 4.4, then one FD shrink).

    ``Q`` is an orthonormal basis of ``Y = C W`` for a random-sign test matrix ``W``
    (``sketch_size`` columns) steered by ``power_iterations`` products with
    ``C^T C``, all in float32: they only choose the subspace. Neither ``Q`` nor
    ``Z = Q^T C`` is formed. With ``T = C^T Y`` (float64), ``Y^T Y = V diag(lambda)
    V^T`` and ``T = U_T diag(psi)^{1/2} P^T`` (from ``T^T T``),
    ``Z = R^T U_T^T`` for the small ``R = diag(psi)^{1/2} P^T V diag(lambda)^{-1/2}``
    -- exactly ``Q^T C`` with ``Q = Y V diag(lambda)^{-1/2}``, for any ``Y`` -- and a
    shrink commutes with the orthonormal ``U_T``: ``B = shrink(R^T) U_T^T``. Cost:
    one float64 and ``2 q + 1`` float32 products with the data, O(nnz l) each, and
    O((b + d) l^2) dense work.
    """
    n_rows = operator.rows.shape[0]
    W = random_signs(rng, (n_features, sketch_size))
    for _ in range(power_iterations):
        # Orthonormalise on the shorter side: it keeps the float32 steps well scaled.
        Y = operator.matmat(W, low_precision=True)
        if n_rows <= n_features:
            W = operator.rmatmat(_orthonormal_columns(Y), low_precision=True)
        else:
            W = _orthonormal_columns(operator.rmatmat(Y, low_precision=True))
    Y = operator.matmat(W, low_precision=True).astype(np.float64)
    lam, V = _dominant_eigenpairs(Y.T @ Y)
    T = operator.rmatmat(Y)
    psi, P = _dominant_eigenpairs(T.T @ T)
    R = (np.sqrt(psi)[:, None] * P.T) @ (V / np.sqrt(lam))
    small, _ = shrink(R.T[:0], R.T, sketch_size)
    return (small @ (P / np.sqrt(psi)).T) @ T.T


# ------------------------------------------------------------------- a block
def sketch_rows_randomized(rows, sketch_size, *, method="rfd", alpha0=0.0, center=False,
                           failure_probability=DEFAULT_FAILURE_PROBABILITY, seed=0,
                           row_offset=0, power_iterations=POWER_ITERATIONS):
    """Sketch one block of rows by randomized compression and one FD shrink.

    Parameters
    ----------
    rows : scipy.sparse matrix or ndarray of shape (b, d)
        Never densified (centring is applied implicitly).
    sketch_size : int
        ``l >= 2`` of the block sketch; the compression keeps ``l`` directions.
    method : {"rfd", "fd"}
    alpha0 : float
    center : bool
    failure_probability : float
        Probability that this block's certified loss is too small.
    seed : int
        With ``row_offset`` it seeds the random test matrix, so the result does
        not depend on how the blocks are scheduled.
    row_offset : int
        Global index of the first row.
    power_iterations : int

    Returns
    -------
    Sketch
        With ``shrinkage`` the Lanczos estimate of the step's loss and
        ``shrinkage_bound`` its bound, valid with probability ``1 -
        failure_probability``. When the block is small or narrow enough for an exact
        shrink to cost no more, the deterministic :func:`sketch_rows` is used and
        the sketch stays certified.
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    failure_probability = check_failure_probability(failure_probability)
    sparse = scipy.sparse.issparse(rows)
    rows = scipy.sparse.csr_matrix(rows, dtype=np.float64) if sparse else np.asarray(
        rows, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {rows.shape}")
    exponent = block_scale_exponent(rows, alpha0)
    if exponent:
        block = sketch_rows_randomized(
            divide_by_power_of_two(rows, exponent), sketch_size, method=method,
            alpha0=alpha0, center=center, failure_probability=failure_probability,
            seed=seed, row_offset=row_offset, power_iterations=power_iterations)
        return scaled_block_sketch(block, exponent, rows)
    n_rows, d = rows.shape
    active = None
    if sparse:
        # Columns with no nonzero in this block contribute nothing to C^T C: the block
        # is sketched on its active columns and the result scattered back, so every
        # d-sized cost (test matrix, orthonormalisation, Lanczos, shrink) becomes an
        # m-sized one. Exact, and a large saving for hashed or one-hot features.
        counts = np.bincount(rows.indices, minlength=d)
        if 0 < np.count_nonzero(counts) < d:
            active = np.flatnonzero(counts)
            position = np.cumsum(counts > 0) - 1
            rows = scipy.sparse.csr_matrix((rows.data, position[rows.indices], rows.indptr),
                                           shape=(n_rows, active.size))
    block = _sketch_active_columns(rows, sketch_size, method, alpha0, center,
                                   failure_probability, seed, row_offset, power_iterations)
    return block if active is None else _scatter_columns(block, active, d)


def _scatter_columns(block, active, n_features):
    """The sketch of a block restricted to its ``active`` columns, as a sketch of
    all ``n_features`` columns (zeros elsewhere)."""
    B = np.zeros((block.B.shape[0], n_features))
    B[:, active] = block.B
    mean = None
    if block.mean is not None:
        mean = np.zeros(n_features)
        mean[active] = block.mean
    return replace(block, B=B, mean=mean, _svd=[])


def _sketch_active_columns(rows, sketch_size, method, alpha0, center, failure_probability,
                           seed, row_offset, power_iterations):
    sparse = scipy.sparse.issparse(rows)
    n_rows, d = rows.shape
    if n_rows <= 2 * sketch_size or d <= 4 * sketch_size:
        return sketch_rows(rows, sketch_size, method=method, alpha0=alpha0, center=center,
                           row_offset=row_offset)
    check_finite_rows(rows, row_offset)
    mean = scaled_mean(rows) if center else None
    if center and not sparse:
        # Dense rows are centred before any product: the products then round in
        # proportion to the centred rows, not to ``n ||mu||^2`` (a mean of 1e12 and
        # unit spread would otherwise leave a rounding term 1e24 times the data's).
        rows = rows - mean
    operator = _CenteredRows(rows, mean if sparse else None)
    rng = np.random.default_rng([int(seed), int(row_offset)])
    B = randomized_shrink(operator, d, sketch_size, rng, power_iterations)

    def loss_vec(y):
        return operator.gram_vec(y) - B.T @ (B @ y)

    theta, bound, steps = certified_largest_eigenvalue(loss_vec, d, failure_probability, rng)
    values = rows.data if sparse else rows
    raw_norm_sq = float(np.einsum("i,i->", values.ravel(), values.ravel()))
    frobenius_sq = _centred_sparse_norm_sq(rows, mean) if center and sparse else raw_norm_sq
    frobenius_sq = checked_mass(frobenius_sq, lambda: scaled_norm(values),
                                f"the block of rows [{row_offset}, {row_offset + n_rows})")
    rounding = randomized_rounding(n_rows, d, steps, raw_norm_sq)
    if center:
        rounding += centring_rounding(n_rows, frobenius_sq, mean)
    empty = Sketch.empty(d, sketch_size, method=method, alpha0=alpha0, center=center)
    return replace(empty, B=B, shrinkage=theta, n_rows=n_rows, mean=mean,
                   frobenius_sq=frobenius_sq, shrinkage_bound=bound,
                   failure_probability=failure_probability,
                   rounding=rounding, _svd=[])


def _centred_sparse_norm_sq(rows, mean):
    """``||C - 1 mu^T||_F^2`` of sparse rows, summed as the squares of the centred
    nonzeros plus ``mu_j^2`` for every zero of column ``j``: no cancellation of the
    raw norm against ``n ||mu||^2``, never densified."""
    centred = rows.data - mean[rows.indices]
    zeros = rows.shape[0] - np.bincount(rows.indices, minlength=rows.shape[1])
    return float(np.einsum("i,i->", centred, centred) + zeros @ (mean * mean))


def randomized_rounding(n_rows, n_features, steps, data_norm_sq):
    """Bound on the rounding error of a randomized block sketch's certified loss.

    The Lanczos estimate bounds the largest eigenvalue of the loss operator as it is
    computed, ``y -> C^T (C y) - B^T (B y)``; each product is exact up to ``gamma_k``
    times the product of the absolute values (inner dimensions ``d``, ``b`` and
    ``l``), at most ``(b + d + l) eps ||X||_F^2`` per unit vector in all, and the
    same holds for the negative side of ``C^T C - B^T B`` that a largest-eigenvalue
    estimate cannot see (``B`` is built from products of the same size). Twice
    :func:`~dasketch.kernels.shrink.shrink_rounding` of the ``b x d`` block covers
    both, and ``4 k eps ||X||_F^2`` the ``k`` reorthogonalised Lanczos steps.
    """
    return (2.0 * shrink_rounding(n_rows, n_features, data_norm_sq)
            + 4.0 * steps * EPS * data_norm_sq)
