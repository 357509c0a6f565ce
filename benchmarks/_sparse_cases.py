"""The sparse and wide test matrices of ``bench_sparse_wide`` and ``bench_row_sampling``,
their spectral errors by ARPACK, and a sketch that leaves the BLAS threads as it
found them."""

import site
from pathlib import Path

import dask
import numpy as np
import scipy.sparse
import scipy.sparse.linalg as sla
from threadpoolctl import ThreadpoolController

import dasketch
from dasketch.datasets import _sparse_rows


def sparse_synthetic(n, d, density, seed=0):
    counts, cols, vals = _sparse_rows(seed, 0, n, d, density)
    X = scipy.sparse.csr_matrix((vals * (1.0 + cols) ** -0.5, cols,
                                 np.concatenate([[0], np.cumsum(counts)])), shape=(n, d))
    X.sum_duplicates()
    return X


def hashed_text(n_lines, n_features):
    """Source lines of installed packages, hashed (token counts)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    lines = []
    for root in site.getsitepackages():
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = path.read_text(errors="ignore")
            except OSError:
                continue
            lines.extend(line for line in text.splitlines() if line.strip())
            if len(lines) >= n_lines:
                break
        if len(lines) >= n_lines:
            break
    vectorizer = HashingVectorizer(n_features=n_features, alternate_sign=False, norm=None)
    X = vectorizer.transform(lines[:n_lines]).tocsr().astype(np.float64)
    keep = np.diff(X.indptr) > 0
    return X[keep]


def wide_dense(n, d, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * (1.0 + np.arange(d)) ** -0.5


def gram_operator(X, B=None, alpha=0.0):
    d = X.shape[1]
    XT = X.T.tocsr() if scipy.sparse.issparse(X) else X.T

    def matvec(v):
        out = XT @ (X @ v)
        if B is not None:
            out = out - B.T @ (B @ v) - alpha * v
        return out
    return sla.LinearOperator((d, d), matvec=matvec, dtype=np.float64)


def spectral_error(X, B, alpha):
    """ARPACK estimate (tol 1e-3) of ``||X^T X - B^T B - alpha I||_2``, for sparse X."""
    op = gram_operator(X, B, alpha)
    ends = [sla.eigsh(op, k=1, which=which, return_eigenvectors=False, tol=1e-3)[0]
            for which in ("LA", "SA")]
    return float(max(abs(e) for e in ends))


# Earlier versions of dasketch could leave the process at one BLAS thread after a
# sketch on the threaded scheduler, and earlier runs of this benchmark timed X @ G
# at d = 32,768 that way. Each sketch here restores the counts of before it, so that
# X @ G and the exact errors run with the BLAS threads of a fresh process whatever
# the version.
BLAS = ThreadpoolController()


def sketch_keeping_blas_threads(X, l, **kwargs):
    with BLAS.limit(limits=None), dask.config.set(scheduler="threads"):
        return dasketch.sketch(X, l, **kwargs)
