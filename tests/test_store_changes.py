"""A store that changes while a job reads it is an error, never a certified sketch;
absent chunks read as the fill value, as zarr reads them."""

import os
import subprocess
import sys
import textwrap
import time
import uuid

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import dasketch
from dasketch._blocks import (
    add,
    as_row_blocks,
    cache_blocks,
    compute,
    iter_row_blocks,
    map_reduce,
    run_eagerly,
)
from dasketch._blocks.stores import open_zarr_array
from dasketch.datasets import write_synthetic
from dasketch.storage.store_checks import is_local_path

ROWS, FEATURES, CHUNK = 120_000, 16, 2_000

IN_PLACE_WRITER = """
import sys, time, numpy as np, zarr
path, rows, chunk, seconds = sys.argv[1], *map(int, sys.argv[2:5])
array = zarr.open_array(path, mode="r+")
rng = np.random.default_rng(1)
print("writing", flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    start = int(rng.integers(rows // chunk)) * chunk
    array[start:start + chunk] = rng.standard_normal((chunk, array.shape[1]))
"""

SWAPPING_WRITER = """
import sys, time, zarr
from dasketch.storage.outputs import DENSE_FORMAT, write_atomically
path, seconds = sys.argv[1], float(sys.argv[2])
base = zarr.open_array(path, mode="r")[...]
print("writing", flush=True)
end, scale = time.monotonic() + seconds, 2
while time.monotonic() < end:  # version k holds k times the first one
    data = scale * base
    write_atomically(lambda tmp: zarr.create_array(
        tmp, data=data, chunks=(CHUNK, base.shape[1]),
        attributes={"format": DENSE_FORMAT}), path, True)
    scale += 1
"""


def _start_writer(script, *args):
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script).replace(
        "CHUNK", str(CHUNK)), *map(str, args)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    return proc


def _is_one_version(sketch, base):
    """Whether ``sketch`` is a certified sketch of ``k * base`` for a whole k."""
    scale = np.sqrt(sketch.frobenius_sq / (base ** 2).sum())
    if abs(scale - round(scale)) > 1e-9 * scale:
        return False
    A = round(scale) * base
    error = np.abs(np.linalg.eigvalsh(A.T @ A - sketch.covariance())).max()
    return error <= sketch.error_bound * (1 + 1e-9)


@pytest.mark.parametrize("writer", ["in place", "swap"])
def test_a_store_rewritten_during_a_job_is_an_error(writer, tmp_path, cluster_client):
    """A real writer process rewrites chunks in place, or swaps a new version of
    the store in (write to a temporary, rename), while jobs run: a job either
    fails with a one-line error or, having read one version only (between two
    swaps), returns a sketch whose bound holds for that version."""
    path = tmp_path / "X.zarr"
    write_synthetic(path, ROWS, FEATURES, chunk_rows=CHUNK)
    base = zarr.open_array(str(path), mode="r")[...]
    if writer == "in place":
        proc = _start_writer(IN_PLACE_WRITER, path, ROWS, CHUNK, 60)
    else:
        proc = _start_writer(SWAPPING_WRITER, path, 60)
    failures = []
    try:
        for _ in range(5):
            try:
                sketch = dasketch.sketch(str(path), 8, block_rows=CHUNK, client=cluster_client)
            except (ValueError, FileNotFoundError) as exc:
                failures.append(str(exc))
                continue
            assert writer == "swap" and _is_one_version(sketch, base)
    finally:
        proc.kill()
        proc.wait()
    assert failures, "no job saw the writer"
    for message in failures:
        assert "\n" not in message, message
        assert ("changed under the job" in message or "rewritten" in message
                or "no zarr store" in message or "cannot be read" in message), message


def test_all_zero_chunks_left_out_by_dask_to_zarr_read_as_zeros(tmp_path):
    values = np.random.default_rng(0).standard_normal((4000, 6))
    values[1000:3000] = 0.0  # two chunks that zarr does not write
    path = tmp_path / "masked.zarr"
    da.from_array(values, chunks=(1000, 6)).to_zarr(str(path))
    stored = sorted(p.name for p in (path / "c").iterdir())
    assert stored == ["0", "3"]  # zarr's write_empty_chunks=False left them out
    sketch = dasketch.sketch(str(path), 4, block_rows=500)
    reference = dasketch.sketch(values, 4, block_rows=500)
    np.testing.assert_allclose(sketch.B.T @ sketch.B, reference.B.T @ reference.B,
                               rtol=1e-12, atol=1e-12)
    zeros = tmp_path / "zeros.zarr"
    da.zeros((3000, 5), chunks=(1000, 5)).to_zarr(str(zeros))
    empty = dasketch.sketch(str(zeros), 3)
    assert empty.n_rows == 3000 and empty.error_bound == 0 and not empty.B.any()
    with pytest.raises(ValueError, match="lacks 2 of 4 chunks"):
        dasketch.sketch(str(path), 4, missing_chunks="raise")


