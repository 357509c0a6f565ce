r"""Ridge regression with nonnegative coefficients (``positive=True``).

``min_{w >= 0, b} lambda/2 ||w||^2 + 1/2 sum_i s_i (x_i^T w + b - y_i)^2`` for
every target at once, the intercept unconstrained (as scikit-learn's
``Ridge(positive=True)``), by the preconditioned projected Newton method of
:mod:`dasketch.linear_model.nonnegative`, with the preconditioner of the
unconstrained problem (:mod:`.preconditioner`) restricted to the free
coefficients, started from the Algorithm 1 solution projected onto ``w >= 0``
or from the best constant model, whichever has the lower objective.

Certificate. With the intercept profiled out, ``phi(w) = min_b F(w, b)`` is
``lambda``-strongly convex with gradient ``grad phi(w) = g_w - X^T s g_b /
sum(s)`` (:meth:`.solvers.FullProblem.bound_parts`), and for ``c > 0`` the
natural residual ``min(c w, grad phi)`` bounds the error of ``w``:
``||w - w*|| <= (1 + L/c) ||min(c w, grad phi(w))|| / lambda`` for ``L`` the
Lipschitz constant of ``grad phi`` (Pang, Math. Oper. Res. 12(3), 1987,
Theorem 3.1: add the optimality conditions of the projection ``P(w - grad
phi / c)`` and of ``w*``, then use strong monotonicity and the Lipschitz bound).
As ``c -> inf`` the residual tends to the projected gradient ``pg`` (``grad phi``
where ``w_i > 0`` or ``grad_i phi < 0``, else 0) and the bound to

.. math:: \|w - w^*\| \le \|pg(w)\| / \lambda,

the unconstrained bound with the gradient replaced by ``pg``, zero exactly at a
KKT point. It is taken, with the same rounding term, by
:meth:`.solvers.FullProblem.error_bound`; the optimality residual is
``||[pg(g_w); g_b]|| / ||grad F(0, b0)||``, the KKT residual of the full problem.
"""

from __future__ import annotations

import numpy as np

from dasketch.linear_model.dual_projection.preconditioner import SHIFT_FLOOR
from dasketch.linear_model.dual_projection.solvers import _squared_preconditioners, record
from dasketch.linear_model.nonnegative import (
    RestrictedPreconditioner,
    column_norms,
    projected_gradient,
    projected_newton,
)
from dasketch.utils._sklearn_compat import InvalidParameterError

# The projection captures X when ||X^T S Q||_F^2 is this close to sum_i s_i ||x_i||^2.
EXACT = 1e-8


def check_positive(positive, loss, solver, l1_share=0.0, alpha=None):
    """Refuse ``positive=True`` where there is no method for it (before any pass):
    with an l1 part in the penalty (``l1_share > 0``, proximal Newton over
    ``w >= 0``, :mod:`.proximal`) the logistic loss at ``alpha=0``, whose
    unpenalised Newton-CG is unconstrained; with ``penalty="l2"`` another loss
    than the squared one, and ``solver="paper"``."""
    if not positive:
        return
    if l1_share > 0:
        if loss != "squared" and alpha is not None and not np.any(alpha):
            raise InvalidParameterError(
                f"positive=True with loss={loss!r} needs alpha > 0 (the unpenalised "
                "problem is fitted without constraints), got alpha=0; use alpha > 0 or "
                "positive=False")
        return
    if loss != "squared":
        raise InvalidParameterError(
            f"positive=True needs loss='squared' with penalty='l2' (ridge: a quadratic "
            f"objective), got loss={loss!r}; use an l1 or elastic-net penalty "
            f"(l1_ratio > 0) or positive=False")
    if solver == "paper":
        raise InvalidParameterError(
            "positive=True needs solver='cg' (Algorithms 1 and 2 of dual random "
            "projection are unconstrained), got solver='paper'")


