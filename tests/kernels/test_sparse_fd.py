"""Kernel tests: randomized sparse FD, its Lanczos certificate and the a-posteriori
error estimate (numpy/scipy only)."""

import numpy as np
import pytest
import scipy.sparse
import scipy.stats

from dasketch.kernels.frequent_directions import merge_sketches, sketch_rows
from dasketch.kernels.sparse_fd import (
    error_from_products,
    lanczos_steps,
    largest_eigenvalue,
    sketch_rows_randomized,
)
from tests.helpers import low_rank_plus_noise, sparse_decaying, spectral_norm


def _sparse(n, d, nnz_per_row, seed, rank=None):
    """Sparse rows with a decaying column scale; with ``rank``, rows are sparse
    combinations of ``rank`` sparse patterns (a rank-deficient sparse matrix)."""
    if rank is None:
        return sparse_decaying(n, d, nnz_per_row, seed)
    patterns = sparse_decaying(rank, d, nnz_per_row, seed + 1)
    mix = scipy.sparse.random(n, rank, density=0.5, random_state=seed, format="csr")
    return scipy.sparse.csr_matrix(mix @ patterns)


def _inputs():
    rng = np.random.default_rng(5)
    return {
        "sparse": _sparse(1200, 400, 12, seed=1),
        "very_sparse": _sparse(1200, 400, 4, seed=2),
        "rank_deficient_sparse": _sparse(1200, 400, 6, seed=3, rank=5),
        "dense_random": rng.standard_normal((600, 200)),
        "dense_low_rank": low_rank_plus_noise(600, 200, 6),
    }


def _error(sketch, A):
    A = A.toarray() if scipy.sparse.issparse(A) else A
    if sketch.centered:
        A = A - A.mean(axis=0)
    estimate = sketch.covariance() - sketch.alpha0 * np.eye(A.shape[1])
    return spectral_norm(A.T @ A - estimate), A


