"""The bridge's two primitives: :func:`map_rows` and :func:`map_reduce`.

Every pass over the row blocks of a matrix is one of them: a function of each
block whose results are rows aligned with the blocks (:func:`map_rows`, a lazy
Dask array), or whose results are combined by a deterministic tree
(:func:`map_reduce`, a Delayed). Either way one task per block applies the
function, and for a dense zarr store that task reads the block's rows itself
(``RowBlocks.reader``): no read task, no rows held between tasks, and with
``keeps_block=False`` the rows go into buffers each worker process reuses
(:func:`dasketch.io.borrowed_rows`): a pass costs little more than a plain
read of the store (measured by benchmarks/bench_sketch.py; figures in
benchmarks/README.md).
"""

from __future__ import annotations

import numbers

import dask
import dask.array as da
import numpy as np

from dasketch._blocks.block_functions import add
from dasketch._blocks.row_blocks import RowBlocks, as_row_aligned
from dasketch._blocks.scheduler import client_holding
from dasketch._blocks.tasks import task, tree_reduce
from dasketch.io import borrowed_rows, read_rows


class _ReadThenApply:
    """``func(rows, start, stop, *args, **kwargs)`` of the rows ``[start, stop)``
    that the task reads from a checked zarr array itself
    (:func:`dasketch.io.read_rows`), after the block's ``transform``."""

    def __init__(self, func, check_files, name, reuse, transform=()):
        self.func, self.check_files, self.name = func, check_files, name
        self.reuse, self.transform = reuse, tuple(transform)
        self.__name__ = dask.utils.funcname(func)

    def _apply(self, rows, start, stop, args, kwargs):
        for step in self.transform:
            rows = step(rows)
        return self.func(rows, start, stop, *args, **kwargs)

    def __call__(self, array, start, stop, *args, **kwargs):
        if not self.reuse:
            rows = read_rows(array, start, stop, self.check_files, self.name)
            return self._apply(rows, start, stop, args, kwargs)
        with borrowed_rows(array, start, stop, self.check_files, self.name) as rows:
            return self._apply(rows, start, stop, args, kwargs)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func), self.check_files,
                self.name, self.reuse, dask.base.tokenize(self.transform))


def _pieces(array):
    """The row chunks of a Dask array as Delayed objects (graphs of persisted
    arrays are not optimised, which would hide the futures that name their client)."""
    persisted = client_holding([array]) is not None
    return array.to_delayed(optimize_graph=not persisted).ravel()


def block_tasks(blocks, func, per_block=None, *, shared=None, keeps_block=True,
                which=None):
    """One Delayed task per block ``i`` (of ``which``, default all):
    ``func(block, start, stop, *per_block[i], **shared)``.

    Blocks with a ``reader`` are read by the task itself; ``keeps_block=False``
    says ``func``'s result keeps no reference to its block, so the rows may be
    read into a buffer the process reuses. ``shared`` values (vectors, matrices)
    enter the graph once, under one key each, not once per task.
    """
    which = range(len(blocks.blocks)) if which is None else which
    per_block = per_block if per_block is not None else [()] * len(blocks.blocks)
    shared = {key: dask.delayed(value, pure=True) for key, value in (shared or {}).items()}
    ranges = blocks.ranges()
    if blocks.reader is not None:
        checked, check_files, name = blocks.reader
        mapped = task(_ReadThenApply(func, check_files, name, not keeps_block,
                                     blocks.transform))
        return [mapped(checked, *ranges[i], *per_block[i], **shared) for i in which]
    mapped = task(func)
    return [mapped(blocks.blocks[i], *ranges[i], *per_block[i], **shared) for i in which]


def _aligned_pieces(blocks, aligned):
    """Per block, its pieces of the row-aligned arrays ``aligned``."""
    if not aligned:
        return None
    arrays = [as_row_aligned(a, blocks, name=f"aligned[{i}]") for i, a in enumerate(aligned)]
    return list(zip(*(_pieces(a) for a in arrays)))


