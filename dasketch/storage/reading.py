"""Open stores and read their rows (saving and loading sketches is
:mod:`dasketch.storage.sketch_io`).

What a task needs to read rows of a zarr store itself (:func:`read_rows`,
:class:`ZarrRows`, :func:`csr_rows`, :class:`CsrRows`), each read checked
against the store's fingerprint (:mod:`dasketch.storage.store_checks`): storage the
workers cannot read is an error, never zeros. Nothing here builds a Dask graph:
the bridge (:mod:`dasketch._blocks.stores`) turns an opened store into the
lazy blocks and tasks that read it.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

from dasketch.storage.fingerprints import refuse_special_metadata
from dasketch.storage.outputs import CSR_FORMAT
from dasketch.storage.store_checks import check_chunk_files, first_line, is_local_path, local_path


def _group_listing(group, limit=10):
    import zarr

    names = [name for name, node in group.members(max_depth=None)
             if isinstance(node, zarr.Array)]
    shown = ", ".join(repr(name) for name in names[:limit])
    return (shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
            ) or "(none)"


def open_store_array(path, *, component=None, storage_options=None, name="X"):
    """The ``zarr.Array`` at ``path`` (``/component``), opened here for its
    metadata; no data is read.

    Raises
    ------
    FileNotFoundError
        If a local store does not exist.
    ValueError
        If there is no array: a group (the message lists its arrays, to pass as
        ``component``), or nothing zarr can read.
    """
    import zarr

    where = f" at component {component!r}" if component else ""
    url = os.fspath(path)
    if is_local_path(url) and not os.path.exists(local_path(url)):
        raise FileNotFoundError(f"{name}: no zarr store at {url!r}")
    node, reason = None, None
    try:
        refuse_special_metadata(url, component)
        node = zarr.open(url, mode="r", path=component or "", storage_options=storage_options)
    except Exception as exc:  # noqa: BLE001 - reported below, in one line
        reason = first_line(exc)
    if isinstance(node, zarr.Array):
        return node
    if isinstance(node, zarr.Group):
        raise ValueError(f"{name}: {url!r}{where} is a zarr group, not an array; pass "
                         f"component= (command line: --component) one of its arrays: "
                         f"{_group_listing(node)}")
    raise ValueError(f"{name}: no zarr array in {url!r}{where} ({reason})")


def undecodable_chunk_error(array, start, stop, exc, name):
    """The error naming the store, the first chunk of rows ``[start, stop)``
    that does not decode (each is read again on its own) and its rows, for a
    read of ``array`` that failed with ``exc``: a ``ValueError``, or a
    ``PermissionError`` for a chunk file that may not be read
    (:func:`chunk_read_error`)."""
    rows = (array.shards or array.chunks)[0]
    where, cause = f"rows {start}-{stop}", exc
    for first in range(start - start % rows, stop, rows):
        last = min(first + rows, array.shape[0])
        try:
            array[first:last]
        except Exception as chunk_exc:  # noqa: BLE001 - this is the chunk to name
            key = array.metadata.encode_chunk_key((first // rows,) + (0,) * (array.ndim - 1))
            where, cause = f"chunk {key!r} (rows {first}-{last})", chunk_exc
            break
    return chunk_read_error(array, where, cause, name)


def chunk_read_error(array, where, cause, name):
    """The one-line error for a read of ``where`` (a chunk and its rows, or a
    range of rows) of ``array`` that failed with ``cause``.

    A chunk file this process may not read (``PermissionError``) is a
    ``PermissionError`` naming the file: "cannot be read: permission denied".
    Anything else is a ``ValueError`` saying that the chunk is damaged.
    """
    store = str(array.store_path)
    if isinstance(cause, PermissionError):
        file = cause.filename if cause.filename is not None else where
        return PermissionError(f"{name}: {where} of the zarr store {store!r} cannot be "
                               f"read: permission denied ({str(file)!r}); give this user "
                               "read access to the store's files")
    return ValueError(f"{name}: the zarr store {store!r} cannot decode {where}: "
                      f"{first_line(cause)}; the chunk is damaged, rewrite the store")


def read_rows(array, start, stop, check_files, name, *, out=None):
    """Rows ``[start, stop)`` of a checked zarr array (:func:`checked_array`); with
    ``check_files`` (True, or the store's fingerprint digest), on a local store,
    the files of their chunks are checked against the fingerprint after the
    read, which shows any change since the store was opened
    (:func:`~dasketch.storage.store_checks.check_chunk_files`).
    ``out``, if given, is an array of their shape and dtype to decode them into."""
    try:
        if out is None:
            out = array[start:stop]
        else:
            from zarr.core.buffer import default_buffer_prototype

            array.get_basic_selection(
                (slice(start, stop),) + (slice(None),) * (array.ndim - 1),
                out=default_buffer_prototype().nd_buffer.from_numpy_array(out))
    except Exception as exc:  # noqa: BLE001 - a chunk that does not decode, named below
        raise undecodable_chunk_error(array, start, stop, exc, name) from None
    if check_files:  # after the read: any change since the fingerprint shows
        check_chunk_files(array, start, stop, name,
                          check_files if isinstance(check_files, str) else None)
    return out


class _RowBuffers:
    """Buffers of read rows that this process reuses.

    A fresh array of a block is mapped by the operating system page by page on
    every read, which costs more than the read itself for blocks of a few tens of
    MiB (measured by benchmarks/bench_sketch.py's read of the store as block tasks
    do; figures in benchmarks/README.md). While reads run,
    each running read may keep a buffer; when none runs, one buffer stays for the
    next computation (:func:`borrowed_rows` borrows at most
    :data:`REUSED_READ_BYTES`).
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._free = []
        self._running = 0

    @contextlib.contextmanager
    def borrow(self, shape, dtype):
        dtype = np.dtype(dtype)
        with self._lock:
            self._running += 1
            fits = [i for i, b in enumerate(self._free)
                    if b.dtype == dtype and b.shape[1:] == shape[1:] and b.shape[0] >= shape[0]]
            buffer = self._free.pop(fits[-1]) if fits else None
        try:
            if buffer is None:
                buffer = np.empty(shape, dtype=dtype)
            yield buffer[:shape[0]]
        finally:
            with self._lock:
                self._running -= 1
                self._free.append(buffer)
                if self._running == 0:
                    self._free = self._free[-1:]


# Most bytes of the buffer kept between computations (:class:`_RowBuffers`).
REUSED_READ_BYTES = 2 ** 26
_row_buffers = _RowBuffers()


@contextlib.contextmanager
def borrowed_rows(array, start, stop, check_files, name):
    """:func:`read_rows` into a buffer the process reuses once the ``with`` block
    ends: the rows must not be kept beyond it.

    Only blocks of at most :data:`REUSED_READ_BYTES`: larger ones (wide rows) are
    read into a fresh array, as their compute outweighs the page faults and
    buffers of such blocks raise the peak memory of a worker (measured by
    ``bench_scale.py --wide``; figures in benchmarks/README.md).
    """
    shape = (stop - start,) + tuple(array.shape[1:])
    if math.prod(shape) * array.dtype.itemsize > REUSED_READ_BYTES:
        yield read_rows(array, start, stop, check_files, name)
        return
    with _row_buffers.borrow(shape, array.dtype) as out:
        yield read_rows(array, start, stop, check_files, name, out=out)


class ZarrRows:
    """How a task reads rows ``[start, stop)`` of a checked dense zarr array
    itself: ``ZarrRows(check_files, name)(array, start, stop, reuse)`` is a
    context manager giving the rows (:func:`borrowed_rows` when ``reuse``, the
    rows must then not outlive it; else a fresh array, :func:`read_rows`)."""

    def __init__(self, check_files, name):
        self.check_files, self.name = check_files, name

    def __call__(self, array, start, stop, reuse=False):
        if reuse:
            return borrowed_rows(array, start, stop, self.check_files, self.name)
        return contextlib.nullcontext(read_rows(array, start, stop, self.check_files,
                                                self.name))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.check_files, self.name)


