"""Sketched online Newton step (RFD-SON, FD-SON, full-matrix ONS).

Single-machine kernel, numpy/scipy only. :class:`OnlineNewton` processes one
example at a time: project the previous unconstrained iterate onto
``K_t = {w : |w^T x_t| <= prediction_bound}`` in the ``H``-norm, predict, take the gradient ``g``
of the loss, append ``sqrt(mu_t + eta_t) g`` to a (Robust) Frequent Directions
sketch ``B`` and step ``u = w - H^+ g`` with ``H = B^T B + alpha I``.

The sketch is held as ``B = M Q``: ``Q`` (k x d) has orthonormal rows spanning the
rows of ``B`` and ``M`` (r x k) holds their coordinates, with ``k <= r <= 2 l``.
Every solve, projection and sketch update is then a product with ``Q`` or ``Q^T``
(O(l d), O(l nnz) for a sparse ``x``) plus work on ``l x l`` matrices; no d x d
matrix is ever formed (except by ``method="full"``, the O(d^2) baseline).

References
----------
.. [1] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019: Algorithm 3 (RFD-SON)
   and Algorithm 6 (its fast variant, Appendix A).
.. [2] H. Luo, A. Agarwal, N. Cesa-Bianchi, J. Langford, "Efficient second order
   online learning by sketching", NeurIPS 2016 (FD-SON; the closed-form
   projection onto ``K_t``).
"""

from __future__ import annotations

import copy
import numbers

import numpy as np
import scipy.linalg
import scipy.sparse

METHODS = ("rfd", "fd", "full")
LOSSES = ("squared", "logistic", "hinge")
UPDATES = ("buffered", "per_step")

# Eigenvalues of H below RCOND * (largest eigenvalue) are treated as zero: the
# solve is the pseudo-inverse with this relative cut-off (numpy.linalg.pinv's
# ``rtol``), so a rank-deficient H at alpha = 0 never divides by rounding noise.
RCOND = 1e-12
# A gradient whose part outside span(Q) is below this fraction of its norm adds
# no new basis direction (that part is rounding noise).
_BASIS_TOL = 1e-12
# Iterates whose norm exceeds this are reported as diverged.
DIVERGENCE_NORM = 1e100


class DivergenceError(ArithmeticError):
    """The iterates of an online learner became non-finite or exploded."""


