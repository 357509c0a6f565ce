"""Arrays of libraries the readers do not take, refused by type before any task
runs.

The readers take numpy blocks (numpy arrays, scipy.sparse matrices, pandas
DataFrames, and the blocks of Dask arrays, zarr and the other stores). An
array of another library, in memory or as the blocks of a Dask array (its
``_meta``, never computed), is refused with a ``TypeError`` naming its type and
what is read, where numpy's conversion would fail deep inside a task (CuPy:
"Implicit conversion to a NumPy array is not allowed") or copy it silently. Such
an array is recognised without importing its library: its type implements the
array API standard (``__array_namespace__``) or it lives on a GPU
(``__cuda_array_interface__``). The block functions run other libraries' blocks
in their own namespace (:mod:`dasketch._blocks.array_libraries`); an input
library is added here once its path is tested on its device.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse

from dasketch._blocks.readers.registry import accepted_kinds
from dasketch._blocks.scheduler import is_dask_collection


def foreign_array_type(X):
    """The type of the blocks of ``X`` when they are arrays of a library other
    than numpy (``X`` itself, or a Dask collection's ``_meta``), else None."""
    block = X._meta if is_dask_collection(X) and hasattr(X, "_meta") else X
    if isinstance(block, (np.ndarray, np.generic)) or scipy.sparse.issparse(block):
        return None
    if hasattr(type(block), "__array_namespace__") or hasattr(block,
                                                              "__cuda_array_interface__"):
        return type(block)
    return None


def check_array_library(X, name="X"):
    """Raise a ``TypeError`` naming ``name`` when ``X`` holds arrays of a library
    the readers do not take (see :func:`foreign_array_type`)."""
    kind = foreign_array_type(X)
    if kind is None:
        return
    kind = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    what = (f"a Dask collection of {kind} blocks" if is_dask_collection(X)
            else f"an array of type {kind}")
    raise TypeError(
        f"{name} is {what}, which dasketch does not read: it reads a "
        f"{accepted_kinds()}, of numpy blocks. GPU (CuPy) blocks are not "
        "supported yet: copy them to the host first (cupy.asnumpy(X), or "
        "X.map_blocks(cupy.asnumpy) for a Dask array)")


class ArrayTypeCheck:
    """Claims the arrays of other libraries (:func:`foreign_array_type`) to refuse
    them by :func:`check_array_library`, before any reader tries them."""

    name = "array-type-check"
    kinds = ()
    opens_stores = False

    def can_read(self, X, options):
        return foreign_array_type(X) is not None

    def row_blocks(self, X, options):
        check_array_library(X, options.name)
