"""What :class:`dasketch.SketchPCA` derives from a sketch and one pass over ``X``:
its sizes, candidate axes, their measured (or sketched) variances and the number
of components kept."""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
from sklearn.utils.extmath import svd_flip

from dasketch._blocks import add, assess_dimension, compute, map_reduce, squared_norms_block
from dasketch.kernels.shrink import gamma

# Rows of the default sketch beyond the k kept: DEFAULT_OVERSAMPLING k, at least
# DEFAULT_MIN_EXTRA (see :func:`default_sketch_size`).
DEFAULT_OVERSAMPLING = 3
DEFAULT_MIN_EXTRA = 10
# The captured-variance target the default sketch size meets (see default_sketch_size).
CAPTURED_VARIANCE_TARGET = 0.98


def default_sketch_size(k, cap):
    """Default sketch size of :class:`dasketch.SketchPCA` for ``k`` components:
    ``l = k + max(3 k, 10)``, at most ``cap + 1`` (a sketch of ``cap + 1`` rows is
    exact when the centred data have rank ``cap`` or less), at least 2.

    The target: the ``k`` components capture at least
    :data:`CAPTURED_VARIANCE_TARGET` (0.98) of the variance the best
    ``k``-dimensional subspace captures. Frequent Directions bounds the loss by
    ``k Delta <= k ||A_c - [A_c]_k||_F^2 / (l - k)`` (the components' variance is
    at least that of the sketch along them, whose top ``k`` eigenvalues are each
    within ``Delta`` of the covariance's; DESIGN section 2), so a fixed fraction
    of the optimum calls for ``l - k`` proportional to ``k``, by a factor that
    grows with the ratio of the tail's variance to the top ``k``'s. The bound is
    far from tight, so the factor is measured (benchmarks/bench_sketch_size.py):
    on a flat spectrum (log-normalised sparse counts, the top 30 components
    explaining a few per cent) the fraction captured is 0.976 at ``l - k = k``,
    0.984 at ``2 k``, 0.988 at ``3 k`` and 0.992 at ``4 k``; on a steep one
    (climate anomalies) it is above 0.999 from ``l = k + 5``. The factor 3 meets
    the target on both with a margin; the sketch costs time in proportion to
    ``l``.
    """
    extra = max(DEFAULT_OVERSAMPLING * int(k), DEFAULT_MIN_EXTRA)
    return max(min(int(k) + extra, int(cap) + 1), 2)


def fit_sizes(n_components, sketch_size, n_samples, n_features, streaming=False):
    """``(k, sketch_size)`` of :class:`dasketch.SketchPCA` by the rule in its
    docstring; ``k`` is the requested number of components, or the most there
    can be. ``streaming`` (the first ``partial_fit``) caps the default size by
    ``n_features`` only, as more rows may come."""
    most = min(n_samples, n_features)
    k = n_components if isinstance(n_components, numbers.Integral) else most
    if k > most:
        first = " in the first partial_fit call" if streaming else ""
        raise ValueError(f"n_components={k} must be less or equal to min(n_samples, "
                         f"n_features) = {most} of X{first}")
    if n_components == "mle" and n_samples < n_features:
        raise ValueError("n_components='mle' is only supported if n_samples >= "
                         f"n_features, got X of shape ({n_samples}, {n_features})")
    if sketch_size == "exact":
        return k, n_features + 1
    if sketch_size is None:
        cap = n_features if streaming else most
        return k, default_sketch_size(k, cap)
    counted = isinstance(n_components, numbers.Integral)
    if (counted or n_components is None) and sketch_size <= k:
        kept = f"n_components ({k})" if counted else \
            f"the min(n_samples, n_features) = {k} components of n_components=None"
        raise ValueError(f"sketch_size must exceed {kept}, got {sketch_size}; pass "
                         "a smaller n_components or a larger sketch_size")
    return k, sketch_size


