"""The public entry points :func:`sketch` and :func:`sparse_embed`: a whole
(possibly larger than memory) matrix sketched block by block on Dask."""

from __future__ import annotations

import numbers
from functools import partial

import numpy as np

from dasketch._blocks import as_row_blocks, compute, map_reduce, sparse_embed_streams
from dasketch._blocks.row_blocks import BLOCK_VALUES
from dasketch._blocks.tasks import check_split_every
from dasketch.kernels.frequent_directions import (
    UPDATES, check_sketch_parameters, merge_sketches, sketch_rows)

def _sketch_block(block, start, stop, **params):
    return sketch_rows(block, row_offset=start, **params)


def default_working_size(sketch_size, n_features):
    """Working sketch size of block sketches and inner merges: ``2 l`` while such a
    sketch stays under 32 MiB, else ``l``."""
    if 2 * sketch_size * n_features <= BLOCK_VALUES:
        return 2 * sketch_size
    return sketch_size


def sketch(X, sketch_size, *, method="rfd", alpha0=0.0, center=False, split_every=None,
           client=None, block_rows=None, update="auto", working_size=None,
           component=None, storage_options=None, progress=False):
    """Sketch the rows of a (possibly larger than memory) matrix with FD or RFD.

    Every block of rows is sketched on a worker and the block sketches are merged
    by a tree reduction of mergeable Frequent Directions sketches; only sketches
    (at most ``l x d``) travel, so memory stays flat in the number of rows.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        Rows are samples; a string or path is a zarr store or fsspec URL.
    sketch_size : int
        ``l >= 2``; the sketch keeps at most ``l - 1`` rows.
    method : {"rfd", "fd"}
        Robust Frequent Directions (Luo et al., JMLR 2019, Algorithm 2 and 5) or
        Frequent Directions (Liberty 2013; Ghashami et al. 2016).
    alpha0 : float
        Regularisation ``alpha0 >= 0`` added to the estimate of ``A^T A``.
    center : bool
        Sketch the column-centred data (covariance), with the parallel-variance
        correction at every merge.
    split_every : int, optional
        Fan-in of the merge tree (default 8).
    client : distributed.Client, optional
        Run on this client; default: the active scheduler (a ``distributed``
        client if one is set as default, else Dask's threads).
    block_rows : int, optional
        Rows per block (see :func:`as_row_blocks`).
    update : {"auto", "block", "buffered"}
        How a block is absorbed: one shrink of the whole block, the streaming
        Algorithm 5 with a buffer of ``2 l`` rows, or chosen by a cost model.
    working_size : int, optional
        Sketch size ``>= sketch_size`` of the block sketches and inner merges; the
        root is shrunk to ``sketch_size`` (:meth:`Sketch.resize`). Oversampled
        inner sketches lose less to the many shrinks of a tree, while every
        guarantee holds for the final size. Default :func:`default_working_size`.
    component, storage_options
        For zarr inputs.
    progress : bool
        Show a progress bar (see :func:`compute`).

    Returns
    -------
    Sketch
        With ``B``, ``alpha``, ``shrinkage``, ``error_bound``, ``covariance()``,
        ``solve()`` and ``merge()``; save it with :func:`dasketch.save_sketch`.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((1000, 20)) * 0.8 ** np.arange(20)
    >>> s = dasketch.sketch(X, 8)
    >>> s.B.shape
    (7, 20)
    >>> err = np.linalg.norm(X.T @ X - s.covariance(), 2)
    >>> bool(err <= s.error_bound * (1 + 1e-12))
    True
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}")
    split_every = check_split_every(split_every)
    blocks = as_row_blocks(X, block_rows=block_rows, component=component,
                           storage_options=storage_options)
    if working_size is None:
        working_size = default_working_size(sketch_size, blocks.n_features)
    elif not isinstance(working_size, numbers.Integral) or working_size < sketch_size:
        raise ValueError(f"working_size must be an integer >= sketch_size ({sketch_size}), "
                         f"got {working_size!r}")
    func = partial(_sketch_block, sketch_size=int(working_size), method=method,
                   alpha0=float(alpha0), center=bool(center), update=update)
    root = map_reduce(blocks, func, _merge_all, split_every=split_every)
    (result,) = compute(root, client=client, progress=progress)
    return result.resize(sketch_size)


def _merge_all(*sketches):
    return merge_sketches(sketches)


def sparse_embed(X, sketch_size, *, embedding="osnap", nnz_per_column=None, random_state=None,
                 stream=0, split_every=None, client=None, block_rows=None, component=None,
                 storage_options=None):
    """The small dense ``S X`` (``s x d``) for a sparse random embedding ``S``.

    ``S`` is CountSketch (Clarkson and Woodruff, STOC 2013), OSNAP with ``k``
    nonzeros per column (Nelson and Nguyen, FOCS 2013) or the sparse Cauchy
    transform (Meng and Mahoney, STOC 2013), the embeddings that precondition
    pwSGD (Yang, Chow, Re, Mahoney, JMLR 2018, Section 3). Column ``i`` of ``S``
    is drawn from ``(random_state, stream, i // TILE)``, so each block of rows
    builds only its own columns, the block products ``S_blk X_blk`` are
    tree-summed, and the result is the same for any chunking or scheduler.
    ``scipy.linalg.clarkson_woodruff_transform`` draws the same distribution for
    ``embedding="countsketch"`` but needs the whole matrix in memory and its result
    depends on the row count only through one global draw, so it cannot be
    computed block by block.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        Rows are samples; a string or path is a zarr store.
    sketch_size : int
        Number of rows ``s`` of ``S X``.
    embedding : {"osnap", "countsketch", "cauchy"}
    nnz_per_column : int, optional
        Nonzeros per column of ``S``: 1 for CountSketch and Cauchy; default
        ``min(4, sketch_size)`` for OSNAP.
    random_state : None, int or numpy random generator
    stream : int
        Index of an independent stream of embeddings for the same seed.
    split_every, client, block_rows, component, storage_options
        See :func:`sketch`.

    Returns
    -------
    numpy.ndarray
        ``S X`` in float64, shape ``(sketch_size, d)``.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((2000, 5))
    >>> SX = dasketch.sparse_embed(X, 40, random_state=0)
    >>> SX.shape
    (40, 5)
    >>> same = dasketch.sparse_embed(X, 40, random_state=0, block_rows=300)
    >>> bool(np.allclose(SX, same))
    True
    """
    from dasketch.kernels.embeddings import check_embedding, resolve_seed

    if nnz_per_column is None:
        nnz_per_column = min(4, int(sketch_size)) if embedding == "osnap" else 1
    if isinstance(sketch_size, (bool, np.bool_)) or not isinstance(
        sketch_size, numbers.Integral
    ) or sketch_size < 1:
        raise ValueError(f"sketch_size must be a positive integer, got {sketch_size!r}")
    check_embedding(embedding, nnz_per_column)
    if nnz_per_column > sketch_size:
        raise ValueError(f"nnz_per_column ({nnz_per_column}) must not exceed sketch_size "
                         f"({sketch_size})")
    blocks = as_row_blocks(X, block_rows=block_rows, component=component,
                           storage_options=storage_options)
    root = sparse_embed_streams(blocks, [(stream, sketch_size, embedding, nnz_per_column)],
                                resolve_seed(random_state), split_every=split_every)
    (result,) = compute(root, client=client)
    return result


