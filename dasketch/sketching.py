"""The public entry point :func:`sketch`: a whole (possibly larger than memory)
matrix sketched block by block on Dask. :func:`estimate_error`
(:mod:`dasketch.error_estimate`) and :func:`sparse_embed`
(:mod:`dasketch.sparse_embedding`) are re-exported here."""

from __future__ import annotations

import numbers
from functools import partial

import numpy as np

from dasketch._blocks import (
    as_row_blocks,
    check_split_every,
    compute,
    default_block_rows,
    default_client,
    map_reduce,
    merge_all_sketches,
    resized_sketch,
    run_eagerly,
    sketch_block,
    task,
)
from dasketch.error_estimate import estimate_error  # noqa: F401 - re-exported
from dasketch.kernels.certificates import (
    DEFAULT_FAILURE_PROBABILITY,
    check_failure_probability,
)
from dasketch.kernels.embeddings import resolve_seed
from dasketch.kernels.frequent_directions import check_sketch_parameters
from dasketch.kernels.shrink import SHRINK_UPDATES
from dasketch.kernels.sketch_checks import SKETCH_METHODS
from dasketch.sketch_memory import check_task_memory
from dasketch.sparse_embedding import sparse_embed  # noqa: F401 - re-exported
from dasketch.utils._sklearn_compat import StrOptions, validate_parameter_constraints
from dasketch.utils.params import PASS_CONSTRAINTS, RANDOM_STATE, Interval

SKETCH_UPDATES = SHRINK_UPDATES + ("randomized",)
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
    O(n d l) on error per second (benchmarks/bench_sparse_wide.py), else the exact
    cost model of :func:`~dasketch.kernels.shrink_schedule.rows_per_shrink`."""
    if update == "auto" and sparse and n_features >= RANDOMIZED_WIDTH_RATIO * sketch_size:
        return "randomized"
    return update


def dense_block_rows(sketch_size, n_features):
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
      (:func:`dense_block_rows`) holds at least ``16 l`` rows, else ``1.5 l``, as
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
    block_rows = dense_block_rows(sketch_size, n_features)
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


_SKETCH_CONSTRAINTS = {
    **PASS_CONSTRAINTS,
    "sketch_size": [Interval(numbers.Integral, 2, None, closed="left")],
    "method": [StrOptions(set(SKETCH_METHODS))],
    "alpha0": [Interval(numbers.Real, 0, np.inf, closed="left")],
    "center": ["boolean"],
    "update": [StrOptions(set(SKETCH_UPDATES))],
    "working_size": [Interval(numbers.Integral, 2, None, closed="left"), None],
    "failure_probability": [Interval(numbers.Real, 0, 1, closed="neither")],
    "random_state": RANDOM_STATE,
    "missing_chunks": [StrOptions({"fill", "raise"})],
    "progress": ["boolean"],
    "columns": [list, tuple, None],
}


def sketch(X, sketch_size, *, method="rfd", alpha0=0.0, center=False, split_every=None,
           client=None, block_rows=None, update="auto", working_size=None,
           failure_probability=DEFAULT_FAILURE_PROBABILITY, random_state=None,
           component=None, storage_options=None, missing_chunks="fill", progress=False,
           columns=None):
    """Sketch the rows of a (possibly larger than memory) matrix with FD or RFD.

    Every block of rows is sketched on a worker and the block sketches are merged
    by a tree reduction of mergeable Frequent Directions sketches; only sketches
    (at most ``l x d``) travel, so memory stays flat in the number of rows.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, pyarrow.Table, str or \