def _tree(A, size, seed, failure_probability, center=False, method="rfd"):
    """Four randomized block sketches, merged."""
    rows = -(-A.shape[0] // 4)
    parts = [sketch_rows_randomized(A[i:i + rows], size, seed=seed, row_offset=i,
                                    method=method, center=center,
                                    failure_probability=failure_probability)
             for i in range(0, A.shape[0], rows)]
    return merge_sketches(parts)


# Two inputs run in the default suite; the others (a minute each on 2 cores) are slow.
_DEFAULT_SUITE_INPUTS = ("sparse", "dense_random")


@pytest.mark.parametrize("name", [
    name if name in _DEFAULT_SUITE_INPUTS else pytest.param(name, marks=pytest.mark.slow)
    for name in _inputs()])
@pytest.mark.slow  # .ci/run runs it by name
def test_stated_bound_fails_no_more_often_than_stated(name):
    """Over 50 seeds the bound may fail with probability at most 0.05 each: more
    than 8 failures has probability < 1e-3 under that rate."""
    A = _inputs()[name]
    allowed = int(scipy.stats.binom.ppf(0.999, 50, 0.05))
    failures = 0
    for seed in range(50):
        sk = _tree(A, 8, seed, failure_probability=0.05 / 4)
        assert sk.failure_probability == pytest.approx(0.05)
        err, dense = _error(sk, A)
        gram = dense.T @ dense
        lowest = np.linalg.eigvalsh(gram - sk.B.T @ sk.B)[0]
        assert lowest >= -1e-9 * spectral_norm(gram)  # the compression loss is PSD
        failures += err > sk.error_bound * (1 + 1e-9)
    assert failures <= allowed


@pytest.mark.parametrize("method", ["fd", "rfd"])
@pytest.mark.parametrize("center", [False, True])
def test_randomized_tree_error_and_bound(method, center):
    A = _inputs()["sparse"]
    sk = _tree(A, 16, 0, 1e-6, center=center, method=method).resize(8)
    err, dense = _error(sk, A)
    assert err <= sk.error_bound
    assert sk.guarantee.startswith("probability >= 1 - ")
    lam = np.linalg.eigvalsh(dense.T @ dense)[::-1]
    best = (lam[7] - lam[-1]) / (2 if method == "rfd" else 1)
    assert err <= 2.0 * best  # measured 1.2-1.5x: a compression that lost rank fails
    assert sk.n_rows == A.shape[0]
    assert sk.frobenius_sq == pytest.approx(np.sum(dense ** 2))


def test_same_seed_and_offset_give_the_same_sketch():
    A = _inputs()["very_sparse"]
    a = sketch_rows_randomized(A[300:900], 8, seed=4, row_offset=300)
    b = sketch_rows_randomized(A[300:900], 8, seed=4, row_offset=300)
    c = sketch_rows_randomized(A[300:900], 8, seed=5, row_offset=300)
    assert np.array_equal(a.B, b.B) and a.shrinkage == b.shrinkage
    assert not np.array_equal(a.B, c.B)


def test_small_or_narrow_blocks_stay_certified():
    A = _inputs()["sparse"]
    small = sketch_rows_randomized(A[:10], 8)
    narrow = sketch_rows_randomized(A[:, :20], 8)
    assert small.guarantee == narrow.guarantee == "certified"
    assert narrow.failure_probability == 0 and narrow.shrinkage_bound is None
    exact = sketch_rows(A[:, :20], 8)
    assert np.allclose(narrow.B, exact.B) and narrow.error_bound == exact.error_bound


def test_merging_adds_failure_probabilities_and_keeps_certified_parts_exact():
    A = _inputs()["sparse"]
    randomized = sketch_rows_randomized(A[:600], 8, failure_probability=1e-4)
    exact = sketch_rows(A[600:], 8)
    merged = merge_sketches([randomized, exact])
    assert merged.failure_probability == pytest.approx(1e-4)
    assert merged.shrinkage_bound >= merged.shrinkage >= randomized.shrinkage
    assert _error(merged, A)[0] <= merged.error_bound
    assert merge_sketches([exact, sketch_rows(A[:600], 8)]).shrinkage_bound is None


def test_lanczos_ritz_value_brackets_the_top_eigenvalue():
    rng = np.random.default_rng(0)
    eigvals = np.concatenate([[10.0, 9.9], rng.uniform(0, 5, size=298)])
    Q = np.linalg.qr(rng.standard_normal((300, 300)))[0]
    M = (Q * eigvals) @ Q.T
    steps = lanczos_steps(300, 1e-6, 0.25)
    theta = largest_eigenvalue(lambda v: M @ v, 300, steps, rng)
    assert theta <= 10.0 * (1 + 1e-12)
    assert theta >= 0.75 * 10.0
    assert lanczos_steps(300, 1e-9, 0.25) > steps > lanczos_steps(300, 1e-3, 0.25)
    # an invariant start subspace ends early with the exact value
    assert largest_eigenvalue(lambda v: 3.0 * v, 50, 20, rng) == pytest.approx(3.0)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.slow  # .ci/run runs it by name
def test_a_posteriori_estimate_brackets_the_true_error(center):
    A = _inputs()["sparse"]
    dense = A.toarray()
    failures = 0
    for seed in range(20):
        sk = _tree(A, 8, seed, 1e-6, center=center)
        err, centered = _error(sk, A)
        omega = np.random.default_rng(seed).standard_normal((A.shape[1], 3))
        est = error_from_products(sk, omega, dense.T @ (dense @ omega))
        assert est.failure_probability == pytest.approx(1e-3)
        assert est.lower <= err * (1 + 1e-9)  # deterministic
        assert est.lower >= 0.1 * err  # a useful estimate, not just a valid one
        failures += est.upper < err
    assert failures <= 1  # P(>= 2 of 20 at rate 1e-3) < 2e-4


@pytest.mark.parametrize("kwargs, match", [
    (dict(failure_probability=0), "failure_probability"),
    (dict(failure_probability=1.5), "failure_probability"),
    (dict(sketch_size=1), "sketch_size"),
    (dict(method="svd"), "method"),
])
def test_bad_parameters(kwargs, match):
    params = dict(sketch_size=4)
    params.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sketch_rows_randomized(_inputs()["sparse"], **params)


def test_nan_rows_are_named():
    A = _inputs()["sparse"].tolil()
    A[700, 3] = np.nan
    with pytest.raises(ValueError, match="rows 700"):
        sketch_rows_randomized(A.tocsr(), 8)


@pytest.mark.slow  # .ci/run runs it by name
def test_empty_columns_change_nothing():
    """A block is sketched on the columns it touches: spreading the same rows over a
    wider matrix of empty columns gives the same sketch on the touched columns and
    zeros elsewhere, with the same certificate."""
    A = _inputs()["very_sparse"][:600]
    columns = np.sort(np.random.default_rng(0).choice(1500, A.shape[1], replace=False))
    wide = scipy.sparse.csr_matrix((A.data, columns[A.indices], A.indptr),
                                   shape=(A.shape[0], 1500))
    for center in (False, True):
        narrow_sketch = sketch_rows_randomized(A, 8, seed=3, center=center)
        wide_sketch = sketch_rows_randomized(wide, 8, seed=3, center=center)
        assert np.array_equal(wide_sketch.B[:, columns], narrow_sketch.B)
        assert not np.delete(wide_sketch.B, columns, axis=1).any()
        assert wide_sketch.shrinkage == narrow_sketch.shrinkage
        assert wide_sketch.error_bound == narrow_sketch.error_bound
        if center:
            assert np.array_equal(wide_sketch.mean[columns], narrow_sketch.mean)
        err, _ = _error(wide_sketch, wide)
        assert err <= wide_sketch.error_bound


def test_merging_sketches_of_disjoint_columns_is_exact():
    """Merges skip the columns no sketch touches; the result is the merge of the
    full-width sketches."""
    A = _inputs()["sparse"]
    wide = scipy.sparse.hstack([A, scipy.sparse.csr_matrix((A.shape[0], 3000))]).tocsr()
    parts = [sketch_rows(wide[i:i + 300], 8) for i in range(0, 1200, 300)]
    merged = merge_sketches(parts)
    stack = np.vstack([p.B for p in parts])
    expected = sketch_rows(stack, 8, update="block")
    assert not merged.B[:, A.shape[1]:].any()
    assert np.allclose(merged.B.T @ merged.B, expected.B.T @ expected.B, atol=1e-10)
    assert merged.shrinkage == pytest.approx(sum(p.shrinkage for p in parts)
                                             + expected.shrinkage)


@pytest.mark.parametrize("zeros", [scipy.sparse.csr_matrix((500, 400)), np.zeros((500, 400))])
@pytest.mark.heavy
def test_a_block_of_zero_rows(zeros):
    """Blocks of empty rows (padding, filtered rows) sketch to nothing, exactly."""
    empty = sketch_rows_randomized(zeros, 8)
    assert empty.B.shape == (0, 400) and empty.shrinkage == 0 == empty.error_bound
    A = _inputs()["sparse"][:, :400]
    stacked = scipy.sparse.vstack([A, scipy.sparse.csr_matrix(zeros)]).tocsr()
    merged = merge_sketches([sketch_rows_randomized(A, 8, seed=1), empty])
    assert merged.n_rows == stacked.shape[0]
    assert _error(merged.resize(8), stacked)[0] <= merged.resize(8).error_bound