def test_a_chunk_deleted_after_opening_is_an_error_not_the_fill_value(tmp_path):
    path = tmp_path / "X.zarr"
    write_synthetic(path, 3000, 4, chunk_rows=1000)
    X = open_zarr_array(path)
    (path / "c" / "1" / "0").unlink()
    with pytest.raises(ValueError, match="changed under the job"):
        X.sum().compute()
    zarr_array = zarr.open_array(str(path), mode="r+")
    Y = open_zarr_array(path)
    zarr_array[0:10] = 1.0  # rewrites chunk c/0/0 after the opening
    with pytest.raises(ValueError, match="changed under the job|rewritten"):
        Y.sum().compute()


def test_a_remote_store_rewritten_after_opening_is_an_error():
    """An fsspec store (here memory://) keeps its key listing when a chunk is
    rewritten in place; the fingerprint's per-object version (ETag, generation or
    modification time) still tells."""
    url = f"memory://store-changes-{uuid.uuid4().hex}/X.zarr"
    store = zarr.create_array(url, shape=(3000, 4), chunks=(1000, 4), dtype="f8")
    store[:] = np.random.default_rng(0).standard_normal((3000, 4))
    X = open_zarr_array(url)
    time.sleep(0.01)  # a modification time that differs
    store[0:10] = 1.0  # same keys, chunk c/0/0 rewritten
    with pytest.raises(ValueError, match="changed under the job"):
        X.sum().compute()
    np.testing.assert_allclose(open_zarr_array(url).sum().compute(), store[:].sum())


REMOTE_WRITER = """
import os, sys, time, numpy as np, zarr
path, rows, chunk, started, done = sys.argv[1], *map(int, sys.argv[2:4]), *sys.argv[4:6]
array = zarr.open_array(path, mode="r+")
print("writing", flush=True)
end = time.monotonic() + 120
while not os.path.exists(started) and time.monotonic() < end:
    time.sleep(0.01)
array[rows - chunk:rows] = 7.0  # the last chunk, same key, rewritten
open(done, "w").close()
"""


