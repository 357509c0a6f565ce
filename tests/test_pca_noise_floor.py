"""SketchPCA counts a residual variance as noise exactly when its computation
cannot have made it from rounding
(:func:`~dasketch.decomposition._variance.unexplained_rounding`)."""

import numpy as np
import pytest
import scipy.linalg

from dasketch import SketchPCA


@pytest.mark.parametrize("seed", range(6))
def test_rank_one_data_of_many_rows_have_no_noise(seed):
    """Exactly rank-one rows, ``20,000 x 2``: the residual is rounding (up to
    ``6.5 d eps`` of the total in these draws), so the model is singular."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((20000, 1)) @ rng.standard_normal((1, 2))
    pca = SketchPCA(n_components=1).fit(X)
    assert pca.noise_variance_ == 0.0
    assert pca.score(X) == -np.inf


@pytest.mark.parametrize("fraction, reported", [(0.75, False), (1.5, True)])
def test_noise_just_beyond_the_rounding_of_its_computation_is_reported(fraction, reported):
    """Orthogonal zero-mean columns ``3 h_1, 2 h_2, h_3, c h_4`` (``h_j`` Hadamard
    columns of order 256): three components, the exact residual variance
    ``c^2 256 / 255``, computed to about ``1e-15``. Its computation may carry up to
    ``3.775e-12`` of rounding here: ``c`` is set for 0.75 and 1.5 times that. The
    first is no noise (a singular model); the second is reported, to ``1e-3``.
    Half the rounding bound would report the first, twice it would drop the second."""
    H = scipy.linalg.hadamard(256).astype(np.float64)
    residual = fraction * 3.775e-12
    c = np.sqrt(residual * 255 / 256)
    X = H[:, 1:5] * [3.0, 2.0, 1.0, c]
    pca = SketchPCA(n_components=3).fit(X)
    if reported:
        assert pca.noise_variance_ == pytest.approx(residual, rel=1e-3)
        assert np.isfinite(pca.score(X))
    else:
        assert pca.noise_variance_ == 0.0
        assert pca.score(X) == -np.inf
