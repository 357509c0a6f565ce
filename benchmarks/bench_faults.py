"""Fault matrix: jobs on a real Dask cluster with processes killed in the middle.

A scheduler and two workers are started with the command lines of
``deploy/docker-compose.yml`` on 127.0.0.1 (as the tests do). Each scenario runs a
job over a zarr store and kills something once a given fraction of the
scheduler's tasks is done: a worker process (its nanny restarts it, like a
container restart), a whole ``dask worker`` with its nanny (capacity lost), or the
scheduler. Recorded: whether the job finished, whether the result equals the
fault-free one bit for bit, how many finished results the victim held, and the
time overhead of recovery against the median fault-free time.

Jobs: ``dasketch.sketch`` (RFD, streaming block updates) and, as the peer, the
same pass written in plain ``dask.array`` (``X.T @ X`` tree reduction), under the
same faults. Scheduler loss and a NaN in block 37 are timed to the error.

Edges (``--edges`` runs only these): stores a process cluster cannot read
correctly (a ``memory://`` store written by the client, a deleted chunk file, a
never-written store), with plain ``dask.array`` over the same stores as the
peer (it reads them as zeros without an error); bad scheduler addresses
(refused, malformed, a port that never answers), with a plain
``distributed.Client`` as the peer, each in a fresh process: seconds until it
returns and lines left on stderr; and ``n_workers=0``.

Results: ``benchmarks/results/faults.json`` and ``faults.png`` (``faults_edges.*``
with ``--edges``).
Usage: ``python -m benchmarks.bench_faults [--quick] [--edges]``
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dasketch  # noqa: E402
from dasketch.datasets import write_synthetic  # noqa: E402

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_faults.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, parser, result_path, write_results  # noqa: E402
from benchmarks._process_cluster import (  # noqa: E402
    Job,
    ProcessCluster,
    kill_mid_job,
    kill_process,
    kill_worker_and_nanny,
    progress,
    wait_until,
)

ENV = {}  # 2 workers x 1 thread on a 2-core machine (ProcessCluster's default)


def sketch_job(client, path, block_rows):
    return lambda: dasketch.sketch(path, 16, client=client, block_rows=block_rows,
                                   update="buffered")


def gram_job(client, path, block_rows):
    import dask.array as da

    def run():
        X = da.from_zarr(str(path)).rechunk((block_rows, -1))
        return (X.T @ X).compute(scheduler=client)
    return run


def same(a, b):
    """Bitwise equal?"""
    if isinstance(a, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(np.array_equal(a.B, b.B) and a.shrinkage == b.shrinkage)


def deviation(a, b):
    """Largest difference of the estimates of ``A^T A``, relative to its largest entry."""
    if not isinstance(a, np.ndarray):
        a, b = a.B.T @ a.B, b.B.T @ b.B
    return float(np.abs(a - b).max() / np.abs(b).max())


def timed(job_factory):
    job = Job(job_factory()).join()
    if job.error is not None:
        raise job.error
    return job.result, job.elapsed


# ------------------------------------------------------------------ storage and address faults
PEER_HANG_S = 30  # a plain distributed.Client that has not failed by then is counted as a hang


def storage_cases(tmp):
    """Stores a process cluster cannot read correctly: ``name -> (input, what the
    error must name, keyword arguments of the sketch)``. Absent chunks are the
    fill value in zarr, so the deleted and never-written stores are read with
    ``missing_chunks="raise"``, as for a store known to be complete."""
    import uuid

    import zarr

    cases = {}
    url = f"memory://bench-{uuid.uuid4().hex}/X.zarr"
    write_synthetic(url, 4096, 16, chunk_rows=512)
    cases["memory:// store"] = (url, "memory://", {})
    deleted = tmp / "deleted.zarr"
    write_synthetic(deleted, 4096, 16, chunk_rows=512)
    (deleted / "c" / "3" / "0").unlink()
    strict = {"missing_chunks": "raise"}
    cases["deleted chunk file"] = (str(deleted), "c/3/0", strict)
    unwritten = tmp / "unwritten.zarr"
    zarr.create_array(str(unwritten), shape=(4096, 16), chunks=(512, 16), dtype="float64")
    cases["never-written store"] = (str(unwritten), "lacks 8 of 8", strict)
    return cases


def storage_faults(tmp, client):
    """dasketch.sketch against the plain dask.array Gram ``X^T X`` over the same
    stores: an error naming the store, or a silently wrong answer."""
    import dask.array as da

    rows = []
    for fault, (url, needle, options) in storage_cases(tmp).items():
        started = time.monotonic()
        try:
            dasketch.sketch(url, 8, client=client, **options)
            outcome, message = "result", None
        except Exception as exc:  # noqa: BLE001 - recorded
            outcome, message = "error", f"{type(exc).__name__}: {exc}"
        seconds = time.monotonic() - started
        X = da.from_zarr(url)
        zero_rows = int((X == 0).all(axis=1).sum().compute(scheduler=client))
        peer = f"no error; {zero_rows} of {X.shape[0]} rows read as zeros"
        rows.append({"job": "dasketch.sketch", "fault": fault, "at": None, "finished": False,
                     "equal": False, "outcome": outcome, "seconds_to_error": seconds,
                     "error_names_cause": bool(message and needle in message),
                     "one_line": bool(message and "\n" not in message),
                     "error": (message or "")[:300],
                     "peer": "dask.array", "peer_outcome": peer})
        print(f"{fault:24s} dasketch: {outcome} after {seconds:.2f} s "
              f"(names it: {rows[-1]['error_names_cause']}); dask.array: {peer}",
              flush=True)
    return rows


def _silent_port():
    """A listening socket that accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    return server, f"tcp://127.0.0.1:{server.getsockname()[1]}"


