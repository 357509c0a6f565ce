"""The LSQR iterations of sketch-preconditioned least squares
(:func:`~dasketch.linear_model.lstsq_solver.sketch_lstsq` with ``solver="lsqr"``)
and the warnings of both of its solvers when they miss ``tol``.

LSQR (Paige and Saunders, ACM TOMS 1982) on ``A N``, ``N`` the sketch's basis,
as in LSRN (Meng, Saunders, Mahoney, SIAM J. Sci. Comput. 2014).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse.linalg
from sklearn.exceptions import ConvergenceWarning


def run_lsqr(precond, products, centred, *, tol, max_iter):
    """LSQR on ``A N`` from the sketch-and-solve start, once per target:
    ``(X, n_iter, istops, optimality)``."""
    n, d = centred.shape[0], precond.basis.shape[0]
    k, N = precond.rank, precond.basis
    op = scipy.sparse.linalg.LinearOperator(
        (n, k), dtype=np.float64, matvec=lambda z: products.forward(N @ np.ravel(z)),
        rmatvec=lambda u: N.T @ products.adjoint(np.ravel(u)))
    starts = precond.singular_values[:k, None] ** 2 * (N.T @ precond.x0.reshape(d, -1))
    Z, istops, optimality, n_iter = np.zeros((k, centred.shape[1])), [], [], 0
    for j in range(centred.shape[1] if k else 0):
        z = starts[:, j]
        # LSQR updates its residual by a recurrence that drifts from b - A N z at
        # about 1e-8 relative accuracy in x when cond(A) = 1e6; one restart from
        # the computed z (scipy recomputes the residual for x0) removes the drift.
        for _ in range(2):
            z, istop, itn, r1norm, _, anorm, _, arnorm, _, _ = scipy.sparse.linalg.lsqr(
                op, centred[:, j], atol=tol, btol=tol, conlim=1e12, iter_lim=int(max_iter),
                x0=z)
            n_iter += int(itn)
        Z[:, j] = z
        istops.append(int(istop))
        denominator = anorm * r1norm
        optimality.append(float(arnorm / denominator) if denominator > 0 else 0.0)
    if not k:
        istops, optimality = [0] * centred.shape[1], [0.0] * centred.shape[1]
    return N @ Z, n_iter, istops, optimality


def warn_unconverged(istops, optimality, above_rounding, *, tol, max_iter, ndim, method):
    """A ``ConvergenceWarning`` for every target that stopped at ``max_iter`` (istop
    7), or that stopped making progress (istop 5) above ``tol`` while its
    ``U^T r`` is above the rounding it can carry (``above_rounding``): a
    gradient within its rounding is as small as floating point lets it be
    (LSQR's istop 5 means that), whatever ``tol`` asks."""
    for j, (istop, value) in enumerate(zip(istops, optimality)):
        which = "" if ndim == 1 else f" for target {j}"
        if istop == 7:
            warnings.warn(f"{method} stopped at max_iter={max_iter} iterations{which} with "
                          f"relative normal-equation residual {value:.3g} > tol={tol:g}; "
                          "increase max_iter (or sketch_size, for a better preconditioner)",
                          ConvergenceWarning, stacklevel=4)
        elif istop == 5 and value > tol and above_rounding[j]:
            warnings.warn(f"{method} stopped making progress{which} at relative "
                          f"normal-equation residual {value:.3g} > tol={tol:g}, above the "
                          "rounding of its products with A; use solver='lsqr' (or a larger "
                          "sketch_size)", ConvergenceWarning, stacklevel=4)
