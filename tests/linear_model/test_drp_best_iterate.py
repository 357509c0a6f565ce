"""Dual random projection returns the iterate of smallest certified error bound
of its run, not the last one."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dasketch.linear_model import dual_random_projection


def _ill_conditioned(seed, n=200, d=120, condition=1e6):
    """Singular values from 1 to ``1 / condition``, log-spaced, and random targets:
    with 5 components and ``alpha = 1e-8`` the preconditioned iteration is slow and
    the certified bound of its iterates goes up as well as down."""
    rng = np.random.default_rng(seed)
    U = np.linalg.qr(rng.standard_normal((n, d)))[0]
    V = np.linalg.qr(rng.standard_normal((d, d)))[0]
    X = (U * np.logspace(0, -np.log10(condition), d)) @ V.T
    return X, rng.standard_normal(n)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.heavy
def test_returned_bound_is_the_smallest_of_the_run(seed):
    """The fit stopped after ``k`` iterations returns the best of iterates ``0..k``:
    its bound never increases with ``k``, the full run returns the smallest, and
    in these runs some iterate is no better than an earlier one (equal bounds for
    consecutive ``k``), so returning the last iterate would give a larger bound."""
    X, y = _ill_conditioned(seed)
    params = dict(alpha=1e-8, sketch_size=5, tol=1e-12, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = dual_random_projection(X, y, max_iter=30, **params)
        bounds = np.array([dual_random_projection(X, y, max_iter=k, **params).coef_error_bound
                           for k in range(1, full.n_iter + 1)])
    assert full.n_iter > 10
    assert np.all(np.diff(bounds) <= 0), bounds
    assert full.coef_error_bound == bounds[-1] == bounds.min()
    assert np.any(np.diff(bounds) == 0)  # an iterate no better than an earlier one
