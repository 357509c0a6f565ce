"""The refinement of sketch_lstsq: its fused pass, its Gram matrix of A N, and its
result bit for bit on every scheduler."""

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import zarr

from dasketch._blocks import as_row_blocks
from dasketch.datasets import ill_conditioned_regression
from dasketch.linear_model import sketch_lstsq
from dasketch.linear_model._regression_passes import basis_gram_pass, gram_singular_values
from dasketch.linear_model._weighted_products import WeightedCentredProducts
from dasketch.linear_model.preconditioning import precondition_blocks


@pytest.fixture(scope="module")
def problem():
    A, b, _ = ill_conditioned_regression(3000, 25, condition_number=1e6, random_state=3)
    weights = np.random.default_rng(3).uniform(0.0, 3.0, 3000)
    return A + 5.0, b, weights


@pytest.mark.parametrize("sparse", [False, True])
def test_the_fused_pass_equals_the_separate_products(problem, sparse):
    """``A^T r`` and ``||r||`` for ``r = W^(1/2) shifted - A X`` (weighted, centred)
    from one read of every block equal the products one at a time, to rounding."""
    A, b, weights = problem
    X = scipy.sparse.csr_matrix(A) if sparse else A
    blocks = as_row_blocks(X, block_rows=700)
    mean, root = weights @ A / weights.sum(), np.sqrt(weights)
    products = WeightedCentredProducts(blocks, blocks, root_weights=root, mean=mean)
    shifted = np.column_stack([b - b.mean(), 2 * b])
    x = np.random.default_rng(0).standard_normal((25, 2))
    gradient, r_norm = products.residual_gradient(x, shifted)
    residual = shifted * root[:, None] - products.forward(x)
    np.testing.assert_allclose(r_norm, np.linalg.norm(residual, axis=0), rtol=1e-12)
    expected = products.adjoint(residual)
    np.testing.assert_allclose(gradient, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    assert products.passes == 3


def test_the_triangular_gram_gives_the_singular_values_of_a(problem):
    """``G`` of ``A R^{-1}`` (triangular products) and of ``A N`` (``N = V
    Sigma^{-1}``) are the same matrix up to a rotation, and both give the
    singular values of the (weighted, centred) ``A`` to 1e-10 relative at
    condition number 1e6, with ``A = (A R^{-1}) R`` and ``A = (A N) Sigma V^T``."""
    A, b, weights = problem
    blocks = as_row_blocks(A, block_rows=512)
    precond = precondition_blocks(blocks, b, random_state=0, sample_weight=weights,
                                  centre=True, full_rank=False)
    mean = weights @ A / weights.sum()
    exact = np.linalg.svd(np.sqrt(weights)[:, None] * (A - mean), compute_uv=False)
    triangular, _ = basis_gram_pass(blocks, precond, weights, triangular=True)
    rotated, _ = basis_gram_pass(blocks, precond, weights)
    np.testing.assert_allclose(np.linalg.eigvalsh(triangular), np.linalg.eigvalsh(rotated),
                               rtol=1e-10)
    for gram, factor in ((triangular, precond.R),
                         (rotated, np.diag(precond.singular_values[:25]))):
        np.testing.assert_allclose(gram_singular_values(gram, factor, 25), exact, rtol=1e-10)


def test_the_refinement_is_the_same_bits_on_threads_sync_and_a_cluster(tmp_path, problem,
                                                                      cluster_client):
    A, b, weights = problem
    path = str(tmp_path / "a.zarr")
    zarr.create_array(path, data=A, chunks=(400, 25))
    fits = []
    for scheduler in ("threads", "sync"):
        with dask.config.set(scheduler=scheduler):
            fits.append(sketch_lstsq(path, b, random_state=1, block_rows=500,
                                     sample_weight=da.from_array(weights, chunks=900),
                                     fit_intercept=True))
    fits.append(sketch_lstsq(path, b, random_state=1, block_rows=500, client=cluster_client,
                             sample_weight=weights, fit_intercept=True))
    assert fits[0].n_passes == fits[0].n_iter + 2
    for other in fits[1:]:
        np.testing.assert_array_equal(other.x, fits[0].x)
        assert (other.intercept, other.coef_error_bound, other.n_iter) == (
            fits[0].intercept, fits[0].coef_error_bound, fits[0].n_iter)
