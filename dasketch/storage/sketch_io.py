"""Save and load sketches: a ``.npz`` archive or a zarr group, checked on both
sides (:mod:`dasketch.storage.sketch_files` reads and verifies the format)."""

from __future__ import annotations

import json
import os

import numpy as np

from dasketch.kernels.frequent_directions import Sketch
from dasketch.storage.outputs import write_atomically
from dasketch.storage.sketch_files import (
    SKETCH_FORMAT_VERSION,
    payload_checksum,
    read_npz_sketch,
    read_zarr_sketch,
    sketch_from_metadata,
)
from dasketch.storage.store_checks import first_line, is_local_path, local_path


def _is_path(obj):
    return isinstance(obj, (str, os.PathLike))


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
        "scale_exponent": int(sketch.scale_exponent),
    }
    meta["checksum"] = payload_checksum(meta, {"B": sketch.B, "mean": sketch.mean})
    return meta


def save_sketch(sketch, path, *, overwrite=False):
    """Save a :class:`~dasketch.Sketch` to a ``.npz`` file or a zarr directory.

    The format is chosen by the suffix: ``.npz`` writes a NumPy archive, anything
    else a zarr group with arrays ``B`` (and ``mean`` for centred sketches) and
    the metadata in its attributes. Both carry a format version (3) and a SHA-256
    checksum of the payload, verified by :func:`load_sketch`. The file is
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
                # Every chunk stored, zeros too: a reader checks the declared size
                # against the stored bytes.
                group.create_array(name, data=np.ascontiguousarray(values),
                                   config={"write_empty_chunks": True})
    write_atomically(write, path, overwrite)


def load_sketch(path, *, trust_unchecked=False, name="path"):
    """Load a sketch written by :func:`save_sketch` (``.npz`` or zarr).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npz`` file or a zarr directory (a local path or an fsspec URL).
    trust_unchecked : bool, default False
        Load a format-version-1 file, which carries no checksum (its other
        invariants are still checked). Without it such a file is refused:
        damage, forgery or a newer file relabelled as version 1 could not be
        told from an intact one.
    name : str, default "path"
        What error messages call ``path`` (the command line names its argument).

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
        which. Format versions 2 to 4 are read, and version 1 (no checksum)
        with ``trust_unchecked``. Array sizes are checked against the metadata
        and the stored bytes before anything is allocated.

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
        raise FileNotFoundError(f"{name}: no sketch at {where!r}")
    if str(path).endswith(".npz") or (is_local_path(path) and os.path.isfile(local_path(path))):
        meta, arrays, problem = read_npz_sketch(local_path(path))
    else:
        meta, arrays, problem = read_zarr_sketch(path)
    if problem is not None:
        raise ValueError(f"{name}: {where!r} is not a dasketch sketch: {problem}")
    return sketch_from_metadata(meta, arrays, where, name, trust_unchecked=trust_unchecked)
