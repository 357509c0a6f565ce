"""The unpenalised problem (``alpha = 0``) of dual random projection's estimators.

Dual random projection itself needs ``lambda > 0`` (the dual problem and the
recovery ``w = -X^T S l' / lambda`` exist only then). With ``lambda = 0``:

* squared loss: least squares, solved by sketch-preconditioned LSQR
  (:func:`~dasketch.linear_model.lstsq_solver.solve_lstsq`; Avron, Maymounkov,
  Toledo 2010; Meng, Saunders, Mahoney 2014), the minimum-norm solution when X is
  rank deficient (as ``numpy.linalg.lstsq`` and ``LinearRegression``), certified
  by its normal-equation residual ``||A^T r|| / (||A|| ||r||)`` and its
  coefficient bound;
* logistic loss: the projection-preconditioned Newton-CG of :mod:`.newton`
  (Nocedal and Wright, Algorithm 7.1) on the objective without the ridge term,
  from the best constant model. Without strong convexity no bound on
  ``||w - w*||`` follows from the gradient: the certificate is the relative
  optimality residual ``||grad F|| / ||grad F(0, b0)||`` (the intercept
  profiled out), and the fit stops when it is below ``tol``
  (``coef_error_bound`` is infinite). On linearly separable data no minimiser
  exists (the infimum 0 is approached as ``||w|| -> inf``): that is certified
  when the objective falls below ``log(2)`` times the smallest positive sample
  weight (every sample is then classified correctly, so a scaled-up ``w``
  lowers the objective further), and a ``ConvergenceWarning`` says so, with
  the iterate reached returned, as scikit-learn does.

The smoothed hinge (whose unpenalised Hessian vanishes on every sample beyond
the margin) and the paper's Algorithm 2 are refused with ``alpha = 0``.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse
from sklearn.exceptions import ConvergenceWarning

from dasketch.linear_model.dual_projection.result import DualRandomProjectionResult
from dasketch.linear_model.dual_projection.solvers import record
from dasketch.utils.stack_level import caller_stacklevel

# LSQR's reasons for stopping that mean it met its tolerance (scipy's istop).
_LSQR_MET = (0, 1, 2, 4, 5)


def check_unpenalised(loss, solver):
    """Refuse ``alpha = 0`` where there is no method for it."""
    if solver == "paper":
        raise ValueError("alpha=0 with solver='paper': Algorithms 1 and 2 of dual random "
                         "projection need alpha > 0; use solver='cg'")
    if loss == "smoothed_hinge":
        raise ValueError("alpha=0 with loss='smoothed_hinge': the unpenalised problem has "
                         "no unique minimiser (its curvature vanishes beyond the margin); "
                         "use alpha > 0 or loss='logistic'")


def least_squares(X, source, Y, weights, *, fit_intercept, tol, max_iter, seed, client,
                  cache, block_rows, squeeze, positive=False):
    """Unpenalised least squares by sketch-preconditioned LSQR, as a
    :class:`DualRandomProjectionResult`.

    ``n_components`` of the result is the rank of the sketch preconditioner,
    ``naive_coef`` the sketch-and-solve solution LSQR starts from (its
    ``naive_intercept`` is not computed: NaN), ``n_passes`` the passes over X
    (:class:`~dasketch.linear_model.lstsq_solver.LstsqResult`), and
    ``dual_coef`` is not available. With ``positive`` the coefficients are
    constrained ``>= 0``
    (:mod:`~dasketch.linear_model.nonnegative_lstsq`)."""
    from dasketch.linear_model.lstsq_solver import solve_lstsq

    in_memory = isinstance(X, np.ndarray) or scipy.sparse.issparse(X)
    res = solve_lstsq(X if in_memory else source, Y, tol=min(max(tol, 1e-15), 0.5),
                      max_iter=max_iter, sketch_size=None, embedding="osnap",
                      random_state=seed, client=client, sample_weight=weights,
                      fit_intercept=fit_intercept, cache=cache,
                      block_rows=block_rows, positive=positive)
    cert = np.atleast_1d(res.optimality_residual)
    bound = np.atleast_1d(res.coef_error_bound)
    istop = np.atleast_1d(res.istop)
    converged = np.isin(istop, _LSQR_MET) & np.isfinite(bound)
    conlim = ~np.isin(istop, (*_LSQR_MET, 7))     # 7, max_iter, has warned already
    if conlim.any():
        warnings.warn(f"least squares (alpha=0): LSQR stopped on its condition limit with "
                      f"relative normal-equation residual {float(cert.max()):.3g} > "
                      f"tol={tol:g}; X is too ill-conditioned for the sketch "
                      "preconditioner: increase alpha", ConvergenceWarning,
                      stacklevel=caller_stacklevel())
    objective = 0.5 * np.atleast_1d(res.residual_norm) ** 2
    passes = res.n_passes
    x = res.x[:, None] if res.x.ndim == 1 else res.x
    pick = (lambda a: float(a[0])) if squeeze else (lambda a: a)
    sketch = res.sketch_solution.reshape(x.shape)
    return DualRandomProjectionResult(
        coef=x[:, 0] if squeeze else x.T,
        intercept=pick(np.atleast_1d(res.intercept)),
        optimality_residual=pick(cert), coef_error_bound=pick(bound),
        objective=pick(objective), converged=bool(converged.all()),
        n_iter=int(res.n_iter), n_passes=passes,
        history=[record(res.n_iter, passes, cert, objective)],
        naive_coef=sketch[:, 0] if squeeze else sketch.T,
        naive_intercept=pick(np.full(x.shape[1], np.nan)), best_iteration=int(res.n_iter),
        n_components=int(res.rank), random_state=seed, cache=res.cache)


def separable(objective, weights):
    """Targets whose unpenalised logistic objective certifies linearly separable
    data: below ``log(2) min_{s_i > 0} s_i``, the loss of one sample on the wrong
    side of (or on) the decision boundary."""
    smallest = weights[weights > 0].min()
    return np.asarray(objective) < np.log(2.0) * smallest


def warn_separable(which, n_iter, cert):
    """The ``ConvergenceWarning`` of an unpenalised logistic fit on separable data."""
    targets = "" if which is None else f" (targets {which})"
    warnings.warn(f"logistic regression without penalty (alpha=0): the data are linearly "
                  f"separable{targets}, so the unpenalised optimum is at infinity (no finite "
                  f"minimiser exists); returning the iterate reached after {n_iter} Newton "
                  f"steps (relative optimality residual {float(np.max(cert)):.3g}), which "
                  "separates the training data. Use alpha > 0 for a finite, unique model",
                  ConvergenceWarning, stacklevel=caller_stacklevel())
