"""Saved sketches are validated on load (DESIGN section 10): every mutant of a valid
file is refused with a ValueError or loads to the original, and none allocates
far more than its size; finite data of scale 1e150 sketches, saves and loads with
a bound that holds; data whose squares overflow float64 is refused by name."""

import dataclasses
import json
import tracemalloc
import zipfile

import numpy as np
import pytest
import zarr

import dasketch
from dasketch._sketch_files import payload_checksum
from dasketch.kernels.frequent_directions import Sketch, merge_sketches

BAD_VALUES = {  # field -> values that break an invariant of the sketch
    "sketch_size": [0, -3, 1, 10 ** 12, 2.5, "4", None, True, float("nan")],
    "shrinkage": [-5e5, 0, 1e300, -1e-300, "1", None, float("nan"), float("inf")],
    "frobenius_sq": [-1.0, 0, 1e300, None, float("nan"), "x"],
    "n_rows": [-5, 0, 1, 2.5, None, "200", float("nan")],
    "n_features": [0, -1, 5, 10 ** 9, None, 6.0],
    "alpha0": [-100, -1e-9, float("nan"), None, "0"],
    "method": ["lsq", 3, None, ""],
    "failure_probability": [5, -0.1, 1, 1.0, float("nan"), "0"],
    "shrinkage_bound": [-1.0, 0.0, "x", float("nan")],
    "centered": [1, "yes", None],
    "rounding": [-1.0, "x", None, float("nan"), float("inf")],
    "format_version": [0, 4, -1, "3", None, 3.0 + 1e-9],
    "format": ["other", None, 7],
}


def _sketch(center):
    X = np.random.default_rng(1).standard_normal((200, 6)) * [8, 5, 3, 2, 1, 1]
    return Sketch.from_rows(X, 4, alpha0=0.25, center=center)


def _same(a, b):
    return (np.array_equal(a.B, b.B) and (a.mean is None) == (b.mean is None)
            and (a.mean is None or np.array_equal(a.mean, b.mean))
            and all(getattr(a, k) == getattr(b, k) for k in (
                "shrinkage", "n_rows", "sketch_size", "method", "alpha0", "frobenius_sq",
                "shrinkage_bound", "failure_probability", "rounding")))


def _write_npz(path, meta, arrays):
    with open(path, "wb") as fh:
        np.savez(fh, metadata=np.array(json.dumps(meta)), **arrays)


def _write_zarr(path, meta, arrays):
    group = zarr.open_group(str(path), mode="w")
    group.attrs.update(meta)
    for name, values in arrays.items():
        group.create_array(name, data=values)


def _load_checked(path, size, original):
    """Load under tracemalloc: refused with ValueError or equal to ``original``;
    the peak allocation stays within 10x the file size (plus the fixed overhead of
    reading any file)."""
    tracemalloc.start()
    try:
        loaded = dasketch.load_sketch(path)
    except ValueError:
        loaded = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak <= 10 * size + 2 ** 20, (path, peak, size)
    return loaded


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
@pytest.mark.parametrize("suffix", [".npz", pytest.param(".zarr", marks=pytest.mark.slow)])
def test_every_mutated_field_is_refused(tmp_path, suffix, center):
    """Each field set to a bad value: refused when the checksum is stale (any
    change to a saved file), and refused by the sketch's invariants when the
    checksum is recomputed or absent (a version-1 file)."""
    original = _sketch(center)
    assert original.shrinkage > 0
    dasketch.save_sketch(original, tmp_path / f"s{suffix}")
    meta = dasketch.io._sketch_metadata(original)
    arrays = {"B": original.B, **({"mean": original.mean} if center else {})}
    write = _write_npz if suffix == ".npz" else _write_zarr
    for key, values in BAD_VALUES.items():
        for value in values:
            for mode in ("stale", "recomputed", "version 1"):
                bad = dict(meta, **{key: value})
                if mode == "recomputed" and key != "format_version":
                    bad["checksum"] = payload_checksum(bad, arrays)
                elif mode == "version 1" and key != "format_version":
                    bad = {k: v for k, v in dict(bad, format_version=1).items()
                           if k != "checksum" and (k != "rounding" or key == "rounding")}
                path = tmp_path / f"m{suffix}"
                write(path, bad, arrays)
                with pytest.raises(ValueError):
                    dasketch.load_sketch(path)
                    pytest.fail(f"{key}={value!r} ({mode}) loaded")
    # A version-1 file (no checksum, no rounding) that is intact still loads, with a
    # rounding bound no smaller than the one the sketch recorded.
    write(tmp_path / f"v1{suffix}", {k: v for k, v in dict(meta, format_version=1).items()
                                     if k not in ("checksum", "rounding")}, arrays)
    legacy = dasketch.load_sketch(tmp_path / f"v1{suffix}")
    assert legacy.rounding >= original.rounding > 0
    assert _same(dataclasses.replace(legacy, rounding=original.rounding), original)


