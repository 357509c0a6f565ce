"""Kernel tests: FD/RFD shrink, block updates, merges, solve (numpy only)."""

import itertools
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse

from dasketch.kernels.frequent_directions import (
    Sketch,
    merge_sketches,
    rows_per_shrink,
    shrink,
    sketch_rows,
)
from tests.helpers import (
    check_guarantees,
    decaying,
    exact_centred_gram,
    low_rank_plus_noise,
    spectral_norm,
    tail_energy,
)


def _inputs():
    rng = np.random.default_rng(1)
    dup = np.repeat(rng.standard_normal((5, 12)), 40, axis=0)
    zero_block = np.vstack([decaying(100, 12, seed=2), np.zeros((80, 12)),
                            decaying(50, 12, seed=3)])
    return {
        "random": rng.standard_normal((300, 25)),
        "low_rank_plus_noise": low_rank_plus_noise(400, 30, 5),
        "rank_deficient": rng.standard_normal((200, 3)) @ rng.standard_normal((3, 20)),
        "d_le_l": rng.standard_normal((150, 6)),
        "duplicated_rows": dup,
        "all_zero_block": zero_block,
    }


@pytest.mark.parametrize("name", list(_inputs()))
@pytest.mark.parametrize("method", ["fd", "rfd"])
@pytest.mark.parametrize("update", ["block", "buffered", "auto"])
def test_guarantees_on_varied_inputs(name, method, update):
    A = _inputs()[name]
    sk = sketch_rows(A, 8, method=method, update=update)
    check_guarantees(sk, A, ks=(0, 1, 3, 5))
    assert sk.B.shape[0] <= 7
    assert sk.n_rows == A.shape[0]


def test_exact_when_rank_fits():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((100, 3)) @ rng.standard_normal((3, 15))
    sk = sketch_rows(A, 8, update="buffered")
    assert sk.shrinkage <= 1e-9 * spectral_norm(A.T @ A)
    np.testing.assert_allclose(sk.B.T @ sk.B, A.T @ A, atol=1e-8 * spectral_norm(A.T @ A))


def test_rfd_error_at_most_half_fd_bound():
    A = low_rank_plus_noise(500, 40, 8, noise=0.3)
    gram = A.T @ A
    fd = sketch_rows(A, 10, method="fd", update="buffered")
    rfd = sketch_rows(A, 10, method="rfd", update="buffered")
    fd_error = spectral_norm(gram - fd.covariance())
    rfd_error = spectral_norm(gram - rfd.covariance())
    assert rfd_error <= 0.5 * fd.error_bound * (1 + 1e-12)
    assert rfd_error < fd_error


def test_block_update_mode_beats_streaming_and_is_near_best_possible():
    A = decaying(2000, 60, seed=4)
    eig = np.linalg.eigvalsh(A.T @ A)[::-1]
    l = 10
    best = (eig[l - 1] - eig[-1]) / 2
    one_shot = sketch_rows(A, l, update="block")
    streamed = sketch_rows(A, l, update="buffered")
    err_block = spectral_norm(A.T @ A - one_shot.covariance())
    err_stream = spectral_norm(A.T @ A - streamed.covariance())
    assert err_block <= 1.001 * best
    assert err_stream > err_block


def test_rows_per_shrink_choices():
    assert rows_per_shrink(5000, 100, 10, update="block") == 5000
    assert rows_per_shrink(5000, 100, 10, update="buffered") == 11
    # Tall dense block with small d: one shrink through the d x d Gram is cheapest.
    assert rows_per_shrink(5000, 100, 10) == 5000
    # Very wide sparse rows: never one eigendecomposition of the whole block.
    assert rows_per_shrink(20000, 100_000, 64, nnz_per_row=100) < 20000
    with pytest.raises(ValueError, match="update"):
        rows_per_shrink(10, 10, 4, update="oneshot")


def test_rows_per_shrink_for_wide_dense_rows():
    # A block wider than it is tall: chunks of 4-8 l rows through the row Gram,
    # never one b x b Gram of the whole block (b d / 2 flops per row).
    for b, d in [(512, 8192), (1024, 4096)]:
        assert 4 * 32 <= rows_per_shrink(b, d, 32) <= 8 * 32
    # Tall dense blocks keep one shrink of the whole block through the d x d Gram.
    assert rows_per_shrink(16384, 256, 128) == 16384


