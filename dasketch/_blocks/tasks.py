"""Block tasks (one BLAS thread each, reading their rows themselves) and
deterministic tree reductions over them."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import numbers
import sys
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait

import dask
import numpy as np
from threadpoolctl import ThreadpoolController

from dasketch._blocks.block_functions import add
from dasketch.kernels.alignment import aligned

__all__ = ["COMBINE_BYTES", "COMBINE_BYTES_KEY", "DEFAULT_SPLIT_EVERY", "SPLIT_EVERY_KEY",
           "ReadThenApply", "add", "check_split_every", "check_threads", "fit_blas_threads",
           "fit_size", "in_order", "one_blas_thread_while_computing", "streamed_tree", "task",
           "tree_reduce"]

# Fan-in of tree reductions when neither the caller nor dask.config sets one.
DEFAULT_SPLIT_EVERY = 8
# The Dask configuration key of the fan-in, as dask.array reductions read it.
SPLIT_EVERY_KEY = "split_every"
# Bytes that the inputs and the output of one combine task may take together
# (dask.config "dasketch.combine-bytes"): large parts are combined fewer at once.
COMBINE_BYTES = 64 * 2 ** 20
COMBINE_BYTES_KEY = "dasketch.combine-bytes"


class _OneBlasThread:
    """Run a kernel with one BLAS thread.

    Blocks already run in parallel (scheduler threads or worker processes);
    nested multi-threaded BLAS on top of that oversubscribes the cores, which
    slows small products down several times (figures in benchmarks/README.md).

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

    _callers_holding = 0  # one_blas_thread_while_computing blocks active here
    _lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        if _OneBlasThread._callers_holding == 0 and _in_distributed_worker():
            blas_controller().limit(limits=1, user_api="blas")
        return self.func(*(aligned(a) for a in args),
                         **{k: aligned(v) for k, v in kwargs.items()})

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


_CONTROLLER = [None, -1]  # this process's ThreadpoolController, len(sys.modules) then


def blas_controller():
    """A ``ThreadpoolController`` of this process's libraries, scanned again only
    when modules were imported since (a scan costs milliseconds, which every
    pass of a solver would pay)."""
    if _CONTROLLER[0] is None or _CONTROLLER[1] != len(sys.modules):
        _CONTROLLER[:] = [ThreadpoolController(), len(sys.modules)]
    return _CONTROLLER[0]


@contextlib.contextmanager
def one_blas_thread_while_computing():
    """Hold this process's BLAS at one thread while block tasks run, set on entry
    and restored on exit in the calling thread (see :class:`_OneBlasThread`)."""
    with blas_controller().limit(limits=1, user_api="blas"):
        with _OneBlasThread._lock:
            _OneBlasThread._callers_holding += 1
        try:
            yield
        finally:
            with _OneBlasThread._lock:
                _OneBlasThread._callers_holding -= 1


# The Dask configuration key of the threaded scheduler's thread count.
THREADS_KEY = "num_workers"


def check_threads():
    """Threads of the threaded scheduler: ``dask.config`` ``"num_workers"`` when
    set (an integer >= 1, else a ``ValueError`` naming the key), else this
    machine's cores as Dask counts them (``dask.system.CPU_COUNT``), as
    ``dask.threaded.get`` chooses its pool."""
    threads = dask.config.get(THREADS_KEY, None)
    if threads is None:
        return int(dask.system.CPU_COUNT)
    return int(check_number(threads, f"dask.config {THREADS_KEY!r}", integral=True, low=1))


# Names of the threads of eager passes (a call made on one runs in it: no nesting).
POOL_PREFIX = "dasketch-pass"
_POOLS = {}   # thread count -> the pool kept for later passes (a thread starts in ms)
_POOLS_LOCK = threading.Lock()


def _pool(threads):
    with _POOLS_LOCK:
        if threads not in _POOLS:
            _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix=POOL_PREFIX)
        return _POOLS[threads]


def in_order(calls, threads=1):
    """Yield the results of the callables ``calls`` (taking no argument), in
    order, computed on ``threads`` threads at once (in this thread for one, or
    when this thread is one of them).

    At most ``threads + 1`` results are computed ahead of the one yielded, so
    memory holds a few of them, as the threaded scheduler's run of a tree
    does. The first call that raises, in order, raises here; the calls not
    started are cancelled and those running waited for. The threads are kept
    for the next passes."""
    if threads <= 1 or threading.current_thread().name.startswith(POOL_PREFIX):
        for call in calls:
            yield call()
        return
    pool, pending = _pool(threads), deque()
    try:
        for call in calls:
            pending.append(pool.submit(call))
            if len(pending) > threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()
        wait(pending)


