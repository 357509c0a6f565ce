"""A dual random projection fit from a zarr store with ``cache=True`` on a
``LocalCluster`` of single-threaded worker processes, against the same fit in
memory, and what one cached pass costs.

Both fits run in interleaved rounds (best of ``repeat``). One more cluster fit
is then traced: ``distributed``'s task stream gives the tasks of every pass by
kind, the compute seconds of every worker, and every transfer between workers
(so whether cached blocks, the tasks ``read_block``, move);
cProfile of the client gives its seconds outside the waits for the cluster
(graph construction, tokenisation, the fit's own linear algebra). A pass's
overhead is what neither the client nor the slowest worker spent computing:
the fit's wall time less the client's busy seconds and the slowest worker's
compute, per pass (scheduling, messages, transfers, waits).
"""

from __future__ import annotations

import collections
import cProfile
import os
import pstats
import tempfile
import time
import warnings

import dask
import dask.array as da
import numpy as np

from benchmarks._common import local_cluster, side_by_side


def _key_name(key):
    key = key[0] if isinstance(key, tuple) else key
    return key.rsplit("-", 1)[0]


def _waiting_seconds(profile):
    """Seconds the client spent blocked on locks (waiting for the cluster)."""
    stats = pstats.Stats(profile).stats
    return sum(entry[2] for (_, _, name), entry in stats.items()
               if name == "<method 'acquire' of '_thread.lock' objects>")


def _incoming(dask_worker=None):
    """The transfers into a worker (run by ``Client.run``): ``(start, {key: bytes})``."""
    return [(entry["start"], {_key_name(k): int(v or 0) for k, v in entry["keys"].items()})
            for entry in dask_worker.transfer_incoming_log]


def _moved(client, since):
    """Keys moved between workers since ``since`` (``time.time()``), with their bytes."""
    return [(key, nbytes) for log in client.run(_incoming).values()
            for start, keys in log if start >= since for key, nbytes in keys.items()]


def trace(fit, client, chunk_bytes):
    """One traced run of ``fit`` on ``client``: see the module."""
    from distributed import get_task_stream

    from benchmarks.bench_cores import pass_timer

    profile = cProfile.Profile()
    with warnings.catch_warnings(), pass_timer() as seconds, get_task_stream(client) as ts:
        warnings.simplefilter("ignore")
        start, since = time.perf_counter(), time.time()
        profile.enable()
        res = fit()
        profile.disable()
        wall = time.perf_counter() - start
    moved = _moved(client, since)
    transfers = [nbytes for _, nbytes in moved]
    largest = max(moved, key=lambda item: item[1], default=("", 0))
    tasks, worker_compute = collections.Counter(), collections.Counter()
    for task in ts.data:
        tasks[_key_name(task["key"])] += 1
        for step in task["startstops"]:
            if step["action"] == "compute":
                worker_compute[task["worker"]] += step["stop"] - step["start"]
    passes = int(res.n_passes)
    slowest = max(worker_compute.values(), default=0.0)
    client_busy = wall - _waiting_seconds(profile)
    return {"seconds": wall, "n_passes": passes,
            "passes_seconds": {k: round(v, 4) for k, v in seconds.items()},
            "tasks_per_pass": {k: v / passes for k, v in tasks.items()},
            "worker_compute_seconds": {k: round(v, 4) for k, v in worker_compute.items()},
            "slowest_worker_seconds_per_pass": slowest / passes,
            "overhead_seconds_per_pass": (wall - client_busy - slowest) / passes,
            "client_busy_seconds_per_pass": client_busy / passes,
            "transfers": len(transfers), "transfer_bytes": int(sum(transfers)),
            "largest_transfer": list(largest),
            "store_chunk_bytes": int(chunk_bytes),
            "cached_block_bytes_moved": sum(b for key, b in moved if key == "read_block")}


def cached_fit_on_cluster(n, d, m, rank, repeat, n_workers=2):
    """In-memory and cached-cluster fits of ``n x d`` low-rank-plus-noise data
    (ridge, ``alpha`` = 1e-3 of the mean eigenvalue, ``tol = 1e-6``), timed side
    by side, and the trace of one cached fit."""
    from benchmarks.bench_cores import low_rank_plus_noise

    X, y = low_rank_plus_noise(n, d, rank)
    alpha = 1e-3 * float(np.sum(X * X)) / min(X.shape)
    params = dict(alpha=alpha, sketch_size=m, tol=1e-6, random_state=0, fit_intercept=False)
    chunk = max(1, n // 8)
    with tempfile.TemporaryDirectory(prefix="bench-cached-") as tmp:
        path = os.path.join(tmp, "X.zarr")
        with dask.config.set(scheduler="threads"):   # written before the cluster starts
            da.from_array(X, chunks=(chunk, d)).to_zarr(path)
        with local_cluster(n_workers=n_workers) as client:
            return _fits(X, y, path, client, params, chunk, repeat, n_workers)


def _fits(X, y, path, client, params, chunk, repeat, n_workers):
    from dasketch.linear_model import dual_random_projection

    def in_memory():   # on this process's threads, as without a cluster
        with warnings.catch_warnings(), dask.config.set(scheduler="threads"):
            warnings.simplefilter("ignore")
            return dual_random_projection(X, y, **params)

    def cached():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dual_random_projection(path, y, cache=True, client=client, **params)

    fits = {"in memory": in_memory, "zarr, cache=True, cluster": cached}
    timings, results = side_by_side(fits, repeat)
    traced = trace(cached, client, chunk * X.shape[1] * 8)
    memory, cluster = (timings[k]["wall"] for k in fits)
    return {"shape": list(X.shape), "m": params["sketch_size"], "workers": n_workers,
            "zarr_chunk_rows": chunk, "in_memory_seconds": memory,
            "cluster_cached_seconds": cluster, "cluster_over_memory": cluster / memory,
            "n_passes": {k: int(r.n_passes) for k, r in results.items()},
            "same_coef": bool(np.array_equal(*(r.coef for r in results.values()))),
            "rounds": {k: t["rounds"] for k, t in timings.items()},
            "trace": traced, "load_average": os.getloadavg()}


def plot_cached(report, path):
    """The two fits, and one cached pass split into the slowest worker's compute
    and the overhead."""
    import matplotlib.pyplot as plt

    from benchmarks._common import annotated_bars

    cached = report["cached"]
    traced = cached["trace"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    annotated_bars(left, {
        "in memory": (cached["in_memory_seconds"], f"{cached['n_passes']['in memory']} passes"),
        "zarr, cache=True,\ncluster": (cached["cluster_cached_seconds"],
                                       f"{cached['cluster_over_memory']:.2f}x")},
        highlight=("zarr, cache=True,\ncluster",))
    left.set_title(f"fit of {cached['shape'][0]:,} x {cached['shape'][1]}, "
                   f"{cached['workers']} workers")
    annotated_bars(right, {
        "slowest worker": (traced["slowest_worker_seconds_per_pass"], ""),
        "overhead": (traced["overhead_seconds_per_pass"],
                     f"{sum(traced['tasks_per_pass'].values()):.0f} tasks a pass"),
        "client busy": (traced["client_busy_seconds_per_pass"], "")}, highlight=("overhead",))
    right.set_title("one cached pass")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
