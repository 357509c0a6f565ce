"""Saved sketches are validated on load (DESIGN section 10): every mutant of a valid
file is refused with a ValueError or loads to the original, and none allocates
far more than its size; finite data of scale 1e150 to 1e300 sketches, saves and
loads with a bound that holds (divided by a power of two where its squares are
beyond float64)."""

import dataclasses
import json
import math
import tracemalloc
import zipfile

import numpy as np
import pytest
import scipy.sparse
import zarr

import dasketch
from dasketch.kernels.frequent_directions import SAFE_EXPONENT, Sketch, merge_sketches
from dasketch.storage.sketch_files import payload_checksum
from dasketch.storage.sketch_io import _sketch_metadata

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
    "format_version": [0, 5, -1, "3", None, 3.0 + 1e-9],
    "scale_exponent": [-1075, 1025, 2.5, "3", None, True, float("nan")],
    "format": ["other", None, 7],
}
# Metadata that format version 1 lacks (version 3 added rounding, 4 scale_exponent).
ADDED_AFTER_VERSION_1 = ("rounding", "scale_exponent")


def _sketch(center):
    X = np.random.default_rng(1).standard_normal((200, 6)) * [8, 5, 3, 2, 1, 1]
    return Sketch.from_rows(X, 4, alpha0=0.25, center=center)


def _same(a, b):
    return (np.array_equal(a.B, b.B) and (a.mean is None) == (b.mean is None)
            and (a.mean is None or np.array_equal(a.mean, b.mean))
            and all(getattr(a, k) == getattr(b, k) for k in (
                "shrinkage", "n_rows", "sketch_size", "method", "alpha0", "frobenius_sq",
                "shrinkage_bound", "failure_probability", "rounding", "scale_exponent")))


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
    meta = _sketch_metadata(original)
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
                           if k != "checksum" and (k not in ADDED_AFTER_VERSION_1 or k == key)}
                path = tmp_path / f"m{suffix}"
                write(path, bad, arrays)
                with pytest.raises(ValueError):  # version 1 trusted: its invariants
                    dasketch.load_sketch(path, trust_unchecked=mode == "version 1")
                    pytest.fail(f"{key}={value!r} ({mode}) loaded")
    # A version-1 file (no checksum, no rounding) that is intact loads when trusted,
    # with a rounding bound no smaller than the one the sketch recorded; untrusted,
    # it is refused.
    write(tmp_path / f"v1{suffix}", {k: v for k, v in dict(meta, format_version=1).items()
                                     if k not in ("checksum",) + ADDED_AFTER_VERSION_1},
          arrays)
    with pytest.raises(ValueError, match="version-1 sketch, which carries no checksum"):
        dasketch.load_sketch(tmp_path / f"v1{suffix}")
    legacy = dasketch.load_sketch(tmp_path / f"v1{suffix}", trust_unchecked=True)
    assert legacy.rounding >= original.rounding > 0
    assert _same(dataclasses.replace(legacy, rounding=original.rounding), original)


