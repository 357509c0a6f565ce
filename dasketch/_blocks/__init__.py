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

The blocked sketch of :func:`dasketch.sketch` and :class:`dasketch.SketchPCA`,
its defaults and its check of one task's memory against the workers' limit
(:mod:`.task_memory`) live in :mod:`.blocked_sketch` (:func:`sketch_blocks`).

Other packages import from here only, never from the submodules: the
primitives above, the functions tasks run (:mod:`.block_functions`), the
column scaling in the tasks (:mod:`.scaling`), the plans of stores read along
their columns (:mod:`.column_reads`, :mod:`.transposed_store`,
:mod:`.stacked_store`), the store opener they use
(:func:`~dasketch.storage.reading.open_store_array`), whether an input is read
block by block (:func:`is_out_of_core`), the bridge's clients and tasks, and
the estimators' side: ``X @ matrix + offset`` out of core (:mod:`.blockwise`),
input validation and parameter rules on top of scikit-learn's, imported on
first use (:data:`ESTIMATOR_NAMES`).
"""

import importlib

from dasketch._blocks.array_libraries import block_namespace, is_numpy_block, to_host
from dasketch._blocks.block_functions import (
    affine_block,
    centred_rows,
    class_labels,
    embed_block,
    gaussian_log_likelihood_block,
    gaussian_tile,
    gram_block,
    leverage_block,
    matvec_block,
    merge_all_sketches,
    power_of_two_rows,
    project_block,
    resized_sketch,
    sketch_block,
    squared_norms_block,
    transposed_pca_pass,
)
from dasketch._blocks.blocked_sketch import (
    SKETCH_UPDATES,
    sketch_blocks,
    sketch_dense_block_rows,
)
from dasketch._blocks.blockwise import affine_rows
from dasketch._blocks.cache import CacheChoice, cache_blocks
from dasketch._blocks.cluster_wait import worker_timeout
from dasketch._blocks.column_reads import plan_column_reads
from dasketch._blocks.embedding_blocks import embed_weighted_dense
from dasketch._blocks.inputs import as_row_blocks, is_out_of_core
from dasketch._blocks.mapping import block_tasks, map_reduce, map_rows, side_by_side
from dasketch._blocks.namespace_products import (
    device_transfers,
    float_rows,
    forward_backward,
    join_columns,
    like,
    rows_product,
    transpose_product,
)
from dasketch._blocks.operators import (
    gather_rows,
    iter_row_blocks,
    matvec,
    random_projection,
    rmatvec,
    sparse_embed_streams,
)
from dasketch._blocks.readers import check_array_library, host_values
from dasketch._blocks.readers.array_types import foreign_array_type, host_dtype
from dasketch._blocks.readers.options import dense_block_rows
from dasketch._blocks.readers.parquet import ParquetSource, open_parquet
from dasketch._blocks.row_blocks import (
    RowBlocks,
    append_ones_column,
    as_row_aligned,
    chunk_blocks,
    default_block_rows,
    passes_run_eagerly,
    rechunk_rows,
    run_eagerly,
    select_columns,
    transformed_blocks,
)
from dasketch._blocks.scaling import column_summary, scaled_blocks
from dasketch._blocks.scheduler import (
    compute,
    default_client,
    is_dask_collection,
    known_row_chunks,
    persist,
    progress_wanted,
)
from dasketch._blocks.stacked_store import (
    masked_weighted,
    stacked_plan,
    stacked_store_blocks,
    stacked_transposed_blocks,
)
from dasketch._blocks.stores import open_zarr_array
from dasketch._blocks.task_memory import check_estimate_memory
from dasketch._blocks.tasks import (
    DEFAULT_SPLIT_EVERY,
    add,
    check_split_every,
    fit_blas_threads,
    fit_size,
    task,
    tree_reduce,
)
from dasketch._blocks.transposed_store import stored_array, transposed_store_blocks
from dasketch.storage.reading import open_store_array

__all__ = [
    "CacheChoice", "DEFAULT_SPLIT_EVERY", "ParquetSource", "RowBlocks", "add", "affine_block",
    "append_ones_column", "as_row_aligned", "as_row_blocks", "block_tasks", "cache_blocks",
    "centred_rows", "check_split_every", "chunk_blocks", "class_labels", "column_summary",
    "compute", "default_block_rows", "default_client", "dense_block_rows", "embed_block",
    "embed_weighted_dense",
    "fit_blas_threads", "fit_size", "gather_rows", "gaussian_log_likelihood_block", "gaussian_tile",
    "gram_block",
    "is_dask_collection", "is_out_of_core",
    "iter_row_blocks", "known_row_chunks", "leverage_block", "map_reduce", "map_rows",
    "masked_weighted", "matvec", "matvec_block", "merge_all_sketches", "open_parquet",
    "open_store_array", "open_zarr_array",
    "persist", "plan_column_reads", "progress_wanted", "project_block", "random_projection",
    "rechunk_rows", "passes_run_eagerly",
    "resized_sketch", "rmatvec", "run_eagerly", "scaled_blocks", "select_columns",
    "side_by_side", "sketch_block", "sparse_embed_streams", "squared_norms_block",
    "stacked_plan", "stacked_store_blocks", "stacked_transposed_blocks", "stored_array",
    "task", "transformed_blocks", "transposed_pca_pass", "transposed_store_blocks",
    "tree_reduce", "worker_timeout",
    "SKETCH_UPDATES", "check_estimate_memory", "sketch_blocks", "sketch_dense_block_rows",
    "check_array_library", "affine_rows", "host_values", "power_of_two_rows",
    "block_namespace", "device_transfers", "float_rows", "forward_backward", "is_numpy_block",
    "join_columns", "like", "rows_product", "to_host", "transpose_product", "foreign_array_type",
    "host_dtype",
]

# The estimators' side of the bridge, which imports scikit-learn: input
# validation (:mod:`.validation`), parameter rules (:mod:`.params`) and the
# private scikit-learn names (:mod:`.sklearn_compat`, the one module importing
# them). They are imported on first use (PEP 562), so that a worker process,
# which imports this package to run block tasks, never imports scikit-learn.
# Written here rather than with dasketch.utils.lazy, which stands above the bridge.
ESTIMATOR_NAMES = {
    "validate_input": "dasketch._blocks.validation",
    "as_target_vector": "dasketch._blocks.validation",
    "host_targets": "dasketch._blocks.validation",
    "row_blocks_in_library": "dasketch._blocks.validation",
    "result_meta": "dasketch._blocks.validation",
    "Interval": "dasketch._blocks.params",
    "BasePCA": "dasketch._blocks.sklearn_compat",
    "RealNotInt": "dasketch._blocks.sklearn_compat",
    "StrOptions": "dasketch._blocks.sklearn_compat",
    "assess_dimension": "dasketch._blocks.sklearn_compat",
}


def __getattr__(name):
    if name not in ESTIMATOR_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(ESTIMATOR_NAMES[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(ESTIMATOR_NAMES))
