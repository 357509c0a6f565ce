"""The public sketch() on sparse and wide data: the update choice, randomized
guarantees, invariance, the working size, the a-posteriori error estimate."""

import dask.array as da
import numpy as np
import pytest
import scipy.sparse

import dasketch
from dasketch._blocks import as_row_blocks, blocked_sketch, default_block_rows
from dasketch.datasets import write_sparse_synthetic
from dasketch.sketching import (
    choose_update,
    default_split_every,
    default_working_size,
    dense_block_rows,
    randomized_block_rows,
)
from dasketch.storage.reading import read_csr_rows
from tests.helpers import sparse_decaying, spectral_norm


@pytest.fixture(scope="module")
def wide_sparse():
    """2,000 x 1,000 rows with about 5 nonzeros each and a decaying column scale."""
    return sparse_decaying(2000, 1000, 5, seed=7)


def _error(sk, X):
    A = X.toarray() if scipy.sparse.issparse(X) else np.asarray(X)
    if sk.centered:
        A = A - A.mean(axis=0)
    return spectral_norm(A.T @ A - (sk.covariance() - sk.alpha0 * np.eye(A.shape[1]))), A


def test_auto_update_is_randomized_for_wide_sparse_only(wide_sparse):
    assert choose_update("auto", True, 1000, 8) == "randomized"
    assert choose_update("auto", True, 123, 8) == "auto"
    assert choose_update("auto", False, 10 ** 5, 8) == "auto"
    assert choose_update("block", True, 10 ** 5, 8) == "block"
    sk = dasketch.sketch(wide_sparse, 8, random_state=0, block_rows=500)
    assert sk.guarantee == "probability >= 1 - 1e-06"
    assert sk.failure_probability == pytest.approx(1e-6)
    dense = dasketch.sketch(wide_sparse[:, :100].toarray(), 8)
    assert dense.guarantee == "certified"


@pytest.mark.parametrize("method", ["rfd", "fd"])
@pytest.mark.parametrize("center", [False, True])
@pytest.mark.heavy
def test_randomized_sketch_within_bound_and_near_best(wide_sparse, method, center):
    sk = dasketch.sketch(wide_sparse, 8, method=method, center=center, random_state=1,
                         block_rows=500)
    err, A = _error(sk, wide_sparse)
    assert err <= sk.error_bound
    lam = np.linalg.eigvalsh(A.T @ A)[::-1]
    best = (lam[7] - lam[-1]) / (2 if method == "rfd" else 1)
    assert err <= 2.0 * best  # measured 1.3-1.5x


def test_randomized_result_independent_of_storage_scheduler_and_workers(tmp_path,
                                                                        cluster_client):
    path = str(tmp_path / "x.zarr")
    write_sparse_synthetic(path, 2000, 1000, density=5e-3, chunk_rows=700)
    in_memory = read_csr_rows(path, 0, 2000)
    reference = dasketch.sketch(in_memory, 8, random_state=3, block_rows=300)
    assert reference.failure_probability > 0
    for X, client in [(in_memory, cluster_client), (path, None), (path, cluster_client)]:
        other = dasketch.sketch(X, 8, random_state=3, block_rows=300, client=client)
        np.testing.assert_allclose(other.B, reference.B, rtol=1e-9, atol=1e-12)
        assert other.shrinkage == pytest.approx(reference.shrinkage, rel=1e-9)
        assert other.error_bound == pytest.approx(reference.error_bound, rel=1e-9)


@pytest.mark.slow  # .ci/run runs it by name
def test_estimate_error_brackets_true_error(wide_sparse):
    failures = 0
    for seed in range(10):
        sk = dasketch.sketch(wide_sparse, 8, random_state=seed, block_rows=700)
        err, _ = _error(sk, wide_sparse)
        est = dasketch.estimate_error(wide_sparse, sk, n_vectors=3, random_state=seed,
                                      block_rows=300)
        assert est.lower <= err * (1 + 1e-9)
        assert est.lower >= 0.1 * err
        failures += est.upper < err
    assert failures <= 1  # each fails with probability 1e-3


def test_estimate_error_rejects_other_data(wide_sparse):
    sk = dasketch.sketch(wide_sparse, 8, random_state=0)
    with pytest.raises(ValueError, match="summarises"):
        dasketch.estimate_error(wide_sparse[:100], sk)
    with pytest.raises(ValueError, match="n_vectors"):
        dasketch.estimate_error(wide_sparse, sk, n_vectors=0)
    with pytest.raises(TypeError, match="sketch"):
        dasketch.estimate_error(wide_sparse, sk.B)


