"""Every stated bound holds in floating point, and each of its constants is needed.

The data are chosen so that each bound is nearly tight: errors at the level of
float64 rounding (where only the rounding term makes a bound hold), a sketch whose
RFD error equals its bound, a rank-one error seen through one or two Gaussian
vectors, and a Lanczos run of few steps on an adversarial spectrum. The reference
errors are computed in extended precision (``numpy.longdouble``).
"""

import math

import numpy as np
import pytest
import scipy.stats

from dasketch.kernels.frequent_directions import Sketch, merge_sketches, sketch_rows
from dasketch.kernels.shrink import EPS
from dasketch.kernels.sparse_fd import (
    LANCZOS_TOLERANCE,
    certified_largest_eigenvalue,
    error_from_products,
    lanczos_steps,
    largest_eigenvalue,
    sketch_rows_randomized,
)

BLOCK_ROWS = 250


def _three_directions_and_tiny_noise(seed, n=1000, d=100):
    """Three strong directions plus noise of 1e-6: the sketch's error is at the
    level of float64 rounding of ``A^T A``."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, 3))
    V = np.linalg.qr(rng.standard_normal((d, 3)))[0]
    return (U * [100.0, 50.0, 20.0]) @ V.T + 1e-6 * rng.standard_normal((n, d))


def _reference_error(A, sketch):
    """``||A^T A + alpha0 I - (B^T B + alpha I)||_2`` with the Gram matrices in
    extended precision."""
    A = A.astype(np.longdouble)
    B = sketch.B.astype(np.longdouble)
    if sketch.centered:
        A = A - A.mean(axis=0)
    E = A.T @ A - B.T @ B
    E[np.diag_indices_from(E)] -= np.longdouble(sketch.alpha - sketch.alpha0)
    return float(np.abs(np.linalg.eigvalsh(E.astype(np.float64))).max())


def _block_sketches(A, mode, seed, sketch_size=8, center=False):
    starts = range(0, A.shape[0], BLOCK_ROWS)
    if mode == "randomized":
        return [sketch_rows_randomized(A[i:i + BLOCK_ROWS], sketch_size, seed=seed,
                                       row_offset=i, center=center) for i in starts]
    return [sketch_rows(A[i:i + BLOCK_ROWS], sketch_size, update=mode, center=center)
            for i in starts]


@pytest.mark.parametrize("mode", ["block", "buffered", "randomized"])
def test_bounds_hold_when_the_error_is_rounding(mode):
    ratios = []
    for seed in range(4):
        A = _three_directions_and_tiny_noise(seed)
        sketch = merge_sketches(_block_sketches(A, mode, seed))
        error = _reference_error(A, sketch)
        assert error <= sketch.error_bound, (seed, error, sketch.error_bound)
        ratios.append(error / (sketch.error_bound - sketch.rounding))
        # The rounding term stays a tiny fraction of ||A||_F^2.
        assert sketch.rounding <= 1e-11 * sketch.frobenius_sq
    if mode != "randomized":  # its Lanczos factor 1 / (1 - tol) leaves room
        # Without the rounding term the bound misses: the data sit at rounding level.
        assert max(ratios) > 1


def test_centred_sketch_bound_holds_at_rounding_level():
    A = _three_directions_and_tiny_noise(7) + 1e3  # a large mean, removed by centring
    sketch = merge_sketches(_block_sketches(A, "block", 7, center=True))
    assert _reference_error(A, sketch) <= sketch.error_bound


def test_fewer_columns_than_the_sketch_size_gets_a_rounding_bound():
    """With d < l nothing is shrunk away (Delta = 0), yet the column-side
    eigendecomposition rounds: the bound is the rounding term, and it holds."""
    A = np.random.default_rng(0).standard_normal((2000, 6)) * [1e3, 1, 1, 1, 1, 1e-3]
    sketch = merge_sketches([sketch_rows(A[i:i + 500], 8) for i in range(0, 2000, 500)])
    assert sketch.shrinkage == 0
    error = _reference_error(A, sketch)
    assert 0 < error <= sketch.error_bound == sketch.rounding


def test_resize_adds_its_shrink_rounding():
    A = _three_directions_and_tiny_noise(3)
    big = sketch_rows(A, 16)
    small = big.resize(8)
    assert small.rounding > big.rounding
    assert _reference_error(A, small) <= small.error_bound


@pytest.mark.parametrize("method, bound", [("rfd", 0.5), ("fd", 1.0)])
def test_the_rfd_and_fd_bounds_are_attained(method, bound):
    """``A = I_4`` with ``l = 2``: one shrink takes every direction away
    (``Delta = 1``); FD's estimate 0 is off by exactly ``Delta``, RFD's ``I / 2``
    by exactly ``Delta / 2``: neither bound may be any smaller."""
    sketch = sketch_rows(np.eye(4), 2, method=method)
    error = _reference_error(np.eye(4), sketch)
    assert sketch.shrinkage == pytest.approx(1.0)
    assert error == pytest.approx(bound, rel=1e-12)
    assert bound <= sketch.error_bound <= bound * (1 + 1e-12)


def test_error_estimate_brackets_the_error_of_a_tight_rfd_sketch():
    """The estimate subtracts RFD's ridge ``alpha I``: without it the lower end
    would read ``||A^T A - B^T B|| = 1`` for a true error of ``1/2``."""
    sketch = sketch_rows(np.eye(4), 2)
    rng = np.random.default_rng(0)
    for _ in range(20):
        omega = rng.standard_normal((4, 3))
        estimate = error_from_products(sketch, omega, omega)  # A^T A = I
        assert estimate.lower <= 0.5 <= estimate.upper
        assert estimate.lower >= 0.5 * (1 - 1e-9)  # three of four directions: exact


@pytest.mark.heavy
def test_error_estimate_lower_end_never_exceeds_a_rounding_level_error():
    for seed in range(4):
        A = _three_directions_and_tiny_noise(seed)
        sketch = merge_sketches(_block_sketches(A, "block", seed))
        error = _reference_error(A, sketch)
        omega = np.random.default_rng(seed).standard_normal((A.shape[1], 10))
        estimate = error_from_products(sketch, omega, A.T @ (A @ omega))
        assert estimate.lower <= error <= estimate.upper


def test_error_estimate_upper_end_needs_its_constant_ten():
    """A rank-one error ``u u^T`` seen through two Gaussian vectors: the upper end
    ``10 sqrt(2/pi) max |u^T w_i|`` misses with probability about ``10 ** -2``,
    while with the constant 1 it would miss in most draws (probability 0.62)."""
    d = 50
    rng = np.random.default_rng(1)
    B = rng.standard_normal((5, d))
    sketch = Sketch(B=B, shrinkage=0.0, n_rows=6, sketch_size=8, method="fd",
                    frobenius_sq=float(np.sum(B ** 2)) + 1.0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)  # A = [B; u]: the error is u u^T, of norm 1
    misses = 0
    for seed in range(40):
        omega = np.random.default_rng(seed).standard_normal((d, 2))
        estimate = error_from_products(sketch, omega, B.T @ (B @ omega) + np.outer(u, u @ omega))
        assert estimate.lower <= 1.0 + 1e-12
        misses += estimate.upper < 1.0
    assert estimate.failure_probability == 1e-2
    assert misses <= 3  # binomial(40, 0.01): P(> 3) < 1e-4


def test_lanczos_steps_are_the_fewest_the_theorem_allows():
    """Kuczynski and Wozniakowski, Theorem 4.2: ``k`` is the smallest count with
    ``1.648 sqrt(n) exp(-sqrt(tol) (2k - 1)) <= p``."""
    def failure_bound(n, k):
        return 1.648 * math.sqrt(n) * math.exp(-math.sqrt(LANCZOS_TOLERANCE) * (2 * k - 1))

    for n in (10, 400, 2000, 10 ** 6):
        for p in (0.3, 1e-3, 1e-6, 1e-12):
            k = lanczos_steps(n, p)
            assert failure_bound(n, k) <= p < failure_bound(n, k - 1) or k in (1, n)


def test_lanczos_takes_every_step_it_is_given():
    """The Ritz value after ``k`` steps uses ``k`` products (unless the Krylov space
    is invariant): a run of one step fewer weakens the bound's probability."""
    spectrum = np.random.default_rng(0).uniform(0, 1, 300)
    calls = []

    def matvec(y):
        calls.append(1)
        return spectrum * y

    largest_eigenvalue(matvec, 300, 12, np.random.default_rng(0))
    assert len(calls) == 12


