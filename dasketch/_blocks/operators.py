"""Blocked operators: ``X R`` for a Gaussian ``R``, ``X w``, ``X^T v``, sparse
embeddings ``S X`` and row gathering, each one pass over the row blocks."""

from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np
import scipy.sparse

from dasketch._blocks.row_blocks import as_row_aligned
from dasketch._blocks.scheduler import compute
from dasketch._blocks.tasks import map_rows, task, tree_reduce, add
from dasketch.kernels.embeddings import TILE, gaussian_rows, sparse_embedding_block

def _project_block(block, start, stop, *, seed, stream, n_components):
    """``block @ R / sqrt(m)`` with ``R`` (d x m) regenerated tile by tile over the
    feature index, so that at most one tile of ``R`` is in memory at a time."""

    if scipy.sparse.issparse(block):
        block = scipy.sparse.csc_matrix(block)
    n_features = block.shape[1]
    out = np.zeros((block.shape[0], n_components))
    for lo in range(0, n_features, TILE):
        hi = min(lo + TILE, n_features)
        out += block[:, lo:hi] @ gaussian_rows(seed, stream, lo, hi, n_components)
    out /= np.sqrt(n_components)
    return out


def random_projection(blocks, n_components, seed, *, stream=0):
    """Lazy ``X R / sqrt(m)`` (n x m, float64) for a Gaussian ``R`` (d x m).

    ``R`` is a function of ``(seed, stream, feature index)`` (see
    :func:`dasketch.kernels.embeddings.gaussian_rows`): every block task regenerates
    it tile by tile, it is never materialised whole on the client nor shipped to
    workers, and the result does not depend on how ``X`` is chunked.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, random_projection
    >>> from dasketch.kernels.embeddings import gaussian_rows
    >>> X = np.random.default_rng(0).standard_normal((100, 30))
    >>> P = random_projection(as_row_blocks(X, block_rows=16), 5, seed=3)
    >>> R = gaussian_rows(3, 0, 0, 30, 5)
    >>> bool(np.allclose(P.compute(), X @ R / np.sqrt(5)))
    True
    """
    func = partial(_project_block, seed=int(seed), stream=int(stream),
                   n_components=int(n_components))
    return map_rows(blocks, func, int(n_components), dtype=np.float64)


def _matvec_block(block, start, stop, w):
    out = np.asarray(block @ w, dtype=np.float64).reshape(stop - start, -1)
    if not np.all(np.isfinite(out)):  # NaN or Inf in X always reaches X w
        raise ValueError(f"X contains NaN or Inf in rows [{start}, {stop}) (or X w "
                         "overflows); only finite values are accepted")
    return out