def _time_connect(code, timeout):
    started = time.monotonic()
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return timeout, None, "hang"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return time.monotonic() - started, len(lines), result.stdout.strip()[:200]


def address_faults():
    """Connecting to bad scheduler addresses: dasketch.get_client against a plain
    ``distributed.Client(address, timeout="8s")``, each in a fresh process
    (seconds until it returns, and lines it leaves on stderr)."""
    server, silent = _silent_port()
    rows = []
    try:
        for fault, address in (("refused", "tcp://127.0.0.1:1"),
                               ("malformed", "not-an-address"),
                               ("silent port", silent)):
            ours = ("import dasketch\ntry:\n    dasketch.get_client(%r)\n"
                    "except (OSError, ValueError) as exc:\n    print(exc)\n" % address)
            peer = ("from distributed import Client\ntry:\n    Client(%r, timeout='8s')\n"
                    "except Exception as exc:\n    print(type(exc).__name__, exc)\n" % address)
            seconds, noise, message = _time_connect(ours, PEER_HANG_S)
            peer_seconds, peer_noise, peer_message = _time_connect(peer, PEER_HANG_S)
            rows.append({"job": "dasketch.get_client", "fault": f"scheduler address: {fault}",
                         "at": None, "finished": False, "equal": False,
                         "seconds_to_error": seconds, "stderr_lines": noise,
                         "error": message, "error_names_cause": address in (message or ""),
                         "peer": "distributed.Client", "peer_seconds": peer_seconds,
                         "peer_stderr_lines": peer_noise, "peer_error": peer_message})
            print(f"address {fault:12s} dasketch {seconds:5.2f} s, {noise} stderr lines; "
                  f"Client {peer_seconds:5.2f} s{' (hang)' if peer_message == 'hang' else ''}"
                  f", {peer_noise} stderr lines", flush=True)
    finally:
        server.close()
    started = time.monotonic()
    try:
        dasketch.get_client(n_workers=0)
        message = None
    except ValueError as exc:
        message = str(exc)
    rows.append({"job": "dasketch.get_client", "fault": "n_workers=0", "at": None,
                 "finished": False, "equal": False,
                 "seconds_to_error": time.monotonic() - started, "error": message,
                 "error_names_cause": bool(message and "n_workers" in message)})
    return rows