def candidate_axes(sketch, n_wanted, seed=0):
    """Orthonormal rows: the right singular vectors of the sketch (signs as
    :func:`sklearn.utils.extmath.svd_flip`), completed with directions orthogonal
    to them (seeded Gaussian, projected out twice, QR) up to ``n_wanted`` rows
    when the sketch holds fewer (data of lower rank)."""
    axes = svd_flip(None, sketch.components(), u_based_decision=False)[1]
    missing = min(n_wanted, sketch.n_features) - axes.shape[0]
    if missing <= 0:
        return axes
    extra = np.random.default_rng(seed).standard_normal((sketch.n_features, missing))
    for _ in range(2):
        extra -= axes.T @ (axes @ extra)
    extra = np.linalg.qr(extra)[0].T
    return np.vstack([axes, svd_flip(None, extra, u_based_decision=False)[1]])


def squared_norms_along(blocks, axes, shift, *, split_every=None):
    """Delayed ``||X v_j - shift_j||^2`` for the rows ``v_j`` of ``axes`` over
    :class:`~dasketch._blocks.RowBlocks`: with ``shift = axes @ mean`` the squared
    norms of the centred data along the axes, ``||X_c v||^2``, without centring
    (or densifying) a block.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, compute
    >>> X = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]])
    >>> axes = np.eye(2)
    >>> compute(squared_norms_along(as_row_blocks(X, block_rows=2), axes, X.mean(0)))[0]
    array([8., 8.])
    """
    axes_t = np.ascontiguousarray(np.asarray(axes, dtype=np.float64).T)
    shift = np.asarray(shift, dtype=np.float64)
    return map_reduce(blocks, squared_norms_block, add, split_every=split_every,
                      shared={"axes_t": axes_t, "shift": shift}, keeps_block=False)


def measured_variances(blocks, axes, mean, *, split_every=None):
    """``||X_c v||^2 / (n - 1)`` for every row ``v`` of ``axes``, ``X_c`` the
    column-centred ``X``, in one blocked pass (never densifying sparse blocks)."""
    sums = squared_norms_along(blocks, axes, mean @ axes.T, split_every=split_every)
    (sums,) = compute(sums)
    return np.asarray(sums, dtype=np.float64) / max(blocks.n_rows - 1, 1)


def sketch_variances(sketch, n_axes, n_rows=None):
    """The sketch's estimates ``(s_i^2 + alpha) / (n - 1)`` of the variance along
    its first ``n_axes`` candidate axes (``s_i`` the singular values of ``B``, zero
    for the completing directions). For a unit ``v``, ``v^T (B^T B + alpha I) v``
    is within ``error_bound`` of ``||X_c v||^2`` (the certificate bounds the
    spectral norm of the difference), so each estimate is within
    ``error_bound / (n - 1)`` of the data's variance along its axis, and, by
    Weyl's inequality, of the ``i``-th covariance eigenvalue. ``n_rows`` is
    the data's rows ``n`` when the sketch is of the transpose (default: the
    sketch's own rows)."""
    estimates = np.zeros(n_axes)
    s = sketch.singular_values()[:n_axes]
    estimates[:s.size] = s ** 2
    n_rows = sketch.n_rows if n_rows is None else n_rows
    return (estimates + sketch.alpha) / max(n_rows - 1, 1)


def noise_variance(total, variances, remaining, shape, mean_norm, rounding):
    """Probabilistic PCA's noise variance as :class:`sklearn.decomposition.PCA`
    defines it: the total variance not explained by ``variances``, over the
    ``remaining`` dimensions (0 when none remain). A residual within the rounding
    error of its computation (:func:`unexplained_rounding`) is no noise."""
    residual = total - float(np.sum(variances))
    if residual <= unexplained_rounding(total, variances, shape, mean_norm, rounding):
        residual = 0.0
    return residual / remaining if remaining > 0 else 0.0


