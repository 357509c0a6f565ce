"""Building the sketch preconditioner for overdetermined regression.

Yang, Chow, Re, Mahoney, "Weighted SGD for l_p regression with randomized
preconditioning", JMLR 18(211), 2018 (pwSGD), Algorithm 1 step 1 and
Section 3: a sparse embedding ``S`` (OSNAP/CountSketch for p = 2, the sparse
Cauchy transform for p = 1) gives ``QR(S A) = Q R``, and ``U = A R^{-1}`` is a
well-conditioned basis of the range of ``A``. The preconditioner object and the
leverage estimates it gives are in :mod:`dasketch.linear_model.preconditioner`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from dasketch._blocks import as_row_blocks
from dasketch.kernels.embeddings import EMBEDDINGS, resolve_seed
from dasketch.linear_model._regression_passes import weighted_sketch_pass
from dasketch.linear_model.preconditioner import (  # noqa: F401 - re-exported
    STREAM_CHECK,
    STREAM_DRAWS,
    STREAM_LEVERAGE,
    STREAM_SKETCH,
    SketchPreconditioner,
    _check_int,
    leverage_scores,
    metric_singular_values,
)
from dasketch.utils.validation import as_target_vector

# The targets' name beside each name of the data, in errors.
TARGET_NAMES = {"X": "y", "A": "b"}


def check_regression_data(A, b, *, block_rows=None):
    """Normalise ``A`` to row blocks and ``b`` to a finite float64 vector; raise
    clear errors for mismatched lengths, non-finite targets and ``n <= d``."""
    blocks = as_row_blocks(A, block_rows=block_rows, name="A")
    n, d = blocks.shape
    if b is not None:
        b = as_target_vector(b, n, name="b", matrix="A", real=True)
    if n <= d:
        raise ValueError(f"A has n={n} rows and d={d} columns; this method is for "
                         "strongly overdetermined problems and needs n >> d")
    return blocks, b


def sketch_precondition(A, b=None, *, sketch_size=None, embedding="osnap", nnz_per_column=None,
                        check_size=None, random_state=None, client=None, block_rows=None):
    """Compute the preconditioner ``R`` from ``QR(S A)`` with a distributed sparse embedding.

    One blocked pass computes ``S [A b]`` and, unless ``check_size=0``, an
    independent OSNAP sketch ``S' A`` whose singular values after ``R^{-1}``
    estimate those of ``A R^{-1}`` (a subspace embedding preserves them up to
    ``1 +- O(sqrt(d / check_size))``; a uniform row sample would miss the heavy
    rows). Yang et al., JMLR 2018, Algorithm 1 step 1 and Algorithm 2/3
    (conditioning by a sparse embedding followed by QR).

    Parameters
    ----------
    A : array-like of shape (n, d)
        A numpy array, scipy.sparse matrix, Dask array or zarr path; ``n >> d``.
    b : array-like of shape (n,), optional
        Targets; gives the sketch-and-solve solution ``x0``.
    sketch_size : int, optional
        Rows of ``S A``, ``>= d``; default ``4 d``, with which OSNAP with 4
        nonzeros per column gives ``cond(A R^{-1})`` of about 3.
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        The distribution of ``S`` (see :func:`dasketch.sparse_embed`).
    nnz_per_column : int, optional
        Nonzeros per column of ``S``; default 4 for OSNAP, 1 for the others.
    check_size : int, optional
        Rows of the independent check sketch; default ``8 d``; 0 disables it.
    random_state : None, int or numpy.random.Generator, optional
        Seeds ``S`` and the check sketch.
    client : distributed.Client, optional
        Run on this client; default: the active scheduler.
    block_rows : int, optional
        Rows per block; default about 32 MiB of values per block.

    Returns
    -------
    SketchPreconditioner
        ``R``, the sketch-and-solve solution when ``b`` was given, and the
        estimated singular values of ``A R^{-1}``.

    See Also
    --------
    sketch_lstsq : Solve least squares with this preconditioner.
    leverage_scores : Row weights from it, for row sampling.
    dasketch.sparse_embed : The embedding ``S A`` alone.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import sketch_precondition
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((5000, 10)) * np.logspace(0, 5, 10)
    >>> P = sketch_precondition(A, random_state=0)
    >>> bool(np.linalg.cond(A @ np.linalg.inv(P.R)) < 10)
    True
    >>> bool(1 <= P.condition_number_estimate < 10)
    True
    """
    blocks, b = check_regression_data(A, b, block_rows=block_rows)
    return precondition_blocks(blocks, b, sketch_size=sketch_size, embedding=embedding,
                               nnz_per_column=nnz_per_column, check_size=check_size,
                               random_state=random_state, client=client)


def _rank(matrix, rcond):
    singular_values = scipy.linalg.svdvals(matrix)
    if not singular_values.size or singular_values[0] == 0:
        return 0
    return int(np.count_nonzero(singular_values > rcond * singular_values[0]))


def _factored(sketch, rcond):
    """``Q, R`` of ``sketch`` (at least as many rows as columns), the SVD
    ``left, singular_values, right`` of ``R`` and its rank."""
    Q, R = np.linalg.qr(sketch)
    left, singular_values, right = np.linalg.svd(R)
    rank = int(np.count_nonzero(singular_values > rcond * singular_values[0])) \
        if singular_values[0] > 0 else 0
    return Q, R, left, singular_values, right, rank


def precondition_blocks(blocks, b=None, *, sketch_size=None, embedding="osnap",
                        nnz_per_column=None, check_size=None, random_state=None, client=None,
                        name="A", sample_weight=None, power=2, centre=False, full_rank=True,
                        rcond=None):
    """:func:`sketch_precondition` for validated row blocks ``blocks`` and
    targets ``b`` ((n,) or (n, k)); errors about the data name it ``name``.

    With ``sample_weight`` ``w`` (float64, ``>= 0``) the rows are
    ``w_i^(1/power) x_i`` (and the targets scaled alike): the problem
    ``min sum_i w_i |x_i^T x - b_i|^power``, sketched in the same pass, the
    weighted rows formed block by block. With ``centre=True`` ``A`` is the
    weighted-centred data ``W^(1/2) (X - 1 m^T)``, ``m`` the weighted column
    means, and ``b`` is centred alike: the sketch of the centred data is
    ``S W^(1/2) X - (S W^(1/2) 1) m^T``, from the same pass (no centred copy
    of ``X``; sparse stays sparse). ``full_rank=True`` refuses a numerically
    rank-deficient ``A``; otherwise the preconditioner's ``basis`` spans the
    numerical row space (rank decided with ``rcond``, default
    ``max(n, d) eps``, as ``numpy.linalg.lstsq``). When the check sketch ``S' A``
    has a higher rank than ``S A`` (rows of ``A`` collided in ``S``), the
    preconditioner is factored from both sketches stacked.
    """
    n, d = blocks.shape
    if embedding not in EMBEDDINGS:
        raise ValueError(f"embedding must be one of {EMBEDDINGS}, got {embedding!r}")
    sketch_size = 4 * d if sketch_size is None else sketch_size
    sketch_size = _check_int(sketch_size, "sketch_size", 1, "the preconditioner")
    if sketch_size < d:
        raise ValueError(f"sketch_size must be >= d = {d} (the number of columns of "
                         f"{name}), got {sketch_size}")
    if nnz_per_column is None:
        nnz_per_column = min(4, sketch_size) if embedding == "osnap" else 1
    check_size = (8 * d if check_size is None
                  else _check_int(check_size, "check_size", 0, "the preconditioner"))
    if 0 < check_size < d:
        raise ValueError(f"check_size must be 0 or >= d = {d}, got {check_size}")
    seed = resolve_seed(random_state)
    specs = [(STREAM_SKETCH, sketch_size, embedding, nnz_per_column)]
    if check_size:
        specs.append((STREAM_CHECK, check_size, "osnap", min(4, check_size)))
    targets = np.zeros((n, 0)) if b is None else np.reshape(b, (n, -1))
    extra = np.hstack([np.ones((n, 1)), targets]) if centre else targets
    weights = np.ones(n) if sample_weight is None else sample_weight
    stacked, sums, frobenius_sq = weighted_sketch_pass(blocks, extra, weights, specs, seed,
                                                       power=power, client=client)
    finite = np.isfinite(stacked).all(axis=0) & np.isfinite(sums)
    if not finite.all():
        # A non-finite entry reaches only its own column of S [A extra]: the
        # columns tell the data from the targets (a None in y is a NaN there).
        what = name if not finite[:d].all() else TARGET_NAMES.get(name, "the targets")
        raise ValueError(f"{what} contains NaN or Inf (found in its sketch); entries must "
                         "be finite")
    weight_sum = float(np.sum(weights))
    mean = target_mean = None
    if centre:
        mean, target_mean = sums[:d] / weight_sum, sums[d + 1:] / weight_sum
        ones = stacked[:, d]
        stacked = np.hstack([stacked[:, :d] - np.outer(ones, mean),
                             stacked[:, d + 1:] - np.outer(ones, target_mean)])
    rcond = max(n, d) * np.finfo(np.float64).eps if rcond is None else rcond
    sketched = slice(0, sketch_size)
    Q, R, left, singular_values, right, rank = _factored(stacked[sketched, :d], rcond)
    if check_size and rank < d and _rank(stacked[sketch_size:, :d], rcond) > rank:
        # S lost directions of the row space that S' keeps (rows of A colliding
        # in S, likely when A has few rows): factor both sketches, stacked
        sketched = slice(None)
        Q, R, left, singular_values, right, rank = _factored(stacked[:, :d], rcond)
    if full_rank and rank < d:
        raise ValueError(f"{name} is numerically rank deficient (its sketch has rank {rank} "
                         f"of {d} columns); drop linearly dependent columns first (with an "
                         "intercept, a constant column is one), or use sketch_lstsq or "
                         "SketchLstsqRegressor, which return the minimum-norm solution")
    basis = right[:rank].T / singular_values[:rank]
    x0 = None
    if b is not None:
        x0 = basis @ (left[:, :rank].T @ (Q.T @ stacked[sketched, d:]))
        x0 = x0.reshape((d,) + np.shape(b)[1:])
    check, singular = None, None
    if check_size:
        check = stacked[sketch_size:, :d]
        singular = scipy.linalg.svdvals(check @ basis) if rank else np.zeros(0)
    return SketchPreconditioner(R, x0, singular, check, embedding, sketch_size,
                                int(nnz_per_column), seed, singular_values, rank, basis,
                                mean, target_mean, weight_sum, float(np.sqrt(frobenius_sq)))
