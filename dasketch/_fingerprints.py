"""The fingerprint of a zarr store as it is stored now (:func:`store_fingerprint`),
from one listing of its keys and, on a local store, one ``stat`` of each chunk
file; and the storage keys of an array's chunks. What the checks of
:mod:`dasketch.store_checks` compare."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os

SHOWN_KEYS = 5


def stored_keys(node):
    """The keys stored under a zarr node, relative to it: one listing."""
    from zarr.core.sync import _collect_aiterator, sync

    store, prefix = node.store_path.store, node.store_path.path
    keys = sync(_collect_aiterator(store.list_prefix(prefix)))
    cut = len(prefix) + 1 if prefix else 0
    return {key[cut:] for key in keys}


def _local_directory(node):
    """The directory of ``node`` on a local store, or None."""
    root = getattr(node.store_path.store, "root", None)
    return None if root is None else os.path.join(str(root), node.store_path.path)


def _file_signature(path):
    """``(size, mtime_ns, inode)`` of a file, or None if it does not exist: a
    rewrite (zarr writes a new file) or a replaced store changes it."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return (stat.st_size, stat.st_mtime_ns, stat.st_ino)


# What an fsspec listing says of an object's version, in order of preference: the
# content hash or generation a cloud store keeps, else a modification time.
_VERSION_FIELDS = ("ETag", "etag", "md5Hash", "generation", "LastModified",
                   "last_modified", "mtime", "updated", "created")


def _remote_signatures(node):
    """Stored key -> ``(size, version)`` of a node on an fsspec store, from one
    detailed listing; None when the store is not an fsspec one."""
    from zarr.storage import FsspecStore

    store = node.store_path.store
    if not isinstance(store, FsspecStore):
        return None
    from zarr.core.sync import sync

    root = "/".join(part for part in (store.path.rstrip("/"), node.store_path.path) if part)
    for fs in {id(f): f for f in (store.fs, getattr(store.fs, "sync_fs", store.fs))}.values():
        fs.invalidate_cache(root)  # a listing cached by this process would hide a rewrite
    listing = sync(store.fs._find(root, detail=True))
    signatures = {}
    for path, info in listing.items():
        key = path[len(root):].lstrip("/") if path.startswith(root) else path
        version = next((str(info[f]) for f in _VERSION_FIELDS if info.get(f) is not None),
                       None)
        signatures[key] = (info.get("size"), version)
    return signatures


def store_fingerprint(node):
    """The fingerprint of a zarr array or group as it is stored now.

    Returns
    -------
    digest : str
        SHA-256 of the node's metadata, its stored keys and the signature of
        each key: on a local store (size, modification time, inode) of its
        file, on an fsspec store (size, version) from one detailed listing (the
        ETag, content hash or generation of a cloud store, else its modification
        time).
    signatures : dict
        Stored key (relative to the node) -> file signature, or None on a
        store that is neither.
    """
    directory = _local_directory(node)
    remote = None if directory is not None else _remote_signatures(node)
    if remote is not None:
        signatures = dict(sorted(remote.items()))
    else:
        keys = sorted(stored_keys(node))
        signatures = {key: None if directory is None
                      else _file_signature(os.path.join(directory, key)) for key in keys}
    metadata = json.dumps(node.metadata.to_dict(), sort_keys=True, default=str)
    digest = hashlib.sha256(metadata.encode())
    for key, signature in signatures.items():
        digest.update(f"{key}\0{signature}\n".encode())
    return digest.hexdigest(), signatures


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
