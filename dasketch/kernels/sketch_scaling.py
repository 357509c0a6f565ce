"""Sketches of rows with entries beyond ``2**SAFE_EXPONENT``: the power of two a
block is divided by before it is sketched (its ``scale_exponent``), and the
rounding that division adds.

Dividing by a power of two is exact in float64 but for entries pushed below its
smallest subnormal; every function here that divides adds a bound on that
underflow to the sketch's ``rounding``. Numpy/scipy only.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.sparse

from dasketch.kernels.shrink import EPS, to_float64

# Rows whose entries are at most 2**SAFE_EXPONENT in magnitude are sketched as they are:
# every square, and every fourth power (the norms of the Lanczos vectors of the
# randomized update and of the products of estimate_error), stays finite for n d up to
# 2**60. A block with larger entries is sketched divided by a power of two
# (scale_exponent).
SAFE_EXPONENT = 200


def block_scale_exponent(rows):
    """The power of two ``e >= 0`` to divide ``rows`` by before sketching them.

    0 when every entry is at most ``2**SAFE_EXPONENT`` in magnitude (or the block
    holds NaN or Inf, reported by the sketch itself); else the smallest ``e``
    that brings the largest entry within it. Dividing by a power of two is exact
    but for entries pushed below float64's smallest subnormal, which
    :func:`with_scale_exponent` accounts for.

    Parameters
    ----------
    rows : ndarray or scipy.sparse matrix

    Returns
    -------
    int
    """
    values = rows.data if scipy.sparse.issparse(rows) else rows
    if not values.size or not np.issubdtype(values.dtype, np.floating):
        return 0  # integer entries are below 2**64
    top = max(float(values.max()), -float(values.min()))  # no |values| temporary
    if not np.isfinite(top):
        return 0
    return max(math.frexp(top)[1] - SAFE_EXPONENT, 0)


def divide_by_power_of_two(rows, exponent):
    """``rows * 2**-exponent`` in float64 (ndarray or CSR), exact but for underflow."""
    rows = to_float64(rows)
    if scipy.sparse.issparse(rows):
        return scipy.sparse.csr_matrix((np.ldexp(rows.data, -exponent), rows.indices,
                                        rows.indptr), shape=rows.shape)
    return np.ldexp(rows, -exponent)


def _unscaled(value, exponent):
    """``value * 2**exponent`` as a float (``inf`` beyond float64's range)."""
    if not exponent:
        return value
    with np.errstate(over="ignore"):
        return float(np.ldexp(value, exponent))


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
    entries the division pushed into float64's subnormals."""
    n_values = rows.nnz if scipy.sparse.issparse(rows) else rows.size
    return replace(block, scale_exponent=int(exponent),
                   rounding=block.rounding + _underflow_rounding(n_values, block.frobenius_sq))


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
