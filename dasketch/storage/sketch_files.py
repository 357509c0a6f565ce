"""Reading saved sketches: every way a file can fail to be one becomes a
``ValueError`` saying which (another program's file, a data store, a truncated
or corrupted archive, missing, mistyped or inconsistent metadata, a format
version this dasketch does not read).

Format version 2 stores ``checksum``, the SHA-256 of the canonical metadata JSON
and of the bytes of ``B`` and ``mean`` (:func:`payload_checksum`); version 3 adds
``rounding``, the bound on the sketch's float64 rounding error; version 4 adds
``scale_exponent``, the power of two the sketched rows were divided by. Version 2
files are still read, with every other check, and version 1 files (no checksum)
only when the caller trusts them (``trust_unchecked``);
their rounding is bounded by :func:`legacy_rounding`. Files before version 4 have
``scale_exponent`` 0. Sizes are checked before
anything is allocated: an ``.npz`` member's array header against the metadata
(``B`` at most ``(sketch_size - 1) x n_features``) and against the bytes the member
really holds; a zarr array's shape and chunk shape likewise. Never unpickles.
"""

from __future__ import annotations

import hashlib
import json
import math
import os

import numpy as np

from dasketch.kernels.frequent_directions import Sketch
from dasketch.kernels.shrink import shrink_rounding
from dasketch.kernels.sketch_checks import check_sketch_mass
from dasketch.storage.store_checks import first_line

SKETCH_FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)
SKETCH_ARRAYS = ("B", "mean")
# The metadata is a few hundred characters; anything far larger is not ours.
MAX_METADATA_CHARS = 2 ** 16
# An array may declare at most this many times the bytes its member holds
# (save_sketch stores members uncompressed: a ratio of 1).
MAX_EXPANSION = 10

_REQUIRED_METADATA = {"method": str, "sketch_size": int, "alpha0": float, "shrinkage": float,
                      "n_rows": int, "n_features": int, "frobenius_sq": float,
                      "centered": bool}


class _NotASketch(ValueError):
    """What was read is not a sketch; the message says why."""


# Integers in metadata are int64, as NumPy and the format's writers hold them.
_INT64_LIMIT = 2 ** 63


