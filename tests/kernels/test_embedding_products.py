"""The compiled ``S B`` of a sparse embedding's block against scipy's CSR product."""

import numpy as np
import pytest

from dasketch.kernels.embedding_products import scatter_rows
from dasketch.kernels.embeddings import embedding_entries, entries_matrix


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, bool])
@pytest.mark.parametrize("embedding, k", [("osnap", 4), ("countsketch", 1), ("cauchy", 1)])
def test_scatter_equals_scipys_product_bit_for_bit(dtype, embedding, k):
    """The same sums in the same order (row ``i`` increasing within every output
    row, no fused multiply-adds): the same bits as ``S @ B`` in float64."""
    rng = np.random.default_rng(0)
    block = (rng.standard_normal((3000, 37)) * 1e3).astype(dtype)
    buckets, values = embedding_entries(7, 2, 5000, 8000, 50, embedding=embedding,
                                        nnz_per_column=k)
    expected = entries_matrix(buckets, values, 50) @ block.astype(np.float64)
    out = scatter_rows(block, buckets, values, np.zeros((50, 37)))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, expected)


def test_scatter_adds_into_a_strided_view_and_leaves_the_rest():
    rng = np.random.default_rng(1)
    block = rng.standard_normal((500, 9))
    buckets, values = embedding_entries(3, 1, 0, 500, 20, nnz_per_column=4)
    packed = np.full((25, 12), 7.0)
    packed[:20, :9] = 1.0
    scatter_rows(block, buckets, values, packed[:20, :9])
    np.testing.assert_array_equal(packed[:20, :9],
                                  scatter_rows(block, buckets, values, np.ones((20, 9))))
    np.testing.assert_allclose(packed[:20, :9] - 1.0,
                               entries_matrix(buckets, values, 20) @ block, atol=1e-12)
    assert (packed[20:] == 7.0).all() and (packed[:, 9:] == 7.0).all()


def test_non_finite_rows_reach_only_their_buckets():
    block = np.ones((4, 3))
    block[2, 1] = np.nan
    buckets = np.array([[0], [1], [2], [0]])
    out = scatter_rows(block, buckets, np.ones((4, 1)), np.zeros((3, 3)))
    assert np.isnan(out[2, 1]) and np.isfinite(np.delete(out.ravel(), 7)).all()
    np.testing.assert_array_equal(out[0], [2.0, 2.0, 2.0])


def test_scaled_scatter_gives_the_scaled_rows_sums_and_norms_from_one_read():
    """The embedding of ``diag(scale) B`` is the same bits as scattering the scaled
    rows; the weighted sums and row norms equal numpy's to rounding."""
    from dasketch.kernels.embedding_products import scatter_scaled_rows

    rng = np.random.default_rng(2)
    block = rng.standard_normal((700, 13)).astype(np.float32)
    weights = rng.uniform(0.0, 2.0, 700)
    scale = np.sqrt(weights)
    buckets, values = embedding_entries(5, 1, 100, 800, 30, nnz_per_column=4)
    out = np.zeros((30, 13))
    sums, squares = scatter_scaled_rows(block, scale, weights, buckets, values, out)
    scaled = scale[:, None] * block.astype(np.float64)
    np.testing.assert_array_equal(out, scatter_rows(scaled, buckets, values,
                                                    np.zeros((30, 13))))
    dense = block.astype(np.float64)
    np.testing.assert_allclose(sums, weights @ dense, rtol=1e-12)
    np.testing.assert_allclose(squares, np.einsum("ij,ij->i", dense, dense), rtol=1e-12)
