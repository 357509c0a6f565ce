"""The bridge's two primitives: :func:`map_rows` and :func:`map_reduce`.

Every pass over the row blocks of a matrix is one of them: a function of each
block whose results are rows aligned with the blocks (:func:`map_rows`, a lazy
Dask array), or whose results are combined by a deterministic tree
(:func:`map_reduce`, a Delayed), or both from one read of each block
(:func:`map_reduce` with ``rows``). Either way one task per block applies the
function, and for a store (dense or sparse zarr, HDF5) that task reads the
block's rows itself (``RowBlocks.reader``): no read task, no rows held between
tasks, and with ``keeps_block=False`` dense rows go into buffers each worker
process reuses (:func:`dasketch.storage.reading.borrowed_rows`): a pass costs little more
than a plain read of the store (measured by benchmarks/bench_sketch.py; figures
in benchmarks/README.md).
"""

from __future__ import annotations

from functools import partial

import dask
import dask.array as da
import numpy as np
from dask.highlevelgraph import HighLevelGraph

from dasketch._blocks.array_libraries import block_namespace
from dasketch._blocks.namespace_products import join_columns
from dasketch._blocks.row_blocks import as_row_aligned, delayed_row_chunks
from dasketch._blocks.tasks import (
    ReadThenApply,
    add,
    check_split_every,
    in_order,
    one_blas_thread_while_computing,
    streamed_tree,
    task,
    tree_reduce,
)


def block_tasks(blocks, func, per_block=None, *, shared=None, keeps_block=True,
                which=None):
    """One Delayed task per block ``i`` (of ``which``, default all):
    ``func(block, start, stop, *per_block[i], **shared)``.

    Blocks with a ``reader`` are read by the task itself; ``keeps_block=False``
    says ``func``'s result keeps no reference to its block, so the rows may be
    read into a buffer the process reuses. ``shared`` values (vectors, matrices)
    enter the graph once, under one key each, not once per task; scalars, strings
    and dtypes sit in each task as they are.
    """
    which = range(len(blocks.blocks)) if which is None else which
    apply, arguments = _applied(blocks, func, per_block, keeps_block)
    if blocks.eager:   # the arrays, computed now (RowBlocks.eager)
        calls = [partial(apply, *arguments(i), **(shared or {})) for i in which]
        with one_blas_thread_while_computing():
            return list(in_order(calls, blocks.threads))
    mapped = task(apply)
    shared = _shared(shared)
    return [mapped(*arguments(i), **shared) for i in which]


# Shared values small enough to sit in each task as they are: Dask inlines them,
# so a key of their own would be a layer no task depends on (an invalid graph for
# ``HighLevelGraph.validate`` and ``dask.array.utils.assert_eq``).
_INLINE_TYPES = (np.dtype, np.generic, str, bytes, bool, int, float, complex, type(None))


def _shared(shared):
    return {key: value if isinstance(value, _INLINE_TYPES) else dask.delayed(value, pure=True)
            for key, value in (shared or {}).items()}


def _applied(blocks, func, per_block, keeps_block):
    """``(apply, arguments)``: ``apply(*arguments(i), **shared)`` is ``func`` of
    block ``i``, reading the block's rows itself when ``blocks`` has a reader."""
    per_block = per_block if per_block is not None else [()] * len(blocks.blocks)
    ranges = blocks.ranges()
    if blocks.reader is not None:
        source, read = blocks.reader
        return (ReadThenApply(func, read, not keeps_block, blocks.transform),
                lambda i: (source, *ranges[i], *per_block[i]))
    return func, lambda i: (blocks.blocks[i], *ranges[i], *per_block[i])


class FoldBlocks:
    """``apply`` of several blocks in turn, in one task, their parts summed into
    one array the task owns (in place for :func:`add`, else by ``combine``):
    the task holds one part and one block's work at a time."""

    def __init__(self, apply, combine):
        self.apply, self.combine = apply, combine
        self.__name__ = dask.utils.funcname(apply)

    def __call__(self, items, **shared):
        total = None
        for arguments in items:
            part = self.apply(*arguments, **shared)
            if total is None:
                total = part.copy() if self.combine is add else part
            elif self.combine is add:
                total += part
            else:
                total = self.combine(total, part)
            del part
        return total

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.apply),
                dask.base.tokenize(self.combine))


