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


@pytest.mark.cluster
@pytest.mark.heavy
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
