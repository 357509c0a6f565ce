"""What dasketch writes, and how it replaces it: only its own outputs, atomically.

Rules (design section 10):

- An output path that exists is replaced only when asked (``overwrite=True``,
  command line ``--overwrite``), and only when it is something dasketch wrote,
  recognised by its metadata (:func:`dasketch_output_kind`): a saved sketch
  (``.npz`` file or zarr group) or a data store written by ``make-data``.
  Anything else (a directory of other files, a store another program wrote, the
  current directory) is refused with :class:`FileExistsError`.
- An output that is, contains or lies inside an input of the same job is
  refused (:func:`check_output`), whatever ``overwrite`` says.
- Replacement is atomic (:func:`write_atomically`): the new output is written to
  a temporary sibling, swapped into place, and only then is the old one removed.
  Interrupts (SIGINT, SIGTERM) that arrive during a short write are held until
  the write is complete or cleaned up, so no temporary is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import uuid

from dasketch.store_checks import is_local_path, local_path

# The ``format`` attribute of each kind of output dasketch writes.
SKETCH_FORMAT = "dasketch.Sketch"
CSR_FORMAT = "dasketch.csr"
DENSE_FORMAT = "dasketch.dense"
OUTPUT_KINDS = {
    SKETCH_FORMAT: "a saved sketch",
    CSR_FORMAT: "a sparse data store written by dasketch",
    DENSE_FORMAT: "a data store written by dasketch",
}
TEMPORARY_SUFFIX = ".tmp"


def _npz_format(path):
    import numpy as np

    with np.load(path, allow_pickle=False) as archive:
        if "metadata" not in getattr(archive, "files", ()):
            return None
        return json.loads(str(archive["metadata"])).get("format")


def _zarr_format(path):
    import zarr

    return zarr.open(path, mode="r").attrs.get("format")


def dasketch_output_kind(path):
    """What dasketch wrote at the local ``path``, in words, or None.

    A sketch is recognised by the ``format`` entry of its metadata (the JSON
    member of a ``.npz`` file, the attributes of a zarr group), a data store by
    the ``format`` attribute ``make-data`` gives it. Only metadata is read.

    Examples
    --------
    >>> import os, tempfile, numpy as np, dasketch
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, "s.npz")
    >>> dasketch.save_sketch(dasketch.sketch(np.eye(4), 2), path)
    >>> dasketch_output_kind(path), dasketch_output_kind(folder)
    ('a saved sketch', None)
    """
    path = local_path(os.fspath(path))
    reader = _zarr_format if os.path.isdir(path) else _npz_format
    try:
        found = reader(path)
    except Exception:  # noqa: BLE001 - unreadable means "not ours"
        return None
    return OUTPUT_KINDS.get(found) if isinstance(found, str) else None


def _overlaps(a, b):
    """Whether ``a`` and ``b`` are the same path or one lies inside the other."""
    a, b = os.path.realpath(a), os.path.realpath(b)
    return a == b or a.startswith(b.rstrip(os.sep) + os.sep) \
        or b.startswith(a.rstrip(os.sep) + os.sep)


def check_output(path, overwrite, *, inputs=(), name="path", flag="overwrite=True"):
    """Refuse an output that would lose data; nothing is written here.

    Parameters
    ----------
    path : str or os.PathLike
        The output. Remote (fsspec) outputs are not checked here.
    overwrite : bool
        Whether an existing output that dasketch wrote may be replaced.
    inputs : iterable of str or os.PathLike
        Local inputs of the same job: an output that is one of them, holds one
        or lies inside one is refused.
    name, flag : str
        The argument and the option to name in messages (``"--out"``,
        ``"--overwrite"`` on the command line).

    Raises
    ------
    ValueError
        If the output overlaps an input.
    FileExistsError
        If the output exists and ``overwrite`` is false, or it exists and is
        not something dasketch wrote.
    """
    if not is_local_path(path):
        return
    target = os.path.abspath(local_path(os.fspath(path)))
    for source in inputs:
        if source is not None and is_local_path(source) and _overlaps(
                target, local_path(os.fspath(source))):
            raise ValueError(f"{name}: {os.fspath(path)!r} is, holds or lies inside the "
                             f"input {os.fspath(source)!r} of this job; write the output "
                             "elsewhere")
    if not os.path.lexists(target):
        return
    if not overwrite:
        raise FileExistsError(f"{name}: {os.fspath(path)!r} exists; pass {flag} to "
                              "replace it")
    if dasketch_output_kind(target) is None:
        raise FileExistsError(
            f"{name}: {os.fspath(path)!r} exists and is not a sketch or data store that "
            f"dasketch wrote; {flag} replaces only those. Remove it yourself or choose "
            "another path")


def check_disk_space(path, n_bytes, *, name="path"):
    """Refuse to write ``n_bytes`` at the local ``path`` when the filesystem that
    would hold it has less free space (``OSError`` naming both sizes), before
    anything is written. Remote outputs are not checked."""
    if not is_local_path(path):
        return
    parent = os.path.dirname(os.path.abspath(local_path(os.fspath(path))))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    free = shutil.disk_usage(parent).free
    if n_bytes > free:
        raise OSError(f"{name}: {os.fspath(path)!r} would take about {n_bytes / 2 ** 30:,.1f} "
                      f"GiB, more than the {free / 2 ** 30:,.1f} GiB free on its filesystem; "
                      "write fewer rows or features, or elsewhere")


class _HeldSignals:
    """SIGINT and SIGTERM held while a ``with`` block runs in the main thread,
    then delivered as :class:`KeyboardInterrupt` once it has ended."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __enter__(self):
        self.received, self.previous = [], {}
        if threading.current_thread() is not threading.main_thread():
            return self
        for number in self.SIGNALS:
            self.previous[number] = signal.signal(
                number, lambda signum, frame: self.received.append(signum))
        return self

    def __exit__(self, *exc):
        for number, handler in self.previous.items():
            signal.signal(number, handler)
        if self.received and exc[0] is None:
            raise KeyboardInterrupt(f"signal {self.received[0]}")
        return False


