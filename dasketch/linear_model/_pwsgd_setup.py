"""The set-up of pwSGD's steps (Yang, Chow, Re, Mahoney, JMLR 18(211), 2018,
Algorithm 1, steps 2-4): the box the iterates are kept in, the metric ``H = P^T P``
of the steps, their default number and the rows they draw, all drawn up front.
"""

from __future__ import annotations

import numpy as np

from dasketch.linear_model.preconditioner import STREAM_DRAWS

# Steps per unit of ||U||_F^2 / sigma_min^2 (about d kappa^2) in the default
# n_iter, and the most steps it takes.
_STEPS_PER_CONDITION = 500
_MAX_DEFAULT_STEPS = 1_000_000


def check_bounds(bounds, n_features):
    """``bounds=(lower, upper)`` as two float arrays of length ``n_features``
    (scalars broadcast, infinities allowed), or None."""
    if bounds is None:
        return None
    if not isinstance(bounds, (tuple, list)) or len(bounds) != 2:
        raise ValueError("bounds must be a pair (lower, upper) of scalars or arrays of "
                         f"length n_features={n_features}, got {bounds!r}")
    out = []
    for name, value in zip(("lower", "upper"), bounds):
        value = np.asarray(value, dtype=np.float64)
        if value.ndim == 0:
            value = np.full(n_features, float(value))
        if value.shape != (n_features,):
            raise ValueError(f"bounds: {name} must be a scalar or have length "
                             f"n_features={n_features}, got shape {value.shape}")
        if np.any(np.isnan(value)):
            raise ValueError(f"bounds: {name} contains NaN")
        out.append(value)
    lower, upper = out
    if np.any(lower > upper):
        j = int(np.argmax(lower > upper))
        raise ValueError(f"bounds are inconsistent: lower[{j}]={lower[j]} > "
                         f"upper[{j}]={upper[j]}")
    return lower, upper


def metric_factor(preconditioner, R):
    """``P`` of the metric ``H = P^T P`` of the steps: ``R`` (``"full"``), the
    column norms of ``R`` (``"diag"``, Jacobi scaling; a zero column gets 1) or
    ones (``"none"``); a vector ``P`` stands for ``diag(P)``."""
    if preconditioner == "full":
        return R
    if preconditioner == "diag":
        P = np.sqrt(np.einsum("ij,ij->j", R, R))
        P[P == 0] = 1.0
        return P
    return np.ones(R.shape[1])


def default_steps(fro2, smin2):
    """The default number of steps, ``500 ||U||_F^2 / sigma_min^2`` (at most 10^6),
    from the squared singular values of ``U = A P^{-1}``."""
    ratio = fro2 / smin2 if smin2 > 0 else np.inf
    return int(min(_STEPS_PER_CONDITION * ratio, _MAX_DEFAULT_STEPS))


def draw_rows(probs, n_draws, seed):
    """``n_draws`` row indices drawn with probabilities ``probs``, independently,
    from the draws stream of the preconditioner's ``seed``."""
    rng = np.random.default_rng([seed, STREAM_DRAWS])
    cdf = np.cumsum(probs)
    drawn = np.searchsorted(cdf / cdf[-1], rng.random(n_draws), side="right")
    return np.minimum(drawn, probs.size - 1)
