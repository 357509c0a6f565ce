"""The orthonormal factor behind the dual random projection's preconditioner."""

import numpy as np
import pytest

from dasketch.linear_model.dual_projection.preconditioner import orthonormal_factor


def _tall(condition, rng, d=2000, k=30):
    left, _ = np.linalg.qr(rng.standard_normal((d, k)))
    right, _ = np.linalg.qr(rng.standard_normal((k, k)))
    return (left * np.logspace(0, -np.log10(condition), k)) @ right


@pytest.mark.parametrize("condition", [1.0, 1e4, 1e8, 1e12])
def test_the_factor_is_orthonormal_and_reproduces_the_matrix(condition):
    # well-conditioned matrices take CholeskyQR2, ill-conditioned ones the SVD;
    # both must give orthonormal columns (the Woodbury identity of the
    # preconditioner assumes them) and V F = A
    A = _tall(condition, np.random.default_rng(0))
    V, F = orthonormal_factor(A)
    k = A.shape[1]
    assert np.linalg.norm(V.T @ V - np.eye(k)) <= 1e-12 * k
    assert np.linalg.norm(V @ F - A) <= 1e-13 * np.linalg.norm(A)
    # the preconditioner depends on V F only: the same Gram as the SVD's
    assert np.allclose(F.T @ F, A.T @ A, rtol=0, atol=1e-13 * np.linalg.norm(A) ** 2)
