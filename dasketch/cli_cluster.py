"""How the subcommands reach Dask: the client of a job (connected to a scheduler, or
an embedded cluster whose workers ignore Ctrl-C), with distributed's logs kept out
of the terminal unless --verbose, and the clean-up of clusters an interrupt left.

Only the standard library is imported here; distributed is imported when a job
starts its client.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import tempfile
from contextlib import contextmanager


def _close_interrupted_clusters():
    """Close embedded clusters that an interrupt caught half started or half
    closed, here and quietly: distributed's own exit hook would close them again
    and print the tracebacks of workers that never finished starting."""
    if "distributed" not in sys.modules:
        return
    from distributed.deploy.spec import SpecCluster

    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    for cluster in list(SpecCluster._instances):
        try:
            cluster.close(timeout=10)
        except BaseException:  # noqa: BLE001 - closing what an interrupt left, best effort
            pass
        SpecCluster._instances.discard(cluster)


def _silence_distributed_logs():
    """Keep distributed's and asyncio's log records below CRITICAL out of the terminal.

    distributed's configuration gives child loggers (``distributed.client``, ...) levels
    of their own, so the handlers are raised as well as the loggers.
    """
    for name in ("distributed", "asyncio", "tornado"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        for handler in logger.handlers:
            handler.setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("distributed.", "tornado.")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


@contextmanager
def _sigint_held():
    """A context in which SIGINT waits, recorded by a handler; yields the list of
    those received, complete once the block has ended. An error that the block
    raises after one was received (the error of a start-up cut short) is
    replaced by ``KeyboardInterrupt``. Main thread only."""
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield received
    except Exception:
        if not received:
            raise
        raise KeyboardInterrupt(f"signal {received[0]}") from None
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def _workers_ignore_sigint():
    """Processes that ``multiprocessing`` starts in this block (the workers of an
    embedded cluster, and those their nannies start again) ignore SIGINT from
    their first instruction on: they are started through a shell script that
    sets it to be ignored, which the interpreter it then executes keeps. A Ctrl-C
    in a terminal, sent to every process of its group, reaches only this
    process, which shuts the workers down. POSIX only, and where the temporary
    directory allows executing a script; elsewhere the workers start as
    ``multiprocessing`` starts them."""
    import multiprocessing.spawn
    import shlex

    python = multiprocessing.spawn.get_executable()
    if os.name != "posix":
        yield
        return
    with tempfile.TemporaryDirectory(prefix="dasketch-workers-") as folder:
        launcher = os.path.join(folder, "python")
        with open(launcher, "w") as script:
            script.write(f"#!/bin/sh\ntrap '' INT\nexec {shlex.quote(os.fsdecode(python))} "
                         '"$@"\n')
        os.chmod(launcher, 0o700)
        if not os.access(launcher, os.X_OK):  # a temporary directory mounted noexec
            yield
            return
        multiprocessing.spawn.set_executable(launcher)
        try:
            yield
        finally:
            multiprocessing.spawn.set_executable(python)


@contextmanager
def _client(args):
    """The client of the job: connected to --scheduler / $DASK_SCHEDULER_ADDRESS,
    else an embedded cluster whose workers ignore Ctrl-C (this process handles
    it and shuts them down, :func:`_workers_ignore_sigint`) and, unless
    --verbose, keep their logs to themselves: errors reach the user as one line
    from here. A Ctrl-C while the embedded cluster starts is held until the
    start-up has ended, then ends the job as at any other moment."""
    from dasketch.cluster import SCHEDULER_ENV, get_client

    address = args.scheduler or os.environ.get(SCHEDULER_ENV)
    if address:
        if args.workers is not None or args.memory_limit is not None:
            raise ValueError("--workers and --memory-limit size an embedded cluster; they "
                             "cannot be used with --scheduler")
        with get_client(address) as client:
            yield _quiet_unless_verbose(args, client)
        return
    quiet_logs = {} if args.verbose else {"silence_logs": logging.CRITICAL}
    with _workers_ignore_sigint():
        with _sigint_held() as interrupted:
            client = get_client(n_workers=args.workers, memory_limit=args.memory_limit,
                                **quiet_logs)
        with client:
            if interrupted:
                raise KeyboardInterrupt(f"signal {interrupted[0]}")
            yield _quiet_unless_verbose(args, client)


def _quiet_unless_verbose(args, client):
    """``client``, once distributed's logs are kept out of the terminal unless
    --verbose: set once distributed is imported (its import sets its loggers'
    levels), so that the client's reconnection tracebacks when a scheduler dies
    stay out and the error reaches the user as one line."""
    if not args.verbose:
        _silence_distributed_logs()
    return client
