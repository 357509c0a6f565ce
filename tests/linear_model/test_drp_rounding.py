"""The rounding terms of dual random projection's error bounds are Higham's worst
cases (*Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. (3.5)):
a gradient whose exact value is as small as that analysis lets a computed one be
rounded to zero is covered, by less than twice its size. Exact values are
computed in rationals; where the minimiser is transcendental, it is bracketed by
strong convexity and the curvature's bound."""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from dasketch.kernels.shrink import gamma
from dasketch.linear_model.dual_projection.multinomial import bound_parts
from dasketch.linear_model.dual_projection.rounding import (
    margin_rounding,
    product_rounding,
)
from dasketch.linear_model.dual_projection.solvers import FullProblem

N = 1000


def _cancelling_weights(n, scale):
    """Weights ``1 + c`` and ``1`` alternating, with ``sum_i +-s_i scale`` (signs
    alternating) just under ``gamma_n sum_i s_i |scale|``: a computed sum of
    those terms may be 0."""
    s = np.where(np.arange(n) % 2, 1.0, 1.0 + 2 * (1 - 1e-5) * gamma(n))
    signs = np.where(np.arange(n) % 2, -1, 1)
    exact = sum(Fraction(w) * int(t) for w, t in zip(s, signs)) * Fraction(scale)
    assert abs(exact) <= Fraction(gamma(n)) * sum(Fraction(w) for w in s) * abs(Fraction(scale))
    return s, signs, exact


def _problem(loss, n, s, lam, smoothing=1.0):
    """One feature of ones, no intercept: ``w = 0`` has exact margins 0."""
    return FullProblem(SimpleNamespace(shape=(n, 1)), np.zeros((n, 1)), np.zeros((n, 1)),
                       None, lam=lam, loss=loss, smoothing=smoothing, fit_intercept=False,
                       split_every=None, client=None,
                       coupling=(np.array([s.sum()]), s.sum(), s.sum(), 1.0))


def test_squared_loss_bound_covers_a_gradient_rounded_to_zero():
    """Targets ``+-1 + c`` with ``X^T y`` just under ``gamma_n |X|^T |y|``: the
    gradient at ``w = 0``, ``-X^T y``, may be computed as 0, and the bound must
    cover ``||w*|| = |X^T y| / (n + lambda)`` from the rounding alone. It does,
    0.4 % above it (``lambda = 1000 n``): half the term misses it, twice it is
    twice the error."""
    y = np.where(np.arange(N) % 2, -1.0, 1.0) + (1 - 1e-5) * gamma(N)
    exact = sum(Fraction(v) for v in y)
    assert abs(exact) <= Fraction(gamma(N)) * sum(abs(Fraction(v)) for v in y)
    lam = 1000.0 * N
    problem = _problem("squared", N, np.ones(N), lam)
    bound = problem.error_bound(np.zeros((1, 1)), np.zeros((1, 1)), 0.5 * np.sum(y * y))[0]
    error = float(abs(exact) / (N + Fraction(lam)))
    assert error <= bound <= 1.05 * error


def test_smoothed_hinge_bound_covers_a_gradient_rounded_to_zero():
    """Smoothing 1/2 and ``w = 0``: every margin lies where ``l'(t, y) = -y``
    exactly and the curvature is 0, so ``w* = -g / lambda`` and the bound
    ``||g|| / lambda`` is the error. With weights making ``g`` just under
    ``gamma_n sum_i s_i`` the computed ``g`` may be 0; the rounding term covers
    the error, 0.4 % above it."""
    s, signs, exact = _cancelling_weights(N, 1)
    problem = _problem("smoothed_hinge", N, s, 1.0, smoothing=0.5)
    f = 0.75 * s.sum()            # l(0, y) = 1 - smoothing / 2
    bound = problem.error_bound(np.zeros((1, 1)), np.zeros((1, 1)), np.array([f]))[0]
    error = float(abs(exact))     # lambda = 1
    assert error <= bound <= 1.05 * error


