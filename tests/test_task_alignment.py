"""Block tasks get their arrays aligned: ``distributed`` can deserialize an array at
any byte offset, where numpy multiplies by its own loops instead of BLAS (other
rounding, many times the time)."""

import dask
import numpy as np

from dasketch._blocks import compute
from dasketch._blocks.tasks import task


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