def test_inconsistent_arrays_and_the_attacks_found(tmp_path):
    """B with more rows than the sketch holds, a shrinkage that hides the error,
    rows that would vanish in a merge, a 1 MB file declaring a 1 GB array."""
    s = _sketch(False)
    meta = {k: v for k, v in dasketch.io._sketch_metadata(s).items()
            if k not in ("checksum", "rounding")}
    meta["format_version"] = 1
    cases = {
        "rows": ({}, {"B": np.vstack([s.B] * 334)[:1000]}),
        "zero shrinkage": ({"shrinkage": 0.0}, {}),
        "negative shrinkage": ({"shrinkage": -5e5}, {}),
        "n_rows -5": ({"n_rows": -5}, {}),
        "n_rows 0": ({"n_rows": 0}, {}),
        "B not finite": ({}, {"B": np.where(s.B == s.B.max(), np.inf, s.B)}),
        "B int": ({}, {"B": s.B.astype(np.int64)}),
    }
    for name, (fields, arrays) in cases.items():
        _write_npz(tmp_path / "a.npz", dict(meta, **fields), {"B": s.B, **arrays})
        with pytest.raises(ValueError, match="not a valid dasketch sketch|metadata allows"):
            dasketch.load_sketch(tmp_path / "a.npz")
            pytest.fail(name)
    # A stored array declaring 16 x 8,000,000 (1 GB) in a small member.
    huge = dict(meta, n_features=8_000_000, sketch_size=17)
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("metadata.npy", _npy_bytes(np.array(json.dumps(huge))))
        header = _npy_bytes(np.zeros((16, 8_000_000)), header_only=True)
        zf.writestr("B.npy", header + b"\0" * 2 ** 20)
    assert _load_checked(path, path.stat().st_size, None) is None
    with pytest.raises(ValueError, match="declares 1,024,000,000 bytes"):
        dasketch.load_sketch(path)
    # A zarr sketch whose attributes changed after saving (stale checksum).
    dasketch.save_sketch(s, tmp_path / "s.zarr")
    zarr.open_group(str(tmp_path / "s.zarr"), mode="r+").attrs["shrinkage"] = 0.0
    with pytest.raises(ValueError, match="s.zarr' is corrupted: its contents do not match"):
        dasketch.load_sketch(tmp_path / "s.zarr")
    # A zarr array whose metadata declares a larger shape than the sketch allows.
    _write_zarr(tmp_path / "z.zarr", meta, {"B": np.zeros((40, 6))})
    with pytest.raises(ValueError, match="metadata allows float of at most"):
        dasketch.load_sketch(tmp_path / "z.zarr")


