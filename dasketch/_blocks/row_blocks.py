"""The :class:`RowBlocks` of a matrix (consecutive blocks of whole rows, made
from every kind of input by :func:`dasketch._blocks.inputs.as_row_blocks`),
the steps applied to every block, and arrays aligned with the blocks.

A matrix in this process's memory, of one block or under the synchronous
scheduler (or, for callers that ask, the threaded one), with no ``distributed``
client active, is run eagerly (:func:`run_eagerly`): the bridge's primitives
then call their functions on the blocks at once, in this thread (or on the
threaded scheduler's number of threads), and return arrays, as the tasks of the
graph would compute them; they skip the building, optimising and scheduling of a
graph, which costs milliseconds a pass and outweighs the products of small
problems.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import dask
import dask.array as da
import dask.local
import dask.threaded
import numpy as np

from dasketch._blocks import store_watch
from dasketch._blocks.array_libraries import is_numpy_block
from dasketch._blocks.block_functions import append_ones, read_block, take_columns
from dasketch._blocks.scheduler import (
    active_client,
    client_holding,
    compute,
    known_row_chunks,
    progress_wanted,
)
from dasketch._blocks.tasks import ReadThenApply, check_threads, task

# dask.config key: False keeps every pass a Dask computation (no eager runs).
EAGER_KEY = "dasketch.eager"

# A dense block holds about this many values (32 MiB in float64).
BLOCK_VALUES = 2 ** 22
# Fewest rows per default block (a few times a typical sketch size).
MIN_BLOCK_ROWS = 32
# Most rows per default block.
MAX_BLOCK_ROWS = 2 ** 16


def default_block_rows(n_features, *, block_values=BLOCK_VALUES, max_rows=MAX_BLOCK_ROWS):
    """Rows per block for ``n_features`` columns (or nonzeros per sparse row): a
    power of two in [MIN_BLOCK_ROWS, max_rows] with about ``block_values`` values
    per block (32 MiB of float64 by default). Wide rows get fewer rows per block,
    down to 32 (256 MiB at d = 1e6), so a block's memory stays bounded for any d."""
    rows = int(block_values) // max(int(n_features), 1)
    rows = 1 << max(int(rows).bit_length() - 1, 0)
    return int(min(max(rows, MIN_BLOCK_ROWS), max_rows))


@dataclass(frozen=True)
class RowBlocks:
    """A matrix as consecutive blocks of whole rows.

    Attributes
    ----------
    blocks : tuple of dask.delayed.Delayed
        Each evaluates to a 2-D ndarray or scipy.sparse CSR matrix.
    offsets : tuple of int
        Row ``offsets[i]`` is the first row of block ``i``; the last entry is n.
    n_features : int
    dtype : numpy.dtype
    sparse : bool
    read_bytes : int
        Bytes one block task holds while reading its rows: the largest input
        chunk that a block is cut from (a whole zarr chunk is read at once), at
        least the block itself; for sparse inputs the CSR rows of a block at the
        mean number of nonzeros a row (16 bytes each).
    reader : tuple or None
        For stores (dense and sparse zarr, HDF5), ``(source, read)``: a task
        reads its block's rows itself, ``read(source, start, stop, reuse)``
        (:class:`dasketch.storage.reading.ZarrRows`, :class:`dasketch.storage.reading.CsrRows`,
        :class:`~dasketch._blocks.anndata_blocks.H5Rows`), instead of
        depending on a read task; ``source`` is the Delayed store check (or
        the file name). None for inputs in memory, Dask arrays, and dense
        blocks of more than :data:`~dasketch.storage.reading.REUSED_READ_BYTES`.
    transform : tuple of callables
        Applied in order to the rows a task reads through ``reader`` (the
        intercept column of :func:`append_ones_column`, the columns of
        :func:`select_columns`); ``blocks`` already include them.
    resident : bool
        Whether the blocks are in memory already (in-memory input, a persisted
        Dask array, blocks kept by :func:`~dasketch._blocks.cache.cache_blocks`).
    plan : str
        How the tasks get their rows: ``"rows"`` (the input's own rows, or a
        task reading a store's rows), ``"column reads"`` (a task reading its
        rows across the column chunks of a store,
        :mod:`dasketch._blocks.column_reads`) or ``"rechunk"`` (a Dask array
        chunked along columns, rechunked to whole rows).
    eager : bool
        Whether ``blocks`` holds the arrays themselves (:func:`run_eagerly`):
        :func:`~dasketch._blocks.map_rows` and
        :func:`~dasketch._blocks.map_reduce` then return arrays and values, and
        :func:`as_row_aligned` ndarrays.
    threads : int
        Threads that run the functions of eager blocks, each block on one
        (:func:`~dasketch._blocks.tasks.in_order`).
    literals : tuple
        For an input in memory, ``(key, array)`` of every block: the array a
        block's Delayed holds as a literal, which :func:`run_eagerly` takes
        without computing the Delayed while the keys are those of ``blocks``.
    """

    blocks: tuple
    offsets: tuple
    n_features: int
    dtype: np.dtype
    sparse: bool
    read_bytes: int = 0
    reader: tuple | None = None
    transform: tuple = ()
    resident: bool = False
    plan: str = "rows"
    eager: bool = False
    threads: int = 1
    literals: tuple = ()

    @property
    def n_rows(self):
        return self.offsets[-1]

    @property
    def shape(self):
        return (self.n_rows, self.n_features)

    def ranges(self):
        """``(start, stop)`` of every block."""
        return list(zip(self.offsets[:-1], self.offsets[1:]))