# dask.config key: BLAS threads of this process's own linear algebra during a
# fit (between its passes), e.g. ``dask.config.set({"dasketch.blas-threads": 1})``.
BLAS_THREADS_KEY = "dasketch.blas-threads"
# Unset, a fit's algebra gets a BLAS thread per this many multiply-adds of its d m^2
# products (at most the process's threads): OpenBLAS's threads spin for its thread
# timeout after a call, slowing the next pass's block threads (benchmarks/README.md).
FIT_WORK_PER_THREAD = 2 ** 31
_FIT_STACK = contextvars.ContextVar("dasketch_fit_stack", default=None)


def fit_blas_threads(func):
    """``func`` run with this process's BLAS at ``dask.config``
    ``"dasketch.blas-threads"`` threads when it is set (an integer >= 1, else a
    ``ValueError`` naming the key), restored after; when it is not (the
    default), at the threads :func:`fit_size` chooses from the fit's size.

    A fit's own linear algebra between its passes works on small matrices
    (``m x m`` factorisations, ``d x m`` products). A multi-threaded BLAS
    synchronises its threads in every call, which costs more than small calls'
    arithmetic, and on a machine whose cores are busy with other work it waits
    at every synchronisation for a thread that is not running (figures in
    benchmarks/README.md). Block tasks hold one thread each whatever this says
    (:func:`one_blas_thread_while_computing`)."""

    @functools.wraps(func)
    def run(*args, **kwargs):
        threads = dask.config.get(BLAS_THREADS_KEY, None)
        with contextlib.ExitStack() as stack:
            if threads is not None:
                threads = check_number(threads, f"dask.config {BLAS_THREADS_KEY!r}",
                                       integral=True, low=1)
                stack.enter_context(blas_controller().limit(limits=int(threads),
                                                            user_api="blas"))
            token = _FIT_STACK.set(None if threads is not None else stack)
            try:
                return func(*args, **kwargs)
            finally:
                _FIT_STACK.reset(token)

    return run


def fit_size(n_features, n_components):
    """Called by a fit wrapped in :func:`fit_blas_threads` once it knows ``d``
    and ``m``: with ``"dasketch.blas-threads"`` unset, its own algebra runs
    from here on at one BLAS thread per :data:`FIT_WORK_PER_THREAD`
    multiply-adds of ``d m^2`` (one thread below that), at most the process's
    threads; a shape-only choice. Outside such a fit, or with the key set,
    nothing changes."""
    stack = _FIT_STACK.get()
    if stack is None:
        return
    _FIT_STACK.set(None)   # once a fit
    blas = blas_controller().select(user_api="blas").lib_controllers
    most = max((int(lib.num_threads) for lib in blas), default=1)
    threads = max(1, int(n_features) * int(n_components) ** 2 // FIT_WORK_PER_THREAD)
    if threads < most:
        stack.enter_context(blas_controller().limit(limits=threads, user_api="blas"))


class ReadThenApply:
    """``func(rows, start, stop, *args, **kwargs)`` of the rows ``[start, stop)``
    that the task reads itself, ``read(source, start, stop, reuse)`` (a context
    manager, e.g. :class:`dasketch.storage.reading.ZarrRows`), after the steps of
    ``transform`` in order. ``reuse`` says the rows may go into a buffer the
    process reuses (``func``'s result keeps no reference to them)."""

    def __init__(self, func, read, reuse=False, transform=()):
        self.func, self.read = func, read
        self.reuse, self.transform = bool(reuse), tuple(transform)
        self.__name__ = dask.utils.funcname(func)

    def __call__(self, source, start, stop, *args, **kwargs):
        with self.read(source, start, stop, self.reuse) as rows:
            for step in self.transform:
                rows = step(rows)
            return self.func(rows, start, stop, *args, **kwargs)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func),
                dask.base.tokenize(self.read), self.reuse, dask.base.tokenize(self.transform))


def task(func):
    """``dask.delayed(func, pure=True)``, run with one BLAS thread."""
    return dask.delayed(_OneBlasThread(func), pure=True)


def check_number(value, name, *, integral=False, low=0, high=None, low_open=False):
    """``value`` if it is a number (an integer with ``integral``; never a bool) in
    ``[low, high]`` (``(low, high]`` with ``low_open``; no upper end when ``high``
    is None), else a ``ValueError`` naming ``name`` and what was expected.

    The bridge's one check of the sizes it is handed (``block_rows``,
    ``split_every``) and of the values it reads from ``dask.config``: worker
    processes import the bridge, so this check does not use scikit-learn, whose
    parameter validation the public functions apply to their own arguments
    first (:mod:`dasketch._blocks.params`, which the workers never load).

    Examples
    --------
    >>> check_number(4, "split_every", integral=True, low=2)
    4
    >>> check_number(True, "block_rows", integral=True, low=1)
    Traceback (most recent call last):
    ...
    ValueError: block_rows must be an integer in [1, inf), got True
    """
    kind = numbers.Integral if integral else numbers.Real
    inside = isinstance(value, kind) and not isinstance(value, (bool, np.bool_)) \
        and (value > low if low_open else value >= low) and (high is None or value <= high)
    if not inside:
        what = "an integer" if integral else "a number"
        ends = f"{'(' if low_open else '['}{low}, {'inf)' if high is None else f'{high}]'}"
        raise ValueError(f"{name} must be {what} in {ends}, got {value!r}")
    return value


