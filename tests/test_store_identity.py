"""A store is known by where it is and what it holds: two stores of equal layout
are never taken for one another, every worker compares chunk signatures that
change with the content, and no path form of an output reaches an input."""

import os
import zipfile

import numpy as np
import pytest
import zarr
from zarr.storage import MemoryStore, ZipStore

import dasketch
from dasketch._blocks import as_row_blocks
from dasketch.storage import store_checks
from dasketch.storage.reading import read_rows
from dasketch.storage.store_checks import checked_array, store_fingerprint
from tests.test_cli import assert_user_error, run

ROWS, FEATURES, CHUNK = 4_000, 6, 1_000


def _base(seed=0):
    return np.random.default_rng(seed).standard_normal((ROWS, FEATURES))


def _write_zip(path, data):
    if os.path.exists(path):
        os.remove(path)
    store = ZipStore(path, mode="w")
    zarr.create_array(store, data=data, chunks=(CHUNK, FEATURES), compressors=None)
    store.close()


def _assert_sketch_of(sketch, A):
    error = np.linalg.norm(A.T @ A - sketch.covariance(), 2)
    assert sketch.n_rows == A.shape[0]
    assert error <= sketch.error_bound * (1 + 1e-9), error / sketch.error_bound


@pytest.fixture(autouse=True)
def _fresh_checks():
    """Each test starts with nothing remembered by this process."""
    store_checks._CHECKED.clear()
    store_checks._EXPECTED.clear()
    yield


def test_two_zip_stores_of_equal_layout_are_not_taken_for_one_another(tmp_path):
    """b.zip holds 100 x a.zip in the same layout (equal metadata and member
    names): its sketch is its own, not a's."""
    A = _base()
    _write_zip(tmp_path / "a.zip", A)
    _write_zip(tmp_path / "b.zip", 100 * A)
    _assert_sketch_of(dasketch.sketch(str(tmp_path / "a.zip"), 4), A)
    _assert_sketch_of(dasketch.sketch(str(tmp_path / "b.zip"), 4), 100 * A)


def test_a_zip_store_regenerated_at_the_same_path_is_read_anew(tmp_path):
    A, path = _base(), str(tmp_path / "data.zip")
    _write_zip(path, A)
    _assert_sketch_of(dasketch.sketch(path, 4), A)
    _write_zip(path, 3 * A)  # equal member sizes: only the content differs
    _assert_sketch_of(dasketch.sketch(path, 4), 3 * A)


def test_zip_stores_of_equal_layout_on_a_cluster(tmp_path, cluster_client):
    A = _base(1)
    _write_zip(tmp_path / "a.zip", A)
    _write_zip(tmp_path / "b.zip", 100 * A)
    for path, data in (("a.zip", A), ("b.zip", 100 * A), ("a.zip", A)):
        _assert_sketch_of(dasketch.sketch(str(tmp_path / path), 4, client=cluster_client),
                          data)


def test_in_memory_stores_of_equal_layout_are_not_taken_for_one_another():
    A = _base(2)
    a = zarr.create_array(MemoryStore(), data=A, chunks=(CHUNK, FEATURES))
    b = zarr.create_array(MemoryStore(), data=100 * A, chunks=(CHUNK, FEATURES))
    _assert_sketch_of(dasketch.sketch(a, 4), A)
    _assert_sketch_of(dasketch.sketch(b, 4), 100 * A)


