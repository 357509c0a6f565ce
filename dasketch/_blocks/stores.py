"""Zarr stores as lazy Dask objects whose reads are checked where they run.

:mod:`dasketch.storage.reading` opens a store and reads its rows, and
:mod:`dasketch.storage.store_checks` fingerprints and checks it, without Dask; this
module builds the graph pieces over them: the task that opens and checks a
store on a worker before any block is read (:func:`checked_array`,
:func:`checked_group`), registered for the end-of-job listing of remote stores
(:mod:`dasketch._blocks.store_watch`), and the lazy Dask array of a dense
store whose chunks are read by tasks depending on it.
"""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np

from dasketch._blocks.store_watch import watch
from dasketch.storage.reading import ZarrRows, open_store_array, read_rows
from dasketch.storage.store_checks import (
    EndOfJobCheck,
    check_missing_chunks,
    checked_array,
    checked_group,
    store_fingerprint,
)


def _read_chunk(array, check_files, name, block_info=None):
    """The rows of a Dask chunk of a checked zarr array (``map_blocks``' function)."""
    (start, stop), _ = block_info[None]["array-location"][:2]
    return read_rows(array, start, stop, check_files, name)


def _checked(check, node, source, component, storage_options, kind, fingerprint, name,
             *args):
    """The Delayed ``check(source, component, storage_options, *args, (digest,
    number of keys), name)`` of a store opened here as ``node``
    (:func:`~dasketch.storage.store_checks.checked_array` or
    :func:`~dasketch.storage.store_checks.checked_group`), watched for the end-of-job
    listing of remote stores."""
    digest, signatures = fingerprint
    checked = dask.delayed(check, pure=True)(source, component, storage_options, *args,
                                             (digest, len(signatures)), name)
    return watch(checked, EndOfJobCheck.of(node, source, component, storage_options, kind,
                                           fingerprint, name))


def open_zarr_array(path, *, component=None, storage_options=None, chunks=None,
                    missing_chunks="fill", name="X"):
    """Open a zarr array (local path, fsspec URL or ``zarr.Array``) as a Dask array
    whose reads are checked where they run.

    The first task of any computation opens the store on a worker and checks
    that it is the array the client saw and that every chunk is stored (one
    listing of the store); each read task checks, on a local store, that the
    files of its chunks exist on its worker. So a ``memory://`` store on a
    process cluster, a local path the workers do not have, or a partly written
    store is an error naming the store and the reason, never zeros.

    Parameters
    ----------
    path : str, os.PathLike or zarr.Array
        Zarr store: a local directory or an fsspec URL such as ``s3://bucket/x.zarr``.
    component : str, optional
        Path of the array inside the store when the store is a group.
    storage_options : dict, optional
        Passed to fsspec for remote stores.
    chunks : int or tuple, optional
        Rows per Dask chunk; defaults to the store's chunks.
    missing_chunks : {"fill", "raise"}
        Chunks absent from the store when it is opened: read as the array's
        fill value (default), as zarr reads them (zarr 3 does not write chunks
        that hold only the fill value), or an error naming the first ones
        (``"raise"``, for stores known to be complete). Either way, a chunk
        that disappears or is rewritten while the job runs, and a worker that
        sees another store than the client, are errors
        (:mod:`dasketch.storage.store_checks`).
    name : str
        Name of the argument, used in error messages.

    Raises
    ------
    FileNotFoundError
        If a local store does not exist.
    ValueError
        If the store holds no array at ``component`` (a group: its arrays are
        listed), or ``missing_chunks`` is not one of the two choices.

    Examples
    --------
    >>> import os, tempfile, numpy as np, zarr
    >>> path = os.path.join(tempfile.mkdtemp(), "X.zarr")
    >>> _ = zarr.create_array(path, data=np.ones((4, 2)), chunks=(2, 2))
    >>> os.remove(os.path.join(path, "c", "1", "0"))
    >>> float(open_zarr_array(path).sum().compute())  # the absent chunk is the fill value
    4.0
    >>> open_zarr_array(path, missing_chunks="raise").sum().compute()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: X: the zarr store '...' lacks 1 of 2 chunks of the array (first: c/1/0): ...
    """
    return open_zarr_rows(path, component=component, storage_options=storage_options,
                          chunks=chunks, missing_chunks=missing_chunks, name=name)[0]


