"""Test problems of the solvers, in memory, with known answers: ill-conditioned
regression problems with non-uniform leverage, the exact l1 regression solution,
and sparse imbalanced classification data.

The regression problems are the test problems of pwSGD-type solvers (Yang et al.,
JMLR 2018, Section 6; Avron, Maymounkov, Toledo, SIAM J. Sci. Comput. 2010,
Section 6): a prescribed condition number and a few rows of high leverage, which
defeat uniform sampling.
"""

from __future__ import annotations

import numpy as np

from dasketch.kernels.embeddings import resolve_seed


def ill_conditioned_regression(n_rows, n_features, *, condition_number=1e6, n_heavy=None,
                               heavy_scale=None, noise="gaussian", noise_scale=1.0,
                               rotate=True, random_state=0, dtype=np.float64):
    """``A = D W diag(s) V^T`` and ``b = A x_true + e``.

    ``W`` is standard Gaussian, ``s`` is log-spaced from 1 to
    ``1 / condition_number``, ``V`` a random orthogonal matrix (identity when
    ``rotate=False``: then the ill-conditioning is a column scaling that a
    diagonal preconditioner removes), and ``D`` scales ``n_heavy`` random rows by
    ``heavy_scale`` so that they carry a large share of the leverage.
    ``x_true = V diag(1/s) g`` puts as much signal along every singular
    direction of ``A`` as the noise ``e`` (Gaussian or Laplace) carries in
    total, so ``||A x_true||^2`` is about ``d`` times ``||e||^2``.

    Parameters
    ----------
    n_rows, n_features : int
    condition_number : float
        ``cond(W diag(s) V^T)`` up to the factor ``cond(W)`` (about 1 for
        ``n >> d``).
    n_heavy : int, optional
        Default ``max(n_features // 4, 1)``.
    heavy_scale : float, optional
        Default ``sqrt(n_rows / n_features)``: each heavy row then has leverage
        about 1/2.
    noise : {"gaussian", "laplace"}
    noise_scale : float
    rotate : bool
    random_state : int
    dtype : numpy dtype

    Returns
    -------
    A : ndarray (n_rows, n_features)
    b : ndarray (n_rows,)
    x_true : ndarray (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.datasets import ill_conditioned_regression
    >>> A, b, x = ill_conditioned_regression(2000, 10, condition_number=1e4)
    >>> bool(5e3 < np.linalg.cond(A) < 5e4)
    True
    """
    if noise not in ("gaussian", "laplace"):
        raise ValueError(f"noise must be 'gaussian' or 'laplace', got {noise!r}")
    rng = np.random.default_rng(resolve_seed(random_state))
    d = int(n_features)
    s = np.logspace(0, -np.log10(condition_number), d)
    A = rng.standard_normal((n_rows, d))
    A *= s
    if rotate:
        V, _ = np.linalg.qr(rng.standard_normal((d, d)))
        A = A @ V.T
    n_heavy = max(d // 4, 1) if n_heavy is None else int(n_heavy)
    heavy_scale = np.sqrt(n_rows / d) if heavy_scale is None else float(heavy_scale)
    heavy = rng.choice(n_rows, size=n_heavy, replace=False)
    A[heavy] *= heavy_scale
    # Equal signal along every right singular direction: x_true = V diag(1/s) g,
    # so the objective is as sensitive to the small singular directions as to
    # the large ones and an unpreconditioned method must resolve all of them.
    x_true = rng.standard_normal(d) / s
    if rotate:
        x_true = V @ x_true
    if noise == "gaussian":
        e = rng.standard_normal(n_rows)
    else:
        e = rng.laplace(size=n_rows)
    b = A @ x_true + noise_scale * e
    return A.astype(dtype, copy=False), b, x_true


def l1_regression_linprog(A, b, bounds=None):
    """Exact ``argmin_x ||A x - b||_1`` (optionally in a box) with HiGHS.

    The reference solution for small problems, by
    ``scipy.optimize.linprog(method="highs")``. Without bounds, the dual
    ``max b^T u`` subject to ``A^T u = 0, -1 <= u <= 1`` (``n`` variables, ``d``
    equalities; ``x`` is minus the multipliers of the equalities), the smaller
    problem for ``n >> d``; with bounds, the primal ``min sum(t)`` subject to
    ``-t <= A x - b <= t`` (``n + d`` variables, ``2 n`` inequalities), which takes
    much longer: keep ``n`` to a few tens of thousands.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.datasets import l1_regression_linprog
    >>> A = np.ones((5, 1)); b = np.array([0.0, 1.0, 2.0, 3.0, 100.0])
    >>> l1_regression_linprog(A, b)          # the median
    array([2.])
    """
    import scipy.optimize
    import scipy.sparse

    A = np.asarray(A, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    n, d = A.shape
    if bounds is None:
        res = scipy.optimize.linprog(-b, A_eq=A.T, b_eq=np.zeros(d), bounds=(-1, 1),
                                     method="highs")
        if res.status != 0:
            raise RuntimeError(f"linprog failed: {res.message}")
        return -res.eqlin.marginals
    eye = scipy.sparse.identity(n, format="csr")
    A_ub = scipy.sparse.vstack([scipy.sparse.hstack([A, -eye]),
                                scipy.sparse.hstack([-A, -eye])]).tocsr()
    c = np.concatenate([np.zeros(d), np.ones(n)])
    box = [(None, None)] * d if bounds is None else [
        (None if np.isinf(lo) else lo, None if np.isinf(hi) else hi)
        for lo, hi in zip(np.broadcast_to(bounds[0], d), np.broadcast_to(bounds[1], d))]
    res = scipy.optimize.linprog(c, A_ub=A_ub, b_ub=np.concatenate([b, -b]),
                                 bounds=box + [(0, None)] * n, method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return res.x[:d]


def imbalanced_sparse_classification(n_rows, n_features, *, nnz_per_row=12,
                                     positive_rate=0.03, signal=5.0, zipf_exponent=1.1,
                                     random_state=0):
    """Sparse binary rows with rare features and rare positives.

    Each row holds ``nnz_per_row`` draws of features whose frequencies follow a
    Zipf law (a few frequent features, many rarely seen ones, as in text or
    click data); labels come from a sparse logistic model (10 % of the features
    carry weights of size ``signal``) whose bias leaves a fraction
    ``positive_rate`` of positives. The setting where a sketched Newton step
    without regularisation takes huge first steps into rarely seen features.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features), values 0 or 1
    y : ndarray of shape (n_rows,), labels in {0, 1}

    Examples
    --------
    >>> from dasketch.datasets import imbalanced_sparse_classification
    >>> X, y = imbalanced_sparse_classification(4000, 500)
    >>> X.shape, round(float(y.mean()), 2)
    ((4000, 500), 0.03)
    """
    import scipy.sparse

    rng = np.random.default_rng(resolve_seed(random_state))
    d = int(n_features)
    frequency = rng.permutation(1.0 / np.arange(1, d + 1) ** zipf_exponent)
    columns = rng.choice(d, size=(n_rows, nnz_per_row), p=frequency / frequency.sum())
    X = scipy.sparse.csr_matrix(
        (np.ones(n_rows * nnz_per_row), columns.ravel(),
         np.arange(0, n_rows * nnz_per_row + 1, nnz_per_row)), shape=(n_rows, d))
    X.sum_duplicates()
    X.data[:] = 1.0
    weights = signal * rng.standard_normal(d) * (rng.random(d) < 0.1)
    margin = X @ weights + rng.logistic(size=n_rows)
    y = (margin > np.quantile(margin, 1.0 - positive_rate)).astype(np.int64)
    return X, y