def fold_size(blocks, part_bytes):
    """Blocks one task folds into one part: ``part_bytes // read_bytes`` when a
    part is larger than a block (so no part summarises less data than it
    holds), else 1."""
    if not part_bytes:
        return 1
    return max(1, int(part_bytes) // max(int(blocks.read_bytes), 1))


def _aligned_pieces(blocks, aligned):
    """Per block, its pieces of the row-aligned arrays ``aligned``."""
    if not aligned:
        return None
    arrays = [as_row_aligned(a, blocks, name=f"aligned[{i}]") for i, a in enumerate(aligned)]
    if blocks.eager:
        return [tuple(a[start:stop, ...] for a in arrays) for start, stop in blocks.ranges()]
    return list(zip(*(delayed_row_chunks(a) for a in arrays)))


def map_rows(blocks, func, *aligned, n_columns=None, dtype=np.float64, shared=None,
             keeps_block=True, meta=None):
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
    meta : array, optional
        An empty array of another library than numpy when ``func`` returns arrays
        of that library (:mod:`dasketch._blocks.array_libraries`): the Dask
        array's blocks are then of that library, and eager results are joined
        in its namespace.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks, map_rows
    >>> blocks = as_row_blocks(np.arange(10.0).reshape(5, 2), block_rows=2)
    >>> map_rows(blocks, lambda b, start, stop, y: b.sum(axis=1) * y, np.arange(5.0)).compute()
    array([ 0.,  5., 18., 39., 68.])
    """
    parts = block_tasks(blocks, func, _aligned_pieces(blocks, aligned), shared=shared,
                        keeps_block=keeps_block)
    if meta is not None:
        return _concatenated_in_library(blocks, parts, n_columns, meta)
    return _concatenated(blocks, parts, n_columns, dtype)


def side_by_side(*arrays):
    """Lazy row-aligned 2-D Dask arrays joined along their columns, each row chunk
    one chunk of all the columns (e.g. the projection and the columns a fit
    adds to it); arrays of eager passes joined as arrays of their library. The
    chunks of Dask arrays are joined by one task each (:func:`join_columns`),
    in the chunks' own library."""
    if not any(isinstance(a, da.Array) for a in arrays):
        return join_columns(*arrays)
    arrays = [da.asarray(a).rechunk({0: arrays[0].chunks[0], 1: -1}) for a in arrays]
    width = sum(a.shape[1] for a in arrays)
    joined = task(join_columns)
    pieces = [da.from_delayed(joined(*chunks), shape=(rows, width), dtype=arrays[0].dtype)
              for chunks, rows in zip(zip(*(delayed_row_chunks(a) for a in arrays)),
                                      arrays[0].chunks[0])]
    return da.concatenate(pieces, axis=0)


def _concatenated(blocks, parts, n_columns, dtype):
    """The Delayed rows ``parts`` of the blocks as one lazy Dask array (the rows
    themselves, concatenated, for eager blocks)."""
    if blocks.eager:
        return parts[0] if len(parts) == 1 else block_namespace(parts[0]).concat(parts, axis=0)
    pieces = [da.from_delayed(part, shape=(stop - start,) if n_columns is None
                              else (stop - start, int(n_columns)), dtype=dtype)
              for part, (start, stop) in zip(parts, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def _concatenated_in_library(blocks, parts, n_columns, meta):
    """:func:`_concatenated` of rows of the library of ``meta``: joined by its
    namespace's ``concat`` for eager blocks, else one Dask array whose chunks are
    the parts, with ``meta`` (built from its graph: ``dask.array.concatenate``
    casts every piece through numpy dtypes, which another library need not have)."""
    if blocks.eager:
        return parts[0] if len(parts) == 1 else block_namespace(meta).concat(parts, axis=0)
    name = "rows-" + dask.base.tokenize(*parts)
    tail = () if n_columns is None else (0,)
    layer = {(name, i) + tail: part.key for i, part in enumerate(parts)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=parts)
    chunks = (tuple(np.diff(blocks.offsets)),) + (() if n_columns is None
                                                   else ((int(n_columns),),))
    return da.Array(graph, name, chunks, meta=meta)


def map_reduce(blocks, func, combine, *aligned, split_every=None, shared=None,
               keeps_block=True, rows=None, part_bytes=None, fresh_parts=False):
    """Delayed tree combination, by ``combine(*parts)`` with fan-in ``split_every``
    (:func:`~dasketch._blocks.tasks.check_split_every`), of
    ``func(block, start, stop, *pieces, **shared)`` over the blocks.

    The tree depends only on the number of blocks, and the blocks only on the
    shape, so the result is the same for any chunking, scheduler or number of
    workers. ``aligned``, ``shared`` and ``keeps_block`` are as in
    :func:`map_rows`. ``part_bytes``, the size of one part when it may be
    large, bounds memory: a part larger than a block is the sum over several
    consecutive blocks, folded in one task (:func:`fold_size`,
    :class:`FoldBlocks`), and the fan-in is lowered so that a combine task stays
    within a memory budget (:func:`~dasketch._blocks.tasks.check_split_every`).
    Compute the result with :func:`~dasketch._blocks.compute`.

    With ``rows=(n_columns, dtype)`` the pass is fused: ``func`` returns
    ``(block_rows, part)`` and the result is ``(array, total)``, the rows as
    :func:`map_rows` returns them (``n_columns`` None for one value a row) and
    the tree of the parts, from one read of every block (e.g. the margins
    ``X w`` kept for a later step beside the gradient ``X^T l'(X w)``).
    ``fresh_parts=True`` says that every part ``func`` returns is a new array
    that nothing else holds: an eager tree then sums into the parts themselves
    (``combine.into``, :func:`~dasketch._blocks.tasks.streamed_tree`).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import add, as_row_blocks, compute, map_reduce
    >>> blocks = as_row_blocks(np.arange(12.0).reshape(4, 3), block_rows=3)
    >>> compute(map_reduce(blocks, lambda b, start, stop, v: b.T @ v, add, np.ones(4)))[0]
    array([18., 22., 26.])
    """
    fold = fold_size(blocks, part_bytes) if rows is None else 1
    if blocks.eager:
        return _eager_map_reduce(blocks, func, combine, aligned, fold,
                                 check_split_every(split_every, part_bytes), shared or {},
                                 keeps_block, rows, fresh_parts)
    if fold > 1:
        apply, arguments = _applied(blocks, func, _aligned_pieces(blocks, aligned),
                                    keeps_block)
        count, folded = len(blocks.blocks), task(FoldBlocks(apply, combine))
        parts = [folded([arguments(i) for i in range(lo, min(lo + fold, count))],
                        **_shared(shared)) for lo in range(0, count, fold)]
        return tree_reduce(parts, combine, split_every, part_bytes)
    parts = block_tasks(blocks, func, _aligned_pieces(blocks, aligned), shared=shared,
                        keeps_block=keeps_block)
    if rows is None:
        return tree_reduce(parts, combine, split_every, part_bytes)
    n_columns, dtype = rows
    return (_concatenated(blocks, [part[0] for part in parts], n_columns, dtype),
            tree_reduce([part[1] for part in parts], combine, split_every, part_bytes))


def _eager_map_reduce(blocks, func, combine, aligned, fold, split_every, shared, keeps_block,
                      rows, fresh_parts=False):
    """:func:`map_reduce` of eager blocks, computed now: the parts of the blocks
    (of ``fold`` consecutive blocks each) enter the tree as they are made
    (:func:`~dasketch._blocks.tasks.streamed_tree`), so that a few are held at a
    time; with ``rows``, the rows of every block are kept and returned first."""
    apply, arguments = _applied(blocks, func, _aligned_pieces(blocks, aligned), keeps_block)
    count, kept = len(blocks.blocks), []

    if fold > 1:
        folded = FoldBlocks(apply, combine)
        calls = (partial(folded, [arguments(i) for i in range(lo, min(lo + fold, count))],
                         **shared) for lo in range(0, count, fold))
    else:
        calls = (partial(apply, *arguments(i), **shared) for i in range(count))

    def parts():
        for out in in_order(calls, blocks.threads):
            if rows is not None:
                kept.append(out[0])
                out = out[1]
            yield out

    with one_blas_thread_while_computing():
        total = streamed_tree(parts(), combine, split_every, fresh_parts=fresh_parts)
    if rows is None:
        return total
    return _concatenated(blocks, kept, *rows), total
