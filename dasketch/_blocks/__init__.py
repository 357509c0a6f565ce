"""The one bridge between the kernels and Dask.

Inputs are normalised to :class:`RowBlocks` (:mod:`.row_blocks`); kernels are
mapped over the blocks as tasks and their results merged by deterministic tree
reductions (:mod:`.tasks`); :mod:`.operators` holds the blocked products with
``X`` and :mod:`.scheduler` computes on a client or the active scheduler. Only
small per-block results travel between workers.
"""

from dasketch._blocks.operators import (
    gather_rows, iter_row_blocks, matvec, random_projection, rmatvec, sparse_embed_streams)
from dasketch._blocks.row_blocks import (
    RowBlocks, append_ones_column, as_row_aligned, as_row_blocks, default_block_rows,
    rechunk_rows)
from dasketch._blocks.scheduler import compute, is_dask_collection, persist
from dasketch._blocks.tasks import (
    DEFAULT_SPLIT_EVERY, check_split_every, map_reduce, map_row_chunks, map_rows, tree_reduce,
    tree_sum, tree_sum_rows)

__all__ = [
    "DEFAULT_SPLIT_EVERY", "RowBlocks", "append_ones_column", "as_row_aligned", "as_row_blocks", "check_split_every",
    "compute", "default_block_rows", "gather_rows", "is_dask_collection", "iter_row_blocks",
    "map_reduce", "map_row_chunks", "map_rows", "matvec", "persist", "random_projection",
    "rechunk_rows", "rmatvec", "sparse_embed_streams", "tree_reduce", "tree_sum",
    "tree_sum_rows",
]
