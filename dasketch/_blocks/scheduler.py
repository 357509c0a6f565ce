"""Computing Dask objects: on a given client, the client holding persisted
inputs, or the active scheduler; with an optional progress bar; the row counts
of Dask arrays that do not know them."""

from __future__ import annotations

import contextlib
import sys

import dask
import numpy as np

from dasketch._blocks import store_watch
from dasketch._blocks.cluster_wait import gather_watched
from dasketch._blocks.tasks import one_blas_thread_while_computing
from dasketch.kernels.alignment import aligned


def default_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def client_holding(objs):
    """The client of any futures inside ``objs`` (persisted collections), or None."""
    try:
        from distributed import futures_of
    except ImportError:
        return None
    futures = [f for obj in objs if dask.is_dask_collection(obj) for f in futures_of(obj)]
    return futures[0].client if futures else None


# Dask config key: show a progress bar for every pass over the data (every
# computation of :func:`compute`), e.g. ``dask.config.set({"dasketch.progress": True})``
# or ``DASK_DASKETCH__PROGRESS=1``.
PROGRESS_KEY = "dasketch.progress"


def progress_wanted(progress=None):
    """``progress`` if given, else the Dask config ``dasketch.progress`` (default False)."""
    if progress is None:
        progress = dask.config.get(PROGRESS_KEY, False)
    return bool(progress)


def compute(*objs, client=None, progress=None, check_stores=True):
    """Compute Dask objects with ``client`` (a ``distributed.Client``) if given,
    else with the active default scheduler.

    With ``progress=True`` (by default the Dask config ``dasketch.progress``,
    :func:`progress_wanted`) a progress bar is shown on stderr:
    ``distributed.progress`` (a text bar in a terminal, a widget in a notebook)
    on a cluster, Dask's ``ProgressBar`` with the local schedulers. Task keys
    are named after their kernels, so a failed task is named readably in
    worker logs; its exception is re-raised here unchanged. Inputs persisted on a
    ``distributed`` cluster are computed by the client that holds them. On a
    cluster, a scheduler left without workers for longer than the worker
    timeout ends the computation with ``TimeoutError``
    (:mod:`dasketch._blocks.cluster_wait`), with the progress bar shown or not
    (:func:`progress_bar` draws while that wait runs).

    Once the results are in, every remote (fsspec) store the computation read
    is listed again and compared with its fingerprint taken when it was opened
    (:mod:`dasketch._blocks.store_watch`): a store rewritten while the
    computation ran raises ``ValueError`` naming it and what changed, and no
    result is returned. ``check_stores=False`` leaves that to the caller
    (e.g. one check after a walk that computes block by block).
    """
    if not any(dask.is_dask_collection(obj) for obj in objs):
        return objs   # values already (results of eager passes)
    if client is None:
        client = client_holding(objs)
    checks = store_watch.stores_read_by(objs) if check_stores else ()
    # Block tasks run with one BLAS thread; in this process (local schedulers,
    # in-process workers) the count is set and restored here, in this thread.
    with one_blas_thread_while_computing(), unfused():
        results = _compute(objs, client, progress_wanted(progress))
    store_watch.check_unchanged(checks)
    # Results deserialized from a cluster may be unaligned, which numpy multiplies
    # by its own loops: the caller's algebra gets aligned arrays, as from threads.
    return tuple(aligned(result) for result in results)


def unfused():
    """Dask's low-level task fusion off while a computation's graph is optimised.

    The fused passes of :func:`~dasketch._blocks.map_reduce` (``rows=``) hand
    out one block task in two collections, a Dask array of its rows and a
    Delayed tree of its parts; fusion would merge the task into each under a
    new key, and every block would be read and computed twice. Culling, and
    everything else the optimisation does, stays on."""
    return dask.config.set({"optimization.fuse.active": False})


def optimized_here(objs):
    """``objs`` with their graphs optimised now, in this process and with fusion
    off (:func:`unfused`), as a list for ``Client.compute`` or ``Client.persist``
    with ``optimize_graph=False``.

    A ``distributed`` client leaves the optimisation of the graphs it submits
    to the scheduler, which runs it later, in a thread of its own or in its own
    process, under its own Dask config: fusion switched off here may be on
    there, and the Dask array and the Delayed tree of a fused pass, optimised
    apart, would each run the shared block tasks under keys of their own
    (every block read twice). Optimising them together here, culling and all,
    leaves one key per block task. Submitted unoptimised, the collections also
    keep their order: Dask groups collections of different types by their
    optimisation, and ``dask.compute``, ``dask.persist`` and ``Client.compute``
    then pair results and collections in the grouped order.
    """
    with unfused():
        return list(dask.optimize(*objs))


