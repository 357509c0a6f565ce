"""The public entry point :func:`sketch`: a whole (possibly larger than memory)
matrix sketched block by block on Dask. :func:`estimate_error`
(:mod:`dasketch.error_estimate`) and :func:`sparse_embed`
(:mod:`dasketch.sparse_embedding`) are re-exported here."""

from __future__ import annotations

import numbers

import numpy as np

from dasketch._blocks import SKETCH_UPDATES, sketch_blocks, sketch_dense_block_rows
from dasketch.error_estimate import estimate_error  # noqa: F401 - re-exported
from dasketch.kernels.certificates import DEFAULT_FAILURE_PROBABILITY
from dasketch.kernels.sketch_checks import SKETCH_METHODS
from dasketch.sparse_embedding import sparse_embed  # noqa: F401 - re-exported
from dasketch.utils._sklearn_compat import StrOptions, validate_parameter_constraints
from dasketch.utils.lazy import moved_names
from dasketch.utils.params import PASS_CONSTRAINTS, RANDOM_STATE, Interval

# The defaults of the blocked sketch (choose_update, default_working_size, ...) live
# in the bridge and are served here too; dense_block_rows is the name
# sketch_dense_block_rows is served under.
__getattr__ = moved_names(__name__, "dasketch._blocks.blocked_sketch")[0]
dense_block_rows = sketch_dense_block_rows

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
    update : {"auto", "gram", "block", "buffered", "randomized"}, default "auto"
        How a block is absorbed. Exact (certified) updates: ``"gram"``, the
        block's exact Gram matrix, the Gram matrices summed over the tree and
        shrunk once at the root (:mod:`dasketch.kernels.gram_sketch`; dense rows
        only, ``split_every + 2`` matrices of ``d x d`` in a merge task), the
        sketch of one shrink of all the rows; ``"block"``, one shrink of the whole
        block; ``"buffered"``, the streaming Algorithm 5 with a buffer of ``2 l``
        rows. ``"randomized"``: one randomized compression of the block and one
        shrink (:mod:`dasketch.kernels.sparse_fd`), O(nnz l) per block instead of
        O(b d l); its bound holds with probability ``1 - failure_probability``.
        ``"auto"`` is ``"gram"`` for dense rows with ``sketch_size < d <= 2048``
        in blocks of at least ``d`` rows while the workers' memory limit holds its
        merges (one eigendecomposition instead of one per block and merge,
        measured by benchmarks/bench_gram.py),
        ``"randomized"`` for sparse input at least ``32 l`` columns wide, where it
        wins on error per second (measured by benchmarks/bench_sparse_wide.py),
        else the exact shrinks picked by a cost model (:func:`choose_update`).
    working_size : int, optional
        Sketch size ``>= sketch_size`` of the block sketches and inner merges; the
        root is shrunk to ``sketch_size`` (:meth:`Sketch.resize`). Oversampled
        inner sketches lose less to the many shrinks of a tree, while every
        guarantee holds for the final size. Default: ``sketch_size`` for a dense
        matrix of one block absorbed by one shrink (nothing after it to oversample
        for), else :func:`default_working_size`:
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
    return sketch_blocks(X, sketch_size, method=method, alpha0=alpha0, center=center,
                         split_every=split_every, client=client, block_rows=block_rows,
                         update=update, working_size=working_size,
                         failure_probability=failure_probability, random_state=random_state,
                         component=component, storage_options=storage_options,
                         missing_chunks=missing_chunks, progress=progress, columns=columns)