def run_edges(tmp):
    """Storage faults on a fresh 2-worker cluster, then address faults."""
    with ProcessCluster(tmp / "logs-edges", n_workers=2, env=ENV) as cluster, \
            cluster.client(n_workers=2) as client:
        rows = storage_faults(tmp, client)
    return rows + address_faults()


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--edges", action="store_true",
                        help="only the storage and address faults")
    args = options.parse_args(argv)
    if args.edges:
        with tempfile.TemporaryDirectory() as tmp:
            rows = run_edges(Path(tmp))
        meta = {"workers": 2, "threads_per_worker": 1,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "facts": machine_facts()}
        write_results("faults_edges", {"meta": meta, "rows": rows},
                      lambda report, path: plot_edges(report["rows"], path), quick=args.quick)
        return rows
    n_blocks, block_rows, n_features = (48, 1024, 64) if args.quick else (240, 2048, 64)
    repeats = 2 if args.quick else 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        store = tmp / "X.zarr"
        X = write_synthetic(store, n_blocks * block_rows, n_features, rank=16, noise=0.05,
                            chunk_rows=block_rows)
        meta = {"n_rows": int(X.shape[0]), "n_features": n_features,
                "store_bytes": int(X.nbytes), "block_rows": block_rows, "blocks": n_blocks,
                "workers": 2, "threads_per_worker": 1, "sketch_size": 16,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores",
                "facts": machine_facts(), "quick": args.quick}
        cluster = ProcessCluster(tmp / "logs", n_workers=2, env=ENV)
        try:
            client = cluster.client(n_workers=2)
            jobs = {"dasketch.sketch": sketch_job, "dask.array X^T X": gram_job}
            reference, baseline = {}, {}
            for name, factory in jobs.items():
                timed(lambda factory=factory: factory(client, store, block_rows))  # warm-up
                times = []
                for _ in range(repeats):
                    result, elapsed = timed(lambda factory=factory: factory(client, store,
                                                                            block_rows))
                    times.append(elapsed)
                reference[name] = result
                baseline[name] = statistics.median(times)
                rows.append({"job": name, "fault": "none", "at": None, "finished": True,
                             "equal": True, "seconds": baseline[name], "overhead_s": 0.0,
                             "repeats": times})
                print(f"{name:18s} fault-free  {baseline[name]:6.2f} s", flush=True)

            scenarios = [("worker process killed", kill_process, 0.1),
                         ("worker process killed", kill_process, 0.5),
                         ("worker process killed", kill_process, 0.9),
                         ("worker + nanny killed", kill_worker_and_nanny, 0.5)]
            for fault, kill, at in scenarios:
                for name, factory in jobs.items():
                    if name != "dasketch.sketch" and at != 0.5:
                        continue
                    job, info = kill_mid_job(client, factory(client, store, block_rows),
                                             kill=kill, at_fraction=at)
                    ok = job.error is None
                    row = {"job": name, "fault": fault, "at": at, "finished": ok,
                           "equal": ok and same(job.result, reference[name]),
                           "relative_deviation": deviation(job.result, reference[name])
                           if ok else None,
                           "seconds": job.elapsed,
                           "overhead_s": job.elapsed - baseline[name],
                           "tasks_done_at_kill": info["tasks_done"],
                           "tasks_total": info["tasks_total"],
                           "results_lost": info["results_lost"],
                           "error": None if ok else f"{type(job.error).__name__}: {job.error}"}
                    rows.append(row)
                    print(f"{name:18s} {fault} at {at:.0%}: finished={ok} "
                          f"equal={row['equal']} {job.elapsed:6.2f} s "
                          f"(+{row['overhead_s']:.2f} s), lost {info['results_lost']} results",
                          flush=True)
                    while len(client.scheduler_info()["workers"]) < 2:  # restore capacity
                        if fault.startswith("worker + nanny"):
                            cluster.start_worker()
                        client.wait_for_workers(2, timeout=90)

            # The scheduler dies at 50 %: time from the kill to the client's error.
            job = Job(sketch_job(client, store, block_rows))
            total = wait_until(lambda: client.run_on_scheduler(progress)[1], 60,
                               what="job submitted")
            wait_until(lambda: client.run_on_scheduler(progress)[0] >= 0.5 * total, 120,
                       what="half of the job")
            killed = time.monotonic()
            cluster.kill_scheduler()
            job.join(120)
            rows.append({"job": "dasketch.sketch", "fault": "scheduler killed", "at": 0.5,
                         "finished": job.error is None, "equal": False,
                         "seconds_to_error": time.monotonic() - killed,
                         "error": f"{type(job.error).__name__}: {job.error}"[:300]})
            print(f"scheduler killed: error after {rows[-1]['seconds_to_error']:.3f} s: "
                  f"{rows[-1]['error'][:120]}", flush=True)
            client.close(timeout=5)
        finally:
            cluster.close()

        # Bad data: NaN in block 37, on a fresh cluster.
        import zarr

        array = zarr.open_array(str(store), mode="r+")
        bad_row = 37 * block_rows + 11
        array[bad_row, 3] = np.nan
        with ProcessCluster(tmp / "logs2", n_workers=2, env=ENV) as cluster2, \
                cluster2.client(n_workers=2) as client2:
            job = Job(sketch_job(client2, store, block_rows)).join()
            rows.append({"job": "dasketch.sketch", "fault": "NaN in block 37", "at": None,
                         "finished": False, "equal": False, "seconds_to_error": job.elapsed,
                         "error_names_row": str(bad_row) in str(job.error),
                         "error": f"{type(job.error).__name__}: {job.error}"[:300]})
            print(f"NaN block 37: error after {job.elapsed:.2f} s, names row: "
                  f"{rows[-1]['error_names_row']}", flush=True)
        rows += run_edges(tmp)

    report = {"meta": meta, "rows": rows}
    write_results("faults", report, lambda report, path: plot(report["rows"], path),
                  quick=args.quick)
    plot_edges(rows, result_path("faults_edges", args.quick, ".png"))
    return rows


