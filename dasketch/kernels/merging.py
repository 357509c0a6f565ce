"""Merging Frequent Directions sketches of disjoint rows.

One shrink of the stacked sketch rows, with the shrinkages, rounding bounds and
failure probabilities summed (Ghashami et al., SIAM J. Comput. 2016, Section 3);
centred sketches add the rows of the parallel-variance identity. Numpy/scipy only.

References
----------
.. [2] M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff, "Frequent
   Directions: simple and deterministic matrix sketching", SIAM J. Comput. 45(5),
   2016 (mergeability, Section 3).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dasketch.kernels._sketch_base import _BaseSketch
from dasketch.kernels.shrink import NonFiniteError, _squared_norm, shrink_rounding, shrink_rows
from dasketch.kernels.sketch_checks import (
    _merged_norm,
    check_mergeable,
    checked_mass,
    merge_centring_rounding,
)
from dasketch.kernels.sketch_scaling import with_scale_exponent


def centring_rows(parts, n_rows):
    """The pooled mean ``mu`` of centred ``parts`` (sketches or Gram summaries of
    ``n_rows`` rows in all) and their rows ``sqrt(n_i) (mu_i - mu)`` of the
    parallel-variance identity, k-way form."""
    counts = np.array([part.n_rows for part in parts], dtype=np.float64)
    means = np.stack([part.mean for part in parts])
    mean = (counts / n_rows) @ means  # a convex combination: never overflows
    return mean, np.sqrt(counts)[:, None] * (means - mean)


def merge_sketches(sketches):
    """Merge sketches of disjoint row sets into one.

    One shrink of the stacked ``B``s: ``Delta = sum(Delta_i) + delta``, so the
    guarantee holds for any tree of merges (Ghashami et al., SIAM J. Comput. 2016,
    Section 3). For centred sketches with counts ``n_i`` and means ``mu_i`` the
    rows ``sqrt(n_i) (mu_i - mu)`` are added to the stack, ``mu`` the pooled mean
    (the parallel-variance identity, k-way form), so the result sketches the
    globally centred rows; the identity holds for exact means, and ``rounding``
    grows by what the rounded means cost
    (:func:`~dasketch.kernels.sketch_checks.merge_centring_rounding`).

    Parameters
    ----------
    sketches : iterable of Sketch
        At least one; all with the same ``d``, ``l``, method, ``alpha0`` and
        centring.

    Returns
    -------
    Sketch
        The sketch of all their rows, with the summed shrinkage, rounding and
        failure probability.

    See Also
    --------
    sketch : Sketch a whole matrix; it merges the block sketches this way.
    estimate_error : Bracket the actual error of the merged sketch in one pass.
    Sketch.merge : The same, as a method.
    load_sketch : Load a stored sketch to merge with new rows.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import Sketch, merge_sketches
    >>> A = np.random.default_rng(0).standard_normal((300, 5))
    >>> parts = [Sketch.from_rows(A[i:i + 100], 3, center=True) for i in (0, 100, 200)]
    >>> merged = merge_sketches(parts)
    >>> bool(np.allclose(merged.mean, A.mean(axis=0)))
    True
    """
    sketches = [s for s in sketches]
    if not sketches:
        raise ValueError("merge_sketches needs at least one sketch")
    for s in sketches:
        if not isinstance(s, _BaseSketch):  # Sketch, its one subclass
            raise TypeError(f"can only merge Sketch objects, got {type(s).__name__}")
    check_mergeable(sketches)
    first = sketches[0]
    nonempty = [s for s in sketches if s.n_rows > 0]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else first
    exponent = max(s.scale_exponent for s in nonempty)
    nonempty = [with_scale_exponent(s, exponent) for s in nonempty]
    n_rows = sum(s.n_rows for s in nonempty)
    frobenius_sq = sum(s.frobenius_sq for s in nonempty)
    parts = [s.B for s in nonempty]
    mean = None
    if first.centered:
        mean, correction = centring_rows(nonempty, n_rows)
        frobenius_sq += float(np.einsum("ij,ij->", correction, correction))
        parts.append(correction)
    where = f"the merge of {len(nonempty)} sketches of {n_rows} rows"
    checked_mass(frobenius_sq, lambda: _merged_norm(nonempty, parts[-1], first.centered),
                 where)
    try:
        B, delta = shrink_rows(parts, first.sketch_size)
    except NonFiniteError:  # the parts are finite: their Gram overflows
        raise ValueError(f"X: {where} has a Gram matrix beyond float64's range; rescale X"
                         ) from None
    shrinkage = sum(s.shrinkage for s in nonempty) + delta
    bound = None
    if any(s.shrinkage_bound is not None for s in nonempty):
        bound = sum(s._exact_loss_bound for s in nonempty) + delta
    failure_probability = sum(s.failure_probability for s in nonempty)
    rounding = sum(s.rounding for s in nonempty)
    if first.centered:
        rounding += merge_centring_rounding(nonempty, correction, n_rows, frobenius_sq, mean)
    n_stack = sum(part.shape[0] for part in parts)
    if n_stack >= first.sketch_size:
        rounding += shrink_rounding(n_stack, first.n_features,
                                    sum(_squared_norm(part) for part in parts))
    return replace(first, B=B, shrinkage=shrinkage, n_rows=n_rows, mean=mean,
                   shrinkage_bound=bound, failure_probability=failure_probability,
                   frobenius_sq=frobenius_sq, rounding=rounding, scale_exponent=exponent,
                   _svd=[])
