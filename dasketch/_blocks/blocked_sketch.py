"""The blocked sketch behind :func:`dasketch.sketch` and
:class:`dasketch.SketchPCA`: a whole (possibly larger than memory) matrix sketched
block by block, the block sketches merged by a tree reduction, with the defaults
of the update, the working size, the fan-in and the rows per block, and the check
of one task's memory (:mod:`.task_memory`) before anything runs."""

from __future__ import annotations

from functools import partial

from dasketch._blocks.block_functions import (
    merge_all_sketches,
    merge_all_summaries,
    resized_sketch,
    sketch_block,
    summarise_block,
)
from dasketch._blocks.inputs import as_row_blocks
from dasketch._blocks.mapping import map_reduce
from dasketch._blocks.row_blocks import default_block_rows, passes_run_eagerly, run_eagerly
from dasketch._blocks.scheduler import compute, default_client
from dasketch._blocks.task_memory import check_task_memory, fits_workers
from dasketch._blocks.tasks import check_split_every, one_blas_thread_while_computing, task
from dasketch.kernels.certificates import (
    DEFAULT_FAILURE_PROBABILITY,
    check_failure_probability,
)
from dasketch.kernels.embeddings import resolve_seed
from dasketch.kernels.frequent_directions import check_sketch_parameters
from dasketch.kernels.shrink import SHRINK_UPDATES
from dasketch.kernels.shrink_schedule import rows_per_shrink

SKETCH_UPDATES = SHRINK_UPDATES + ("gram", "randomized")
# Dense rows at most this wide are summarised by their exact Gram matrices by
# default (update "gram"): a d x d Gram per part, 32 MiB at the widest, and one
# eigendecomposition of it at the root (timed in benchmarks/README.md).
GRAM_MAX_FEATURES = 2048
# Inner merges hold split_every working sketches at once; the working size is capped
# so that they stay within this many float64 values (256 MiB).
MERGE_VALUES = 2 ** 25
# Sparse rows at least this many times wider than the sketch go to the randomized
# update by default (see :func:`choose_update`).
RANDOMIZED_WIDTH_RATIO = 32
# Nonzeros and most rows of a default block of the randomized update (see
# :func:`randomized_block_rows`).
RANDOMIZED_BLOCK_NONZEROS = 2 ** 23
RANDOMIZED_MAX_BLOCK_ROWS = 2 ** 17
# Values a block of wide dense rows may hold to reach 16 l rows (128 MiB).
WIDE_BLOCK_VALUES = 2 ** 24


def choose_update(update, sparse, n_features, sketch_size):
    """Resolve ``update="auto"``: ``"randomized"`` for sparse rows with ``d >=
    32 l``, where one randomized compression per block beats the exact shrinks'
    O(n d l) on error per second (benchmarks/bench_sparse_wide.py); ``"gram"`` for
    dense rows with ``l < d <= GRAM_MAX_FEATURES``, whose Gram summaries
    (:mod:`dasketch.kernels.gram_sketch`) take one eigendecomposition where block
    shrinks take one per block and merge, for the optimal shrinkage
    (benchmarks/bench_gram.py; the bridge falls back to the shrinks when the
    workers cannot hold the summaries); else the exact cost model of
    :func:`~dasketch.kernels.shrink_schedule.rows_per_shrink`."""
    if update == "auto" and sparse and n_features >= RANDOMIZED_WIDTH_RATIO * sketch_size:
        return "randomized"
    if update == "auto" and not sparse and sketch_size < n_features <= GRAM_MAX_FEATURES:
        return "gram"
    if update == "gram" and sparse:
        raise ValueError("update='gram' sums the Gram matrices of dense rows; X is sparse: "
                         "use update='auto', 'block', 'buffered' or 'randomized'")
    return update


def sketch_dense_block_rows(sketch_size, n_features):
    """Default rows per block of dense rows: :func:`default_block_rows`, raised for
    wide rows towards ``16 l`` while a block holds at most :data:`WIDE_BLOCK_VALUES`.

    Blocks of few wide rows leave most of the error to the merges of their
    sketches, so taller blocks of wide rows give a smaller error in about the same
    time (measured by benchmarks/bench_sparse_wide.py, its ``rows`` case; figures in
    benchmarks/README.md).
    """
    rows = default_block_rows(n_features)
    if rows >= 16 * int(sketch_size):
        return rows
    wide = default_block_rows(n_features, block_values=WIDE_BLOCK_VALUES)
    return int(max(rows, min(wide, 16 * int(sketch_size))))