def _check_nonnegative(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_online_parameters(n_features, sketch_size, method, alpha0, loss, prediction_bound, eta, mu,
                            update):
    """Validate the parameters of :class:`OnlineNewton`.

    Raises
    ------
    TypeError, ValueError
        Naming the offending argument and what was expected.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    if update not in UPDATES:
        raise ValueError(f"update must be one of {UPDATES}, got {update!r}")
    if method != "full":
        if isinstance(sketch_size, (bool, np.bool_)) or not isinstance(
                sketch_size, numbers.Integral):
            raise TypeError(f"sketch_size must be an integer in [1, n_features], got "
                            f"{sketch_size!r}")
        if not 1 <= sketch_size <= n_features:
            raise ValueError(f"sketch_size must be an integer in [1, n_features={n_features}], "
                             f"got {sketch_size}")
    _check_nonnegative(alpha0, "alpha0")
    prediction_bound = _check_nonnegative(prediction_bound, "prediction_bound")
    if prediction_bound == 0:
        raise ValueError("prediction_bound must be > 0 (the constraint is |w^T x| <= prediction_bound)")
    _check_nonnegative(eta, "eta")
    _check_nonnegative(mu, "mu")
    if eta + mu <= 0:
        raise ValueError("eta and mu cannot both be 0 (the sketched rows are "
                         "sqrt(mu + eta / t) * gradient)")


def loss_derivative(loss, z, y):
    """Loss ``l(z, y)`` and its derivative in ``z`` at the prediction ``z``.

    ``"squared"``: ``(z - y)^2``; ``"logistic"``: ``log(1 + exp(-y z))``;
    ``"hinge"``: ``max(0, 1 - y z)`` (subgradient 0 at the kink). Labels of the
    classification losses are in {-1, +1}.

    Examples
    --------
    >>> loss_derivative("squared", 0.5, 1.0)
    (0.25, -1.0)
    """
    if loss == "squared":
        r = z - y
        return r * r, 2.0 * r
    margin = y * z
    if loss == "logistic":
        # log(1 + exp(-m)) and its derivative -y / (1 + exp(m)), overflow-free.
        value = float(np.logaddexp(0.0, -margin))
        return value, -y * float(np.exp(-np.logaddexp(0.0, margin)))
    if margin < 1.0:
        return 1.0 - margin, -y
    return 0.0, 0.0


def _small_svd(M):
    """Singular values and right singular vectors of a small matrix."""
    try:
        _, s, wt = scipy.linalg.svd(M, full_matrices=False, check_finite=False)
    except np.linalg.LinAlgError:  # gesdd did not converge: the slower, safer driver
        _, s, wt = scipy.linalg.svd(M, full_matrices=False, lapack_driver="gesvd",
                                    check_finite=False)
    return s, wt


class _Row:
    """One example as a dense vector or as (indices, values) of its non-zeros."""

    __slots__ = ("dense", "indices", "values")

    def __init__(self, dense=None, indices=None, values=None):
        self.dense, self.indices, self.values = dense, indices, values

    def dot(self, w):
        if self.dense is not None:
            return float(self.dense @ w)
        return float(w[self.indices] @ self.values)

    def left(self, Q):
        """``Q @ x`` for a (k x d) ``Q``: O(k d) dense, O(k nnz) sparse."""
        if self.dense is not None:
            return Q @ self.dense
        return Q[:, self.indices] @ self.values

    def to_dense(self, d):
        if self.dense is not None:
            return self.dense.copy()
        out = np.zeros(d)
        np.add.at(out, self.indices, self.values)
        return out

    def norm_sq(self):
        v = self.dense if self.dense is not None else self.values
        return float(v @ v)


class OnlineNewton:
    """Mutable state of a sketched online Newton step learner.

    One call of :meth:`step` per example implements one round of the RFD paper's
    Algorithm 3 ([1]_; FD-SON and full-matrix ONS of [2]_ with ``method="fd"`` and
    ``"full"``). Round ``t``, with ``u`` the unconstrained iterate of round
    ``t - 1`` and ``H`` its matrix:

    1. ``w = argmin_{|w^T x_t| <= prediction_bound} ||w - u||_H = u - gamma H^+ x_t`` with
       ``gamma = tau_C(u^T x_t) / (x_t^T H^+ x_t)`` and
       ``tau_C(z) = sign(z) max(|z| - prediction_bound, 0)`` (closed form, [1]_ Appendix A; when
       ``x_t`` lies outside the range of a singular ``H`` the step is taken along
       the part of ``x_t`` outside the range, where the H-seminorm is zero);
    2. predict ``z = w^T x_t`` and suffer ``l(z, y_t)``; ``g = l'(z, y_t) x_t``;
    3. append ``sqrt(mu + eta / t) g`` to the sketch; with ``update="per_step"``
       shrink to ``l - 1`` rows whenever the sketch has ``l`` rows (Algorithm 3),
       with ``update="buffered"`` only when it has ``2 l`` rows (the ``2 l`` buffer
       of Algorithm 6, O(l d) amortised per step); a shrink subtracts
       ``delta = sigma_l^2`` and RFD adds ``delta / 2`` to ``alpha``;
    4. ``u = w - H^+ g`` with ``H = B^T B + alpha I``, ``alpha = alpha0 +
       shrinkage / 2`` (RFD) or ``alpha0`` (FD), applied by the Woodbury identity
       in the basis ``Q``; ``H^+`` is the pseudo-inverse (eigenvalues below
       ``RCOND`` times the largest count as zero), which matters while
       ``alpha = 0``.

    Parameters
    ----------
    n_features : int
    sketch_size : int
        ``l`` in ``[1, n_features]`` (the paper's ``m``); ignored for ``"full"``.
    method : {"rfd", "fd", "full"}
    alpha0 : float
        Initial ``alpha >= 0``; 0 is the hyperparameter-free RFD0-SON.
    loss : {"squared", "logistic", "hinge"}
    prediction_bound : float
        Bound of the constraint ``|w^T x_t| <= prediction_bound``.
    eta, mu : float
        Sketched rows are ``sqrt(mu + eta / t) g_t`` (``mu_t = mu`` and
        ``eta_t = eta / t`` in [1]_).
    update : {"buffered", "per_step"}

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)); y = np.sign(X @ np.ones(5))
    >>> learner = OnlineNewton(5, 3)
    >>> z = learner.fit_rows(X, y)[0]
    >>> bool(np.mean(np.sign(z[100:]) == y[100:]) > 0.8)
    True
    """

    def __init__(self, n_features, sketch_size=20, *, method="rfd", alpha0=0.0,
                 loss="squared", prediction_bound=1.0, eta=1.0, mu=0.0, update="buffered"):
        check_online_parameters(n_features, sketch_size, method, alpha0, loss, prediction_bound, eta,
                                mu, update)
        d = int(n_features)
        self.n_features = d
        self.method = method
        self.sketch_size = int(sketch_size) if method != "full" else d
        self.alpha0 = float(alpha0)
        self.loss = loss
        self.prediction_bound = float(prediction_bound)
        self.eta = float(eta)
        self.mu = float(mu)
        self.update = update
        self.t = 0
        self.u = np.zeros(d)
        self.w = np.zeros(d)
        self.shrinkage = 0.0
        self.n_shrinks = 0
        if method == "full":
            self._H = np.zeros((d, d))
            self._inverse = None if self.alpha0 == 0 else np.eye(d) / self.alpha0
            self._eig = None
        else:
            l = self.sketch_size
            # Rows held before a shrink: l (Algorithm 3) or 2 l (Algorithm 6).
            self.capacity = l if update == "per_step" else 2 * l
            cap = self.capacity
            self._Q = np.zeros((cap, d))
            self._M = np.zeros((cap, cap))
            self.n_rows = 0
            self.rank = 0
            self._svd = None
            # (K + alpha I)^{-1} with K = M^T M, kept by rank-one updates while H is
            # non-singular (alpha above the cut-off); None when it must be rebuilt.
            self._P = np.zeros((cap, cap)) if self.alpha0 > 0 else None
            self._frob = 0.0  # ||M||_F^2 = trace(K), bounds the largest eigenvalue

    # ---------------------------------------------------------------- derived
    @property
    def alpha(self):
        """``alpha0 + shrinkage / 2`` for RFD, ``alpha0`` for FD and full."""
        if self.method == "rfd":
            return self.alpha0 + self.shrinkage / 2.0
        return self.alpha0

    @property
    def Q(self):
        """Orthonormal basis (k x d) of the sketch's row space."""
        return self._Q[:self.rank]

    @property
    def M(self):
        """Coordinates (r x k) of the sketch rows: ``B = M Q``."""
        return self._M[:self.n_rows, :self.rank]

    @property
    def B(self):
        """The sketch rows (r x d); O(l^2 d), for inspection and tests."""
        return self.M @ self.Q

    def covariance(self):
        """Dense ``H = B^T B + alpha I`` (d x d; small d only, for tests)."""
        if self.method == "full":
            return self._H + self.alpha0 * np.eye(self.n_features)
        B = self.B
        return B.T @ B + self.alpha * np.eye(self.n_features)

    def copy(self):
        """An independent copy of the state."""
        return copy.deepcopy(self)

    # ------------------------------------------------------------------ solve
    def _nonsingular(self):
        """Whether H is non-singular above the cut-off, so that the maintained
        inverse ``(K + alpha I)^{-1}`` applies (no eigen-decomposition needed)."""
        alpha = self.alpha
        return (self._P is not None and alpha > 0
                and alpha > RCOND * (self._frob + alpha))

    def _top_eigenvalue(self):
        if self._nonsingular():
            return self._frob + self.alpha  # an upper bound is enough for the test
        return self._factor()[3]

    def _factor(self):
        """Eigen-decomposition of H restricted to span(Q): ``(S^2 + alpha, W)``."""
        if self._svd is None:
            if self.rank:
                s, wt = _small_svd(self.M)
            else:
                s, wt = np.zeros(0), np.zeros((0, 0))
            eig = s * s + self.alpha
            top = max(eig[0] if eig.size else 0.0, self.alpha)
            cutoff = RCOND * top
            keep = eig > cutoff
            inv = np.where(keep, 1.0 / np.where(keep, eig, 1.0), 0.0)
            # The complement of span(Q) has eigenvalue alpha.
            inv_alpha = 1.0 / self.alpha if (self.alpha > cutoff and self.alpha > 0
                                             and self.rank < self.n_features) else 0.0
            self._svd = (wt, inv, inv_alpha, top)
        return self._svd

    def _solve_row(self, row, qx):
        """``(H^+ x, x_perp)`` for a row with ``qx = Q x``; ``x_perp`` is the part
        of x outside the range of H (None when H is non-singular there)."""
        if self.method == "full":
            return self._full_solve(row.to_dense(self.n_features))
        Q = self.Q
        out_of_span = row.to_dense(self.n_features)
        if self._nonsingular():
            # Woodbury: H^{-1} v = Q^T (K + alpha I)^{-1} Q v + (v - Q^T Q v) / alpha,
            # both products with Q^T in one pass over Q.
            k = self.rank
            both = Q.T @ np.column_stack([self._P[:k, :k] @ qx, qx])
            out_of_span -= both[:, 1]
            out_of_span *= 1.0 / self.alpha
            out_of_span += both[:, 0]
            return out_of_span, None
        if self.rank:
            out_of_span -= Q.T @ qx
        wt, inv, inv_alpha, _ = self._factor()
        inside = Q.T @ (wt.T @ (inv * (wt @ qx)))
        if inv_alpha > 0:
            return inside + inv_alpha * out_of_span, None
        # Singular H: directions of span(Q) dropped by the cut-off and the
        # complement of span(Q) form the null space.
        dropped = inv == 0
        if dropped.any():
            out_of_span += Q.T @ (wt[dropped].T @ (wt[dropped] @ qx))
        return inside, out_of_span

    def solve(self, v):
        """Apply ``H^+`` to a dense vector ``v`` (O(l d)).

        Examples
        --------
        >>> import numpy as np
        >>> learner = OnlineNewton(4, 2, alpha0=1.0)
        >>> learner.solve(np.ones(4))
        array([1., 1., 1., 1.])
        """
        row = _Row(dense=np.asarray(v, dtype=np.float64))
        qx = row.left(self.Q) if self.method != "full" else None
        return self._solve_row(row, qx)[0]

    # ------------------------------------------------------------- full ONS
    def _full_solve(self, v):
        if self._inverse is not None:
            return self._inverse @ v, None
        if self._eig is None:
            eig, vecs = scipy.linalg.eigh(self._H, check_finite=False)
            top = max(eig[-1], 0.0)
            keep = eig > RCOND * top
            self._eig = (vecs[:, keep], 1.0 / eig[keep], vecs[:, ~keep], top)
        vecs, inv, null, _ = self._eig
        return vecs @ (inv * (vecs.T @ v)), null @ (null.T @ v)

    def _full_add(self, a):
        self._H += np.outer(a, a)
        if self._inverse is not None:
            # Sherman-Morrison update of (alpha0 I + sum a a^T)^{-1}: O(d^2).
            ha = self._inverse @ a
            self._inverse -= np.outer(ha, ha) / (1.0 + a @ ha)
        self._eig = None

    # ------------------------------------------------------------ the sketch
    def _append(self, a, qa):
        """Append the row ``a`` (dense, with ``qa = Q a``) to the sketch."""
        r, k = self.n_rows, self.rank
        Q = self._Q
        resid = a - Q[:k].T @ qa
        rho = float(np.sqrt(resid @ resid))
        norm_a = float(np.sqrt(a @ a))
        coef = qa
        if k and rho < 0.7 * norm_a:
            # Cancellation: a second Gram-Schmidt pass keeps Q orthonormal to
            # working precision ("twice is enough", Kahan-Parlett criterion).
            corr = Q[:k] @ resid
            resid -= Q[:k].T @ corr
            coef = qa + corr
            rho = float(np.sqrt(resid @ resid))
        self._M[r, :k] = coef
        P = self._P
        if rho > _BASIS_TOL * norm_a and k < self.n_features:
            Q[k] = resid / rho
            self._M[:r, k] = 0.0
            self._M[r, k] = rho
            if P is not None:
                # Bordering: the new direction enters K + alpha I with alpha.
                P[k, :k] = 0.0
                P[:k, k] = 0.0
                P[k, k] = 1.0 / self.alpha if self.alpha > 0 else 0.0
            k += 1
            self.rank = k
        self.n_rows = r + 1
        row = self._M[r, :k]
        self._frob += float(row @ row)
        if P is not None:
            # Sherman-Morrison: (K + a a^T + alpha I)^{-1}, O(l^2).
            pa = P[:k, :k] @ row
            P[:k, :k] -= np.outer(pa, pa / (1.0 + row @ pa))
        self._svd = None
        if self.n_rows == self.capacity:
            self._shrink()

    def _shrink(self):
        """FD shrink of the stack ``M Q`` to ``l - 1`` rows.

        This is :func:`dasketch.kernels.frequent_directions.shrink` applied to a
        stack held in an orthonormal basis: its SVD is the SVD of the small
        coordinate matrix ``M`` (r x k), taken directly rather than from a Gram
        matrix so that the rotated basis stays orthonormal to machine precision.
        """
        l = self.sketch_size
        s, wt = _small_svd(self.M)
        sq = s * s
        delta = float(sq[l - 1]) if sq.size >= l else 0.0
        lead = sq[:l - 1] - delta
        keep = np.flatnonzero(lead > 0)
        k = keep.size
        newQ = wt[keep] @ self.Q
        self._Q[:k] = newQ
        self._M[:] = 0.0
        self._M[np.arange(k), np.arange(k)] = np.sqrt(lead[keep])
        self.rank = self.n_rows = k
        self.shrinkage += delta
        self.n_shrinks += 1
        self._svd = None
        self._frob = float(lead[keep].sum())
        alpha = self.alpha
        if alpha > 0:
            # K is diagonal right after a shrink: rebuild its inverse exactly.
            if self._P is None:
                self._P = np.zeros((self.capacity, self.capacity))
            self._P[:] = 0.0
            self._P[np.arange(k), np.arange(k)] = 1.0 / (lead[keep] + alpha)
        else:
            self._P = None

    # ------------------------------------------------------------------ step
    def step(self, row, y):
        """One round of the online Newton step on example ``(row, y)``.

        Parameters
        ----------
        row : _Row
        y : float
            Target (in {-1, +1} for the classification losses).

        Returns
        -------
        z : float
            The prediction ``w_t^T x_t`` made before seeing ``y``.
        loss : float
        """
        full = self.method == "full"
        qx = None if full else row.left(self.Q)
        u = self.u
        zu = row.dot(u)
        excess = abs(zu) - self.prediction_bound
        w = u
        if excess > 0:
            hx, perp = self._solve_row(row, qx)
            denom = row.dot(hx)
            if perp is not None and denom <= RCOND * row.norm_sq() * (
                    self._eig[3] if full else self._top_eigenvalue()):
                hx = perp
                denom = row.dot(hx)
            if denom > 0:
                w = u - (np.copysign(excess, zu) / denom) * hx
        # The projected prediction is exactly +-prediction_bound; using that value (not the
        # rounded w^T x) keeps the gradient exactly 0 where the loss is flat there.
        z = row.dot(w) if w is u else float(np.copysign(self.prediction_bound, zu))
        value, slope = loss_derivative(self.loss, z, y)
        self.t += 1
        if slope != 0.0:
            scale = np.sqrt(self.mu + self.eta / self.t)
            g = row.to_dense(self.n_features) * slope
            a = scale * g
            if not np.isfinite(a @ a):
                raise DivergenceError(
                    f"the gradient overflowed at example {self.t} (prediction {z:.3g}, "
                    f"loss derivative {slope:.3g}); rescale the features")
            if full:
                self._full_add(a)
                step, _ = self._full_solve(g)
            else:
                self._append(a, (scale * slope) * qx)
                qg = slope * row.left(self.Q)
                step, _ = self._solve_row(_Row(dense=g), qg)
            self.u = w - step
        elif w is not u:
            self.u = w.copy()
        self.w = w
        return z, value

    def check_finite(self):
        """Raise :class:`DivergenceError` if the iterate is non-finite or exploded."""
        norm = float(np.sqrt(self.u @ self.u))
        if not np.isfinite(norm) or norm > DIVERGENCE_NORM:
            raise DivergenceError(
                f"the iterates diverged at example {self.t} (||u|| = {norm:.3g}); the "
                f"step H^+ g is too large for this data: increase eta (now {self.eta}), "
                f"mu (now {self.mu}) or alpha0 (now {self.alpha0})")

    def fit_rows(self, X, y, *, callback=None):
        """Run :meth:`step` over the rows of ``X`` in order.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n, d)
        y : ndarray of shape (n,)
        callback : callable, optional
            Called with the number of rows processed, every 1024 rows.

        Returns
        -------
        z : ndarray of shape (n,)
            Predictions made before each update (the online predictions).
        losses : ndarray of shape (n,)

        Raises
        ------
        DivergenceError
            When the iterates diverge; checked after every example.
        """
        n = X.shape[0]
        z = np.empty(n)
        losses = np.empty(n)
        y = np.asarray(y, dtype=np.float64)
        sparse = scipy.sparse.issparse(X)
        if sparse:
            X = scipy.sparse.csr_matrix(X)
            indptr, indices = X.indptr, X.indices
            data = X.data.astype(np.float64, copy=False)
        else:
            X = np.asarray(X)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for i in range(n):
                if sparse:
                    lo, hi = indptr[i], indptr[i + 1]
                    row = _Row(indices=indices[lo:hi], values=data[lo:hi])
                else:
                    row = _Row(dense=np.asarray(X[i], dtype=np.float64))
                z[i], losses[i] = self.step(row, y[i])
                self.check_finite()
                if callback is not None and (i + 1) % 1024 == 0:
                    callback(1024)
        if callback is not None and n % 1024:
            callback(n % 1024)
        return z, losses