def test_lanczos_bound_needs_its_factor_on_an_adversarial_spectrum():
    """``lambda_1 = 1``, the rest uniform on ``[0, 0.75)``, failure probability 0.1
    (8 steps for n = 2000): the Ritz value is below 1 in every run, and
    ``theta / (1 - tol)`` bounds ``lambda_1`` in all but a few of 100 runs, at most
    the 10 % the theorem allows."""
    n = 2000
    spectrum = np.concatenate([[1.0], np.random.default_rng(1).uniform(0, 0.75, n - 1)])
    misses = 0
    for seed in range(100):
        theta, bound, steps = certified_largest_eigenvalue(
            lambda y: spectrum * y, n, 0.1, np.random.default_rng(seed))
        assert theta < 1 - 1e-6 and steps == lanczos_steps(n, 0.1)
        misses += bound < 1.0
    assert misses <= 10


def test_rounding_constant_is_the_documented_one():
    from dasketch.kernels.shrink import shrink_rounding

    assert shrink_rounding(20, 100, 3.0) == (2 * 120 + 8 * 20) * EPS * 3.0


@pytest.mark.heavy
def test_error_estimate_upper_end_misses_at_most_as_often_as_it_states():
    """10,000 draws of two Gaussian vectors against a rank-one error ``u u^T`` of
    norm 1: the upper end ``c sqrt(2/pi) max |u^T w_i|`` misses with probability
    about ``c ** -2``. With ``c = 10`` the count of misses is what a failure
    probability of ``10 ** -2`` allows; with ``c = 5`` it would be about 390,
    beyond that claim at a p-value below ``1e-50``, and with ``c = 20`` about 25,
    a claim four times too weak."""
    from threadpoolctl import threadpool_limits

    d, draws = 3, 10_000
    u = np.array([1.0, 0.0, 0.0])
    # A = [u^T] sketched by the empty sketch: the error is u u^T, of norm 1.
    sketch = Sketch(B=np.zeros((1, d)), shrinkage=0.0, n_rows=1, sketch_size=2,
                    method="fd", frobenius_sq=1.0)
    rng = np.random.default_rng(0)
    misses = 0
    with threadpool_limits(1):  # products of 3 x 2 matrices: threads only cost
        for _ in range(draws):
            omega = rng.standard_normal((d, 2))
            estimate = error_from_products(sketch, omega, np.outer(u, u @ omega))
            assert estimate.lower <= 1.0 + 1e-12
            misses += estimate.upper < 1.0
    claim = estimate.failure_probability
    assert claim == 1e-2
    # The claim is tight: the miss rate is about 0.0997 ** 2 = claim, so a constant
    # of 20 (rate about claim / 4, some 25 misses) would overstate it.
    assert scipy.stats.binom.sf(misses - 1, draws, claim / 4) < 1e-6, misses
    # One-sided binomial test of "miss rate <= claim".
    assert scipy.stats.binom.sf(misses - 1, draws, claim) > 1e-6, misses


