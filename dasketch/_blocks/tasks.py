"""Block tasks and deterministic tree reductions over them."""

from __future__ import annotations

import contextlib
import numbers
import sys
import threading

import dask
import dask.array as da
import numpy as np
from threadpoolctl import ThreadpoolController

from dasketch.io import borrowed_rows, read_rows

DEFAULT_SPLIT_EVERY = 8


class _OneBlasThread:
    """Run a kernel with one BLAS thread.

    Blocks already run in parallel (scheduler threads or worker processes);
    nested multi-threaded BLAS on top of that oversubscribes the cores, and on
    small products it was measured to be 5-10x slower than one thread.

    A BLAS library has one thread count for the whole process, and OpenBLAS
    ignored counts set from one thread while other threads that had set theirs
    were alive: kernels that each lowered and restored the count
    (threadpoolctl's context manager) left the caller's process at one BLAS
    thread after the threaded scheduler's overlapping tasks. So where the caller
    runs in the same process (local schedulers, in-process workers),
    :func:`one_blas_thread_while_computing` sets and restores the count in the
    caller's thread and the kernels leave it alone; on ``distributed`` workers
    without such a caller the kernels lower it themselves. A lazy result computed
    by the user's own ``.compute()`` on the local schedulers runs with the
    process's count, which is left as it was.
    """

    def __init__(self, func):
        self.func = func
        # Dask names the task keys (and worker logs and errors name the tasks)
        # after this: the kernel's name, not the wrapper object's repr.
        self.__name__ = dask.utils.funcname(func)

    def __repr__(self):
        return f"{self.__name__} (one BLAS thread)"

    _controller = None  # per process; scanning the loaded libraries costs ~2 ms
    _callers_holding = 0  # one_blas_thread_while_computing blocks active here
    _lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        if _OneBlasThread._callers_holding == 0 and _in_distributed_worker():
            if _OneBlasThread._controller is None:
                _OneBlasThread._controller = ThreadpoolController()
            _OneBlasThread._controller.limit(limits=1, user_api="blas")
        return self.func(*args, **kwargs)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func))


def _in_distributed_worker():
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return False
    try:
        distributed.get_worker()
    except ValueError:
        return False
    return True


@contextlib.contextmanager
def one_blas_thread_while_computing():
    """Hold this process's BLAS at one thread while block tasks run, set on entry
    and restored on exit in the calling thread (see :class:`_OneBlasThread`)."""
    with ThreadpoolController().limit(limits=1, user_api="blas"):
        with _OneBlasThread._lock:
            _OneBlasThread._callers_holding += 1
        try:
            yield
        finally:
            with _OneBlasThread._lock:
                _OneBlasThread._callers_holding -= 1


def task(func):
    """``dask.delayed(func, pure=True)``, run with one BLAS thread."""
    return dask.delayed(_OneBlasThread(func), pure=True)


def check_split_every(split_every):
    if split_every is None:
        return DEFAULT_SPLIT_EVERY
    if isinstance(split_every, (bool, np.bool_)) or not isinstance(
        split_every, numbers.Integral
    ) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
    return int(split_every)


def tree_reduce(parts, combine, split_every=None):
    """Combine Delayed ``parts`` in a deterministic tree with fan-in ``split_every``.

    Level by level, consecutive groups of ``split_every`` parts are combined with
    ``combine(*group)``; the tree depends only on the number of parts.
    """
    split_every = check_split_every(split_every)
    parts = list(parts)
    if not parts:
        raise ValueError("tree_reduce needs at least one part")
    combine = task(combine)
    while len(parts) > 1:
        parts = [combine(*parts[i:i + split_every]) if len(parts[i:i + split_every]) > 1
                 else parts[i] for i in range(0, len(parts), split_every)]
    return parts[0]


