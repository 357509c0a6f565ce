"""The functions that block tasks run on workers.

A worker unpickles a task's function by reference, importing its module: the
functions mapped over blocks therefore live here, in a module that imports only
numpy, scipy, :mod:`dasketch.kernels` and the array seam
(:mod:`.array_libraries`; never scikit-learn, about 110 MiB per worker process,
nor the estimators). Every function takes the block (an ndarray
or CSR matrix of rows ``[start, stop)``) first, then ``start, stop``, then the
block's pieces of row-aligned arrays, as :func:`dasketch._blocks.map_rows` and
:func:`dasketch._blocks.map_reduce` call it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np
import scipy.sparse

from dasketch._blocks.array_libraries import block_namespace, is_numpy_block, to_host
from dasketch._blocks.embedding_blocks import embed_block  # noqa: F401 - re-exported
from dasketch._blocks.namespace_products import (
    float_rows,
    like,
    rows_product,
    transpose_product,
)
from dasketch.kernels.block_products import rows_times, rows_transpose_times
from dasketch.kernels.embeddings import TILE, gaussian_rows
from dasketch.kernels.frequent_directions import merge_sketches, sketch_rows
from dasketch.kernels.gram_sketch import merge_summaries, summarise_rows
from dasketch.kernels.namespace_fd import sketch_dense_rows, times_power_of_two
from dasketch.kernels.shrink import check_finite_rows
from dasketch.kernels.sketch_scaling import divide_by_power_of_two
from dasketch.kernels.sparse_fd import sketch_rows_randomized


def add(*terms):
    """The sum of arrays of one shape (a new array), summed left to right: the
    first two into a new array (one pass over memory, where a copy and then an
    addition take two), the others into it in place."""
    if len(terms) == 1:
        return terms[0].copy()
    total = terms[0] + terms[1]
    for term in terms[2:]:
        total += term
    return total


def add_into(total, *terms):
    """:func:`add` of ``total`` and ``terms`` summed into ``total`` itself, left to
    right: the same values, with no new array, for a ``total`` that nothing else
    holds (a sum the tree made itself, :func:`~dasketch._blocks.tasks.streamed_tree`).
    A total of another kind, or whose dtype or shape the sum would change, is
    summed by :func:`add`."""
    if (not isinstance(total, np.ndarray) or not total.flags.writeable
            or any(not isinstance(term, np.ndarray) or term.shape != total.shape
                   or np.result_type(total, term) != total.dtype for term in terms)):
        return add(total, *terms)
    for term in terms:
        total += term
    return total


add.into = add_into


def class_labels(scores, classes):
    """``classes`` indexed by the scores of a classifier: ``scores > 0`` for one
    column (two classes), the largest column otherwise (one-vs-rest)."""
    index = (scores > 0).astype(int) if scores.ndim == 1 else scores.argmax(axis=1)
    return classes[index]


def read_block(block, start, stop):
    """The block itself: what a task that only reads rows returns."""
    return block


def take_columns(block, *, index):
    """Columns ``index`` of the block (a new ndarray or CSR matrix)."""
    return block[:, index]


def weigh_columns(block, *, weights):
    """The block's columns times ``weights`` (a new ndarray in the dtype of
    their product)."""
    return block * weights


def centred_rows(block):
    """The block (float64) with every row centred on its own mean: the rows of
    a transposed matrix centred as the columns of the original are."""
    block = np.asarray(block, dtype=np.float64)
    return block - block.mean(axis=1, keepdims=True)


def transposed_pca_pass(block, start, stop, *, axes, scales):
    """One read of rows ``[start, stop)`` of ``A^T`` (columns of ``A``) for the
    transposed PCA: with ``C`` the block's rows centred on their means and
    ``Y = C axes^T / scales``, the rows ``[Y, mean]`` and the block's share
    ``C^T Y`` of ``A_c W`` (``W`` the stacked ``Y``)."""
    block = np.asarray(block, dtype=np.float64)
    mean = block.mean(axis=1, keepdims=True)
    centred = block - mean
    products = (centred @ axes.T) / scales
    return np.hstack([products, mean]), centred.T @ products


def append_ones(block):
    """``[block 1]``, in the block's kind (ndarray or CSR) and dtype."""
    ones = np.ones((block.shape[0], 1), dtype=block.dtype)
    if scipy.sparse.issparse(block):
        return scipy.sparse.hstack([block, ones], format="csr")
    return np.hstack([block, ones])