@pytest.mark.parametrize("method", ["fd", "rfd"])
@pytest.mark.parametrize("update", ["block", "buffered", "auto"])
def test_wide_dense_rows_keep_guarantees(method, update):
    # d > rows per shrink: every shrink after the first reads the sketch's own
    # Gram block off its squared row norms (its rows are orthogonal).
    A = decaying(240, 300, seed=9, decay=0.99)
    sk = sketch_rows(A, 8, method=method, update=update)
    assert update == "block" or rows_per_shrink(240, 300, 8, update=update) < 240
    check_guarantees(sk, A, ks=(0, 2, 5))
    gram = sk.B @ sk.B.T
    off_diagonal = gram - np.diag(np.diag(gram))
    assert np.abs(off_diagonal).max() <= 1e-10 * np.abs(gram).max()


def test_sparse_rows_match_dense_rows():
    X = scipy.sparse.random(400, 300, density=0.02, random_state=5, format="csr")
    for center in (False, True):
        dense = sketch_rows(X.toarray(), 12, center=center, update="buffered")
        sparse = sketch_rows(X, 12, center=center, update="buffered")
        np.testing.assert_allclose(sparse.B.T @ sparse.B, dense.B.T @ dense.B, atol=1e-10)
        assert sparse.shrinkage == pytest.approx(dense.shrinkage, rel=1e-10)
        Xd = X.toarray() - (X.toarray().mean(axis=0) if center else 0)
        check_guarantees(sparse, Xd)


def test_float32_rows():
    A = decaying(500, 30, seed=6).astype(np.float32)
    sk = sketch_rows(A, 8)
    check_guarantees(sk, A.astype(np.float64))


def test_shrink_keeps_small_stacks_and_clamps():
    top = np.zeros((0, 5))
    rows = np.eye(3, 5)
    B, delta = shrink(top, rows, 4)
    assert delta == 0.0 and np.array_equal(B, rows)
    zeros = np.zeros((10, 5))
    B, delta = shrink(top, zeros, 4)
    assert delta == 0.0 and B.shape[0] == 0 and np.isfinite(B).all()


def _block_sketches(A, cuts, l, center=False):
    edges = [0, *cuts, A.shape[0]]
    return [sketch_rows(A[a:b], l, center=center, row_offset=a)
            for a, b in zip(edges[:-1], edges[1:])]


@pytest.mark.parametrize("center", [False, True])
def test_merge_trees_keep_guarantee(center):
    A = low_rank_plus_noise(600, 20, 6, noise=0.2, seed=7)
    Ac = A - A.mean(axis=0) if center else A
    parts = _block_sketches(A, [0, 1, 150, 150, 299, 420, 599], 6, center=center)
    assert parts[0].n_rows == 0 and parts[1].n_rows == 1
    results = [merge_sketches(parts), merge_sketches(parts[::-1])]
    for order in itertools.islice(itertools.permutations(range(len(parts))), 0, 40, 13):
        acc = parts[order[0]]
        for i in order[1:]:
            acc = acc.merge(parts[i])
        results.append(acc)
    pairwise = [merge_sketches(parts[i:i + 2]) for i in range(0, len(parts), 2)]
    results.append(merge_sketches(pairwise))
    bounds = [r.error_bound for r in results]
    for r in results:
        assert r.n_rows == A.shape[0]
        check_guarantees(r, Ac, ks=(0, 2, 4))
        if center:
            np.testing.assert_allclose(r.mean, A.mean(axis=0), atol=1e-12)
        assert r.frobenius_sq == pytest.approx(np.sum(Ac ** 2), rel=1e-10)
    assert max(bounds) <= 1.5 * min(bounds)


def test_merge_with_empty_is_identity():
    A = decaying(50, 10)
    sk = sketch_rows(A, 4)
    empty = Sketch.empty(10, 4)
    merged = empty.merge(sk, empty)
    assert merged.shrinkage == sk.shrinkage and np.array_equal(merged.B, sk.B)


