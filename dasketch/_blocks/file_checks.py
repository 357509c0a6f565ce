"""Files read by block tasks (HDF5, Parquet): the job notes a file's signature
when it opens it, and every task that reads the file checks it again after
reading, so a file rewritten or replaced during the job, even in place with its
modification time restored, is an error rather than a mix of two versions. A
local file's signature is its size, modification time, status-change time and
inode; a file on an fsspec filesystem's is its size and version (ETag, content
hash or generation, else modification time), as a remote store's keys are
signed (:mod:`dasketch.storage.fingerprints`).
"""

from __future__ import annotations

import errno
import os

from dasketch.storage.fingerprints import _VERSION_FIELDS, _file_signature


def file_signature(filename):
    """``(size, mtime_ns, ctime_ns, inode)`` of the file ``filename``, as a
    store's chunk files are signed (:mod:`dasketch.storage.fingerprints`); a FIFO,
    device or socket is a ``ValueError``, a missing file ``FileNotFoundError``."""
    signature = _file_signature(filename)
    if signature is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), filename)
    return signature


def remote_signature(fs, path):
    """``(size, version)`` of the file ``path`` of the fsspec filesystem ``fs``,
    as it is stored now (a listing this process cached is dropped first)."""
    fs.invalidate_cache(path)
    info = fs.info(path)
    version = next((str(info[f]) for f in _VERSION_FIELDS if info.get(f) is not None), None)
    return (info.get("size"), version)


def check_file(filename, signature, name, fs=None):
    """Raise if ``filename`` (a local file, or a file of the fsspec filesystem
    ``fs``) is not the file the job opened (its signature was ``signature``),
    naming the argument ``name``."""
    try:
        now = file_signature(filename) if fs is None else remote_signature(fs, filename)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{name}: {filename!r} does not exist where this task runs: do the workers "
            "share the client's filesystem, or was the file removed?") from None
    if now != tuple(signature):
        raise ValueError(f"{name}: {filename!r} changed while the job read it (size, "
                         "modification or status-change time, or inode differ from its "
                         "opening); rerun once it is no longer written")
