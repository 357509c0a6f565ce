"""The shrink step of Frequent Directions.

A shrink takes a stack of rows, computes its SVD from the eigendecomposition of
the smaller Gram matrix and subtracts the ``l``-th squared singular value from
every squared singular value (Liberty 2013, Algorithm 1; Luo et al., JMLR 2019,
Algorithm 2); :mod:`dasketch.kernels.shrink_schedule` chooses how many rows of
a block each shrink absorbs. Numpy/scipy only.

References
----------
.. [1] E. Liberty, "Simple and deterministic matrix sketching", KDD 2013.
.. [3] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019 (Algorithms 1-5).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse

from dasketch.kernels.deprecation import renamed_constants
from dasketch.kernels.shrink_schedule import (  # noqa: F401 - the cost model is re-exported
    _CALL_OVERHEAD_FLOPS,
    _CHUNK_SLACK,
    _EIGH_FLOPS,
    _FLOPS_PER_VALUE_READ,
    _WIDE_CHUNK_SLACK,
    SHRINK_UPDATES,
    _shrink_flops,
    rows_per_shrink,
)

__getattr__ = renamed_constants(__name__, {"UPDATES": "SHRINK_UPDATES"}, globals())
EPS = float(np.finfo(np.float64).eps)


def gamma(k):
    """Higham's ``gamma_k = k u / (1 - k u)``, ``u = eps / 2``: the relative error
    bound of ``k`` rounded operations (*Accuracy and Stability of Numerical
    Algorithms*, 2nd ed., 2002, Lemma 3.1); infinite once ``k u >= 1``."""
    ku = k * EPS / 2
    return ku / (1.0 - ku) if ku < 1.0 else float("inf")

# When nothing is shrunk away (l > d), a Gram whose smallest eigenvalue is below
# this fraction of its largest gives the small singular values to worse than about
# d eps / (2 GRAM_FLOOR) relative: the rows are then taken from a QR of the stack.
GRAM_FLOOR = 1e-6


def to_float64(rows):
    if scipy.sparse.issparse(rows):
        return scipy.sparse.csr_matrix(rows, dtype=np.float64)
    return np.asarray(rows, dtype=np.float64)


class NonFiniteError(ValueError):
    """The stack handed to :func:`shrink` holds NaN or Inf."""


def shrink(top, extra, sketch_size, *, return_extra_norm=False, top_orthogonal=False):
    """Shrink the stack ``C = [top; extra]`` to at most ``l - 1`` rows.

    FD's shrink ([3]_ Algorithm 1 and 2): with ``C = U S V^T``,
    ``delta = s_l^2`` and ``B = sqrt(max(s_i^2 - delta, 0)) v_i^T`` for ``i < l``.
    If C has fewer than ``l`` rows it is returned unchanged with ``delta = 0``.

    The SVD is taken from the eigendecomposition of the smaller Gram matrix,
    ``C C^T`` (r x r) or ``C^T C`` (d x d). When ``l > d`` (nothing is shrunk),
    ``extra`` is dense and the Gram's condition exceeds ``1 / GRAM_FLOOR``, the
    rows are those of the stack's own SVD (:func:`_stack_singular_rows`),
    accurate to ``eps sigma_1`` in every singular value: the exact sketch keeps
    PCA's near-null directions. On the row side the new rows are
    ``diag(sqrt(max(1 - delta / s_i^2, 0))) U^T C``, which never divides by a
    small singular value. ``extra`` may be scipy.sparse: it is only used in
    products, never densified (O(nnz l) work).

    Parameters
    ----------
    top : ndarray of shape (r1, d)
        Dense rows (usually the current sketch).
    extra : ndarray or scipy.sparse matrix of shape (r2, d)
    sketch_size : int
    return_extra_norm : bool
        Also return ``||extra||_F^2``, read off the Gram matrix for free.
    top_orthogonal : bool
        ``top`` is the output of an earlier shrink, whose rows are orthogonal
        (``top top^T`` is diagonal up to rounding): the top-left block of the row
        Gram is then the diagonal of squared row norms, O(r1 d) instead of
        O(r1^2 d) work, which is what makes streaming wide rows cheap.

    Returns
    -------
    B : ndarray of shape (r, d), r <= max(l - 1, r1 + r2 when r1 + r2 < l)
    delta : float
    extra_norm : float, only with ``return_extra_norm``

    Raises
    ------
    NonFiniteError
        If the stack holds NaN or Inf (seen on the Gram's diagonal, before any
        decomposition).
    """
    sparse_extra = scipy.sparse.issparse(extra)
    n_top, n_extra = top.shape[0], extra.shape[0]
    n_stack, d = n_top + n_extra, top.shape[1]
    keep = sketch_size - 1
    if n_stack < sketch_size:
        dense_extra = extra.toarray() if sparse_extra else extra
        new, delta = np.vstack([top, dense_extra]), 0.0
        extra_norm = float(np.einsum("ij,ij->", dense_extra, dense_extra))
        if not np.isfinite(extra_norm):
            raise NonFiniteError("the stack holds NaN or Inf")
        return (new, delta, extra_norm) if return_extra_norm else (new, delta)
    if n_stack <= d:
        # Row side: eigendecomposition of C C^T.
        gram = np.empty((n_stack, n_stack))
        if top_orthogonal:
            gram[:n_top, :n_top] = np.diag(np.einsum("ij,ij->i", top, top))
        else:
            gram[:n_top, :n_top] = top @ top.T
        cross = extra @ top.T
        gram[n_top:, :n_top] = cross
        gram[:n_top, n_top:] = cross.T
        inner = extra @ extra.T
        gram[n_top:, n_top:] = inner.toarray() if sparse_extra else inner
        extra_norm = _checked_trace(gram[n_top:, n_top:], gram)
        eigvals, eigvecs = _descending_eigh(gram)
        delta = float(eigvals[keep])
        lead = eigvals[:keep]
        weights = np.sqrt(np.clip(1.0 - delta / np.where(lead > 0, lead, 1.0), 0.0, None))
        weights[lead <= delta] = 0.0
        coef = (eigvecs[:, :keep] * weights)[:, weights > 0]  # (n_stack, kept rows)
        new = _combine_rows(coef[:n_top], top, coef[n_top:], extra)
    else:
        # Column side: eigendecomposition of C^T C.
        inner = extra.T @ extra
        inner = inner.toarray() if sparse_extra else inner
        gram = top.T @ top + inner
        extra_norm = _checked_trace(inner, gram)
        eigvals, eigvecs = _descending_eigh(gram)
        if keep >= d and not sparse_extra and eigvals[-1] < GRAM_FLOOR * eigvals[0]:
            # Nothing is shrunk away, and the Gram has lost the small singular
            # values' relative accuracy: the rows come from the stack's own SVD.
            new, delta = _stack_singular_rows(top, extra), 0.0
        else:
            new, delta = _shrunk_rows(eigvals, eigvecs, keep)
    new = _positive_largest_entries(np.ascontiguousarray(new))
    return (new, delta, extra_norm) if return_extra_norm else (new, delta)


def shrink_gram(gram, sketch_size):
    """FD's shrink of rows ``C`` given by their Gram matrix ``gram = C^T C`` (d x d):
    with ``C^T C = V diag(s^2) V^T``, ``delta = s_l^2`` and the rows
    ``sqrt(max(s_i^2 - delta, 0)) v_i^T`` for ``i < l`` ([3]_ Algorithm 2, the
    column side of :func:`shrink`). Returns ``(B, delta)``; ``delta = 0`` and
    every row kept when ``l > d``. For ``d >= TOP_EIGH_RATIO l`` only the top
    ``l`` eigenpairs are computed (LAPACK ``dsyevr``, backward stable as
    ``dsyevd``)."""
    d = gram.shape[0]
    if d >= TOP_EIGH_RATIO * sketch_size:
        eigvals, eigvecs = _top_eigh(gram, sketch_size)
    else:
        eigvals, eigvecs = _descending_eigh(gram)
    new, delta = _shrunk_rows(eigvals, eigvecs, sketch_size - 1)
    return _positive_largest_entries(np.ascontiguousarray(new)), delta


# A Gram at least this many times wider than the sketch has only its top l
# eigenpairs computed, where that takes less time than all of them (measured in
# benchmarks/README.md, "Exact updates of dense rows by width").
TOP_EIGH_RATIO = 16


def _top_eigh(gram, count):
    """The ``count`` largest eigenvalues of ``gram``, largest first and clamped at
    0, and their eigenvectors; all of them (:func:`_descending_eigh`) where
    ``dsyevr`` fails."""
    d = gram.shape[0]
    try:
        eigvals, eigvecs = scipy.linalg.eigh(gram, check_finite=False, driver="evr",
                                             subset_by_index=(d - count, d - 1))
    except (np.linalg.LinAlgError, ValueError):
        eigvals, eigvecs = _descending_eigh(gram)
        return eigvals[:count], eigvecs[:, :count]
    return np.maximum(eigvals[::-1], 0.0), eigvecs[:, ::-1]


def _descending_eigh(gram):
    """Eigenvalues of ``gram``, largest first and clamped at 0, and eigenvectors."""
    eigvals, eigvecs = _gram_eigh(gram)
    return np.maximum(eigvals[::-1], 0.0), eigvecs[:, ::-1]


def _shrunk_rows(eigvals, eigvecs, keep):
    """``(sqrt(lambda_i - delta) v_i^T for the first keep i with lambda_i > delta,
    delta)``, ``delta = lambda_keep`` (0 when ``keep >= d``)."""
    delta = float(eigvals[keep]) if keep < eigvals.shape[0] else 0.0
    lead = eigvals[:keep] - delta
    positive = lead > 0
    return np.sqrt(lead[positive])[:, None] * eigvecs[:, :keep][:, positive].T, delta


def _stack_singular_rows(top, extra):
    """``S V^T`` of the thin SVD of the stack ``[top; extra]`` (r x d), zero rows
    left out: ``R`` of Householder QRs over panels of ``8 d`` rows (TSQR: LAPACK's
    ``dgeqrf`` of a tall stack at once is several times slower), then the SVD of
    ``R``. Backward stable: every singular value to ``eps sigma_1``, as
    :class:`sklearn.decomposition.IncrementalPCA`'s, where a Gram matrix gives
    ``eps sigma_1^2 / sigma_i``."""
    d = top.shape[1]
    R, panel = top, 8 * d
    for start in range(0, extra.shape[0], panel):
        R = np.linalg.qr(np.vstack([R, extra[start:start + panel]]), mode="r")
    try:
        _, values, Vt = scipy.linalg.svd(R, full_matrices=False, check_finite=False)
    except np.linalg.LinAlgError:
        _, values, Vt = scipy.linalg.svd(R, full_matrices=False, check_finite=False,
                                         lapack_driver="gesvd")
    positive = values > 0
    return values[positive, None] * Vt[positive]


def _gram_eigh(gram):
    """Eigenvalues (ascending) and eigenvectors of the symmetric Gram matrix ``gram``.

    LAPACK's divide and conquer (``dsyevd``) first; it can fail to converge on a
    Gram whose entries span float64's whole range (a block mixing rows of scale
    1e250, 1 and 1e-100), and then the relatively robust representations
    (``dsyevr``, Dhillon and Parlett 2004) are used, and failing those the SVD of
    the Gram (``dgesvd``; for a symmetric positive semi-definite matrix its
    singular values and left vectors are the eigenpairs). All three are backward
    stable, so :func:`shrink_rounding` covers each; a shrink never raises
    LAPACK's ``LinAlgError``. ``gram`` is kept intact for the fallbacks.
    """
    try:
        return scipy.linalg.eigh(gram, check_finite=False, driver="evd")
    except np.linalg.LinAlgError:
        pass
    try:
        return scipy.linalg.eigh(gram, check_finite=False, driver="evr")
    except np.linalg.LinAlgError:
        vectors, values, _ = scipy.linalg.svd(gram, check_finite=False,
                                              lapack_driver="gesvd")
        return values[::-1], vectors[:, ::-1]


def shrink_rounding(n_stack, n_features, stack_norm_sq):
    """Bound on the spectral norm of the rounding error one :func:`shrink` of an
    ``r x d`` stack ``C`` adds to ``C^T C - B^T B``: ``c eps ||C||_F^2`` with
    ``c = 2 (r + d) + 8 min(r, d)``.

    The terms, for float64 with unit roundoff ``u = eps / 2`` (Higham, *Accuracy and
    Stability of Numerical Algorithms*, 2nd ed., 2002, Section 3.5 and Chapter 8):

    * the Gram matrix (inner dimension ``k = d`` on the row side, ``r`` on the
      column side) is exact up to ``gamma_k |C| |C|^T``, whose spectral norm is at
      most ``gamma_k ||C||_F^2``;
    * the symmetric eigendecomposition (LAPACK ``dsyevd``) of the
      ``m = min(r, d)``-sided Gram is backward stable with error ``p(m) eps
      ||G||_2``; ``p(m) = 4 m`` is taken;
    * the new rows ``W^T C`` (inner dimension ``r``) are exact up to ``gamma_r``
      relative, which enters ``B^T B`` twice; dropping the off-diagonal of the top
      rows' Gram (``top_orthogonal``) discards entries of the same order;
    * when ``l > d`` and the Gram is ill-conditioned, the rows are the stack's SVD ``S V^T``
      (Householder QR, then the SVD of ``R``), backward stable with error ``p
      eps ||C||_2`` (LAPACK Users' Guide, Section 4.9; Higham, Theorem 19.4),
      which enters ``B^T B`` twice: with ``p`` taken as ``r + d + 4 min(r, d)``,
      the same bound.

    The sum, ``(k + 2 r + 4 m) eps ||C||_F^2`` to first order, is doubled for the
    second-order terms and for ``k <= r + d``. A stack of fewer than ``l`` rows is
    kept as it is (no arithmetic) and costs nothing.
    """
    r, d = int(n_stack), int(n_features)
    return (2.0 * (r + d) + 8.0 * min(r, d)) * EPS * float(stack_norm_sq)


def _positive_largest_entries(rows):
    """Each row's sign chosen so that its entry of largest magnitude is positive.

    The sign of a singular vector is arbitrary, and rounding differences between
    runs (BLAS kernels, thread counts) can flip it; fixing it keeps the sketch the
    same for any scheduler or worker count (sklearn's ``svd_flip`` convention,
    written here because the kernels do not import scikit-learn).
    """
    if rows.size:  # no row-sized temporaries: wide sketches are large
        index = np.arange(rows.shape[0])
        highest, lowest = rows[index, rows.argmax(axis=1)], rows[index, rows.argmin(axis=1)]
        for i in np.flatnonzero(-lowest > highest):
            rows[i] *= -1
    return rows


# Columns per panel of the row-side product: the temporary of ``coef^T top`` stays
# at kept rows x PANEL_COLUMNS values however wide the rows are.
PANEL_COLUMNS = 2 ** 16


def _combine_rows(coef_top, top, coef_extra, extra):
    """``coef_top^T top + coef_extra^T extra`` with one output-sized array.

    Written out by column panels rather than as two full products so that a
    shrink of wide rows (a merge of ``l x d`` sketches at d = 1e6) holds its
    inputs, the output and one panel, not two more output-sized temporaries.
    """
    if not scipy.sparse.issparse(extra):
        new = coef_extra.T @ extra
    elif extra.shape[1] <= PANEL_COLUMNS:
        new = np.ascontiguousarray((extra.T @ coef_extra).T)
    else:  # wide sparse rows: (extra^T coef)^T in one go would need a transposed copy
        columns = scipy.sparse.csc_matrix(extra)
        new = np.empty((coef_extra.shape[1], extra.shape[1]))
        for start in range(0, new.shape[1], PANEL_COLUMNS):
            cols = slice(start, start + PANEL_COLUMNS)
            new[:, cols] = (columns[:, cols].T @ coef_extra).T
    if top.shape[0]:
        for start in range(0, new.shape[1], PANEL_COLUMNS):
            cols = slice(start, start + PANEL_COLUMNS)
            new[:, cols] += coef_top.T @ top[:, cols]
    return new


def shrink_rows(parts, sketch_size):
    """``shrink(empty, vstack(parts))`` computed on the columns where some part is
    nonzero.

    Columns that are zero in every row (sketches of sparse blocks that never touch
    them) contribute nothing to the Gram matrix, so skipping them is exact; the
    check is one pass over the parts, small beside the Gram product, and the
    stack is only formed on the nonzero columns.
    """
    n_features = parts[0].shape[1]
    touched = parts[0].any(axis=0)
    for part in parts[1:]:
        touched |= part.any(axis=0)
    n_touched = int(np.count_nonzero(touched))
    if 0 < n_touched < 0.75 * n_features:
        nonzero = np.flatnonzero(touched)
        compact, delta = shrink_rows([part[:, nonzero] for part in parts], sketch_size)
        new = np.zeros((compact.shape[0], n_features))
        new[:, nonzero] = compact
        return new, delta
    if len(parts) == 1:
        return shrink(parts[0][:0], parts[0], sketch_size)
    # The first part is the top of the stack rather than copied into it: a merge of
    # wide sketches then holds one copy of the others, not of all of them.
    rest = parts[1:]
    return shrink(parts[0], rest[0] if len(rest) == 1 else np.vstack(rest), sketch_size)


def _checked_trace(block, gram):
    """Trace of ``block``; NaN or Inf anywhere in the stack shows on the Gram's
    diagonal (a sum of squares), so one O(r) check replaces a pass over the data."""
    if not np.isfinite(np.diagonal(gram)).all():
        raise NonFiniteError("the stack holds NaN or Inf")
    return float(np.trace(block))


def check_finite_rows(rows, row_offset):
    values = rows.data if scipy.sparse.issparse(rows) else rows
    if np.isfinite(values).all():
        return
    if scipy.sparse.issparse(rows):
        bad_rows = np.unique(np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))[
            ~np.isfinite(rows.data)])
    else:
        bad_rows = np.flatnonzero(~np.isfinite(rows).all(axis=1))
    bad_rows = bad_rows + row_offset
    shown = ", ".join(str(r) for r in bad_rows[:10])
    more = f" and {len(bad_rows) - 10} more" if len(bad_rows) > 10 else ""
    raise ValueError(
        f"X contains NaN or Inf in rows {shown}{more} (block of rows "
        f"[{row_offset}, {row_offset + rows.shape[0]})); clean or drop those rows")


def _squared_norm(rows):
    """``||rows||_F^2`` of a dense matrix (0 for no rows)."""
    return float(np.einsum("ij,ij->", rows, rows)) if rows.size else 0.0