def _is_kind(value, kind):
    """JSON metadata type check: bools are not numbers, integers fit int64, floats
    are finite (an integer beyond float64's range is not one). JSON numbers have
    no size limit: every conversion that could raise is refused here."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        if isinstance(value, int):
            return abs(value) < _INT64_LIMIT
        return isinstance(value, float) and math.isfinite(value)
    if kind is int:
        return isinstance(value, int) and abs(value) < _INT64_LIMIT
    return isinstance(value, kind)


def payload_checksum(meta, arrays):
    """``"sha256:<hex>"`` of the metadata (without ``checksum``, keys sorted) and of
    the little-endian float64 bytes of each array of :data:`SKETCH_ARRAYS` present."""
    digest = hashlib.sha256()
    canonical = {key: value for key, value in meta.items() if key != "checksum"}
    digest.update(json.dumps(canonical, sort_keys=True).encode())
    for name in SKETCH_ARRAYS:
        if arrays.get(name) is not None:
            values = np.ascontiguousarray(arrays[name], dtype="<f8")
            digest.update(f"{name}{values.shape}".encode())
            digest.update(values.tobytes())
    return "sha256:" + digest.hexdigest()


def _array_limits(meta, name):
    """Largest shape the metadata allows for array ``name`` (None: no valid metadata)."""
    l, d = meta.get("sketch_size"), meta.get("n_features")
    if not (_is_kind(l, int) and _is_kind(d, int) and l >= 2 and d >= 0):
        raise _NotASketch("metadata 'sketch_size' or 'n_features' is missing or not a "
                          "positive integer")
    return (l - 1, d) if name == "B" else (d,)


def _check_declared(name, shape, dtype, meta):
    """Refuse a declared array the metadata does not allow, before allocating it."""
    limit = _array_limits(meta, name)
    if dtype.kind != "f" or len(shape) != len(limit) or any(
            n > m for n, m in zip(shape, limit)):
        raise _NotASketch(f"array {name!r} declares {dtype} of shape {tuple(shape)}; the "
                          f"metadata allows float of at most {limit}")


def _npz_header(zf, member):
    with zf.open(member) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            return np.lib.format.read_array_header_1_0(fh)
        return np.lib.format.read_array_header_2_0(fh)


def _npz_member(zf, member, file_size):
    """Header of ``member`` (shape, dtype) once its sizes are plausible."""
    info = zf.getinfo(member)
    shape, _, dtype = _npz_header(zf, member)
    declared = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if info.compress_size > file_size or declared > MAX_EXPANSION * info.compress_size + 4096:
        raise _NotASketch(f"member {member!r} declares {declared:,} bytes in "
                          f"{info.compress_size:,} stored bytes (truncated or corrupted)")
    return shape, dtype


def read_npz_sketch(path):
    """``(meta, arrays, problem)`` of a ``.npz`` sketch, arrays read only after their
    declared sizes passed the checks of the module docstring."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            names = set(zf.namelist())
            if "metadata.npy" not in names:
                return None, {}, "a NumPy archive without dasketch metadata"
            file_size = os.path.getsize(path)
            shape, dtype = _npz_member(zf, "metadata.npy", file_size)
            if dtype.kind != "U" or shape != () or dtype.itemsize > 4 * MAX_METADATA_CHARS:
                return None, {}, "its metadata is not a short JSON string"
            with zf.open("metadata.npy") as fh:
                meta = json.loads(str(np.lib.format.read_array(fh, allow_pickle=False)))
            if not _metadata_ok(meta):  # sketch_from_metadata says what is wrong
                return meta, {}, None
            arrays = {}
            for name in SKETCH_ARRAYS:
                if f"{name}.npy" in names:
                    shape, dtype = _npz_member(zf, f"{name}.npy", file_size)
                    _check_declared(name, shape, dtype, meta)
                    with zf.open(f"{name}.npy") as fh:
                        arrays[name] = np.lib.format.read_array(fh, allow_pickle=False)
    except _NotASketch as exc:
        return None, {}, str(exc)
    except zipfile.BadZipFile as exc:
        with open(path, "rb") as fh:
            if fh.read(4) == b"PK\x03\x04":  # the start of a zip archive
                return None, {}, f"a truncated or corrupted .npz archive ({first_line(exc)})"
        return None, {}, "not a NumPy .npz archive"
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib, numpy: any damage
        return None, {}, f"a truncated or corrupted .npz archive ({first_line(exc)})"
    return meta, arrays, None


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# The longest frame header: magic, descriptor, window, dictionary id, size field.
ZSTD_HEADER_BYTES = 4 + 1 + 1 + 4 + 8


def zstd_content_size(frame):
    """The decompressed size a Zstandard frame declares in its header (RFC 8878,
    section 3.1.1.1), or None when the frame is not Zstandard or declares none.
    Written here because neither numcodecs nor zarr reads a frame's header
    without decompressing it."""
    if len(frame) < 6 or frame[:4] != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    single_segment, dictionary = (descriptor >> 5) & 1, descriptor & 3
    field = (1 if single_segment else 0, 2, 4, 8)[descriptor >> 6]
    if field == 0:
        return None
    start = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dictionary]
    if len(frame) < start + field:
        return None
    return int.from_bytes(frame[start:start + field], "little") + (256 if field == 2 else 0)


