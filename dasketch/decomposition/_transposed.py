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
2. One more blocked pass, one read of every block of columns, gives the rows
   of ``W = X_c^T U S^{-1}`` for the right singular vectors ``U`` of ``B`` and
   its singular values ``S`` (approximate left singular vectors of ``X_c``:
   ``W`` approximates its top right singular vectors, its columns near
   orthonormal), the column means, and ``X_c W``, summed over the blocks.
   With ``W = Q R`` (QR on the client), ``X_c Q = (X_c W) R^{-1}``, and its
   SVD ``P S' T^T`` gives the axes ``(Q T)^T``, orthonormal, and the variance
   of the data along each, ``S'_i^2 / (n - 1)``, measured (Rayleigh-Ritz in
   ``span(W)``: the best axes of that subspace, in decreasing variance).

The plan is chosen by cost (:func:`transposed_store`): two passes that decode
every chunk once, as the row plan of a store chunked by rows, against the two
passes of column reads, which decode it ``amplification`` times each; it runs
from :data:`TRANSPOSED_AMPLIFICATION`.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import scipy.linalg

from dasketch._blocks import (
    add,
    block_tasks,
    centred_rows,
    compute,
    dense_block_rows,
    open_store_array,
    plan_column_reads,
    sketch_blocks,
    stored_array,
    transformed_blocks,
    transposed_pca_pass,
    tree_reduce,
)

logger = logging.getLogger("dasketch")

# Column reads decoding every chunk this many times a pass or more cost more than
# the three single-decode passes of the transposed plan.
TRANSPOSED_AMPLIFICATION = 1.5
# Directions of the sketch whose singular value is at most this fraction of the
# largest are numerically zero and left out.
KEPT_SINGULAR_RATIO = 1e-10
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
        try:  # a group (AnnData, sparse rows) or no store: the row plans decide
            store = open_store_array(store, name=name)
        except (ValueError, FileNotFoundError):
            return None
    if store.ndim != 2 or 0 in store.shape or store.dtype.kind not in "biuf":
        return None
    n, d = (int(v) for v in store.shape)
    rows = dense_block_rows(block_rows, (n, d))
    offsets = tuple(range(0, n, rows)) + (n,)
    plan = plan_column_reads((n, d), tuple(store.chunks), store.dtype.itemsize, offsets, name)
    if plan is None or plan.amplification < TRANSPOSED_AMPLIFICATION:
        return None
    logger.info("%s: column reads would decode every chunk %.1f times a pass; the PCA "
                "sketches the transpose instead, each chunk decoded once a pass",
                name, plan.amplification)
    return store


def fit_transposed(blocks, sketch_size, *, method="rfd", split_every=None, random_state=None):
    """The sketch of ``X_c^T`` and the measured axes of ``X``, from ``blocks``,
    the :class:`~dasketch._blocks.RowBlocks` of ``X^T`` (e.g.
    :func:`~dasketch._blocks.transposed_store.transposed_store_blocks`).

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
    scores : ndarray of shape (n, r)
        ``X_c axes^T``, the projections of the centred rows, which the last
        pass gives as ``(X_c Q) T``.
    """
    n = blocks.n_features
    centred = transformed_blocks(blocks, centred_rows, n)
    sk = sketch_blocks(centred, sketch_size, method=method, center=False,
                       split_every=split_every, random_state=random_state)
    s = sk.singular_values()
    keep = s > s[:1].max(initial=0.0) * KEPT_SINGULAR_RATIO
    directions, s = sk.components()[keep], s[keep]
    parts = block_tasks(blocks, transposed_pca_pass, shared={"axes": directions, "scales": s},
                        keeps_block=False)
    total = tree_reduce([part[1] for part in parts], add, split_every)
    (rows, projected) = compute([part[0] for part in parts], total)
    rows = np.vstack(rows)
    mean = rows[:, -1]
    basis, triangle = scipy.linalg.qr(rows[:, :-1], mode="economic")
    # X_c Q = (X_c W) R^{-1}, W = Q R: W's columns are near-orthonormal (scaled by
    # the sketch's singular values), so R is well conditioned.
    projected = scipy.linalg.solve_triangular(triangle, projected.T, trans="T").T
    left, singular, rotation_t = scipy.linalg.svd(projected, full_matrices=False)
    axes = (basis @ rotation_t.T).T
    return sk, axes, singular ** 2 / max(n - 1, 1), mean, left * singular
