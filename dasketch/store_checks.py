"""Checks that a zarr store is complete and readable where the work runs.

A zarr store answers a read of a chunk it does not hold with the fill value, so
a store the workers cannot see (an in-memory filesystem of another process, a
local path that exists only on the client) or a partly written store would be
read as zeros. These checks turn both into errors naming the store and the
reason, at a cost of one listing of the store's keys (``O(number of chunks)``
metadata work, no data is read):

- :func:`checked_array` / :func:`checked_group` run as one task on a worker
  before any block is read: they open the store there, compare it with what the
  client saw and list its chunk keys once.
- :func:`check_chunk_files` checks, on local stores, that the chunk files of
  the rows a task reads exist on the worker that reads them (one ``stat`` per
  chunk): a worker without the path fails instead of reading zeros.
"""

from __future__ import annotations

import itertools
import math
import os
import socket
from collections import OrderedDict

import numpy as np

MISSING_CHUNKS = ("raise", "fill")
SHOWN_KEYS = 5
_CHECKED = OrderedDict()  # nonce -> checked zarr node, per process
_CHECKED_MAX = 64


def first_line(exc):
    """``"Type: first line of the message"`` of an exception."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def check_missing_chunks(missing_chunks):
    """``missing_chunks`` if it is ``"raise"`` or ``"fill"``, else ``ValueError``."""
    if missing_chunks not in MISSING_CHUNKS:
        raise ValueError(f"missing_chunks must be 'raise' or 'fill', got {missing_chunks!r}")
    return missing_chunks


def _where():
    """This worker's address and host, or "this process" outside a worker."""
    try:
        from distributed import get_worker

        return f"worker {get_worker().address} (host {socket.gethostname()})"
    except (ImportError, ValueError):
        return "this process"


def is_local_path(path):
    return "://" not in str(path) or str(path).startswith("file://")


def local_path(path):
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


def _unreadable_reason(url, exc):
    """Why the store at ``url`` cannot be opened here, in one phrase."""
    text = str(url)
    if text.startswith("memory://"):
        return ("an in-memory filesystem (memory://) belongs to the process that wrote "
                "it; worker processes see an empty store. Write the data where every "
                "worker can read it (a shared filesystem or an object store), or compute "
                "without a process cluster")
    if is_local_path(text):
        if not os.path.exists(local_path(text)):
            return (f"the path does not exist on {_where()}: a local path must be on a "
                    "filesystem that every worker mounts at the same place (or use an "
                    "fsspec URL such as s3://)")
    return first_line(exc)


def _open_node(url, component, storage_options, kind, name):
    import zarr

    opener = zarr.open_array if kind == "array" else zarr.open_group
    failure = None
    try:
        return opener(os.fspath(url), mode="r", path=component or "",
                      storage_options=storage_options)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear error
        failure = _unreadable_reason(url, exc)
    # Raised outside the except block: no unpicklable store in the context.
    where = f" at component {component!r}" if component else ""
    raise ValueError(f"{name}: the zarr store {os.fspath(url)!r}{where} cannot be read on "
                     f"{_where()}: {failure}")


def stored_keys(node):
    """The keys stored under a zarr node, relative to it: one listing."""
    from zarr.core.sync import _collect_aiterator, sync

    store, prefix = node.store_path.store, node.store_path.path
    keys = sync(_collect_aiterator(store.list_prefix(prefix)))
    cut = len(prefix) + 1 if prefix else 0
    return {key[cut:] for key in keys}


