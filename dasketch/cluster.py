"""Connect to a Dask scheduler, or start an embedded LocalCluster.

Every mistake is found before anything starts: impossible cluster sizes and
malformed addresses raise ``ValueError``; an address that refuses, does not
answer or does not speak Dask's protocol raises ``OSError`` naming the address,
within the connection timeout (8 s by default).
"""

from __future__ import annotations

import numbers
import os
import socket
import time

from dasketch._blocks import worker_timeout
from dasketch.utils._sklearn_compat import validate_parameter_constraints
from dasketch.utils.params import POSITIVE_INT, Interval

SCHEDULER_ENV = "DASK_SCHEDULER_ADDRESS"
# The embedded cluster's dashboard: a free port, reachable from this machine only.
LOOPBACK_DASHBOARD = "127.0.0.1:0"
DEFAULT_TIMEOUT = "8s"
# Protocols whose address is host:port, checked with a plain TCP connection first
# (distributed itself retries a refused connection until its timeout).
_TCP_PROTOCOLS = ("tcp", "tls", "ws", "wss")


def default_cluster_size(memory_limit=None):
    """Worker processes and threads for an embedded cluster on this machine.

    One single-threaded worker process per core (numerical kernels release the GIL
    inside BLAS, but processes avoid contention in Python code), with the machine's
    memory split evenly unless ``memory_limit`` is given.
    """
    n_workers = max(os.cpu_count() or 1, 1)
    return {"n_workers": n_workers, "threads_per_worker": 1,
            "memory_limit": "auto" if memory_limit is None else memory_limit,
}


# Memory a worker process needs to start and run small tasks (an interpreter with
# NumPy, Dask and distributed loaded holds about 150 MiB): more workers than the
# machine's available memory holds at this size is refused before any starts.
MIN_WORKER_BYTES = 256 * 2 ** 20


def check_worker_count(n_workers):
    """``n_workers`` of an embedded cluster, if this machine can start them:
    ``ValueError`` naming the most it can (available memory over
    :data:`MIN_WORKER_BYTES` per worker) otherwise."""
    import psutil

    most = max(int(psutil.virtual_memory().available // MIN_WORKER_BYTES), 1)
    if n_workers > most:
        raise ValueError(f"n_workers={n_workers} worker processes cannot run on this machine: "
                         f"its available memory holds at most {most} (each needs about "
                         f"{MIN_WORKER_BYTES // 2 ** 20} MiB); use a cluster for more")
    return n_workers


def check_memory_limit(memory_limit):
    """``memory_limit`` as distributed accepts it: None, ``"auto"``, a byte
    string such as ``"2GiB"``, a number of bytes, or a fraction in (0, 1] of
    the machine's memory. Strings are parsed here (``ValueError`` naming the
    value when that fails); numbers are checked by the parameter constraints of
    :func:`get_client`."""
    from dask.utils import parse_bytes

    if not isinstance(memory_limit, str) or memory_limit == "auto":
        return memory_limit
    try:
        value = parse_bytes(memory_limit)
    except (TypeError, ValueError):
        value = None
    if value is None or not value > 0:
        raise ValueError(f"memory_limit must be 'auto', a size such as '2GiB', a number "
                         f"of bytes or a fraction of memory in (0, 1], got {memory_limit!r}")
    return memory_limit


def check_timeout(timeout):
    """Seconds of a timeout given as ``"10s"`` or a number (``ValueError`` otherwise)."""
    from dask.utils import parse_timedelta

    try:
        seconds = parse_timedelta(timeout, default="seconds")
    except (TypeError, ValueError, KeyError):
        seconds = None
    if seconds is None or not seconds > 0:
        raise ValueError(f"timeout must be a positive duration such as '10s', got {timeout!r}")
    return float(seconds)


def check_address(address):
    """``(protocol, host, port)`` of a scheduler address such as
    ``tcp://10.0.0.5:8786`` (``port`` is None for protocols without one).

    Raises
    ------
    ValueError
        Naming the address and what is wrong with it.
    """
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    expected = "expected an address such as tcp://10.0.0.5:8786"
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"scheduler address must be a non-empty string ({expected}), "
                         f"got {address!r}")
    try:
        protocol, location = parse_address(address.strip())
    except ValueError as exc:
        raise ValueError(f"scheduler address {address!r} is malformed: {exc}") from None
    if protocol not in registry.backends:
        raise ValueError(f"scheduler address {address!r} has an unknown protocol "
                         f"{protocol!r} ({expected})")
    if protocol not in _TCP_PROTOCOLS:
        return protocol, location, None
    try:
        host, port = parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"scheduler address {address!r} is malformed: {exc} "
                         f"({expected})") from None
    if not host or not 0 < port < 65536:
        raise ValueError(f"scheduler address {address!r} needs a host and a port in "
                         f"1-65535 ({expected})")
    return protocol, host, port


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _probe(address, host, port, seconds):
    """Open and close a TCP connection: fails at once when refused and within
    ``seconds`` when the host does not answer."""
    try:
        with socket.create_connection((host, port), timeout=seconds):
            pass
    except socket.timeout:
        raise OSError(f"cannot connect to the Dask scheduler at {address!r}: no answer "
                      f"within {seconds:g} s (is the host reachable?)") from None
    except ConnectionRefusedError:
        raise OSError(f"cannot connect to the Dask scheduler at {address!r}: connection "
                      "refused (is a scheduler running there?)") from None
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise OSError(f"cannot connect to the Dask scheduler at {address!r}: "
                      f"{reason}") from None


