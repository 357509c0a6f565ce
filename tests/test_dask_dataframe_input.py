"""Dask DataFrames and arrays with unknown chunk sizes (``ddf.values``,
``ddf.to_dask_array()``) are accepted by the estimators, as dask-ml accepts
them: their row counts are computed first, and the model equals the one fitted
on the same rows in memory."""

import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from dasketch import SketchPCA
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    DualRandomProjectionRegressor,
    SketchLstsqRegressor,
)
from dasketch.utils.validation import known_row_chunks

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