def chunk_keys(array, rows=None):
    """Storage keys (chunks, or shards of a sharded array) of ``array``, in
    order; ``rows=(start, stop)`` limits them to the chunks holding those rows."""
    unit = array.shards or array.chunks
    grid = [math.ceil(s / u) for s, u in zip(array.shape, unit)]
    ranges = [range(n) for n in grid]
    if rows is not None:
        start, stop = rows
        ranges[0] = range(start // unit[0], min(math.ceil(stop / unit[0]), grid[0]))
    for coords in itertools.product(*ranges):
        yield array.metadata.encode_chunk_key(coords)


def missing_chunk_keys(array, stored=None):
    """``(first few missing keys, number missing, number expected)`` of ``array``."""
    stored = stored_keys(array) if stored is None else stored
    shown, n_missing, n_expected = [], 0, 0
    for key in chunk_keys(array):
        n_expected += 1
        if key not in stored:
            n_missing += 1
            if len(shown) < SHOWN_KEYS:
                shown.append(key)
    return shown, n_missing, n_expected


def _missing_error(name, url, label, shown, n_missing, n_expected, fill_value):
    more = f", ... ({n_missing - len(shown)} more)" if n_missing > len(shown) else ""
    return ValueError(
        f"{name}: the zarr store {os.fspath(url)!r} lacks {n_missing} of {n_expected} "
        f"chunks of {label} (first: {', '.join(shown)}{more}): a partial or unfinished "
        f"write? Rewrite the store, or pass missing_chunks='fill' (command line: "
        f"--missing-chunks fill) to read them as the fill value "
        f"{np.asarray(fill_value).item()!r}")


def _remember(nonce, node):
    _CHECKED[nonce] = node
    while len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.popitem(last=False)
    return node


def checked_array(url, component, storage_options, shape, dtype, missing_chunks, nonce,
                  name="X"):
    """Open the zarr array at ``url`` here (on a worker) and check it.

    Checks that it opens, has the ``shape`` and ``dtype`` the client saw, and,
    unless ``missing_chunks="fill"``, that every chunk is stored. ``url`` may
    also be an opened ``zarr.Array`` (its store travels with it). The result is
    remembered per ``nonce`` (one per opening on the client), so a job of many
    passes checks once per process.

    Returns
    -------
    zarr.Array

    Raises
    ------
    ValueError
        Naming the store and the reason.
    """
    if nonce in _CHECKED:
        return _CHECKED[nonce]
    if isinstance(url, (str, os.PathLike)):
        array = _open_node(url, component, storage_options, "array", name)
    else:
        array, url = url, str(url.store_path)
    if tuple(array.shape) != tuple(shape) or array.dtype != np.dtype(dtype):
        raise ValueError(f"{name}: {_where()} sees a different array at "
                         f"{os.fspath(url)!r} ({array.shape} {array.dtype}) than the "
                         f"client ({tuple(shape)} {np.dtype(dtype)}): are they on "
                         "different filesystems?")
    if missing_chunks == "raise":
        shown, n_missing, n_expected = missing_chunk_keys(array)
        if n_missing:
            raise _missing_error(name, url, "the array", shown, n_missing, n_expected,
                                 array.fill_value)
    return _remember(nonce, array)


def checked_group(url, component, storage_options, arrays, missing_chunks, nonce, name="X"):
    """:func:`checked_array` for a group: ``arrays`` maps member names to the
    shapes the client saw. One listing of the group covers all members."""
    if nonce in _CHECKED:
        return _CHECKED[nonce]
    group = _open_node(url, component, storage_options, "group", name)
    stored = stored_keys(group) if missing_chunks == "raise" else None
    for member, shape in arrays.items():
        array = group.get(member)
        if array is None or tuple(array.shape) != tuple(shape):
            raise ValueError(f"{name}: {_where()} sees a different store at "
                             f"{os.fspath(url)!r} than the client ({member!r}): are "
                             "they on different filesystems?")
        if stored is not None:
            prefix = member + "/"
            own = {k[len(prefix):] for k in stored if k.startswith(prefix)}
            shown, n_missing, n_expected = missing_chunk_keys(array, own)
            if n_missing:
                raise _missing_error(name, url, repr(member), shown, n_missing,
                                     n_expected, array.fill_value)
    return _remember(nonce, group)


def check_chunk_files(array, start, stop, name="X"):
    """On a local store, check that the chunk files of rows ``[start, stop)``
    exist here (one ``stat`` each): a worker without the path, or a chunk
    deleted after the store was checked, is an error, not zeros."""
    store = array.store_path.store
    root = getattr(store, "root", None)
    if root is None:  # not a local store: checked by the listing
        return
    base = os.path.join(str(root), array.store_path.path)
    for key in chunk_keys(array, rows=(start, stop)):
        if not os.path.exists(os.path.join(base, key)):
            if not os.path.isdir(str(root)):
                reason = _unreadable_reason(str(root), FileNotFoundError(str(root)))
            else:
                reason = (f"chunk {key!r} is missing: a partial or unfinished write? "
                          "Rewrite the store, or pass missing_chunks='fill' (command "
                          "line: --missing-chunks fill) to read missing chunks as the "
                          "fill value")
            raise ValueError(f"{name}: the zarr store {str(root)!r} cannot be read on "
                             f"{_where()} (rows {start}-{stop}): {reason}")
