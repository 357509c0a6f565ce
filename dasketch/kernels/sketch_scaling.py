"""Sketches of rows with entries beyond ``2**SAFE_EXPONENT`` or all below
``2**-SAFE_EXPONENT``: the power of two a block is divided by before it is
sketched (its ``scale_exponent``, negative for tiny blocks, which are multiplied
up), and the rounding that division adds.

Dividing by a power of two is exact in float64 but for entries pushed below its
smallest subnormal; every function here that divides adds a bound on that
underflow to the sketch's ``rounding``. Multiplying tiny rows up by a power of
two is exact: their squares, which would underflow (entries below about
``1.5e-154`` square to subnormals, below about ``2.2e-162`` to zero), are then
computed in full precision, so the sketch of data at ``1e-300`` or of
subnormal entries is as accurate as that of the same data at scale 1.
Numpy/scipy only.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.sparse

from dasketch.kernels.shrink import EPS, gamma, to_float64

# Rows whose entries are at most 2**SAFE_EXPONENT in magnitude are sketched as they are:
# every square, and every fourth power (the norms of the Lanczos vectors of the
# randomized update and of the products of estimate_error), stays finite for n d up to
# 2**60. A block with larger entries is sketched divided by a power of two
# (scale_exponent); a block whose largest entry is below 2**-SAFE_EXPONENT is
# sketched multiplied by the power of two that brings it into [1/2, 1).
SAFE_EXPONENT = 200
# The ridge of a sketch of tiny rows is multiplied up with them (by 4**-e): it
# stays below 2**RIDGE_EXPONENT there, which caps how far the rows are scaled up.
RIDGE_EXPONENT = 2 * SAFE_EXPONENT
# Beyond it the unscaled value of a positive bound is rounded up, never to 0.
_SMALLEST_SUBNORMAL = math.ldexp(1.0, -1074)


def block_scale_exponent(rows, alpha0=0.0):
    """The power of two ``e`` to divide ``rows`` by before sketching them.

    0 when the largest entry is in ``[2**-SAFE_EXPONENT, 2**SAFE_EXPONENT]`` in
    magnitude (or the block is zero, or holds NaN or Inf, reported by the sketch
    itself). Above it, the smallest ``e > 0`` that brings the largest entry within
    it. Below it, ``e < 0`` brings the largest entry into ``[1/2, 1)``, so that no
    square underflows that float64 could hold at scale 1 (a block at ``1e-300``,
    or of subnormals, would otherwise sketch to zero with a bound of zero); ``e``
    stays at least ``(log2(alpha0) - RIDGE_EXPONENT) / 2``, so the ridge in the
    scaled units, ``alpha0 4**-e``, stays finite (rows that small beside
    ``alpha0`` are far below the rounding of the ridge itself, which the bound
    carries). Dividing by a power of two is exact but for entries pushed below
    float64's smallest subnormal, which :func:`with_scale_exponent` accounts for;
    multiplying by one (``e < 0``) is exact.

    Parameters
    ----------
    rows : ndarray or scipy.sparse matrix
    alpha0 : float, default 0.0
        The sketch's ridge ``alpha0 >= 0``.

    Returns
    -------
    int
    """
    values = rows.data if scipy.sparse.issparse(rows) else rows
    if not values.size or not np.issubdtype(values.dtype, np.floating):
        return 0  # integer entries are below 2**64
    top = max(float(values.max()), -float(values.min()))  # no |values| temporary
    return largest_entry_exponent(top, alpha0)


def largest_entry_exponent(top, alpha0=0.0):
    """:func:`block_scale_exponent` of rows whose largest magnitude is ``top``."""
    if not np.isfinite(top) or top == 0:
        return 0
    exponent = math.frexp(top)[1]
    if exponent > -SAFE_EXPONENT:
        return max(exponent - SAFE_EXPONENT, 0)
    if alpha0 > 0:
        exponent = max(exponent, -((RIDGE_EXPONENT - math.frexp(alpha0)[1]) // 2))
    return min(exponent, 0)


def unit_scale_from_mass(frobenius_sq, n_values, alpha0=0.0):
    """Whether :func:`block_scale_exponent` is 0 for rows of ``n_values`` entries
    whose sum of squares, as computed in float64, is ``frobenius_sq``: a sketch at
    scale 1, which computes that sum anyway, then needs no pass for the largest
    entry.

    The largest magnitude lies between ``sqrt(F / n_values)`` and ``sqrt(F)``, ``F``
    the exact sum of squares; a sum of ``k`` nonnegative terms computed in float64
    is within ``gamma_k`` of ``F`` relative (Higham, *Accuracy and Stability of
    Numerical Algorithms*, 2nd ed., 2002, Section 3.1), here ``k <= 2 n_values +
    2`` for the squares and the sums over columns and chunks, but for squares below
    float64's smallest normal number ``2**-1022``, each lost at most whole. When
    both ends give exponent 0, so does the largest entry, as the exponent grows
    with it. False whenever an end is zero or not finite (the largest entry then
    decides).
    """
    slack = 1.0 + 2.0 * gamma(2 * n_values + 2)
    high = math.sqrt(frobenius_sq * slack + n_values * 2.0 ** -1022)
    low = math.sqrt(frobenius_sq / slack / n_values)
    if not (0 < low <= high < math.inf):
        return False
    return largest_entry_exponent(high, alpha0) == 0 == largest_entry_exponent(low, alpha0)


def divide_by_power_of_two(rows, exponent):
    """``rows * 2**-exponent`` in float64 (ndarray or CSR), exact but for underflow
    (none for ``exponent <= 0``)."""
    rows = to_float64(rows)
    if scipy.sparse.issparse(rows):
        return scipy.sparse.csr_matrix((np.ldexp(rows.data, -exponent), rows.indices,
                                        rows.indptr), shape=rows.shape)
    return np.ldexp(rows, -exponent)


def _unscaled(value, exponent):
    """``value * 2**exponent`` as a float (``inf`` beyond float64's range, rounded
    to the nearest subnormal below its smallest normal number)."""
    if not exponent:
        return value
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(value, exponent))


def _unscaled_bound(value, exponent, *, lower=False):
    """:func:`_unscaled` of an upper bound ``value >= 0``, rounded up where it
    falls among float64's subnormals: a positive bound never becomes a smaller
    one, nor 0. With ``lower``, of a lower bound, rounded down instead.

    ``ldexp`` is exact unless its result is subnormal; then scaling the result
    back (exact: no overflow, as ``|result| <= |value| 2**exponent``) shows
    which way it was rounded, and the next float the other way is a bound.
    """
    result = _unscaled(value, exponent)
    if exponent >= 0 or value <= 0:
        return result
    back = math.ldexp(result, -exponent)
    if lower:
        return math.nextafter(result, 0.0) if back > value else result
    if back < value:
        result = math.nextafter(result, math.inf)
    return max(result, _SMALLEST_SUBNORMAL)


def _underflow_rounding(n_values, norm_sq):
    """Bound on ``||A^T A - F^T F||_2`` when each of ``n_values`` entries of ``A``
    (``||A||_F^2 <= norm_sq``) is rounded to ``F`` in float64's subnormal range:
    ``2 ||A||_F ||E||_F + ||E||_F^2`` with ``||E||_F <= sqrt(n_values) 2**-1074``,
    the ``+ 1`` rounding the result up to the next subnormal."""
    root = math.sqrt(n_values)
    return math.ldexp((2.0 * math.sqrt(norm_sq) + 1.0) * root * (1.0 + 4 * EPS) + 1.0,
                      -1074)


def scaled_block_sketch(block, exponent, rows):
    """The sketch ``block`` of ``divide_by_power_of_two(rows, exponent)`` as the
    sketch of ``rows``: ``scale_exponent`` set, and ``rounding`` grown by the
    entries the division pushed into float64's subnormals (none when
    ``exponent < 0``: multiplying up is exact)."""
    rounding = block.rounding
    if exponent > 0:
        n_values = rows.nnz if scipy.sparse.issparse(rows) else rows.size
        rounding += _underflow_rounding(n_values, block.frobenius_sq)
    return replace(block, scale_exponent=int(exponent), rounding=rounding)


def with_scale_exponent(sketch, exponent):
    """``sketch`` (of some rows divided by ``2**e0``, ``e0 = sketch.scale_exponent``)
    as the sketch of the same rows divided by ``2**exponent``, ``exponent >= e0``.

    ``B`` and ``mean`` are divided by ``2**(exponent - e0)``, the second-order
    fields by its square. That is exact but for what falls below float64's
    subnormals; ``rounding`` grows by a bound on it (for ``B``, for the centring of
    every row by ``mean``, and one subnormal for each rounded bound).

    Parameters
    ----------
    sketch : Sketch
    exponent : int

    Returns
    -------
    Sketch
    """
    shift = int(exponent) - sketch.scale_exponent
    if shift < 0:
        raise ValueError(f"exponent must be at least the sketch's scale_exponent "
                         f"{sketch.scale_exponent}, got {exponent}")
    if shift == 0:
        return sketch

    def squared(value):
        return None if value is None else math.ldexp(value, -2 * shift)

    frobenius_sq = squared(sketch.frobenius_sq)
    r, d = sketch.B.shape
    rounding = squared(sketch.rounding) + _underflow_rounding(r * d, frobenius_sq)
    rounding += math.ldexp(3.0, -1074)  # shrinkage, its bound and rounding itself
    mean = sketch.mean
    if mean is not None:
        mean = np.ldexp(mean, -shift)
        rounding += _underflow_rounding(sketch.n_rows * d, frobenius_sq)
    return replace(sketch, B=np.ldexp(sketch.B, -shift), mean=mean,
                   shrinkage=squared(sketch.shrinkage),
                   shrinkage_bound=squared(sketch.shrinkage_bound),
                   frobenius_sq=frobenius_sq, rounding=rounding,
                   scale_exponent=int(exponent), _svd=[])
