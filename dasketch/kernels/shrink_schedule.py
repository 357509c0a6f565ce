"""How many rows of a block each Frequent Directions shrink absorbs.

One shrink of the whole block gives the smallest total shrinkage; the streaming
buffer of ``2 l`` rows (Luo et al., JMLR 2019, Algorithms 4 and 5) the least
memory; :func:`rows_per_shrink` picks between them, or a chunk size in between
from a flop-count cost model of :func:`~dasketch.kernels.shrink.shrink`.
Numpy only.

References
----------
.. [3] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019 (Algorithms 1-5).
"""

from __future__ import annotations

SHRINK_UPDATES = ("auto", "block", "buffered")

# Rough cost, in flop equivalents, of one Python-level shrink call (eigh call,
# stacking, bookkeeping). It keeps the cost model from preferring thousands of tiny
# LAPACK calls over one large, BLAS-3 friendly Gram product.
_CALL_OVERHEAD_FLOPS = 2e6
# Flop equivalents per r^3 of the r x r eigendecomposition (LAPACK dsyevd with
# eigenvectors, single thread; measured against BLAS-3 products of the same machine).
_EIGH_FLOPS = 4.0
# Flop equivalents of reading one float64 from memory in a skinny product (one
# product X G with l = 32 columns, 32 flops per value read, is about balanced).
_FLOPS_PER_VALUE_READ = 12.0
# How much dearer than the cheapest chunk a larger chunk may be (fewer shrinks mean
# a smaller Delta). Dense rows absorbed through the row Gram get a tighter slack: the
# chunk Gram's cost grows linearly with the chunk there, and 2x would buy a b x b
# Gram per block (b d flops per row, 8-16x one random projection for wide rows).
_CHUNK_SLACK = 2.0
_WIDE_CHUNK_SLACK = 1.5


def _shrink_flops(n_top, n_rows, n_features, nnz_per_row, sparse):
    """Estimated flop count of one :func:`~dasketch.kernels.shrink.shrink` of
    ``n_top + n_rows`` rows, the ``n_top`` rows orthogonal (the output of the
    previous shrink)."""
    n_stack = n_top + n_rows
    d = n_features
    nnz = n_rows * nnz_per_row
    if n_stack <= d:
        # Row side: squared norms of the top rows (the diagonal trick), the cross
        # block, the chunk's own Gram (syrk: half the products, and BLAS runs it
        # near peak), the eigendecomposition and the new rows.
        if sparse:
            data_gram = nnz * nnz_per_row + nnz * n_top
        else:
            data_gram = n_rows * n_top * d + n_rows * n_rows * d / 4.0
        new_rows = (nnz if sparse else n_rows * d) * n_top + n_top * n_top * d
        # Products with a few dozen rows are bound by memory, not flops: each of
        # the three passes over the stack costs about this much per value read.
        passes = 3 * _FLOPS_PER_VALUE_READ * (n_top * d + (nnz if sparse else n_rows * d))
        return n_top * d + data_gram + _EIGH_FLOPS * n_stack ** 3 + new_rows + passes
    data_gram = nnz * nnz_per_row if sparse else n_rows * d * d
    return n_top * d * d + data_gram + _EIGH_FLOPS * d ** 3 + n_top * d * d


def rows_per_shrink(n_rows, n_features, sketch_size, *, nnz_per_row=None,
                    update="auto"):
    """How many rows of a block to absorb per shrink.

    ``"block"`` absorbs the whole block in one shrink (near-optimal error);
    ``"buffered"`` streams through it with the buffer of ``2 l`` rows of the
    paper's fast Algorithms 4 and 5 ([3]_): after each shrink ``l + 1`` rows
    are free, O(b d l) work. ``"auto"`` picks, from ``l, 2l, 4l, ..., b``, the
    largest chunk whose estimated cost (flops plus a per-call overhead) is within
    a slack of the cheapest: larger chunks mean fewer shrinks and so a smaller
    ``Delta``. The slack is a factor 2, and 1.5 for dense blocks wider than they are
    tall (absorbed through the row Gram, whose chunk term, ``s d / 2`` flops per row
    for a chunk of ``s`` rows, soon outweighs FD's own ``O(l d)``): a chunk of
    about ``4-8 l`` rows, some ``4-5`` times the flops of one random projection
    ``X G`` with ``l`` columns, where the whole block would cost ``b d / 2`` per
    row.
    """
    if update not in SHRINK_UPDATES:
        raise ValueError(f"update must be one of {SHRINK_UPDATES}, got {update!r}")
    if n_rows == 0:
        return 1
    if update == "block":
        return n_rows
    if update == "buffered":
        return sketch_size + 1
    sparse = nnz_per_row is not None
    if not sparse:
        nnz_per_row = n_features
    top = sketch_size - 1
    candidates = []
    step = sketch_size
    while True:
        step = min(step, n_rows)
        n_calls = -(-n_rows // step)
        cost = n_calls * (_shrink_flops(top, step, n_features, nnz_per_row, sparse)
                          + _CALL_OVERHEAD_FLOPS)
        candidates.append((step, cost))
        if step == n_rows:
            break
        step *= 2
    cheapest = min(cost for _, cost in candidates)
    slack = _WIDE_CHUNK_SLACK if not sparse and n_features >= n_rows else _CHUNK_SLACK
    return max(step for step, cost in candidates if cost <= slack * cheapest)
