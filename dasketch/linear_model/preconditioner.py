"""The sketch preconditioner and what it gives: leverage estimates and the
conditioning of other metrics.

Yang, Chow, Re, Mahoney, "Weighted SGD for l_p regression with randomized
preconditioning", JMLR 18(211), 2018 (pwSGD), Algorithm 1 step 2 and Section 3:
``U = A R^{-1}``, for ``R`` from ``QR(S A) = Q R``, is a well-conditioned basis of
the range of ``A``, and row weights ``lambda_i ~ ||U_i||_p^p`` come from one
blocked pass over ``A (R^{-1} G)`` with a thin random ``G``. The preconditioner
is built by :func:`dasketch.linear_model.preconditioning.sketch_precondition`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.linalg

from dasketch._blocks import as_row_blocks, compute, leverage_block, map_rows
from dasketch.utils._sklearn_compat import validate_parameter_constraints
from dasketch.utils.params import Interval

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