class CsrRows:
    """How a task reads rows ``[start, stop)`` of a checked sparse-by-rows group
    itself (:func:`csr_rows`), as :class:`ZarrRows` does for dense arrays: the
    CSR matrix holds only the block's nonzeros, so there is no buffer to reuse."""

    def __init__(self, check_files, name):
        self.check_files, self.name = check_files, name

    def __call__(self, group, start, stop, reuse=False):
        return contextlib.nullcontext(csr_rows(group, start, stop, self.check_files,
                                               self.name))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.check_files, self.name)


def is_sparse_store(path, *, component=None, storage_options=None):
    """Whether ``path`` (``/component``) is a sparse-by-rows zarr group
    written by :func:`write_sparse_synthetic`."""
    import zarr

    try:
        refuse_special_metadata(os.fspath(path), component)
        node = zarr.open(os.fspath(path), mode="r", path=component or "",
                         storage_options=storage_options)
    except Exception:  # not zarr, missing or not regular: the dense reader reports it
        return False
    return isinstance(node, zarr.Group) and node.attrs.get("format") == CSR_FORMAT


def sparse_store_info(path, *, component=None, storage_options=None):
    """``(n_rows, n_features, nnz, dtype)`` of a sparse-by-rows zarr group."""
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r", path=component or "",
                            storage_options=storage_options)
    n_rows, n_features = group.attrs["shape"]
    return int(n_rows), int(n_features), int(group["data"].shape[0]), group["data"].dtype


def read_csr_rows(path, start, stop, *, component=None, storage_options=None):
    """Rows ``[start, stop)`` of a sparse-by-rows zarr group as a CSR matrix.

    The group holds ``indptr`` (n + 1), ``indices`` and ``data`` (nnz) of a CSR
    matrix; a block reads only its slice of each, so no task ever holds more than
    its rows.
    """
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r", path=component or "",
                            storage_options=storage_options)
    return csr_rows(group, start, stop)


def csr_rows(group, start, stop, check_files=False, name="X"):
    """Rows ``[start, stop)`` of an opened sparse-by-rows group; with
    ``check_files`` (True, or the store's fingerprint digest), on a local store,
    the chunk files they come from are checked after the read
    (:func:`~dasketch.storage.store_checks.check_chunk_files`)."""
    import scipy.sparse

    fingerprint = check_files if isinstance(check_files, str) else None

    def check(member, lo, hi):
        if check_files:
            check_chunk_files(group[member], lo, hi, name, fingerprint, node=group)

    def read(member, lo, hi):
        try:
            return group[member][lo:hi]
        except Exception as exc:  # noqa: BLE001 - a chunk that does not decode
            raise undecodable_chunk_error(group[member], lo, hi, exc, name) from None

    n_features = int(group.attrs["shape"][1])
    indptr = np.asarray(read("indptr", start, stop + 1), dtype=np.int64)
    lo, hi = int(indptr[0]), int(indptr[-1])
    indices = read("indices", lo, hi)
    data = read("data", lo, hi)
    check("indptr", start, stop + 1)  # after the read: any change since the fingerprint
    for member in ("indices", "data"):
        check(member, lo, hi)
    return scipy.sparse.csr_matrix((data, indices, indptr - lo),
                                   shape=(stop - start, n_features))
