"""Saving and loading sketches; synthetic data sets."""

import json
import os

import numpy as np
import pytest
import zarr

import dasketch
from dasketch._blocks.stores import open_zarr_array
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


@pytest.mark.slow  # run by .ci/run's slow step
def test_write_synthetic_wide_rows_and_an_impossible_basis(tmp_path):
    """Wide rows get a basis of the directions above rounding (not d x d); a basis
    that cannot fit in memory is a clear error, and nothing is written."""
    X = dasketch.write_synthetic(tmp_path / "wide.zarr", 500, 20_000)
    assert X.chunks[0][0] * X.shape[1] * 8 <= 32 * 2 ** 20  # a chunk a worker can read
    s = np.linalg.svd(X.compute(), compute_uv=False)
    n = X.shape[0]
    # s_j = 0.9 ** j directions plus noise 0.01: the top of the spectrum is about sqrt(n)
    assert 0.5 * np.sqrt(n) < s[0] < 2 * np.sqrt(n)
    with pytest.raises(ValueError, match=r"rank \(20000\) x n_features \(20000\).*pass rank <="):
        dasketch.write_synthetic(tmp_path / "big.zarr", 10, 20_000, rank=20_000)
    assert not (tmp_path / "big.zarr").exists()


def test_features_beyond_a_rank_1_basis_name_what_the_cli_offers(tmp_path):
    """make-data has no rank option: the way out is fewer features."""
    import subprocess
    import sys

    from dasketch.datasets import MAX_BASIS_BYTES

    too_wide = MAX_BASIS_BYTES // 8 + 1
    with pytest.raises(ValueError, match=r"write at most 134,217,728 features") as excinfo:
        dasketch.write_synthetic(tmp_path / "big.zarr", 1, too_wide)
    assert "rank <=" not in str(excinfo.value)
    result = subprocess.run([sys.executable, "-m", "dasketch.cli", "make-data",
                             str(tmp_path / "big.zarr"), "--rows", "1", "--features",
                             str(too_wide)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--features" in result.stderr, result.stderr
    assert "rank" not in result.stderr.split("GiB in memory")[1]
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "big.zarr").exists()


def test_write_synthetic_independent_of_chunks(tmp_path):
    a = dasketch.write_synthetic(tmp_path / "a.zarr", 1000, 8, chunk_rows=100, random_state=3)
    b = dasketch.write_synthetic(tmp_path / "b.zarr", 1000, 8, chunk_rows=333, random_state=3)
    np.testing.assert_allclose(a.compute(), b.compute(), rtol=1e-12, atol=1e-12)
    with pytest.raises(FileExistsError, match="overwrite"):
        dasketch.write_synthetic(tmp_path / "a.zarr", 10, 8)
    # Spectrum decays as requested: A^T A / n approaches diag(decay ** (2 j)) + noise^2.
    eig = np.linalg.eigvalsh(np.asarray(a.T @ a))[::-1] / 1000
    np.testing.assert_allclose(eig, 0.9 ** (2 * np.arange(8)) + 0.01 ** 2, rtol=0.35)


# ------------------------------------------------------------------ damaged files
def test_load_names_what_is_wrong_with_a_file(tmp_path, sketch):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="not a NumPy .npz archive"):
        dasketch.load_sketch(garbage)
    dasketch.save_sketch(sketch, tmp_path / "s.npz")
    whole = (tmp_path / "s.npz").read_bytes()
    for cut in (len(whole) // 2, len(whole) - 30):
        (tmp_path / "t.npz").write_bytes(whole[:cut])
        with pytest.raises(ValueError, match="truncated or corrupted"):
            dasketch.load_sketch(tmp_path / "t.npz")
    meta = json.loads(str(np.load(tmp_path / "s.npz")["metadata"]))
    for key in ("shrinkage", "n_rows", "centered"):
        broken = {k: v for k, v in meta.items() if k != key}
        np.savez(tmp_path / "m.npz", metadata=np.array(json.dumps(broken)), B=sketch.B)
        with pytest.raises(ValueError, match=f"'{key}' is missing"):
            dasketch.load_sketch(tmp_path / "m.npz")
    np.savez(tmp_path / "b.npz", metadata=np.array(json.dumps(meta)), B=sketch.B[:, :3])
    with pytest.raises(ValueError, match="'B'"):
        dasketch.load_sketch(tmp_path / "b.npz")
    data = tmp_path / "data.zarr"
    zarr.create_array(str(data), data=np.ones((4, 3)))
    with pytest.raises(ValueError, match="zarr array .*not a saved sketch"):
        dasketch.load_sketch(data)


# ------------------------------------------------------------------ stores
@pytest.fixture
def store(tmp_path):
    """A 2,000 x 6 zarr store in 4 chunks of 500 rows, and its values."""
    path = tmp_path / "X.zarr"
    values = np.random.default_rng(3).standard_normal((2000, 6))
    zarr.create_array(str(path), data=values, chunks=(500, 6))
    return path, values


def test_missing_chunks_are_an_error_or_the_fill_value(store):
    path, values = store
    opened_before = open_zarr_array(path)
    (path / "c" / "1" / "0").unlink()
    (path / "c" / "3" / "0").unlink()
    with pytest.raises(ValueError, match=r"lacks 2 of 4 chunks .*c/1/0, c/3/0"):
        dasketch.sketch(str(path), 4, missing_chunks="raise")
    with pytest.raises(ValueError, match="c/1/0"):
        open_zarr_array(path, missing_chunks="raise").compute()
    # Stored when the job opened the store, gone when it read them: an error.
    with pytest.raises(ValueError, match="changed under the job|disappeared"):
        opened_before.compute()
    filled = values.copy()
    filled[500:1000] = filled[1500:] = 0.0
    X = open_zarr_array(path)
    np.testing.assert_array_equal(X.compute(), filled)
    a, b = dasketch.sketch(X, 4, block_rows=300), dasketch.sketch(filled, 4, block_rows=300)
    np.testing.assert_allclose(a.B.T @ a.B, b.B.T @ b.B, rtol=1e-12, atol=1e-12)
    c = dasketch.sketch(str(path), 4, block_rows=300, missing_chunks="fill")
    np.testing.assert_allclose(c.B.T @ c.B, b.B.T @ b.B, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="missing_chunks must be 'fill' or 'raise'"):
        open_zarr_array(path, missing_chunks="zeros")


def test_store_checks_list_the_store_once(store, monkeypatch):
    """O(number of chunks) metadata: one listing (a walk of the local directory,
    which sees what zarr's listing leaves out), no per-chunk requests beyond it."""
    from dasketch.storage import fingerprints

    path, values = store
    calls = []
    original = fingerprints.local_signatures

    def counting(directory):
        calls.append(directory)
        return original(directory)

    monkeypatch.setattr(fingerprints, "local_signatures", counting)
    X = open_zarr_array(path)
    np.testing.assert_array_equal(X.compute(), values)
    X.sum().compute()  # a second pass over the same opening is not checked again
    assert len(calls) == 2  # the client's fingerprint, and the check where tasks run


def test_group_without_component_names_its_arrays(tmp_path):
    group = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    group.create_array("a", data=np.ones((5, 2)))
    group.create_group("sub").create_array("b", data=np.ones((5, 2)))
    with pytest.raises(ValueError, match=r"zarr group.*'a', 'sub/b'"):
        dasketch.sketch(str(tmp_path / "g.zarr"), 3)
    assert dasketch.sketch(str(tmp_path / "g.zarr"), 3, component="sub/b").n_rows == 5


def test_sparse_store_with_a_missing_chunk(tmp_path):
    from dasketch._blocks import as_row_blocks, compute
    from dasketch.datasets import write_sparse_synthetic
    from dasketch.storage.reading import read_csr_rows

    path = tmp_path / "S.zarr"
    write_sparse_synthetic(path, 400, 50, density=0.1, chunk_rows=100)
    full = read_csr_rows(path, 0, 400).toarray()
    (path / "data" / "c" / "1").unlink()
    with pytest.raises(ValueError, match=r"chunks of 'data' \(first: c/1\)"):
        dasketch.sketch(str(path), 4, missing_chunks="raise")
    blocks = as_row_blocks(str(path), block_rows=100)
    read = np.vstack([b.toarray() for b in compute(*blocks.blocks)])
    lost = read != full
    assert lost.any() and (read[lost] == 0).all()  # the lost values read as the fill value
