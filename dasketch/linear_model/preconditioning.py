"""Sketch-based preconditioning and leverage estimates for overdetermined regression.

Yang, Chow, Re, Mahoney, "Weighted SGD for l_p regression with randomized
preconditioning", JMLR 18(211), 2018 (pwSGD), Algorithm 1 steps 1-3 and
Section 3: a sparse embedding ``S`` (OSNAP/CountSketch for p = 2, the sparse
Cauchy transform for p = 1) gives ``QR(S A) = Q R``, and ``U = A R^{-1}`` is a
well-conditioned basis of the range of ``A``. Row weights ``lambda_i ~ ||U_i||_p^p``
come from one blocked pass over ``A (R^{-1} G)`` with a thin random ``G``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.linalg
from sklearn.utils._param_validation import validate_parameter_constraints

from dasketch._blocks import as_row_blocks, compute, map_rows
from dasketch._blocks.block_functions import leverage_block
from dasketch.kernels.embeddings import EMBEDDINGS, resolve_seed
from dasketch.linear_model._regression_passes import weighted_sketch_pass
from dasketch.utils.params import Interval
from dasketch.utils.validation import as_target_vector

# Streams of the random operators derived from one seed.
STREAM_SKETCH, STREAM_CHECK, STREAM_LEVERAGE, STREAM_DRAWS = 0, 1, 2, 3


@dataclass(frozen=True)
class SketchPreconditioner:
    """``R`` from ``QR(S A)`` and what was learned with it in the same pass.

    Made by :func:`sketch_precondition`; the parameters are also its attributes.

    Parameters
    ----------
    R : ndarray of shape (d, d)
        Upper triangular; ``A R^{-1}`` is well conditioned (when ``A`` has full
        rank).
    x0 : ndarray of shape (d,) or (d, k), or None
        Sketch-and-solve solution ``N U_k^T Q^T S b`` (``R^{-1} Q^T S b`` at full
        rank, the minimum-norm one otherwise) when ``b`` was given.
    check_singular_values : ndarray or None
        Singular values of ``S' A N`` for an independent OSNAP embedding ``S'``:
        estimates of the singular values of ``A N`` (of ``A R^{-1}`` at full
        rank).
    check_sketch : ndarray or None
        ``S' A`` itself, to estimate the conditioning of other metrics.
    embedding : str
        The embedding ``S``: ``"osnap"``, ``"countsketch"`` or ``"cauchy"``.
    sketch_size, nnz_per_column : int
        Rows of ``S A`` and nonzeros per column of ``S``.
    seed : int
        Seed of ``S`` and of the check sketch.
    singular_values : ndarray of shape (d,), optional
        Singular values of ``R`` (those of ``S A``), descending; the
        multiplicative Weyl inequality puts those of ``A`` between them times
        the smallest and the largest singular value of ``A N``.
    rank : int, optional
        How many singular values exceed ``rcond`` times the largest.
    basis : ndarray of shape (d, rank), optional
        ``N = V_k Sigma_k^{-1}`` from the SVD ``R = U Sigma V^T`` truncated to
        the rank: ``A N`` is a well-conditioned basis of the range of ``A``,
        and ``N`` spans the row space of ``S A``, that of ``A`` when ``S`` is a
        subspace embedding; so for the least-squares ``z`` of ``A N``,
        ``x = N z`` is the minimum-norm least-squares solution of ``A``.
        ``R^{-1} U`` at full rank.
    mean, target_mean : ndarray, optional
        The weighted column means of the data and of ``b`` when ``A`` is the
        centred data (``centre=True`` in :func:`precondition_blocks`), else
        None.
    weight_sum : float, optional
        ``sum_i w_i`` of the sample weights (``n`` without weights).
    frobenius : float, optional
        ``(sum_i w_i ||x_i||^2)^(1/2)`` of the data rows before centring.

    See Also
    --------
    sketch_precondition : Make it.
    leverage_scores : Row weights of ``A R^{-1}``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import sketch_precondition
    >>> A = np.random.default_rng(0).standard_normal((4000, 5)) * [1, 10, 1e2, 1e3, 1e4]
    >>> P = sketch_precondition(A, random_state=0)
    >>> v = np.arange(5.0)
    >>> bool(np.allclose(P.R @ P.solve(v), v)), bool(np.allclose(P.R.T @ P.solve_transpose(v), v))
    (True, True)
    """

    R: np.ndarray
    x0: object
    check_singular_values: object
    check_sketch: object
    embedding: str
    sketch_size: int
    nnz_per_column: int
    seed: int
    singular_values: np.ndarray = None
    rank: int = None
    basis: np.ndarray = None
    mean: object = None
    target_mean: object = None
    weight_sum: float = None
    frobenius: float = None

    @property
    def condition_number_estimate(self):
        """Estimate of ``cond(A N)`` from the check sketch.

        ``cond(A R^{-1})`` at full rank; NaN when no check sketch was taken.
        """
        s = self.check_singular_values
        if s is None or s.size == 0:
            return float("nan")
        return float(s[0] / s[-1]) if s[-1] > 0 else float("inf")

    def solve(self, v):
        """Solve ``R x = v``.

        Parameters
        ----------
        v : ndarray of shape (d,) or (d, k)
            Right-hand side.

        Returns
        -------
        ndarray
            ``R^{-1} v``, of the shape of ``v``.
        """
        return scipy.linalg.solve_triangular(self.R, v)

    def solve_transpose(self, v):
        """Solve ``R^T x = v``.

        Parameters
        ----------
        v : ndarray of shape (d,) or (d, k)
            Right-hand side.

        Returns
        -------
        ndarray
            ``R^{-T} v``, of the shape of ``v``.
        """
        return scipy.linalg.solve_triangular(self.R, v, trans="T")


def _check_int(value, name, low, caller):
    validate_parameter_constraints({name: [Interval(numbers.Integral, low, None, closed="left")]},
                                   {name: value}, caller_name=caller)
    return int(value)


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
    if not (np.all(np.isfinite(stacked)) and np.all(np.isfinite(sums))):
        raise ValueError(f"{name} contains NaN or Inf (found in its sketch); entries must "
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


def metric_singular_values(precond, P):
    """Estimated singular values of ``A P^{-1}`` for an upper triangular or diagonal
    metric factor ``P`` (given as a matrix or a 1-D diagonal), from the check
    sketch."""
    if precond.check_sketch is None:
        raise ValueError("the preconditioner has no check sketch (check_size=0)")
    C = precond.check_sketch
    if np.ndim(P) == 1:
        M = C / P
    else:
        M = scipy.linalg.solve_triangular(P, C.T, trans="T").T
    return scipy.linalg.svdvals(M)


def leverage_scores(A, precond, *, p=2, n_projections=None, exact=False, client=None,
                    block_rows=None):
    """Estimate the row weights ``lambda_i ~ ||U_i||_p^p`` of ``U = A R^{-1}`` in one pass.

    With a thin ``G`` (``d x r``): for p = 2, ``||U_i G||_2^2 / r`` with Gaussian
    ``G`` (Johnson-Lindenstrauss, Drineas et al. 2012); for p = 1, the median of
    ``|U_i G|`` with Cauchy ``G``, since ``U_i g`` is Cauchy with scale
    ``||U_i||_1`` and the median of ``|Cauchy(gamma)|`` is ``gamma`` (Yang et al.,
    JMLR 2018, Algorithm 1 step 2; Clarkson et al., SIAM J. Comput. 2016).
    ``exact=True`` uses ``G = I`` (cost ``O(n d^2)``, fine for small d).

    Parameters
    ----------
    A : array-like of shape (n, d)
        The matrix that ``precond`` was computed from, in any form
        :func:`sketch_precondition` accepts.
    precond : SketchPreconditioner
        Its ``R`` defines ``U = A R^{-1}``; its seed seeds ``G``.
    p : {1, 2}, default 2
        The norm: leverage scores (2) or l1 row weights (1).
    n_projections : int, optional
        Columns ``r`` of ``G``; default 32.
    exact : bool, default False
        Use ``G = I``: the exact weights of ``U``.
    client : distributed.Client, optional
        Run on this client; default: the active scheduler.
    block_rows : int, optional
        Rows per block; default about 32 MiB of values per block.

    Returns
    -------
    ndarray of shape (n,)
        The weight of each row.

    See Also
    --------
    sketch_precondition : Compute ``R``.
    dasketch.linear_model.PWSGDRegressor : Samples rows by these weights.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import leverage_scores, sketch_precondition
    >>> A = np.random.default_rng(1).standard_normal((3000, 8))
    >>> A[:5] *= 100                                    # five heavy rows
    >>> P = sketch_precondition(A, random_state=0)
    >>> lev = leverage_scores(A, P, exact=True)
    >>> U = A @ np.linalg.inv(P.R)
    >>> bool(np.allclose(lev, (U ** 2).sum(axis=1))), bool(lev[:5].min() > lev[5:].max())
    (True, True)
    """
    if p not in (1, 2):
        raise ValueError(f"p must be 1 or 2, got {p!r}")
    blocks = as_row_blocks(A, block_rows=block_rows, name="A")
    d = blocks.n_features
    if exact:
        M = scipy.linalg.solve_triangular(precond.R, np.eye(d))
    else:
        r = (32 if n_projections is None
             else _check_int(n_projections, "n_projections", 1, "leverage_scores"))
        rng = np.random.default_rng([precond.seed, STREAM_LEVERAGE])
        G = rng.standard_normal((d, r)) if p == 2 else rng.standard_cauchy((d, r))
        M = scipy.linalg.solve_triangular(precond.R, G)
    lazy = map_rows(blocks, partial(leverage_block, p=p, exact=bool(exact)), n_columns=1,
                    shared={"M": M}, keeps_block=False)
    (values,) = compute(lazy, client=client)
    return np.asarray(values).ravel()

