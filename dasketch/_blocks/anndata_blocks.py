"""AnnData's on-disk matrices as blocks of rows, never densified.

AnnData (``.h5ad`` files, HDF5; ``.zarr`` stores) writes a sparse matrix as a
group with attributes ``encoding-type`` (``"csr_matrix"`` or ``"csc_matrix"``)
and ``shape``, holding the arrays ``data``, ``indices`` and ``indptr`` of the
compressed matrix (the anndata on-disk format, "Sparse array specification").
Rows ``[start, stop)`` of a CSR matrix are ``indptr[start:stop + 1]`` and the
slices of ``indices`` and ``data`` it points to, so a block task reads only its
own nonzeros. A CSC matrix has no such row slices and is refused. A dense
matrix (``encoding-type`` ``"array"``) is an ordinary zarr array, or an HDF5
dataset read here by rows.

Zarr groups are read by :func:`dasketch.storage.reading.csr_rows`, with the store checks of
:mod:`dasketch.storage.store_checks` (fingerprint on opening, chunk files checked by
every read). An HDF5 file is fingerprinted by its size, modification time and
inode when the job opens it; every read task opens it by name and checks it
again after reading (:mod:`dasketch._blocks.file_checks`), so a file rewritten
during the job is an error.
"""

from __future__ import annotations

import contextlib
import math
import os

import numpy as np
import scipy.sparse

from dasketch._blocks.file_checks import check_file, file_signature
from dasketch._blocks.stores import checked_sparse_store
from dasketch.storage.fingerprints import refuse_special_metadata
from dasketch.storage.reading import CsrRows
from dasketch.storage.store_checks import is_local_path, local_path

CSR, CSC = "csr_matrix", "csc_matrix"


def _csc_error(name, where):
    return ValueError(
        f"{name}: {where} is an AnnData csc_matrix (compressed by columns): its rows "
        "cannot be read in blocks without reading the whole matrix for each. Store it "
        "by rows, e.g. adata.X = adata.X.tocsr() before writing, or "
        "scipy.sparse.csr_matrix(X)")


def _anndata_root_error(name, where):
    return ValueError(
        f"{name}: {where} is a whole AnnData store; pass component='X' (or "
        "'layers/<name>'), or the path of the matrix itself, e.g. 'adata.zarr/X'")


def h5_rows(filename, component, start, stop, signature, name="X"):
    """Rows ``[start, stop)`` of the matrix at ``component`` of an HDF5 file: a
    CSR group (a ``scipy.sparse`` CSR matrix, reading only the block's
    nonzeros) or a dense dataset (an ndarray). The file is checked against
    ``signature`` after the read."""
    import h5py

    with h5py.File(filename, "r") as file:
        node = file[component]
        if isinstance(node, h5py.Dataset):
            block = np.asarray(node[start:stop])
        else:
            indptr = np.asarray(node["indptr"][start:stop + 1], dtype=np.int64)
            lo, hi = int(indptr[0]), int(indptr[-1])
            block = scipy.sparse.csr_matrix(
                (node["data"][lo:hi], node["indices"][lo:hi], indptr - lo),
                shape=(stop - start, int(node.attrs["shape"][1])))
    check_file(filename, signature, name)
    return block


class H5Rows:
    """How a task reads rows ``[start, stop)`` of the matrix ``component`` of an
    HDF5 file itself: ``H5Rows(component, signature, name)(filename, start,
    stop, reuse)`` is a context manager giving :func:`h5_rows` (a fresh block;
    ``reuse`` is ignored)."""

    def __init__(self, component, signature, name):
        self.component, self.signature, self.name = component, tuple(signature), name

    def __call__(self, filename, start, stop, reuse=False):
        return contextlib.nullcontext(h5_rows(filename, self.component, start, stop,
                                              self.signature, self.name))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.component, self.signature, self.name)


def _split_h5_path(path, component):
    """``(filename, component)`` when ``path`` is, or starts with, a local HDF5
    file (``"adata.h5ad/X"`` names the matrix ``X`` of ``adata.h5ad``), else None."""
    path = os.fspath(path)
    if not is_local_path(path):
        return None
    head, inner = local_path(path), []
    while head and not os.path.exists(head):
        head, tail = os.path.split(head)
        if not tail:
            return None
        inner.insert(0, tail)
    if not os.path.isfile(head):
        return None
    import h5py

    if not h5py.is_hdf5(head):
        return None
    parts = inner + ([component] if component else [])
    return head, "/".join(p.strip("/") for p in parts) or "/"


def _is_h5py_node(X):
    return type(X).__module__.split(".")[0] == "h5py" and hasattr(X, "file")


def _is_zarr_node(X):
    return type(X).__module__.split(".")[0] == "zarr" and hasattr(X, "store_path")


def _h5_location(X, component, name):
    """``(filename, component)`` of an h5py Dataset/Group or an HDF5 path, else None."""
    if _is_h5py_node(X):
        if component is not None:
            raise ValueError(f"component applies only when {name} is a path")
        return X.file.filename, X.name
    if isinstance(X, (str, os.PathLike)):
        return _split_h5_path(X, component)
    return None


def _h5_fields(filename, component, rows, name):
    import h5py

    signature = file_signature(filename)
    with h5py.File(filename, "r") as file:
        if component not in file:
            raise ValueError(f"{name}: the HDF5 file {filename!r} has no {component!r}; "
                             f"it holds {sorted(file.keys())}")
        node = file[component]
        kind = node.attrs.get("encoding-type")
        where = repr(filename) if component == "/" else f"{component!r} of {filename!r}"
        if kind == "anndata":
            raise _anndata_root_error(name, where)
        if kind == CSC:
            raise _csc_error(name, where)
        if isinstance(node, h5py.Dataset):
            shape, dtype, nnz = tuple(node.shape), node.dtype, None
        elif kind == CSR:
            shape = tuple(int(v) for v in node.attrs["shape"])
            dtype, nnz = node["data"].dtype, int(node["data"].shape[0])
        else:
            raise ValueError(f"{name}: {where} is an HDF5 group that is not an AnnData "
                             f"csr_matrix (encoding-type {kind!r})")
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{len(shape)}-D input with shape {shape}")
    return _fields(shape, dtype, nnz, rows, (filename, H5Rows(component, signature, name)))