def positive_squared(full, V, intercept_only, gradient_intercept_only, gradient_at_zero,
                     objective_at_zero, growth, reference, tol, max_iter, history):
    """:func:`~.solvers.pcg_squared`'s counterpart for ``w >= 0``: returns ``V,
    cert, f, n_iter, G`` where ``G`` is the KKT residual (see the module
    docstring) in the place of the gradient, so that
    :meth:`~.solvers.FullProblem.error_bound` and
    :meth:`~.solvers.FullProblem.done` certify the constrained solution."""
    problem = _RidgeProblem(full, growth, gradient_at_zero, objective_at_zero, reference,
                            tol, history)
    V, G, f, n_iter = projected_newton(problem, [V, intercept_only], max_iter=max_iter)
    G_kkt = problem.kkt(V, G)
    return V, column_norms(_unprofiled(problem, V, G)) / reference, f, n_iter, G_kkt


def _unprofiled(problem, V, G):
    """``[pg(g_w); g_b]``, the KKT residual of the full problem."""
    W, _ = problem.full.split(V)
    gw = G[:-1] if problem.full.fit_intercept else G
    return problem.full.stack(projected_gradient(W, gw), G[-1])


class _RidgeProblem:
    """The ridge problem as :func:`~dasketch.linear_model.nonnegative.projected_newton`
    sees it (one pass of ``full`` per product)."""

    def __init__(self, full, growth, g_zero, f_zero, reference, tol, history):
        self.full, self.g_zero, self.f_zero = full, g_zero, f_zero
        self.reference, self.tol, self.history = reference, tol, history
        self.bounded = np.ones(g_zero.shape[0], dtype=bool)
        column_sums, weight_sum, frobenius2, _ = full.coupling
        if full.fit_intercept:
            self.bounded[-1] = False
        # ||X_a^T S X_a + diag(lambda, 0)|| <= its trace
        self.lipschitz = frobenius2 + (weight_sum if full.fit_intercept else 0.0) + full.lam
        self.precs = _squared_preconditioners(full, growth.basis(), growth.gram)
        self.iteration = 0

    def product(self, P, columns):
        return self.full.hessian(None, P, columns)

    def preconditioner(self, k, free):
        prec = self.precs[k]
        factor, lower = prec.factor
        T = np.tril(factor) if lower else np.triu(factor)
        inside = T @ T.T if lower else T.T @ T          # core + shift
        # A projection that captures all of X (its rank at most m) makes the
        # captured part exact: the rest of the Hessian is lambda I.
        outside = prec.outside if prec.captured < (1.0 - EXACT) * self.full.coupling[2] \
            else max(float(self.full.lam[k]), SHIFT_FLOOR * float(inside.max()),
                     np.finfo(float).tiny)
        E = inside - outside * np.eye(inside.shape[0])
        coupling = None
        if self.full.fit_intercept:
            coupling = (prec.c, prec.schur + float(prec.c @ prec.Ac))
            free = free[:-1]
        return RestrictedPreconditioner(outside, prec.V, E, free, coupling)

    def kkt(self, V, G):
        """``G`` with the coefficients' part replaced so that its profiled
        gradient is ``pg(grad phi)`` (:meth:`.solvers.FullProblem.bound_parts`
        profiles ``g_w - X^T s g_b / sum(s)``)."""
        full = self.full
        W, _ = full.split(V)
        if not full.fit_intercept:
            return projected_gradient(W, G)
        column_sums, weight_sum = full.coupling[:2]
        shift = np.outer(column_sums, G[-1] / weight_sum)
        return full.stack(projected_gradient(W, G[:-1] - shift) + shift, G[-1])

    def certify(self, V, G, f):
        """Error bound, certified, at the rounding floor (per target)."""
        G_kkt = self.kkt(V, G)
        gradient, rounding = self.full.bound_parts(V, G_kkt, f)
        W, _ = self.full.split(V)
        bound = gradient + rounding
        cert = column_norms(_unprofiled(self, V, G)) / self.reference
        self.history.append(record(self.iteration, self.full.passes, cert, f,
                                   n_components=self.full.n_components))
        self.iteration += 1
        return bound, bound <= self.tol * column_norms(W), gradient <= rounding
