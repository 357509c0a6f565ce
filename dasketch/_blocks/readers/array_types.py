"""Arrays of other libraries than numpy: read in their own namespace where the
caller computes there, refused by type before any task runs elsewhere.

The readers take numpy blocks (numpy arrays, scipy.sparse matrices, pandas
DataFrames, and the blocks of Dask arrays, zarr and the other stores). An
array of another library, in memory or as the blocks of a Dask array (its
``_meta``, never computed), is recognised without importing its library: its
type implements the array API standard (``__array_namespace__``) or it lives on
a GPU (``__cuda_array_interface__``).

* A caller whose block functions compute in the block's namespace
  (:mod:`dasketch._blocks.array_libraries`) reads with ``array_libraries="any"``:
  a CuPy array, a Dask array of CuPy blocks, or any array of a library whose
  namespace has the standard's ``linalg`` extension, is read as blocks of that
  library, :data:`DEVICE_BLOCK_VALUES` values a block by default.
* Any other caller, and an array whose library has no such namespace, gets a
  ``TypeError`` naming its type and what is read, where numpy's conversion would
  fail deep inside a task (CuPy: "Implicit conversion to a NumPy array is not
  allowed") or copy it silently.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

import numpy as np
import scipy.sparse

from dasketch._blocks.array_libraries import block_namespace, to_host
from dasketch._blocks.readers.dask_arrays import DaskReader
from dasketch._blocks.readers.in_memory import in_memory_row_blocks
from dasketch._blocks.readers.options import check_dtype, check_shape
from dasketch._blocks.readers.registry import accepted_kinds
from dasketch._blocks.scheduler import compute, is_dask_collection

#: The public functions that read arrays of other libraries (``array_libraries="any"``).
LIBRARY_ENTRY_POINTS = ("dasketch.sketch", "dasketch.estimate_error", "dasketch.SketchPCA",
                        "dasketch.linear_model.sketch_lstsq",
                        "dasketch.linear_model.SketchLstsqRegressor.fit",
                        "dasketch.linear_model.dual_random_projection",
                        "dasketch.linear_model.DualRandomProjectionRegressor",
                        "dasketch.linear_model.DualRandomProjectionClassifier")
#: Values of a default block of another library (4 GiB of float64). A block on a
#: device is absorbed by one Gram product and one eigendecomposition, whose launch
#: and solver latency is paid once a block, so blocks are as large as a device holds
#: comfortably; the block is a view of the input and its Gram is only ``d x d``.
DEVICE_BLOCK_VALUES = 2 ** 29


def foreign_array_type(X):
    """The type of the blocks of ``X`` when they are arrays of a library other
    than numpy (``X`` itself, or a Dask collection's ``_meta``), else None."""
    block = _block_of(X)
    if isinstance(block, (np.ndarray, np.generic)) or scipy.sparse.issparse(block):
        return None
    if hasattr(type(block), "__array_namespace__") or hasattr(block,
                                                              "__cuda_array_interface__"):
        return type(block)
    return None


def _block_of(X):
    return X._meta if is_dask_collection(X) and hasattr(X, "_meta") else X


def _has_linalg(block):
    """Whether the array namespace of ``block`` has the ``linalg`` extension
    (``eigh``, ``svd``) the kernels need."""
    try:
        linalg = getattr(block_namespace(block), "linalg", None)
    except TypeError:
        return False
    return hasattr(linalg, "eigh") and hasattr(linalg, "svd")


def host_values(values):
    """``values`` (targets, weights: ``n`` values at most a few columns wide) on
    the host: an array of another library (:func:`foreign_array_type`) copied to
    numpy by :func:`~dasketch._blocks.array_libraries.to_host`, a Dask array of
    such blocks block by block, then computed; anything else unchanged."""
    if foreign_array_type(values) is None:
        return values
    if is_dask_collection(values):
        host = np.empty((0,) * values.ndim, dtype=host_dtype(values._meta, values.dtype))
        (values,) = compute(values.map_blocks(to_host, dtype=host.dtype, meta=host))
        return values
    return to_host(values)


def check_array_library(X, name="X", array_libraries="numpy"):
    """Raise a ``TypeError`` naming ``name`` when ``X`` holds arrays of another
    library than numpy (see :func:`foreign_array_type`) that the caller does not
    read: any, with ``array_libraries="numpy"``; one without an array namespace
    with the ``linalg`` extension, with ``"any"``."""
    kind = foreign_array_type(X)
    if kind is None:
        return
    supported = _has_linalg(_block_of(X))
    if array_libraries == "any" and supported:
        return
    kind = f"{kind.__module__.split('.')[0]}.{kind.__qualname__}"
    what = (f"a Dask collection of {kind} blocks" if is_dask_collection(X)
            else f"an array of type {kind}")
    if array_libraries == "any" or not supported:
        raise TypeError(
            f"{name} is {what}, whose library has no array API namespace with the "
            "linalg extension (eigh, svd): dasketch reads numpy, scipy.sparse, CuPy "
            "and array API arrays (array_api_compat); copy it to a numpy array first")
    raise TypeError(
        f"{name} is {what}, which this function reads as numpy blocks only: a "
        f"{accepted_kinds()}. {', '.join(LIBRARY_ENTRY_POINTS)} read CuPy "
        "arrays and Dask arrays of CuPy blocks on the GPU; here copy them to the host "
        "first (cupy.asnumpy(X), or X.map_blocks(cupy.asnumpy) for a Dask array)")


def device_block_rows(values_per_row, n_features, sparse):
    """Rows per default block of another library's array: about
    :data:`DEVICE_BLOCK_VALUES` values (a function of the width only)."""
    return max(1, DEVICE_BLOCK_VALUES // max(int(n_features), 1))


# The dtypes of the array API standard, by the names numpy gives them too.
_STANDARD_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                    "uint64", "float32", "float64", "complex64", "complex128")


def host_dtype(block, dtype):
    """The numpy dtype of ``dtype``, the dtype of arrays like ``block`` (a
    standard dtype of its namespace: array API dtypes need not be numpy's)."""
    try:
        return np.dtype(dtype)
    except TypeError:
        xp = block_namespace(block)
        for name in _STANDARD_DTYPES:
            if getattr(xp, name, None) == dtype:
                return np.dtype(name)
    raise TypeError(f"dtype {dtype!r} is none of the array API standard's dtypes")


class ArrayLibraryReader:
    """Reads arrays of other libraries (:func:`foreign_array_type`) as blocks of
    their library for callers that ask for them (``array_libraries="any"``),
    and refuses them by :func:`check_array_library` otherwise; tried first."""

    name = "array-library"
    kinds = ()
    opens_stores = False

    def can_read(self, X, options):
        return foreign_array_type(X) is not None

    def row_blocks(self, X, options):
        check_array_library(X, options.name, options.array_libraries)
        options = replace(options, default_rows=device_block_rows, min_blocks=1)
        dtype = host_dtype(_block_of(X), X.dtype)
        if is_dask_collection(X):
            # Device memory is not the worker's: no host bytes held by a block read.
            return replace(DaskReader().row_blocks(X, options, dtype), read_bytes=0)
        check_shape(X.shape, options.name)
        dtype = check_dtype(dtype, options.name)
        # Named by identity: tokenising the content would copy it to the host.
        return in_memory_row_blocks(X, options.dense_rows(X.shape), dtype, False, 0,
                                    token=uuid.uuid4().hex)
