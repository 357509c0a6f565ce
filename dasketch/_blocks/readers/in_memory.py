"""Matrices in this process's memory: numpy arrays, scipy.sparse matrices and
arrays (any format; read as CSR), pandas DataFrames, and any other array-like
(lists, objects with ``__array__``) as a numpy array.

The block type decides how a matrix is cut: :data:`row_blocks_of` dispatches on
it (:class:`dask.utils.Dispatch`), so an array library is one registered
function, ``row_blocks_of.register(cls, func)``, or
``row_blocks_of.register_lazy(module, register)`` for a library that is not
always installed. Each block is a graph literal that views the matrix (nothing
is copied).
"""

from __future__ import annotations

import uuid

import dask
import numpy as np
import scipy.sparse
from dask.utils import Dispatch

from dasketch._blocks.readers.options import check_dtype, check_shape, csr_block_bytes
from dasketch._blocks.row_blocks import RowBlocks

#: ``row_blocks_of(X, options)``: the :class:`~dasketch._blocks.row_blocks.RowBlocks`
#: of an in-memory matrix, by the function registered for its type.
row_blocks_of = Dispatch("row_blocks_of")


def in_memory_row_blocks(X, rows, dtype, sparse, read_bytes, token=None):
    """Blocks of ``rows`` rows of an in-memory matrix (ndarray or CSR), each a
    graph literal under a key named here: numpy blocks are views, and the matrix
    is not copied (``dask.array.from_array`` copies its whole input: 0.16 s and
    512 MiB more for 8,192 x 8,192). The keys are named after the matrix's
    content, so that the same data gives the same keys (and identical work is
    shared) and different data different keys: ``dask.base.tokenize`` hashes
    the buffer in memory order with the shape and dtype, which a square matrix
    and its transpose share, so the strides enter the token too. A ``token``
    given names the keys instead."""
    n_rows = X.shape[0]
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    if token is None:
        token = dask.base.tokenize(X, getattr(X, "strides", None), rows)
    views = tuple(X[start:stop, ...] for start, stop in zip(offsets[:-1], offsets[1:]))
    blocks = tuple(dask.delayed(view, name=f"rows-{start}-{token}")
                   for start, view in zip(offsets[:-1], views))
    return RowBlocks(blocks, offsets, int(X.shape[1]), dtype, sparse, int(read_bytes),
                     resident=True,
                     literals=tuple((block.key, view) for block, view in zip(blocks, views)))


@row_blocks_of.register(np.ndarray)
def dense_row_blocks(X, options):
    """Blocks of a numpy array (a subclass is read as its base ndarray)."""
    X = np.asarray(X)
    check_shape(X.shape, options.name)
    dtype = check_dtype(X.dtype, options.name)
    rows = options.dense_rows(X.shape)
    return in_memory_row_blocks(X, rows, dtype, False, rows * X.shape[1] * dtype.itemsize,
                                token=_token(options))


@row_blocks_of.register((scipy.sparse.spmatrix, scipy.sparse.sparray))
def sparse_row_blocks(X, options):
    """Blocks of a scipy.sparse matrix or array, as CSR matrices (never densified)."""
    check_shape(X.shape, options.name)
    dtype = check_dtype(X.dtype, options.name)
    X = scipy.sparse.csr_matrix(X)
    n_rows, n_features = X.shape
    rows = options.sparse_rows(X.nnz, n_rows, n_features)
    return in_memory_row_blocks(X, rows, dtype, True, csr_block_bytes(X.nnz, n_rows, rows),
                                token=_token(options))


def _token(options):
    """None (keys named after the content) or, without ``content_keys``, a fresh token."""
    return None if options.content_keys else uuid.uuid4().hex


@row_blocks_of.register_lazy("pandas")
def _register_pandas():
    import pandas

    row_blocks_of.register(pandas.DataFrame, dense_row_blocks)


def _has_row_blocks(cls):
    try:
        row_blocks_of.dispatch(cls)
    except TypeError:
        return False
    return True


class InMemoryReader:
    """Reads the matrices whose type :data:`row_blocks_of` has a function for."""

    name = "in-memory"
    kinds = ("numpy array", "pandas DataFrame", "scipy.sparse matrix")
    opens_stores = False

    def can_read(self, X, options):
        return _has_row_blocks(type(X))

    def row_blocks(self, X, options):
        return row_blocks_of(X, options)


class ArrayLikeReader:
    """Reads any other array-like (lists, tuples, scalars, objects with
    ``__array__``) as the numpy array ``numpy.asarray`` makes of it. Tried
    last: Dask arrays and ``zarr.Array`` objects have ``__array__`` too, and
    their own readers read them by blocks."""

    name = "array-like"
    kinds = ()
    opens_stores = False

    def can_read(self, X, options):
        return isinstance(X, (list, tuple)) or np.isscalar(X) or hasattr(X, "__array__")

    def row_blocks(self, X, options):
        return dense_row_blocks(np.asarray(X), options)
