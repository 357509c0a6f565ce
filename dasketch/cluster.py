"""Connect to a Dask scheduler, or start an embedded LocalCluster."""

from __future__ import annotations

import os

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"


def default_cluster_size(memory_limit=None):
    """Worker processes and threads for an embedded cluster on this machine.

    One single-threaded worker process per core (numerical kernels release the GIL
    inside BLAS, but processes avoid contention in Python code), with the machine's
    memory split evenly unless ``memory_limit`` is given.
    """
    n_workers = max(os.cpu_count() or 1, 1)
    return {"n_workers": n_workers, "threads_per_worker": 1,
            "memory_limit": "auto" if memory_limit is None else memory_limit}


def get_client(address=None, *, n_workers=None, memory_limit=None, threads_per_worker=None,
               timeout="30s", dashboard_address=":0", set_as_default=True,
               **cluster_kwargs):
    """A ``distributed.Client``: connected to a scheduler, or on an embedded cluster.

    Closing the client (``client.close()``, or leaving a ``with`` block) closes
    what this function started and nothing else: on an existing scheduler only the
    connection is closed, the scheduler and its workers keep running; an embedded
    ``LocalCluster`` (owned by the client) is shut down with it.

    Parameters
    ----------
    address : str, optional
        Scheduler address such as ``tcp://10.0.0.5:8786``. Defaults to the
        ``DASK_SCHEDULER_ADDRESS`` environment variable; when neither is set, an
        embedded ``LocalCluster`` with worker processes is started.
    n_workers, memory_limit, threads_per_worker
        Size of the embedded cluster (default: one single-threaded worker process
        per core, memory split evenly). Ignored when connecting to an address.
    timeout : str
        How long to wait for a scheduler before raising ``OSError``.
    dashboard_address : str or None
        Dashboard of the embedded cluster (``":0"``: a free port; None: off).
    set_as_default : bool
        Make the client Dask's default scheduler, as ``distributed.Client``
        does: estimators (which hold no client) and ``dask.compute`` then run on
        it. With False, pass it as ``client=`` to functions or enter
        ``client.as_current()``.
    **cluster_kwargs
        Passed to ``LocalCluster``.

    Returns
    -------
    distributed.Client

    Examples
    --------
    >>> from dasketch import get_client
    >>> with get_client(n_workers=1, dashboard_address=None) as client:
    ...     print(client.submit(sum, [1, 2]).result())
    3
    """
    from distributed import Client

    address = address or os.environ.get(SCHEDULER_ENV) or None
    if address:
        if n_workers is not None or memory_limit is not None:
            raise ValueError("n_workers and memory_limit size an embedded cluster; they "
                             "cannot be used with a scheduler address")
        return Client(address, timeout=timeout, set_as_default=set_as_default)
    sizing = default_cluster_size(memory_limit)
    if n_workers is not None:
        sizing["n_workers"] = n_workers
    if threads_per_worker is not None:
        sizing["threads_per_worker"] = threads_per_worker
    # Without an address the client starts a LocalCluster that it owns and closes.
    return Client(processes=True, dashboard_address=dashboard_address,
                  set_as_default=set_as_default, **sizing, **cluster_kwargs)