def plot(rows, path):
    timed_rows = [r for r in rows if "seconds" in r and r["finished"]]
    labels = [r["fault"] + ("" if r["at"] is None else f"\nat {r['at']:.0%}")
              for r in timed_rows if r["job"] == "dasketch.sketch"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for offset, name, colour in ((-0.2, "dasketch.sketch", "C0"),
                                 (0.2, "dask.array X^T X", "C1")):
        for i, row in enumerate(r for r in timed_rows if r["job"] == "dasketch.sketch"):
            match = [r for r in timed_rows if r["job"] == name and r["fault"] == row["fault"]
                     and r["at"] == row["at"]]
            if match:
                r = match[0]
                ax.bar(i + offset, r["seconds"], width=0.38, color=colour,
                       label=name if i == 0 else None)
                ax.text(i + offset, r["seconds"], "=" if r["equal"] else "≠", ha="center",
                        va="bottom")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("wall time (s)")
    ax.set_title("Job time under faults, 2 workers ('=': result bitwise equal to fault-free)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_edges(rows, path):
    """Seconds until dasketch's error against its peer's outcome, per edge case."""
    edge = [r for r in rows if "peer" in r]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, row in enumerate(edge):
        ax.bar(i - 0.2, row["seconds_to_error"], width=0.38, color="C0",
               label="dasketch: error naming the cause" if i == 0 else None)
        peer_seconds = row.get("peer_seconds", 0.0)
        ax.bar(i + 0.2, peer_seconds or 0.05, width=0.38, color="C3",
               label="peer (dask.array / distributed.Client)" if i == 0 else None)
        outcome = ("hang" if row.get("peer_error") == "hang" else
                   "zeros" if "zeros" in str(row.get("peer_outcome")) else "error")
        ax.text(i + 0.2, peer_seconds or 0.05, outcome, ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(edge)), [r["fault"].replace("scheduler address: ", "address\n")
                                     for r in edge], fontsize=8)
    ax.set_ylabel("seconds until the call returns")
    ax.set_title("Storage and address faults: dasketch errors vs the peer's outcome")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