def _identify(address, seconds, timeout_seconds, security=None):
    """The scheduler's ``identity`` reply, asked over Dask's protocol within
    ``seconds`` overall (a peer that accepts the connection but never answers
    would otherwise hold ``Client`` forever)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as open_comm
    from distributed.security import Security

    async def ask():
        comm = await open_comm(address, timeout=seconds,
                               **(security or Security()).get_connection_args("client"))
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def bounded():
        return await asyncio.wait_for(ask(), seconds)

    # A thread of its own: the caller may already run an event loop (a notebook).
    with ThreadPoolExecutor(1) as pool:
        try:
            reply = pool.submit(asyncio.run, bounded()).result()
        except asyncio.TimeoutError:
            raise OSError(f"cannot connect to the Dask scheduler at {address!r}: no "
                          f"answer within {timeout_seconds:g} s") from None
        except OSError as exc:
            raise OSError(f"cannot connect to the Dask scheduler at {address!r}: "
                          f"{_first_line(exc)}") from None
        except Exception as exc:  # noqa: BLE001 - garbage from another service
            raise OSError(f"cannot connect to the Dask scheduler at {address!r}: what "
                          f"answers there does not speak Dask's protocol "
                          f"({type(exc).__name__})") from None
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind != "Scheduler":
        raise OSError(f"cannot connect to the Dask scheduler at {address!r}: what "
                      f"answers there is not a scheduler (it says {kind!r})")
    return reply


def connect(address, *, timeout=DEFAULT_TIMEOUT, **client_kwargs):
    """A ``distributed.Client`` connected to the scheduler at ``address``.

    Fails within ``timeout`` with a one-line ``OSError`` naming the address when
    nothing listens there, the host does not answer, or what answers is not a
    Dask scheduler; a malformed address is a ``ValueError`` before any
    connection is tried.
    """
    from distributed import Client

    protocol, host, port = check_address(address)
    seconds = check_timeout(timeout)
    deadline = time.monotonic() + seconds
    if port is not None:
        _probe(address, host, port, seconds)
    _identify(address, max(deadline - time.monotonic(), 0.1), seconds,
              client_kwargs.get("security"))
    try:
        return Client(address, timeout=seconds, **client_kwargs)
    except OSError as exc:  # distributed closed the client
        raise OSError(f"cannot connect to the Dask scheduler at {address!r}: "
                      f"{_first_line(exc)}") from None


MAIN_GUARD_MESSAGE = (
    "get_client() cannot start a cluster while a new process imports the main module "
    "of its parent (each worker process starts that way): start the cluster under "
    "'if __name__ == \"__main__\":' in the script")


def check_not_bootstrapping():
    """Refuse to start an embedded cluster from a process that is still importing
    its parent's main module, as ``multiprocessing`` does to start each worker
    process (the rule of its own check, ``_inheriting``): a script that starts a
    cluster without ``if __name__ == "__main__":`` would start one in every
    worker. ``RuntimeError`` in one line, naming the guard."""
    import multiprocessing

    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise RuntimeError(MAIN_GUARD_MESSAGE)


# The rules of the arguments of the function below (see dasketch.utils.params).
_GET_CLIENT_CONSTRAINTS = {
    "address": [str, None],
    "n_workers": [POSITIVE_INT, None],
    # values: check_memory_limit and check_timeout, which parse strings as dask does
    "memory_limit": [str, Interval(numbers.Real, 0, None, closed="neither"), None],
    "threads_per_worker": [POSITIVE_INT, None],
    "timeout": [str, Interval(numbers.Real, 0, None, closed="neither")],
    "dashboard_address": [str, None],
    "set_as_default": ["boolean"],
    "security": "no_validation",
    "cluster_kwargs": "no_validation",
}


def get_client(address=None, *, n_workers=None, memory_limit=None, threads_per_worker=None,
               timeout=DEFAULT_TIMEOUT, dashboard_address=LOOPBACK_DASHBOARD,
               set_as_default=True, security=None,
               **cluster_kwargs):
    """Return a ``distributed.Client``: connected to a scheduler, or on an embedded cluster.

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
    n_workers : int >= 1, optional
        Worker processes of the embedded cluster (default: one per core). Only for
        the embedded cluster.
    memory_limit : str or float, optional
        Memory limit per worker of the embedded cluster (``"2GiB"``, bytes, or a
        fraction of the machine's memory); default: the memory split evenly.
    threads_per_worker : int >= 1, optional
        Threads of each worker of the embedded cluster (default 1). Only for the
        embedded cluster.
    timeout : str or float, default "8s"
        How long to wait for a scheduler before raising ``OSError``.
    dashboard_address : str or None, default "127.0.0.1:0"
        Dashboard of the embedded cluster: ``"127.0.0.1:0"``, a free port on this
        machine only; an address such as ``":8787"`` listens on
        every interface, as asked. None: no dashboard (the scheduler's HTTP
        endpoints then listen on a free loopback port). The scheduler and the
        workers of the embedded cluster listen on 127.0.0.1 only.
    set_as_default : bool, default True
        Make the client Dask's default scheduler, as ``distributed.Client``
        does: estimators (which hold no client) and ``dask.compute`` then run on
        it. With False, pass it as ``client=`` to functions or enter
        ``client.as_current()``.
    security : distributed.security.Security, optional
        TLS credentials of the client (CA, certificate, key) for a ``tls://``
        scheduler; default: Dask's configuration (``distributed.comm.tls``).
        Without an address, passed to the embedded ``LocalCluster``.
    **cluster_kwargs : dict
        Passed to ``LocalCluster``. The embedded scheduler's ``worker_ttl``
        is the Dask config ``dasketch.worker-timeout`` (default 60 s) unless
        ``scheduler_kwargs`` sets it: a worker silent for that long (stopped,
        swapping, cut off) is restarted by its nanny and its tasks run on the
        others, instead of after distributed's own default
        (``distributed.scheduler.worker-ttl``).

    Returns
    -------
    distributed.Client
        The connected client; closing it closes what this function started.

    Raises
    ------
    ValueError
        Before anything starts: a malformed address, sizes that are not
        integers >= 1, more workers than this machine's memory can start, an
        unreadable memory limit, timeout or ``dasketch.worker-timeout``, or
        sizes given with an address.
    OSError
        Within ``timeout``, naming the address, when no Dask scheduler answers
        there.
    RuntimeError
        When asked for an embedded cluster while this process imports its
        parent's main module (a worker process of a script that starts its
        cluster without ``if __name__ == "__main__":``), naming the guard.

    Examples
    --------
    >>> from dasketch import get_client
    >>> with get_client(n_workers=1, dashboard_address=None) as client:
    ...     print(client.submit(sum, [1, 2]).result())
    3
    """
    validate_parameter_constraints(_GET_CLIENT_CONSTRAINTS, locals(), caller_name="get_client")
    memory_limit = check_memory_limit(memory_limit)
    check_timeout(timeout)
    address = address or os.environ.get(SCHEDULER_ENV) or None
    if address:
        if any(v is not None for v in (n_workers, memory_limit, threads_per_worker)):
            raise ValueError("n_workers, threads_per_worker and memory_limit size an "
                             "embedded cluster; they cannot be used with a scheduler "
                             "address")
        return connect(address, timeout=timeout, set_as_default=set_as_default,
                       security=security)
    check_not_bootstrapping()
    if security is not None:
        cluster_kwargs["security"] = security
    from distributed import Client

    sizing = default_cluster_size(memory_limit)
    if n_workers is not None:
        sizing["n_workers"] = check_worker_count(n_workers)
    if threads_per_worker is not None:
        sizing["threads_per_worker"] = threads_per_worker
    # Without an address the client starts a LocalCluster that it owns and closes.
    if dashboard_address is None:  # LocalCluster would serve HTTP on port 8787
        cluster_kwargs["scheduler_kwargs"] = {
            **cluster_kwargs.get("scheduler_kwargs", {}),
            "dashboard": False, "dashboard_address": LOOPBACK_DASHBOARD}
    # A worker that stops heart-beating (stopped, swapping, cut off) is restarted
    # by its nanny after the worker timeout, not distributed's 5 minutes.
    cluster_kwargs["scheduler_kwargs"] = {"worker_ttl": worker_timeout(),
                                          **cluster_kwargs.get("scheduler_kwargs", {})}
    return Client(processes=True, dashboard_address=dashboard_address,
                  set_as_default=set_as_default, **sizing, **cluster_kwargs)
