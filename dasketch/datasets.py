"""Synthetic data sets: writers of larger-than-memory zarr stores for examples and
benchmarks. The in-memory test problems of the solvers
(:mod:`dasketch.problems`) are re-exported here."""

from __future__ import annotations

import os

import numpy as np

from dasketch.kernels.embeddings import TILE, gaussian_rows, resolve_seed
from dasketch.problems import (  # noqa: F401 - re-exported
    ill_conditioned_regression,
    imbalanced_sparse_classification,
    l1_regression_linprog,
)
from dasketch.storage.outputs import (
    CSR_FORMAT,
    DENSE_FORMAT,
    check_disk_space,
    check_output,
    held_signals,
    write_atomically,
)
from dasketch.storage.reading import sparse_store_info


def write_in_chunks(write_chunk, starts, *, threads=None, progress=None):
    """Call ``write_chunk(start)`` for every start, on ``threads`` threads.

    ``progress(done, total)`` is called as chunks finish. On any error, Ctrl-C
    included, the chunks not yet started are cancelled and the running ones
    awaited before the error propagates, so nothing writes into the target after
    this returns and the caller can remove it (written by hand rather than with
    a Dask graph for that guarantee: Dask's threaded scheduler leaves running
    tasks behind when interrupted).
    """
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    starts = list(starts)
    threads = max(1, min(threads or os.cpu_count() or 1, len(starts)))
    pool = ThreadPoolExecutor(threads)
    pending, done = set(), 0

    def collect(at_most):
        nonlocal pending, done
        while len(pending) > at_most:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                future.result()
                done += 1
                if progress is not None:
                    progress(done, len(starts))

    try:
        for start in starts:
            pending.add(pool.submit(write_chunk, start))
            collect(2 * threads - 1)  # a bounded queue: memory stays O(threads chunks)
        collect(0)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def write_sparse_synthetic(path, n_rows, n_features, *, density=1e-3, chunk_rows=16384,
                           dtype="float64", random_state=0, overwrite=False, progress=None):
    """Write a synthetic sparse-by-rows data set as a CSR zarr group.

    Each row has about ``density * n_features`` nonzeros at uniform columns; the
    values are Gaussian with a column scale ``(j + 1) ** -0.5`` (a decaying
    spectrum). Rows are generated chunk by chunk (seeded by ``random_state`` and
    the chunk's first row) and appended, so the data set can be larger than
    memory. ``progress(done, total)``, if given, is called after every chunk.
    The group appears at ``path`` only once complete (also after Ctrl-C).

    Returns
    -------
    tuple
        ``(n_rows, n_features, nnz)``.
    """
    import zarr

    if n_rows < 1 or n_features < 1:
        raise ValueError(f"n_rows and n_features must be >= 1, got {n_rows}, {n_features}")
    if not 0 < density <= 1:
        raise ValueError(f"density must be in (0, 1], got {density}")
    check_output(path, overwrite)
    check_disk_space(path, n_rows * n_features * density * (8 + np.dtype(dtype).itemsize)
                     + 8 * (n_rows + 1))
    seed = resolve_seed(random_state)
    column_scale = (1.0 + np.arange(n_features)) ** -0.5
    chunk_rows = int(min(chunk_rows, n_rows))
    nnz_chunk = max(int(chunk_rows * n_features * density), 1)

    def write(target):
        with held_signals():  # zarr's I/O thread finishes before any clean-up
            group = zarr.open_group(target, mode="w")
            group.attrs.update({"format": CSR_FORMAT,
                                "shape": [int(n_rows), int(n_features)]})
            indptr = group.create_array("indptr", shape=(n_rows + 1,),
                                        chunks=(chunk_rows + 1,), dtype="int64")
            indices = group.create_array("indices", shape=(0,), chunks=(nnz_chunk,),
                                         dtype="int64")
            data = group.create_array("data", shape=(0,), chunks=(nnz_chunk,), dtype=dtype)
        nnz = [0]
        indptr[0:1] = [0]

        def write_chunk(start):  # in order: one thread, appends
            stop = min(start + chunk_rows, n_rows)
            counts, cols, vals = _sparse_rows(seed, start, stop, n_features, density)
            row_of = np.repeat(np.arange(stop - start), counts)
            cols_sorted = cols[np.lexsort((cols, row_of))]
            indptr[start + 1:stop + 1] = nnz[0] + np.cumsum(counts)
            indices.append(cols_sorted)
            data.append((vals * column_scale[cols_sorted]).astype(dtype))
            nnz[0] += int(counts.sum())

        write_in_chunks(write_chunk, range(0, n_rows, chunk_rows), threads=1,
                        progress=progress)

    write_atomically(write, path, overwrite, interruptible=True)
    return n_rows, n_features, sparse_store_info(path)[2]