def _check_stored(name, array):
    """Refuse a zarr array of a sketch that would decode to far more than its
    stored bytes, before any chunk is decoded: its declared size against the
    bytes its store holds (:data:`MAX_EXPANSION`), and each compressed chunk's
    declared size against the chunk shape. save_sketch writes chunks
    uncompressed or with Zstandard; other codecs are not a sketch's."""
    from zarr.abc.store import RangeByteRequest
    from zarr.codecs import ZstdCodec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    from dasketch.storage.fingerprints import chunk_keys

    declared = int(np.prod(array.shape, dtype=np.float64)) * array.dtype.itemsize
    stored = array.nbytes_stored()
    if declared > MAX_EXPANSION * stored + 4096:
        raise _NotASketch(f"array {name!r} declares {declared:,} bytes in {stored:,} "
                          "stored bytes (truncated or forged)")
    if not array.compressors:
        return
    if any(not isinstance(codec, ZstdCodec) for codec in array.compressors) or \
            array.filters or len(array.compressors) > 1:
        raise _NotASketch(f"array {name!r} is encoded with {array.compressors}, which "
                          "save_sketch never writes")
    chunk_bytes = int(np.prod(array.chunks, dtype=np.float64)) * array.dtype.itemsize
    store, prefix = array.store_path.store, array.store_path.path
    for key in chunk_keys(array):  # each frame's header alone, not the chunk
        raw = sync(store.get(f"{prefix}/{key}" if prefix else key,
                             prototype=default_buffer_prototype(),
                             byte_range=RangeByteRequest(0, ZSTD_HEADER_BYTES)))
        size = None if raw is None else zstd_content_size(raw.to_bytes())
        if raw is not None and (size is None or size > chunk_bytes):
            raise _NotASketch(f"chunk {key!r} of array {name!r} declares "
                              f"{'no' if size is None else format(size, ',')} decoded "
                              f"bytes; its shape holds {chunk_bytes:,}")


def _refuse_special_files(path):
    """Refuse a local zarr sketch holding anything but regular files (a FIFO or
    a link to a device), before zarr opens any of them: one walk, as a store's
    fingerprint lists a local store."""
    from dasketch.storage.fingerprints import local_file_path, local_signatures

    directory = local_file_path(path)
    if directory is not None and os.path.isdir(directory):
        local_signatures(directory)


def read_zarr_sketch(path):
    """``(meta, arrays, problem)`` of a zarr sketch; each array's shape and chunk
    shape are checked against the metadata, and its stored bytes against its
    declared size (:func:`_check_stored`), before it is read. A local sketch
    holding anything but regular files is refused unopened."""
    import zarr

    try:
        _refuse_special_files(os.fspath(path))
        node = zarr.open(os.fspath(path), mode="r")
    except Exception as exc:  # noqa: BLE001 - every failure is "not a sketch"
        return None, {}, f"not a zarr store ({first_line(exc)})"
    if isinstance(node, zarr.Array):
        return None, {}, ("a zarr array (a data store?), not a saved sketch; "
                          "`dasketch sketch` makes sketches from data stores")
    meta = dict(node.attrs)
    if not _metadata_ok(meta):  # sketch_from_metadata says what is wrong
        return meta, {}, None
    try:
        arrays = {}
        for name in SKETCH_ARRAYS:
            if name in node:
                array = node[name]
                _check_declared(name, array.shape, array.dtype, meta)
                _check_declared(name, array.shards or array.chunks, array.dtype, meta)
                _check_stored(name, array)
                arrays[name] = array[...]
    except _NotASketch as exc:
        return None, {}, str(exc)
    except Exception as exc:  # noqa: BLE001
        return None, {}, f"a damaged sketch ({first_line(exc)})"
    return meta, arrays, None


