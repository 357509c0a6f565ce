"""Every update keeps its stated bound on data of extreme and mixed scales.

Rows of scale ``1e250``, ``1`` and ``1e-100`` in one block and in separate blocks
merged; data of mean and spread up to ``1e12`` centred and merged, dense and
sparse. The reference Gram matrices are formed in ``numpy.longdouble`` (64-bit
mantissa, exponent range beyond ``1e4000``: squares of ``1e250`` are held), in the
units of the sketch's ``scale_exponent``.
"""

import numpy as np
import pytest
import scipy.sparse

from dasketch.kernels.frequent_directions import merge_sketches, sketch_rows
from dasketch.kernels.sketch_scaling import block_scale_exponent, divide_by_power_of_two
from dasketch.kernels.sparse_fd import sketch_rows_randomized

SCALES = (1e250, 1.0, 1e-100)
UPDATES = ("auto", "block", "buffered", "randomized")


def _sketch(rows, update, center, seed, offset=0):
    if update == "randomized":
        return sketch_rows_randomized(rows, 6, center=center, seed=seed, row_offset=offset)
    return sketch_rows(rows, 6, update=update, center=center, row_offset=offset)


def _error_in_scaled_units(A, sketch):
    """``||A_s^T A_s + alpha0 I - (B^T B + alpha I)||_2`` of the scaled sketch,
    ``A_s = A / 2**scale_exponent`` (centred when the sketch is), in extended
    precision."""
    A = A.toarray() if scipy.sparse.issparse(A) else A
    A = np.ldexp(np.asarray(A, dtype=np.longdouble), -sketch.scale_exponent)
    scaled = sketch.scaled()
    if sketch.centered:
        A = A - A.mean(axis=0)
    B = scaled.B.astype(np.longdouble)
    E = A.T @ A - B.T @ B
    E[np.diag_indices_from(E)] -= np.longdouble(scaled.alpha - scaled.alpha0)
    return float(np.abs(np.linalg.eigvalsh(E.astype(np.float64))).max()), scaled


def _mixed_rows(rng, n, d, scales):
    return rng.standard_normal((n, d)) * rng.permuted(np.resize(scales, n))[:, None]


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("update", UPDATES)
def test_mixed_scale_rows_in_one_block_and_across_blocks_keep_the_bound(update, center):
    for seed in range(3):
        rng = np.random.default_rng(seed)
        d = 32  # wider than 4 l: the randomized update compresses (no exact fallback)
        one_block = _mixed_rows(rng, 60, d, SCALES)
        by_scale = [rng.standard_normal((30, d)) * s for s in SCALES]
        stacked = np.vstack([one_block, *by_scale])
        parts = [_sketch(one_block, update, center, seed)]
        offset = one_block.shape[0]
        for block in by_scale:
            parts.append(_sketch(block, update, center, seed, offset))
            offset += block.shape[0]
        for rows, sketch in ((one_block, parts[0]), (stacked, merge_sketches(parts)),
                             (stacked, merge_sketches(parts[::-1]))):
            error, scaled = _error_in_scaled_units(rows, sketch)
            assert np.isfinite(scaled.error_bound) and scaled.error_bound > 0
            assert error <= scaled.error_bound, (seed, error, scaled.error_bound)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no overflow in float32 steps
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("spread", [1.0, 1e12])
@pytest.mark.parametrize("update", UPDATES)
def test_data_of_mean_1e12_centred_and_merged_keep_the_bound(update, spread, sparse):
    """Columns of mean ``1e12`` and spread 1 or ``1e12``, in four blocks, each
    centred on its rounded mean and merged: the bound carries the rounding of the
    means (``eps n |mu|``), which dominates when the spread is 1, and stays a small
    fraction of ``||A_c||_F^2``, which is itself right (no cancellation of the raw
    norm against ``n ||mu||^2``)."""
    if sparse and update not in ("auto", "randomized"):
        pytest.skip("the sparse path of the exact updates is the dense one's")
    for seed in range(2):
        rng = np.random.default_rng(seed)
        X = 1e12 + spread * rng.standard_normal((240, 32)) * np.linspace(3, 1, 32)
        if sparse:
            X = scipy.sparse.csr_matrix(X * (rng.random(X.shape) < 0.4))
        parts = [_sketch(X[i:i + 60], update, True, seed, i) for i in range(0, 240, 60)]
        chained = parts[0]
        for part in parts[1:]:
            chained = chained.merge(part)
        for merged in (merge_sketches(parts), chained):
            error, scaled = _error_in_scaled_units(X, merged)
            assert error <= scaled.error_bound, (seed, error, scaled.error_bound)
            dense = X.toarray() if sparse else X
            centred_norm_sq = float(np.sum((dense - dense.astype(np.longdouble).mean(axis=0)) ** 2))
            assert scaled.frobenius_sq == pytest.approx(centred_norm_sq, rel=1e-6)
            assert scaled.rounding <= 0.1 * scaled.frobenius_sq  # not vacuous


