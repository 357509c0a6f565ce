"""A sparse embedding of dense rows on any array library.

The rows stay in their own array namespace ``xp`` (an implementation of the
Python array API standard: numpy, CuPy through ``array_api_compat``, ...); only
the nonzeros of the embedding (:func:`~dasketch.kernels.embeddings.embedding_entries`,
drawn on the host from the same seeds as the numpy path) travel to it. The
standard has neither sparse matrices nor a scatter-add, so ``S`` is formed as
dense tiles of columns on the device, each from comparisons of its bucket
indices with the row indices of ``S``, and multiplied by the rows it covers:
``O(s b d)`` operations in matrix products instead of the ``O(k b d)`` of a
sparse product (Clarkson and Woodruff, STOC 2013; Nelson and Nguyen, FOCS 2013),
the form in which an accelerator multiplies fastest. The result equals the numpy
path's ``S @ rows`` to rounding (the same terms, summed in another order).
"""

from __future__ import annotations

#: Values of one dense tile of ``S`` (128 MiB of float64).
EMBEDDING_TILE_VALUES = 2 ** 24


def embed_dense_rows(rows, buckets, values, sketch_size, *, xp,
                     tile_values=EMBEDDING_TILE_VALUES):
    """``S @ rows`` (float64, ``sketch_size x d``, in ``xp``) for the embedding
    ``S`` whose column ``i`` holds ``values[i, j]`` in row ``buckets[i, j]``.

    Parameters
    ----------
    rows : array of shape (b, d)
        Real rows of the namespace ``xp``, on its device ``rows.device``, where
        the result is computed.
    buckets, values : numpy.ndarray of shape (b, k)
        The nonzeros of ``S`` (see
        :func:`~dasketch.kernels.embeddings.embedding_entries`).
    sketch_size : int
    xp : array namespace
    tile_values : int
        Values of a dense tile of ``S``: ``tile_values // sketch_size`` columns.

    Returns
    -------
    array of shape (sketch_size, d)
    """
    n_rows, d = rows.shape
    rows = xp.astype(rows, xp.float64, copy=False)
    device = rows.device
    out = xp.zeros((sketch_size, d), dtype=xp.float64, device=device)
    index = xp.reshape(xp.arange(sketch_size, dtype=xp.int64, device=device), (sketch_size, 1))
    step = max(1, tile_values // max(sketch_size, 1))
    for lo in range(0, n_rows, step):
        hi = min(lo + step, n_rows)
        tile = xp.zeros((sketch_size, hi - lo), dtype=xp.float64, device=device)
        for j in range(buckets.shape[1]):
            hits = index == xp.reshape(xp.asarray(buckets[lo:hi, j], device=device),
                                       (1, hi - lo))
            entries = xp.reshape(xp.asarray(values[lo:hi, j], device=device), (1, hi - lo))
            tile = tile + xp.astype(hits, xp.float64) * entries
        out = out + tile @ rows[lo:hi, :]
    return out
