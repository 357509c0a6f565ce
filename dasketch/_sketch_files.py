"""Reading saved sketches: every way a file can fail to be one becomes a
``ValueError`` saying which (another program's file, a data store, a truncated
or corrupted archive, missing or mistyped metadata, a format version this
dasketch does not read)."""

from __future__ import annotations

import json
import os

import numpy as np

from dasketch.kernels.frequent_directions import Sketch
from dasketch.store_checks import first_line

SKETCH_FORMAT_VERSION = 1
SKETCH_ARRAYS = ("B", "mean")

_REQUIRED_METADATA = {"method": str, "sketch_size": int, "alpha0": float, "shrinkage": float,
                      "n_rows": int, "n_features": int, "frobenius_sq": float,
                      "centered": bool}


def _is_kind(value, kind):
    """JSON metadata type check: bools are not numbers, floats are finite."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and bool(np.isfinite(value))
    return isinstance(value, kind)


def read_npz_sketch(path):
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as archive:
            if not isinstance(archive, np.lib.npyio.NpzFile):
                return None, {}, "a .npy array, not a saved sketch"
            if "metadata" not in archive:
                return None, {}, "a NumPy archive without dasketch metadata"
            meta = json.loads(str(archive["metadata"]))
            arrays = {name: archive[name] for name in SKETCH_ARRAYS if name in archive}
    except ValueError as exc:
        if "allow_pickle" in str(exc):  # NumPy's guess for bytes it cannot parse
            return None, {}, "not a NumPy .npz archive"
        return None, {}, f"unreadable ({first_line(exc)})"
    except (zipfile.BadZipFile, EOFError, OSError, KeyError) as exc:
        return None, {}, f"a truncated or corrupted .npz archive ({first_line(exc)})"
    return meta, arrays, None


def read_zarr_sketch(path):
    import zarr

    try:
        node = zarr.open(os.fspath(path), mode="r")
    except Exception as exc:  # noqa: BLE001 - every failure is "not a sketch"
        return None, {}, f"not a zarr store ({first_line(exc)})"
    if isinstance(node, zarr.Array):
        return None, {}, ("a zarr array (a data store?), not a saved sketch; "
                          "`dasketch sketch` makes sketches from data stores")
    meta = dict(node.attrs)
    try:
        arrays = {name: node[name][...] for name in SKETCH_ARRAYS if name in node}
    except Exception as exc:  # noqa: BLE001
        return None, {}, f"a damaged sketch ({first_line(exc)})"
    return meta, arrays, None


def sketch_from_metadata(meta, arrays, where):
    """Validate what was read and build the Sketch; ``ValueError`` naming what
    is wrong otherwise."""
    def bad(what):
        return ValueError(f"path: {where!r} is not a valid dasketch sketch: {what}")

    if not isinstance(meta, dict) or meta.get("format") != "dasketch.Sketch":
        raise bad("no dasketch metadata (written by another program?)")
    if meta.get("format_version") != SKETCH_FORMAT_VERSION:
        raise ValueError(f"path: {where!r} has sketch format version "
                         f"{meta.get('format_version')!r}, which this dasketch does not "
                         f"read (it reads version {SKETCH_FORMAT_VERSION}); "
                         "re-create it with this version")
    for key, kind in _REQUIRED_METADATA.items():
        value = meta.get(key)
        ok = _is_kind(value, kind)
        if key not in meta or not ok:
            raise bad(f"metadata {key!r} is missing or not a {kind.__name__}")
    bound = meta.get("shrinkage_bound")
    if bound is not None and not _is_kind(bound, float):
        raise bad("metadata 'shrinkage_bound' is not a number")
    if not _is_kind(meta.get("failure_probability", 0.0), float):
        raise bad("metadata 'failure_probability' is not a number")
    B = arrays.get("B")
    n_features = meta["n_features"]
    if (B is None or B.ndim != 2 or B.shape[1] != n_features
            or not np.issubdtype(B.dtype, np.floating) or not np.isfinite(B).all()):
        raise bad(f"array 'B' is missing or not a finite float matrix with "
                  f"{n_features} columns")
    mean = arrays.get("mean")
    if meta["centered"] and (mean is None or mean.shape != (n_features,)):
        raise bad(f"array 'mean' of a centred sketch is missing or not of length "
                  f"{n_features}")
    try:
        return Sketch(B=np.asarray(B, dtype=np.float64), shrinkage=meta["shrinkage"],
                      n_rows=meta["n_rows"], sketch_size=meta["sketch_size"],
                      method=meta["method"], alpha0=meta["alpha0"],
                      mean=mean if meta["centered"] else None,
                      frobenius_sq=meta["frobenius_sq"],
                      shrinkage_bound=meta.get("shrinkage_bound"),
                      failure_probability=meta.get("failure_probability", 0.0))
    except (ValueError, TypeError) as exc:
        raise bad(first_line(exc)) from None
