"""Open inputs, save and load sketches.

Inputs are opened lazily: a zarr path or fsspec URL becomes a Dask array read
block by block; nothing is loaded on the client. Every read is preceded by a
check on a worker that the store opens there and holds all its chunks
(:mod:`dasketch.store_checks`): storage the workers cannot read is an error,
never zeros.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading

import numpy as np

from dasketch._sketch_files import (
    SKETCH_FORMAT_VERSION,
    payload_checksum,
    read_npz_sketch,
    read_zarr_sketch,
    sketch_from_metadata,
)
from dasketch.kernels.frequent_directions import Sketch
from dasketch.outputs import CSR_FORMAT, write_atomically
from dasketch.store_checks import (
    check_chunk_files,
    check_missing_chunks,
    checked_array,
    checked_group,
    first_line,
    is_local_path,
    local_path,
    store_fingerprint,
)


def _is_path(obj):
    return isinstance(obj, (str, os.PathLike))


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
    """A ``ValueError`` naming the store, the first chunk of rows ``[start, stop)``
    that does not decode (each is read again on its own) and its rows, for a
    read of ``array`` that failed with ``exc``."""
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
    return ValueError(f"{name}: the zarr store {str(array.store_path)!r} cannot decode "
                      f"{where}: {first_line(cause)}; the chunk is damaged, rewrite the "
                      "store")


def read_rows(array, start, stop, check_files, name, *, out=None):
    """Rows ``[start, stop)`` of a checked zarr array (:func:`checked_array`); with
    ``check_files`` (True, or the store's fingerprint digest), on a local store,
    the files of their chunks are checked against the fingerprint after the
    read, which shows any change since the store was opened
    (:func:`~dasketch.store_checks.check_chunk_files`).
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


def _read_chunk(array, check_files, name, block_info=None):
    (start, stop), _ = block_info[None]["array-location"][:2]
    return read_rows(array, start, stop, check_files, name)


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
        (:mod:`dasketch.store_checks`).
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
    ``component``, or a ``zarr.Array``): the array opened here for its metadata,
    a Delayed that opens the store on a worker and checks it against what the
    client saw (:func:`~dasketch.store_checks.checked_array`), and the store's
    fingerprint, against which read tasks check their chunk files."""
    import dask

    check_missing_chunks(missing_chunks)
    if isinstance(path, (str, os.PathLike)):
        array = open_store_array(path, component=component,
                                 storage_options=storage_options, name=name)
        source = os.fspath(path)
    else:
        array = source = path
    digest, signatures = store_fingerprint(array)
    checked = dask.delayed(checked_array, pure=True)(
        source, component, storage_options, tuple(array.shape), array.dtype.str,
        missing_chunks, (digest, len(signatures)), name)
    return array, checked, digest


def open_zarr_rows(path, *, component=None, storage_options=None, chunks=None,
                   missing_chunks="fill", name="X"):
    """:func:`open_zarr_array`, and how a task reads rows of the store itself.

    Returns
    -------
    array : dask.array.Array
        As :func:`open_zarr_array` returns it.
    reader : tuple
        ``(checked, read)``: ``checked`` a Delayed that opens and checks the
        store on a worker (:func:`checked_array`), ``read`` a :class:`ZarrRows`.
        A task given these reads any range of rows itself (one task instead of
        a read and a compute, and no rows held between them).
    """
    import dask.array as da

    array, checked, digest = open_checked_store(
        path, component=component, storage_options=storage_options,
        missing_chunks=missing_chunks, name=name)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{array.ndim}-D input with shape {tuple(array.shape)}")
    rows = array.chunks[0] if chunks is None else (
        chunks[0] if isinstance(chunks, tuple) else chunks)
    block_chunks = da.core.normalize_chunks((rows, array.shape[1]), array.shape)
    check_files = digest  # read tasks check their chunk files against this fingerprint
    lazy = da.map_blocks(_read_chunk, checked, check_files, name, chunks=block_chunks,
                         dtype=array.dtype, meta=np.empty((0, 0), array.dtype))
    return lazy, (checked, ZarrRows(check_files, name))


def is_sparse_store(path, *, component=None, storage_options=None):
    """Whether ``path`` (``/component``) is a sparse-by-rows zarr group
    written by :func:`write_sparse_synthetic`."""
    import zarr

    try:
        node = zarr.open(os.fspath(path), mode="r", path=component or "",
                         storage_options=storage_options)
    except Exception:  # not zarr, or missing: the dense reader reports it
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
    (:func:`~dasketch.store_checks.check_chunk_files`)."""
    import scipy.sparse

    fingerprint = check_files if isinstance(check_files, str) else None

    def check(member, lo, hi):
        if check_files:
            check_chunk_files(group[member], lo, hi, name, fingerprint)

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


def checked_sparse_store(path, *, component=None, storage_options=None,
                         missing_chunks="fill", name="X"):
    """A Delayed that opens the sparse-by-rows group on a worker and checks it
    (see :func:`open_zarr_array`); its value is the opened group, for
    :func:`csr_rows`. Returns ``(delayed, digest)``: the digest of the store's
    fingerprint, for :func:`csr_rows`' ``check_files``."""
    import dask
    import zarr

    check_missing_chunks(missing_chunks)
    group = zarr.open_group(os.fspath(path), mode="r", path=component or "",
                            storage_options=storage_options)
    shapes = {member: tuple(group[member].shape) for member in ("indptr", "indices", "data")}
    digest, signatures = store_fingerprint(group)
    return dask.delayed(checked_group, pure=True)(
        os.fspath(path), component, storage_options, shapes, missing_chunks,
        (digest, len(signatures)), name), digest