def matvec(blocks, w):
    """Lazy ``X w`` as an ``(n, k)`` Dask array chunked like ``blocks`` (``w`` is
    ``(d,)`` or ``(d, k)``; a 1-D ``w`` gives ``k = 1``). A block whose product
    is not finite (NaN or Inf in its rows of ``X``) raises a ``ValueError``
    naming its rows when computed.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, matvec
    >>> X = np.arange(12.0).reshape(4, 3)
    >>> matvec(as_row_blocks(X, block_rows=3), np.ones(3)).compute().ravel()
    array([ 3., 12., 21., 30.])
    """
    w = np.asarray(w, dtype=np.float64)
    k = 1 if w.ndim == 1 else w.shape[1]
    mapped = task(_matvec_block)
    shared = dask.delayed(w, pure=True)  # one key, not one copy per task
    pieces = [da.from_delayed(mapped(block, start, stop, shared), shape=(stop - start, k),
                              dtype=np.float64)
              for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def _rmatvec_block(block, v):
    out = block.T @ np.asarray(v, dtype=np.float64)
    return np.asarray(out, dtype=np.float64)


def rmatvec(blocks, v, *, split_every=None):
    """Delayed ``X^T v`` (``v`` of shape ``(n,)`` or ``(n, k)``, numpy or Dask),
    summed over row blocks by a deterministic tree.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, rmatvec
    >>> X = np.arange(12.0).reshape(4, 3)
    >>> rmatvec(as_row_blocks(X, block_rows=3), np.ones(4)).compute()
    array([18., 22., 26.])
    """
    pieces = as_row_aligned(v, blocks).to_delayed(optimize_graph=True).ravel()
    mapped = task(_rmatvec_block)
    parts = [mapped(block, piece) for block, piece in zip(blocks.blocks, pieces)]
    return tree_reduce(parts, add, split_every)


def _embed_block(block, start, stop, *pieces, seed, specs):
    """``[S_1 X_blk; S_2 X_blk; ...]`` (float64, dense) for the embeddings ``specs``
    (tuples ``(stream, sketch_size, embedding, nnz_per_column)``); extra row-aligned
    ``pieces`` (vectors or matrices) are appended to the block as columns."""

    columns = [np.asarray(p, dtype=np.float64).reshape(stop - start, -1) for p in pieces]
    out = []
    for stream, size, embedding, k in specs:
        S = sparse_embedding_block(seed, stream, start, stop, size, embedding=embedding,
                                   nnz_per_column=k)
        SX = S @ block
        SX = SX.toarray() if scipy.sparse.issparse(SX) else np.asarray(SX)
        out.append(np.hstack([SX.astype(np.float64, copy=False)] + [S @ c for c in columns]))
    return np.vstack(out)


def sparse_embed_streams(blocks, specs, seed, *, extra=(), split_every=None):
    """Delayed ``[S_1 [X E]; S_2 [X E]; ...]`` in one pass over the blocks.

    ``specs`` lists independent sparse embeddings ``(stream, sketch_size, embedding,
    nnz_per_column)`` (see
    :func:`dasketch.kernels.embeddings.sparse_embedding_block`); ``extra`` are
    row-aligned vectors or matrices ``E`` (numpy or Dask, e.g. the targets ``b``)
    appended as columns. Each block contributes ``S_blk [X_blk E_blk]`` from its
    global row indices; the contributions are tree-summed, so the result does not
    depend on the chunking of ``X`` nor on the scheduler.
    """
    specs = tuple((int(st), int(s), str(kd), int(k)) for st, s, kd, k in specs)
    func = partial(_embed_block, seed=int(seed), specs=specs)
    mapped = task(func)
    if extra:
        aligned = [as_row_aligned(e, blocks, name="extra") for e in extra]
        columns = list(zip(*(a.to_delayed(optimize_graph=True).ravel() for a in aligned)))
    else:
        columns = [()] * len(blocks.blocks)
    parts = [mapped(block, start, stop, *cols)
             for block, (start, stop), cols in zip(blocks.blocks, blocks.ranges(), columns)]
    return tree_reduce(parts, add, split_every)


def _gather_block(block, start, stop, rows):
    out = block[np.asarray(rows) - start]
    out = out.toarray() if scipy.sparse.issparse(out) else np.asarray(out)
    return out.astype(np.float64, copy=False)


def gather_rows(blocks, rows, *, client=None):
    """Rows ``rows`` (sorted global indices) of the blocked matrix, as float64 ndarray.

    Each block returns only the rows drawn in its range, in one pass over the
    blocks in order: no random access to the storage.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (np.any(np.diff(rows) < 0) or rows[0] < 0
                      or rows[-1] >= blocks.n_rows):
        raise ValueError("rows must be sorted indices in [0, n_rows)")
    cuts = np.searchsorted(rows, np.asarray(blocks.offsets))
    mapped = task(_gather_block)
    parts = [mapped(block, start, stop, rows[lo:hi])
             for block, (start, stop), lo, hi in zip(blocks.blocks, blocks.ranges(),
                                                     cuts[:-1], cuts[1:]) if hi > lo]
    if not parts:
        return np.zeros((0, blocks.n_features))
    return np.concatenate(compute(*parts, client=client), axis=0)


def iter_row_blocks(blocks, *aligned, client=None):
    """Walk the blocks in order, computing one block at a time.

    Memory stays bounded by one block (plus its rows of the ``aligned`` arrays),
    whatever the number of rows: the online learners of :mod:`dasketch.linear_model.rfd_son`
    consume a larger-than-memory matrix this way.

    Parameters
    ----------
    blocks : RowBlocks
    *aligned : array_like or dask.array.Array
        Arrays with one entry (or row) per row of ``blocks``, e.g. labels; each
        block comes with its matching piece.
    client : distributed.Client, optional

    Yields
    ------
    tuple
        ``(start, stop, block, *pieces)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, iter_row_blocks
    >>> blocks = as_row_blocks(np.arange(10.0).reshape(5, 2), block_rows=2)
    >>> [(start, stop, float(y.sum())) for start, stop, _, y in
    ...  iter_row_blocks(blocks, np.ones(5))]
    [(0, 2, 2.0), (2, 4, 2.0), (4, 5, 1.0)]
    """
    pieces = [as_row_aligned(a, blocks, name=f"aligned[{i}]").to_delayed(
        optimize_graph=True).ravel() for i, a in enumerate(aligned)]
    for i, (start, stop) in enumerate(blocks.ranges()):
        objs = (blocks.blocks[i],) + tuple(p[i] for p in pieces)
        yield (start, stop) + tuple(compute(*objs, client=client))


