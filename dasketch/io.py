"""Open inputs, save and load sketches.

Inputs are opened lazily: a zarr path or fsspec URL becomes a Dask array read
block by block; nothing is loaded on the client.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid

import numpy as np

from dasketch.kernels.frequent_directions import Sketch

SKETCH_FORMAT_VERSION = 1
_SKETCH_ARRAYS = ("B", "mean")


def _is_path(obj):
    return isinstance(obj, (str, os.PathLike))


def is_local_path(path):
    return "://" not in str(path) or str(path).startswith("file://")


def local_path(path):
    path = str(path)
    return path[len("file://"):] if path.startswith("file://") else path


def open_zarr_array(path, *, component=None, storage_options=None, chunks=None):
    """Open a zarr array (local path or fsspec URL) as a Dask array.

    Parameters
    ----------
    path : str or os.PathLike
        Zarr store: a local directory or an fsspec URL such as ``s3://bucket/x.zarr``.
    component : str, optional
        Path of the array inside the store when the store is a group.
    storage_options : dict, optional
        Passed to fsspec for remote stores.
    chunks : tuple, optional
        Dask chunks to read with; defaults to the store's chunks.

    Raises
    ------
    FileNotFoundError
        If a local store does not exist.
    ValueError
        If the store holds no array at ``component``.
    """
    import dask.array as da
    import zarr

    if is_local_path(path) and not os.path.exists(local_path(path)):
        raise FileNotFoundError(f"X: no zarr store at {os.fspath(path)!r}")
    try:
        return da.from_zarr(os.fspath(path), component=component,
                            storage_options=storage_options, chunks=chunks)
    except (zarr.errors.ArrayNotFoundError, zarr.errors.NodeTypeValidationError,
            KeyError, FileNotFoundError) as exc:
        where = f" at component {component!r}" if component else ""
        hint = "" if component else " (pass component= for an array inside a group)"
        raise ValueError(
            f"X: no zarr array in {os.fspath(path)!r}{where}{hint}") from exc


CSR_FORMAT = "dasketch.csr"


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
    import scipy.sparse
    import zarr

    group = zarr.open_group(os.fspath(path), mode="r", path=component or "",
                            storage_options=storage_options)
    n_features = int(group.attrs["shape"][1])
    indptr = np.asarray(group["indptr"][start:stop + 1], dtype=np.int64)
    lo, hi = int(indptr[0]), int(indptr[-1])
    indices = group["indices"][lo:hi]
    data = group["data"][lo:hi]
    return scipy.sparse.csr_matrix((data, indices, indptr - lo),
                                   shape=(stop - start, n_features))


def write_atomically(write, path, overwrite):
    """Write to a temporary sibling, then move it into place.

    A failure leaves nothing at ``path`` that could be mistaken for a complete
    output. Remote (fsspec) targets are written in place.
    """
    if not is_local_path(path):
        write(os.fspath(path))
        return
    path = os.path.abspath(local_path(path))
    parent = os.path.dirname(path) or "."
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(path)
    tmp = os.path.join(parent, f".{base}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        if os.path.exists(path):
            if not overwrite:
                raise FileExistsError(f"path: {path!r} exists; pass overwrite=True")
            old = tmp + ".old"
            os.replace(path, old)
            os.replace(tmp, path)
            _remove(old)
        else:
            os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            _remove(tmp)


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def _sketch_metadata(sketch):
    return {
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
    }


def save_sketch(sketch, path, *, overwrite=False):
    """Save a :class:`~dasketch.Sketch` to a ``.npz`` file or a zarr directory.

    The format is chosen by the suffix: ``.npz`` writes a NumPy archive, anything
    else a zarr group with arrays ``B`` (and ``mean`` for centred sketches) and
    the metadata in its attributes. Both carry a format version. The file is
    written to a temporary sibling and moved into place, so an interrupted save
    never leaves a partial sketch.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False.

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

    if str(path).endswith(".npz"):
        def write(target):
            with open(target, "wb") as fh:
                np.savez(fh, metadata=np.array(json.dumps(meta)), **arrays)
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

    Raises
    ------
    FileNotFoundError
        If nothing exists at ``path``.
    ValueError
        If the file is not a dasketch sketch or has an unknown format version.

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
    if is_local_path(path) and not os.path.exists(local_path(path)):
        raise FileNotFoundError(f"path: no sketch at {os.fspath(path)!r}")
    if str(path).endswith(".npz"):
        with np.load(local_path(path), allow_pickle=False) as archive:
            if "metadata" not in archive:
                raise ValueError(f"path: {os.fspath(path)!r} is not a dasketch sketch")
            meta = json.loads(str(archive["metadata"]))
            arrays = {name: archive[name] for name in _SKETCH_ARRAYS if name in archive}
    else:
        import zarr

        group = zarr.open_group(os.fspath(path), mode="r")
        meta = dict(group.attrs)
        arrays = {name: group[name][...] for name in _SKETCH_ARRAYS if name in group}
    if meta.get("format") != "dasketch.Sketch":
        raise ValueError(f"path: {os.fspath(path)!r} is not a dasketch sketch")
    if meta.get("format_version") != SKETCH_FORMAT_VERSION:
        raise ValueError(f"path: sketch format version {meta.get('format_version')!r} is "
                         f"not supported (expected {SKETCH_FORMAT_VERSION})")
    return Sketch(
        B=np.asarray(arrays["B"], dtype=np.float64),
        shrinkage=meta["shrinkage"],
        n_rows=meta["n_rows"],
        sketch_size=meta["sketch_size"],
        method=meta["method"],
        alpha0=meta["alpha0"],
        mean=arrays.get("mean") if meta["centered"] else None,
        frobenius_sq=meta["frobenius_sq"],
        shrinkage_bound=meta.get("shrinkage_bound"),
        failure_probability=meta.get("failure_probability", 0.0),
    )

