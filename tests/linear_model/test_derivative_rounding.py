"""The rounding of ``s l'(t, y)``, evaluated as dual random projection's passes
evaluate it (``s * loss_derivative(t, y, loss, smoothing)``), is covered by
:func:`derivative_rounding` and reaches more than half of it: inputs searched for
the worst rounding (margins and smoothings, then a weight rounding the last product
the same way) are ranked in extended precision, and the worst are measured exactly,
in rationals (the exponentials of the logistic loss and the softmax to 60
digits)."""

from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy.special import softmax

from dasketch.linear_model.dual_projection.losses import loss_derivative
from dasketch.linear_model.dual_projection.rounding import derivative_rounding, softmax_rounding

U = np.finfo(np.float64).eps / 2
WIDE = np.longdouble          # 64-bit significand: ranks errors of order u to 1e-3 u
pytestmark = pytest.mark.skipif(np.finfo(WIDE).nmant < 63,
                                reason="ranking the candidates needs an extended long double")


def _wide_derivative(t, y, loss, smoothing):
    """``l'(t, y)`` in extended precision, for ranking candidates."""
    t, y = t.astype(WIDE), y.astype(WIDE)
    if loss == "squared":
        return t - y
    if loss == "logistic":
        return -y / (1 + np.exp(y * t))
    return -y * np.clip((1 - y * t) / WIDE(smoothing), 0, 1)


def _exact_derivative(t, y, loss, smoothing):
    """``l'(t, y)`` of floats ``t, y, smoothing`` as a Fraction (the logistic loss
    to 60 significant digits, a relative error of 1e-60)."""
    t, y = Fraction(float(t)), Fraction(float(y))
    if loss == "squared":
        return t - y
    if loss == "logistic":
        with localcontext() as ctx:
            ctx.prec = 60
            return Fraction(Decimal(-y.numerator) / (1 + Decimal(float(y * t)).exp()))
    return -y * min(max((1 - y * t) / Fraction(float(smoothing)), Fraction(0)), Fraction(1))


def _worst_relative_errors(loss, t, y, smoothing, rng, keep=6, weights=20000):
    """The exact relative errors of ``s l'`` at the candidates of largest rounding:
    for each sign, the margins (and smoothings) whose ``l'`` rounds most that way,
    each with the weight ``s`` (near ``1 / |l'|``, so that ``s l'`` lies just above
    a power of 2 where the relative rounding is largest) that rounds the product
    most the same way."""
    smoothing = np.broadcast_to(smoothing, t.shape)
    computed = loss_derivative(t, y, loss, smoothing)
    wide = _wide_derivative(t, y, loss, smoothing)
    live = np.flatnonzero(wide != 0)
    relative = (computed[live] - wide[live]) / np.abs(wide[live])
    errors = []
    for sign in (1.0, -1.0):
        for i in live[np.argsort(sign * relative)[-keep:]]:
            s = (1.0 + 1e-6 * rng.random(weights)) * (1.0 / abs(computed[i]))
            one = np.full(weights, 1.0)
            out = s * loss_derivative(t[i] * one, y[i] * one, loss, smoothing[i] * one)
            reference = s.astype(WIDE) * wide[i]
            j = np.argmax(sign * (out - reference) / np.abs(reference))
            exact = Fraction(float(s[j])) * _exact_derivative(t[i], y[i], loss, smoothing[i])
            errors.append(abs(Fraction(float(out[j])) - exact) / abs(exact))
    return errors


def _candidates(loss, rng, n=200000):
    """Margins, labels and smoothings where each rounding of ``l'`` can be near
    its largest relative size: results just above a power of 2."""
    if loss == "squared":           # t - y just above 1: t just above 1, y tiny
        t = 1.0 + 2 * U * rng.integers(0, 2 ** 40, n)
        return t, -2 * U * rng.random(n), 1.0
    y = rng.choice([-1.0, 1.0], n)
    if loss == "logistic":
        return rng.uniform(-40.0, 40.0, n) * y, y, 1.0
    # 1 - y t just above 1 (y t a tiny negative), divided by a smoothing just
    # below 2 so that the quotient lies just above 1/2
    t = -4 * U * rng.random(n) * y
    return t, y, 2.0 * (1.0 - 1e-6 * rng.random(n))


@pytest.mark.parametrize("loss", ["squared", "logistic", "smoothed_hinge"])
def test_derivative_rounding_is_covered_and_reached(loss):
    """``gamma_2`` (``t - y``, the weight), ``gamma_5`` (``expit``'s exponential,
    within one ulp, its addition and division, the weight) and ``gamma_3``
    (``1 - y t``, the division by the smoothing, the weight): every exact error
    measured is within the bound, and the largest is more than 1/1.75 of it (the
    squared loss and the smoothed hinge reach nearly all of it; the logistic
    loss, whose ``exp`` rounds by at most about 0.6 ulp, about 0.67), so that
    half the bound misses an error and twice it is more than 3.5 times the
    worst error found."""
    rng = np.random.default_rng(0)
    errors = _worst_relative_errors(loss, *_candidates(loss, rng), rng)
    bound = derivative_rounding(loss)
    assert max(errors) <= Fraction(bound)
    assert bound <= 1.75 * float(max(errors))


def _exact_softmax_error(t, label, s, out):
    """``||out - s (p - y)|| / s`` for ``p = softmax(t)`` and ``y`` one-hot at
    ``label``, to 60 significant digits."""
    with localcontext() as ctx:
        ctx.prec = 60
        e = [(Decimal(float(v)) - Decimal(float(t.max()))).exp() for v in t]
        total = sum(e)
        weight = Decimal(float(s))
        squares = sum((Decimal(float(o)) - weight * (ek / total - (k == label))) ** 2
                      for k, (o, ek) in enumerate(zip(out, e)))
        return float(squares.sqrt() / weight)


def test_softmax_rounding_is_covered_and_reached():
    """``s (softmax(t) - y)`` as the multinomial passes compute it, for 7 classes:
    rows whose largest exponential is 1 and whose six others are just above ``u``,
    so that every addition of the sum rounds up by nearly ``u``, with labels
    elsewhere and weights in ``[1, 1.2)``, and rows of normal margins. The exact
    errors of the worst (ranked in extended precision) are within
    :func:`softmax_rounding` and the largest is 0.6 of it: half the bound misses
    it, twice it is more than three times it."""
    rng = np.random.default_rng(0)
    n, K = 100000, 7
    T = np.vstack([np.zeros((n, K)), rng.normal(0.0, 2.0, (n, K))])
    T[:n, 0] = rng.integers(-3, 4, n)
    T[:n, 1:] = T[:n, :1] + np.log(U * (1.0 + 0.02 * rng.random((n, K - 1))))
    labels = rng.integers(1, K, 2 * n)
    Y = np.eye(K)[labels]
    s = 1.0 + 0.2 * rng.random(2 * n)
    out = s[:, None] * (softmax(T, axis=1) - Y)
    wide = T.astype(WIDE)
    wide = np.exp(wide - wide.max(axis=1, keepdims=True))
    wide = s[:, None] * (wide / wide.sum(axis=1, keepdims=True) - Y)
    ranked = np.argsort(np.linalg.norm((out - wide).astype(float), axis=1) / s)
    errors = [_exact_softmax_error(T[i], labels[i], s[i], out[i]) for i in ranked[-8:]]
    bound = softmax_rounding(K)
    assert max(errors) <= bound
    assert bound <= 1.75 * max(errors)
