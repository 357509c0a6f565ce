"""Blocked operators: ``X R`` for a Gaussian ``R``, ``X w``, ``X^T v``, sparse
embeddings ``S X`` and row gathering, each one pass over the row blocks through
:func:`~dasketch._blocks.mapping.map_rows` or
:func:`~dasketch._blocks.mapping.map_reduce` (tasks read zarr rows themselves).
Their block functions live in :mod:`dasketch._blocks.block_functions`."""

from __future__ import annotations

from functools import partial

import numpy as np

from dasketch._blocks import store_watch
from dasketch._blocks.block_functions import (
    add,
    embed_block,
    gather_block,
    matvec_block,
    project_block,
    rmatvec_block,
)
from dasketch._blocks.mapping import block_tasks, map_reduce, map_rows
from dasketch._blocks.row_blocks import as_row_aligned, delayed_row_chunks
from dasketch._blocks.scheduler import compute


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
    func = partial(project_block, seed=int(seed), stream=int(stream),
                   n_components=int(n_components))
    return map_rows(blocks, func, n_columns=int(n_components), keeps_block=False)


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
    return map_rows(blocks, matvec_block, n_columns=1 if w.ndim == 1 else w.shape[1],
                    shared={"w": w}, keeps_block=False)


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
    return map_reduce(blocks, rmatvec_block, add, as_row_aligned(v, blocks),
                      split_every=split_every, keeps_block=False)


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
    aligned = [as_row_aligned(e, blocks, name="extra") for e in extra]
    return map_reduce(blocks, partial(embed_block, seed=int(seed), specs=specs), add,
                      *aligned, split_every=split_every, keeps_block=False)


def gather_rows(blocks, rows, *, client=None):
    """Rows ``rows`` (sorted global indices) of the blocked matrix, as float64 ndarray.

    Each block with drawn rows returns only those, in one pass over the blocks
    in order (no random access to the storage); a block without drawn rows is
    not read. So this pass is :func:`~dasketch._blocks.mapping.block_tasks`,
    the primitive under :func:`~dasketch._blocks.map_rows` and
    :func:`~dasketch._blocks.map_reduce`, over the chosen blocks only: neither
    fits, as ``map_rows`` returns rows aligned with every block (a block gives
    its drawn rows, fewer) and ``map_reduce`` reads every block and would carry
    the rows through a tree of concatenations instead of sending each block's
    rows to the client once.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (np.any(np.diff(rows) < 0) or rows[0] < 0
                      or rows[-1] >= blocks.n_rows):
        raise ValueError("rows must be sorted indices in [0, n_rows)")
    cuts = np.searchsorted(rows, np.asarray(blocks.offsets))
    drawn = [(rows[lo:hi],) for lo, hi in zip(cuts[:-1], cuts[1:])]
    which = [i for i, (piece,) in enumerate(drawn) if piece.size]
    if not which:
        return np.zeros((0, blocks.n_features))
    parts = block_tasks(blocks, gather_block, drawn, keeps_block=False, which=which)
    return np.concatenate(compute(*parts, client=client), axis=0)


def iter_row_blocks(blocks, *aligned, client=None):
    """Walk the blocks in order, computing one block at a time.

    Memory stays bounded by one block (plus its rows of the ``aligned`` arrays),
    whatever the number of rows: the online learners of :mod:`dasketch.linear_model.rfd_son`
    consume a larger-than-memory matrix this way. A remote store is listed
    again once, after the last block (see :func:`~dasketch._blocks.compute`).

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
    pieces = [delayed_row_chunks(as_row_aligned(a, blocks, name=f"aligned[{i}]"))
              for i, a in enumerate(aligned)]
    checks = store_watch.stores_read_by(blocks.blocks + tuple(p[0] for p in pieces))
    for i, (start, stop) in enumerate(blocks.ranges()):
        objs = (blocks.blocks[i],) + tuple(p[i] for p in pieces)
        # no bar per block: a walk's progress is its caller's (RFD-SON's bar over the rows)
        yield (start, stop) + tuple(compute(*objs, client=client, progress=False,
                                            check_stores=False))
    store_watch.check_unchanged(checks)  # once, after the last block


