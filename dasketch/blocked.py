"""The one bridge between the kernels and Dask.

Inputs are normalised to :class:`RowBlocks`: consecutive blocks of whole rows
with a fixed number of rows per block that depends on the shape only, never on how
the input happens to be chunked. Kernels are mapped over the blocks and their
results merged by a deterministic tree reduction with fan-in ``split_every``, so
results are the same for any chunking, scheduler or number of workers, and only
small per-block results travel between workers.
"""

from __future__ import annotations

import numbers
import os
import warnings
from dataclasses import dataclass
from functools import partial

import dask
import dask.array as da
import numpy as np
import scipy.sparse
from threadpoolctl import ThreadpoolController

from dasketch.io import is_sparse_store, open_zarr_array, read_csr_rows, sparse_store_info
from dasketch.sketch.frequent_directions import (
    BLOCK_UPDATES, check_sketch_parameters, merge_sketches, sketch_rows)

DEFAULT_SPLIT_EVERY = 8
# A dense block holds about this many values (32 MiB in float64).
_BLOCK_VALUES = 2 ** 22


def default_block_rows(n_features):
    """Rows per block for ``n_features`` columns: a power of two in [256, 65536]
    with about 32 MiB of float64 values per dense block."""
    rows = _BLOCK_VALUES // max(int(n_features), 1)
    rows = 1 << max(int(rows).bit_length() - 1, 0)
    return int(min(max(rows, 256), 65536))


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
    """

    blocks: tuple
    offsets: tuple
    n_features: int
    dtype: np.dtype
    sparse: bool

    @property
    def n_rows(self):
        return self.offsets[-1]

    @property
    def shape(self):
        return (self.n_rows, self.n_features)

    def ranges(self):
        """``(start, stop)`` of every block."""
        return list(zip(self.offsets[:-1], self.offsets[1:]))


def _check_shape(shape, name):
    if len(shape) != 2:
        raise ValueError(f"{name} must be a 2-D array (rows are samples), got "
                         f"{len(shape)}-D input with shape {tuple(shape)}")
    if shape[0] == 0:
        raise ValueError(f"{name} has zero rows; at least one row is required")
    if shape[1] == 0:
        raise ValueError(f"{name} has zero columns; at least one column is required")


def _check_dtype(dtype, name):
    dtype = np.dtype(dtype)
    if dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {dtype}")
    return dtype


def _check_block_rows(block_rows):
    if isinstance(block_rows, (bool, np.bool_)) or not isinstance(
        block_rows, numbers.Integral
    ) or block_rows < 1:
        raise ValueError(f"block_rows must be a positive integer, got {block_rows!r}")
    return int(block_rows)


def _block_rows(block_rows, shape):
    rows = default_block_rows(shape[1]) if block_rows is None else _check_block_rows(block_rows)
    return min(rows, shape[0])


def as_row_blocks(X, *, block_rows=None, name="X", component=None, storage_options=None):
    """Normalise an input matrix to :class:`RowBlocks`.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        Rows are samples. A string or path is a zarr store (local or fsspec URL).
    block_rows : int, optional
        Rows per block; default :func:`default_block_rows`. Blocks, not the
        input's chunks, decide the result, so any chunking gives the same result.
    name : str
        Name of the argument, used in error messages.
    component, storage_options
        For zarr inputs, see :func:`dasketch.io.open_zarr_array`.

    Raises
    ------
    TypeError, ValueError, FileNotFoundError
        Naming the argument: unsupported type, non-real dtype, not 2-D, zero rows
        or columns, missing store.
    """
    if isinstance(X, RowBlocks):
        return X
    if isinstance(X, (str, os.PathLike)):
        if is_sparse_store(X, component=component, storage_options=storage_options):
            return _sparse_store_blocks(X, block_rows, component, storage_options)
        X = open_zarr_array(X, component=component, storage_options=storage_options)
    elif component is not None or storage_options is not None:
        raise ValueError(f"component and storage_options apply only when {name} is a "
                         "zarr path or URL")
    if scipy.sparse.issparse(X):
        return _sparse_row_blocks(X, block_rows, name)
    if isinstance(X, np.ndarray) or np.isscalar(X) or isinstance(X, (list, tuple)):
        X = np.asarray(X)
        _check_shape(X.shape, name)
        X = da.from_array(X, chunks=(_block_rows(block_rows, X.shape), -1))
    if not isinstance(X, da.Array):
        raise TypeError(f"{name} must be a Dask array, numpy array, scipy.sparse matrix or "
                        f"a zarr path/URL, got {type(X).__name__}")
    _check_shape(X.shape, name)
    dtype = _check_dtype(X.dtype, name)
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes()")
    if len(X.chunks[1]) > 1:
        warnings.warn(f"{name} is chunked along columns ({len(X.chunks[1])} column "
                      "chunks); rechunking to whole rows", stacklevel=3)
    rows = _block_rows(block_rows, X.shape)
    row_chunks = X.chunks[0]
    canonical = all(c == rows for c in row_chunks[:-1]) and row_chunks[-1] <= rows
    if not canonical or len(X.chunks[1]) > 1:
        X = X.rechunk({0: rows, 1: -1})
    # Graph optimisation hides the futures of a persisted array, which compute()
    # needs to find the client that holds them.
    persisted = _client_holding([X]) is not None
    blocks = tuple(X.to_delayed(optimize_graph=not persisted).ravel())
    offsets = tuple(int(v) for v in np.concatenate([[0], np.cumsum(X.chunks[0])]))
    return RowBlocks(blocks, offsets, int(X.shape[1]), dtype, False)


def _sparse_row_blocks(X, block_rows, name):
    _check_shape(X.shape, name)
    dtype = _check_dtype(X.dtype, name)
    X = scipy.sparse.csr_matrix(X)
    n_rows, n_features = X.shape
    if block_rows is None:
        nnz_per_row = max(X.nnz / n_rows, 1.0)
        block_rows = default_block_rows(nnz_per_row)
    rows = min(_check_block_rows(block_rows), n_rows)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    blocks = tuple(dask.delayed(X[start:stop], pure=True)
                   for start, stop in zip(offsets[:-1], offsets[1:]))
    return RowBlocks(blocks, offsets, n_features, dtype, True)


def _sparse_store_blocks(path, block_rows, component, storage_options):
    n_rows, n_features, nnz, dtype = sparse_store_info(
        path, component=component, storage_options=storage_options)
    if block_rows is None:
        block_rows = default_block_rows(max(nnz / max(n_rows, 1), 1.0))
    rows = min(_check_block_rows(block_rows), n_rows)
    offsets = tuple(range(0, n_rows, rows)) + (n_rows,)
    read = dask.delayed(read_csr_rows, pure=True)
    blocks = tuple(read(os.fspath(path), start, stop, component=component,
                        storage_options=storage_options)
                   for start, stop in zip(offsets[:-1], offsets[1:]))
    return RowBlocks(blocks, offsets, n_features, np.dtype(dtype), True)


# ------------------------------------------------------------------ primitives
class _OneBlasThread:
    """Run a kernel with one BLAS thread.

    Blocks already run in parallel (scheduler threads or worker processes);
    nested multi-threaded BLAS on top of that oversubscribes the cores, and on
    small products it was measured to be 5-10x slower than one thread.
    """

    def __init__(self, func):
        self.func = func

    _controller = None  # per process; scanning the loaded libraries costs ~2 ms

    def __call__(self, *args, **kwargs):
        if _OneBlasThread._controller is None:
            _OneBlasThread._controller = ThreadpoolController()
        with _OneBlasThread._controller.limit(limits=1, user_api="blas"):
            return self.func(*args, **kwargs)

    def __dask_tokenize__(self):
        return (type(self).__name__, dask.base.tokenize(self.func))


def _task(func):
    """``dask.delayed(func, pure=True)``, run with one BLAS thread."""
    return dask.delayed(_OneBlasThread(func), pure=True)



def _check_split_every(split_every):
    if split_every is None:
        return DEFAULT_SPLIT_EVERY
    if isinstance(split_every, (bool, np.bool_)) or not isinstance(
        split_every, numbers.Integral
    ) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2, got {split_every!r}")
    return int(split_every)


def tree_reduce(parts, combine, split_every=None):
    """Combine Delayed ``parts`` in a deterministic tree with fan-in ``split_every``.

    Level by level, consecutive groups of ``split_every`` parts are combined with
    ``combine(*group)``; the tree depends only on the number of parts.
    """
    split_every = _check_split_every(split_every)
    parts = list(parts)
    if not parts:
        raise ValueError("tree_reduce needs at least one part")
    combine = _task(combine)
    while len(parts) > 1:
        parts = [combine(*parts[i:i + split_every]) if len(parts[i:i + split_every]) > 1
                 else parts[i] for i in range(0, len(parts), split_every)]
    return parts[0]


def map_reduce(blocks, func, combine, *, split_every=None):
    """Apply ``func(block, start, stop)`` to every block and tree-combine the results.

    Returns a Delayed; compute it with :func:`compute`.
    """
    mapped = _task(func)
    parts = [mapped(block, start, stop)
             for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return tree_reduce(parts, combine, split_every)


def map_rows(blocks, func, n_columns, dtype=np.float64):
    """Lazy ``n x n_columns`` Dask array whose rows ``[start, stop)`` are
    ``func(block, start, stop)``."""
    mapped = _task(func)
    pieces = [da.from_delayed(mapped(block, start, stop), shape=(stop - start, n_columns),
                              dtype=dtype)
              for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def _add(*terms):
    total = terms[0].copy()
    for term in terms[1:]:
        total += term
    return total


def tree_sum(blocks, func, *, split_every=None):
    """Delayed sum over blocks of ``func(block, start, stop)`` (arrays of one shape)."""
    return map_reduce(blocks, func, _add, split_every=split_every)


def _default_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _client_holding(objs):
    """The client of any futures inside ``objs`` (persisted collections), or None."""
    try:
        from distributed import futures_of
    except ImportError:
        return None
    futures = [f for obj in objs if dask.is_dask_collection(obj) for f in futures_of(obj)]
    return futures[0].client if futures else None


def compute(*objs, client=None, progress=False):
    """Compute Dask objects with ``client`` (a ``distributed.Client``) if given,
    else with the active default scheduler.

    With ``progress=True`` a progress bar is shown: ``distributed.progress``
    (a text bar in a terminal, a widget in a notebook) on a cluster, Dask's
    ``ProgressBar`` with the local schedulers. Inputs persisted on a
    ``distributed`` cluster are computed by the client that holds them.
    """
    if client is None:
        client = _client_holding(objs)
    if not progress:
        if client is not None:
            return dask.compute(*objs, scheduler=client)
        return dask.compute(*objs)
    client = client if client is not None else _default_client()
    if client is None:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return dask.compute(*objs)
    from distributed import progress as show_progress

    try:
        import ipywidgets  # noqa: F401

        notebook = None  # a widget in a notebook, a text bar in a terminal
    except ImportError:
        notebook = False
    futures = client.compute(list(objs))
    with client.as_current():
        show_progress(futures, notebook=notebook)
    return tuple(client.gather(futures))


# ---------------------------------------------------------------------- sketch
def _sketch_block(block, start, stop, **params):
    return sketch_rows(block, row_offset=start, **params)


def default_working_size(sketch_size, n_features):
    """Working sketch size of block sketches and inner merges: ``2 l`` while such a
    sketch stays under 32 MiB, else ``l``."""
    if 2 * sketch_size * n_features <= _BLOCK_VALUES:
        return 2 * sketch_size
    return sketch_size


def sketch(X, sketch_size, *, method="rfd", alpha0=0.0, center=False, split_every=None,
           client=None, block_rows=None, block_update="auto", working_size=None,
           component=None, storage_options=None, progress=False):
    """Sketch the rows of a (possibly larger than memory) matrix with FD or RFD.

    Every block of rows is sketched on a worker and the block sketches are merged
    by a tree reduction of mergeable Frequent Directions sketches; only sketches
    (at most ``l x d``) travel, so memory stays flat in the number of rows.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        Rows are samples; a string or path is a zarr store or fsspec URL.
    sketch_size : int
        ``l >= 2``; the sketch keeps at most ``l - 1`` rows.
    method : {"rfd", "fd"}
        Robust Frequent Directions (Luo et al., JMLR 2019, Algorithm 2 and 5) or
        Frequent Directions (Liberty 2013; Ghashami et al. 2016).
    alpha0 : float
        Regularisation ``alpha0 >= 0`` added to the estimate of ``A^T A``.
    center : bool
        Sketch the column-centred data (covariance), with the parallel-variance
        correction at every merge.
    split_every : int, optional
        Fan-in of the merge tree (default 8).
    client : distributed.Client, optional
        Run on this client; default: the active scheduler (a ``distributed``
        client if one is set as default, else Dask's threads).
    block_rows : int, optional
        Rows per block (see :func:`as_row_blocks`).
    block_update : {"auto", "block", "stream"}
        How a block is absorbed: one shrink of the whole block, the streaming
        Algorithm 5 with a buffer of ``2 l`` rows, or chosen by a cost model.
    working_size : int, optional
        Sketch size ``>= sketch_size`` of the block sketches and inner merges; the
        root is shrunk to ``sketch_size`` (:meth:`Sketch.resize`). Oversampled
        inner sketches lose less to the many shrinks of a tree, while every
        guarantee holds for the final size. Default :func:`default_working_size`.
    component, storage_options
        For zarr inputs.
    progress : bool
        Show a progress bar (see :func:`compute`).

    Returns
    -------
    Sketch
        With ``B``, ``alpha``, ``shrinkage``, ``error_bound``, ``covariance()``,
        ``solve()``, ``merge()`` and ``save()``.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((1000, 20)) * 0.8 ** np.arange(20)
    >>> s = dasketch.sketch(X, 8)
    >>> s.B.shape
    (7, 20)
    >>> err = np.linalg.norm(X.T @ X - s.covariance(), 2)
    >>> bool(err <= s.error_bound * (1 + 1e-12))
    True
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    if block_update not in BLOCK_UPDATES:
        raise ValueError(f"block_update must be one of {BLOCK_UPDATES}, got {block_update!r}")
    split_every = _check_split_every(split_every)
    blocks = as_row_blocks(X, block_rows=block_rows, component=component,
                           storage_options=storage_options)
    if working_size is None:
        working_size = default_working_size(sketch_size, blocks.n_features)
    elif not isinstance(working_size, numbers.Integral) or working_size < sketch_size:
        raise ValueError(f"working_size must be an integer >= sketch_size ({sketch_size}), "
                         f"got {working_size!r}")
    func = partial(_sketch_block, sketch_size=int(working_size), method=method,
                   alpha0=float(alpha0), center=bool(center), block_update=block_update)
    root = map_reduce(blocks, func, _merge_all, split_every=split_every)
    (result,) = compute(root, client=client, progress=progress)
    return result.resize(sketch_size)


def _merge_all(*sketches):
    return merge_sketches(sketches)


# ------------------------------------------- random projection and matrix products
def _project_block(block, start, stop, *, seed, stream, n_components):
    """``block @ R / sqrt(m)`` with ``R`` (d x m) regenerated tile by tile over the
    feature index, so that at most one tile of ``R`` is in memory at a time."""
    from dasketch.sketch.embeddings import TILE, gaussian_rows

    if scipy.sparse.issparse(block):
        block = scipy.sparse.csc_matrix(block)
    n_features = block.shape[1]
    out = np.zeros((block.shape[0], n_components))
    for lo in range(0, n_features, TILE):
        hi = min(lo + TILE, n_features)
        out += block[:, lo:hi] @ gaussian_rows(seed, stream, lo, hi, n_components)
    out /= np.sqrt(n_components)
    return out


def random_projection(blocks, n_components, seed, *, stream=0):
    """Lazy ``X R / sqrt(m)`` (n x m, float64) for a Gaussian ``R`` (d x m).

    ``R`` is a function of ``(seed, stream, feature index)`` (see
    :func:`dasketch.sketch.embeddings.gaussian_rows`): every block task regenerates
    it tile by tile, it is never materialised whole on the client nor shipped to
    workers, and the result does not depend on how ``X`` is chunked.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.blocked import as_row_blocks, random_projection
    >>> from dasketch.sketch.embeddings import gaussian_rows
    >>> X = np.random.default_rng(0).standard_normal((100, 30))
    >>> P = random_projection(as_row_blocks(X, block_rows=16), 5, seed=3)
    >>> R = gaussian_rows(3, 0, 0, 30, 5)
    >>> bool(np.allclose(P.compute(), X @ R / np.sqrt(5)))
    True
    """
    func = partial(_project_block, seed=int(seed), stream=int(stream),
                   n_components=int(n_components))
    return map_rows(blocks, func, int(n_components), dtype=np.float64)


def as_target_vector(y, n_rows, *, name="y", matrix="X", real=False):
    """Targets or labels as a 1-D numpy vector of ``n_rows`` entries.

    Dask input is computed (targets are n values, small next to the matrix); an
    ``(n, 1)`` column is flattened. With ``real=True`` the values must be finite
    real numbers and come back as float64.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.blocked import as_target_vector
    >>> as_target_vector(np.ones((3, 1)), 3, real=True)
    array([1., 1., 1.])
    """
    if dask.is_dask_collection(y):
        (y,) = compute(y)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    if y.shape[0] != n_rows:
        raise ValueError(f"{name} has {y.shape[0]} entries but {matrix} has {n_rows} rows; "
                         "they must match")
    if real:
        if y.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {y.dtype}")
        y = y.astype(np.float64)
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN or Inf; only finite values are accepted")
    return y


def as_row_aligned(v, blocks, name="v"):
    """``v`` (numpy or Dask, 1-D or 2-D with ``n`` rows) as a Dask array whose row
    chunks are the blocks of ``blocks`` (one chunk along any other axis).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.blocked import as_row_blocks, as_row_aligned
    >>> blocks = as_row_blocks(np.ones((10, 3)), block_rows=4)
    >>> as_row_aligned(np.arange(10.0), blocks).chunks
    ((4, 4, 2),)
    """
    if not isinstance(v, da.Array):
        v = np.asarray(v)
    if v.ndim not in (1, 2) or v.shape[0] != blocks.n_rows:
        raise ValueError(f"{name} must have {blocks.n_rows} rows, got shape {tuple(v.shape)}")
    chunks = (tuple(np.diff(blocks.offsets)),) + tuple((s,) for s in v.shape[1:])
    if isinstance(v, da.Array):
        return v.rechunk(chunks)
    return da.from_array(v, chunks=chunks)


def _row_pieces(arrays):
    """Delayed row chunks of Dask arrays with equal row chunks, zipped."""
    rows = arrays[0].chunks[0]
    for a in arrays:
        if a.chunks[0] != rows or any(len(c) > 1 for c in a.chunks[1:]):
            raise ValueError("arrays must share their row chunks and have one chunk "
                             "along every other axis")
    return list(zip(*(a.to_delayed(optimize_graph=True).ravel() for a in arrays)))


def tree_sum_rows(arrays, func, *, split_every=None):
    """Delayed sum over row chunks of ``func(*chunks)`` for Dask arrays with equal
    row chunks (e.g. a projection ``X R``, labels and margins), tree-reduced.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch.blocked import tree_sum_rows
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> b = da.from_array(np.ones(3), chunks=2)
    >>> tree_sum_rows((a, b), lambda x, y: x.T @ y).compute()
    array([6., 9.])
    """
    mapped = _task(func)
    return tree_reduce([mapped(*pieces) for pieces in _row_pieces(arrays)], _add, split_every)


def _matvec_block(block, start, stop, w):
    return np.asarray(block @ w, dtype=np.float64).reshape(stop - start, -1)


def matvec(blocks, w):
    """Lazy ``X w`` as an ``(n, k)`` Dask array chunked like ``blocks`` (``w`` is
    ``(d,)`` or ``(d, k)``; a 1-D ``w`` gives ``k = 1``).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.blocked import as_row_blocks, matvec
    >>> X = np.arange(12.0).reshape(4, 3)
    >>> matvec(as_row_blocks(X, block_rows=3), np.ones(3)).compute().ravel()
    array([ 3., 12., 21., 30.])
    """
    w = np.asarray(w, dtype=np.float64)
    k = 1 if w.ndim == 1 else w.shape[1]
    mapped = _task(_matvec_block)
    shared = dask.delayed(w, pure=True)  # one key, not one copy per task
    pieces = [da.from_delayed(mapped(block, start, stop, shared), shape=(stop - start, k),
                              dtype=np.float64)
              for block, (start, stop) in zip(blocks.blocks, blocks.ranges())]
    return da.concatenate(pieces, axis=0)


def _rmatvec_block(block, v):
    out = block.T @ np.asarray(v, dtype=np.float64)
    return np.asarray(out, dtype=np.float64)


def rmatvec(blocks, v, *, split_every=None):
    """Delayed ``X^T v`` (``v`` of shape ``(n,)`` or ``(n, k)``, numpy or Dask),
    summed over row blocks by a deterministic tree.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.blocked import as_row_blocks, rmatvec
    >>> X = np.arange(12.0).reshape(4, 3)
    >>> rmatvec(as_row_blocks(X, block_rows=3), np.ones(4)).compute()
    array([18., 22., 26.])
    """
    pieces = as_row_aligned(v, blocks).to_delayed(optimize_graph=True).ravel()
    mapped = _task(_rmatvec_block)
    parts = [mapped(block, piece) for block, piece in zip(blocks.blocks, pieces)]
    return tree_reduce(parts, _add, split_every)


def persist(*arrays, client=None):
    """Persist Dask arrays in (worker) memory with ``client`` or the default scheduler.

    Examples
    --------
    >>> import dask.array as da
    >>> from dasketch.blocked import persist
    >>> (a,) = persist(da.ones(4, chunks=2) * 2)
    >>> float(a.sum().compute())
    8.0
    """
    if client is not None:
        return tuple(client.persist(list(arrays)))
    return dask.persist(*arrays)


def rechunk_rows(array, rows):
    """Rechunk a Dask array to ``rows`` rows per chunk and one chunk along other axes.

    Examples
    --------
    >>> import dask.array as da
    >>> from dasketch.blocked import rechunk_rows
    >>> rechunk_rows(da.ones((5, 4), chunks=(1, 2)), 2).chunks
    ((2, 2, 1), (4,))
    """
    return array.rechunk({0: int(rows), **{ax: -1 for ax in range(1, array.ndim)}})


def map_row_chunks(arrays, func, n_columns=None, dtype=np.float64):
    """Lazy Dask array of ``func(*chunks)`` over the row chunks of Dask arrays with
    equal row chunks: 1-D when ``n_columns`` is None, else ``(n, n_columns)``.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch.blocked import map_row_chunks
    >>> a = da.from_array(np.arange(6.0).reshape(3, 2), chunks=(2, 2))
    >>> map_row_chunks((a,), lambda x: x.sum(axis=1)).compute()
    array([1., 5., 9.])
    """
    mapped = _task(func)
    pieces = []
    for chunks, rows in zip(_row_pieces(arrays), arrays[0].chunks[0]):
        shape = (rows,) if n_columns is None else (rows, int(n_columns))
        pieces.append(da.from_delayed(mapped(*chunks), shape=shape, dtype=dtype))
    return da.concatenate(pieces, axis=0)


# -------------------------------------------------------- sparse embeddings S X
def _embed_block(block, start, stop, *pieces, seed, specs):
    """``[S_1 X_blk; S_2 X_blk; ...]`` (float64, dense) for the embeddings ``specs``
    (tuples ``(stream, sketch_size, kind, nnz_per_column)``); extra row-aligned
    ``pieces`` (vectors or matrices) are appended to the block as columns."""
    from dasketch.sketch.embeddings import sparse_embedding_block

    columns = [np.asarray(p, dtype=np.float64).reshape(stop - start, -1) for p in pieces]
    out = []
    for stream, size, kind, k in specs:
        S = sparse_embedding_block(seed, stream, start, stop, size, kind=kind,
                                   nnz_per_column=k)
        SX = S @ block
        SX = SX.toarray() if scipy.sparse.issparse(SX) else np.asarray(SX)
        out.append(np.hstack([SX.astype(np.float64, copy=False)] + [S @ c for c in columns]))
    return np.vstack(out)


def sparse_embed_streams(blocks, specs, seed, *, extra=(), split_every=None):
    """Delayed ``[S_1 [X E]; S_2 [X E]; ...]`` in one pass over the blocks.

    ``specs`` lists independent sparse embeddings ``(stream, sketch_size, kind,
    nnz_per_column)`` (see
    :func:`dasketch.sketch.embeddings.sparse_embedding_block`); ``extra`` are
    row-aligned vectors or matrices ``E`` (numpy or Dask, e.g. the targets ``b``)
    appended as columns. Each block contributes ``S_blk [X_blk E_blk]`` from its
    global row indices; the contributions are tree-summed, so the result does not
    depend on the chunking of ``X`` nor on the scheduler.
    """
    specs = tuple((int(st), int(s), str(kd), int(k)) for st, s, kd, k in specs)
    func = partial(_embed_block, seed=int(seed), specs=specs)
    mapped = _task(func)
    if extra:
        aligned = [as_row_aligned(e, blocks, name="extra") for e in extra]
        columns = list(zip(*(a.to_delayed(optimize_graph=True).ravel() for a in aligned)))
    else:
        columns = [()] * len(blocks.blocks)
    parts = [mapped(block, start, stop, *cols)
             for block, (start, stop), cols in zip(blocks.blocks, blocks.ranges(), columns)]
    return tree_reduce(parts, _add, split_every)


def sparse_embed(X, sketch_size, *, kind="osnap", nnz_per_column=None, random_state=None,
                 stream=0, split_every=None, client=None, block_rows=None, component=None,
                 storage_options=None):
    """The small dense ``S X`` (``s x d``) for a sparse random embedding ``S``.

    ``S`` is CountSketch (Clarkson and Woodruff, STOC 2013), OSNAP with ``k``
    nonzeros per column (Nelson and Nguyen, FOCS 2013) or the sparse Cauchy
    transform (Meng and Mahoney, STOC 2013), the embeddings that precondition
    pwSGD (Yang, Chow, Re, Mahoney, JMLR 2018, Section 3). Column ``i`` of ``S``
    is drawn from ``(random_state, stream, i // TILE)``, so each block of rows
    builds only its own columns, the block products ``S_blk X_blk`` are
    tree-summed, and the result is the same for any chunking or scheduler.
    ``scipy.linalg.clarkson_woodruff_transform`` draws the same distribution for
    ``kind="countsketch"`` but needs the whole matrix in memory and its result
    depends on the row count only through one global draw, so it cannot be
    computed block by block.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        Rows are samples; a string or path is a zarr store.
    sketch_size : int
        Number of rows ``s`` of ``S X``.
    kind : {"osnap", "countsketch", "cauchy"}
    nnz_per_column : int, optional
        Nonzeros per column of ``S``: 1 for CountSketch and Cauchy; default
        ``min(4, sketch_size)`` for OSNAP.
    random_state : None, int or numpy random generator
    stream : int
        Index of an independent stream of embeddings for the same seed.
    split_every, client, block_rows, component, storage_options
        See :func:`sketch`.

    Returns
    -------
    numpy.ndarray
        ``S X`` in float64, shape ``(sketch_size, d)``.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((2000, 5))
    >>> SX = dasketch.sparse_embed(X, 40, random_state=0)
    >>> SX.shape
    (40, 5)
    >>> same = dasketch.sparse_embed(X, 40, random_state=0, block_rows=300)
    >>> bool(np.allclose(SX, same))
    True
    """
    from dasketch.sketch.embeddings import check_sparse_kind, resolve_seed

    if nnz_per_column is None:
        nnz_per_column = min(4, int(sketch_size)) if kind == "osnap" else 1
    if isinstance(sketch_size, (bool, np.bool_)) or not isinstance(
        sketch_size, numbers.Integral
    ) or sketch_size < 1:
        raise ValueError(f"sketch_size must be a positive integer, got {sketch_size!r}")
    check_sparse_kind(kind, nnz_per_column)
    if nnz_per_column > sketch_size:
        raise ValueError(f"nnz_per_column ({nnz_per_column}) must not exceed sketch_size "
                         f"({sketch_size})")
    blocks = as_row_blocks(X, block_rows=block_rows, component=component,
                           storage_options=storage_options)
    root = sparse_embed_streams(blocks, [(stream, sketch_size, kind, nnz_per_column)],
                                resolve_seed(random_state), split_every=split_every)
    (result,) = compute(root, client=client)
    return result


def _gather_block(block, start, stop, rows):
    out = block[np.asarray(rows) - start]
    out = out.toarray() if scipy.sparse.issparse(out) else np.asarray(out)
    return out.astype(np.float64, copy=False)


def gather_rows(blocks, rows, *, client=None):
    """Rows ``rows`` (sorted global indices) of the blocked matrix, as float64 ndarray.

    Each block returns only the rows drawn in its range, in one pass over the
    blocks in order: no random access to the storage.
    """
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (np.any(np.diff(rows) < 0) or rows[0] < 0
                      or rows[-1] >= blocks.n_rows):
        raise ValueError("rows must be sorted indices in [0, n_rows)")
    cuts = np.searchsorted(rows, np.asarray(blocks.offsets))
    mapped = _task(_gather_block)
    parts = [mapped(block, start, stop, rows[lo:hi])
             for block, (start, stop), lo, hi in zip(blocks.blocks, blocks.ranges(),
                                                     cuts[:-1], cuts[1:]) if hi > lo]
    if not parts:
        return np.zeros((0, blocks.n_features))
    return np.concatenate(compute(*parts, client=client), axis=0)


def is_dask_collection(obj):
    """Whether ``obj`` is a Dask collection (array, delayed, ...).

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from dasketch.blocked import is_dask_collection
    >>> is_dask_collection(da.ones(3)), is_dask_collection(np.ones(3))
    (True, False)
    """
    return dask.is_dask_collection(obj)


def iter_row_blocks(blocks, *aligned, client=None):
    """Walk the blocks in order, computing one block at a time.

    Memory stays bounded by one block (plus its rows of the ``aligned`` arrays),
    whatever the number of rows: the online learners of :mod:`dasketch.online`
    consume a larger-than-memory matrix this way.

    Parameters
    ----------
    blocks : RowBlocks
    *aligned : array_like or dask.array.Array
        Arrays with one entry (or row) per row of ``blocks``, e.g. labels; each
        block comes with its matching piece.
    client : distributed.Client, optional

    Yields
    ------
    tuple
        ``(start, stop, block, *pieces)``.

    Examples
    --------
    >>> import numpy as np
    >>> blocks = as_row_blocks(np.arange(10.0).reshape(5, 2), block_rows=2)
    >>> [(start, stop, float(y.sum())) for start, stop, _, y in
    ...  iter_row_blocks(blocks, np.ones(5))]
    [(0, 2, 2.0), (2, 4, 2.0), (4, 5, 1.0)]
    """
    pieces = [as_row_aligned(a, blocks, name=f"aligned[{i}]").to_delayed(
        optimize_graph=True).ravel() for i, a in enumerate(aligned)]
    for i, (start, stop) in enumerate(blocks.ranges()):
        objs = (blocks.blocks[i],) + tuple(p[i] for p in pieces)
        yield (start, stop) + tuple(compute(*objs, client=client))