def reader_blocks(offsets, reader, transform=()):
    """One task per block that reads its rows ``[start, stop)`` through
    ``reader`` (``(source, read)``, see :class:`RowBlocks`) and applies
    ``transform``: the ``blocks`` of an input read by its tasks, for what needs
    the rows themselves (a cache, a walk over the blocks)."""
    source, read = reader
    apply = task(ReadThenApply(read_block, read, False, transform))
    return tuple(apply(source, start, stop) for start, stop in zip(offsets[:-1], offsets[1:]))


def delayed_row_chunks(array):
    """The row chunks of a Dask array as Delayed objects (graphs of persisted
    arrays are not optimised, which would hide the futures that name their
    client). An optimised graph loses the names of its layers, so the chunks
    are registered as reading the remote stores the array reads
    (:func:`dasketch._blocks.store_watch.carry`)."""
    persisted = client_holding([array]) is not None
    chunks = array.to_delayed(optimize_graph=not persisted).ravel()
    store_watch.carry(chunks, store_watch.stores_read_by([array]))
    return chunks


def chunk_blocks(array, offsets=None):
    """The row chunks of a Dask array, as they are, as :class:`RowBlocks` (e.g. a
    persisted projection ``X R``, to pass over with the bridge's primitives).

    An ndarray (a result of eager passes, :func:`run_eagerly`) is cut at
    ``offsets`` (those of the blocks it was computed from; one block when None)
    into eager blocks, so that a pass over it combines the same parts as over
    the chunks of the Dask array it stands for.

    Examples
    --------
    >>> import dask.array as da
    >>> chunk_blocks(da.ones((5, 3), chunks=(2, 1))).offsets
    (0, 2, 4, 5)
    """
    if not isinstance(array, da.Array):
        # an array of another library (a projection kept on its device) as it is
        array = np.asarray(array) if is_numpy_block(array) else array
        width = int(np.prod(array.shape[1:], dtype=np.int64))
        offsets = tuple(offsets) if offsets is not None else (0, int(array.shape[0]))
        pieces = tuple(array[start:stop, ...] for start, stop in zip(offsets[:-1], offsets[1:]))
        dtype = np.dtype(str(array.dtype).rsplit(".", 1)[-1])   # a standard dtype's name
        return RowBlocks(pieces, offsets, width, dtype, False, resident=True, eager=True)
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(array.chunks[0])]))
    if any(len(c) > 1 for c in array.chunks[1:]):
        array = array.rechunk({ax: -1 for ax in range(1, array.ndim)})
    width = int(np.prod(array.shape[1:], dtype=np.int64))
    return RowBlocks(tuple(delayed_row_chunks(array)), offsets, width, array.dtype, False)