os.PathLike
        Rows are samples; a string or path is a zarr store, a Parquet dataset
        (:func:`dasketch.read_parquet`) or an fsspec URL of either.
    sketch_size : int
        ``l >= 2``; the sketch keeps at most ``l - 1`` rows.
    method : {"rfd", "fd"}, default "rfd"
        Robust Frequent Directions (Luo et al., JMLR 2019, Algorithm 2 and 5) or
        Frequent Directions (Liberty 2013; Ghashami et al. 2016).
    alpha0 : float, default 0.0
        Regularisation ``alpha0 >= 0`` added to the estimate of ``A^T A``.
    center : bool, default False
        Sketch the column-centred data (covariance), with the parallel-variance
        correction at every merge.
    split_every : int, optional
        Fan-in of the merge tree; default :func:`default_split_every` (the Dask
        configuration value ``split_every`` if set, else 8; fewer for very wide
        rows).
    client : distributed.Client, optional
        Run on this client; default: the active scheduler (a ``distributed``
        client if one is set as default, else Dask's threads).
    block_rows : int, optional
        Rows per block. Default: about 32 MiB of values per block (fewer, taller
        blocks of wide rows, see :func:`dense_block_rows`), or the chunking of a
        Dask array whose chunks are whole rows of that size.
    update : {"auto", "block", "buffered", "randomized"}, default "auto"
        How a block is absorbed. Exact (certified) updates: ``"block"``, one
        shrink of the whole block; ``"buffered"``, the streaming Algorithm 5 with
        a buffer of ``2 l`` rows. ``"randomized"``: one randomized compression of
        the block and one shrink (:mod:`dasketch.kernels.sparse_fd`), O(nnz l)
        per block instead of O(b d l); its bound holds with probability ``1 -
        failure_probability``. ``"auto"`` is ``"randomized"`` for sparse input at
        least ``32 l`` columns wide, where it wins on error per second (measured by
        benchmarks/bench_sparse_wide.py), else the exact update picked by a cost
        model (:func:`choose_update`).
    working_size : int, optional
        Sketch size ``>= sketch_size`` of the block sketches and inner merges; the
        root is shrunk to ``sketch_size`` (:meth:`Sketch.resize`). Oversampled
        inner sketches lose less to the many shrinks of a tree, while every
        guarantee holds for the final size. Default :func:`default_working_size`:
        ``4 l`` for exact updates of narrow rows, ``l`` or ``1.5 l`` for wide dense
        rows and ``l`` for the randomized update, chosen by error per second
        (measured by benchmarks/bench_sparse_wide.py).
    failure_probability : float, default 1e-6
        For the randomized update: the probability, over its random draws, that
        the sketch's ``error_bound`` is exceeded (split evenly among the blocks).
    random_state : None, int or numpy.random.Generator, optional
        Seeds the randomized update; with an int the result does not depend on
        chunking, scheduler or worker count.
    component : str, optional
        For a zarr group: the path of the array inside it.
    storage_options : dict, optional
        Passed to fsspec for a store given as a URL (credentials, endpoints).
    missing_chunks : {"fill", "raise"}, default "fill"
        Chunks absent from a zarr store read as its fill value, as in zarr
        (default), or are an error naming them (``"raise"``). A store that changes
        while the job runs is an error either way.
    progress : bool, default False
        Show a progress bar. False leaves it to the Dask config ``dasketch.progress``.
    columns : list of str, optional
        For a Parquet dataset or an Arrow table: the columns sketched, in this
        order (default all numeric ones; any other column is an error naming it).

    Returns
    -------
    Sketch
        With ``B``, ``alpha``, ``shrinkage``, ``error_bound``, ``guarantee``
        (``"certified"`` or ``"probability >= 1 - p"``), ``covariance()``,
        ``solve()`` and ``merge()``; save it with :func:`dasketch.save_sketch`.
        :func:`estimate_error` checks its actual error in one more pass.

    Raises
    ------
    ValueError
        Among others, when one task would not fit the workers' memory limit (a
        merge holds ``split_every + 1`` sketches of up to ``working_size x d``
        float64 values; see :mod:`dasketch.sketch_memory`), naming the sketch size
        that fits (``update="auto"`` then falls back from the randomized to the
        exact update when only that fits), or when a block task would read an
        input chunk larger than that limit.

    See Also
    --------
    estimate_error : Bracket the actual error of the sketch in one more pass.
    merge_sketches : Merge sketches of row blocks, e.g. of data that arrives later.
    Sketch : The result: its bound, covariance estimate and solver.
    save_sketch : Store a sketch for later merges.
    SketchPCA : Principal components from the same sketch.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((1000, 20)) * 0.8 ** np.arange(20)
    >>> s = dasketch.sketch(X, 8)
    >>> s.B.shape, s.guarantee
    ((7, 20), 'certified')
    >>> err = np.linalg.norm(X.T @ X - s.covariance(), 2)
    >>> bool(err <= s.error_bound * (1 + 1e-12))
    True
    """
    validate_parameter_constraints(_SKETCH_CONSTRAINTS, locals(), caller_name="sketch")
    check_sketch_parameters(sketch_size, method, alpha0)
    failure_probability = check_failure_probability(failure_probability)
    fan_in = check_split_every(split_every)

    def default_rows(values_per_row, n_features, sparse):
        if not sparse:
            return dense_block_rows(sketch_size, n_features)
        if choose_update(update, True, n_features, sketch_size) == "randomized":
            return randomized_block_rows(values_per_row, n_features)
        return default_block_rows(values_per_row)

    blocks = run_eagerly(as_row_blocks(X, block_rows=block_rows, component=component,
                                       storage_options=storage_options,
                                       missing_chunks=missing_chunks, columns=columns,
                                       default_rows=default_rows), client)
    requested, update = update, choose_update(update, blocks.sparse, blocks.n_features,
                                              sketch_size)
    if working_size is None:
        working_size = default_working_size(sketch_size, blocks.n_features, update=update,
                                            split_every=split_every, sparse=blocks.sparse)
    elif working_size < sketch_size:
        raise ValueError(f"working_size must be an integer >= sketch_size ({sketch_size}), "
                         f"got {working_size!r}")
    if split_every is None:
        fan_in = default_split_every(working_size, blocks.n_features)
    update = check_task_memory(client if client is not None else default_client(),
                               sketch_size, int(working_size), blocks.n_features, fan_in,
                               update=update, failure_probability=failure_probability,
                               requested=requested, read_bytes=blocks.read_bytes)
    func = partial(sketch_block, sketch_size=int(working_size), method=method,
                   alpha0=float(alpha0), center=bool(center), update=update,
                   failure_probability=failure_probability / len(blocks.blocks),
                   seed=resolve_seed(random_state) if update == "randomized" else 0)
    # A block sketch holds new arrays only, never views of its block.
    root = map_reduce(blocks, func, merge_all_sketches, split_every=fan_in,
                      keeps_block=False)
    if blocks.eager:
        return resized_sketch(root, int(sketch_size))
    # The last shrink runs on a worker too: the client only receives l - 1 rows.
    (result,) = compute(task(resized_sketch)(root, int(sketch_size)), client=client,
                        progress=progress or None)
    return result