def check_split_every(split_every, part_bytes=None):
    """The fan-in of tree reductions: ``split_every`` when given, else the Dask
    configuration value ``split_every`` (the key ``dask.array`` reductions read;
    for a per-axis dict, its entry for axis 0), else :data:`DEFAULT_SPLIT_EVERY`.

    Given ``part_bytes``, the size of one part, the fan-in is lowered (to 2 at
    least) so that a combine task's inputs and output, ``(fan-in + 1)
    part_bytes``, stay within ``dask.config`` ``"dasketch.combine-bytes"``
    (default :data:`COMBINE_BYTES`): workers with little memory then combine
    large parts, such as sketches of many columns, a few at a time. The tree
    still depends only on the shape of the data.

    Examples
    --------
    >>> import dask
    >>> from dasketch._blocks import check_split_every
    >>> check_split_every(None), check_split_every(4)
    (8, 4)
    >>> with dask.config.set(split_every=16):
    ...     check_split_every(None), check_split_every(4)
    (16, 4)
    >>> check_split_every(None, part_bytes=2 ** 20), check_split_every(None, part_bytes=2 ** 24)
    (8, 3)
    """
    name = "split_every"
    if split_every is None:
        split_every = dask.config.get(SPLIT_EVERY_KEY, None)
        if isinstance(split_every, dict):
            split_every = split_every.get(0)
        name = f"dask.config {SPLIT_EVERY_KEY!r}"
        if split_every is None:
            split_every = DEFAULT_SPLIT_EVERY
    split_every = int(check_number(split_every, name, integral=True, low=2))
    if part_bytes:
        budget = dask.config.get(COMBINE_BYTES_KEY, COMBINE_BYTES)
        if isinstance(budget, str):
            budget = dask.utils.parse_bytes(budget)
        check_number(budget, f"dask.config {COMBINE_BYTES_KEY!r} (bytes)", low_open=True)
        split_every = max(2, min(split_every, int(budget // part_bytes) - 1))
    return split_every


def tree_reduce(parts, combine, split_every=None, part_bytes=None):
    """Combine Delayed ``parts`` in a deterministic tree with fan-in ``split_every``.

    Level by level, consecutive groups of ``split_every`` parts are combined with
    ``combine(*group)``; the tree depends only on the number of parts (and
    ``part_bytes``, the size of one part, which can lower the fan-in: see
    :func:`check_split_every`). Parts that are values, not Dask collections
    (the results of eager passes), are combined now by the same tree
    (:func:`streamed_tree`).
    """
    split_every = check_split_every(split_every, part_bytes)
    parts = list(parts)
    if not parts:
        raise ValueError("tree_reduce needs at least one part")
    if not any(dask.is_dask_collection(part) for part in parts):
        return streamed_tree(parts, combine, split_every)
    combine = task(combine)
    while len(parts) > 1:
        parts = [combine(*parts[i:i + split_every]) if len(parts[i:i + split_every]) > 1
                 else parts[i] for i in range(0, len(parts), split_every)]
    return parts[0]


def streamed_tree(parts, combine, split_every, *, fresh_parts=False):
    """The tree of :func:`tree_reduce` over the values ``parts`` (any iterable),
    each group combined as soon as it is complete: at most ``split_every - 1``
    values wait at each level, so a long stream of parts (eager passes over
    many blocks) holds a few of them at a time, as Dask's scheduling of the tree
    does. The groups, their order and the parts passed up alone are those of
    :func:`tree_reduce`. A group led by a value the tree combined itself (which
    nothing else holds) is combined by ``combine.into`` when ``combine`` has one
    (:func:`~dasketch._blocks.block_functions.add_into`): the same values, summed
    into that value rather than into a new one; with ``fresh_parts`` the parts
    too are values nothing else holds.

    Examples
    --------
    >>> streamed_tree("abcde", lambda *g: "(" + "".join(g) + ")", 2)
    '(((ab)(cd))e)'
    """
    levels = []     # the (value, whether the tree made it) waiting at each level, in order
    into = getattr(combine, "into", None)

    def combined(group):
        values = [value for value, _ in group]
        if len(values) == 1:
            return group[0]
        return (into if into is not None and group[0][1] else combine)(*values), True

    def push(level, entry):
        if level == len(levels):
            levels.append([])
        levels[level].append(entry)
        if len(levels[level]) == split_every:
            group, levels[level] = levels[level], []
            push(level + 1, combined(group))

    for part in parts:
        push(0, (part, bool(fresh_parts)))
    if not levels:
        raise ValueError("tree_reduce needs at least one part")
    level = 0
    while True:     # the last group of each level, from the bottom up
        group, levels[level] = levels[level], []
        if level == len(levels) - 1:
            return combined(group)[0]
        if group:
            push(level + 1, combined(group))
        level += 1