def unexplained_rounding(total, variances, shape, mean_norm, rounding):
    """Bound on the rounding error of the computed ``total - sum(variances)`` for
    data of ``shape = (n, d)``, column means of norm ``mean_norm``, the total from
    a sketch carrying ``rounding`` (its :attr:`~dasketch.Sketch.rounding`).

    With Higham's ``gamma_k`` (*Accuracy and Stability of Numerical Algorithms*,
    2nd ed., 2002, eq. (3.5) and Lemma 3.3) and ``N = n - 1``: the total ``||X_c||_F^2
    / N`` sums ``n d`` squares of centred entries in some order, within
    ``gamma_{nd+3}`` of itself, plus the centring and merge terms the sketch's
    ``rounding`` carries, over ``N``. A measured variance ``||X v - s||^2 / N``
    (``s = m^T v``) has the entries ``x_i^T v - s`` within ``gamma_{d+2} t_i``,
    ``t_i = |x_i|^T |v| + |m|^T |v|``, with ``||t|| / sqrt(N) <= T = sqrt(total) +
    2 sqrt(n / N) ||m||``; squared and summed over ``n`` rows it is within
    ``gamma_{n+2} v + 2 gamma_{d+2} sqrt(v) T + gamma_{d+2}^2 T^2`` of ``v`` (an
    estimate read from the sketch, ``(s_i^2 + alpha) / N``, is within less). The
    subtraction of the ``k`` variances adds ``gamma_{k+1}`` of the sum of the
    magnitudes. The bound is a worst case, the only one that holds for any number
    of rows: the rounding of sums over ``n`` rows grows with ``n``, not with ``d``
    alone.
    """
    n, d = shape
    dof = max(n - 1, 1)
    variances = np.maximum(np.asarray(variances, dtype=np.float64), 0.0)
    spread = math.sqrt(max(total, 0.0)) + 2.0 * math.sqrt(n / dof) * mean_norm
    g = gamma(d + 2)
    measured = (gamma(n + 2) * variances + 2.0 * g * np.sqrt(variances) * spread
                + g * g * spread ** 2)
    return float(gamma(n * d + 3) * total + rounding / dof + measured.sum()
                 + gamma(variances.size + 1) * (abs(total) + variances.sum()))


def fraction_components(ratios, fraction):
    """The smallest ``k`` whose cumulated ratios exceed ``fraction``, as
    :class:`sklearn.decomposition.PCA` counts (``side="right"``); all of them,
    with a warning naming the shortfall, when they never do."""
    cumulated = np.cumsum(ratios)
    k = int(np.searchsorted(cumulated, fraction, side="right")) + 1
    if k > ratios.size:
        reached = float(cumulated[-1]) if ratios.size else 0.0
        warnings.warn(f"the {ratios.size} directions of the sketch explain {reached:.4g} of "
                      f"the variance, less than n_components={fraction}; all of them are "
                      "kept. Increase sketch_size to reach the fraction.", UserWarning,
                      stacklevel=3)
        k = ratios.size
    return max(k, 1)


def mle_components(variances, total, n_samples, n_features):
    """Minka's choice of dimension (``n_components="mle"``) as
    :class:`sklearn.decomposition.PCA` makes it, from the measured variances of the
    sketch's directions; the unmeasured ``n_features - r`` eigenvalues are taken
    equal to their mean (exact total minus the measured ones), and ranks up to
    ``r`` are assessed (Minka, NIPS 2000). With an exact sketch holding all
    ``n_features`` directions this is scikit-learn's spectrum and answer."""
    r = min(variances.size, n_features)
    spectrum = np.empty(n_features)
    spectrum[:r] = variances[:r]
    if r < n_features:
        spectrum[r:] = max(total - float(np.sum(variances[:r])), 0.0) / (n_features - r)
    ranks = range(1, min(r, n_features - 1) + 1)
    likelihood = [assess_dimension(spectrum, rank, n_samples) for rank in ranks]
    return int(np.argmax(likelihood)) + 1 if likelihood else 1
