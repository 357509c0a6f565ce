"""A zarr store larger than the workers' total memory limit is sketched correctly."""

import os

import dask.array as da
import pytest
from distributed import Client, LocalCluster

import dasketch
from tests.helpers import spectral_norm


def _sketch_larger_than_memory(tmp_path, n_rows, memory_limit_bytes):
    path = tmp_path / "big.zarr"
    X = dasketch.write_synthetic(path, n_rows, 256, rank=128, power=0.5, chunk_rows=16384)
    n_workers = 2
    assert X.nbytes > n_workers * memory_limit_bytes, "the store must exceed total memory"
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      memory_limit=memory_limit_bytes, dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        pids = client.run(os.getpid)
        sketch = dasketch.sketch(path, 32, client=client)
        stored = da.from_zarr(str(path))
        gram = client.compute(stored.T @ stored).result()
        # No worker process was restarted (same PIDs), so none was killed for memory.
        assert client.run(os.getpid) == pids
    assert sketch.n_rows == n_rows
    error = spectral_norm(gram - sketch.covariance())
    assert error <= sketch.error_bound * (1 + 1e-9)
    return X.nbytes / (n_workers * memory_limit_bytes)


@pytest.mark.slow  # by default tests/test_faults.py sketches a store 3x a worker's limit
def test_store_larger_than_worker_memory(tmp_path):
    ratio = _sketch_larger_than_memory(tmp_path, 600_000, 400 * 2 ** 20)
    assert ratio > 1.4


@pytest.mark.slow
def test_two_gigabyte_store_two_workers_400mb(tmp_path):
    ratio = _sketch_larger_than_memory(tmp_path, 1_000_000, 400 * 2 ** 20)
    assert ratio > 2.3