def test_estimate_error_names_more_vectors_than_columns():
    """The r Gaussian vectors span at most the d columns: r > d is refused
    before the pass, naming n_vectors; r = d is taken."""
    X = np.random.default_rng(0).standard_normal((50, 4))
    sk = dasketch.sketch(X, 3)
    with pytest.raises(ValueError, match=r"n_vectors must be at most .* \(4\).* got 5"):
        dasketch.estimate_error(X, sk, n_vectors=5)
    est = dasketch.estimate_error(X, sk, n_vectors=4, random_state=0)
    true = np.linalg.norm(X.T @ X - sk.B.T @ sk.B - (sk.alpha - sk.alpha0) * np.eye(4), 2)
    assert est.lower <= true * (1 + 1e-9) and est.lower >= true * (1 - 1e-9)



@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
@pytest.mark.parametrize("scale", [1e-100, 1e-158])
def test_estimate_error_of_tiny_data_brackets_the_error(center, scale):
    """At 1e-100 the error is near 1e-198 and its squares underflow, at 1e-158 it is
    a subnormal: the bracket is taken on the rows multiplied up (and every norm
    scaled), then scaled back outwards, so lower <= true error <= upper, the true
    error computed exactly in the scaled units (data times 2**-e)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((600, 10)) * 0.7 ** np.arange(10) * scale
    sk = dasketch.sketch(X, 4, center=center, block_rows=200)
    e = sk.scale_exponent
    scaled = sk.scaled()
    Xs = np.ldexp(X, -e)
    if center:
        Xs = Xs - Xs.mean(axis=0)
    true_scaled = spectral_norm(Xs.T @ Xs + scaled.alpha0 * np.eye(10) - scaled.covariance())
    est = dasketch.estimate_error(X, sk, n_vectors=6, random_state=0)
    # ldexp by -2e is exact for these (subnormal or normal) floats: compared unrounded.
    assert np.ldexp(est.lower, -2 * e) <= true_scaled * (1 + 1e-9)
    assert np.ldexp(est.upper, -2 * e) >= true_scaled * (1 - 1e-9)
    assert 0 < est.upper and est.lower <= est.upper

@pytest.mark.parametrize("value", [0, 1, -0.1, "x"])
def test_bad_failure_probability(wide_sparse, value):
    with pytest.raises(ValueError, match="failure_probability"):
        dasketch.sketch(wide_sparse, 8, failure_probability=value)


def test_bad_update(wide_sparse):
    with pytest.raises(ValueError, match="update"):
        dasketch.sketch(wide_sparse, 8, update="stream")


def test_randomized_blocks_are_larger_while_they_hold_many_nonzeros_per_column():
    # 100 nonzeros a row, 1e5 columns: 2^23 nonzeros, 65,536 rows (exact: 32,768)
    assert randomized_block_rows(100, 10 ** 5) == 65536
    assert default_block_rows(100) == 32768
    assert randomized_block_rows(4.4, 2 ** 17) == 2 ** 17  # at most 2^17 rows
    # 1e6 columns: a block of 2^23 nonzeros would touch ever more of them
    assert randomized_block_rows(100, 10 ** 6) == 32768
    X = scipy.sparse.random(600, 400, density=0.05, format="csr", random_state=0)
    assert len(as_row_blocks(X, default_rows=lambda nnz, d, sparse: 256).blocks) == 3
    blocks = as_row_blocks(X, block_rows=100, default_rows=lambda nnz, d, sparse: 256)
    assert len(blocks.blocks) == 6


def test_sketch_cuts_randomized_blocks_by_randomized_block_rows(monkeypatch):
    # Scaled down: blocks of 2^12 nonzeros, 8 a row -> 512 rows (the exact update's
    # default would be one block).
    monkeypatch.setattr(blocked_sketch, "RANDOMIZED_BLOCK_NONZEROS", 2 ** 12)
    rng = np.random.default_rng(3)
    cols = np.stack([rng.choice(256, 8, replace=False) for _ in range(2000)])
    X = scipy.sparse.csr_matrix((rng.standard_normal(cols.size), cols.ravel(),
                                 np.arange(0, cols.size + 1, 8)), shape=(2000, 256))
    default = dasketch.sketch(X, 4, random_state=0)
    assert default.guarantee != "certified"
    explicit = dasketch.sketch(X, 4, random_state=0, block_rows=512)
    np.testing.assert_array_equal(default.B, explicit.B)
    whole = dasketch.sketch(X, 4, random_state=0, block_rows=2000)
    assert not np.allclose(default.B.T @ default.B, whole.B.T @ whole.B)


def test_sketch_cuts_wide_dense_rows_by_dense_block_rows():
    # 40,000 columns, l = 8: blocks of 128 rows (16 l), not default_block_rows' 64
    X = np.random.default_rng(4).standard_normal((256, 40_000)) * (1.0 + np.arange(40_000)) ** -0.5
    assert dense_block_rows(8, 40_000) == 128 and default_block_rows(40_000) == 64
    default = dasketch.sketch(X, 8)
    np.testing.assert_array_equal(default.B, dasketch.sketch(X, 8, block_rows=128).B)
    narrow = dasketch.sketch(X, 8, block_rows=64)
    assert not np.allclose(default.B @ default.B.T, narrow.B @ narrow.B.T)


def test_default_working_size_is_oversampled_and_memory_capped():
    assert default_working_size(8, 100) == 32
    # randomized: l (error per second, bench_sparse_wide); for wide rows the fan-in
    # drops to keep merges within 256 MiB
    assert default_working_size(8, 100, update="randomized") == 8
    wide = default_working_size(64, 10 ** 6, update="randomized", sparse=True)
    assert wide == 64 and default_split_every(wide, 10 ** 6) == 2
    assert default_split_every(64, 10 ** 5) == 5 and 5 * 64 * 10 ** 5 <= 2 ** 25
    # split_every = 8 inner sketches stay within 256 MiB; never below l
    assert default_working_size(8, 10 ** 5, sparse=True) == 32
    assert default_working_size(16, 10 ** 5, sparse=True) == 41
    # dense rows wider than a block is tall: l (error per second, bench_sparse_wide)
    assert default_working_size(8, 2048) == 32
    assert default_working_size(8, 4096) == 8
    assert default_working_size(16, 10 ** 5) == 24  # blocks of 32 rows < 16 l: 1.5 l
    assert default_working_size(32, 8192) == 32
    # wide dense blocks grow to 16 l rows within 128 MiB (dense_block_rows): l there
    assert dense_block_rows(32, 32768) == 512 and default_block_rows(32768) == 128
    assert default_working_size(32, 32768) == 32
    assert dense_block_rows(32, 10 ** 5) == 128 and dense_block_rows(8, 10 ** 6) == 32
    assert default_working_size(8, 10 ** 6) == 8
    assert default_working_size(8, 10 ** 6, split_every=2, sparse=True) == 16
    # and the fan-in drops for very wide rows, so one merge stays within 256 MiB
    assert default_split_every(32, 1000) == 8
    assert default_split_every(32, 10 ** 5) == 8
    assert default_split_every(32, 3 * 10 ** 5) == 3
    assert default_split_every(32, 10 ** 7) == 2


def test_wide_dense_sketch_independent_of_chunking_and_scheduler(cluster_client):
    # d = 2,100 > 2,048: working size l, chunks through the row Gram.
    X = np.random.default_rng(5).standard_normal((400, 2100)) * (1.0 + np.arange(2100)) ** -0.5
    reference = dasketch.sketch(X, 10, block_rows=128)
    err, _ = _error(reference, X)
    assert err <= reference.error_bound * (1 + 1e-9)
    for data, client in [(da.from_array(X, chunks=(100, 2100)), None), (X, cluster_client)]:
        other = dasketch.sketch(data, 10, block_rows=128, client=client)
        np.testing.assert_allclose(other.B.T @ other.B, reference.B.T @ reference.B,
                                   rtol=1e-9, atol=1e-9 * err)
        assert other.shrinkage == pytest.approx(reference.shrinkage, rel=1e-9)


@pytest.mark.parametrize("sketch_size", [5, 10, 20, 30, 50])
@pytest.mark.heavy
def test_a9a_tree_within_five_percent_of_best_possible(a9a_train, sketch_size):
    """The RFD paper's Theorem 1 bound (lambda_l - lambda_d) / 2 is the best any
    rank-(l-1)-plus-ridge estimate can reach; the default tree (blocks of 2,048
    rows, fan-in 8, working size 4l) must stay within 5 % of it."""
    X, _ = a9a_train
    sk = dasketch.sketch(X, sketch_size, block_rows=2048)
    assert sk.guarantee == "certified"
    err, A = _error(sk, X)
    lam = np.linalg.eigvalsh(A.T @ A)[::-1]
    best = (lam[sketch_size - 1] - lam[-1]) / 2
    assert err <= sk.error_bound * (1 + 1e-9)
    assert err <= 1.05 * best


def test_one_block_is_sketched_at_the_final_size_only_when_one_shrink_absorbs_it():
    rng = np.random.default_rng(0)
    tall = rng.standard_normal((2000, 16)) * 0.8 ** np.arange(16)   # one shrink (column side)
    wide = rng.standard_normal((300, 600)) * 0.99 ** np.arange(600)  # shrinks of 64 rows
    for X, working_size in ((tall, 4), (wide, 16)):
        ours = dasketch.sketch(X, 4, block_rows=X.shape[0])
        expected = dasketch.sketch(X, 4, block_rows=X.shape[0], working_size=working_size)
        assert ours.shrinkage == expected.shrinkage
        assert np.array_equal(ours.B, expected.B)
    # one shrink of the whole block: FD's shrinkage is the 4th squared singular value
    singular = np.linalg.svd(tall, compute_uv=False)
    one = dasketch.sketch(tall, 4, block_rows=2000)
    assert one.shrinkage == pytest.approx(singular[3] ** 2, rel=1e-10)
