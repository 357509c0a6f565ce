"""Test data and exact reference quantities."""

from fractions import Fraction

import dask
import numpy as np


def spectral_norm(M):
    """Exact spectral norm of a symmetric matrix."""
    return float(np.abs(np.linalg.eigvalsh(M)).max())


def exact_centred_gram(X):
    """``X_c^T X_c`` of the exactly centred ``X`` (exact mean and products in
    rationals), rounded once to float64: the reference for centred sketches of
    data whose mean dwarfs its spread."""
    rows = [[Fraction(v) for v in row] for row in np.asarray(X, dtype=np.float64)]
    n, d = len(rows), len(rows[0])
    mean = [sum(row[j] for row in rows) / n for j in range(d)]
    centred = [[row[j] - mean[j] for j in range(d)] for row in rows]
    return np.array([[float(sum(row[i] * row[j] for row in centred)) for j in range(d)]
                     for i in range(d)])


def tail_energy(A, k):
    """``||A - [A]_k||_F^2``: energy outside the best rank-k approximation."""
    s = np.linalg.svd(A, compute_uv=False)
    return float(np.sum(s[k:] ** 2))


def low_rank_plus_noise(n, d, rank, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, rank))
    V = np.linalg.qr(rng.standard_normal((d, rank)))[0]
    return U * (0.8 ** np.arange(rank)) * 10 @ V.T + noise * rng.standard_normal((n, d))


def decaying(n, d, seed=0, decay=0.85):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * decay ** np.arange(d)


def check_guarantees(sketch, A, ks=(0, 1, 2)):
    """Assert FD and RFD guarantees of a sketch of A (Liberty 2013; Luo et al. 2019).

    ``0 <= A^T A - B^T B <= Delta I``, ``Delta <= ||A - A_k||_F^2 / (l - k)``, and
    ``||A^T A + alpha0 I - (B^T B + alpha I)|| <= error_bound`` (RFD) or the FD
    one-sided bound.
    """
    gram = A.T @ A
    scale = max(spectral_norm(gram), 1.0)
    tol = 1e-9 * scale
    residual = gram - sketch.B.T @ sketch.B
    eig = np.linalg.eigvalsh(residual)
    assert eig.min() >= -tol, "B^T B exceeds A^T A"
    assert eig.max() <= sketch.shrinkage + tol, "A^T A - B^T B exceeds Delta"
    for k in ks:
        if k < sketch.sketch_size:
            assert sketch.shrinkage <= tail_energy(A, k) / (sketch.sketch_size - k) + tol
    estimate = sketch.covariance() - sketch.alpha0 * np.eye(A.shape[1])
    assert spectral_norm(gram - estimate) <= sketch.error_bound + tol


def sparse_decaying(n, d, nnz_per_row, seed=0):
    """CSR rows with about ``nnz_per_row`` nonzeros at uniform columns, Gaussian
    values scaled by ``(j + 1) ** -0.5`` (a slowly decaying spectrum)."""
    import scipy.sparse

    rng = np.random.default_rng(seed)
    counts = np.clip(rng.poisson(nnz_per_row, size=n), 1, d)
    cols = rng.integers(0, d, size=counts.sum())
    vals = rng.standard_normal(counts.sum()) * (1.0 + cols) ** -0.5
    X = scipy.sparse.csr_matrix((vals, cols, np.concatenate([[0], np.cumsum(counts)])),
                                shape=(n, d))
    X.sum_duplicates()
    return X


class GraphRecorder:
    """A scheduler that keeps every graph it computes (run synchronously)."""

    def __init__(self):
        self.graphs = []

    def __call__(self, dsk, keys, **kwargs):
        if not isinstance(dsk, dict):
            dsk = dict(dsk.__dask_graph__())
        self.graphs.append(dsk)
        return dask.local.get_sync(dsk, keys, **kwargs)


def graph_tasks(graph):
    """The tasks of a graph, and those of the subgraphs fused into its tasks."""
    for task in graph.values():
        yield task
        for arg in getattr(task, "args", ()):
            if isinstance(arg, dict):
                yield from graph_tasks(arg)


def store_read(task):
    """``(reader, start, stop)`` of a block task that reads rows of a store itself."""
    func = getattr(task, "func", None)
    read = getattr(getattr(func, "func", None), "read", None)
    if read is None:
        return None
    start, stop = task.args[1:3]
    return read, start, stop


def moved_whole(recorder):
    """Names of the tasks of recorded graphs that rechunk or shuffle data."""
    names = {dask.utils.key_split(key) for graph in recorder.graphs for key in graph}
    return {name for name in names if "rechunk" in name or "p2p" in name or "shuffle" in name}


def assert_sketched_alike_on_a_cluster(inputs, reference, sketch_size, block_rows, n_workers):
    """Each of ``inputs`` (kind -> data) sketched on a ``LocalCluster`` of
    ``n_workers`` single-threaded worker processes has ``reference``'s covariance
    estimate to rounding."""
    from distributed import Client, LocalCluster

    import dasketch

    top = np.abs(reference.covariance()).max()
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        for kind, data in inputs.items():
            ours = dasketch.sketch(data, sketch_size, block_rows=block_rows, client=client)
            assert np.abs(ours.covariance() - reference.covariance()).max() <= 1e-12 * top, kind