def randomized_block_rows(nonzeros_per_row, n_features):
    """Default rows per block of sparse rows sketched by the randomized update.

    Twice the exact update's blocks: about :data:`RANDOMIZED_BLOCK_NONZEROS`
    nonzeros and at most :data:`RANDOMIZED_MAX_BLOCK_ROWS` rows, while such a block
    holds at least 16 nonzeros per column, else :func:`default_block_rows`. Each
    block pays work that grows with the columns it touches, not with its nonzeros
    (the test matrix, the Lanczos basis of its certificate, its sketch and the
    merges), so taller blocks spread it over more nonzeros and fewer merges lose
    less error; narrower blocks of wider rows touch more columns as they grow, and
    their memory grows with them. Measured by benchmarks/bench_sparse_wide.py
    (figures in benchmarks/README.md).
    """
    if RANDOMIZED_BLOCK_NONZEROS < 16 * int(n_features):
        return default_block_rows(nonzeros_per_row)
    return default_block_rows(nonzeros_per_row, block_values=RANDOMIZED_BLOCK_NONZEROS,
                              max_rows=RANDOMIZED_MAX_BLOCK_ROWS)


def default_working_size(sketch_size, n_features, *, update="auto", split_every=None,
                         sparse=False):
    """Working sketch size of block sketches and inner merges.

    * ``4 l`` for exact updates of sparse rows and of dense rows no wider than a
      default block is tall (``d <= 2048``): oversampled inner sketches lose less
      to the many shrinks of the tree, at no extra time on such rows (measured on
      a9a and slowly decaying spectra when the default was set; the error of the
      default is reported by benchmarks/bench_sketch.py).
    * Dense rows wider than that are absorbed through the row Gram, about
      ``(2 m + s / 2) d`` flops per row at working size ``m`` and ``s`` rows per
      shrink, so ``m`` is chosen by error per second: ``l`` when a default block
      (:func:`sketch_dense_block_rows`) holds at least ``16 l`` rows, else ``1.5 l``, as
      the merges of short blocks carry more of the error (measured by
      benchmarks/bench_sparse_wide.py, its ``rows`` case).
    * ``l`` for the randomized update, whose passes and dense work grow with the
      width: a larger working size cost more time than its smaller error was worth
      on both sparse cases of benchmarks/bench_sparse_wide.py; merges of wide rows
      then stay within :data:`MERGE_VALUES` through :func:`default_split_every`,
      which lowers the fan-in.

    Exact updates are capped so that ``split_every`` working sketches stay within
    :data:`MERGE_VALUES`, and never below ``l``. The figures behind these choices
    are in benchmarks/README.md.
    """
    if update == "randomized":
        return int(sketch_size)
    factor = 4
    block_rows = sketch_dense_block_rows(sketch_size, n_features)
    if not sparse and block_rows < n_features:
        # Wide dense rows: blocks are absorbed through the row Gram, where each
        # row costs about (2 m + s / 2) d flops at working size m and chunk s.
        # Blocks of fewer than 16 l rows leave the error to the merges: 1.5 l there.
        factor = 1 if block_rows >= 16 * sketch_size else 1.5
    cap = MERGE_VALUES // max(check_split_every(split_every) * int(n_features), 1)
    return int(max(sketch_size, min(int(factor * sketch_size), cap)))


def default_split_every(working_size, n_features):
    """Fan-in of the merge tree: that of :func:`~dasketch._blocks.check_split_every`
    (``dask.config`` ``split_every``, else 8), reduced (down to 2) so that the
    working sketches of one merge stay within :data:`MERGE_VALUES` when rows are
    very wide."""
    fits = MERGE_VALUES // max(int(working_size) * int(n_features), 1)
    return int(max(2, min(check_split_every(None), fits)))


def _gram_fits(client, update, requested, blocks, working_size, split_every):
    """The update, and the rows of a sketch as large as one part of its tree, after
    checking that the ``d x d`` Gram summaries of ``update="gram"`` pay and fit the
    workers. Chosen by ``"auto"``, they give way to the exact shrinks for blocks of
    fewer than ``d`` rows (a Gram summary would hold more than its block, and the
    shrinks of short blocks take the cheaper row side) and where the workers cannot
    hold them."""
    d = blocks.n_features
    if update != "gram":
        return update, int(working_size)
    if requested == "auto" and blocks.offsets[1] - blocks.offsets[0] < d:
        return "auto", int(working_size)
    fan_in = check_split_every(split_every) if split_every is not None else (
        default_split_every(d + 1, d))
    if fits_workers(client, d + 1, d, fan_in, read_bytes=blocks.read_bytes):
        return update, d + 1
    if requested == "auto":
        return "auto", int(working_size)
    raise ValueError(
        f"update='gram' holds {d:,} x {d:,} Gram matrices, {fan_in} of them in one merge "
        "task, more than the workers' memory limit allows; use update='auto' or 'block', "
        "a smaller split_every, or workers with more memory")