def test_a_ridge_that_dwarfs_the_shrinkage_is_rounded_twice_within_the_bound():
    """``alpha0 = 2**66`` (half an ulp: ``8192``), an RFD shrinkage ``Delta = 16382``
    along ``e_1`` and ``(B^T B)_11 = 8191``. Both sums of the estimate round down by
    just under half an ulp: ``alpha = fl(alpha0 + Delta / 2) = alpha0`` and the
    diagonal ``fl((B^T B)_11 + alpha) = alpha0``, so the covariance is off by
    ``Delta / 2 + 2 * 8191`` against a bound ``Delta / 2 + eps alpha = Delta / 2 +
    16384``: attained to within ``2 / 24575``. Half the ``eps alpha`` term misses
    the error; twice it is no longer attained. The error is computed in integers."""
    from fractions import Fraction

    from dasketch.kernels.frequent_directions import Sketch

    alpha0, delta = 2.0 ** 66, 16382.0
    A = np.zeros((6, 2))
    A[:, 0] = [156, 15, 3, 1, 1, 1]            # (A^T A)_11 = 24573 = Delta + 8191
    B = np.zeros((4, 2))
    B[:, 0] = [90, 9, 3, 1]                    # (B^T B)_11 = 8191
    sketch = Sketch(B=B, shrinkage=delta, n_rows=6, sketch_size=5, method="rfd",
                    alpha0=alpha0, frobenius_sq=24573.0)
    covariance = sketch.covariance()
    exact = [[sum(Fraction(int(a)) * Fraction(int(b)) for a, b in zip(A[:, i], A[:, j]))
              + (Fraction(alpha0) if i == j else 0) - Fraction(covariance[i, j])
              for j in range(2)] for i in range(2)]
    assert exact[0][1] == exact[1][0] == exact[1][1] == 0   # diagonal: the norm is |E_11|
    error = float(abs(exact[0][0]))
    assert error == delta / 2 + 2 * 8191
    assert error <= sketch.error_bound <= error * (1 + 1e-4)


@pytest.mark.parametrize("log2_top", [-1000.0, -201.0, -200.5, -199.5, 0.0, 199.5, 200.0,
                                      200.5, 250.0, 1000.0])
@pytest.mark.parametrize("n_rows", [1, 40])
def test_a_dense_block_is_sketched_at_the_scale_of_its_largest_entry(log2_top, n_rows):
    """Dense blocks read their scale off the sum of squares of a sketch at scale 1
    where it decides it, else off the largest entry: either way the scale exponent
    is the largest entry's, and the sketch is the one of that scale, near the edges
    of the safe range too (entries near 2**-200 and 2**200, whose squares are far
    from both ends of float64's range; tails of the other entries far below)."""
    rng = np.random.default_rng(7)
    rows = np.ldexp(rng.uniform(0.25, 0.5, (n_rows, 5)), int(np.floor(log2_top)) - 4)
    rows[0, 2] = 2.0 ** log2_top
    rows[-1, 0] = 2.0 ** -1070 if n_rows > 1 else rows[-1, 0]
    sketch = sketch_rows(rows, 3)
    exponent = block_scale_exponent(rows)
    assert sketch.scale_exponent == exponent
    reference = sketch_rows(divide_by_power_of_two(rows, exponent), 3) if exponent else None
    if reference is not None:
        np.testing.assert_array_equal(sketch.B, reference.B)
    error, scaled = _error_in_scaled_units(rows, sketch)
    assert error <= scaled.error_bound * (1 + 1e-12)