def append_ones_column(X):
    """``[X 1]``: a column of ones appended (an intercept) to an in-memory matrix
    (ndarray or scipy.sparse, kept in its kind and dtype) or, lazily, to every
    block of :class:`RowBlocks` (tasks that read their rows themselves append
    it after reading).

    Examples
    --------
    >>> import numpy as np, dask
    >>> from dasketch._blocks import append_ones_column, as_row_blocks
    >>> blocks = append_ones_column(as_row_blocks(np.zeros((3, 2)), block_rows=2))
    >>> blocks.shape, dask.compute(blocks.blocks[1])[0]
    ((3, 3), array([[0., 0., 1.]]))
    """
    if not isinstance(X, RowBlocks):
        return append_ones(X)
    return transformed_blocks(X, append_ones, X.n_features + 1)


def select_columns(blocks, index):
    """:class:`RowBlocks` of the columns ``index`` (integers) of every block,
    taken in the task that reads the block (or from the block's task).

    Examples
    --------
    >>> import numpy as np, dask
    >>> from dasketch._blocks import as_row_blocks, select_columns
    >>> blocks = select_columns(as_row_blocks(np.arange(6.0).reshape(2, 3)), [0, 2])
    >>> blocks.shape, dask.compute(blocks.blocks[0])[0]
    ((2, 2), array([[0., 2.],
           [3., 5.]]))
    """
    index = np.asarray(index, dtype=np.int64)
    return transformed_blocks(blocks, partial(take_columns, index=index), int(index.size))


def transformed_blocks(blocks, step, n_features):
    """``blocks`` with ``step`` applied to every block (worker-side functions
    only: it is pickled into every task), ``n_features`` columns after it."""
    if blocks.eager:
        return replace(blocks, blocks=tuple(step(block) for block in blocks.blocks),
                       n_features=n_features)
    if blocks.reader is not None:
        transform = blocks.transform + (step,)
        return replace(blocks, blocks=reader_blocks(blocks.offsets, blocks.reader, transform),
                       n_features=n_features, transform=transform)
    apply = task(step)
    return replace(blocks, blocks=tuple(apply(block) for block in blocks.blocks),
                   n_features=n_features)


def as_row_aligned(v, blocks, name="v"):
    """``v`` (numpy or Dask, 1-D or 2-D with ``n`` rows) as a Dask array whose row
    chunks are the blocks of ``blocks`` (one chunk along any other axis), or as an
    ndarray for eager ``blocks`` (:func:`run_eagerly`). A Dask array of unknown
    row chunk sizes has them computed (:func:`known_row_chunks`).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, as_row_aligned
    >>> blocks = as_row_blocks(np.ones((10, 3)), block_rows=4)
    >>> as_row_aligned(np.arange(10.0), blocks).chunks
    ((4, 4, 2),)
    """
    v = known_row_chunks(v)
    if not isinstance(v, da.Array) and is_numpy_block(v):
        v = np.asarray(v)
    if v.ndim not in (1, 2) or v.shape[0] != blocks.n_rows:
        raise ValueError(f"{name} must have {blocks.n_rows} rows, got shape {tuple(v.shape)}")
    if blocks.eager:
        if not isinstance(v, da.Array) and not is_numpy_block(v):
            return v   # an array of another library (a projection on its device)
        # C order, as the Dask array's chunk would be: the products see the same layout.
        return np.ascontiguousarray(compute(v)[0])
    chunks = (tuple(np.diff(blocks.offsets)),) + tuple((s,) for s in v.shape[1:])
    if isinstance(v, da.Array):
        return v.rechunk(chunks)
    return da.from_array(v, chunks=chunks)


