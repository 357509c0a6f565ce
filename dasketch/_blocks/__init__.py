"""The one bridge between the kernels and Dask.

Inputs are normalised to :class:`RowBlocks` (:mod:`.inputs`, by one reader per
kind of input, :mod:`.readers`; :mod:`.row_blocks`; zarr stores through
:mod:`.stores`, which builds the task that checks a store on a worker). One
block in this process's memory runs eagerly (:func:`run_eagerly`): the
primitives call their functions at once.
Every pass over the blocks is one of two primitives (:mod:`.mapping`):
:func:`map_rows`, per-block results aligned with the rows, or
:func:`map_reduce`, per-block results combined by a deterministic tree
(:mod:`.tasks`, fan-in :func:`check_split_every`), or both from one read; both
are built on :func:`block_tasks` (one task per block), which a pass that reads
only some blocks (the row gathers of :func:`gather_rows`) uses itself. The task
of a block reads a store's rows itself, unless the decoded blocks are kept in
worker memory for algorithms of many passes (:func:`cache_blocks`,
:mod:`.cache`). The functions tasks run live in :mod:`.block_functions` (numpy,
scipy and the kernels only: workers never import scikit-learn);
:mod:`.operators` holds the blocked products with ``X`` and :mod:`.scheduler`
computes on a client or the active scheduler, then lists again the remote
stores the computation read (:mod:`.store_watch`). Only small per-block results
travel between workers.
"""

from dasketch._blocks.cache import CacheChoice, cache_blocks
from dasketch._blocks.inputs import as_row_blocks
from dasketch._blocks.mapping import block_tasks, map_reduce, map_rows, side_by_side
from dasketch._blocks.operators import (
    gather_rows,
    iter_row_blocks,
    matvec,
    random_projection,
    rmatvec,
    sparse_embed_streams,
)
from dasketch._blocks.row_blocks import (
    RowBlocks,
    append_ones_column,
    as_row_aligned,
    chunk_blocks,
    default_block_rows,
    rechunk_rows,
    run_eagerly,
    select_columns,
)
from dasketch._blocks.scheduler import (
    compute,
    is_dask_collection,
    known_row_chunks,
    persist,
    progress_wanted,
)
from dasketch._blocks.tasks import DEFAULT_SPLIT_EVERY, add, check_split_every, tree_reduce

__all__ = [
    "DEFAULT_SPLIT_EVERY", "CacheChoice", "RowBlocks", "add", "append_ones_column",
    "as_row_aligned", "as_row_blocks", "block_tasks", "cache_blocks", "check_split_every",
    "chunk_blocks", "compute", "default_block_rows", "gather_rows", "is_dask_collection",
    "iter_row_blocks", "known_row_chunks", "map_reduce", "map_rows", "matvec", "persist",
    "random_projection", "rechunk_rows", "rmatvec", "run_eagerly", "select_columns",
    "progress_wanted", "side_by_side",
    "sparse_embed_streams", "tree_reduce",
]
