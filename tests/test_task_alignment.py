"""Block tasks and the caller get their arrays aligned: ``distributed`` can
deserialize an array at any byte offset, where numpy multiplies by its own loops
instead of BLAS (other rounding, many times the time), so a fit on a cluster would
differ in its last bits from the same fit on threads."""

import os
import tempfile
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import dasketch
from dasketch import Sketch
from dasketch._blocks import compute
from dasketch._blocks.tasks import task
from dasketch.linear_model import dual_random_projection
from tests.helpers import low_rank_plus_noise


def _unaligned(X):
    raw = np.empty(X.nbytes + 16, np.uint8)
    start = (-raw.ctypes.data) % 8 + 4
    out = raw[start:start + X.nbytes].view(X.dtype).reshape(X.shape)
    out[...] = X
    return out


def _seen(a, *, b):
    return a.flags.aligned, b.flags.aligned, a.copy(), b.copy()


def test_a_task_gets_aligned_copies_of_unaligned_arrays():
    X = np.arange(30.0).reshape(6, 5)
    U = _unaligned(X)
    assert not U.flags.aligned
    with dask.config.set(scheduler="sync"):
        (result,) = compute(task(_seen)(U, b=U))
    assert result[:2] == (True, True)
    np.testing.assert_array_equal(result[2], X)
    np.testing.assert_array_equal(result[3], X)


@pytest.mark.slow  # .ci/run runs it by name
@pytest.mark.cluster
def test_a_fit_on_worker_processes_has_the_bits_of_the_fit_on_threads(cluster_client):
    X = low_rank_plus_noise(50000, 500, 40, seed=3)
    rng = np.random.default_rng(4)
    y = X @ rng.standard_normal(500) + rng.standard_normal(50000)
    alpha = 1e-3 * float(np.sum(X * X)) / min(X.shape)
    params = dict(alpha=alpha, sketch_size=100, tol=1e-6, random_state=0,
                  fit_intercept=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with dask.config.set(scheduler="threads"):
            reference = dual_random_projection(X, y, **params).coef
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "X.zarr")
            with dask.config.set(scheduler="threads"):
                da.from_array(X, chunks=(6250, 500)).to_zarr(path)
            fits = {"in memory": dual_random_projection(X, y, client=cluster_client,
                                                        **params),
                    "cached store": dual_random_projection(path, y, cache=True,
                                                           client=cluster_client, **params)}
    for name, fit in fits.items():
        np.testing.assert_array_equal(fit.coef, reference, err_msg=name)


def test_an_unpickled_sketch_holds_aligned_arrays():
    sketch = Sketch.from_rows(np.random.default_rng(0).standard_normal((50, 6)), 4)
    state = dict(vars(sketch), B=_unaligned(sketch.B))
    assert not state["B"].flags.aligned
    restored = Sketch.__new__(Sketch)
    restored.__setstate__(state)
    assert restored.B.flags.aligned
    np.testing.assert_array_equal(restored.B, sketch.B)


@pytest.mark.cluster
@pytest.mark.parametrize("update", ["gram", "block"])
def test_a_sketch_on_worker_processes_has_the_bits_of_the_sketch_on_threads(
        cluster_client, update):
    X = low_rank_plus_noise(60000, 256, 40, seed=5)
    with dask.config.set(scheduler="threads"):
        reference = dasketch.sketch(X, 16, update=update, block_rows=4096)
    for A in (X, da.from_array(X, chunks=(7000, 256))):
        ours = dasketch.sketch(A, 16, update=update, block_rows=4096, client=cluster_client)
        np.testing.assert_array_equal(ours.B, reference.B)
        assert ours.shrinkage == reference.shrinkage
