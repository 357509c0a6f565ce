"""PCA of a zarr store chunked along its columns, from a sketch of its transpose.

A store chunked along columns (a climate field stored for time series: each
chunk all the times of a few grid points) holds whole rows of ``X^T``. Reading
rows of ``X`` across its column chunks (the "column reads" plan,
:mod:`dasketch._blocks.column_reads`) decodes a chunk once for every block of
rows that needs some of its rows; this plan decodes every chunk once a pass:

1. Sketch ``X_c^T``, the transpose with every row (a column of ``X``) centred
   on its own mean in the task that reads it. ``B^T B`` estimates the ``n x n``
   Gram ``X_c X_c^T``, whose nonzero eigenvalues are those of ``X_c^T X_c``:
   every covariance eigenvalue lies within ``error_bound / (n - 1)`` of
   ``(s_i^2 + alpha) / (n - 1)`` (``s_i`` the singular values of ``B``), the
   statement the row plan makes (Weyl's inequality), certified or with the
   sketch's probability.
2. One blocked pass gives ``W = X_c^T U`` for the right singular vectors ``U``
   of ``B`` (approximate left singular vectors of ``X_c``: ``W`` spans the
   approximate top right singular vectors) and the column means.
3. With ``Q`` an orthonormal basis of ``W``, one more pass gives ``G = X_c Q``;
   the SVD ``G = P S R^T`` gives the axes ``(Q R)^T``, orthonormal, and the
   variance of the data along each, ``S_i^2 / (n - 1)``, measured (Rayleigh-Ritz
   in ``span(W)``: the best axes of that subspace, in decreasing variance).

The plan is chosen by cost (:func:`transposed_store`): three passes that decode
every chunk once against the two passes of column reads, which decode it
``amplification`` times each, so it runs from :data:`TRANSPOSED_AMPLIFICATION`.
"""

from __future__ import annotations

import logging
import os

import scipy.linalg

from dasketch._blocks import add, as_row_aligned, compute, map_reduce, map_rows
from dasketch._blocks.block_functions import (
    centred_products_and_means,
    centred_rows,
    centred_transposed_product,
)
from dasketch._blocks.column_reads import plan_column_reads
from dasketch._blocks.row_blocks import _block_rows, _transformed
from dasketch._blocks.transposed_store import stored_array, transposed_store_blocks
from dasketch.io import open_store_array
from dasketch.sketching import sketch

logger = logging.getLogger("dasketch")

# Column reads decoding every chunk this many times a pass or more cost more than
# the three single-decode passes of the transposed plan.
TRANSPOSED_AMPLIFICATION = 1.5
# Most float64 values of the d x r bases the client holds (512 MiB).
TRANSPOSED_BASIS_VALUES = 2 ** 26


def transposed_store(X, block_rows=None, name="X"):
    """The 2-D zarr array behind ``X`` (a path or URL, ``zarr.Array`` or a Dask
    array reading one) when it is chunked along columns and the transposed plan
    costs less than column reads (their amplification at least
    :data:`TRANSPOSED_AMPLIFICATION`), else None. The caller also checks that
    the ``d x l`` bases fit :data:`TRANSPOSED_BASIS_VALUES`."""
    store = stored_array(X)
    if store is None:
        return None
    if isinstance(store, (str, os.PathLike)):
        store = open_store_array(store, name=name)
    if store.ndim != 2 or 0 in store.shape or store.dtype.kind not in "biuf":
        return None
    n, d = (int(v) for v in store.shape)
    rows = _block_rows(block_rows, (n, d))
    offsets = tuple(range(0, n, rows)) + (n,)
    plan = plan_column_reads((n, d), tuple(store.chunks), store.dtype.itemsize, offsets, name)
    if plan is None or plan.amplification < TRANSPOSED_AMPLIFICATION:
        return None
    logger.info("%s: column reads would decode every chunk %.1f times a pass; the PCA "
                "sketches the transpose instead, each chunk decoded once a pass",
                name, plan.amplification)
    return store


def fit_transposed(store, sketch_size, *, method="rfd", split_every=None, block_rows=None,
                   random_state=None, name="X"):
    """The sketch of ``X_c^T`` and the measured axes of the store ``store``.

    Returns
    -------
    sketch : dasketch.Sketch
        Of ``X_c^T`` (``n_rows`` the columns of ``X``, ``n_features`` its rows).
    axes : ndarray of shape (r, d)
        Orthonormal, by decreasing variance.
    variances : ndarray of shape (r,)
        ``||X_c v||^2 / (n - 1)`` of every axis ``v``.
    mean : ndarray of shape (d,)
        The column means of ``X``.
    """
    blocks = transposed_store_blocks(store, block_rows=block_rows, name=name)
    n = blocks.n_features
    centred = _transformed(blocks, centred_rows, n)
    sk = sketch(centred, sketch_size, method=method, center=False, split_every=split_every,
                random_state=random_state)
    directions = sk.components()
    r = directions.shape[0]
    products = map_rows(blocks, centred_products_and_means, n_columns=r + 1,
                        shared={"axes": directions}, keeps_block=False)
    (products,) = compute(products)
    mean = products[:, -1]
    basis = scipy.linalg.qr(products[:, :-1], mode="economic")[0] if r else products[:, :0]
    gram = map_reduce(blocks, centred_transposed_product, add,
                      as_row_aligned(basis, blocks), split_every=split_every,
                      keeps_block=False)
    (projected,) = compute(gram)
    _, s, rotation_t = scipy.linalg.svd(projected, full_matrices=False)
    axes = (basis @ rotation_t.T).T
    return sk, axes, s ** 2 / max(n - 1, 1), mean
