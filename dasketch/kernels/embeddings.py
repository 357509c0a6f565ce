"""Seeded random operators indexed by global row or column (numpy/scipy only).

Every random matrix is a function of ``(seed, stream, global index)``: the index
range is cut into fixed tiles of :data:`TILE` indices and tile ``t`` draws from
``numpy.random.default_rng([seed, stream, t])``. A block of data regenerates only
the tiles it covers, so results are identical for any chunking, any number of
workers and any retry after a worker failure, and no random matrix is ever
materialised whole or shipped over the network.

References
----------
.. [1] K. L. Clarkson, D. P. Woodruff, "Low rank approximation and regression in
   input sparsity time", STOC 2013 (CountSketch embedding).
.. [2] J. Nelson, H. L. Nguyen, "OSNAP: faster numerical linear algebra
   algorithms via sparser subspace embeddings", FOCS 2013.
.. [3] X. Meng, M. W. Mahoney, "Low-distortion subspace embeddings in
   input-sparsity time and applications to robust linear regression", STOC 2013
   (sparse Cauchy transform).
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse

TILE = 4096

EMBEDDINGS = ("countsketch", "osnap", "cauchy")


def resolve_seed(random_state):
    """Turn a scikit-learn style ``random_state`` into a non-negative integer seed.

    ``None`` draws fresh entropy; an int is used as is; a
    ``numpy.random.RandomState`` or ``Generator`` contributes one draw.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2 ** 63))
    if isinstance(random_state, (bool, np.bool_)):
        raise TypeError(f"random_state must be None, an int or a numpy random generator, "
                        f"got {random_state!r}")
    if isinstance(random_state, numbers.Integral):
        if random_state < 0:
            raise ValueError(f"random_state must be >= 0, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2 ** 31 - 1))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2 ** 63 - 1))
    raise TypeError(f"random_state must be None, an int or a numpy random generator, "
                    f"got {type(random_state).__name__}")


def _tile_rng(seed, stream, tile):
    return np.random.default_rng([seed, stream, tile])


def _tiles(start, stop):
    """Yield ``(tile, lo, hi)``: the part ``[lo, hi)`` of each tile in ``[start, stop)``."""
    for tile in range(start // TILE, -(-stop // TILE)):
        lo = max(start, tile * TILE)
        hi = min(stop, (tile + 1) * TILE)
        yield tile, lo - tile * TILE, hi - tile * TILE


def gaussian_rows(seed, stream, start, stop, n_columns, dtype=np.float64):
    """Rows ``[start, stop)`` of a standard Gaussian matrix with ``n_columns`` columns.

    Row ``i`` depends only on ``(seed, stream, i // TILE)``, never on the range
    asked for. A generator fills its output in order, so a tile's first ``hi``
    rows are drawn alone (``(hi, n_columns)``), not the whole tile: a matrix of
    fewer than :data:`TILE` rows costs its own rows only.
    """
    parts = [
        _tile_rng(seed, stream, tile).standard_normal((hi, n_columns))[lo:]
        for tile, lo, hi in _tiles(start, stop)
    ]
    if not parts:
        return np.zeros((0, n_columns), dtype=dtype)
    return np.concatenate(parts).astype(dtype, copy=False)


def cauchy_rows(seed, stream, start, stop, n_columns):
    """Rows ``[start, stop)`` of a matrix of i.i.d. standard Cauchy variables (a
    tile's first rows drawn alone, as in :func:`gaussian_rows`)."""
    parts = [
        _tile_rng(seed, stream, tile).standard_cauchy((hi, n_columns))[lo:]
        for tile, lo, hi in _tiles(start, stop)
    ]
    if not parts:
        return np.zeros((0, n_columns))
    return np.concatenate(parts)


def check_embedding(embedding, nnz_per_column):
    """Validate ``embedding`` and ``nnz_per_column`` of a sparse embedding."""
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {embedding!r}")
    if isinstance(nnz_per_column, (bool, np.bool_)) or not isinstance(
        nnz_per_column, numbers.Integral
    ) or nnz_per_column < 1:
        raise ValueError(f"nnz_per_column must be an integer >= 1, got {nnz_per_column!r}")
    if embedding != "osnap" and nnz_per_column != 1:
        raise ValueError(f"nnz_per_column must be 1 for embedding={embedding!r}, got "
                         f"{nnz_per_column}")


def sparse_embedding_block(seed, stream, start, stop, sketch_size, *, embedding="osnap",
                           nnz_per_column=1):
    """Columns ``[start, stop)`` of a sparse embedding ``S`` (s x n) as CSR (s x b).

    ``S_blk @ A[start:stop]`` is the block's contribution to ``S A``.

    * ``"countsketch"`` ([1]_): one entry ``+-1`` per column in a uniform bucket.
    * ``"osnap"`` ([2]_): ``k = nnz_per_column`` entries ``+-1/sqrt(k)`` per
      column, one in each of ``k`` equal slices of ``[0, s)`` (so distinct).
    * ``"cauchy"`` ([3]_): one entry per column, a standard Cauchy variable, in a
      uniform bucket (``S = Phi D``).
    """
    buckets, values = embedding_entries(seed, stream, start, stop, sketch_size,
                                        embedding=embedding, nnz_per_column=nnz_per_column)
    return entries_matrix(buckets, values, sketch_size)


def embedding_entries(seed, stream, start, stop, sketch_size, *, embedding="osnap",
                      nnz_per_column=1):
    """The nonzeros of :func:`sparse_embedding_block`: ``(buckets, values)``, each
    of shape ``(stop - start, k)``, column ``i`` of the block's ``S`` holding
    ``values[i, j]`` in row ``buckets[i, j]``."""
    check_embedding(embedding, nnz_per_column)
    k = nnz_per_column
    if k > sketch_size:
        raise ValueError(f"nnz_per_column ({k}) must not exceed sketch_size ({sketch_size})")
    bounds = np.linspace(0, sketch_size, k + 1).astype(np.int64)
    buckets, values = [np.zeros((0, k), dtype=np.int64)], [np.zeros((0, k))]
    for tile, lo, hi in _tiles(start, stop):
        rng = _tile_rng(seed, stream, tile)
        u = rng.random((TILE, k))[lo:hi]
        slice_lo, slice_width = bounds[:-1], np.diff(bounds)
        buckets.append(slice_lo + np.minimum((u * slice_width).astype(np.int64),
                                             slice_width - 1))
        if embedding == "cauchy":
            values.append(rng.standard_cauchy((TILE, k))[lo:hi])
        else:
            signs = rng.integers(0, 2, size=(TILE, k))[lo:hi] * 2.0 - 1.0
            values.append(signs / np.sqrt(k))
    return np.concatenate(buckets), np.concatenate(values)


def entries_matrix(buckets, values, sketch_size):
    """The CSR matrix (``sketch_size x len(buckets)``) of the entries of
    :func:`embedding_entries`."""
    n_cols, k = buckets.shape
    if n_cols == 0:
        return scipy.sparse.csr_matrix((sketch_size, 0))
    columns = np.repeat(np.arange(n_cols), k)
    return scipy.sparse.csr_matrix(
        (values.ravel(), (buckets.ravel(), columns)), shape=(sketch_size, n_cols))