def _remote_store(tmp_path, rows=40 * CHUNK // 10, features=6):
    """A store on disk, addressed through fsspec's ``local://`` protocol: read
    through zarr's FsspecStore and fingerprinted by its listing, as an object
    store is (no per-read ``stat``), yet reachable by the worker processes."""
    path = tmp_path / "remote.zarr"
    values = np.random.default_rng(3).standard_normal((rows, features))
    zarr.create_array(str(path), data=values, chunks=(CHUNK // 10, features))
    url = f"local://{path}"
    assert not is_local_path(url)
    return path, url, values


def test_a_remote_store_rewritten_after_the_workers_checked_it_fails_the_job(
        tmp_path, cluster_client):
    """A writer process rewrites a chunk of a remote store once the job's first
    block has been read (the workers have checked the store by then, and do not
    list it again): the job ends in a one-line error naming the store and the
    chunk, never a result. The same pass over the unchanged store is exact."""
    path, url, values = _remote_store(tmp_path)
    blocks = as_row_blocks(url, block_rows=CHUNK // 10)
    assert compute(map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add),
                   client=cluster_client)[0] == pytest.approx(values.sum(axis=0), abs=1e-9)

    started, done = tmp_path / "started", tmp_path / "done"

    def waits_for_the_writer(block, start, stop):
        if start == 0:  # read already; the writer rewrites the last chunk now
            open(started, "w").close()
            end = time.monotonic() + 120
            while not os.path.exists(done) and time.monotonic() < end:
                time.sleep(0.01)
        return block.sum(axis=0)

    proc = _start_writer(REMOTE_WRITER, path, values.shape[0], CHUNK // 10, started, done)
    try:
        with pytest.raises(ValueError) as info:
            compute(map_reduce(blocks, waits_for_the_writer, add), client=cluster_client)
        assert proc.wait(timeout=60) == 0 and done.exists()
    finally:
        proc.kill()
        proc.wait()
    message = str(info.value)
    assert "\n" not in message and url in message, message
    assert "rewritten while the job ran" in message and "c/39/0" in message, message


def test_blocks_kept_in_memory_check_the_remote_store_they_came_from(tmp_path):
    """Passes over blocks cached from a remote store list it again when they end."""
    path, url, values = _remote_store(tmp_path)
    blocks, choice = cache_blocks(as_row_blocks(url, block_rows=CHUNK // 10), True)
    assert choice.cached
    total = map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add)
    np.testing.assert_allclose(compute(total)[0], values.sum(axis=0), atol=1e-9)
    time.sleep(0.01)
    zarr.open_array(str(path), mode="r+")[0:10] = 1.0
    with pytest.raises(ValueError, match="rewritten while the job ran .rewritten: c/0/0"):
        compute(total)


@pytest.mark.parametrize("block_rows", [None, CHUNK // 10])
def test_blocks_kept_from_a_remote_store_never_run_eagerly(tmp_path, block_rows):
    """Blocks in memory run their passes eagerly (one block, or under the
    synchronous scheduler), except blocks kept from a remote store, whose passes
    must list it again when they end."""
    path, url, values = _remote_store(tmp_path)
    with dask.config.set(scheduler="synchronous"):
        blocks, _ = cache_blocks(as_row_blocks(url, block_rows=block_rows), True)
        assert not run_eagerly(blocks).eager
        total = map_reduce(run_eagerly(blocks), lambda b, start, stop: b.sum(axis=0), add)
        time.sleep(0.01)
        zarr.open_array(str(path), mode="r+")[0:10] = 1.0
        with pytest.raises(ValueError, match="rewritten while the job ran"):
            compute(total)
        local, _ = cache_blocks(as_row_blocks(str(path), block_rows=block_rows), True)
        assert run_eagerly(local).eager


def test_an_unchanged_remote_store_sketches_as_the_local_path(tmp_path, cluster_client):
    path, url, values = _remote_store(tmp_path)
    remote = dasketch.sketch(url, 4, block_rows=CHUNK // 10, client=cluster_client)
    local = dasketch.sketch(str(path), 4, block_rows=CHUNK // 10, client=cluster_client)
    np.testing.assert_array_equal(remote.B, local.B)
    assert remote.error_bound == local.error_bound and remote.n_rows == values.shape[0]


def test_a_walk_over_a_remote_store_lists_it_again_after_the_last_block(tmp_path):
    """The online learners' block-by-block walk checks the store once, at its end."""
    path, url, values = _remote_store(tmp_path)
    walk = iter_row_blocks(as_row_blocks(url, block_rows=CHUNK // 10))
    start, stop, block = next(walk)
    np.testing.assert_array_equal(block, values[start:stop])
    time.sleep(0.01)
    zarr.open_array(str(path), mode="r+")[-1] = 1.0
    with pytest.raises(ValueError, match="rewritten while the job ran .rewritten: c/39/0"):
        for _ in walk:
            pass
    assert sum(stop - start for start, stop, _ in iter_row_blocks(
        as_row_blocks(url, block_rows=CHUNK // 10))) == values.shape[0]


def test_wide_blocks_of_a_remote_store_check_it(tmp_path, monkeypatch):
    """Blocks wider than the reused read buffers are read by the store's own
    chunk tasks, whose optimised graph keeps no layer names: they still list the
    store again when the computation ends."""
    import dasketch._blocks.readers.dask_chunks

    monkeypatch.setattr(dasketch._blocks.readers.dask_chunks, "REUSED_READ_BYTES", 0)
    path, url, values = _remote_store(tmp_path)
    blocks = as_row_blocks(url, block_rows=CHUNK // 10)
    assert blocks.reader is None
    total = map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add)
    np.testing.assert_allclose(compute(total)[0], values.sum(axis=0), atol=1e-9)
    time.sleep(0.01)
    zarr.open_array(str(path), mode="r+")[-1] = 1.0
    with pytest.raises(ValueError, match="rewritten while the job ran .rewritten: c/39/0"):
        compute(total)