class _ReadThenApply:
    """``func(rows, start, stop)`` of the rows ``[start, stop)`` a task reads from a
    checked zarr array itself (:func:`dasketch.io.read_rows`).

    One task per block instead of a read task and a compute task: a worker holds
    no read block waiting for its compute task, and the scheduler never handles
    the rows. Sketching 1M x 256 zarr rows on two worker processes took 1.29x the
    time of ``X.sum()`` this way and 1.35x with read tasks, and 1.19x with the
    reads into reused buffers as well (medians of 7 interleaved rounds).
    """

    def __init__(self, func, check_files, name, reuse):
        self.func, self.check_files, self.name, self.reuse = func, check_files, name, reuse
        self.__name__ = dask.utils.funcname(func)

    def __call__(self, array, start, stop):
        if not self.reuse:
            return self.func(read_rows(array, start, stop, self.check_files, self.name),
                             start, stop)
        with borrowed_rows(array, start, stop, self.check_files, self.name) as rows:
            return self.func(rows, start, stop)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func), self.check_files,
                self.name, self.reuse)


def map_reduce(blocks, func, combine, *, split_every=None, keeps_block=True):
    """Apply ``func(block, start, stop)`` to every block and tree-combine the results.

    Blocks of a dense zarr store (``blocks.reader``) are read by the tasks that
    apply ``func``; with ``keeps_block=False`` (``func``'s result holds no
    reference to its block) into buffers each worker process reuses
    (:func:`dasketch.io.borrowed_rows`). Returns a Delayed; compute it with
    :func:`compute`.
    """
    if blocks.reader is not None:
        checked, check_files, name = blocks.reader
        mapped = task(_ReadThenApply(func, check_files, name, not keeps_block))
        parts = [mapped(checked, start, stop) for start, stop in blocks.ranges()]
    else:
        mapped = task(func)
        parts = [mapped(block, start, stop)
                 for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return tree_reduce(parts, combine, split_every)


def map_rows(blocks, func, n_columns, dtype=np.float64):
    """Lazy ``n x n_columns`` Dask array whose rows ``[start, stop)`` are
    ``func(block, start, stop)``."""
    mapped = task(func)
    pieces = [da.from_delayed(mapped(block, start, stop), shape=(stop - start, n_columns),
                              dtype=dtype)
              for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def add(*terms):
    total = terms[0].copy()
    for term in terms[1:]:
        total += term
    return total


def tree_sum(blocks, func, *, split_every=None, keeps_block=True):
    """Delayed sum over blocks of ``func(block, start, stop)`` (arrays of one shape);
    ``keeps_block`` as in :func:`map_reduce`."""
    return map_reduce(blocks, func, add, split_every=split_every, keeps_block=keeps_block)


def _row_pieces(arrays):
    """Delayed row chunks of Dask arrays with equal row chunks, zipped."""
    rows = arrays[0].chunks[0]
    for a in arrays:
        if a.chunks[0] != rows or any(len(c) > 1 for c in a.chunks[1:]):
            raise ValueError("arrays must share their row chunks and have one chunk "
                             "along every other axis")
    return list(zip(*(a.to_delayed(optimize_graph=True).ravel() for a in arrays)))


def tree_sum_rows(arrays, func, *, split_every=None):
    """Delayed sum over row chunks of ``func(*chunks)`` for Dask arrays with equal
    row chunks (e.g. a projection ``X R``, labels and margins), tree-reduced.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch._blocks import tree_sum_rows
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> b = da.from_array(np.ones(3), chunks=2)
    >>> tree_sum_rows((a, b), lambda x, y: x.T @ y).compute()
    array([6., 9.])
    """
    mapped = task(func)
    return tree_reduce([mapped(*pieces) for pieces in _row_pieces(arrays)], add, split_every)


def map_row_chunks(arrays, func, n_columns=None, dtype=np.float64):
    """Lazy Dask array of ``func(*chunks)`` over the row chunks of Dask arrays with
    equal row chunks: 1-D when ``n_columns`` is None, else ``(n, n_columns)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch._blocks import map_row_chunks
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> map_row_chunks((a,), lambda x: x.sum(axis=1)).compute()
    array([1., 5., 9.])
    """
    mapped = task(func)
    pieces = []
    for chunks, rows in zip(_row_pieces(arrays), arrays[0].chunks[0]):
        shape = (rows,) if n_columns is None else (rows, int(n_columns))
        pieces.append(da.from_delayed(mapped(*chunks), shape=shape, dtype=dtype))
    return da.concatenate(pieces, axis=0)