def _npy_bytes(array, header_only=False):
    import io

    buffer = io.BytesIO()
    if header_only:
        np.lib.format.write_array_header_1_0(
            buffer, np.lib.format.header_data_from_array_1_0(array))
    else:
        np.lib.format.write_array(buffer, array)
    return buffer.getvalue()


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
def test_truncated_and_flipped_npz(tmp_path, center):
    """100 truncations and 100 flipped bytes of a saved .npz: each is refused or
    loads to the original, within 10x its size of allocation."""
    original = _sketch(center)
    dasketch.save_sketch(original, tmp_path / "s.npz")
    whole = (tmp_path / "s.npz").read_bytes()
    path = tmp_path / "t.npz"
    rng = np.random.default_rng(0)
    loaded_back = 0
    for offset in np.linspace(0, len(whole) - 1, 100).astype(int):
        path.write_bytes(whole[:offset])
        assert _load_checked(path, max(offset, 1), original) is None
        flipped = bytearray(whole)
        flipped[offset] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(flipped))
        loaded = _load_checked(path, len(whole), original)
        assert loaded is None or _same(loaded, original), offset
        loaded_back += loaded is not None
    assert loaded_back < 20  # most flips land in the checked payload or zip records


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".npz", ".zarr"])
def test_every_byte_of_a_saved_sketch(tmp_path, suffix):
    """Every byte of every file of a saved sketch flipped in turn."""
    original = _sketch(True)
    dasketch.save_sketch(original, tmp_path / f"s{suffix}")
    files = [p for p in (tmp_path / f"s{suffix}").rglob("*") if p.is_file()] or [
        tmp_path / f"s{suffix}"]
    for file in files:
        whole = file.read_bytes()
        for offset in range(len(whole)):
            flipped = bytearray(whole)
            flipped[offset] ^= 0x10
            file.write_bytes(bytes(flipped))
            loaded = _load_checked(tmp_path / f"s{suffix}", len(whole), original)
            assert loaded is None or _same(loaded, original), (file, offset)
        file.write_bytes(whole)


# ------------------------------------------------------------------ overflow
def _scaled_error(X, sketch, scale):
    """``||X^T X - (B^T B + alpha I)||_2 / scale^2`` computed on ``X / scale``."""
    Xs, Bs = X / scale, sketch.B / scale
    if sketch.centered:
        Xs = Xs - Xs.mean(axis=0)
    E = Xs.T @ Xs - Bs.T @ Bs - (sketch.alpha - sketch.alpha0) / scale ** 2 * np.eye(X.shape[1])
    return np.linalg.norm(E, 2)


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
@pytest.mark.parametrize("suffix", [".npz", ".zarr"])
def test_data_of_scale_1e150_sketches_saves_and_loads(tmp_path, center, suffix):
    scale = 1e150
    X = np.random.default_rng(2).standard_normal((3000, 12)) * 0.8 ** np.arange(12) * scale
    sketch = dasketch.sketch(X, 5, center=center, block_rows=700)
    assert np.isfinite(sketch.frobenius_sq) and sketch.frobenius_sq > 1e303
    dasketch.save_sketch(sketch, tmp_path / f"s{suffix}")
    loaded = dasketch.load_sketch(tmp_path / f"s{suffix}")
    assert _same(loaded, sketch)
    assert _scaled_error(X, loaded, scale) <= loaded.error_bound / scale ** 2 * (1 + 1e-9)
    assert loaded.error_bound > 0


def test_squares_beyond_float64_are_refused_by_name(tmp_path):
    """Scale 1e300 (and 1e152 over 2000 x 30 values): ||X||_F^2 is not a float64,
    so no sketch can hold it; the error names the norm and a rescaling, in a
    block and in a merge of blocks that are each representable."""
    rng = np.random.default_rng(3)
    for X in (rng.standard_normal((100, 10)) * 1e300, rng.standard_normal((2000, 30)) * 1e152):
        for center in (False, True):
            with pytest.raises(ValueError, match=r"Frobenius norm .*e\+\d+.*rescale X"):
                Sketch.from_rows(X, 8, center=center)
    X = rng.standard_normal((200, 30)) * 1e152
    parts = [Sketch.from_rows(X[i::4], 8) for i in range(4)]
    with pytest.raises(ValueError, match="merge of .* Frobenius norm .*rescale X"):
        merge_sketches(parts * 8)
    # A sketch whose numbers are not finite cannot be built, so none can be saved.
    with pytest.raises(ValueError, match="frobenius_sq must be a finite number"):
        Sketch(np.zeros((0, 3)), 0.0, 1, 4, frobenius_sq=float("inf"))


def test_save_refuses_what_cannot_be_read_back(tmp_path):
    s = _sketch(False)
    forged = Sketch(s.B, 0.0, s.n_rows, s.sketch_size, frobenius_sq=s.frobenius_sq)
    with pytest.raises(ValueError, match="cannot be saved and read back.*frobenius_sq"):
        dasketch.save_sketch(forged, tmp_path / "f.npz")
    assert not (tmp_path / "f.npz").exists()
