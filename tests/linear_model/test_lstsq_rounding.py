"""The rounding terms of ``sketch_lstsq``'s error bound are Higham's worst cases:
reached by inputs rounded as badly as eq. (3.5) of *Accuracy and Stability of
Numerical Algorithms* (2nd ed.) allows, with no factor of 2 to spare. Exact
values are computed in rationals."""

from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

from dasketch.kernels.shrink import gamma
from dasketch.linear_model.lstsq_bounds import (
    adjoint_rounding,
    basis_rounding,
    error_bound,
    intercept_rounding,
    residual_rounding,
)


def test_error_bound_covers_a_gradient_rounded_to_zero():
    """``A`` a column of 1000 ones, ``b = +-1 + epsilon`` with ``A^T b`` just under
    ``gamma_{n+2} |A|^T |b|``, and ``x = 0``: a computed ``A^T r`` may then be 0.
    The check sketch is taken to stretch ``U = A N`` by the whole slack, so that
    the bound's estimate of ``sigma_min(U)`` is exact, and the bound must cover
    ``||x*|| = |A^T b| / n`` from the rounding terms alone. It does, 1.7 % above
    it: half the product's rounding term would miss it, twice it would be about
    twice the error."""
    n = 1000
    g = gamma(n + 2)
    b = np.where(np.arange(n) % 2, -1.0, 1.0) + (1 - 1e-6) * g
    exact = sum(Fraction(v) for v in b)                      # A^T b
    assert abs(exact) <= Fraction(g) * sum(abs(Fraction(v)) for v in b)
    precond = SimpleNamespace(basis=np.array([[1 / np.sqrt(n)]]), singular_values=np.array(
        [np.sqrt(n)]), rank=1, check_singular_values=np.array([2.0]),
        frobenius=np.sqrt(n), mean=None, weight_sum=float(n))
    bound = error_bound(precond, np.zeros((1, 1)), b[:, None], np.zeros((1, 1)),
                        np.array([np.linalg.norm(b)]))[0]
    error = float(abs(exact) / n)
    assert error <= bound <= 1.05 * error


def test_rounding_terms_are_reached_by_rows_of_equal_entries():
    """Rows of equal positive entries: the elementwise bounds ``gamma_{d+3} (|A| |x|
    + |b|)`` of the residual and ``gamma_{n+2} |A|^T |r|`` of ``A^T r`` have the
    norms the rounding terms take (the residual's term is also multiplied by at
    least 4 in the error bound, which assumes the check sketch may distort by 2)."""
    n, d = 500, 7
    A, x, b, r = np.full((n, d), 3.0), np.full(d, 2.0), np.full(n, 5.0), np.full(n, 0.5)
    frobenius = np.linalg.norm(A)
    worst = np.linalg.norm(gamma(d + 3) * (np.abs(A) @ np.abs(x) + np.abs(b)))
    allowed = residual_rounding(d, frobenius, np.linalg.norm(x), np.linalg.norm(b))
    assert 0.5 * allowed < worst <= allowed * (1 + 1e-12)
    worst = np.linalg.norm(gamma(n + 2) * (np.abs(A).T @ np.abs(r)))
    allowed = adjoint_rounding(n, frobenius, np.linalg.norm(r))
    assert 0.5 * allowed < worst <= allowed * (1 + 1e-12)


def test_intercept_rounding_is_reached_by_float64_with_one_feature():
    """``shift - m x`` computed in float64 for 20,000 draws of ``m, x`` in ``[1, 2)``
    and ``shift`` in ``[0, 1e-3)``: the product and the subtraction round in the
    same direction by nearly half an ulp each, so the largest error exceeds half
    of ``gamma_2 (|shift| + |m x|)`` (0.98 of it) and none exceeds it."""
    rng = np.random.default_rng(0)
    m, x, shift = 1 + rng.random(20000), 1 + rng.random(20000), 1e-3 * rng.random(20000)
    worst = 0.0
    for mi, xi, si in zip(m, x, shift):
        got = (np.array([si]) - np.array([mi]) @ np.array([[xi]]))[0]
        error = abs(Fraction(got) - (Fraction(si) - Fraction(mi) * Fraction(xi)))
        allowed = intercept_rounding(np.array([si]), np.array([mi]), np.array([[xi]]))[0]
        worst = max(worst, float(error / Fraction(allowed)))
    assert 0.5 < worst <= 1.0


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 63,
                    reason="ranking the candidates needs an extended long double")
@pytest.mark.parametrize("basis, reached", [([[1.0]], 1.5), ([[1.0], [1.0]], 1.5),
                                            ([[1.0, 1.0], [1.0, -1.0]], 1.9)])
def test_basis_rounding_is_covered_and_reached(basis, reached):
    """``N^T g`` computed as ``sketch_lstsq`` computes it (``N.T @ A^T r``, one
    column per target) for bases ``c H`` of equal-magnitude entries (``c`` in
    ``[1, 2)``) and 20,000 gradients of nearly equal entries, scaled so that the
    products lie just above a power of 2: the exact error of the worst columns
    (ranked in extended precision) is within :func:`basis_rounding` and reaches
    more than ``1 / reached`` of it (about 1.0, 0.74 and 0.55 with a fused
    multiply-add, whose first product and additions are the only roundings), so
    that half the term misses an error and twice it is more than ``2 / reached``
    times the worst error found."""
    rng = np.random.default_rng(0)
    H = np.array(basis)
    d, k = H.shape
    worst = 0.0
    for c in 1.0 + rng.random(50):
        N = c * H
        a = (1.0 + 1e-6 * rng.random(20000)) * (1.0 / c)
        G = np.vstack([a, a * (1.0 + np.finfo(float).eps * rng.integers(-64, 65, a.size))])[:d]
        computed = N.T @ G
        wide = N.T.astype(np.longdouble) @ G.astype(np.longdouble)
        allowed = basis_rounding(d, k, np.linalg.norm(N, 2), np.linalg.norm(G, axis=0))
        ranked = np.argsort(np.linalg.norm((computed - wide).astype(float), axis=0) / allowed)
        for j in ranked[-3:]:
            g = [Fraction(v) for v in G[:, j]]
            error = float(sum((Fraction(v) - sum(Fraction(n) * gi for n, gi in zip(N[:, i], g)))
                              ** 2 for i, v in enumerate(computed[:, j]))) ** 0.5
            assert error <= allowed[j]
            worst = max(worst, error / allowed[j])
    assert worst * reached > 1.0