def held_signals():
    """A context in which SIGINT and SIGTERM wait until it ends (main thread
    only; elsewhere it does nothing): for short writes whose background I/O
    threads must finish before their temporary files can be removed."""
    return _HeldSignals()


def write_atomically(write, path, overwrite, *, inputs=(), name="path",
                     flag="overwrite=True", interruptible=False):
    """Write an output by ``write(temporary_path)``, then move it into place.

    :func:`check_output` runs first and again just before the swap (the target
    may have appeared meanwhile). A failure or an interrupt leaves nothing at
    ``path`` that could be mistaken for a complete output, and no temporary.
    Remote (fsspec) targets are written in place.

    Parameters
    ----------
    write : callable
        Called with the temporary path; writes the whole output there.
    path : str or os.PathLike
    overwrite : bool
    inputs, name, flag
        See :func:`check_output`.
    interruptible : bool
        False (default): the write runs with SIGINT and SIGTERM held
        (:func:`held_signals`), for short writes. True for long writes that
        stop their own I/O threads when interrupted.
    """
    check_output(path, overwrite, inputs=inputs, name=name, flag=flag)
    if not is_local_path(path):
        write(os.fspath(path))
        return
    target = os.path.abspath(local_path(os.fspath(path)))
    parent = os.path.dirname(target)
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex}"
                               f"{TEMPORARY_SUFFIX}")
    held = contextlib.nullcontext(None) if interruptible else held_signals()
    with held as holding:
        try:
            write(tmp)
            with held_signals():
                if holding is not None and holding.received:
                    raise KeyboardInterrupt(f"signal {holding.received[0]}")
                check_output(path, overwrite, name=name, flag=flag)
                if os.path.lexists(target):
                    old = tmp + ".old"
                    os.replace(target, old)
                    os.replace(tmp, target)
                    remove_path(old)
                else:
                    os.replace(tmp, target)
        finally:
            with held_signals():
                remove_path(tmp)


def remove_path(path):
    """Remove a file or directory tree if it exists."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.lexists(path):
        os.remove(path)
