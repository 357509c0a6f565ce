"""The public entry point :func:`sparse_embed`: ``S X`` for a sparse random
embedding ``S``, the block products tree-summed on Dask."""

from __future__ import annotations

import numbers

from dasketch._blocks import as_row_blocks, compute, sparse_embed_streams
from dasketch.kernels.embeddings import EMBEDDINGS, check_embedding, resolve_seed
from dasketch.utils._sklearn_compat import StrOptions, validate_parameter_constraints
from dasketch.utils.params import PASS_CONSTRAINTS, POSITIVE_INT, RANDOM_STATE, Interval

_EMBED_CONSTRAINTS = {
    **PASS_CONSTRAINTS,
    "sketch_size": [POSITIVE_INT],
    "embedding": [StrOptions(set(EMBEDDINGS))],
    "nnz_per_column": [POSITIVE_INT, None],
    "random_state": RANDOM_STATE,
    "stream": [Interval(numbers.Integral, 0, None, closed="left")],
}


def sparse_embed(X, sketch_size, *, embedding="osnap", nnz_per_column=None, random_state=None,
                 stream=0, split_every=None, client=None, block_rows=None, component=None,
                 storage_options=None):
    """Compute the small dense ``S X`` (``s x d``) for a sparse random embedding ``S``.

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
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        The distribution of ``S``.
    nnz_per_column : int, optional
        Nonzeros per column of ``S``: 1 for CountSketch and Cauchy; default
        ``min(4, sketch_size)`` for OSNAP.
    random_state : None, int or numpy.random.Generator, optional
        Seeds ``S``.
    stream : int, default 0
        Index of an independent stream of embeddings for the same seed.
    split_every : int, optional
        As for :func:`sketch`.
    client : distributed.Client, optional
        As for :func:`sketch`.
    block_rows : int, optional
        As for :func:`sketch`.
    component : str, optional
        As for :func:`sketch`.
    storage_options : dict, optional
        As for :func:`sketch`.

    Returns
    -------
    numpy.ndarray
        ``S X`` in float64, shape ``(sketch_size, d)``.

    See Also
    --------
    dasketch.linear_model.sketch_precondition : Precondition least squares with
        such an embedding.
    sketch : A deterministic sketch with a certified error bound.

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
    validate_parameter_constraints(_EMBED_CONSTRAINTS, locals(), caller_name="sparse_embed")
    if nnz_per_column is None:
        nnz_per_column = min(4, int(sketch_size)) if embedding == "osnap" else 1
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