def test_inconsistent_arrays_and_the_attacks_found(tmp_path):
    """B with more rows than the sketch holds, a shrinkage that hides the error,
    rows that would vanish in a merge, a 1 MB file declaring a 1 GB array."""
    s = _sketch(False)
    meta = {k: v for k, v in _sketch_metadata(s).items()
            if k not in ("checksum",) + ADDED_AFTER_VERSION_1}
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
            dasketch.load_sketch(tmp_path / "a.npz", trust_unchecked=True)
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
def _scaled_error(X, sketch):
    """``||X^T X + alpha0 I - (B^T B + alpha I)||_2 / 4**e`` (``X`` centred for a
    centred sketch), computed exactly on ``X / 2**e``, ``e`` the sketch's
    ``scale_exponent``: the error in the units of :meth:`Sketch.scaled`."""
    scaled = sketch.scaled()
    Xs = np.ldexp(X, -sketch.scale_exponent)
    if sketch.centered:
        Xs = Xs - Xs.mean(axis=0)
    E = Xs.T @ Xs + scaled.alpha0 * np.eye(X.shape[1]) - scaled.covariance()
    return np.linalg.norm(E, 2)


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
@pytest.mark.parametrize("suffix", [".npz", ".zarr"])
@pytest.mark.parametrize("scale", [1e150, 1e200, 1e300])
def test_data_of_scale_1e150_to_1e300_sketches_saves_and_loads(tmp_path, center, suffix,
                                                              scale):
    """Entries beyond 2**400 are sketched divided by a power of two: the bound of
    the scaled sketch holds on the scaled data and is the bound of the unscaled
    data's sketch (same relative error), and the true-unit bound is its multiple
    (``inf`` where float64 cannot hold it); save and load keep every field."""
    base = np.random.default_rng(2).standard_normal((3000, 12)) * 0.8 ** np.arange(12)
    X = base * scale
    sketch = dasketch.sketch(X, 5, center=center, block_rows=700)
    e = sketch.scale_exponent
    assert e > 0 and math.frexp(np.abs(np.ldexp(X, -e)).max())[1] == SAFE_EXPONENT
    dasketch.save_sketch(sketch, tmp_path / f"s{suffix}")
    loaded = dasketch.load_sketch(tmp_path / f"s{suffix}")
    assert _same(loaded, sketch)
    bound = loaded.scaled().error_bound
    assert 0 < _scaled_error(X, loaded) <= bound * (1 + 1e-12)
    with np.errstate(over="ignore"):
        assert loaded.error_bound == float(np.ldexp(bound, 2 * e)) or (
            loaded.error_bound == np.inf and math.log2(bound) + 2 * e > 1023)
    # The scaled data's sketch is the sketch of the unscaled data, to rounding.
    reference = dasketch.sketch(base, 5, center=center, block_rows=700)
    relative = bound / loaded.scaled().singular_values()[0] ** 2
    assert relative == pytest.approx(
        reference.error_bound / reference.singular_values()[0] ** 2, rel=1e-9)



@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
@pytest.mark.parametrize("scale", [1e-200, 1e-300, 2.0 ** -1060],
                         ids=["1e-200", "1e-300", "subnormal"])
def test_tiny_data_sketches_multiplied_up_with_a_bound_that_holds(tmp_path, center, scale):
    """Blocks whose entries are all below 2**-200 are sketched multiplied by the
    power of two that brings their largest entry into [1/2, 1) (scale_exponent < 0):
    their squares no longer underflow, so the sketch is that of the data at scale 1
    (same relative error), its bound holds on the scaled data, the data's own
    bound is positive (rounded up, never to 0), and save and load keep it."""
    base = np.random.default_rng(2).standard_normal((3000, 12)) * 0.8 ** np.arange(12)
    X = base * scale
    sketch = dasketch.sketch(X, 5, center=center, block_rows=700)
    e = sketch.scale_exponent
    assert e < 0 and math.frexp(np.abs(np.ldexp(X, -e)).max())[1] == 0
    dasketch.save_sketch(sketch, tmp_path / "s.npz")
    loaded = dasketch.load_sketch(tmp_path / "s.npz")
    assert _same(loaded, sketch)
    bound = loaded.scaled().error_bound
    assert 0 < _scaled_error(X, loaded) <= bound * (1 + 1e-12)
    assert loaded.error_bound > 0 and loaded.loss_bound > 0
    reference = dasketch.sketch(np.ldexp(X, -e), 5, center=center, block_rows=700)
    assert reference.scale_exponent == 0
    np.testing.assert_allclose(loaded.B, reference.B, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.B).max())
    assert bound == pytest.approx(reference.error_bound, rel=1e-9)


def test_merges_of_blocks_of_any_scale_keep_the_bound():
    """Blocks of scale 1, 1e152 and 1e300 merged in any order: the merge works
    in the largest block's units and its bound holds there; merges of many
    scaled blocks stay finite."""
    rng = np.random.default_rng(3)
    X = np.vstack([rng.standard_normal((150, 10)) * s for s in (1.0, 1e152, 1e300)])
    for center in (False, True):
        parts = [Sketch.from_rows(X[i:i + 50], 6, center=center) for i in range(0, 450, 50)]
        for order in (parts, parts[::-1]):
            merged = merge_sketches(order)
            assert merged.scale_exponent == max(p.scale_exponent for p in parts) > 0
            assert _scaled_error(X, merged) <= merged.scaled().error_bound * (1 + 1e-12)
            assert merged.mean is None or np.isfinite(merged.mean).all()
    X = rng.standard_normal((200, 30)) * 1e152
    parts = [Sketch.from_rows(X[i::4], 8) for i in range(4)]
    assert min(p.scale_exponent for p in parts) > 0
    merged = merge_sketches(parts * 8)
    assert np.isfinite(merged.frobenius_sq) and merged.n_rows == 1600


