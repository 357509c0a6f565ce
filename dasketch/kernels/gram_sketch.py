"""Exact Gram summaries of dense blocks: summed over a tree, shrunk once.

For dense rows of moderate width (``d`` up to a few thousand), an exact Frequent
Directions shrink of a block of ``b`` rows costs the block's Gram matrix
``X_b^T X_b`` (``b d^2`` flops, numpy's ``syrk``) and the eigendecomposition of
that ``d x d`` Gram (about ``9 d^3`` flops, more than the Gram's for blocks of fewer
than ``9 d`` rows). A :class:`GramSummary` keeps the Gram itself
instead: summaries of disjoint rows merge by adding their Grams (``d^2`` work),
and the total is shrunk once, to the final sketch size. That sketch is the
Frequent Directions sketch of one shrink of all the rows ([3]_ Algorithm 2, its
column side): ``Delta = sigma_l^2`` of the whole matrix, the smallest shrinkage
any sketch of ``l - 1`` rows can have, where a tree of block sketches adds a
shrinkage at every block and merge ([2]_ Section 3). A summary is a sketch of
working size ``d`` (nothing shrunk) that stores ``B^T B`` rather than ``B``.

Centred summaries merge by the parallel-variance identity, as centred sketches
do (:func:`~dasketch.kernels.merging.merge_sketches`). A block that a summary
cannot hold at scale 1 (entries beyond ``2**SAFE_EXPONENT`` or all below its
inverse, NaN or Inf) is sketched by :func:`sketch_rows`, which scales it or
names the bad rows; a merge with such a sketch turns the summaries into
sketches first. Numpy/scipy on the host; rows of another array library have their
Gram computed in their own namespace (as in :mod:`~dasketch.kernels.namespace_fd`).

References
----------
.. [2] M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff, "Frequent
   Directions: simple and deterministic matrix sketching", SIAM J. Comput. 45(5),
   2016 (mergeability, Section 3).
.. [3] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019 (Algorithms 1-5).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dasketch.kernels.frequent_directions import Sketch, sketch_rows
from dasketch.kernels.merging import centring_rows, merge_sketches
from dasketch.kernels.namespace_fd import sketch_dense_rows
from dasketch.kernels.shrink import gamma, shrink_gram, shrink_rounding, to_float64
from dasketch.kernels.sketch_checks import (
    _merged_norm,
    centring_rounding,
    check_mergeable,
    check_sketch_parameters,
    checked_mass,
    merge_centring_rounding,
    scaled_mean,
)
from dasketch.kernels.sketch_scaling import (
    block_scale_exponent,
    largest_entry_exponent,
    unit_scale_from_mass,
)


@dataclass(frozen=True, eq=False)
class GramSummary:
    """The exact Gram matrix of the rows seen so far, and what a sketch of them
    needs.

    Parameters
    ----------
    gram : ndarray of shape (d, d)
        ``A^T A`` of the rows (centred on ``mean`` when set), in float64.
    n_rows : int
    sketch_size : int
        ``l`` of the sketch a merge with a :class:`Sketch` turns the summary into.
    method : {"fd", "rfd"}
    alpha0 : float
    mean : ndarray of shape (d,), optional
        Column means of a centred summary, None otherwise.
    frobenius_sq : float
        ``||A||_F^2`` of the (centred) rows, the trace of ``gram``.
    rounding : float
        Bound on the spectral norm of the float64 rounding error of ``gram``.
    """

    gram: np.ndarray
    n_rows: int
    sketch_size: int
    method: str
    alpha0: float
    mean: np.ndarray | None
    frobenius_sq: float
    rounding: float

    @property
    def n_features(self):
        return self.gram.shape[0]

    @property
    def centered(self):
        return self.mean is not None

    def resize(self, sketch_size):
        """The :class:`Sketch` of these rows at ``sketch_size``: one shrink of the
        Gram (:func:`~dasketch.kernels.shrink.shrink_gram`) to at most
        ``min(sketch_size - 1, n_rows)`` rows."""
        d = self.n_features
        empty = Sketch.empty(d, sketch_size, method=self.method, alpha0=self.alpha0,
                             center=self.centered)
        if self.n_rows == 0:
            return empty
        # Fewer rows than l: their Gram has rank n_rows at most, and a sketch keeps
        # no more rows than it summarises (what eigh finds beyond is rounding).
        B, delta = shrink_gram(self.gram, min(int(sketch_size), self.n_rows + 1))
        rounding = self.rounding + shrink_rounding(d, d, self.frobenius_sq)
        if self.n_rows < sketch_size:
            # Nothing is shrunk away: the exact Gram has rank n_rows at most, so the
            # eigenvalues dropped beyond it are the Gram's rounding, counted again.
            rounding, delta = rounding + delta, 0.0
        return replace(empty, B=B, shrinkage=delta, n_rows=self.n_rows, mean=self.mean,
                       frobenius_sq=self.frobenius_sq, rounding=rounding, _svd=[])


def gram_rounding(n_terms, mass):
    """Bound on the spectral error of a float64 sum of ``n_terms`` Gram terms whose
    absolute values sum to at most ``mass`` in trace: every entry is within
    ``gamma_k`` of its exact value relative to the sum of the absolute terms
    (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002,
    Section 3.1), whose matrix has spectral norm at most ``mass``; doubled for the
    rounding of ``mass`` itself and second-order terms."""
    return 2.0 * gamma(max(int(n_terms), 1)) * float(mass)


def summarise_rows(rows, sketch_size, *, method="rfd", alpha0=0.0, center=False,
                   row_offset=0, xp=None, to_host=None):
    """The :class:`GramSummary` of a dense block of rows, or, for a block it cannot
    hold at scale 1, its :class:`Sketch` by the exact update (which scales the
    block, or raises naming rows with NaN or Inf).

    Parameters
    ----------
    rows : array of shape (b, d)
        A numpy array, or one of the array namespace ``xp``.
    sketch_size : int
        ``l >= 2`` of a sketch the summary may become.
    method : {"rfd", "fd"}
    alpha0 : float
    center : bool
        Summarise the rows centred on their own mean.
    row_offset : int
        Global index of the first row, used in error messages.
    xp, to_host : module and callable, optional
        For rows of another array library: its namespace (array API standard), in
        which the Gram is computed, and ``to_host(array)``, the numpy ndarray of one
        of its arrays (as for :func:`~dasketch.kernels.namespace_fd.sketch_dense_rows`,
        the fallback there). The summary is on the host.

    Returns
    -------
    GramSummary or Sketch
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {rows.shape}")
    n_rows, d = rows.shape
    if n_rows == 0:
        return GramSummary(np.zeros((d, d)), 0, int(sketch_size), method, float(alpha0),
                           np.zeros(d) if center else None, 0.0, 0.0)
    if xp is None:
        values = to_float64(rows)
        scale_of, mean_of, host = block_scale_exponent, scaled_mean, np.asarray
    else:
        values = xp.astype(rows, xp.float64, copy=False)
        scale_of = lambda v, a: largest_entry_exponent(  # noqa: E731
            max(float(xp.max(v)), -float(xp.min(v))), a)
        mean_of, host = (lambda v: xp.mean(v, axis=0)), to_host
    summary = None
    if not center or scale_of(values, alpha0) == 0:
        mean = mean_of(values) if center else None
        if mean is not None:
            values = values - mean
        with np.errstate(over="ignore", invalid="ignore"):
            gram = np.asarray(host(values.T @ values), dtype=np.float64)
        summary = _checked_summary(
            gram, n_rows, sketch_size, method, alpha0,
            None if mean is None else np.asarray(host(mean), dtype=np.float64))
    if summary is not None:
        return summary
    params = dict(method=method, alpha0=alpha0, center=center, row_offset=row_offset)
    if xp is None:
        return sketch_rows(rows, sketch_size, **params)
    return sketch_dense_rows(rows, sketch_size, xp=xp, to_host=to_host, **params)