@pytest.mark.parametrize("method", ["fd", "rfd"])
def test_randomized_sketch_bound_uses_the_lanczos_bound_not_the_ritz_value(method):
    """With failure probability 0.5 Lanczos takes 5 steps on a 200-column Gaussian
    block: its Ritz value ``theta`` is 5-10 % below the loss's largest eigenvalue,
    so the FD error exceeds ``theta`` and only ``theta / (1 - tol)`` bounds it (and
    for RFD, ``theta / (1 - tol) - theta / 2``)."""
    errors_over_ritz = []
    for seed in range(5):
        A = np.random.default_rng(seed).standard_normal((400, 200))
        sketch = sketch_rows_randomized(A, 8, method=method, failure_probability=0.5,
                                        seed=seed)
        error = _reference_error(A, sketch)
        assert error <= sketch.error_bound, (seed, error, sketch.error_bound)
        ritz_bound = sketch.shrinkage if method == "fd" else sketch.shrinkage / 2
        errors_over_ritz.append(error / (ritz_bound + sketch.rounding))
    assert max(errors_over_ritz) > 1.01  # the Ritz value alone would not bound it


def test_error_estimate_of_a_centred_sketch_counts_the_rounding_of_the_mean():
    """Rows ``1e4 + N(0, 1)`` (6 columns, sketch size 8: nothing is shrunk, the
    true error is rounding, about ``1e-9``). ``X^T X Omega`` of the raw rows is
    computed to ``eps n ||mu||^2``, about ``1e-4``, before the centring term is
    removed: the lower end must allow for that part, or it reads ``1e-4`` to
    ``1e-2`` for an error of ``1e-9``."""
    for seed in range(10):
        rng = np.random.default_rng(seed)
        A = 1e4 + rng.standard_normal((1000, 6))
        sketch = merge_sketches(_block_sketches(A, "block", seed, center=True))
        error = _reference_error(A, sketch)
        omega = rng.standard_normal((6, 5))
        estimate = error_from_products(sketch, omega, A.T @ (A @ omega))
        assert estimate.lower <= error <= estimate.upper, (seed, estimate, error)