def map_rows(blocks, func, *aligned, n_columns=None, dtype=np.float64, shared=None,
             keeps_block=True):
    """Lazy Dask array whose rows ``[start, stop)`` are
    ``func(block, start, stop, *pieces, **shared)``, one task per block.

    Parameters
    ----------
    blocks : RowBlocks
    func : callable
        Returns ``stop - start`` rows: shape ``(stop - start,)`` when
        ``n_columns`` is None, else ``(stop - start, n_columns)``.
    *aligned : array_like or dask.array.Array
        Arrays with ``n`` rows; each task gets its block's rows of them.
    n_columns : int, optional
    dtype : numpy.dtype
        Of the result.
    shared : dict, optional
        Keyword arguments of ``func`` stored once in the graph.
    keeps_block : bool
        False when ``func``'s result holds no reference to its block (zarr
        rows are then read into reused buffers).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, map_rows
    >>> blocks = as_row_blocks(np.arange(10.0).reshape(5, 2), block_rows=2)
    >>> map_rows(blocks, lambda b, start, stop, y: b.sum(axis=1) * y, np.arange(5.0)).compute()
    array([ 0.,  5., 18., 39., 68.])
    """
    if aligned and isinstance(aligned[0], numbers.Integral):
        # The earlier signature map_rows(blocks, func, n_columns, dtype) (still
        # used by dasketch.utils.blockwise): an integer is never a row-aligned array.
        n_columns, aligned = aligned[0], aligned[1:]
    parts = block_tasks(blocks, func, _aligned_pieces(blocks, aligned), shared=shared,
                        keeps_block=keeps_block)
    pieces = [da.from_delayed(part, shape=(stop - start,) if n_columns is None
                              else (stop - start, int(n_columns)), dtype=dtype)
              for part, (start, stop) in zip(parts, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def map_reduce(blocks, func, combine, *aligned, split_every=None, shared=None,
               keeps_block=True):
    """Delayed tree combination, by ``combine(*parts)`` with fan-in ``split_every``
    (:func:`~dasketch._blocks.tasks.check_split_every`), of
    ``func(block, start, stop, *pieces, **shared)`` over the blocks.

    The tree depends only on the number of blocks, and the blocks only on the
    shape, so the result is the same for any chunking, scheduler or number of
    workers. ``aligned``, ``shared`` and ``keeps_block`` are as in
    :func:`map_rows`. Compute the result with :func:`~dasketch._blocks.compute`.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import add, as_row_blocks, compute, map_reduce
    >>> blocks = as_row_blocks(np.arange(12.0).reshape(4, 3), block_rows=3)
    >>> compute(map_reduce(blocks, lambda b, start, stop, v: b.T @ v, add, np.ones(4)))[0]
    array([18., 22., 26.])
    """
    parts = block_tasks(blocks, func, _aligned_pieces(blocks, aligned), shared=shared,
                        keeps_block=keeps_block)
    return tree_reduce(parts, combine, split_every)


# ------------------------------------------------ names kept for earlier callers
def tree_sum(blocks, func, *, split_every=None, keeps_block=True):
    """:func:`map_reduce` with the sum as ``combine``."""
    return map_reduce(blocks, func, add, split_every=split_every, keeps_block=keeps_block)


class _ChunkFunction:
    """``func(*chunks)`` called as a block function ``(block, start, stop, *pieces)``."""

    def __init__(self, func):
        self.func = func
        self.__name__ = dask.utils.funcname(func)

    def __call__(self, block, start, stop, *pieces):
        return self.func(block, *pieces)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func))


def _chunk_blocks(array):
    """The row chunks of a Dask array, as they are, as :class:`RowBlocks`."""
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(array.chunks[0])]))
    if any(len(c) > 1 for c in array.chunks[1:]):
        array = array.rechunk({ax: -1 for ax in range(1, array.ndim)})
    width = int(np.prod(array.shape[1:], dtype=np.int64))
    return RowBlocks(tuple(_pieces(array)), offsets, width, array.dtype, False)


def tree_sum_rows(arrays, func, *, split_every=None):
    """Delayed sum over row chunks of ``func(*chunks)`` for Dask arrays with the
    row chunks of ``arrays[0]`` (e.g. a projection ``X R``, labels and margins):
    :func:`map_reduce` over the chunks of the first.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch._blocks import tree_sum_rows
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> b = da.from_array(np.ones(3), chunks=2)
    >>> tree_sum_rows((a, b), lambda x, y: x.T @ y).compute()
    array([6., 9.])
    """
    return map_reduce(_chunk_blocks(arrays[0]), _ChunkFunction(func), add, *arrays[1:],
                      split_every=split_every)


def map_row_chunks(arrays, func, n_columns=None, dtype=np.float64):
    """Lazy Dask array of ``func(*chunks)`` over the row chunks of ``arrays[0]``
    and the same rows of the others: :func:`map_rows` over the chunks of the first.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch._blocks import map_row_chunks
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> map_row_chunks((a,), lambda x: x.sum(axis=1)).compute()
    array([1., 5., 9.])
    """
    return map_rows(_chunk_blocks(arrays[0]), _ChunkFunction(func), *arrays[1:],
                    n_columns=n_columns, dtype=dtype)