def test_randomized_update_of_sparse_data_of_scale_1e300():
    """The randomized update divides such blocks too (its float32 range finder
    works on the block divided by a power of two near its largest entry): the
    same sketch as of the unscaled rows, in the scaled units, bound holding."""
    X = scipy.sparse.random(2000, 600, density=0.02, random_state=0, format="csr")
    factor = 2.0 ** 996  # about 6.7e299; a power of two keeps every product exact
    reference = dasketch.sketch(X, 8, update="randomized", random_state=0, block_rows=500)
    huge = dasketch.sketch(X * factor, 8, update="randomized", random_state=0,
                           block_rows=500)
    assert huge.scale_exponent > 0 and huge.guarantee == reference.guarantee
    assert _scaled_error((X * factor).toarray(), huge) <= huge.scaled().error_bound
    ratio = 2.0 ** (996 - huge.scale_exponent)
    np.testing.assert_allclose(huge.B, reference.B * ratio, rtol=1e-12,
                               atol=1e-12 * np.abs(huge.B).max())
    assert huge.scaled().error_bound == pytest.approx(reference.error_bound * ratio ** 2,
                                                      rel=1e-12)


def test_values_beyond_float64_name_scaled():
    """A scaled sketch's covariance() and singular values are refused where
    float64 cannot hold them, naming scaled(); its bounds are inf there."""
    s = Sketch.from_rows(np.random.default_rng(4).uniform(0.5, 1.0, (40, 5)) * 1e308, 3)
    assert s.error_bound == s.loss_bound == np.inf and np.isfinite(s.scaled().error_bound)
    for method in ("covariance", "singular_values"):
        with pytest.raises(ValueError, match=rf"scaled\(\)\.{method}\(\) gives it"):
            getattr(s, method)()
    v = np.ones(5)
    assert np.array_equal(s.solve(v), np.ldexp(s.scaled().solve(v), -2 * s.scale_exponent))
    with pytest.raises(ValueError, match="estimate_error\\(numpy.ldexp\\(X, -"):
        dasketch.estimate_error(np.ones((40, 5)), s)
    # A sketch whose numbers are not finite cannot be built, so none can be saved.
    with pytest.raises(ValueError, match="frobenius_sq must be a finite number"):
        Sketch(np.zeros((0, 3)), 0.0, 1, 4, frobenius_sq=float("inf"))


def test_save_refuses_what_cannot_be_read_back(tmp_path):
    s = _sketch(False)
    forged = Sketch(s.B, 0.0, s.n_rows, s.sketch_size, frobenius_sq=s.frobenius_sq)
    with pytest.raises(ValueError, match="cannot be saved and read back.*frobenius_sq"):
        dasketch.save_sketch(forged, tmp_path / "f.npz")
    assert not (tmp_path / "f.npz").exists()


HUGE = {"10**400": 10 ** 400, "-10**400": -(10 ** 400)}
# Integers beyond int64; for the float fields, beyond float64's range too.
HUGE_CASES = [(key, name) for key in ("sketch_size", "n_rows", "n_features", "scale_exponent")
              for name in [*HUGE, "2**63"]] + [
    (key, name) for key in ("shrinkage", "frobenius_sq", "alpha0", "rounding",
                            "failure_probability", "shrinkage_bound") for name in HUGE]


@pytest.mark.parametrize(("key", "value"), HUGE_CASES,
                         ids=[f"{key}={name}" for key, name in HUGE_CASES])
def test_integers_beyond_int64_in_metadata_are_a_value_error_naming_the_field(
        tmp_path, key, value):
    """JSON integers have no size limit; Python's do not either, but float and
    NumPy conversions of them raise OverflowError or TypeError."""
    value = {**HUGE, "2**63": 2 ** 63}[value]
    original = _sketch(False)
    meta = _sketch_metadata(original)
    arrays = {"B": original.B}
    for mode in ("stale", "recomputed", "version 1"):
        bad = dict(meta, **{key: value})
        if mode == "recomputed":
            bad["checksum"] = payload_checksum(bad, arrays)
        elif mode == "version 1":
            bad = {k: v for k, v in dict(bad, format_version=1).items()
                   if k != "checksum" and (k not in ADDED_AFTER_VERSION_1 or k == key)}
        _write_npz(tmp_path / "big.npz", bad, arrays)
        with pytest.raises(ValueError, match=f"'{key}'"):
            dasketch.load_sketch(tmp_path / "big.npz", trust_unchecked=mode == "version 1")