@pytest.mark.parametrize("attr,other", [
    ("n_features", dict(n_features=11)),
    ("sketch_size", dict(sketch_size=5)),
    ("method", dict(method="fd")),
    ("alpha0", dict(alpha0=1.0)),
])
def test_merge_rejects_mismatch(attr, other):
    base = dict(n_features=10, sketch_size=4, method="rfd", alpha0=0.0)
    params = {**base, **other}
    a = Sketch.empty(base["n_features"], base["sketch_size"], method=base["method"],
                     alpha0=base["alpha0"])
    b = Sketch.empty(params["n_features"], params["sketch_size"], method=params["method"],
                     alpha0=params["alpha0"])
    with pytest.raises(ValueError, match=attr):
        a.merge(b)


@pytest.mark.parametrize("alpha0", [0.0, 0.5])
@pytest.mark.parametrize("method", ["fd", "rfd"])
def test_solve_agrees_with_dense(method, alpha0):
    A = decaying(300, 15, seed=8)
    sk = sketch_rows(A, 6, method=method, alpha0=alpha0)
    v = np.random.default_rng(0).standard_normal((15, 3))
    cov = sk.covariance()
    expected = np.linalg.pinv(cov) @ v if sk.alpha == 0 else np.linalg.solve(cov, v)
    np.testing.assert_allclose(sk.solve(v), expected, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(sk.solve(v[:, 0]), expected[:, 0], rtol=1e-8, atol=1e-12)
    with pytest.raises(ValueError, match="v must have shape"):
        sk.solve(np.ones(14))


def test_nan_rows_are_named():
    A = decaying(100, 5)
    A[17, 2] = np.nan
    A[40, 0] = np.inf
    with pytest.raises(ValueError, match=r"rows 1017, 1040 .*\[1000, 1100\)"):
        sketch_rows(A, 4, row_offset=1000)
    S = scipy.sparse.csr_matrix(A)
    with pytest.raises(ValueError, match="rows 17, 40"):
        sketch_rows(S, 4)


@pytest.mark.parametrize("kwargs,match", [
    (dict(sketch_size=1), "sketch_size"),
    (dict(sketch_size=2.5), "sketch_size"),
    (dict(method="svd"), "method"),
    (dict(alpha0=-1.0), "alpha0"),
    (dict(alpha0=np.nan), "alpha0"),
])
def test_bad_parameters(kwargs, match):
    params = dict(sketch_size=4, method="rfd", alpha0=0.0) | kwargs
    with pytest.raises((ValueError, TypeError), match=match):
        sketch_rows(np.ones((10, 3)), **params)


def test_tail_energy_reference():
    A = np.diag([3.0, 2.0, 1.0])
    assert tail_energy(A, 1) == pytest.approx(5.0)


# Reference figures of ../shared/data/README.md (plain numpy implementations of the
# RFD paper's Algorithms 4 and 5 on a9a train): relative spectral error.
A9A_STREAMING = {5: (0.1908, 0.0954), 10: (0.0870, 0.0435), 20: (0.0383, 0.0191),
                 30: (0.0203, 0.0102), 50: (0.0058, 0.0029)}


# The default suite checks the smallest and a middle sketch size; `-m slow` all of them.
@pytest.mark.parametrize("l", [l if l in (5, 20) else pytest.param(l, marks=pytest.mark.slow)
                               for l in A9A_STREAMING])
@pytest.mark.slow  # .ci/run runs it by name
def test_a9a_streaming_reproduces_paper_algorithms(a9a_train, l):
    X, _ = a9a_train
    gram = (X.T @ X).toarray()
    top = spectral_norm(gram)
    fd_reference, rfd_reference = A9A_STREAMING[l]
    fd = sketch_rows(X, l, method="fd", update="buffered")
    rfd = sketch_rows(X, l, method="rfd", update="buffered")
    assert spectral_norm(gram - fd.covariance()) / top == pytest.approx(fd_reference, abs=1e-4)
    assert spectral_norm(gram - rfd.covariance()) / top == pytest.approx(rfd_reference,
                                                                         abs=1e-4)


@pytest.mark.parametrize("update", ["buffered", "block"])
def test_error_bound_is_reached_exactly_on_diag_3_2_1(update):
    # A^T A = diag(9, 4, 1), l = 2: the shrinkages add up to Delta = 4; FD's
    # estimate diag(5, 0, 0) misses by Delta and RFD's diag(7, 2, 2) by Delta / 2,
    # so both certificates are tight (RFD paper, Theorem 2)
    A = np.diag([3.0, 2.0, 1.0])
    for method, bound in (("fd", 4.0), ("rfd", 2.0)):
        s = sketch_rows(A, 2, method=method, update=update)
        assert s.shrinkage == pytest.approx(4.0)
        assert s.error_bound == pytest.approx(bound)
        assert np.linalg.norm(A.T @ A - s.covariance(), 2) == pytest.approx(bound)


def test_sketch_rows_have_a_fixed_sign():
    """The largest entry of every sketch row is positive (sklearn's ``svd_flip``
    convention), so rounding differences between runs cannot flip a row."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((400, 60)) * 0.9 ** np.arange(60)
    for sketch in (sketch_rows(A, 8), merge_sketches([sketch_rows(A[:200], 8),
                                                      sketch_rows(A[200:], 8)])):
        largest = sketch.B[np.arange(sketch.B.shape[0]), np.abs(sketch.B).argmax(axis=1)]
        assert (largest > 0).all()


@pytest.mark.parametrize("method", ["rfd", "fd"])
@pytest.mark.parametrize("alpha0", [1e18, 2.0 ** 63, 1e20])
def test_error_bound_carries_the_rounding_of_a_large_ridge(method, alpha0):
    """With alpha0 far above Delta, alpha = alpha0 + Delta / 2 rounds (at 1e20 the
    half of Delta is lost entirely): the bound carries eps alpha. The error is
    computed exactly, in rationals, against B^T B + alpha I with the stored alpha."""
    A = np.random.default_rng(7).standard_normal((400, 6)) * 0.7 ** np.arange(6)
    s = sketch_rows(A, 3, method=method, alpha0=alpha0)
    assert s.shrinkage > 0
    exact = [[Fraction(v) for v in row] for row in A]
    B = [[Fraction(v) for v in row] for row in s.B]
    ridge_difference = Fraction(s.alpha) - Fraction(alpha0)
    error = np.array([[sum(row[i] * row[j] for row in exact) - sum(row[i] * row[j] for row in B)
                       - (ridge_difference if i == j else 0) for j in range(6)]
                      for i in range(6)], dtype=np.float64)
    assert spectral_norm(error) <= s.error_bound


@pytest.mark.parametrize("offset", [1e4, 1e6, 1e8])
def test_merged_centred_sketches_of_data_with_a_large_mean_keep_the_bound(offset):
    """Blocks of unit spread around a mean of 1e4 to 1e8, centred each on its
    rounded mean and merged (in one merge and in a chain): the centring rows
    come from rounded means, an error of order eps |mu| that the bound carries.
    The true error is against the exactly centred Gram (rationals)."""
    for seed in range(3):
        X = np.random.default_rng(seed).standard_normal((240, 5)) * [3, 2, 1, 1, 1] + offset
        parts = [sketch_rows(X[i:i + 60], 4, center=True) for i in range(0, 240, 60)]
        reference = exact_centred_gram(X)
        chained = parts[0]
        for part in parts[1:]:
            chained = chained.merge(part)
        for merged in (merge_sketches(parts), chained):
            error = spectral_norm(reference - merged.covariance())
            assert error <= merged.error_bound, (seed, error, merged.error_bound)
            assert merged.rounding <= 1e-4 * merged.frobenius_sq  # not vacuous


def test_a_block_of_rows_of_scale_1e250_1_and_1e_minus_100_sketches_without_lapack_errors():
    """On this block (35 x 16, rows of scale 1e250, 1 and 1e-100 mixed) LAPACK's
    divide-and-conquer eigensolver fails to converge on a Gram of the buffered
    update; the shrink falls back to dsyevr (or the SVD) and the bound holds in the
    scaled units."""
    rng = np.random.default_rng(3)
    for d in (3, 5, 8, 16):  # the block is the fourth draw of this generator
        n = int(rng.integers(9, 40))
        scales = rng.choice([1e250, 1.0, 1e-100], size=n)
        rows = np.abs(rng.standard_normal((n, d))) * scales[:, None]
    assert set(scales) == {1e250, 1.0, 1e-100}
    s = sketch_rows(rows, 8, update="buffered")  # what sketch(..., working_size=8) runs
    scaled, e = s.scaled(), s.scale_exponent
    Xs = np.ldexp(rows, -e)
    assert spectral_norm(Xs.T @ Xs - scaled.covariance()) <= scaled.error_bound