def active_client():
    """The ``distributed.Client`` that ``dask.compute`` would use now, or None
    (a local scheduler chosen by ``dask.config``, or no client)."""
    scheduler = dask.base.get_scheduler()
    owner = getattr(scheduler, "__self__", None)
    try:
        from distributed import Client
    except ImportError:
        return None
    return owner if isinstance(owner, Client) else None


def _compute(objs, client, progress):
    client = client if client is not None else active_client()
    if client is None:
        objs = optimized_here(objs)
        if not progress:
            return dask.compute(*objs, optimize_graph=False)
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            return dask.compute(*objs, optimize_graph=False)
    from distributed.scheduler import KilledWorker

    futures = client.compute(optimized_here(objs), optimize_graph=False)
    # The text bar writes to stdout; progress belongs on stderr, so that the
    # results a command prints stay clean when stdout is redirected.
    shown = (contextlib.redirect_stdout(sys.stderr), progress_bar(client, futures)) \
        if progress else ()
    try:
        with contextlib.ExitStack() as stack:
            for context in shown:
                stack.enter_context(context)
            return tuple(gather_watched(client, futures))
    except KilledWorker as exc:
        raise killed_worker_error(exc) from None
    finally:
        if progress and any(future.status != "finished" for future in futures):
            print(file=sys.stderr)  # the bar stopped mid-line: an error starts on its own


def killed_worker_error(exc):
    """A one-line ``RuntimeError`` for ``distributed``'s ``KilledWorker``: the
    workers that ran a task all died, most often because it needed more memory
    than a worker has (the nanny's memory limit, or the system's OOM killer).
    It names the task, the last worker and what to change."""
    worker = getattr(exc.last_worker, "address", exc.last_worker)
    return RuntimeError(
        f"task {exc.task!r} ended its worker process ({worker}) {exc.allowed_failures + 1} "
        "time(s): most likely the worker ran out of memory; lower block_rows "
        "(--block-rows) or raise the workers' memory_limit (--memory-limit)")


# Seconds the text bar is given to draw its last state once the futures are done.
BAR_STOP_SECONDS = 5.0


@contextlib.contextmanager
def progress_bar(client, futures):
    """Show the progress of ``futures`` while the body waits for them.

    The bar never waits itself: a widget in a notebook, else distributed's text
    bar listening on the client's event loop, so the caller's wait (with its
    worker watchdog, :func:`~dasketch._blocks.cluster_wait.gather_watched`)
    runs at the same time. On leaving, the text bar is stopped (after it drew
    its last state, or at once on an error) before the body's outcome goes on.
    """
    from distributed.utils import is_kernel

    if is_kernel() and _has_widgets():
        from distributed import progress as show_progress

        with client.as_current():
            show_progress(futures, notebook=True)  # displayed, drawn by the kernel's loop
        yield
        return
    import asyncio
    import threading

    from distributed.diagnostics.progressbar import TextProgressBar

    bar = TextProgressBar(futures, scheduler=client.scheduler.address, start=False)
    stopped = threading.Event()

    async def listen():
        try:
            await bar.listen()
        finally:
            stopped.set()

    running = asyncio.run_coroutine_threadsafe(listen(), client.loop.asyncio_loop)
    finished = False
    try:
        yield
        finished = True
    finally:
        if not (finished and stopped.wait(BAR_STOP_SECONDS)):
            running.cancel()
            stopped.wait(BAR_STOP_SECONDS)


