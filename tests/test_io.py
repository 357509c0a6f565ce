"""Saving and loading sketches; synthetic data sets."""

import json
import os

import numpy as np
import pytest
import zarr

import dasketch
from tests.helpers import decaying


@pytest.fixture(params=[False, True], ids=["plain", "centred"])
def sketch(request):
    return dasketch.sketch(decaying(500, 12), 5, alpha0=0.25, center=request.param,
                           block_rows=128)


@pytest.mark.parametrize("name", ["s.npz", "s.zarr"])
def test_round_trip_is_exact(tmp_path, sketch, name):
    path = tmp_path / name
    dasketch.save_sketch(sketch, path)
    loaded = dasketch.load_sketch(path)
    assert np.array_equal(loaded.B, sketch.B)
    for attr in ("shrinkage", "n_rows", "sketch_size", "method", "alpha0", "alpha",
                 "error_bound", "frobenius_sq", "centered", "n_features"):
        assert getattr(loaded, attr) == getattr(sketch, attr), attr
    if sketch.centered:
        assert np.array_equal(loaded.mean, sketch.mean)
    v = np.arange(12.0)
    assert np.array_equal(loaded.solve(v), sketch.solve(v))
    # A loaded sketch keeps merging with new data.
    more = decaying(100, 12, seed=9)
    merged = loaded.update(more)
    assert merged.n_rows == 600


def test_no_silent_overwrite(tmp_path, sketch):
    path = tmp_path / "s.npz"
    dasketch.save_sketch(sketch, path)
    before = path.read_bytes()
    other = dasketch.sketch(decaying(50, 12, seed=1), 5)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        dasketch.save_sketch(other, path)
    assert path.read_bytes() == before
    dasketch.save_sketch(other, path, overwrite=True)
    assert dasketch.load_sketch(path).n_rows == 50
    assert sorted(os.listdir(tmp_path)) == ["s.npz"]


def test_load_errors(tmp_path, sketch):
    with pytest.raises(FileNotFoundError, match="no sketch"):
        dasketch.load_sketch(tmp_path / "nothing.npz")
    np.savez(tmp_path / "other.npz", x=np.ones(3))
    with pytest.raises(ValueError, match="not a dasketch sketch"):
        dasketch.load_sketch(tmp_path / "other.npz")
    dasketch.save_sketch(sketch, tmp_path / "s.zarr")
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r+")
    group.attrs["format_version"] = 99
    with pytest.raises(ValueError, match="format version 99"):
        dasketch.load_sketch(tmp_path / "s.zarr")
    with open(tmp_path / "s.npz", "wb") as fh:
        meta = json.dumps({"format": "dasketch.Sketch", "format_version": 99})
        np.savez(fh, metadata=np.array(meta), B=np.ones((1, 2)))
    with pytest.raises(ValueError, match="format version"):
        dasketch.load_sketch(tmp_path / "s.npz")


def test_write_synthetic_independent_of_chunks(tmp_path):
    a = dasketch.write_synthetic(tmp_path / "a.zarr", 1000, 8, chunk_rows=100, random_state=3)
    b = dasketch.write_synthetic(tmp_path / "b.zarr", 1000, 8, chunk_rows=333, random_state=3)
    np.testing.assert_allclose(a.compute(), b.compute(), rtol=1e-12, atol=1e-12)
    with pytest.raises(FileExistsError, match="overwrite"):
        dasketch.write_synthetic(tmp_path / "a.zarr", 10, 8)
    # Spectrum decays as requested: A^T A / n approaches diag(decay ** (2 j)) + noise^2.
    eig = np.linalg.eigvalsh(np.asarray(a.T @ a))[::-1] / 1000
    np.testing.assert_allclose(eig, 0.9 ** (2 * np.arange(8)) + 0.01 ** 2, rtol=0.35)