def test_logistic_bound_covers_a_gradient_rounded_to_zero():
    """At ``w = 0``, ``l'(0, y) = -y / 2`` exactly; weights make ``g`` just under
    ``gamma_n sum_i s_i / 2``. With the curvature at most ``sum(s) / 4``,
    ``||g|| / (lambda + sum(s) / 4) <= ||w*|| <= ||g|| / lambda``: the bound
    covers the upper end and is below twice the lower (the bound on
    ``sum_i s_i l'^2`` from the loss, ``sum(s) / 2``, is twice the exact one)."""
    s, signs, exact = _cancelling_weights(N, 0.5)
    lam = 1000.0 * s.sum()
    problem = _problem("logistic", N, s, lam)
    bound = problem.error_bound(np.zeros((1, 1)), np.zeros((1, 1)),
                                np.array([np.log(2.0) * s.sum()]))[0]
    upper = float(abs(exact) / Fraction(lam))
    lower = float(abs(exact) / (Fraction(lam) + sum(Fraction(w) for w in s) / 4))
    assert upper <= bound <= 1.5 * lower


def test_softmax_bound_covers_a_gradient_rounded_to_zero():
    """Two classes, ``W = 0``: ``p_i = (1/2, 1/2)`` exactly, and weights make each
    class's gradient just under ``gamma_n sum_i s_i |p_ik - y_ik|``. The softmax's
    curvature is at most ``sum(s) / 2``, which brackets ``||W*||_F``; the bound
    covers the upper end and is below twice the lower."""
    s, signs, exact = _cancelling_weights(N, 0.5)
    Y = np.column_stack([signs > 0, signs < 0]).astype(float)
    lam = 1000.0 * s.sum()
    problem = SimpleNamespace(lam=lam, fit_intercept=False,
                              split=lambda V: (V, np.zeros(V.shape[1])))
    coupling = (s.sum(), s.sum(), 1.0, (N, 1))
    G = np.zeros((1, 2))
    _, rounding = bound_parts(problem, np.zeros((1, 2)), G, None, coupling, 1.0,
                              np.log(2.0) * s.sum())
    assert Y.sum() == N
    norm = abs(exact) * 2 ** 0.5            # both classes, opposite signs
    upper = float(norm) / lam
    lower = float(norm) / (lam + s.sum() / 2)
    assert upper <= rounding <= 1.5 * lower


@pytest.mark.parametrize("n, d", [(500, 7), (64, 300)])
def test_margin_and_product_terms_are_reached_by_rows_of_equal_entries(n, d):
    """Rows of equal positive entries: the elementwise bounds ``gamma_{d+1} (|X| |w|
    + |b|)`` of the margins and ``gamma_{n+2} |X|^T (|X| |w| + |b|)``,
    ``gamma_{n+3} |X|^T |y|`` of the products, and ``u |X|^T |X| |v|`` of a rounded
    update of ``v``, have the norms the terms take."""
    X, w, b, y = np.full((n, d), 3.0), np.full(d, 2.0), 5.0, np.full(n, 4.0)
    F, W = np.linalg.norm(X), float(n)
    t = np.abs(X) @ np.abs(w) + abs(b)
    worst = np.linalg.norm(gamma(d + 1) * t)
    allowed = margin_rounding(d, F, np.linalg.norm(w), W, abs(b))
    assert worst == pytest.approx(allowed, rel=1e-12)
    spread = F * np.linalg.norm(w) + np.sqrt(W) * abs(b)
    coef, _ = product_rounding(n, F, W, 0.0, np.linalg.norm(w), spread, 0.0,
                               np.linalg.norm(y), False)
    worst = np.linalg.norm((gamma(n + 2) + gamma(1)) * (X.T @ t) + gamma(n + 3) * (X.T @ y))
    assert worst == pytest.approx(coef, rel=1e-12)