def _sketch_metadata(sketch):
    """The metadata of a saved sketch, ending with the checksum of its payload."""
    meta = {
        "format": "dasketch.Sketch",
        "format_version": SKETCH_FORMAT_VERSION,
        "method": sketch.method,
        "sketch_size": int(sketch.sketch_size),
        "alpha0": float(sketch.alpha0),
        "shrinkage": float(sketch.shrinkage),
        "n_rows": int(sketch.n_rows),
        "n_features": int(sketch.n_features),
        "frobenius_sq": float(sketch.frobenius_sq),
        "centered": bool(sketch.centered),
        "shrinkage_bound": (None if sketch.shrinkage_bound is None
                            else float(sketch.shrinkage_bound)),
        "failure_probability": float(sketch.failure_probability),
        "rounding": float(sketch.rounding),
    }
    meta["checksum"] = payload_checksum(meta, {"B": sketch.B, "mean": sketch.mean})
    return meta


def save_sketch(sketch, path, *, overwrite=False):
    """Save a :class:`~dasketch.Sketch` to a ``.npz`` file or a zarr directory.

    The format is chosen by the suffix: ``.npz`` writes a NumPy archive, anything
    else a zarr group with arrays ``B`` (and ``mean`` for centred sketches) and
    the metadata in its attributes. Both carry a format version (3) and a SHA-256
    checksum of the payload (:mod:`dasketch._sketch_files`). The file is
    written to a temporary sibling and moved into place, so an interrupted save
    never leaves a partial sketch. What is written is first checked as
    :func:`load_sketch` checks it, so a saved sketch always reads back.

    Parameters
    ----------
    sketch : Sketch
        The sketch to save.
    path : str or os.PathLike
        ``*.npz`` for a NumPy archive, else a zarr directory (a local path or an
        fsspec URL).
    overwrite : bool, default False
        Replace what is at ``path``.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False.
    ValueError
        If the sketch could not be read back (its fields break an invariant of
        the format); nothing is written then.

    See Also
    --------
    load_sketch : Read it back.
    merge_sketches : Merge a stored sketch with sketches of new rows.

    Examples
    --------
    >>> import os, tempfile, numpy as np, dasketch
    >>> s = dasketch.sketch(np.random.default_rng(0).standard_normal((100, 4)), 3)
    >>> path = os.path.join(tempfile.mkdtemp(), "s.npz")
    >>> dasketch.save_sketch(s, path)
    >>> loaded = dasketch.load_sketch(path)
    >>> bool(np.array_equal(loaded.B, s.B)), loaded.error_bound == s.error_bound
    (True, True)
    """
    if not isinstance(sketch, Sketch):
        raise TypeError(f"sketch must be a dasketch.Sketch, got {type(sketch).__name__}")
    if not _is_path(path):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    if is_local_path(path) and os.path.exists(local_path(path)) and not overwrite:
        raise FileExistsError(f"path: {os.fspath(path)!r} exists; pass overwrite=True "
                              "to replace it")
    meta = _sketch_metadata(sketch)
    arrays = {"B": sketch.B}
    if sketch.centered:
        arrays["mean"] = sketch.mean
    try:  # the checks of load_sketch, on what is about to be written
        sketch_from_metadata(json.loads(json.dumps(meta, allow_nan=False)), arrays,
                             os.fspath(path))
    except ValueError as exc:
        raise ValueError(f"sketch: cannot be saved and read back ({first_line(exc)}); "
                         "nothing was written") from None

    if str(path).endswith(".npz"):
        def write(target):
            with open(target, "wb") as fh:
                np.savez(fh, metadata=np.array(json.dumps(meta, allow_nan=False)),
                         **arrays)
    else:
        def write(target):
            import zarr

            group = zarr.open_group(target, mode="w")
            group.attrs.update(meta)
            for name, values in arrays.items():
                group.create_array(name, data=np.ascontiguousarray(values))
    write_atomically(write, path, overwrite)


def load_sketch(path):
    """Load a sketch written by :func:`save_sketch` (``.npz`` or zarr).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npz`` file or a zarr directory (a local path or an fsspec URL).

    Returns
    -------
    Sketch
        The sketch as saved, its invariants and checksum checked.

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    ValueError
        If what is there is not a complete dasketch sketch (another file, a data
        store, a truncated or corrupted file, missing metadata, fields that break
        an invariant of the sketch, a payload that does not match its checksum)
        or has a format version this dasketch does not read; the message says
        which. Format versions 1 (no checksum) and 2 are read. Array sizes are
        checked against the metadata before anything is allocated.

    See Also
    --------
    save_sketch : Write a sketch.
    merge_sketches : Merge it with sketches of new rows.

    Examples
    --------
    >>> import os, tempfile, numpy as np, dasketch
    >>> path = os.path.join(tempfile.mkdtemp(), "s.zarr")
    >>> dasketch.save_sketch(dasketch.sketch(np.eye(5), 3), path)
    >>> dasketch.load_sketch(path).n_rows
    5
    """
    if not _is_path(path):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    where = os.fspath(path)
    if is_local_path(path) and not os.path.exists(local_path(path)):
        raise FileNotFoundError(f"path: no sketch at {where!r}")
    if str(path).endswith(".npz") or (is_local_path(path) and os.path.isfile(local_path(path))):
        meta, arrays, problem = read_npz_sketch(local_path(path))
    else:
        meta, arrays, problem = read_zarr_sketch(path)
    if problem is not None:
        raise ValueError(f"path: {where!r} is not a dasketch sketch: {problem}")
    return sketch_from_metadata(meta, arrays, where)