def _has_widgets():
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def persist(*arrays, client=None):
    """Persist Dask arrays in (worker) memory with ``client`` or the default scheduler.

    The persisted collections carry the end-of-job checks of the remote stores
    they were read from (:func:`dasketch._blocks.store_watch.carry`): a
    computation over them lists those stores again when it ends.

    Examples
    --------
    >>> import dask.array as da
    >>> from dasketch._blocks import persist
    >>> (a,) = persist(da.ones(4, chunks=2) * 2)
    >>> float(a.sum().compute())
    8.0
    """
    if not any(dask.is_dask_collection(array) for array in arrays):
        return arrays   # values already (results of eager passes)
    checks = store_watch.stores_read_by(arrays)
    client = client if client is not None else active_client()
    if client is not None:
        kept = tuple(client.persist(optimized_here(arrays), optimize_graph=False))
    else:
        with unfused(), one_blas_thread_while_computing():
            kept = dask.persist(*optimized_here(arrays), optimize_graph=False)
    store_watch.carry(kept, checks)
    return kept


def is_dask_collection(obj):
    """Whether ``obj`` is a Dask collection (array, delayed, ...).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch._blocks import is_dask_collection
    >>> is_dask_collection(da.ones(3)), is_dask_collection(np.ones(3))
    (True, False)
    """
    return dask.is_dask_collection(obj)


def known_lengths(frame, n_chunks):
    """The lengths of the ``n_chunks`` row chunks of ``frame.to_dask_array()`` (a
    Dask DataFrame) when Dask knows them without computing the partitions, as a
    tuple; None when they must be computed.

    A frame of ``read_parquet`` without filters knows its partitions' lengths
    from the row groups in the files' footers (one of ``from_pandas`` from its
    pieces): Dask's rewrite of a ``Lengths`` expression finds them. When a
    column selection makes the partitions small, Dask reads several of them in
    one task (``FusedIO``); the chunks are then those groups, whose lengths
    are the sums of theirs. Every other case, or a Dask without these
    expressions (``dask.dataframe.dask_expr``), is computed.
    """
    try:
        from dask.dataframe.dask_expr._expr import Lengths, Literal
        from dask.dataframe.dask_expr.io.io import FusedIO

        lengths = Lengths(frame.expr).optimize()
        if not isinstance(lengths, Literal):
            return None
        lengths = tuple(int(n) for n in lengths.value)
        if len(lengths) != n_chunks:   # partitions read together: the chunks are the groups
            plan = frame.map_partitions(lambda part: part).expr.optimize(fuse=False)
            fused = [node for node in plan.walk() if isinstance(node, FusedIO)]
            read = Lengths(fused[0].operand("_expr")).optimize() if len(fused) == 1 else None
            if read is None or tuple(read.value) != lengths:
                return None
            lengths = tuple(sum(lengths[i] for i in bucket)
                            for bucket in fused[0]._fusion_buckets)
    except (ImportError, AttributeError, TypeError):
        return None
    return lengths if len(lengths) == n_chunks else None


def known_row_chunks(X):
    """A Dask array whose row chunks have unknown sizes (``ddf.values``,
    ``ddf.to_dask_array()``), or a Dask DataFrame, as a Dask array with known
    row chunks; anything else unchanged.

    A DataFrame whose lengths Dask knows (:func:`known_lengths`: from the
    Parquet metadata of ``read_parquet``) uses them. Otherwise, as dask-ml does,
    the sizes are computed (``compute_chunk_sizes``): one extra pass that computes every
    partition, which the passes that follow compute again. Persist the frame
    (``ddf.persist()``) when it fits in the workers' memory, to compute it once.

    Examples
    --------
    >>> import pandas as pd, dask.dataframe as dd
    >>> ddf = dd.from_pandas(pd.DataFrame({"a": [1.0, 2, 3], "b": [4.0, 5, 6]}),
    ...                      npartitions=2)
    >>> ddf.values.shape, known_row_chunks(ddf.values).shape
    ((nan, 2), (3, 2))
    """
    if not is_dask_collection(X):
        return X
    if hasattr(X, "to_dask_array") and hasattr(X, "columns"):   # a Dask DataFrame
        array = X.to_dask_array()
        lengths = known_lengths(X, array.numblocks[0])
        if lengths is None:
            return array.compute_chunk_sizes()
        import dask.array as da

        return da.Array(array.__dask_graph__(), array.name, (lengths, array.chunks[1]),
                        dtype=array.dtype)
    chunks = getattr(X, "chunks", None)
    if chunks and any(np.isnan(c) for c in chunks[0]):
        return X.compute_chunk_sizes()
    return X