def test_fingerprints_name_the_store_and_its_content(tmp_path):
    """Equal layouts in two directories, two zip files, or two memory stores give
    different fingerprints; a zip member of another content with the same size
    changes the fingerprint through its CRC-32."""
    A = _base(3)
    digests = set()
    for name in ("x.zarr", "y.zarr"):
        digests.add(store_fingerprint(zarr.create_array(
            str(tmp_path / name), data=A, chunks=(CHUNK, FEATURES)))[0])
    for name in ("x.zip", "y.zip"):
        _write_zip(tmp_path / name, A)
        digests.add(store_fingerprint(zarr.open_array(ZipStore(tmp_path / name, mode="r"),
                                                      mode="r"))[0])
    for scale in (1, 2):
        digests.add(store_fingerprint(zarr.create_array(
            MemoryStore(), data=scale * A, chunks=(CHUNK, FEATURES)))[0])
    assert len(digests) == 6
    zip_path = tmp_path / "x.zip"
    before = store_fingerprint(zarr.open_array(ZipStore(zip_path, mode="r"), mode="r"))
    with zipfile.ZipFile(zip_path) as archive:
        sizes = {info.filename: info.file_size for info in archive.infolist()}
    _write_zip(zip_path, -A)
    after = store_fingerprint(zarr.open_array(ZipStore(zip_path, mode="r"), mode="r"))
    with zipfile.ZipFile(zip_path) as archive:
        assert sizes == {info.filename: info.file_size for info in archive.infolist()}
    changed = [key for key in before[1] if before[1][key] != after[1][key]]
    assert "c/0/0" in changed and before[0] != after[0]


def _rewrite_chunk_keeping_mtime(path, key, new_bytes):
    """Rewrite a chunk file in place and restore its modification time, as
    ``cp -p`` or ``rsync --inplace -t`` do."""
    chunk = os.path.join(path, *key.split("/"))
    stat = os.stat(chunk)
    with open(chunk, "r+b") as f:
        f.write(new_bytes)
    os.utime(chunk, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(chunk).st_mtime_ns == stat.st_mtime_ns
    assert os.stat(chunk).st_size == stat.st_size


def _store_and_other_chunk(tmp_path):
    """A store of uncompressed chunks and the bytes of chunk 1 with another content."""
    path = str(tmp_path / "X.zarr")
    array = zarr.create_array(path, data=_base(4), chunks=(CHUNK, FEATURES), compressors=None)
    with open(os.path.join(path, "c", "1", "0"), "rb") as f:
        original = f.read()
    assert len(original) == CHUNK * FEATURES * 8
    return path, array, (np.frombuffer(original, dtype=np.float64) * 7).tobytes()


def test_an_in_place_rewrite_that_restores_mtime_is_an_error(tmp_path):
    path, _, other = _store_and_other_chunk(tmp_path)
    blocks = as_row_blocks(path)  # the store is fingerprinted here
    _rewrite_chunk_keeping_mtime(path, "c/1/0", other)
    with pytest.raises(ValueError, match="changed under the job|rewritten"):
        dasketch.sketch(blocks, 4)


def test_a_process_that_did_not_check_the_store_compares_signatures(tmp_path):
    """A worker that received the checked array from another worker (so never
    ran the opening check itself) compares every chunk file's signature with
    the fingerprint, not only its existence."""
    path, array, other = _store_and_other_chunk(tmp_path)
    digest, signatures = store_fingerprint(array)
    checked = checked_array(path, None, None, array.shape, array.dtype.str, "fill",
                            (digest, len(signatures)))
    np.testing.assert_array_equal(read_rows(checked, 0, ROWS, digest, "X"), array[:])
    _rewrite_chunk_keeping_mtime(path, "c/1/0", other)
    store_checks._CHECKED.clear()  # this process now holds what another one checked
    store_checks._EXPECTED.clear()
    with pytest.raises(ValueError, match="changed under the job"):
        read_rows(checked, 0, CHUNK, digest, "X")  # chunk 0 unchanged: the store is not


@pytest.mark.parametrize("form", ["file", "local", "dotdot", "symlink"])
def test_no_path_form_of_the_output_overwrites_the_input(tmp_path, form):
    data = tmp_path / "in.zarr"
    result = run("make-data", data, "--rows", 2000, "--features", 8)
    assert result.returncode == 0, result.stderr
    before = zarr.open_array(str(data), mode="r")[:]
    (tmp_path / "sub").mkdir()
    if form == "symlink":
        os.symlink(data, tmp_path / "link.zarr")
    out = {"file": f"file://{data}", "local": f"local://{data}",
           "dotdot": str(tmp_path / "sub" / ".." / "in.zarr"),
           "symlink": str(tmp_path / "link.zarr")}[form]
    result = run("sketch", data, "-l", 4, "--out", out, "--overwrite", "--quiet")
    assert_user_error(result, "--out", "input")
    np.testing.assert_array_equal(zarr.open_array(str(data), mode="r")[:], before)


@pytest.mark.parametrize("out, source", [
    ("s3://bucket/in.zarr", "s3://bucket/in.zarr"),
    ("s3://bucket/in.zarr/sketch.npz", "s3://bucket/in.zarr/"),
    ("memory://data/in.zarr", "memory://data"),
])
def test_a_remote_output_that_reaches_its_input_is_refused(out, source):
    from dasketch.storage.outputs import check_output

    with pytest.raises(ValueError, match="input"):
        check_output(out, True, inputs=[source], name="--out")
    check_output("s3://bucket/other.zarr", True, inputs=[source], name="--out")


def _make_data(path, *extra):
    result = run("make-data", path, "--rows", 2000, "--features", 8, *extra)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("intruder", ["file", "folder", "array", "link"])
@pytest.mark.slow  # run by .ci/run's slow step
def test_overwrite_keeps_what_dasketch_did_not_write(tmp_path, intruder):
    """A user's file, folder, array or link inside a data store dasketch wrote
    survives ``--overwrite``: the job refuses in one line and changes nothing."""
    path = tmp_path / "data.zarr"
    _make_data(path, "--chunks", 500)
    before = zarr.open_array(str(path), mode="r")[:]
    if intruder == "file":
        (path / "notes.txt").write_text("mine")
    elif intruder == "folder":
        (path / "c" / "mine").mkdir()
    elif intruder == "array":
        zarr.create_array(str(path / "extra"), data=np.ones(3))
    else:
        os.symlink(tmp_path, path / "c" / "9")
    result = run("make-data", path, "--rows", 1000, "--features", 4, "--overwrite")
    assert_user_error(result, "PATH", "did not write")
    np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[:], before)
    assert intruder != "file" or (path / "notes.txt").read_text() == "mine"


