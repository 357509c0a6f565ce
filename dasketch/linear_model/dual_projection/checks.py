"""The rules of the arguments of dual random projection, shared by
:func:`~dasketch.linear_model.dual_random_projection` and its estimators, the
checks that need the data (``alpha`` per target, the weights, the targets), and
the convergence warning of a fit that misses its tolerance.

Client-side only (it imports scikit-learn): no block function lives here.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import (
    as_row_blocks,
    compute,
    default_block_rows,
    is_dask_collection,
    passes_run_eagerly,
)
from dasketch.kernels.deprecation import DEPRECATED
from dasketch.linear_model.dual_projection.losses import LOSSES
from dasketch.utils._sklearn_compat import Hidden, StrOptions, check_sample_weight
from dasketch.utils.params import FAN_IN, POSITIVE_INT, RANDOM_STATE, Interval
from dasketch.utils.stack_level import caller_stacklevel

SOLVERS = ("cg", "paper")
# The default tol: the certified relative error of the coefficients
# (coef_error_bound <= tol ||w||) at scikit-learn's own default tol of
# LogisticRegression and Ridge. Theirs bounds a gradient (lbfgs) or a residual
# (sparse_cg, lsqr), which leaves coef_ about as accurate or less, so a default
# fit is at least as accurate as theirs in coefficient error and in relative
# optimality residual (benchmarks/README.md, "Default tolerance of dual random
# projection"; benchmarks/bench_hashed_text.py on hashed text).
DEFAULT_TOL = 1e-4
# The fewest blocks (a power of two) a matrix of a few default blocks is cut
# into (as_row_blocks's min_blocks): its passes run one block a thread, and 16
# equal blocks keep 2, 4, 8 or 16 threads busy to the end of every pass.
FIT_BLOCKS = 16
# Values a fit's default dense block holds: 4x the readers' default (a block of a
# matrix in memory is a view, nothing copied; a task reading a store holds 128 MiB
# of float64). Each block of an eager pass costs the pool thread that runs it a
# fixed overhead and adds a part to the tree summed in the calling thread, so on
# many cores small blocks cost several times numpy's own product
# (benchmarks/README.md, "Passes on every core"). Every input kind of a fit takes
# the same rule, so that its blocks, and its result bit for bit, depend on the
# shape alone.
FIT_BLOCK_VALUES = 2 ** 24
# A fit whose relative optimality residual is below this while its coefficient
# bound exceeds ||w|| has a certificate that alpha, not the iteration, makes useless.
USELESS_RESIDUAL = 1e-6

# The parameters of dual_random_projection that every estimator has (see
# dasketch.utils.params); alpha's values are checked by _check_alpha, whose count
# depends on y.
SHARED_CONSTRAINTS = {
    "alpha": [numbers.Real, "array-like"],
    "sketch_size": [POSITIVE_INT],
    "n_components": [POSITIVE_INT, Hidden(StrOptions({DEPRECATED}))],  # sketch_size until 0.3
    "solver": [StrOptions(set(SOLVERS))],
    "tol": [Interval(numbers.Real, 0, np.inf, closed="left")],
    "max_iter": [POSITIVE_INT],
    "fit_intercept": ["boolean"],
    "block_rows": [POSITIVE_INT, None],
    "split_every": [FAN_IN, None],
    "random_state": RANDOM_STATE,
    "cache": [StrOptions({"auto"}), "boolean"],
    "positive": ["boolean"],
    "penalty": [StrOptions({"l2", "l1", "elasticnet"})],
    "l1_ratio": [Interval(numbers.Real, 0, 1, closed="both"), None],
}
# The loss and its smoothing (the regressor's loss is always "squared").
LOSS_CONSTRAINTS = {
    "loss": [StrOptions(set(LOSSES))],
    "smoothing": [Interval(numbers.Real, 0, np.inf, closed="neither")],
}
# Every argument of dual_random_projection.
DRP_CONSTRAINTS = {
    "X": "no_validation",   # read by as_row_blocks
    "y": ["array-like"],
    **SHARED_CONSTRAINTS,
    **LOSS_CONSTRAINTS,
    "client": "no_validation",
    # a number is every weight, as in scikit-learn
    "sample_weight": ["array-like", Interval(numbers.Real, 0, None, closed="left"), None],
}


def _check_alpha(alpha, n_targets):
    """``lambda`` per target: a number, or one per target, all finite and >= 0 (checked
    here, not by a constraint of :func:`dual_random_projection`: the count depends on
    ``y``). 0 is the unpenalised problem (:mod:`.unpenalised`), for every target or
    none."""
    what = "alpha must be a finite number >= 0"
    if np.ndim(alpha) == 0:
        ok = isinstance(alpha, numbers.Real) and not isinstance(alpha, (bool, np.bool_)) \
            and np.isfinite(alpha) and alpha >= 0
        if not ok:
            raise ValueError(f"{what}, got {alpha!r}")
        return np.full(n_targets, float(alpha))
    values = np.asarray(alpha)
    if values.ndim != 1 or values.size != n_targets or values.dtype.kind not in "iuf" \
            or not np.all(np.isfinite(values) & (values >= 0)):
        raise ValueError(f"alpha given per target must hold {n_targets} finite numbers >= 0 "
                         f"(one per column of y), got {alpha!r}; {what}")
    if np.any(values == 0) and np.any(values > 0):
        raise ValueError(f"alpha given per target is 0 for some targets only, got {alpha!r}: "
                         "the unpenalised targets are solved by another method (sketch-"
                         "preconditioned LSQR or unpenalised Newton-CG); fit them separately")
    return values.astype(np.float64)


def check_weights(sample_weight, n):
    """Sample weights as a float64 vector of ``n`` finite values ``>= 0`` (not all 0);
    Dask input is computed (``n`` values, small next to X)."""
    if is_dask_collection(sample_weight):
        (sample_weight,) = compute(sample_weight)
    weights = check_sample_weight(sample_weight, np.empty((n, 0)), dtype=np.float64,
                                  ensure_non_negative=True)
    if not np.all(np.isfinite(weights)):
        raise ValueError("sample_weight contains NaN or Inf; finite weights >= 0 expected")
    return weights


def _check_targets(y, n, loss):
    Y = np.asarray(y, dtype=np.float64)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != n:
        raise ValueError(f"y must have {n} rows (one per row of X), got shape {np.shape(y)}")
    if not np.isfinite(Y).all():
        raise ValueError("y contains NaN or Inf; only finite values are accepted")
    if loss != "squared" and not np.isin(Y, (-1.0, 1.0)).all():
        raise ValueError(f"y must hold labels -1 and +1 for loss={loss!r}")
    return Y


def _warn(result, tol, solver, loss, diverged, lam):
    with np.errstate(over="ignore"):     # a bound at coef 0 is relatively infinite
        relative = np.atleast_1d(result.coef_error_bound) / np.maximum(
            np.linalg.norm(np.atleast_2d(result.coef), axis=1), np.finfo(float).tiny)
    worst = float(np.max(relative))
    if diverged:
        advice = (f"Algorithm 2 stopped contracting at round {result.n_iter}: "
                  f"sketch_size={result.n_components} is too small for the rank of X; "
                  f"returning round {result.best_iteration} (lowest objective). "
                  "Use solver='cg' or increase sketch_size")
    elif solver == "paper" and result.n_iter == 1:
        advice = ("this is the one-shot solution (Algorithm 1); use solver='cg' (or more "
                  "rounds, max_iter) for an accurate solution")
    elif not np.isfinite(worst) and not np.any(lam):
        warnings.warn(f"unpenalised fit (alpha=0): relative optimality residual "
                      f"{float(np.max(result.optimality_residual)):.3g} > tol={tol:g} after "
                      f"{result.n_iter} Newton steps; increase max_iter, or use alpha > 0",
                      ConvergenceWarning, stacklevel=caller_stacklevel())
        return
    elif worst >= 1.0 and float(np.max(result.optimality_residual)) <= USELESS_RESIDUAL:
        # the gradient is small, the bound is not: alpha, not the iteration, is at fault
        warnings.warn(f"dual random projection: the certificate is useless: its coefficient "
                      f"error bound ||w - w*|| / ||w|| <= {worst:.3g} > tol={tol:g} (the "
                      f"gradient over alpha={float(np.min(lam)):g}, the strong convexity) "
                      f"certifies nothing; alpha is too small for this certificate: increase "
                      f"alpha, or use alpha=0 for the unpenalised fit (certified by its "
                      f"optimality residual, here "
                      f"{float(np.max(result.optimality_residual)):.3g})",
                      ConvergenceWarning, stacklevel=caller_stacklevel())
        return
    else:
        unit = "rounds" if solver == "paper" else (
            "conjugate-gradient iterations" if loss == "squared" else "Newton steps")
        advice = (f"after {result.n_iter} {unit}; increase max_iter, or sketch_size "
                  f"(now {result.n_components}) to precondition better; a larger alpha "
                  "or scaled features make the problem better conditioned")
    warnings.warn(f"dual random projection: coefficient error bound ||w - w*|| / ||w|| "
                  f"<= {worst:.3g} > tol={tol:g} (relative optimality residual "
                  f"{float(np.max(result.optimality_residual)):.3g}); {advice}",
                  ConvergenceWarning, stacklevel=caller_stacklevel())


def check_library_options(rho, positive, alpha, loss):
    """Refuse, by a ``TypeError`` naming them, the options that an ``X`` of
    another library than numpy (CuPy) is not read with: an l1 part in the
    penalty, ``positive=True`` and ``alpha=0`` with the squared loss (whose
    solvers take numpy blocks)."""
    unpenalised = loss == "squared" and not np.any(np.asarray(alpha) != 0)
    refused = [what for what, on in (("an l1 part in the penalty", rho > 0),
                                     ("positive=True", bool(positive)),
                                     ("alpha=0 with the squared loss", unpenalised))
               if on]
    if refused:
        raise TypeError(f"X is an array of another library than numpy, which "
                        f"dual_random_projection reads with penalty='l2', positive=False "
                        f"and, for the squared loss, alpha > 0 only, got "
                        f"{' and '.join(refused)}; copy X to the "
                        "host (cupy.asnumpy(X), or X.map_blocks(cupy.asnumpy) for a Dask "
                        "array) for those")


def _fit_rows(values_per_row, n_features, sparse):
    if sparse:
        return default_block_rows(values_per_row)
    return default_block_rows(values_per_row, block_values=FIT_BLOCK_VALUES)


def fit_blocks(X, block_rows, client=None):
    """The blocks a fit passes over: ``block_rows`` rows each when given, else
    :data:`FIT_BLOCK_VALUES` values a dense block (the readers' default for
    sparse rows), spread over at least :data:`FIT_BLOCKS` blocks; a function of
    the shape only, whatever the input's kind and chunks. Arrays of other
    libraries are read as blocks of their library. When the fit's passes run
    eagerly here (:func:`~dasketch._blocks.passes_run_eagerly` with ``client``),
    a matrix in memory is not hashed to name its blocks: their keys reach no
    other computation."""
    return as_row_blocks(X, block_rows=block_rows, min_blocks=FIT_BLOCKS,
                         default_rows=_fit_rows, array_libraries="any",
                         content_keys=not passes_run_eagerly(client, threaded=True))