def _zarr_group(path, component, storage_options):
    """``(encoding, group)``: the AnnData ``encoding-type`` of the zarr group at
    ``path`` and ``component``, and the group, opened once; ``(None, None)``
    for an array, a group without one, or no zarr node."""
    import zarr

    refuse_special_metadata(os.fspath(path), component)  # zarr would block on a FIFO
    try:
        node = zarr.open(os.fspath(path), mode="r", path=component or "",
                         storage_options=storage_options)
    except Exception:  # noqa: BLE001 - not zarr, or missing: the dense reader reports it
        return None, None
    if not isinstance(node, zarr.Group):
        return None, None
    return node.attrs.get("encoding-type"), node


def _zarr_encoding(path, component, storage_options):
    """The AnnData ``encoding-type`` of the zarr group at ``path`` and
    ``component``; None for an array, a group without one, or no zarr node."""
    return _zarr_group(path, component, storage_options)[0]


def _zarr_fields(path, component, storage_options, missing_chunks, rows, name):
    """Fields of a zarr node that is an AnnData CSR group; None for any other node
    (a dense array, a dasketch store: the ordinary readers take them). The
    store is opened once, here, for its encoding, shape and checks."""
    kind, group = _zarr_group(path, component, storage_options)
    where = f"{os.fspath(path)!r}" + (f" at component {component!r}" if component else "")
    if kind == "anndata":
        raise _anndata_root_error(name, where)
    if kind == CSC:
        raise _csc_error(name, where)
    if kind != CSR:
        return None
    data = group["data"]
    checked, fingerprint = checked_sparse_store(
        path, component=component, storage_options=storage_options,
        missing_chunks=missing_chunks, name=name, group=group)
    return _fields(tuple(group.attrs["shape"]), data.dtype, int(data.shape[0]), rows,
                   (checked, CsrRows(fingerprint, name)))


def _fields(shape, dtype, nnz, rows, reader):
    """The fields of a :class:`~dasketch._blocks.RowBlocks` read by ``reader``
    (``(source, read)``, see :func:`~dasketch._blocks.row_blocks.reader_blocks`)."""
    n_rows, n_features = (int(v) for v in shape)
    if n_rows == 0 or n_features == 0:
        raise ValueError(f"the matrix has shape {shape}; at least one row and one column "
                         "are required")
    dtype = np.dtype(dtype)
    sparse = nnz is not None
    block = rows(nnz, n_rows, n_features, sparse)
    offsets = tuple(range(0, n_rows, block)) + (n_rows,)
    if sparse:  # the block's share of nonzeros: values and int64 column indices
        read_bytes = (dtype.itemsize + 8) * math.ceil(nnz / n_rows * block)
    else:
        read_bytes = block * n_features * dtype.itemsize
    return dict(offsets=offsets, n_features=n_features, dtype=dtype, sparse=sparse,
                read_bytes=int(read_bytes), reader=reader)


def anndata_row_blocks(X, *, component, storage_options, missing_chunks, name, rows):
    """The fields of :class:`~dasketch._blocks.RowBlocks` for an AnnData matrix
    on disk, or None when ``X`` is none.

    Parameters
    ----------
    X : str, os.PathLike, h5py.Dataset or h5py.Group
        A zarr store or an HDF5 (``.h5ad``) file, the matrix at ``component``
        (or after the file name: ``"adata.h5ad/X"``); or an opened h5py node
        (e.g. the ``group`` of a backed AnnData's sparse ``X``).
    component, storage_options, missing_chunks, name
        As in :func:`~dasketch._blocks.as_row_blocks`.
    rows : callable
        ``rows(nnz, n_rows, n_features, sparse)``: rows per block.

    Raises
    ------
    ValueError
        For a CSC matrix, a whole AnnData store (no component), or an HDF5
        path that holds no matrix.
    """
    location = _h5_location(X, component, name)
    if location is not None:
        return _h5_fields(*location, rows, name)
    if _is_zarr_node(X):
        kind = X.attrs.get("encoding-type")
        if kind == CSC:
            raise _csc_error(name, repr(X))
        root = getattr(X.store_path.store, "root", None)
        if kind != CSR:
            return None
        if root is None:
            raise TypeError(f"{name}: an AnnData csr_matrix group is read from a local "
                            "store object or a path/URL; pass the store's path")
        X, component = str(root), X.store_path.path
    if isinstance(X, (str, os.PathLike)):
        return _zarr_fields(X, component, storage_options, missing_chunks, rows, name)
    return None


def is_anndata_matrix(X, *, component, storage_options):
    """Whether :func:`anndata_row_blocks` reads ``X``, or refuses it as an
    AnnData node it cannot read by rows: an h5py node, a local HDF5 file, or a
    zarr group (object, path or URL) with an AnnData ``encoding-type`` of a
    compressed matrix (or of a whole AnnData store, for a path)."""
    if _is_h5py_node(X):
        return True
    if _is_zarr_node(X):
        return X.attrs.get("encoding-type") in (CSR, CSC)
    if not isinstance(X, (str, os.PathLike)):
        return False
    return (_split_h5_path(X, component) is not None
            or _zarr_encoding(X, component, storage_options) in (CSR, CSC, "anndata"))
