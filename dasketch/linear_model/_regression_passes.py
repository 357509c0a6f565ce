"""The weighted sketch pass of pwSGD and sketch-preconditioned LSQR, and the
Gram pass that gives the exact singular values of the data.

One pass over the row blocks of ``B`` (through
:func:`~dasketch._blocks.map_reduce`) gives the sparse embeddings of the
weighted rows, ``S_j W^(1/p) [B E]`` for every embedding ``S_j`` of ``specs``
(``W = diag(w)`` the sample weights, ``E`` extra row-aligned columns such as the
targets or a column of ones), together with the weighted column sums
``w^T [B E]`` and ``sum_i w_i ||B_i||^2``: what weighted centring and the
accuracy bounds need, from the same read of every block. Weighted rows are
formed block by block in the task, never as a copy of ``B``. A block of
another array library than numpy is weighted, embedded and multiplied in its own
namespace (:func:`dasketch._blocks.float_rows`), the weights and the basis moved
to its device and the block's results handed back to the host. This module
imports numpy, scipy and the bridge only (workers unpickle its block functions).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import scipy.linalg
import scipy.linalg.blas
import scipy.sparse

from dasketch._blocks import (
    add,
    as_row_aligned,
    compute,
    embed_block,
    embed_weighted_dense,
    float_rows,
    is_numpy_block,
    like,
    map_reduce,
    to_host,
)
from dasketch.kernels.block_products import rows_times, rows_transpose_times


def scale_rows(block, scale):
    """``diag(scale) @ block`` for an ndarray (float64), a sparse block (CSR) or a
    block of another array library (float64, in its namespace)."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        return rows * xp.reshape(xp.asarray(scale, device=rows.device), (-1, 1))
    if scipy.sparse.issparse(block):
        return scipy.sparse.csr_matrix(scipy.sparse.diags(scale) @ block)
    return np.asarray(block, dtype=np.float64) * scale[:, None]


def row_power(weights, power):
    """``w^(1/p)``: the row scale under which ``sum_i w_i |r_i|^p`` is
    ``||W^(1/p) r||_p^p``."""
    return np.sqrt(weights) if power == 2 else weights ** (1.0 / power)


def _weighted_embed_block(block, start, stop, weights, extra, *, seed, specs, power):
    """``[S_1 W^(1/p) [B E]; ...; w^T [B E], sum_i w_i ||B_i||^2]`` for the block
    (float64, the last row holding the sums and, in its last entry, the squared
    weighted Frobenius norm; the sums row has one entry more than the others,
    the sketch rows are padded with a zero)."""
    w = np.asarray(weights, dtype=np.float64).ravel()
    E = np.asarray(extra, dtype=np.float64).reshape(stop - start, -1)
    scale = row_power(w, power)
    unit = bool(np.all(scale == 1.0))
    out = np.zeros(_packed_shape(specs, block.shape[1] + E.shape[1]))
    if is_numpy_block(block) and not scipy.sparse.issparse(block):
        sums, squares = embed_weighted_dense(block, start, stop, E, w, scale, seed=seed,
                                             specs=specs, out=out)
        out[-1] = np.concatenate([sums, w @ E, [w @ squares]])
        return out
    embed_block(block if unit else scale_rows(block, scale), start, stop,
                E if unit else E * scale[:, None], seed=seed, specs=specs, out=out)
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        sums = to_host(xp.asarray(w, device=rows.device) @ rows)
        squares = to_host(xp.sum(rows * rows, axis=1))
    else:
        sums = np.asarray(rows_transpose_times(block, w)).ravel()
        squares = np.asarray(block.multiply(block).sum(axis=1)).ravel()
    out[-1] = np.concatenate([sums, w @ E, [w @ squares]])
    return out


def _packed_shape(specs, width):
    """Shape of a block's packed result: the sketch rows of every embedding and
    the sums row; the ``width`` columns of ``[B E]`` and one more."""
    return sum(spec[1] for spec in specs) + 1, width + 1


def weighted_sketch_pass(blocks, extra, weights, specs, seed, *, power=2, client=None,
                         split_every=None):
    """One pass: ``(sketch, sums, frobenius_sq)``.

    ``sketch`` stacks ``S_j W^(1/p) [B E]`` for the embeddings ``specs`` (tuples
    ``(stream, sketch_size, embedding, nnz_per_column)``, see
    :func:`dasketch._blocks.sparse_embed_streams`); ``sums`` is ``w^T [B E]``;
    ``frobenius_sq`` is ``sum_i w_i ||B_i||^2``. ``extra`` is an ``(n, k)``
    array (numpy) and ``weights`` an ``(n,)`` array of weights ``>= 0``. The
    result depends on the blocks only, not on how the input is chunked.
    """
    specs = tuple((int(st), int(s), str(kd), int(k)) for st, s, kd, k in specs)
    func = partial(_weighted_embed_block, seed=int(seed), specs=specs, power=power)
    rows, columns = _packed_shape(specs, blocks.n_features + np.shape(extra)[1])
    lazy = map_reduce(blocks, func, add, as_row_aligned(weights, blocks, name="sample_weight"),
                      as_row_aligned(extra, blocks, name="extra"), split_every=split_every,
                      keeps_block=False, part_bytes=rows * columns * 8)
    (stacked,) = compute(lazy, client=client)
    return stacked[:-1, :-1], stacked[-1, :-1], float(stacked[-1, -1])


