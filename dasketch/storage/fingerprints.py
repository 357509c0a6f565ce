"""The fingerprint of a zarr store as it is stored now (:func:`store_fingerprint`),
from one listing of its keys and a signature of each key that changes with its
content; and the storage keys of an array's chunks. What the checks of
:mod:`dasketch.storage.store_checks` compare.

A fingerprint names the store it was taken of (its resolved location, or the
content of an in-memory store) as well as its metadata and keys: two stores of
equal layout never share one, so a process that remembers a checked store by
its fingerprint never reads one store for another."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
from stat import S_ISREG

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


# Every URL form that names a file of this machine: fsspec's two names of the
# local filesystem.
LOCAL_URL_PROTOCOLS = ("file://", "local://")


def local_file_path(path):
    """The plain path on this machine that ``path`` names (a plain path, or a
    ``file://`` or ``local://`` URL), or None for any other URL (remote or
    chained ``a::b`` URLs)."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    for protocol in LOCAL_URL_PROTOCOLS:
        if path.startswith(protocol):
            return path[len(protocol):]
    return None if "://" in path or "::" in path else path


def refuse_special_file(path, stat=None):
    """``ValueError`` when ``path`` exists and is not a regular file once links
    are followed (a FIFO, a device such as ``/dev/zero``, a socket): reading it
    could block for ever or never end, so it is refused before it is opened.
    One ``stat``, which never blocks."""
    try:
        stat = os.stat(path) if stat is None else stat
    except (FileNotFoundError, NotADirectoryError):
        return
    if not S_ISREG(stat.st_mode):
        raise ValueError(f"{path!r} is not a regular file (a FIFO, device or socket); a "
                         "zarr store holds only regular files, so it is refused before "
                         "it is read")


def refuse_special_metadata(url, component=None):
    """:func:`refuse_special_file` for the ``zarr.json`` of a local store at
    ``url`` and of every group on the way to ``component``: what zarr reads to
    open the store. Nothing to check for other URLs."""
    directory = local_file_path(url)
    if directory is None:
        return
    parts = [part for part in str(component or "").split("/") if part]
    for depth in range(len(parts) + 1):
        refuse_special_file(os.path.join(directory, *parts[:depth], "zarr.json"))


def _file_signature(path):
    """``(size, mtime_ns, ctime_ns, inode)`` of a file, or None if it does not
    exist (``ValueError`` if it is not a regular file, :func:`refuse_special_file`):
    a rewrite (zarr writes a new file) or a replaced store changes it, and
    so does an in-place rewrite that restores the modification time (``cp -p``,
    ``rsync --inplace -t``): the kernel sets the status-change time of every
    write, and no call sets it back."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    refuse_special_file(path, stat)
    return (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)


def local_signatures(directory):
    """Stored key -> file signature of every file under a local store's
    ``directory``, from one walk. Unlike zarr's own listing, which leaves out
    what is not a regular file (and then reads it as an absent chunk, blocking
    on a FIFO), every entry is seen and a FIFO, device or socket is refused."""
    signatures = {}
    for root, _, files in os.walk(directory, followlinks=True):
        relative = os.path.relpath(root, directory).replace(os.sep, "/")
        prefix = "" if relative == "." else relative + "/"
        for file in files:
            signature = _file_signature(os.path.join(root, file))
            if signature is not None:  # removed since the walk listed it
                signatures[prefix + file] = signature
    return signatures


def _zip_signatures(node):
    """Stored key (relative to ``node``) -> ``(size, CRC-32)`` of each member of
    a local ``.zip`` store, read from the zip file's central directory as it is
    on disk now (not from the store's open handle); None for other stores."""
    import zipfile

    from zarr.storage import ZipStore

    store = node.store_path.store
    if not isinstance(store, ZipStore):
        return None
    prefix = f"{node.store_path.path}/" if node.store_path.path else ""
    with zipfile.ZipFile(store.path) as archive:
        return {info.filename[len(prefix):]: (info.file_size, info.CRC)
                for info in archive.infolist() if info.filename.startswith(prefix)}


def _memory_signatures(node):
    """Stored key (relative to ``node``) -> a hash of its bytes, for an in-memory
    store (whose keys have no other version); None for other stores. Hashing is
    proportionate here: the store is in this process's memory."""
    import xxhash
    from zarr.storage import MemoryStore

    store = node.store_path.store
    if not isinstance(store, MemoryStore):
        return None
    prefix = f"{node.store_path.path}/" if node.store_path.path else ""
    return {key[len(prefix):]: xxhash.xxh3_128_hexdigest(value.to_bytes())
            for key, value in store._store_dict.items() if key.startswith(prefix)}


def store_location(node):
    """Where the store of ``node`` is, in one string that differs between any two
    stores: the resolved directory or zip file of a local store (with the zip
    file's own signature), the filesystem and path of an fsspec store, or the
    kind of any other store (an in-memory store is told apart by its content's
    signatures instead)."""
    from zarr.storage import FsspecStore, LocalStore, ZipStore

    store = node.store_path.store
    if isinstance(store, LocalStore):
        where = f"file:{os.path.realpath(str(store.root))}"
    elif isinstance(store, ZipStore):
        path = os.path.realpath(str(store.path))
        where = f"zip:{path}:{_file_signature(path)}"
    elif isinstance(store, FsspecStore):
        options = json.dumps(getattr(store.fs, "storage_options", {}), sort_keys=True,
                             default=str)
        where = f"{store.fs.protocol}:{store.path}:{options}"
    else:
        where = type(store).__name__
    return f"{where}|{node.store_path.path}"


# What an fsspec listing says of an object's version, in order of preference: the
# content hash or generation a cloud store keeps (or the CRC-32 of a zip member,
# ``zip::`` URLs), else a modification time.
_VERSION_FIELDS = ("ETag", "etag", "md5Hash", "CRC", "generation", "LastModified",
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
        SHA-256 of the node's location (:func:`store_location`), its metadata,
        its stored keys and the signature of each key: on a local store (size,
        modification time, status-change time, inode) of its file; in a local
        ``.zip`` store (size, CRC-32) of its member; on an fsspec store (size,
        version) from one detailed listing (the ETag, content hash, CRC-32 or
        generation, else the modification time); in an in-memory store a hash
        of its bytes.
    signatures : dict
        Stored key (relative to the node) -> signature, or None on a store
        that offers none.
    """
    directory = _local_directory(node)
    found = None
    if directory is None:
        for signatures_of in (_remote_signatures, _zip_signatures, _memory_signatures):
            found = signatures_of(node)
            if found is not None:
                break
    if found is not None:
        signatures = dict(sorted(found.items()))
    elif directory is not None:
        signatures = dict(sorted(local_signatures(directory).items()))
    else:
        signatures = dict.fromkeys(sorted(stored_keys(node)))
    metadata = json.dumps(node.metadata.to_dict(), sort_keys=True, default=str)
    digest = hashlib.sha256(f"{store_location(node)}\0{metadata}".encode())
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
