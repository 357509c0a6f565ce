"""Local files read by block tasks (HDF5, Parquet): the job notes a file's
signature (size, modification time, status-change time, inode) when it opens
it, and every task that reads the file checks it again after reading, so a file
rewritten or replaced during the job, even in place with its modification time
restored, is an error rather than a mix of two versions.
"""

from __future__ import annotations

import errno
import os

from dasketch.storage.fingerprints import _file_signature


def file_signature(filename):
    """``(size, mtime_ns, ctime_ns, inode)`` of the file ``filename``, as a
    store's chunk files are signed (:mod:`dasketch.storage.fingerprints`); a FIFO,
    device or socket is a ``ValueError``, a missing file ``FileNotFoundError``."""
    signature = _file_signature(filename)
    if signature is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), filename)
    return signature


def check_file(filename, signature, name):
    """Raise if ``filename`` is not the file the job opened (its signature was
    ``signature``), naming the argument ``name``."""
    try:
        now = file_signature(filename)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{name}: {filename!r} does not exist where this task runs: do the workers "
            "share the client's filesystem, or was the file removed?") from None
    if now != tuple(signature):
        raise ValueError(f"{name}: {filename!r} changed while the job read it (size, "
                         "modification or status-change time, or inode differ from its "
                         "opening); rerun once it is no longer written")
