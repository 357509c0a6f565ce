"""What the estimators compute block by block for out-of-core ``X``:
``X @ matrix + offset`` (transform, predict), one pass of
:func:`~dasketch._blocks.map_rows` over a function of
:mod:`dasketch._blocks.block_functions` (so that workers never import
scikit-learn).
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks.block_functions import affine_block
from dasketch._blocks.mapping import map_rows


def affine_rows(blocks, matrix, offset, dtype, meta=None):
    """Lazy ``X @ matrix + offset`` over :class:`~dasketch._blocks.RowBlocks`, in
    ``dtype``; a block with NaN or Inf raises a ``ValueError`` naming its rows
    when computed (as ``fit`` does for out-of-core input). Blocks of another
    array library are computed in its namespace and their rows handed back as
    numpy, or, given ``meta`` (an empty array of that library, see
    :func:`~dasketch._blocks.map_rows`), left in that library.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks
    >>> blocks = as_row_blocks(np.arange(6.0).reshape(3, 2), block_rows=2)
    >>> affine_rows(blocks, np.ones((2, 1)), 0.5, np.float64).compute().ravel()
    array([1.5, 5.5, 9.5])
    """
    matrix = np.asarray(matrix)
    shared = {"matrix": matrix, "offset": offset, "dtype": np.dtype(dtype)}
    if meta is not None:
        shared["on_host"] = False
    return map_rows(blocks, affine_block, n_columns=matrix.shape[1], dtype=dtype,
                    shared=shared, keeps_block=False, meta=meta)