def project_block(block, start, stop, *, seed, stream, n_components):
    """``block @ R / sqrt(m)`` with ``R`` (d x m) regenerated tile by tile over the
    feature index, so that at most one tile of ``R`` is in memory at a time. A
    block of another library is projected in its namespace, the tiles drawn on
    the host (the same ``R`` as for numpy) and moved by ``xp.asarray``; the
    projection stays an array of that library."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        out = xp.zeros((rows.shape[0], n_components), dtype=xp.float64, device=rows.device)
        for lo in range(0, rows.shape[1], TILE):
            hi = min(lo + TILE, rows.shape[1])
            out += rows[:, lo:hi] @ like(rows, gaussian_tile(seed, stream, lo, hi,
                                                             n_components))
        return out / float(np.sqrt(n_components))
    if scipy.sparse.issparse(block):
        block = scipy.sparse.csc_matrix(block)
    n_features = block.shape[1]
    out = np.zeros((block.shape[0], n_components))
    for lo in range(0, n_features, TILE):
        hi = min(lo + TILE, n_features)
        out += rows_times(block[:, lo:hi], gaussian_tile(seed, stream, lo, hi, n_components))
    out /= np.sqrt(n_components)
    return out


# Bytes of Gaussian tiles a process keeps for the blocks it projects next: the
# whole R of d = 24,000 features and m = 320 columns. Regenerating R for every
# block costs as much as the block's product with it.
TILE_CACHE_BYTES = 64 * 2 ** 20
_TILES = OrderedDict()   # (seed, stream, lo, hi, columns) -> read-only tile, oldest first
_TILES_LOCK = threading.Lock()


def gaussian_tile(seed, stream, lo, hi, n_columns):
    """Rows ``[lo, hi)`` of :func:`~dasketch.kernels.embeddings.gaussian_rows`,
    kept (read-only) for the next blocks of this process while the kept tiles
    take at most :data:`TILE_CACHE_BYTES`, least recently used out first: the
    same values as drawn anew, so results do not depend on what was kept.
    ``functools.lru_cache`` bounds a count of entries, not their bytes, hence
    this small cache."""
    key = (seed, stream, lo, hi, n_columns)
    with _TILES_LOCK:
        tile = _TILES.get(key)
        if tile is not None:
            _TILES.move_to_end(key)
            return tile
    tile = gaussian_rows(seed, stream, lo, hi, n_columns)
    if tile.nbytes > TILE_CACHE_BYTES:
        return tile
    tile.flags.writeable = False
    with _TILES_LOCK:
        _TILES[key] = tile
        kept = sum(t.nbytes for t in _TILES.values())
        while kept > TILE_CACHE_BYTES:
            kept -= _TILES.popitem(last=False)[1].nbytes
    return tile


def finite_rows(out, start, stop):
    """``out``, the result of rows ``[start, stop)`` of ``X``, or a ``ValueError``
    naming those rows when it is not finite (NaN or Inf in ``X`` always reaches
    a product with it)."""
    if not np.all(np.isfinite(out)):
        raise ValueError(f"X contains NaN or Inf in rows [{start}, {stop}) (or the result "
                         "overflows); only finite values are accepted")
    return out


def matvec_block(block, start, stop, *, w):
    """``block @ w`` as float64 ``(rows, k)`` on the host, checked by
    :func:`finite_rows`."""
    product = rows_product(block, w)
    return finite_rows(product.reshape(stop - start, -1),
                       start, stop)


def _handed_back(xp, out, dtype, on_host):
    """``out`` of a namespace ``xp`` in the numpy ``dtype``'s standard dtype,
    copied to the host when ``on_host``."""
    out = xp.astype(out, getattr(xp, np.dtype(dtype).name), copy=False)
    return to_host(out) if on_host else out


def affine_block(block, start, stop, *, matrix, offset, dtype, on_host=True):
    """``block @ matrix + offset`` in ``dtype``, checked by :func:`finite_rows`. A
    block of another array library is computed in its namespace (float64) and
    handed back on the host, or, with ``on_host=False``, left there."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        out = rows @ like(rows, matrix) + like(rows, offset)
        if not bool(xp.all(xp.isfinite(out))):
            finite_rows(to_host(out), start, stop)
        return _handed_back(xp, out, dtype, on_host)
    out = finite_rows(np.asarray(rows_times(block, matrix)) + offset, start, stop)
    return out.astype(dtype, copy=False)


def squared_norms_block(block, start, stop, *, axes_t, shift):
    """``||block v_j - shift_j||^2`` for the columns ``v_j`` of ``axes_t``; a block
    of another array library sums them in its namespace, handed back on the host."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        projected = rows @ like(rows, axes_t) - like(rows, shift)
        return to_host(xp.sum(projected * projected, axis=0))
    projected = np.asarray(rows_times(block, axes_t), dtype=np.float64)
    projected -= shift
    return np.einsum("ij,ij->j", projected, projected)


def gaussian_log_likelihood_block(block, start, stop, *, mean, precision, constant,
                                  on_host=True):
    """Log-density of each row under ``N(mean, precision^{-1})`` (``precision``
    None: ``-inf``), shape ``(rows,)``; NaN or Inf in the block is a
    ``ValueError`` naming its rows. A block of another array library is computed
    in its namespace, handed back as :func:`affine_block` does."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        if not bool(xp.all(xp.isfinite(rows))):
            check_finite_rows(to_host(rows), start)
        if precision is None:
            return _handed_back(xp, xp.full((stop - start,), -xp.inf), np.float64, on_host)
        centred = rows - like(rows, mean)
        out = -0.5 * xp.sum((centred @ like(rows, precision)) * centred, axis=1) + float(constant)
        return _handed_back(xp, out, np.float64, on_host)
    check_finite_rows(block, start)  # names the rows of X, never the result
    if precision is None:
        return np.full(stop - start, -np.inf)
    dense = block.toarray() if scipy.sparse.issparse(block) else np.asarray(block)
    centred = dense - mean
    return -0.5 * np.einsum("ij,ij->i", centred @ precision, centred) + constant


