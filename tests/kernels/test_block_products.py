"""Block products in the transposed layout equal the plain ``@`` to rounding."""

import numpy as np
import pytest
import scipy.sparse

from dasketch.kernels.block_products import rows_times, rows_transpose_times


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("columns", [None, 1, 2, 7, 81])
def test_products_equal_matmul(order, columns):
    rng = np.random.default_rng(columns or 0)
    block = np.asarray(rng.standard_normal((300, 500)), order=order)
    right = rng.standard_normal((500,) if columns is None else (500, columns))
    left = rng.standard_normal((300,) if columns is None else (300, columns))
    forward, backward = rows_times(block, right), rows_transpose_times(block, left)
    assert forward.shape == (block @ right).shape
    assert backward.shape == (block.T @ left).shape
    scale = np.abs(block).max() * 500
    np.testing.assert_allclose(forward, block @ right, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(backward, block.T @ left, rtol=0, atol=1e-13 * scale)


def test_float32_blocks_and_sparse_blocks():
    rng = np.random.default_rng(1)
    dense = rng.standard_normal((50, 80))
    dense[np.abs(dense) < 1.0] = 0.0
    right, left = rng.standard_normal((80, 3)), rng.standard_normal((50, 3))
    single = dense.astype(np.float32)
    assert rows_times(single, right).dtype == (single @ right).dtype
    np.testing.assert_allclose(rows_times(single, right), single @ right, rtol=1e-12)
    sparse = scipy.sparse.csr_matrix(dense)
    np.testing.assert_allclose(rows_times(sparse, right), dense @ right, rtol=1e-12)
    np.testing.assert_allclose(rows_transpose_times(sparse, left), dense.T @ left, rtol=1e-12)


@pytest.mark.parametrize("width", [3, 12])  # panels / too wide for panels
@pytest.mark.parametrize("n_features", [300, 20000])  # panels of 436 rows / one product
def test_forward_backward_in_panels(n_features, width):
    """Panels of rows give the forward product, the row-wise map (which sees the
    right rows of its per-row data) and the backward product of the whole block."""
    from dasketch.kernels import block_products

    rng = np.random.default_rng(5)
    block = rng.standard_normal((1000, n_features))
    matrix = rng.standard_normal((n_features, width))
    weights = rng.uniform(0.5, 2.0, size=(1000, 1))

    def rowwise(F, rows):
        return np.hstack([weights[rows] * np.tanh(F[:, :2]), F[:, 2:] ** 2])  # k = width

    F, U, backward = block_products.rows_forward_backward(block, matrix, rowwise)
    expected_F = block @ matrix
    expected_U = rowwise(expected_F, slice(None))
    scale = np.abs(block).max() * n_features
    np.testing.assert_allclose(F, expected_F, rtol=0, atol=1e-13 * scale)
    np.testing.assert_allclose(U, expected_U, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(backward, block.T @ expected_U, rtol=1e-9, atol=1e-9 * scale)