@pytest.mark.slow  # .ci/run runs it by name
def test_a_clean_store_and_sketch_are_replaced(tmp_path):
    path = tmp_path / "data.zarr"
    _make_data(path, "--chunks", 500)
    _make_data(path, "--overwrite")
    sketch_path = str(tmp_path / "s.zarr")
    sketch = dasketch.sketch(_base(), 4)
    dasketch.save_sketch(sketch, sketch_path)
    dasketch.save_sketch(sketch, sketch_path, overwrite=True)
    zarr.create_array(os.path.join(sketch_path, "notes"), data=np.ones(2))
    with pytest.raises(FileExistsError, match="did not write.*notes"):
        dasketch.save_sketch(sketch, sketch_path, overwrite=True)
    assert zarr.open_array(os.path.join(sketch_path, "notes"), mode="r")[:].sum() == 2


@pytest.mark.parametrize("kind", ["own file", "link out"])
def test_demo_never_replaces_a_plot_it_did_not_write(tmp_path, kind):
    out, outside = tmp_path / "demo", tmp_path / "elsewhere.png"
    out.mkdir()
    outside.write_bytes(b"user data")
    if kind == "own file":
        (out / "spectrum.png").write_bytes(b"user data")
    else:
        os.symlink(outside, out / "spectrum.png")
    result = run("demo", "--out", out, "--rows", 2000, "--features", 8, "--overwrite",
                 "--quiet")
    assert_user_error(result, "spectrum.png")
    assert outside.read_bytes() == b"user data"
    assert not (out / "data.zarr").exists()


def test_the_demo_plot_is_recognised_and_replaced(tmp_path):
    from dasketch.cli import _plot_spectrum
    from dasketch.storage.outputs import dasketch_output_kind

    A = _base()
    sketch, path = dasketch.sketch(A, 4), tmp_path / "spectrum.png"
    eig = np.linalg.eigvalsh(A.T @ A)[::-1]
    _plot_spectrum(eig, sketch, str(path))
    assert dasketch_output_kind(path) == "a plot written by dasketch"
    first = path.stat().st_ino
    _plot_spectrum(eig, sketch, str(path))  # replaced atomically: a new file
    assert path.stat().st_ino != first and not list(tmp_path.glob("*.tmp"))
