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
import posixpath
import shutil
import signal
import threading
import uuid

from dasketch.storage.fingerprints import local_file_path

# An output in any form of local_file_path (plain, file://, local://) is checked
# and replaced as the plain path it names.

# The ``format`` attribute of each kind of output dasketch writes.
SKETCH_FORMAT = "dasketch.Sketch"
CSR_FORMAT = "dasketch.csr"
DENSE_FORMAT = "dasketch.dense"
PLOT_FORMAT = "dasketch.plot"
OUTPUT_KINDS = {
    SKETCH_FORMAT: "a saved sketch",
    CSR_FORMAT: "a sparse data store written by dasketch",
    DENSE_FORMAT: "a data store written by dasketch",
    PLOT_FORMAT: "a plot written by dasketch",
}
# The arrays inside each kind of zarr group dasketch writes; nothing else in the
# group is its own.
GROUP_MEMBERS = {
    SKETCH_FORMAT: ("B", "mean"),
    CSR_FORMAT: ("indptr", "indices", "data"),
}
SHOWN_ENTRIES = 3
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


def _png_format(path):
    from PIL import Image

    with Image.open(path) as image:
        return image.text.get("format")


def _array_entries(array, prefix=""):
    """The files a zarr array may hold: its metadata and every chunk (or shard) key."""
    from dasketch.storage.fingerprints import chunk_keys

    return {prefix + "zarr.json"} | {prefix + key for key in chunk_keys(array)}


def _own_entries(path):
    """The relative paths of the files dasketch writes in the zarr output at
    ``path`` (its metadata and the chunk keys of the arrays its format holds)."""
    import zarr

    node = zarr.open(path, mode="r")
    if isinstance(node, zarr.Array):
        return _array_entries(node)
    entries = {"zarr.json"}
    for member in GROUP_MEMBERS.get(node.attrs.get("format"), ()):
        array = node.get(member)
        if isinstance(array, zarr.Array):
            entries |= _array_entries(array, member + "/")
    return entries


def foreign_entries(path):
    """Entries inside the zarr output directory ``path`` that dasketch did not
    write: files other than the metadata and the chunks of the arrays its format
    holds, and folders that lead to none of those (symbolic links and other
    non-regular files count as foreign). Sorted relative paths."""
    own, folders = _own_entries(path), set()
    for entry in own:  # every folder on the way to an own file
        folder = posixpath.dirname(entry)
        while folder and folder not in folders:
            folders.add(folder)
            folder = posixpath.dirname(folder)
    foreign = []
    for root, dirs, files in os.walk(path):
        relative = os.path.relpath(root, path).replace(os.sep, "/")
        relative = "" if relative == "." else relative + "/"
        for folder in list(dirs):
            entry = relative + folder
            if os.path.islink(os.path.join(root, folder)) or entry not in folders:
                foreign.append(entry + "/")
                dirs.remove(folder)
        for file in files:
            full = os.path.join(root, file)
            if (relative + file) not in own or not os.path.isfile(full) \
                    or os.path.islink(full):
                foreign.append(relative + file)
    return sorted(foreign)


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
    path = local_file_path(path) or os.fspath(path)
    reader = _zarr_format if os.path.isdir(path) else (
        _png_format if path.lower().endswith(".png") else _npz_format)
    try:
        found = reader(path)
    except Exception:  # noqa: BLE001 - unreadable means "not ours"
        return None
    return OUTPUT_KINDS.get(found) if isinstance(found, str) else None


def _overlaps(a, b):
    """Whether ``a`` and ``b`` are the same path or one lies inside the other:
    local paths (in any form of :func:`local_file_path`) once resolved (links,
    ``..``), other URLs as written."""
    local_a, local_b = local_file_path(a), local_file_path(b)
    if (local_a is None) != (local_b is None):
        return False
    if local_a is None:
        a, b, sep = os.fspath(a).rstrip("/"), os.fspath(b).rstrip("/"), "/"
    else:
        a, b, sep = os.path.realpath(local_a), os.path.realpath(local_b), os.sep
    return a == b or a.startswith(b.rstrip(sep) + sep) or b.startswith(a.rstrip(sep) + sep)


def check_output(path, overwrite, *, inputs=(), name="path", flag="overwrite=True"):
    """Refuse an output that would lose data; nothing is written here.

    Parameters
    ----------
    path : str or os.PathLike
        The output: a local path in any form (plain, ``file://``,
        ``local://``; resolved through links and ``..`` before any
        decision), or a remote URL, which is only compared with the inputs.
    overwrite : bool
        Whether an existing output that dasketch wrote may be replaced.
    inputs : iterable of str or os.PathLike
        Inputs of the same job: an output that is one of them, holds one or
        lies inside one is refused.
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
    local = local_file_path(path)
    target = os.fspath(path) if local is None else os.path.abspath(local)
    for source in inputs:
        if source is not None and _overlaps(target, source):
            raise ValueError(f"{name}: {os.fspath(path)!r} is, holds or lies inside the "
                             f"input {os.fspath(source)!r} of this job; write the output "
                             "elsewhere")
    if local is None or not os.path.lexists(target):
        return
    if not overwrite:
        raise FileExistsError(f"{name}: {os.fspath(path)!r} exists; pass {flag} to "
                              "replace it")
    kind = dasketch_output_kind(target)
    if kind is None:
        raise FileExistsError(
            f"{name}: {os.fspath(path)!r} exists and is not a sketch or data store (or "
            f"demo plot) that dasketch wrote; {flag} replaces only those. Remove it "
            "yourself or choose another path")
    foreign = foreign_entries(target) if os.path.isdir(target) else []
    if foreign:
        more = f" and {len(foreign) - SHOWN_ENTRIES} more" if len(foreign) > SHOWN_ENTRIES \
            else ""
        raise FileExistsError(
            f"{name}: {os.fspath(path)!r} is {kind} but also holds what dasketch did not "
            f"write ({', '.join(foreign[:SHOWN_ENTRIES])}{more}); {flag} replaces only "
            "dasketch's own files. Move those out, or choose another path")


def check_disk_space(path, n_bytes, *, name="path"):
    """Refuse to write ``n_bytes`` at the local ``path`` when the filesystem that
    would hold it has less free space (``OSError`` naming both sizes), before
    anything is written. Remote outputs are not checked."""
    if local_file_path(path) is None:
        return
    parent = os.path.dirname(os.path.abspath(local_file_path(path)))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    free = shutil.disk_usage(parent).free
    if n_bytes > free:
        raise OSError(f"{name}: {os.fspath(path)!r} would take about {n_bytes / 2 ** 30:,.1f} "
                      f"GiB, more than the {free / 2 ** 30:,.1f} GiB free on its filesystem; "
                      "write fewer rows or features, or elsewhere")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every clean-up runs; the CLI exits
    with 143 for it (130 for a plain :class:`KeyboardInterrupt`)."""


def signal_interrupt(signum):
    """The exception that delivers signal ``signum``: :class:`Terminated` for
    SIGTERM, :class:`KeyboardInterrupt` for any other (SIGINT)."""
    kind = Terminated if signum == signal.SIGTERM else KeyboardInterrupt
    return kind(f"signal {signum}")


class _HeldSignals:
    """SIGINT and SIGTERM held while a ``with`` block runs in the main thread,
    then delivered as :class:`KeyboardInterrupt` (:class:`Terminated` for
    SIGTERM) once it has ended."""

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
            raise signal_interrupt(self.received[0])
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
    if local_file_path(path) is None:
        write(os.fspath(path))
        return
    target = os.path.abspath(local_file_path(path))
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
                    raise signal_interrupt(holding.received[0])
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
