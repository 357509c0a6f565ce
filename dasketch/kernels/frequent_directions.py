"""Frequent Directions (FD) and Robust Frequent Directions (RFD) sketches.

Single-machine kernels, numpy/scipy only. A :class:`Sketch` summarises the rows
``A`` (n x d) seen so far by a small matrix ``B`` (at most ``l - 1`` rows) and the
total shrinkage ``Delta``; it is immutable, so it can travel between Dask tasks
and be merged in any tree (:mod:`dasketch.kernels.merging`).

References
----------
.. [1] E. Liberty, "Simple and deterministic matrix sketching", KDD 2013.
.. [2] M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff, "Frequent
   Directions: simple and deterministic matrix sketching", SIAM J. Comput. 45(5),
   2016 (mergeability, Section 3).
.. [3] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019 (Algorithms 1-5,
   Theorems 1-3).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse

from dasketch.kernels._sketch_base import _BaseSketch
from dasketch.kernels.deprecation import renamed_constants
from dasketch.kernels.merging import merge_sketches
from dasketch.kernels.shrink import (  # noqa: F401 - the shrink step is re-exported
    NonFiniteError,
    _squared_norm,
    check_finite_rows,
    rows_per_shrink,
    shrink,
    shrink_rounding,
    shrink_rows,
    to_float64,
)
from dasketch.kernels.sketch_checks import (  # noqa: F401 - SKETCH_METHODS is re-exported
    SKETCH_METHODS,
    _merged_norm,
    centring_rounding,
    check_mergeable,
    check_sketch_fields,
    check_sketch_parameters,
    checked_mass,
    merge_centring_rounding,
    scaled_mean,
    scaled_norm,
)
from dasketch.kernels.sketch_scaling import (  # noqa: F401 - re-exported
    SAFE_EXPONENT,
    _underflow_rounding,
    _unscaled,
    block_scale_exponent,
    divide_by_power_of_two,
    scaled_block_sketch,
    unit_scale_from_mass,
    with_scale_exponent,
)

__getattr__ = renamed_constants(__name__, {"METHODS": "SKETCH_METHODS"}, globals())


@dataclass(frozen=True, eq=False)
class Sketch(_BaseSketch):
    """A mergeable FD / RFD sketch of the rows seen so far.

    Parameters
    ----------
    B : ndarray of shape (r, d)
        Sketch rows, ``r <= sketch_size - 1`` after a shrink.
    shrinkage : float
        ``Delta``, the sum of every ``delta`` subtracted so far.
    n_rows : int
        Number of rows summarised.
    sketch_size : int
        ``l`` (the RFD paper's ``m``).
    method : {"fd", "rfd"}, default "rfd"
        Which estimate of ``A^T A`` the sketch represents.
    alpha0 : float, default 0.0
        User regularisation ``alpha0 >= 0``, counted once.
    mean : ndarray of shape (d,), optional
        Column means for a centred (covariance) sketch, None otherwise.
    frobenius_sq : float, default 0.0
        ``||A||_F^2`` of the (centred) rows, tracked exactly.
    shrinkage_bound : float, optional
        Upper bound on the largest eigenvalue of ``A^T A - B^T B``; None means
        ``shrinkage`` itself (every shrink exact, the deterministic case). Set by
        the randomized sparse sketch (:mod:`dasketch.kernels.sparse_fd`), where
        ``shrinkage`` holds the Lanczos estimates of the losses instead.
    failure_probability : float, default 0.0
        Probability that ``shrinkage_bound`` is too small: 0 for a certified
        sketch; merged sketches add theirs (union bound).
    rounding : float, default 0.0
        Bound on the spectral norm of the float64 rounding error of every shrink
        so far (:func:`~dasketch.kernels.shrink.shrink_rounding`, summed), part of
        :attr:`loss_bound` and so of :attr:`error_bound`.
    scale_exponent : int, default 0
        ``e``: ``B``, ``mean``, ``shrinkage``, ``shrinkage_bound``,
        ``frobenius_sq`` and ``rounding`` are those of the rows divided by
        ``2**e``. Positive only for data with entries beyond ``2**200`` (about
        ``1.6e60``), whose fourth powers float64 cannot hold unscaled; negative
        for blocks whose entries are all below ``2**-200`` (about ``6e-61``),
        whose squares would underflow (sketched multiplied by ``2**-e``);
        :meth:`scaled` gives that sketch with ``e = 0``.
    _svd : list, optional
        Cache of the thin SVD of ``B``, filled on first use; never pass it.

    See Also
    --------
    sketch : Sketch a whole (possibly larger than memory) matrix on Dask.
    merge_sketches : Merge sketches of disjoint rows.
    estimate_error : Bracket the actual error on the data in one pass.
    save_sketch : Store a sketch.

    Notes
    -----
    Guarantees ([2]_ Thm. 3.1, [3]_ Thm. 2-3), with ``A`` centred when ``mean``
    is set:

    * FD: ``0 <= A^T A - B^T B <= Delta I`` in the Loewner order.
    * RFD: ``||A^T A + alpha0 I - (B^T B + alpha I)||_2 <= Delta / 2`` with
      ``alpha = alpha0 + Delta / 2``.
    * For every ``k < l``: ``Delta <= ||A - [A]_k||_F^2 / (l - k)``.

    A randomized sketch replaces ``Delta`` in the first two by ``shrinkage_bound``
    and holds them with probability ``1 - failure_probability`` (see
    :attr:`guarantee`); RFD's ridge still uses the estimate ``shrinkage``, so the
    RFD bound is ``shrinkage_bound - shrinkage / 2``. In floating point every
    bound also carries ``rounding`` (the Loewner bounds widen by it on both sides).

    :attr:`alpha`, :attr:`loss_bound`, :attr:`error_bound`, :meth:`covariance`,
    :meth:`singular_values` and :meth:`solve` speak of the rows themselves, also
    for a sketch with ``scale_exponent != 0`` (a value beyond float64's range is
    ``inf``, or an error where ``inf`` would not be a bound; a bound below its
    smallest subnormal is rounded up to it, never to 0); the fields are of the
    scaled rows.

    References
    ----------
    .. [1] E. Liberty, "Simple and deterministic matrix sketching", KDD 2013.
    .. [2] M. Ghashami, E. Liberty, J. M. Phillips, D. P. Woodruff, "Frequent
       Directions: simple and deterministic matrix sketching", SIAM J. Comput.
       45(5), 2016 (mergeability, Section 3).
    .. [3] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent
       Directions with application in online learning", JMLR 20(45), 2019
       (Algorithms 1-5, Theorems 1-3).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import Sketch
    >>> A = np.random.default_rng(0).standard_normal((200, 6)) * [5, 4, 3, 2, 1, 1]
    >>> s = Sketch.from_rows(A[:100], 4).merge(Sketch.from_rows(A[100:], 4))
    >>> s.n_rows, s.B.shape
    (200, (3, 6))
    >>> bool(np.linalg.norm(A.T @ A - s.covariance(), 2) <= s.error_bound * (1 + 1e-12))
    True
    """

    B: np.ndarray
    shrinkage: float
    n_rows: int
    sketch_size: int
    method: str = "rfd"
    alpha0: float = 0.0
    mean: np.ndarray | None = None
    frobenius_sq: float = 0.0
    shrinkage_bound: float | None = None
    failure_probability: float = 0.0
    rounding: float = 0.0
    scale_exponent: int = 0
    _svd: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self):
        # Every sketch, built, merged or loaded, meets the same invariants.
        check_sketch_fields(self)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_rows(cls, rows, sketch_size, *, method="rfd", alpha0=0.0, center=False,
                  update="auto", row_offset=0):
        """Sketch a block of rows in memory in one go.

        Parameters
        ----------
        rows : ndarray or scipy.sparse matrix of shape (b, d)
            Float rows.
        sketch_size : int
            ``l >= 2``.
        method : {"rfd", "fd"}, default "rfd"
            FD or RFD estimate.
        alpha0 : float, default 0.0
            User regularisation ``alpha0 >= 0``.
        center : bool, default False
            Sketch the rows centred on their own mean.
        update : {"auto", "block", "buffered"}, default "auto"
            How the rows are absorbed: one shrink per chunk chosen by a cost model,
            one shrink of the whole block, or the streaming buffer of ``2 l`` rows.
        row_offset : int, default 0
            Global index of the first row, used in error messages.

        Returns
        -------
        Sketch
            The sketch of ``rows``.
        """
        return sketch_rows(rows, sketch_size, method=method, alpha0=alpha0,
                           center=center, update=update,
                           row_offset=row_offset)

    # ------------------------------------------------------------ combining
    def merge(self, *others):
        """Merge with sketches of other rows.

        ``merge(S1, S2) = shrink([B1; B2])`` with ``Delta = Delta1 + Delta2 +
        delta``; the guarantee holds for any tree of merges ([2]_ Section 3).

        Parameters
        ----------
        *others : Sketch
            Sketches of disjoint rows with the same ``d``, ``l``, method, ``alpha0``
            and centring.

        Returns
        -------
        Sketch
            The sketch of all the rows (see :func:`merge_sketches`).
        """
        return merge_sketches((self,) + others)

    def update(self, rows, *, update="auto", row_offset=None):
        """Return the sketch of the seen rows followed by ``rows``.

        Parameters
        ----------
        rows : ndarray or scipy.sparse matrix of shape (b, d)
            The new rows.
        update : {"auto", "block", "buffered"}, default "auto"
            How they are absorbed (as for :meth:`from_rows`).
        row_offset : int, optional
            Global index of the first new row, for error messages; default
            ``n_rows``.

        Returns
        -------
        Sketch
            A new sketch; this one is unchanged.
        """
        offset = self.n_rows if row_offset is None else row_offset
        block = sketch_rows(rows, self.sketch_size, method=self.method,
                            alpha0=self.alpha0, center=self.centered,
                            update=update, row_offset=offset)
        return merge_sketches((self, block))

    def __repr__(self):
        return (f"Sketch(method={self.method!r}, sketch_size={self.sketch_size}, "
                f"n_rows={self.n_rows}, n_features={self.n_features}, "
                f"rows={self.B.shape[0]}, shrinkage={self.shrinkage:.6g}, "
                f"guarantee={self.guarantee!r}, "
                f"alpha={self.alpha:.6g}, centered={self.centered}"
                + (f", scale_exponent={self.scale_exponent})" if self.scale_exponent else ")"))


def sketch_rows(rows, sketch_size, *, method="rfd", alpha0=0.0, center=False,
                update="auto", row_offset=0):
    """Sketch one block of rows.

    Parameters
    ----------
    rows : ndarray or scipy.sparse matrix of shape (b, d)
        Float rows; sparse rows are never densified as a whole (when centring, at
        most one chunk of rows per shrink is densified, the size of the sketch).
    sketch_size : int
        ``l >= 2``.
    method : {"rfd", "fd"}
    alpha0 : float
    center : bool
        Sketch the rows centred on their own mean (merges apply the
        parallel-variance correction).
    update : {"auto", "block", "buffered"}
        See :func:`rows_per_shrink`.
    row_offset : int
        Global index of the first row, used in error messages.

    Returns
    -------
    Sketch
        With ``scale_exponent`` :func:`block_scale_exponent` of ``rows``.
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    sparse = scipy.sparse.issparse(rows)
    if sparse:
        rows = scipy.sparse.csr_matrix(rows)
    else:
        rows = np.asarray(rows)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {rows.shape}")
    if not sparse and not center and rows.size and np.issubdtype(rows.dtype, np.floating):
        # Almost every block is sketched at scale 1: that is read off the sum of
        # squares its shrinks compute anyway, rather than off a pass for its largest
        # entry; a block beyond the safe range is sketched again, scaled, below.
        with np.errstate(over="ignore", invalid="ignore"):
            absorbed = _absorb(rows, sketch_size, None, update, row_offset)
        if unit_scale_from_mass(absorbed[3], rows.size, alpha0):
            return _block_sketch(rows, sketch_size, method, alpha0, None, row_offset,
                                 *absorbed)
    exponent = block_scale_exponent(rows, alpha0)
    if exponent:
        block = sketch_rows(divide_by_power_of_two(rows, exponent), sketch_size,
                            method=method, alpha0=alpha0, center=center, update=update,
                            row_offset=row_offset)
        return scaled_block_sketch(block, exponent, rows)
    if rows.shape[0] == 0:
        return Sketch.empty(rows.shape[1], sketch_size, method=method, alpha0=alpha0,
                            center=center)
    mean = scaled_mean(rows) if center else None
    return _block_sketch(rows, sketch_size, method, alpha0, mean, row_offset,
                         *_absorb(rows, sketch_size, mean, update, row_offset))


def _absorb(rows, sketch_size, mean, update, row_offset):
    """The shrinks of :func:`sketch_rows` over a nonempty block at scale 1, its rows
    centred on ``mean`` when given: ``(B, shrinkage, rounding, frobenius_sq)``, the
    last unchecked (``inf`` when the Gram of finite rows overflows)."""
    sparse = scipy.sparse.issparse(rows)
    n_rows, d = rows.shape
    nnz_per_row = rows.nnz / n_rows if sparse else None
    step = rows_per_shrink(n_rows, d, sketch_size, nnz_per_row=nnz_per_row,
                           update=update)
    B = np.zeros((0, d))
    shrinkage = rounding = 0.0
    frobenius_sq = 0.0
    shrunk = False
    start = 0
    while start < n_rows:
        if update == "buffered":
            # Algorithm 5's buffer of 2 l rows: fill what the last shrink freed.
            step = 2 * sketch_size - B.shape[0]
        chunk = to_float64(rows[start:start + step])
        start += step
        if mean is not None:
            chunk = (chunk.toarray() if sparse else chunk) - mean
        n_stack = B.shape[0] + chunk.shape[0]
        top_norm = _squared_norm(B) if n_stack >= sketch_size else 0.0
        try:
            B, delta, chunk_norm = shrink(B, chunk, sketch_size, return_extra_norm=True,
                                          top_orthogonal=shrunk)
        except NonFiniteError:
            check_finite_rows(rows, row_offset)  # names the rows, then raises
            frobenius_sq = np.inf
            break
        frobenius_sq += chunk_norm
        shrinkage += delta
        if n_stack >= sketch_size:
            rounding += shrink_rounding(n_stack, d, top_norm + chunk_norm)
        # A shrink leaves orthogonal rows; a stack shorter than l is kept as is.
        shrunk = n_stack >= sketch_size
    return B, shrinkage, rounding, frobenius_sq


def _block_sketch(rows, sketch_size, method, alpha0, mean, row_offset, B, shrinkage,
                  rounding, frobenius_sq):
    """The :class:`Sketch` of a block from what :func:`_absorb` returned."""
    n_rows, d = rows.shape
    frobenius_sq = checked_mass(
        frobenius_sq, lambda: scaled_norm(rows if mean is None else _centred(rows, mean)),
        f"the block of rows [{row_offset}, {row_offset + n_rows})")
    if mean is not None:
        rounding += centring_rounding(n_rows, frobenius_sq, mean)
    return replace(Sketch.empty(d, sketch_size, method=method, alpha0=alpha0,
                                center=mean is not None),
                   B=B, shrinkage=shrinkage, n_rows=n_rows, mean=mean,
                   frobenius_sq=frobenius_sq, rounding=rounding, _svd=[])


def _centred(rows, mean):
    return (rows.toarray() if scipy.sparse.issparse(rows) else rows) - mean
