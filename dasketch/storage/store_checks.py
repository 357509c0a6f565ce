"""Checks that a zarr store is the one the job opened, readable where the work runs.

A zarr store answers a read of a chunk it does not hold with the fill value, so
a store the workers cannot see (an in-memory filesystem of another process, a
local path that exists only on the client), or one rewritten while a job reads
it, would be read as zeros or as a mix of two versions of the data. These checks
turn each into an error naming the store and the reason:

- The client takes a **fingerprint** of the store when it opens it
  (:func:`store_fingerprint`): the store's resolved location, the array
  metadata, the stored keys (one listing) and a signature of every key that
  changes with its content: on a local store the size, modification time,
  status-change time and inode of every chunk file; in a ``.zip`` store each
  member's size and CRC-32; in an in-memory store a hash of its bytes.
  Processes remember a checked store by its fingerprint, so two stores of
  equal layout are never taken for one another.
- :func:`checked_array` / :func:`checked_group` run as one task on a worker
  before any block is read: they open the store there and take the fingerprint
  again; a difference (another filesystem, a store rewritten or replaced since
  it was opened) is an error.
- :func:`check_chunk_files` runs in every read task, on a local store, after
  the read: one ``stat`` of each chunk file of the rows read, which must match
  the fingerprint (so a change at any moment since the opening shows). A
  worker that did not run the opening check takes the fingerprint itself
  before its first comparison, so every worker checks in full. A chunk
  that was stored and then disappeared, or that was rewritten while the job
  ran, is an error.

Absent chunks follow zarr: zarr 3 does not write chunks that hold only the
fill value (``write_empty_chunks=False``), so a chunk key absent when the job
opens the store reads as the fill value (``missing_chunks="fill"``, the
default). ``missing_chunks="raise"`` makes any absent chunk an error, for
stores known to be complete. Remote (fsspec) stores are fingerprinted by their
metadata and one detailed listing (each object's size and ETag, content hash,
generation or modification time), on the client and once per worker; the
per-read ``stat`` applies to local stores. Instead, the client lists a remote
store again when a computation that read it has finished
(:class:`EndOfJobCheck`, run by the bridge's ``compute``): a store rewritten at
any moment of the job, after a worker's check included, makes the job an error,
never a returned result. The fingerprints themselves are taken by
:mod:`dasketch.storage.fingerprints` (re-exported here).
"""

from __future__ import annotations

import os
import socket
from collections import OrderedDict

import numpy as np

from dasketch.storage.fingerprints import (  # noqa: F401 - SHOWN_KEYS and stored_keys are re-exported
    SHOWN_KEYS,
    _file_signature,
    _local_directory,
    chunk_keys,
    missing_chunk_keys,
    refuse_special_metadata,
    store_fingerprint,
    stored_keys,
)

MISSING_CHUNKS = ("fill", "raise")
_CHECKED = OrderedDict()  # (fingerprint digest, missing_chunks) -> checked node, per process
_EXPECTED = OrderedDict()  # fingerprint digest -> (local directory, {key: file signature})
_CHECKED_MAX = 64