def open_checked_store(path, *, component=None, storage_options=None, missing_chunks="fill",
                       name="X"):
    """``(array, checked, digest)`` of the zarr store ``path`` (a path or URL with
    ``component``, or a ``zarr.Array``) of any number of dimensions: the array
    opened here for its metadata, a Delayed that opens the store on a worker and
    checks it against what the client saw
    (:func:`~dasketch.storage.store_checks.checked_array`, watched for the end-of-job
    listing of a remote store), and the digest of the store's fingerprint, against
    which read tasks check their chunk files."""
    check_missing_chunks(missing_chunks)
    if isinstance(path, (str, os.PathLike)):
        array = open_store_array(path, component=component,
                                 storage_options=storage_options, name=name)
        source = os.fspath(path)
    else:
        array = source = path
    fingerprint = store_fingerprint(array)
    checked = _checked(checked_array, array, source, component, storage_options, "array",
                       fingerprint, name, tuple(array.shape), array.dtype.str,
                       missing_chunks)
    return array, checked, fingerprint[0]


def open_zarr_rows(path, *, component=None, storage_options=None, chunks=None,
                   missing_chunks="fill", name="X"):
    """:func:`open_zarr_array`, and how a task reads rows of the store itself.

    Returns
    -------
    array : dask.array.Array
        As :func:`open_zarr_array` returns it.
    reader : tuple
        ``(checked, read)``: ``checked`` a Delayed that opens and checks the
        store on a worker (:func:`~dasketch.storage.store_checks.checked_array`), ``read`` a
        :class:`~dasketch.storage.reading.ZarrRows`.
        A task given these reads any range of rows itself (one task instead of
        a read and a compute, and no rows held between them).
    """
    array, checked, check_files = open_checked_store(
        path, component=component, storage_options=storage_options,
        missing_chunks=missing_chunks, name=name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{array.ndim}-D input with shape {tuple(array.shape)}")
    rows = array.chunks[0] if chunks is None else (
        chunks[0] if isinstance(chunks, tuple) else chunks)
    block_chunks = da.core.normalize_chunks((rows, array.shape[1]), array.shape)
    lazy = da.map_blocks(_read_chunk, checked, check_files, name, chunks=block_chunks,
                         dtype=array.dtype, meta=np.empty((0, 0), array.dtype))
    return lazy, (checked, ZarrRows(check_files, name))


def checked_sparse_store(path, *, component=None, storage_options=None,
                         missing_chunks="fill", name="X", group=None):
    """A Delayed that opens the sparse-by-rows group on a worker and checks it
    (see :func:`open_zarr_array`); its value is the opened group, for
    :func:`~dasketch.storage.reading.csr_rows`. Returns ``(delayed, digest)``: the digest of
    the store's fingerprint, for :func:`~dasketch.storage.reading.csr_rows`' ``check_files``.
    ``group`` is the group at ``path`` and ``component`` when the caller has
    opened it already (it is then not opened again here)."""
    import zarr

    check_missing_chunks(missing_chunks)
    if group is None:
        group = zarr.open_group(os.fspath(path), mode="r", path=component or "",
                                storage_options=storage_options)
    shapes = {member: tuple(group[member].shape) for member in ("indptr", "indices", "data")}
    fingerprint = store_fingerprint(group)
    return _checked(checked_group, group, os.fspath(path), component, storage_options,
                    "group", fingerprint, name, shapes, missing_chunks), fingerprint[0]