def _sparse_rows(seed, start, stop, n_features, density):
    """Nonzero counts, column indices and values of rows ``[start, stop)``."""
    rng = np.random.default_rng([seed, 3, start])
    mean_count = density * n_features
    counts = np.clip(rng.poisson(mean_count, size=stop - start), 1, n_features)
    total = int(counts.sum())
    return counts, rng.integers(0, n_features, size=total), rng.standard_normal(total)


# The dense rank x n_features basis of write_synthetic's spectrum is held in memory.
MAX_BASIS_BYTES = 2 ** 30


# A dense chunk holds at most this many values (32 MiB in float64), so that a worker
# reads a chunk of wide rows within its memory.
CHUNK_VALUES = 2 ** 22


def default_chunk_rows(n_features):
    """Rows per zarr chunk of :func:`write_synthetic`: 16,384, fewer for wide rows
    so that a chunk stays within 32 MiB of float64 values.

    Examples
    --------
    >>> default_chunk_rows(256), default_chunk_rows(100_000)
    (16384, 41)
    """
    return int(max(1, min(16384, CHUNK_VALUES // max(int(n_features), 1))))


def _default_rank(n_features, decay, power):
    """Full rank, except that with a geometric decay the directions whose scale
    ``decay ** j`` is below float64 rounding of the first add nothing but cost;
    at most the rank whose basis fits :data:`MAX_BASIS_BYTES` (134 directions for
    a million features)."""
    rank = n_features
    if power is None and 0 < decay < 1:
        rank = int(np.ceil(np.log(np.finfo(np.float64).eps) / np.log(decay))) + 1
    return max(1, min(rank, MAX_BASIS_BYTES // (8 * int(n_features))))


def noise_rows(seed, start, stop, n_features):
    """Rows ``[start, stop)`` of the standard Gaussian noise of :func:`write_synthetic`.

    Drawn in tiles of at most :data:`CHUNK_VALUES` values (4,096 rows up to 1,024
    features, down to one row for very wide rows), each seeded by ``seed`` and
    its tile index, so a row does not depend on the range asked for and a chunk
    of wide rows never draws more than it writes plus one tile (the 4,096-row
    tiles of :func:`~dasketch.kernels.embeddings.gaussian_rows` are 32 GB at a
    million features). Up to 1,024 features the rows are those of
    ``gaussian_rows(seed, 2, start, stop, n_features)``.

    Examples
    --------
    >>> from dasketch.datasets import noise_rows
    >>> bool((noise_rows(0, 3, 5, 10 ** 6) == noise_rows(0, 0, 8, 10 ** 6)[3:5]).all())
    True
    """
    tile_rows = min(TILE, max(1, CHUNK_VALUES // int(n_features)))
    if tile_rows == TILE:
        return gaussian_rows(seed, 2, start, stop, n_features)
    first, last = start // tile_rows, -(-stop // tile_rows)
    parts = [np.random.default_rng([seed, 2, tile_rows, tile]).standard_normal(
        (tile_rows, n_features)) for tile in range(first, last)]
    offset = start - first * tile_rows
    return np.concatenate(parts)[offset:offset + stop - start]


def write_synthetic(path, n_rows, n_features, *, rank=None, decay=0.9, power=None, noise=0.01,
                    chunk_rows=None, dtype="float64", random_state=0, overwrite=False,
                    progress=None):
    """Write a synthetic data set with a decaying spectrum to a zarr store.

    Row ``i`` is ``g_i^T diag(s) V^T + noise * e_i^T`` with ``g_i, e_i`` standard
    Gaussian, ``s_j = decay ** j`` (or ``(j + 1) ** -power`` when ``power`` is
    given) for the first ``rank`` directions and ``V`` a
    fixed random orthogonal basis (held in memory: ``rank x n_features`` values at
    most :data:`MAX_BASIS_BYTES`; the default rank is ``n_features``, or for a
    geometric decay the directions above float64 rounding, 344 at ``decay=0.9``,
    capped to fit that memory: 134 at a million features); so ``A^T A / n`` approaches
    ``V diag(s^2) V^T + noise^2 I``. Rows are generated block by block from
    tile-indexed seeds (the same rows for any ``chunk_rows``; default
    :func:`default_chunk_rows`), so the data set can
    be far larger than memory. Chunks are written on a few threads. The store
    appears at ``path`` only once complete (also after Ctrl-C).

    Parameters
    ----------
    path : str or os.PathLike
        The zarr store to write.
    n_rows, n_features : int
        Shape of the data set, each ``>= 1``.
    rank : int, optional
        Directions of the spectrum; default ``n_features``, or for a geometric decay
        the directions above float64 rounding, capped as above.
    decay : float, default 0.9
        Ratio of consecutive scales ``s_j``.
    power : float, optional
        A power-law spectrum ``s_j = (j + 1) ** -power`` instead of the geometric
        one.
    noise : float, default 0.01
        Scale of the isotropic Gaussian noise added to every row.
    chunk_rows : int, optional
        Rows per zarr chunk; default :func:`default_chunk_rows` (16,384, fewer for
        wide rows so that a chunk stays within 32 MiB).
    dtype : str or numpy.dtype, default "float64"
        Type of the stored values.
    random_state : None, int or numpy.random.Generator, default 0
        Seed of the basis, the rows and the noise.
    overwrite : bool, default False
        Replace an existing store at ``path``; otherwise that is an error.
    progress : callable, optional
        ``progress(done, total)`` is called after every chunk written.

    Returns
    -------
    dask.array.Array
        The written array, opened from the store.

    See Also
    --------
    sketch : Sketch the written rows.

    Examples
    --------
    >>> import os, tempfile, dasketch
    >>> X = dasketch.write_synthetic(os.path.join(tempfile.mkdtemp(), "X.zarr"), 1000, 8)
    >>> X.shape, X.dtype.name
    ((1000, 8), 'float64')
    """
    import zarr

    if n_rows < 1 or n_features < 1:
        raise ValueError(f"n_rows and n_features must be >= 1, got {n_rows}, {n_features}")
    rank = min(_default_rank(n_features, decay, power) if rank is None else rank, n_features)
    basis_bytes = 8 * rank * n_features
    if basis_bytes > MAX_BASIS_BYTES:
        most_rank = MAX_BASIS_BYTES // (8 * n_features)
        fix = (f"pass rank <= {most_rank}" if most_rank >= 1 else
               f"write at most {MAX_BASIS_BYTES // 8:,} features (n_features, "
               "make-data --features)")
        raise ValueError(f"rank ({rank}) x n_features ({n_features}): the random basis of the "
                         f"spectrum would take {basis_bytes / 2 ** 30:.1f} GiB in memory; "
                         f"{fix}")
    check_output(path, overwrite)
    check_disk_space(path, n_rows * n_features * np.dtype(dtype).itemsize)
    seed = resolve_seed(random_state)
    basis, _ = np.linalg.qr(gaussian_rows(seed, 0, 0, n_features, rank))
    scales = decay ** np.arange(rank) if power is None else (1.0 + np.arange(rank)) ** -power
    basis *= scales  # in place: one basis-sized array, not two
    mixing = basis.T  # rank x d

    if chunk_rows is None:
        chunk_rows = default_chunk_rows(n_features)
    chunk_rows = int(min(chunk_rows, n_rows))

    def write(target):
        with held_signals():  # zarr's I/O thread finishes before any clean-up
            array = zarr.create_array(target, shape=(n_rows, n_features),
                                      chunks=(chunk_rows, n_features), dtype=dtype,
                                      attributes={"format": DENSE_FORMAT})

        def write_chunk(start):
            stop = min(start + chunk_rows, n_rows)
            rows = gaussian_rows(seed, 1, start, stop, rank) @ mixing
            if noise:
                rows += noise * noise_rows(seed, start, stop, n_features)
            array[start:stop] = rows.astype(dtype, copy=False)

        write_in_chunks(write_chunk, range(0, n_rows, chunk_rows), progress=progress)

    write_atomically(write, path, overwrite, interruptible=True)
    from dasketch._blocks import open_zarr_array

    return open_zarr_array(path)
