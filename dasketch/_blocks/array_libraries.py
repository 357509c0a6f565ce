"""The array library of a block, resolved in one place.

:data:`block_namespace` gives the array namespace a block function computes in,
by the block's type (:class:`dask.utils.Dispatch`): numpy for numpy arrays and
scipy.sparse matrices (the CPU path of numpy, scipy and numba), the array API
namespace of ``array_api_compat`` for CuPy arrays, registered lazily so that
cupy is imported only once a CuPy block is seen, and for any other type the
namespace its arrays name themselves (``__array_namespace__``, the Python array
API standard). :data:`to_host` copies an array of any of them to a numpy
ndarray: ``cupy.asnumpy`` for CuPy, DLPack (``numpy.from_dlpack``) otherwise.

The kernels never resolve a namespace themselves: a block function passes
``xp`` and ``to_host`` to the namespace-generic kernels
(:mod:`dasketch.kernels.namespace_fd`), and a new array library is one
registration here. Which libraries the readers accept as input is decided by
:mod:`dasketch._blocks.readers.array_types`.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from dask.utils import Dispatch

#: ``block_namespace(block)``: the array namespace of ``block``'s library.
block_namespace = Dispatch("block_namespace")
#: ``to_host(array)``: ``array`` as a numpy ndarray in this process's memory.
to_host = Dispatch("to_host")


@block_namespace.register(object)
def _standard_namespace(block):
    if not hasattr(block, "__array_namespace__"):
        raise TypeError(f"a block of type {type(block).__name__} names no array "
                        "namespace (__array_namespace__)")
    return block.__array_namespace__()


@block_namespace.register((np.ndarray, np.generic, scipy.sparse.spmatrix,
                           scipy.sparse.sparray))
def _numpy_namespace(block):
    return np


@to_host.register(object)
def _from_dlpack(array):
    return np.from_dlpack(array)


@to_host.register(np.ndarray)
def _on_host(array):
    return array


@block_namespace.register_lazy("cupy")
@to_host.register_lazy("cupy")
def _register_cupy():
    import cupy
    from array_api_compat import cupy as cupy_namespace

    block_namespace.register(cupy.ndarray, lambda block: cupy_namespace)
    to_host.register(cupy.ndarray, cupy.asnumpy)


def is_numpy_block(block):
    """Whether ``block`` is computed on the CPU path (numpy and scipy): a numpy or
    scipy.sparse block, or any other object that names no array namespace (read
    by ``numpy.asarray`` there, as it always was)."""
    resolve = block_namespace.dispatch(type(block))
    if resolve is _standard_namespace:
        return not hasattr(block, "__array_namespace__")
    return resolve is _numpy_namespace
