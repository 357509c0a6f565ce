"""Files made to hurt: zarr sketches whose metadata or chunks declare far more than
their bytes hold, FIFOs and device links where zarr expects regular files, and
sketch files relabelled to skip their checksum. Each is refused in one error,
never read until memory runs out, never waited on for ever."""

import json
import os
import tracemalloc

import numcodecs
import numpy as np
import pytest
import zarr

import dasketch
from dasketch._blocks import as_row_blocks
from dasketch.storage.sketch_files import zstd_content_size
from tests.test_sketch_files import _sketch, _sketch_metadata

# A blocked read (a FIFO opened) fails the test, not the suite: the thread method
# ends a test whose read blocks in a thread of zarr's, where a signal cannot reach.
pytestmark = pytest.mark.timeout(120, method="thread")


def _size_on_disk(path):
    return sum(os.path.getsize(os.path.join(root, f))
               for root, _, files in os.walk(path) for f in files)


def _refused_within_ten_times_its_size(path, match):
    size = _size_on_disk(path)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match):
            dasketch.load_sketch(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 10 * size + 2 ** 20, (peak, size)


def _forged_group(path, l, d):
    meta = dict(_sketch_metadata(_sketch(False)), sketch_size=l, n_features=d)
    group = zarr.open_group(str(path), mode="w")
    group.attrs.update(meta)
    return group


def test_a_small_directory_declaring_a_huge_sketch_is_refused(tmp_path):
    """800 bytes declaring B of 1 GiB (all chunks absent: zarr would allocate the
    fill value)."""
    path = tmp_path / "s.zarr"
    _forged_group(path, 2 ** 13 + 1, 2 ** 14).create_array(
        "B", shape=(2 ** 13, 2 ** 14), chunks=(2 ** 13, 2 ** 14), dtype="f8")
    assert _size_on_disk(path) < 4096
    _refused_within_ten_times_its_size(path, "declares 1,073,741,824 bytes in")


def test_a_compression_bomb_chunk_is_refused_before_it_is_decoded(tmp_path):
    """One zstd chunk of a few KB that decodes to 128 MiB of zeros."""
    path = tmp_path / "s.zarr"
    _forged_group(path, 2 ** 11 + 1, 2 ** 13).create_array(
        "B", data=np.zeros((2 ** 11, 2 ** 13)), chunks=(2 ** 11, 2 ** 13),
        config={"write_empty_chunks": True})
    assert _size_on_disk(path) < 2 ** 16
    _refused_within_ten_times_its_size(path, "declares 134,217,728 bytes in")


def test_a_chunk_whose_frame_declares_more_than_its_shape_is_refused(tmp_path):
    """A B of random (incompressible) values whose second chunk is replaced by a
    zstd frame ten times the chunk's size: the stored bytes pass, the frame's
    header does not."""
    s = _sketch(False)
    path = tmp_path / "s.zarr"
    dasketch.save_sketch(s, path)
    chunk_path = path / "B" / "c" / "0" / "0"
    assert zstd_content_size(chunk_path.read_bytes()) == s.B.nbytes
    chunk_path.write_bytes(numcodecs.Zstd().encode(np.zeros(10 * s.B.size)))
    with pytest.raises(ValueError, match="declares 1,440 decoded bytes; its shape holds 144"):
        dasketch.load_sketch(path)


def test_zstd_header_sizes():
    """The header's size field as zstd writes it, for every field width."""
    for n in (0, 1, 255, 256, 300, 65_791, 70_000, 2 ** 32 + 5):
        frame = numcodecs.Zstd().encode(np.zeros(n, dtype=np.uint8))
        assert zstd_content_size(frame) == n, n
    assert zstd_content_size(b"not zstd at all") is None


def _replace_by_special_file(target, device):
    """Replace a file by a link to /dev/zero (``device``) or by a FIFO."""
    target.unlink()
    if device:
        os.symlink("/dev/zero", target)
    else:
        os.mkfifo(target)


@pytest.mark.parametrize("where", ["chunk", "metadata", "array metadata", "device"])
def test_special_files_in_a_zarr_sketch_are_refused_unopened(tmp_path, where):
    path = tmp_path / "s.zarr"
    dasketch.save_sketch(_sketch(False), path)
    target = {"chunk": path / "B" / "c" / "0" / "0", "metadata": path / "zarr.json",
              "array metadata": path / "B" / "zarr.json",
              "device": path / "B" / "c" / "0" / "0"}[where]
    _replace_by_special_file(target, device=where == "device")
    with pytest.raises(ValueError, match="not a regular file"):
        dasketch.load_sketch(path)


@pytest.mark.parametrize("where", ["chunk", "metadata", "device"])
def test_special_files_in_a_data_store_are_refused_unopened(tmp_path, where):
    path = tmp_path / "X.zarr"
    zarr.create_array(str(path), data=np.ones((40, 3)), chunks=(10, 3))
    target = path / ("zarr.json" if where == "metadata" else os.path.join("c", "2", "0"))
    _replace_by_special_file(target, device=where == "device")
    with pytest.raises(ValueError, match="not a regular file"):
        dasketch.sketch(as_row_blocks(str(path)), 2)


@pytest.mark.parametrize("suffix", [".npz", ".zarr"])
def test_a_file_relabelled_as_version_1_is_refused(tmp_path, suffix):
    """A version-4 sketch whose B was altered and whose metadata was relabelled as
    version 1 (no checksum) is refused, as any version-1 file is by default."""
    s = _sketch(False)
    path = tmp_path / f"s{suffix}"
    meta = {k: v for k, v in _sketch_metadata(s).items()
            if k not in ("checksum", "rounding", "scale_exponent")}
    meta["format_version"] = 1
    B = s.B * 0.5  # a smaller B: the bound would be violated
    if suffix == ".npz":
        with open(path, "wb") as fh:
            np.savez(fh, metadata=np.array(json.dumps(meta)), B=B)
    else:
        group = zarr.open_group(str(path), mode="w")
        group.attrs.update(meta)
        group.create_array("B", data=B)
    with pytest.raises(ValueError, match="version-1 sketch, which carries no checksum"):
        dasketch.load_sketch(path)