def first_line(exc):
    """``"Type: first line of the message"`` of an exception."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def check_missing_chunks(missing_chunks):
    """``missing_chunks`` if it is ``"fill"`` or ``"raise"``, else ``ValueError``."""
    if missing_chunks not in MISSING_CHUNKS:
        raise ValueError(f"missing_chunks must be 'fill' or 'raise', got {missing_chunks!r}")
    return missing_chunks


def _where():
    """The address and host of this worker, or "this process" outside a worker."""
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
        refuse_special_metadata(os.fspath(url), component)
        return opener(os.fspath(url), mode="r", path=component or "",
                      storage_options=storage_options)
    except Exception as exc:  # noqa: BLE001 - every failure becomes one clear error
        failure = _unreadable_reason(url, exc)
    # Raised outside the except block: no unpicklable store in the context.
    where = f" at component {component!r}" if component else ""
    raise ValueError(f"{name}: the zarr store {os.fspath(url)!r}{where} cannot be read on "
                     f"{_where()}: {failure}")



def _missing_error(name, url, label, shown, n_missing, n_expected, fill_value):
    more = f", ... ({n_missing - len(shown)} more)" if n_missing > len(shown) else ""
    return ValueError(
        f"{name}: the zarr store {os.fspath(url)!r} lacks {n_missing} of {n_expected} "
        f"chunks of {label} (first: {', '.join(shown)}{more}): a partial or unfinished "
        f"write? Rewrite the store, or pass missing_chunks='fill' (command line: "
        f"--missing-chunks fill) to read them as the fill value "
        f"{np.asarray(fill_value).item()!r}")


def _expect(digest, node, signatures):
    """Keep the chunk files' signatures of a checked local ``node`` for
    :func:`check_chunk_files` on this process."""
    directory = _local_directory(node)
    if directory is not None:
        _EXPECTED[digest] = (os.path.normpath(directory), signatures)
    while len(_EXPECTED) > _CHECKED_MAX:
        _EXPECTED.popitem(last=False)


def _remember(memo, digest, node, signatures):
    _CHECKED[memo] = node
    _expect(digest, node, signatures)
    while len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.popitem(last=False)
    return node


def _check_fingerprint(node, url, digest, n_keys, name):
    """The node's fingerprint here against the client's; its signatures."""
    here, signatures = store_fingerprint(node)
    if here == digest:
        return signatures
    reason = ("the store was rewritten or replaced after the job opened it; the result "
              "would mix versions of the data. Run the job again once the writer has "
              "finished")
    if n_keys is not None and len(signatures) != n_keys:
        reason = (f"it holds {len(signatures)} stored keys here and {n_keys} on the client: "
                  f"rewritten since the job opened it, or not the same filesystem "
                  f"({_unreadable_reason(url, FileNotFoundError(str(url)))})"
                  if not signatures else
                  f"it holds {len(signatures)} stored keys here and {n_keys} on the "
                  f"client: {reason}")
    raise ValueError(f"{name}: the zarr store {os.fspath(url)!r} changed under the job "
                     f"({_where()}): {reason}")


def checked_array(url, component, storage_options, shape, dtype, missing_chunks,
                  fingerprint, name="X"):
    """Open the zarr array at ``url`` here (on a worker) and check it.

    Checks that it opens, has the ``shape`` and ``dtype`` the client saw and the
    same ``fingerprint`` (:func:`store_fingerprint`: ``(digest, number of
    stored keys)``) as when the client opened it, and, with
    ``missing_chunks="raise"``, that every chunk is stored. ``url`` may also be
    an opened ``zarr.Array`` (its store travels with it). The result is
    remembered per digest, so a job of many passes checks once per process,
    and the chunk files' signatures are kept for :func:`check_chunk_files`.

    Returns
    -------
    zarr.Array

    Raises
    ------
    ValueError
        Naming the store and the reason.
    """
    digest, n_keys = fingerprint
    memo = f"{digest}:{missing_chunks}"
    if memo in _CHECKED:
        return _CHECKED[memo]
    if isinstance(url, (str, os.PathLike)):
        array = _open_node(url, component, storage_options, "array", name)
    else:
        array, url = url, str(url.store_path)
    if tuple(array.shape) != tuple(shape) or array.dtype != np.dtype(dtype):
        raise ValueError(f"{name}: {_where()} sees a different array at "
                         f"{os.fspath(url)!r} ({array.shape} {array.dtype}) than the "
                         f"client ({tuple(shape)} {np.dtype(dtype)}): are they on "
                         "different filesystems, or was the store replaced?")
    signatures = _check_fingerprint(array, url, digest, n_keys, name)
    if missing_chunks == "raise":
        shown, n_missing, n_expected = missing_chunk_keys(array, signatures)
        if n_missing:
            raise _missing_error(name, url, "the array", shown, n_missing, n_expected,
                                 array.fill_value)
    return _remember(memo, digest, array, signatures)


def checked_group(url, component, storage_options, arrays, missing_chunks, fingerprint,
                  name="X"):
    """:func:`checked_array` for a group: ``arrays`` maps member names to the
    shapes the client saw. One listing of the group covers all members."""
    digest, n_keys = fingerprint
    memo = f"{digest}:{missing_chunks}"
    if memo in _CHECKED:
        return _CHECKED[memo]
    group = _open_node(url, component, storage_options, "group", name)
    for member, shape in arrays.items():
        array = group.get(member)
        if array is None or tuple(array.shape) != tuple(shape):
            raise ValueError(f"{name}: {_where()} sees a different store at "
                             f"{os.fspath(url)!r} than the client ({member!r}): are "
                             "they on different filesystems, or was the store replaced?")
    signatures = _check_fingerprint(group, url, digest, n_keys, name)
    if missing_chunks == "raise":
        for member in arrays:
            prefix = member + "/"
            own = {k[len(prefix):] for k in signatures if k.startswith(prefix)}
            shown, n_missing, n_expected = missing_chunk_keys(group[member], own)
            if n_missing:
                raise _missing_error(name, url, repr(member), shown, n_missing,
                                     n_expected, group[member].fill_value)
    return _remember(memo, digest, group, signatures)


def _expected_signatures(digest, directory):
    """``(signatures, prefix)`` remembered on this process for the checked node
    of fingerprint ``digest``, which holds ``directory`` (itself, or a group
    above it), or ``(None, "")``."""
    base, signatures = _EXPECTED.get(digest, (None, None))
    directory = os.path.normpath(directory)
    if base is None or not (directory == base or directory.startswith(base + os.sep)):
        return None, ""
    relative = os.path.relpath(directory, base).replace(os.sep, "/")
    return signatures, "" if relative == "." else relative + "/"


def check_chunk_files(array, start, stop, name="X", fingerprint=None, node=None):
    """On a local store, check the chunk files of rows ``[start, stop)`` here
    (one ``stat`` each) against the store's fingerprint (its digest): a chunk
    that was stored and is gone (a worker without the path, a deleted chunk), or
    one rewritten since, is an error, not zeros or a mix of versions. A chunk
    absent from the fingerprint must still be absent (it reads as the fill
    value). Without a fingerprint, only existence is checked.

    Every process checks in full: one that has not checked the store itself
    (:func:`checked_array` / :func:`checked_group` ran on another worker, and
    the checked node reached this one as a task's input) takes the
    fingerprint of ``node`` (the checked node: ``array`` itself, or the group
    holding it) here first, which must equal ``fingerprint``."""
    directory = _local_directory(array)
    if directory is None:  # not a local store: checked by the listing
        return
    root = str(array.store_path.store.root)
    expected, prefix = _expected_signatures(fingerprint, directory)
    if expected is None and fingerprint is not None:
        checked = array if node is None else node
        _expect(fingerprint, checked,
                _check_fingerprint(checked, root, fingerprint, None, name))
        expected, prefix = _expected_signatures(fingerprint, directory)
    for key in chunk_keys(array, rows=(start, stop)):
        now = _file_signature(os.path.join(directory, key))
        changed = now is None if expected is None else now != expected.get(prefix + key)
        if not changed:
            continue
        if not os.path.isdir(root):
            reason = _unreadable_reason(root, FileNotFoundError(root))
        elif now is None:
            reason = (f"chunk {key!r} is missing: a partial or unfinished write? "
                      "Rewrite the store, or pass missing_chunks='fill' (command line: "
                      "--missing-chunks fill) to read missing chunks as the fill value"
                      if expected is None else
                      f"chunk {key!r} was stored when the job opened the store and has "
                      "disappeared since: the store was rewritten or deleted under the "
                      "job. Run it again once the writer has finished")
        else:
            reason = (f"chunk {key!r} was rewritten after the job opened the store; the "
                      "result would mix versions of the data. Run the job again once the "
                      "writer has finished")
        raise ValueError(f"{name}: the zarr store {root!r} cannot be read on "
                         f"{_where()} (rows {start}-{stop}): {reason}")


def _changes(before, after, shown=3):
    """What differs between two signature maps (stored key -> signature), in a phrase."""
    parts = []
    for label, keys in (("rewritten", [k for k in before if k in after and before[k] != after[k]]),
                        ("added", [k for k in after if k not in before]),
                        ("removed", [k for k in before if k not in after])):
        if keys:
            more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
            parts.append(f"{label}: {', '.join(sorted(keys)[:shown])}{more}")
    return "; ".join(parts) or "its metadata was rewritten"


class EndOfJobCheck:
    """What the client needs to list a store that is not a local directory (an
    fsspec store, a ``.zip`` store, an in-memory store) again once a job that
    read it has finished, and compare it with the fingerprint taken when the
    job opened it (:func:`store_fingerprint`).

    Workers check the listing once, before their first read; the reads of a
    long job that follow are not checked one by one (on a local store each
    read is, :func:`check_chunk_files`). Listing the store again at the end of
    the job covers them: a difference means the store was rewritten while the
    job ran, and :meth:`check` raises instead of letting the result through.
    The check sees what the listing says: an object rewritten in place shows
    through its size or version field (ETag, content hash, generation,
    modification time); on a filesystem whose listing gives neither, only
    added and removed keys show.
    """

    def __init__(self, source, component, storage_options, kind, fingerprint, name):
        self.source, self.component = source, component
        self.storage_options, self.kind = storage_options, kind
        self.digest, self.signatures = fingerprint
        self.name = name

    @classmethod
    def of(cls, node, source, component, storage_options, kind, fingerprint, name="X"):
        """The check of ``node`` (opened from ``source``) with its ``fingerprint``
        ``(digest, signatures)``, or None when ``node`` is in a local directory,
        whose reads check their chunk files themselves."""
        if _local_directory(node) is not None:  # its reads check their files
            return None
        return cls(source, component, storage_options, kind, fingerprint, name)

    @property
    def url(self):
        source = self.source
        return os.fspath(source) if isinstance(source, (str, os.PathLike)) else str(
            source.store_path)

    def check(self):
        """List the store again; ``ValueError`` naming it and what changed when its
        fingerprint differs from the one taken when the job opened it."""
        import zarr

        reason = None
        try:
            if isinstance(self.source, (str, os.PathLike)):
                node = _open_node(self.source, self.component, self.storage_options,
                                  self.kind, self.name)
            else:
                node = zarr.open(self.source.store_path, mode="r")
            digest, signatures = store_fingerprint(node)
        except Exception as exc:  # noqa: BLE001 - reported below, in one line
            digest, reason = None, f"it cannot be opened any more ({first_line(exc)})"
        if digest == self.digest:
            return
        reason = reason or _changes(self.signatures, signatures)
        raise ValueError(f"{self.name}: the zarr store {self.url!r} was rewritten while the "
                         f"job ran ({reason}); the result would mix versions of the data "
                         "and is not returned. Run the job again once the writer has "
                         "finished")
