"""Exact spectral errors of sketches of dense matrices, for the benchmarks.

``||X^T X - B^T B - alpha I||_2`` from dense LAPACK (float64) in place of ARPACK,
whose extreme eigenvalues converge slowly on these clustered residual spectra.
"""

import numpy as np
import scipy.linalg
import scipy.linalg.lapack
from threadpoolctl import threadpool_limits


class ExactDenseErrors:
    """Exact spectral errors ``||X^T X - B^T B - alpha I||_2`` of sketches of one dense X.

    ``E = X^T X - B^T B - alpha I`` maps the span of the rows of ``X`` and ``B``
    (dimension at most ``n + l``) into itself and acts as ``-alpha I`` on its
    orthogonal complement. With the Householder QR ``X^T = Q [R; 0]`` (computed once
    per X) and ``Q^T B^T = [C; D]``, ``D = Q_D [R_D; 0]``, E restricted to that span is
    ``K = blockdiag(R R^T, 0) - [C; R_D] [C; R_D]^T - alpha I`` of order
    ``n + rank``, so ``||E||_2 = max(|eigvalsh(K)|, alpha if n + l < d)``. When
    ``n + l >= d`` the d x d matrix is formed instead. Float64 throughout.

    Dense LAPACK (``geqrf``, ``ormqr``, ``syevd``) rather than ARPACK: on these
    errors the extreme eigenvalues are clustered (Frequent Directions flattens the
    top of the residual spectrum), and ARPACK at tol 1e-3 did not finish in 15
    minutes at 8,192 x 8,192; one QR per X and one symmetric eigensolve per sketch
    are exact to rounding and take a known time. On 2 cores (quiet machine): about
    30 s per sketch at 8,192 x 8,192 (d x d form; 60 s on one thread), and an 18 s
    QR, then 3.4 s per sketch, at 4,096 x 32,768. Memory: the reduced form keeps
    the reflectors (as large as X) and two n x n matrices, the d x d form two d x d.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The sketched rows.
    sketch_size : int
        Rows of the sketches to be checked (chooses the d x d or the reduced form;
        either is exact for any number of rows).
    blas_threads : int or None
        BLAS threads for the LAPACK reductions (None: the BLAS default).

    References
    ----------
    G. H. Golub, C. F. Van Loan, "Matrix Computations", 4th ed., 2013: Algorithm
    5.2.1 (Householder QR, LAPACK ``geqrf``; ``ormqr`` applies its ``Q^T``) and
    Section 8.3 (symmetric tridiagonal reduction and QR iteration, ``syevd``).
    """

    def __init__(self, X, sketch_size, blas_threads=None):
        self.X = np.asarray(X, dtype=np.float64)
        n, d = self.X.shape
        self.threads = blas_threads
        self.full = n + sketch_size >= d
        with threadpool_limits(blas_threads):
            if self.full:
                self.base = self.X.T @ self.X
            else:
                # X.T is Fortran-ordered, as geqrf wants; qr copies it (n d floats)
                # and keeps the reflectors in place of an explicit basis.
                (self.reflectors, self.tau), R = scipy.linalg.qr(self.X.T, mode="raw")
                self.base = R @ R.T
        self._eigenvalues = None

    def gram_eigenvalues(self):
        """Eigenvalues of ``X^T X`` in decreasing order, the zeros beyond ``min(n, d)`` left out.

        From the Gram already formed: ``R R^T`` (n x n, similar to ``X X^T``) in the
        reduced form, ``X^T X`` (d x d, ``d <= n + l``) in the other.
        """
        if self._eigenvalues is None:
            with threadpool_limits(self.threads):
                values = scipy.linalg.eigvalsh(self.base)[::-1]
            self._eigenvalues = values[:min(self.X.shape)]
        return self._eigenvalues

    def __call__(self, B, alpha):
        """``||X^T X - B^T B - alpha I||_2`` for the sketch ``B`` (l x d) and shift ``alpha``."""
        B = np.asarray(B, dtype=np.float64)
        n, d = self.X.shape
        with threadpool_limits(self.threads):
            if self.full:
                residual = self.base - B.T @ B
                covered = d
            else:
                rotated = np.array(B.T, order="F")  # a copy: ormqr overwrites it
                lwork = scipy.linalg.lapack.dormqr("L", "T", self.reflectors, self.tau,
                                                   rotated, -1)[1][0]
                rotated, _, info = scipy.linalg.lapack.dormqr(
                    "L", "T", self.reflectors, self.tau, rotated, int(lwork), overwrite_c=1)
                if info != 0:
                    raise RuntimeError(f"dormqr failed with info={info}")
                # R_D of shape (min(d - n, l), l): mode "r" would pad it to d - n rows.
                outside = scipy.linalg.qr(rotated[n:], mode="raw")[1]
                coords = np.vstack([rotated[:n], outside])
                residual = -(coords @ coords.T)
                residual[:n, :n] += self.base
                covered = coords.shape[0]
            residual[np.diag_indices_from(residual)] -= alpha
            ends = scipy.linalg.eigvalsh(residual, overwrite_a=True)[[0, -1]]
        # On the complement of the span E is -alpha I. (With rows in B, K already has
        # an eigenvalue <= -alpha there: blockdiag(R R^T, 0) vanishes on its last rows.)
        return float(max(abs(ends[0]), abs(ends[1]), alpha if covered < d else 0.0))


def check_exact_errors(seed=0):
    """Largest relative difference between :class:`ExactDenseErrors` and the dense
    ``numpy.linalg.norm(E, 2)`` over small random cases: n < d and n > d, n + l
    either side of d, rank-deficient X and B, alpha > 0 and 0."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for n, d, l, rank in [(30, 200, 8, 30), (30, 200, 8, 5), (150, 60, 8, 60),
                          (150, 60, 8, 10), (55, 60, 8, 55), (60, 60, 8, 20),
                          (120, 400, 16, 40), (5, 40, 3, 5)]:
        X = (rng.standard_normal((n, rank)) @ rng.standard_normal((rank, d))
             * (1.0 + np.arange(d)) ** -0.5)
        sketches = [rng.standard_normal((l, d)), np.zeros((l, d)),
                    np.linalg.svd(X, full_matrices=False)[2][:l] * 3.0,
                    rng.standard_normal((l, 2)) @ rng.standard_normal((2, d))]
        # Both forms wherever both apply: sketch_size 0 takes the reduced one if n < d.
        forms = [ExactDenseErrors(X, size) for size in {0, l, d}]
        for B in sketches:
            for alpha in (0.0, 0.7):
                dense = X.T @ X - B.T @ B - alpha * np.eye(d)
                reference = np.linalg.norm(dense, 2)
                worst = max([worst] + [abs(exact(B, alpha) - reference) / reference
                                       for exact in forms])
    return worst