def _checked_summary(gram, n_rows, sketch_size, method, alpha0, mean):
    """The :class:`GramSummary` of ``n_rows`` rows (centred on ``mean`` when given)
    whose Gram is ``gram``, or None when they hold NaN or Inf, their Gram
    overflows, or (uncentred) their sum of squares puts them off scale 1
    (:func:`~dasketch.kernels.sketch_scaling.unit_scale_from_mass`)."""
    mass = float(np.trace(gram))
    if not np.isfinite(np.diagonal(gram)).all():
        return None
    if mean is None and not unit_scale_from_mass(mass, n_rows * gram.shape[0], alpha0):
        return None
    rounding = gram_rounding(n_rows, mass)
    if mean is not None:
        rounding += centring_rounding(n_rows, mass, mean)
    return GramSummary(gram, n_rows, int(sketch_size), method, float(alpha0), mean, mass,
                       rounding)


def merge_summaries(parts):
    """One summary of the rows of ``parts`` (:class:`GramSummary` of disjoint rows):
    their Grams added, with the centring rows of the parallel-variance identity
    for centred summaries. When a part is a :class:`Sketch`, every summary becomes
    the sketch of its rows at its ``sketch_size`` and the parts are merged as
    sketches (:func:`~dasketch.kernels.merging.merge_sketches`).

    Returns
    -------
    GramSummary or Sketch
    """
    parts = list(parts)
    if not parts:
        raise ValueError("merge_summaries needs at least one part")
    if not all(isinstance(part, GramSummary) for part in parts):
        return merge_sketches([part.resize(part.sketch_size)
                               if isinstance(part, GramSummary) else part
                               for part in parts])
    check_mergeable(parts)
    nonempty = [part for part in parts if part.n_rows > 0]
    if len(nonempty) <= 1:
        return nonempty[0] if nonempty else parts[0]
    n_rows = sum(part.n_rows for part in nonempty)
    masses = [part.frobenius_sq for part in nonempty]
    terms = [part.gram for part in nonempty]
    mean = correction = None
    first = nonempty[0]
    if first.centered:
        mean, correction = centring_rows(nonempty, n_rows)
        masses.append(float(np.einsum("ij,ij->", correction, correction)))
        terms.append(correction.T @ correction)
    where = f"the merge of {len(nonempty)} Gram summaries of {n_rows} rows"
    mass = checked_mass(sum(masses), lambda: _merged_norm(nonempty, correction,
                                                          first.centered), where)
    with np.errstate(over="ignore", invalid="ignore"):
        gram = terms[0] + terms[1]
        for term in terms[2:]:
            gram += term
    if not np.isfinite(np.diagonal(gram)).all():
        raise ValueError(f"X: {where} has a Gram matrix beyond float64's range; rescale X")
    rounding = sum(part.rounding for part in nonempty) + gram_rounding(len(terms) - 1, mass)
    if correction is not None:
        rounding += gram_rounding(len(nonempty), masses[-1]) + merge_centring_rounding(
            nonempty, correction, n_rows, mass, mean)
    return replace(first, gram=gram, n_rows=n_rows, mean=mean, frobenius_sq=mass,
                   rounding=rounding)