def _weighted_basis_rows(block, root, basis, mean, triangular):
    """``U_b = W^(1/2) (X_b - 1 m^T) N`` in the block's namespace (dense rows are
    centred before the product, as scikit-learn centres ``X``; sparse rows after
    it, staying sparse). With ``triangular`` (``N = R^{-1}``, upper triangular)
    a dense numpy block takes a triangular product, half the multiplications of
    a full one."""
    if not is_numpy_block(block):
        xp, rows = float_rows(block)
        device = rows.device
        centred = rows if mean is None else rows - xp.asarray(mean, device=device)
        U = centred @ xp.asarray(basis, device=device)
        return U * xp.reshape(xp.asarray(root, device=device), (-1, 1))
    if scipy.sparse.issparse(block):
        U = np.asarray(rows_times(block, basis), dtype=np.float64)
        if mean is not None:
            U = U - mean @ basis
    elif triangular:
        rows = np.asarray(block, dtype=np.float64)
        centred = rows if mean is None else rows - mean
        # U^T = N^T (X_b - 1 m^T)^T for the upper triangular N = R^{-1} (BLAS trmm on
        # a copy of the transposed rows: they are Fortran-ordered, as BLAS wants)
        U = scipy.linalg.blas.dtrmm(1.0, basis, centred.T, side=0, lower=0, trans_a=1,
                                    overwrite_b=mean is not None).T
    else:
        rows = np.asarray(block, dtype=np.float64)
        U = (rows if mean is None else rows - mean) @ basis
    U *= root[:, None]
    return U


def _basis_gram_block(block, start, stop, weights, *pieces, basis, mean, triangular=False):
    """``U_b^T U_b`` for the block's rows of ``U = W^(1/2) (X - 1 m^T) N`` and,
    with ``pieces = (shifted,)``, ``U_b^T W_b^(1/2) shifted_b`` after it, packed."""
    root = np.sqrt(np.asarray(weights, dtype=np.float64).ravel())
    U = _weighted_basis_rows(block, root, basis, mean, triangular)
    parts = [to_host(U.T @ U).ravel()]
    if pieces:
        shifted = np.asarray(pieces[0], dtype=np.float64).reshape(stop - start, -1)
        parts.append(to_host(U.T @ like(U, shifted * root[:, None])).ravel())
    return np.concatenate(parts)


def basis_gram_pass(blocks, precond, weights, shifted=None, *, triangular=False,
                    client=None, split_every=None):
    """One pass: the Gram matrix ``G = U^T U`` (k x k) of ``U = A N``, ``A = W^(1/2)
    (X - 1 m^T)`` (``m`` the preconditioner's mean, None: no centring) and ``N``
    its ``basis`` (with ``triangular``, ``N = R^{-1}`` for its ``R``, which must
    then be of full rank ``d``), and with ``shifted`` (n x K, the targets minus
    their means) ``U^T W^(1/2) shifted`` (k x K; else None), accumulated block
    by block, never an ``n x k`` array.

    ``A N`` is well conditioned, so ``G`` is accurate to about ``eps cond(A N)``
    relative to its largest entry; ``U`` itself is ``A N`` up to rounding of
    relative size ``eps d cond(A)``.
    """
    k = precond.rank
    basis = precond.basis if not triangular else \
        scipy.linalg.solve_triangular(precond.R, np.eye(k))
    func = partial(_basis_gram_block, basis=basis, mean=precond.mean,
                   triangular=bool(triangular))
    aligned = [as_row_aligned(weights, blocks, name="sample_weight")]
    if shifted is not None:
        aligned.append(as_row_aligned(shifted, blocks, name="b"))
    width = k + (0 if shifted is None else np.shape(shifted)[1])
    lazy = map_reduce(blocks, func, add, *aligned, split_every=split_every, keeps_block=False,
                      part_bytes=8 * k * width)
    (packed,) = compute(lazy, client=client)
    gram = packed[:k * k].reshape(k, k)
    projected = None if shifted is None else packed[k * k:].reshape(k, -1)
    return (gram + gram.T) / 2, projected


def gram_singular_values(gram, factor, n_features):
    """The singular values of ``A`` (descending, ``n_features`` of them, 0 beyond
    the numerical rank ``k``) from the Gram matrix ``G = N^T A^T A N`` (k x k)
    of :func:`basis_gram_pass` and ``factor`` (k x d), with ``A = (A N) factor``.

    ``A = (A N) Sigma_k V_k^T`` for ``N = V_k Sigma_k^{-1}`` from the SVD ``R =
    U_R Sigma V^T`` of the sketch's factor, when the row space of ``A`` lies in
    that of its sketch ``S A`` (always for a subspace embedding), and ``A = (A
    R^{-1}) R`` at full rank: the singular values of ``A`` are those of ``G^(1/2)
    factor``, with no squaring of the condition number of ``A``, unlike ``X^T
    X``.
    """
    k = gram.shape[0]
    values = np.zeros(n_features)
    if not k:
        return values
    eig, vecs = np.linalg.eigh(gram)
    root = np.sqrt(np.maximum(eig, 0.0))[:, None] * vecs.T  # G^(1/2) up to a rotation
    values[:k] = np.linalg.svd(root @ factor, compute_uv=False)
    return values


def data_singular_values(blocks, precond, weights, *, client=None, split_every=None):
    """The singular values of ``A = W^(1/2) (X - 1 m^T)``, descending, from one
    pass (:func:`basis_gram_pass` and :func:`gram_singular_values`)."""
    if not precond.rank:
        return np.zeros(blocks.n_features)
    gram, _ = basis_gram_pass(blocks, precond, weights, client=client,
                              split_every=split_every)
    k = precond.rank
    return gram_singular_values(gram, np.diag(precond.singular_values[:k]), blocks.n_features)
