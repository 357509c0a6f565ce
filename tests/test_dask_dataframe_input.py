"""Dask DataFrames and arrays with unknown chunk sizes (``ddf.values``,
``ddf.to_dask_array()``) are accepted by the estimators and by the functions
that take a matrix (``sketch``, ``sketch_lstsq``, ``dual_random_projection``),
as dask-ml accepts them: the row-block layer computes their row counts first,
and the result equals the one computed on the same rows in memory."""

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dasketch import SketchPCA
from dasketch._blocks import known_row_chunks
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    SketchLstsqRegressor,
)

ESTIMATORS = {
    "drp-regressor": lambda: DualRandomProjectionRegressor(alpha=1.0, tol=1e-10,
                                                           random_state=0),
    "drp-classifier": lambda: DualRandomProjectionClassifier(alpha=1.0, tol=1e-10,
                                                             random_state=0),
    "lstsq": lambda: SketchLstsqRegressor(random_state=0),
    "pca": lambda: SketchPCA(n_components=3, sketch_size="exact", random_state=0),
}


@pytest.fixture(scope="module")
def frame():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((157, 6)) + np.arange(6)
    y = X @ rng.standard_normal(6) + 0.1 * rng.standard_normal(157)
    df = pd.DataFrame(X, columns=list("abcdef"))
    df["y"] = y
    return X, y, dd.from_pandas(df, npartitions=5)


def outputs(model, X):
    if isinstance(model, SketchPCA):
        return model.components_, np.asarray(model.transform(X))
    return np.atleast_2d(model.coef_), np.asarray(model.predict(X))


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize("form", ["values", "to_dask_array", "frame"])
def test_unknown_chunk_sizes_give_the_in_memory_model(frame, name, form):
    X, y, ddf = frame
    features = ddf[list("abcdef")]
    X_lazy = {"values": features.values, "to_dask_array": features.to_dask_array(),
              "frame": features}[form]
    if form != "frame":
        assert np.isnan(X_lazy.shape[0])      # what dask-ml accepts and we used to refuse
    labels = np.where(y > np.median(y), "up", "down")
    target = labels if name == "drp-classifier" else y
    y_lazy = dd.from_pandas(pd.Series(target, dtype=object), npartitions=5).values
    lazy = ESTIMATORS[name]().fit(X_lazy, None if name == "pca" else y_lazy)
    eager = ESTIMATORS[name]().fit(X, None if name == "pca" else target)
    for got, want in zip(outputs(lazy, X_lazy), outputs(eager, X)):
        if got.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
        else:
            np.testing.assert_array_equal(got, want)
    assert lazy.n_features_in_ == 6


def test_known_row_chunks_leaves_known_chunks_alone():
    X = da.ones((10, 3), chunks=(4, 3))
    assert known_row_chunks(X) is X
    assert known_row_chunks(np.ones((2, 2))).shape == (2, 2)


def _lazy_forms(ddf, columns):
    features = ddf[columns]
    return {"values": features.values, "to_dask_array": features.to_dask_array(),
            "frame": features}


@pytest.mark.parametrize("form", ["values", "to_dask_array", "frame"])
def test_functions_accept_unknown_chunk_sizes(frame, form):
    """The row-block layer computes the row counts itself, so the functions that
    take a matrix directly (not only the estimators) accept what dask-ml accepts,
    and give the in-memory result (same blocks: same arithmetic)."""
    from dasketch import sketch
    from dasketch.linear_model import dual_random_projection, sketch_lstsq

    X, y, ddf = frame
    X_lazy = _lazy_forms(ddf, list("abcdef"))[form]
    y_lazy = ddf["y"].values
    assert np.isnan(y_lazy.shape[0])
    got, want = (sketch(M, 4, center=True, block_rows=40) for M in (X_lazy, X))
    np.testing.assert_array_equal(got.B, want.B)
    assert got.n_rows == 157 and got.error_bound == want.error_bound
    weights = np.arange(157) % 3
    got, want = (sketch_lstsq(M, b, random_state=0, block_rows=40, sample_weight=weights,
                              fit_intercept=True) for M, b in ((X_lazy, y_lazy), (X, y)))
    np.testing.assert_allclose(got.x, want.x, rtol=1e-12)
    got, want = (dual_random_projection(M, b, alpha=1.0, tol=1e-10, random_state=0,
                                        block_rows=40, sketch_size=6,
                                        sample_weight=da.from_array(weights, chunks=50))
                 for M, b in ((X_lazy, y_lazy), (X, y)))
    np.testing.assert_allclose(got.coef, want.coef, rtol=1e-12)
    assert got.intercept == pytest.approx(want.intercept, rel=1e-12)


def test_row_aligned_vectors_of_unknown_chunk_sizes(frame):
    from dasketch._blocks import as_row_aligned, as_row_blocks

    X, y, ddf = frame
    blocks = as_row_blocks(ddf[list("abcdef")].values, block_rows=50)
    assert blocks.offsets == (0, 50, 100, 150, 157)
    aligned = as_row_aligned(ddf["y"].values, blocks, name="y")
    assert aligned.chunks == ((50, 50, 50, 7),)
    np.testing.assert_array_equal(aligned.compute(), y)