def _check_metadata(meta, bad, where, name="path"):
    if not isinstance(meta, dict) or meta.get("format") != "dasketch.Sketch":
        raise bad("no dasketch metadata (written by another program?)")
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        raise ValueError(f"{name}: {where!r} has sketch format version {version!r}, which "
                         f"this dasketch does not read (it reads versions "
                         f"{', '.join(map(str, READABLE_VERSIONS))}); re-create it with "
                         "this version")
    for key, kind in _REQUIRED_METADATA.items():
        if key not in meta or not _is_kind(meta[key], kind):
            raise bad(f"metadata {key!r} is missing or not a {kind.__name__}")
    bound = meta.get("shrinkage_bound")
    if bound is not None and not _is_kind(bound, float):
        raise bad("metadata 'shrinkage_bound' is not a number")
    if version >= 3 and not _is_kind(meta.get("rounding"), float):
        raise bad("metadata 'rounding' is missing or not a number")
    if version < 3 and "rounding" in meta:
        raise bad(f"metadata 'rounding' in a version-{version} sketch, which has none")
    if version >= 4 and not _is_kind(meta.get("scale_exponent"), int):
        raise bad("metadata 'scale_exponent' is missing or not an integer")
    if version < 4 and "scale_exponent" in meta:
        raise bad(f"metadata 'scale_exponent' in a version-{version} sketch, which has none")
    if not _is_kind(meta.get("failure_probability", 0.0), float):
        raise bad("metadata 'failure_probability' is not a number")


def legacy_rounding(meta):
    """Rounding bound of a sketch saved without one (format versions 1 and 2).

    Every shrink's stack holds at most ``||A||_F^2`` of mass, and a sketch of ``n``
    rows went through at most ``2 n`` shrinks (one per absorbed chunk, one per
    merge), each of at most ``n + l`` rows: ``2 n`` times
    :func:`~dasketch.kernels.shrink.shrink_rounding` of such a stack. Far looser
    than the bound a version-3 file records; re-saving does not tighten it.
    """
    n, l, d = meta["n_rows"], meta["sketch_size"], meta["n_features"]
    return 2.0 * n * shrink_rounding(n + l, d, meta["frobenius_sq"])


def _metadata_ok(meta):
    try:
        _check_metadata(meta, ValueError, "")
    except ValueError:
        return False
    return True


def sketch_from_metadata(meta, arrays, where, name="path", *, trust_unchecked=False):
    """Validate what was read and build the Sketch; ``ValueError`` naming what
    is wrong otherwise. Every invariant of the kernel's
    :func:`~dasketch.kernels.sketch_checks.check_sketch_fields` and
    :func:`~dasketch.kernels.sketch_checks.check_sketch_mass` applies, and a
    payload from version 2 on must match its checksum. A version-1 payload has
    none, so nothing tells it from a forged or damaged one (or from a newer file
    relabelled as version 1): it is refused unless ``trust_unchecked``. Messages
    name the argument ``name`` (of the path ``where``)."""
    def bad(what):
        return ValueError(f"{name}: {where!r} is not a valid dasketch sketch: {what}")

    _check_metadata(meta, bad, where, name)
    if meta["format_version"] == 1 and not trust_unchecked:
        raise ValueError(f"{name}: {where!r} is a version-1 sketch, which carries no "
                         "checksum: damage or forgery cannot be told from its contents. "
                         "If you trust where it came from, load it with "
                         "load_sketch(path, trust_unchecked=True) and save it again")
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
    if meta["format_version"] >= 2 and meta.get("checksum") != payload_checksum(
            meta, {"B": B, "mean": mean if meta["centered"] else None}):
        raise ValueError(f"{name}: {where!r} is corrupted: its contents do not match the "
                         "checksum stored in its metadata")
    try:
        sketch = Sketch(B=np.asarray(B, dtype=np.float64), shrinkage=meta["shrinkage"],
                        n_rows=meta["n_rows"], sketch_size=meta["sketch_size"],
                        method=meta["method"], alpha0=meta["alpha0"],
                        mean=np.asarray(mean, dtype=np.float64) if meta["centered"] else None,
                        frobenius_sq=meta["frobenius_sq"],
                        shrinkage_bound=meta.get("shrinkage_bound"),
                        failure_probability=meta.get("failure_probability", 0.0),
                        rounding=(meta["rounding"] if meta["format_version"] >= 3
                                  else legacy_rounding(meta)),
                        scale_exponent=meta.get("scale_exponent", 0))
        check_sketch_mass(sketch)
    except (ValueError, TypeError) as exc:
        raise bad(first_line(exc)) from None
    return sketch