def rechunk_rows(array, rows):
    """Rechunk a Dask array to ``rows`` rows per chunk and one chunk along other axes.

    Examples
    --------
    >>> import dask.array as da
    >>> from dasketch._blocks import rechunk_rows
    >>> rechunk_rows(da.ones((5, 4), chunks=(1, 2)), 2).chunks
    ((2, 2, 1), (4,))
    """
    return array.rechunk({0: int(rows), **{ax: -1 for ax in range(1, array.ndim)}})


def run_eagerly(blocks, client=None, *, threaded=False):
    """``blocks`` as eager blocks (:attr:`RowBlocks.eager`) when they are in this
    process's memory (an in-memory input, or blocks persisted by the local
    schedulers) and either one block or the active scheduler is the synchronous
    one (which would run their tasks one at a time in this thread), or, with
    ``threaded``, the threaded one (Dask's default) with no progress bar
    wanted (:func:`~dasketch._blocks.scheduler.progress_wanted`), with no
    ``distributed`` client given, holding the blocks or active, unless
    ``dask.config`` ``"dasketch.eager"`` is False; else ``blocks`` unchanged.
    Blocks kept in memory from a remote store stay Dask computations too: each
    pass over them lists the store again when it ends
    (:mod:`dasketch._blocks.store_watch`), which an eager pass would skip.

    Eager passes give the results of the Dask computation they stand for: the
    same functions of the same blocks, run with one BLAS thread, their parts
    combined by the same tree (:func:`~dasketch._blocks.tasks.streamed_tree`).
    Under the threaded scheduler they run on as many threads as it would
    (:func:`~dasketch._blocks.tasks.check_threads`), one block each, with
    neither a graph built nor its inputs tokenised on every pass; without
    ``threaded`` several blocks under the threaded or process schedulers stay
    Dask computations.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, map_reduce, add
    >>> blocks = run_eagerly(as_row_blocks(np.ones((4, 2))))
    >>> blocks.eager, map_reduce(blocks, lambda b, start, stop: b.sum(axis=0), add)
    (True, array([4., 4.]))
    """
    if (blocks.eager or not blocks.resident or blocks.reader is not None
            or not dask.config.get(EAGER_KEY, True)):
        return blocks
    threads = 1
    if len(blocks.blocks) != 1 and dask.base.get_scheduler() is not dask.local.get_sync:
        if not _local_scheduler_runs_eagerly(threaded):
            return blocks
        threads = min(check_threads(), len(blocks.blocks))
    if client is not None or active_client() is not None or client_holding(blocks.blocks):
        return blocks
    if store_watch.stores_read_by(blocks.blocks):
        return blocks   # kept from a remote store: every pass lists it again when it ends
    keys = tuple(block.key for block in blocks.blocks)
    if keys == tuple(key for key, _ in blocks.literals):
        arrays = tuple(array for _, array in blocks.literals)
    else:  # the one graph: the blocks themselves
        arrays = dask.compute(*blocks.blocks, scheduler="synchronous")
    return replace(blocks, blocks=tuple(arrays), eager=True, threads=threads, literals=())


def _local_scheduler_runs_eagerly(threaded):
    """Whether the active scheduler lets passes over several blocks in memory run
    eagerly: the synchronous one, or with ``threaded`` the threaded one (Dask's
    default) with no progress bar wanted (a progress bar counts the tasks of
    Dask computations)."""
    scheduler = dask.base.get_scheduler()
    if scheduler is dask.local.get_sync:
        return True
    return threaded and scheduler in (None, dask.threaded.get) and not progress_wanted()


def passes_run_eagerly(client=None, *, threaded=False):
    """Whether :func:`run_eagerly` with these arguments makes the blocks of a
    matrix in memory eager, whatever their number: ``dask.config``
    ``"dasketch.eager"`` is not False, no ``distributed`` client is given or
    active, and the scheduler is the synchronous one or, with ``threaded``, the
    threaded one with no progress bar wanted. Known before the blocks are read,
    so that a caller can skip naming them after their content (no key of theirs
    reaches another computation)."""
    return (bool(dask.config.get(EAGER_KEY, True)) and client is None
            and active_client() is None and _local_scheduler_runs_eagerly(threaded))


_transformed = transformed_blocks  # its former name