def _one_shrink(blocks, sketch_size, update):
    """Whether the matrix is one dense block absorbed by one shrink
    (:func:`~dasketch.kernels.shrink_schedule.rows_per_shrink`): its sketch is
    then made at the final size, as nothing after that shrink loses more."""
    if len(blocks.blocks) != 1 or blocks.sparse or update not in SHRINK_UPDATES:
        return False
    return rows_per_shrink(blocks.n_rows, blocks.n_features, int(sketch_size),
                           update=update) >= blocks.n_rows


def sketch_blocks(X, sketch_size, *, method="rfd", alpha0=0.0, center=False,
                  split_every=None, client=None, block_rows=None, update="auto",
                  working_size=None, failure_probability=DEFAULT_FAILURE_PROBABILITY,
                  random_state=None, component=None, storage_options=None,
                  missing_chunks="fill", progress=False, columns=None):
    """The :class:`~dasketch.kernels.frequent_directions.Sketch` of the rows of
    ``X``, each block sketched on a worker at ``working_size`` and the block
    sketches merged by a tree of fan-in ``split_every`` (Ghashami et al. 2016:
    Frequent Directions sketches are mergeable), the root shrunk to
    ``sketch_size`` on a worker.

    The parameters are those of :func:`dasketch.sketch`, which checks their types
    and ranges; here the sketch parameters, ``failure_probability`` and
    ``split_every`` are checked against the kernels' rules, the defaults resolved
    (:func:`choose_update`, :func:`sketch_dense_block_rows`,
    :func:`randomized_block_rows`, :func:`default_working_size`,
    :func:`default_split_every`) and one task's memory checked against the
    workers' limit (:func:`~dasketch._blocks.task_memory.check_task_memory`).
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    failure_probability = check_failure_probability(failure_probability)
    fan_in = check_split_every(split_every)

    def default_rows(values_per_row, n_features, sparse):
        if not sparse:
            return sketch_dense_block_rows(sketch_size, n_features)
        if choose_update(update, True, n_features, sketch_size) == "randomized":
            return randomized_block_rows(values_per_row, n_features)
        return default_block_rows(values_per_row)

    # A matrix in memory sketched by this process's schedulers is named by a fresh
    # token rather than by hashing it: no key of its blocks reaches another computation.
    blocks = run_eagerly(as_row_blocks(X, block_rows=block_rows, component=component,
                                       storage_options=storage_options,
                                       missing_chunks=missing_chunks, columns=columns,
                                       default_rows=default_rows, array_libraries="any",
                                       content_keys=not passes_run_eagerly(
                                           client, threaded=True)),
                         client)
    requested, update = update, choose_update(update, blocks.sparse, blocks.n_features,
                                              sketch_size)
    if working_size is None and _one_shrink(blocks, sketch_size, update):
        working_size = sketch_size  # no merge nor later shrink to oversample for
    elif working_size is None:
        working_size = default_working_size(sketch_size, blocks.n_features, update=update,
                                            split_every=split_every, sparse=blocks.sparse)
    elif working_size < sketch_size:
        raise ValueError(f"working_size must be an integer >= sketch_size ({sketch_size}), "
                         f"got {working_size!r}")
    workers = client if client is not None else default_client()
    update, held = _gram_fits(workers, update, requested, blocks, working_size, split_every)
    if split_every is None:
        fan_in = default_split_every(held, blocks.n_features)
    update = check_task_memory(workers, sketch_size, held, blocks.n_features, fan_in,
                               update=update, failure_probability=failure_probability,
                               requested=requested, read_bytes=blocks.read_bytes)
    params = dict(sketch_size=int(working_size), method=method, alpha0=float(alpha0),
                  center=bool(center))
    if update == "gram":
        func, combine = partial(summarise_block, **params), merge_all_summaries
    else:
        func = partial(sketch_block, update=update, **params,
                       failure_probability=failure_probability / len(blocks.blocks),
                       seed=resolve_seed(random_state) if update == "randomized" else 0)
        combine = merge_all_sketches
    # A block's sketch or Gram summary holds new arrays only, never views of its block.
    root = map_reduce(blocks, func, combine, split_every=fan_in, keeps_block=False)
    if blocks.eager:
        # With one BLAS thread, as the task below runs it: LAPACK's eigensolvers
        # round differently on more threads, and the sketch is the same either way.
        with one_blas_thread_while_computing():
            return resized_sketch(root, int(sketch_size))
    # The last shrink runs on a worker too: the client only receives l - 1 rows.
    (result,) = compute(task(resized_sketch)(root, int(sketch_size)), client=client,
                        progress=progress or None)
    return result