def power_of_two_rows(block, *, exponent):
    """``block * 2**-exponent`` in float64
    (:func:`~dasketch.kernels.sketch_scaling.divide_by_power_of_two`); a block of
    another array library is scaled in its namespace, exactly alike."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        return times_power_of_two(xp, rows, -exponent)
    return divide_by_power_of_two(block, exponent)


def rmatvec_block(block, start, stop, v):
    """``block^T v`` in float64 for the block's piece ``v`` of a row-aligned array
    (a block of another array library: in its namespace, handed back on the host)."""
    if not is_numpy_block(block):
        return transpose_product(block, np.asarray(v, dtype=np.float64))
    product = rows_transpose_times(block, np.asarray(v, dtype=np.float64))
    return np.asarray(product, dtype=np.float64)


def gather_block(block, start, stop, rows):
    """Rows ``rows`` (global indices inside ``[start, stop)``) of the block, as a
    float64 ndarray (a copy: integer indexing never returns a view)."""
    out = block[np.asarray(rows) - start]
    out = out.toarray() if scipy.sparse.issparse(out) else np.asarray(out)
    return out.astype(np.float64, copy=False)


def leverage_block(block, start, stop, *, M, p, exact):
    """Leverage estimates of the block's rows from ``Z = block @ M`` (``M = R^{-1} G``,
    Yang, Chow, Re, Mahoney, JMLR 2018, Algorithm 1 step 2): ``||Z_i||_2^2`` (over
    ``r`` when estimated) for p = 2, ``||Z_i||_1`` exactly or the median of
    ``|Z_i|`` (Cauchy ``G``) for p = 1; shape ``(rows, 1)``."""
    Z = np.asarray(rows_times(block, M), dtype=np.float64)
    if p == 2:
        out = np.einsum("ij,ij->i", Z, Z)
        if not exact:
            out /= M.shape[1]
    elif exact:
        out = np.abs(Z).sum(axis=1)
    else:
        out = np.median(np.abs(Z), axis=1)
    return out.reshape(-1, 1)


def sketch_block(block, start, stop, *, update, failure_probability, seed, **params):
    """The Frequent Directions sketch of the block's rows: by the randomized update
    (:func:`~dasketch.kernels.sparse_fd.sketch_rows_randomized`) or an exact one
    (:func:`~dasketch.kernels.frequent_directions.sketch_rows`). A block of
    another array library than numpy (:mod:`.array_libraries`) is sketched by the
    exact update in its own namespace
    (:func:`~dasketch.kernels.namespace_fd.sketch_dense_rows`), the sketch handed
    back on the host."""
    if not is_numpy_block(block):
        if update == "randomized":
            raise TypeError(f"the randomized update sketches numpy blocks only, got a "
                            f"block of type {type(block).__name__}")
        return sketch_dense_rows(block, row_offset=start, update=update,
                                 xp=block_namespace(block), to_host=to_host, **params)
    if update == "randomized":
        return sketch_rows_randomized(block, row_offset=start, seed=seed,
                                      failure_probability=failure_probability, **params)
    return sketch_rows(block, row_offset=start, update=update, **params)


def merge_all_sketches(*sketches):
    """One sketch of the rows of all ``sketches``."""
    return merge_sketches(sketches)


def summarise_block(block, start, stop, *, sketch_size, method, alpha0, center):
    """The exact Gram summary of the block's dense rows
    (:func:`~dasketch.kernels.gram_sketch.summarise_rows`); a block of another
    array library than numpy computes its Gram in its own namespace, the summary
    handed back on the host."""
    params = dict(method=method, alpha0=alpha0, center=center, row_offset=start)
    if not is_numpy_block(block):
        params.update(xp=block_namespace(block), to_host=to_host)
    return summarise_rows(block, sketch_size, **params)


def merge_all_summaries(*parts):
    """One Gram summary (or sketch) of the rows of all ``parts``."""
    return merge_summaries(parts)


def resized_sketch(sketch, sketch_size):
    """``sketch`` shrunk to ``sketch_size`` (see ``Sketch.resize``)."""
    return sketch.resize(sketch_size)


def gram_block(block, start, stop, *, seed, n_vectors):
    """``block^T (block Omega)`` for the ``d x n_vectors`` Gaussian ``Omega`` of
    ``seed`` (stream 1); a block of another array library computes it in its own
    namespace (float64), the product handed back on the host."""
    omega = gaussian_rows(seed, 1, 0, block.shape[1], n_vectors)
    if not is_numpy_block(block):
        rows = float_rows(block)[1]
        return to_host(rows.T @ (rows @ like(rows, omega)))
    return np.asarray(rows_transpose_times(block, rows_times(block, omega)))
