"""Distributed sparse embeddings S A: exactness, chunking, schedulers, distribution."""

import dask.array as da
import numpy as np
import pytest
import scipy.linalg
import scipy.sparse
import scipy.stats

import dasketch
from dasketch.kernels.embeddings import sparse_embedding_block

KINDS = [("countsketch", 1), ("osnap", 4), ("cauchy", 1)]


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(5)
    A = rng.standard_normal((9000, 7)) * np.logspace(0, 3, 7)
    A[[3, 4100, 8999]] *= 50.0
    return A


@pytest.mark.parametrize("kind,k", KINDS)
def test_equals_explicit_embedding(A, kind, k):
    SA = dasketch.sparse_embed(A, 30, embedding=kind, nnz_per_column=k, random_state=2,
                               block_rows=1000)
    S = sparse_embedding_block(2, 0, 0, A.shape[0], 30, embedding=kind, nnz_per_column=k)
    np.testing.assert_allclose(SA, S @ A, rtol=1e-10, atol=1e-9 * np.abs(S @ A).max())


@pytest.mark.parametrize("kind,k", KINDS)
def test_independent_of_chunking(A, kind, k):
    ref = dasketch.sparse_embed(A, 30, embedding=kind, nnz_per_column=k, random_state=9)
    scale = np.abs(ref).max()
    with pytest.warns(UserWarning, match="chunked along columns"):
        column_chunked = dasketch.sparse_embed(da.from_array(A, chunks=(1234, 3)), 30,
                                               embedding=kind, nnz_per_column=k, random_state=9,
                                               block_rows=2000)
    for other in (dasketch.sparse_embed(A, 30, embedding=kind, nnz_per_column=k, random_state=9,
                                        block_rows=777),
                  column_chunked,
                  dasketch.sparse_embed(scipy.sparse.csr_matrix(A), 30, embedding=kind,
                                        nnz_per_column=k, random_state=9, block_rows=500)):
        np.testing.assert_allclose(other, ref, rtol=0, atol=1e-12 * scale)
    different = dasketch.sparse_embed(A, 30, embedding=kind, nnz_per_column=k, random_state=10)
    assert np.abs(different - ref).max() > 1e-3 * scale


def test_local_cluster_equals_threads(A, cluster_client):
    threads = dasketch.sparse_embed(A, 24, random_state=4, block_rows=1500)
    procs = dasketch.sparse_embed(A, 24, random_state=4, block_rows=1500,
                                  client=cluster_client)
    np.testing.assert_allclose(procs, threads, rtol=0, atol=1e-12 * np.abs(threads).max())


def test_osnap_is_a_subspace_embedding(A):
    # ||S A x|| within (1 +- 0.5) ||A x|| for all x: singular values of S U in [0.5, 1.5]
    U = np.linalg.qr(A)[0]
    SU = dasketch.sparse_embed(U, 8 * U.shape[1], random_state=1)
    s = np.linalg.svd(SU, compute_uv=False)
    assert 0.5 < s.min() <= s.max() < 1.5


@pytest.mark.heavy
def test_countsketch_distribution_matches_scipy():
    # The same random matrix law as scipy.linalg.clarkson_woodruff_transform:
    # compare the law of ||S A x||^2 (which depends on bucket collisions and
    # signs) over independent seeds with a two-sample Kolmogorov-Smirnov test.
    rng = np.random.default_rng(0)
    A = rng.standard_normal((60, 3))
    A[0] *= 6.0
    x = np.array([1.0, -2.0, 0.5])
    ours = [np.sum((dasketch.sparse_embed(A, 6, embedding="countsketch", random_state=s) @ x)
                   ** 2) for s in range(300)]
    ref = [np.sum((scipy.linalg.clarkson_woodruff_transform(A, 6, seed=s) @ x) ** 2)
           for s in range(300)]
    assert scipy.stats.ks_2samp(ours, ref).pvalue > 1e-3
    exact = np.sum((A @ x) ** 2)
    assert np.mean(ours) == pytest.approx(exact, rel=0.1)
    # and a different law (the sparse Cauchy transform) is told apart
    wide = [np.sum((dasketch.sparse_embed(A, 6, embedding="cauchy", random_state=s) @ x) ** 2)
            for s in range(300)]
    assert scipy.stats.ks_2samp(wide, ref).pvalue < 1e-6


@pytest.mark.parametrize("kwargs,match", [
    (dict(sketch_size=0), "sketch_size"),
    (dict(sketch_size=10, embedding="gaussian"), "embedding"),
    (dict(sketch_size=3, embedding="osnap", nnz_per_column=4), "nnz_per_column"),
    (dict(sketch_size=10, embedding="countsketch", nnz_per_column=2), "nnz_per_column"),
])
def test_bad_input(A, kwargs, match):
    with pytest.raises(ValueError, match=match):
        dasketch.sparse_embed(A, **kwargs)
