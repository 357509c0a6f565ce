"""The invariants of a Frequent Directions sketch, and the overflow errors of its
kernels.

One rule for every way a :class:`~dasketch.kernels.frequent_directions.Sketch`
comes to exist: built by the kernels, merged, or read from a file.
:func:`check_sketch_fields` (O(d), run by the Sketch constructor) checks each
field on its own and the cheap relations between them;
:func:`check_sketch_mass` (O(l d), run when a sketch is saved or loaded) checks
that ``B``, ``Delta`` and ``||A||_F^2`` can belong to one FD run.

Mass balance of a certified sketch ([1]_ Thm. 3.1 proof): every shrink of a stack
``C`` with ``delta = s_l^2`` removes ``min(s_i^2, delta) = delta`` from each of the
``l`` largest squared singular values and every smaller one (each ``<= delta``)
entirely, at most ``rank(C) <= d`` of them. Hence, summing over shrinks and merges
(centring rows enter both sides),

    ``||B||_F^2 + l Delta <= ||A||_F^2 <= ||B||_F^2 + d Delta``.

A randomized sketch (``shrinkage_bound`` set) only knows ``Delta`` approximately;
for it only ``||B||_F^2 <= ||A||_F^2`` is checked.

References
----------
.. [1] M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff, "Frequent
   Directions: simple and deterministic matrix sketching", SIAM J. Comput. 45(5),
   2016.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import scipy.sparse

from dasketch.kernels.deprecation import renamed_constants

SKETCH_METHODS = ("fd", "rfd")
__getattr__ = renamed_constants(__name__, {"METHODS": "SKETCH_METHODS"}, globals())
FLOAT_MAX = float(np.finfo(np.float64).max)
EPS = float(np.finfo(np.float64).eps)
# A sketch of rows divided by 2**e needs e <= 1024 - SAFE_EXPONENT for any finite data
# (sketch_scaling.SAFE_EXPONENT), and e >= -1073 for the smallest subnormal 2**-1074
# (brought into [1/2, 1)); merges take the largest e of their parts.
MAX_SCALE_EXPONENT = 1024
MIN_SCALE_EXPONENT = -1074
# Relative slack of the mass balance: rounding of the Gram eigendecompositions
# (about r eps ||C||_2^2 per shrink of r rows) stays orders of magnitude below it.
MASS_RTOL = 1e-6


def check_sketch_parameters(sketch_size, method, alpha0):
    """Validate the parameters shared by every sketch constructor.

    Raises
    ------
    TypeError, ValueError
        Naming the offending argument and what was expected.
    """
    if isinstance(sketch_size, (bool, np.bool_)) or not isinstance(
        sketch_size, (int, np.integer)
    ):
        raise TypeError(f"sketch_size must be an integer >= 2, got {sketch_size!r}")
    if sketch_size < 2:
        raise ValueError(f"sketch_size must be an integer >= 2, got {sketch_size}")
    if not isinstance(method, str) or method not in SKETCH_METHODS:
        raise ValueError(f"method must be one of {SKETCH_METHODS}, got {method!r}")
    if not _is_real(alpha0) or not np.isfinite(alpha0) or alpha0 < 0:
        raise ValueError(f"alpha0 must be a finite number >= 0, got {alpha0!r}")


def _is_real(value):
    return isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(
        value, (bool, np.bool_))


def _nonnegative(name, value, hint=""):
    if not _is_real(value) or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}{hint}")


def check_sketch_fields(sketch):
    """Each field of ``sketch`` against the invariants of the design (section 2).

    ``B`` a float matrix of at most ``sketch_size - 1`` rows (a shrink leaves
    ``l - 1``; a stack of fewer than ``l`` rows is kept as is), ``sketch_size >= 2``,
    a known method, finite ``alpha0, Delta, rounding, ||A||_F^2 >= 0``, ``n_rows >= 0``
    (a sketch of no rows is empty), ``mean`` of length ``d``,
    no more rows in ``B`` than rows sketched (twice as many when centred),
    ``shrinkage_bound >= shrinkage`` and ``0 <= failure_probability < 1``, 0 exactly
    when the sketch is certified (no ``shrinkage_bound``), and an integer
    ``MIN_SCALE_EXPONENT <= scale_exponent <= MAX_SCALE_EXPONENT`` with a finite
    ridge ``alpha0 4**-scale_exponent`` in the scaled units.

    Raises
    ------
    TypeError, ValueError
        Naming the field and what was expected.
    """
    s = sketch
    check_sketch_parameters(s.sketch_size, s.method, s.alpha0)
    B = s.B
    if not isinstance(B, np.ndarray) or B.ndim != 2 or not np.issubdtype(B.dtype, np.floating):
        raise TypeError(f"B must be a 2-D float ndarray, got {type(B).__name__} "
                        f"{getattr(B, 'shape', '')}")
    if B.shape[0] >= s.sketch_size:
        raise ValueError(f"B has {B.shape[0]} rows; a sketch of size sketch_size="
                         f"{s.sketch_size} holds at most {s.sketch_size - 1}")
    if (isinstance(s.n_rows, (bool, np.bool_)) or not isinstance(s.n_rows, (int, np.integer))
            or s.n_rows < 0):
        raise ValueError(f"n_rows must be an integer >= 0, got {s.n_rows!r}")
    _nonnegative("shrinkage", s.shrinkage)
    _nonnegative("rounding", s.rounding)
    _nonnegative("frobenius_sq", s.frobenius_sq,
                 " (||X||_F^2 beyond float64's range? rescale X)")
    if s.n_rows == 0 and (B.shape[0] or s.shrinkage or s.frobenius_sq):
        raise ValueError("a sketch of n_rows=0 rows must be empty (no rows in B, "
                         "shrinkage and frobenius_sq 0)")
    # Centring adds one row per merged sketch: at most n_rows more in any tree.
    if B.shape[0] > (s.n_rows if s.mean is None else 2 * s.n_rows):
        raise ValueError(f"B has {B.shape[0]} rows, too many for a sketch of "
                         f"n_rows={s.n_rows} rows")
    if s.mean is not None and (not isinstance(s.mean, np.ndarray)
                               or s.mean.shape != (B.shape[1],)):
        raise ValueError(f"mean must be None or an array of shape ({B.shape[1]},), got "
                         f"{getattr(s.mean, 'shape', s.mean)!r}")
    e = s.scale_exponent
    if (isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, np.integer))
            or not MIN_SCALE_EXPONENT <= e <= MAX_SCALE_EXPONENT):
        raise ValueError(f"scale_exponent must be an integer in [{MIN_SCALE_EXPONENT}, "
                         f"{MAX_SCALE_EXPONENT}], got {e!r}")
    if e < 0 and s.alpha0 > 0 and math.frexp(s.alpha0)[1] - 2 * e > 1024:
        raise ValueError(f"alpha0={s.alpha0!r} times 4**-scale_exponent (the ridge of the "
                         f"scaled rows, scale_exponent={e}) is beyond float64's range")
    p = s.failure_probability
    if not _is_real(p) or not 0 <= p < 1:
        raise ValueError(f"failure_probability must be a number in [0, 1) (0: certified), "
                         f"got {p!r}")
    if s.shrinkage_bound is None:
        if p != 0:
            raise ValueError(f"failure_probability={p!r} without a shrinkage_bound: a "
                             "certified sketch has failure_probability 0")
    else:
        _nonnegative("shrinkage_bound", s.shrinkage_bound)
        if p == 0 or s.shrinkage_bound < s.shrinkage:
            raise ValueError("a randomized sketch needs 0 < failure_probability < 1 and "
                             f"shrinkage_bound >= shrinkage, got {p!r} and "
                             f"{s.shrinkage_bound!r} < {s.shrinkage!r}")


def check_sketch_mass(sketch, rtol=MASS_RTOL):
    """``B`` and ``mean`` finite, and the mass balance of the module docstring.

    Raises
    ------
    ValueError
        Naming the quantities that cannot belong to one sketch.
    """
    s = sketch
    if not np.isfinite(s.B).all() or (s.mean is not None and not np.isfinite(s.mean).all()):
        raise ValueError("B and mean must hold finite values only")
    b = float(np.einsum("ij,ij->", s.B, s.B)) if s.B.size else 0.0
    frob, delta = float(s.frobenius_sq), float(s.shrinkage)
    slack = rtol * max(frob, b)
    low = b + (s.sketch_size * delta if s.shrinkage_bound is None else 0.0)
    high = b + s.n_features * delta if s.shrinkage_bound is None else math.inf
    if not low - slack <= frob <= high + slack:
        raise ValueError(
            f"frobenius_sq={frob:.6g} does not fit ||B||_F^2={b:.6g}, shrinkage={delta:.6g}"
            f" (a sketch has ||B||_F^2 + l*shrinkage <= frobenius_sq <= ||B||_F^2 + "
            f"d*shrinkage with l={s.sketch_size}, d={s.n_features})")


def scaled_norm(values):
    """Frobenius norm of ``values`` without overflow or underflow of its squares
    (scaled by the largest magnitude, as LAPACK's ``dnrm2``)."""
    values = values.data if scipy.sparse.issparse(values) else np.asarray(values)
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    if scale == 0 or not np.isfinite(scale):
        return scale
    return scale * float(np.linalg.norm((values / scale).ravel()))


def overflow_error(norm, where):
    """The ``ValueError`` for data whose squared norm, which a sketch holds, is
    beyond float64: it names the norm and a rescaling that fixes it."""
    divisor = 10.0 ** math.ceil(math.log10(norm)) if 0 < norm < math.inf else None
    advice = f"e.g. divide it by {divisor:.0e}" if divisor else "e.g. divide it by its norm"
    return ValueError(
        f"X: {where} has Frobenius norm {norm:.3g}; its square, which a sketch holds, "
        f"exceeds float64's largest value {FLOAT_MAX:.3g}, so no sketch of it can be "
        f"represented; rescale X ({advice}) and scale the results back")


def checked_mass(frobenius_sq, norm_of, where):
    """``frobenius_sq`` if finite; else :func:`overflow_error` with ``norm_of()``."""
    if np.isfinite(frobenius_sq):
        return float(frobenius_sq)
    raise overflow_error(norm_of(), where)


def scaled_mean(rows):
    """Column means of ``rows`` (ndarray or scipy.sparse), scaled by a power of two
    when the plain sums overflow (finite data never gives an infinite mean)."""
    mean = np.asarray(rows.mean(axis=0), dtype=np.float64).ravel()
    if np.isfinite(mean).all():
        return mean
    values = rows.data if scipy.sparse.issparse(rows) else rows
    if not np.isfinite(values).all():
        return mean  # NaN or Inf in the data: reported by the caller
    factor = 2.0 ** -math.frexp(float(np.max(np.abs(values))))[1]
    return np.asarray((rows * factor).mean(axis=0), dtype=np.float64).ravel() / factor


def mean_error_bound(n_rows, frobenius_sq, mean):
    """Bound on ``||mu - m||_2``, ``mu`` the float64 ``mean`` of a sketch of
    ``n_rows`` rows (centred ``||A||_F^2 = frobenius_sq``), ``m`` their exact mean.

    A block's mean is a sum of its rows over ``n_b`` (exact to ``gamma_{n_b + 1}``
    times the mean of the absolute rows, componentwise: Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., 2002, Section 4.2), and each merge
    of ``k`` sketches pools their means with weights ``n_i / n`` (exact to
    ``gamma_{k + 1}`` times the same pooled absolute means, as ``|mu_i|`` is at
    most the mean of block ``i``'s absolute rows). The errors of the blocks average
    into the pooled mean with the same weights, so along a root-to-leaf path of
    any merge tree they add up to ``gamma_K`` with ``K`` at most the rows plus
    twice the tree's nodes, ``K <= 5 n``: the error is at most ``gamma_{5n}``
    times the 2-norm of the mean absolute row, which Cauchy-Schwarz bounds by
    ``sqrt(||A||_F^2 / n + ||m||^2) <= sqrt(frobenius_sq / n) + ||m||``. With
    ``||m|| <= ||mu|| + error`` this gives ``g (||mu|| + s) / (1 - g)``,
    ``g = gamma_{6n}`` (one more ``n`` for the rounding of the tracked
    ``frobenius_sq`` and of the norms themselves).
    """
    if not n_rows:
        return 0.0
    k = 6.0 * n_rows * EPS / 2
    g = k / (1.0 - k)
    spread = math.sqrt(frobenius_sq / n_rows)
    return g * (scaled_norm(mean) + spread) / (1.0 - g)


def centring_rounding(n_rows, frobenius_sq, mean):
    """Bound on the spectral error of centring ``n_rows`` rows on their float64
    mean ``mean`` before sketching them: the rows are centred on ``mu``, not the
    exact mean ``m``, which adds ``n (m - mu)(m - mu)^T`` to their Gram matrix
    (at most ``n`` :func:`mean_error_bound` squared), and every subtraction
    ``x - mu`` rounds by ``u |x - mu|`` (``u = eps / 2``), so the centred Gram is
    exact to ``(2 u + u^2) ||A||_F^2 <= 1.5 eps frobenius_sq``."""
    error = mean_error_bound(n_rows, frobenius_sq, mean)
    return n_rows * error * error + 1.5 * EPS * frobenius_sq


def merge_centring_rounding(parts, corrections, n_rows, frobenius_sq, mean):
    """Bound on the spectral error of the centring rows of a merge.

    The parallel-variance identity holds for the exact means: the globally
    centred Gram is the sum of the parts' centred Grams and of ``t_i t_i^T``,
    ``t_i = sqrt(n_i) (m_i - m)``. The merge adds the float64 rows
    ``c_i = fl(sqrt(n_i) fl(mu_i - mu))`` instead, ``mu_i`` and ``mu`` the
    rounded means. With ``f_i = c_i - t_i``,
    ``||c_i c_i^T - t_i t_i^T||_2 <= 2 ||c_i|| ||f_i|| + ||f_i||^2`` and
    ``||f_i|| <= sqrt(n_i) (e_i + e) + 2 eps ||c_i||`` (the three roundings of
    ``c_i``, ``gamma_3 / (1 - gamma_3) <= 2 eps``; ``e_i`` and ``e`` the
    :func:`mean_error_bound` of the parts and of the merge). This is the
    first-order term ``O(eps n |mu| |mu_i - mu|)`` that rounded means cost a
    merge of blocks with a large common mean (mean 1e8 and unit spread: about
    ``1e-2`` on 300 rows, where the shrinks' rounding is about ``1e-10``).

    Parameters
    ----------
    parts : sequence of Sketch
        The centred sketches merged (``n_rows``, ``frobenius_sq``, ``mean``).
    corrections : ndarray of shape (len(parts), d)
        Their centring rows ``c_i``.
    n_rows : int
    frobenius_sq : float
    mean : ndarray of shape (d,)
        The merged sketch's rows, centred ``||A||_F^2`` and mean ``mu``.

    Returns
    -------
    float
    """
    merged_error = mean_error_bound(n_rows, frobenius_sq, mean)
    total = 0.0
    for part, correction in zip(parts, corrections):
        row_norm = scaled_norm(correction)
        part_error = mean_error_bound(part.n_rows, part.frobenius_sq, part.mean)
        error = (math.sqrt(part.n_rows) * (part_error + merged_error)
                 + 2.0 * EPS * row_norm)
        total += (2.0 * row_norm + error) * error
    return total


def _merged_norm(sketches, correction, centered):
    """Sqrt of the total ``frobenius_sq`` of ``sketches`` (and the centring rows),
    each finite, without overflow."""
    parts = [s.frobenius_sq for s in sketches]
    top = max(parts)
    total = sum(p / top for p in parts) if top > 0 else 0.0
    norm = np.sqrt(top) * np.sqrt(total)
    return float(np.hypot(norm, scaled_norm(correction))) if centered else float(norm)


def check_mergeable(sketches):
    """Raise ValueError unless all sketches share d, l, method, alpha0 and centring."""
    first = sketches[0]
    for other in sketches[1:]:
        for attr in ("n_features", "sketch_size", "method", "alpha0", "centered"):
            if getattr(other, attr) != getattr(first, attr):
                raise ValueError(
                    f"cannot merge sketches with different {attr}: "
                    f"{getattr(first, attr)!r} and {getattr(other, attr)!r}")