def test_error_estimate_lower_end_allows_the_worst_rounding_of_the_products():
    """``A`` of ``n = 2500`` equal rows ``y = (1, 2, 2)`` and the exact sketch
    ``B = 50 y`` (the error is exactly 0), seen through ``omega = y``. The product
    ``A^T (A omega)`` is handed over rounded as badly as Higham's eq. (3.5)
    allows, ``gamma_{n+d} |A|^T |A| |omega|`` upwards: the lower end must stay 0.
    That perturbation is ``gamma_{n+3}`` of ``gamma_{n+3d+l+9}`` of
    :func:`product_rounding`, so half of that rounding term would not cover it."""
    from dasketch.kernels.certificates import product_rounding

    n, y = 2500, np.array([1.0, 2.0, 2.0])
    sketch = Sketch(B=50.0 * y[None, :], shrinkage=0.0, n_rows=n, sketch_size=8,
                    method="fd", frobenius_sq=n * 9.0)
    omega = y[:, None]
    k = (n + 3) * EPS / 2
    exact = n * np.outer(y, y) @ omega
    worst = exact + k / (1 - k) * (n * np.outer(np.abs(y), np.abs(y)) @ np.abs(omega))
    estimate = error_from_products(sketch, omega, worst)
    assert estimate.lower == 0.0
    assert estimate.upper > 0.0
    # The perturbation is more than half of the allowance (which therefore has no
    # factor of 2 to spare) and within it.
    seen = np.linalg.norm(worst - exact) / np.linalg.norm(omega)
    assert 0.5 * product_rounding(sketch) < seen <= product_rounding(sketch)


def test_product_rounding_is_the_derived_gamma():
    n, d, l = 1000, 20, 8
    sketch = Sketch(B=np.ones((3, d)), shrinkage=0.0, n_rows=n, sketch_size=l,
                    method="fd", frobenius_sq=5.0)
    k = (n + 3 * d + l + 9) * EPS / 2
    from dasketch.kernels.certificates import product_rounding

    assert product_rounding(sketch) == k / (1 - k) * (5.0 + sketch.alpha)


def test_worst_case_rounding_terms_are_the_derived_ones():
    """Rounding terms whose worst case no float64 run reaches (summation errors
    grow as ``sqrt(n) u`` in practice, against Higham's ``gamma_n``): each is the
    constant its docstring derives, with no factor to spare."""
    from dasketch.kernels.shrink import shrink_rounding
    from dasketch.kernels.sketch_checks import (
        centring_rounding,
        mean_error_bound,
        merge_centring_rounding,
    )
    from dasketch.kernels.sparse_fd import randomized_rounding

    n, frobenius_sq, mean = 1000, 4.0, np.array([3.0, 4.0])  # ||mean|| = 5
    g = 6 * n * EPS / 2 / (1 - 6 * n * EPS / 2)  # gamma_{6n}
    error = g * (5.0 + math.sqrt(frobenius_sq / n)) / (1 - g)
    assert mean_error_bound(n, frobenius_sq, mean) == error
    assert centring_rounding(n, frobenius_sq, mean) == n * error ** 2 + 1.5 * EPS * frobenius_sq
    part = Sketch(B=np.zeros((0, 2)), shrinkage=0.0, n_rows=n, sketch_size=4, method="fd",
                  frobenius_sq=frobenius_sq, mean=mean)
    correction = np.array([[6.0, 8.0]])  # norm 10
    e = math.sqrt(n) * 2 * error + 2 * EPS * 10.0
    assert merge_centring_rounding([part], correction, n, frobenius_sq, mean) == \
        (2 * 10.0 + e) * e
    assert randomized_rounding(n, 50, 7, 3.0) == \
        2 * shrink_rounding(n, 50, 3.0) + 4 * 7 * EPS * 3.0
