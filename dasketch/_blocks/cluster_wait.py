"""Waiting for a computation on a ``distributed`` cluster, never silently forever.

A scheduler queues tasks while it has no workers: with none ever started, or
after all of them were lost and none came back, a computation would wait
forever at the same progress. :func:`gather_watched` waits for the futures of a
computation and, when the scheduler has had no worker for longer than the
worker timeout, cancels them and raises :class:`TimeoutError` naming the
scheduler and what to do. The timeout is the Dask configuration value
``dasketch.worker-timeout`` (default ``"60s"``; ``DASK_DASKETCH__WORKER_TIMEOUT``
in the environment).
"""

from __future__ import annotations

import time

import dask

WORKER_TIMEOUT_KEY = "dasketch.worker-timeout"
DEFAULT_WORKER_TIMEOUT = "60s"
# How often the scheduler's worker count is asked while a computation runs.
POLL_SECONDS = 1.0


def worker_timeout():
    """Seconds a computation may wait with no worker (``dasketch.worker-timeout``)."""
    from dask.utils import parse_timedelta

    value = dask.config.get(WORKER_TIMEOUT_KEY, DEFAULT_WORKER_TIMEOUT)
    try:
        seconds = parse_timedelta(value, default="seconds")
    except (TypeError, ValueError, KeyError):
        seconds = None
    if seconds is None or not seconds > 0:
        raise ValueError(f"dask config {WORKER_TIMEOUT_KEY!r} must be a positive duration "
                         f"such as '60s', got {value!r}")
    return float(seconds)


def _n_workers(client):
    return len(client.scheduler_info().get("workers", {}))


def gather_watched(client, futures):
    """``client.gather(futures)`` once they are done; :class:`TimeoutError` if the
    scheduler has no worker for longer than :func:`worker_timeout` meanwhile
    (the futures are cancelled first)."""
    limit = worker_timeout()
    try:
        _wait_for_workers_and_futures(client, futures, limit)
        return client.gather(futures)
    finally:  # as Client.get does: the scheduler forgets the results at once
        for future in futures:
            future.release()


def _wait_for_workers_and_futures(client, futures, limit):
    from distributed import wait
    from distributed.client import FuturesCancelledError

    idle_since = None
    while True:
        try:
            with client.as_current():  # wait() asks for the current client
                wait(futures, timeout=POLL_SECONDS)
            return
        except FuturesCancelledError:  # gather raises it as Client.get does
            return
        except TimeoutError:
            pass
        if _n_workers(client):
            idle_since = None
            continue
        now = time.monotonic()
        idle_since = now if idle_since is None else idle_since
        if now - idle_since >= limit:
            client.cancel(futures)
            raise TimeoutError(
                f"the Dask scheduler at {client.scheduler.address!r} has had no worker for "
                f"{limit:g} s (none joined, or all were lost), so the computation was "
                "cancelled; start workers (dask worker ADDRESS), or wait longer with the "
                f"dask config {WORKER_TIMEOUT_KEY!r}")
