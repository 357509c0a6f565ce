"""Sketched online Newton step (RFD-SON, FD-SON, full-matrix ONS).

Single-machine kernel (numpy, scipy, numba; never dask). :class:`OnlineNewton`
holds the learner's state and runs the compiled per-example loop of
:mod:`dasketch.kernels._online_newton_loop` over blocks of rows: for each example,
project the previous unconstrained iterate onto ``K_t = {w : |w^T x_t| <= C}``
in the ``H``-norm, predict, take the gradient ``g`` of the loss, append
``sqrt(mu_t + eta_t) g`` to a (Robust) Frequent Directions sketch ``B`` and step
``u = w - H^+ g`` with ``H = B^T B + alpha I``.

The sketch is held in an orthonormal basis ``Q`` (k x d) of its row space with
the Gram matrix ``K`` (k x k) of its rows in that basis (``B^T B = Q^T K Q``,
``k <= 2 l``). Every solve, projection and sketch update is a product with
``Q`` or ``Q^T`` (O(l d), O(l nnz) for what touches only the row) plus work on
``k x k`` matrices; no d x d matrix is formed (except by ``method="full"``,
the O(d^2) baseline, whose basis grows to d).

References
----------
.. [1] L. Luo, C. Chen, Z. Zhang, W.-J. Li, T. Zhang, "Robust Frequent Directions
   with application in online learning", JMLR 20(45), 2019: Algorithm 3 (RFD-SON)
   and Algorithm 6 (its fast variant, Appendix A).
.. [2] H. Luo, A. Agarwal, N. Cesa-Bianchi, J. Langford, "Efficient second order
   online learning by sketching", NeurIPS 2016 (FD-SON; the closed-form
   projection onto ``K_t``).
.. [3] E. Hazan, A. Agarwal, S. Kale, "Logarithmic regret algorithms for online
   convex optimization", Machine Learning 69, 2007 (the online Newton step).
"""

from __future__ import annotations

import copy
import numbers

import numpy as np
import scipy.sparse

from dasketch.kernels import _online_newton_loop as loop
from dasketch.kernels._online_newton_loop import DIVERGENCE_NORM, RCOND
from dasketch.kernels.deprecation import renamed_constants

__all__ = ["DIVERGENCE_NORM", "DivergenceError", "ONLINE_LOSSES", "ONLINE_METHODS",
           "ONLINE_UPDATES", "OnlineNewton", "RCOND", "loss_derivative"]

ONLINE_METHODS = ("rfd", "fd", "full")
ONLINE_LOSSES = ("squared", "logistic", "hinge")
ONLINE_UPDATES = ("buffered", "per_step")
__getattr__ = renamed_constants(__name__, {"METHODS": "ONLINE_METHODS", "LOSSES": "ONLINE_LOSSES",
                                           "UPDATES": "ONLINE_UPDATES"}, globals())
# Rows handed to the compiled loop per call when progress is reported.
_CALLBACK_ROWS = 1024


class DivergenceError(ArithmeticError):
    """The iterates of an online learner became non-finite or exploded."""


def _check_nonnegative(value, name):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_online_parameters(n_features, sketch_size, method, alpha0, loss, prediction_bound,
                            eta, mu, update):
    """Validate the parameters of :class:`OnlineNewton`.

    Raises
    ------
    TypeError, ValueError
        Naming the offending argument and what was expected.
    """
    if method not in ONLINE_METHODS:
        raise ValueError(f"method must be one of {ONLINE_METHODS}, got {method!r}")
    if loss not in ONLINE_LOSSES:
        raise ValueError(f"loss must be one of {ONLINE_LOSSES}, got {loss!r}")
    if update not in ONLINE_UPDATES:
        raise ValueError(f"update must be one of {ONLINE_UPDATES}, got {update!r}")
    if method != "full":
        if isinstance(sketch_size, (bool, np.bool_)) or not isinstance(
                sketch_size, numbers.Integral):
            raise TypeError(f"sketch_size must be an integer in [1, n_features], got "
                            f"{sketch_size!r}")
        if not 1 <= sketch_size <= n_features:
            raise ValueError(f"sketch_size must be an integer in [1, n_features={n_features}]"
                             f", got {sketch_size}")
    _check_nonnegative(alpha0, "alpha0")
    if _check_nonnegative(prediction_bound, "prediction_bound") == 0:
        raise ValueError("prediction_bound must be > 0 (the constraint is |w^T x| <= "
                         "prediction_bound)")
    _check_nonnegative(eta, "eta")
    _check_nonnegative(mu, "mu")
    if eta + mu <= 0:
        raise ValueError("eta and mu cannot both be 0 (the sketched rows are "
                         "sqrt(mu + eta / t) * gradient)")


def loss_derivative(loss, z, y):
    """Loss ``l(z, y)`` and its derivative in ``z`` at the prediction ``z``.

    ``"squared"``: ``(z - y)^2``; ``"logistic"``: ``log(1 + exp(-y z))``;
    ``"hinge"``: ``max(0, 1 - y z)`` (subgradient 0 at the kink). Labels of the
    classification losses are in {-1, +1}. The compiled loop evaluates the same
    formulas.

    Examples
    --------
    >>> loss_derivative("squared", 0.5, 1.0)
    (0.25, -1.0)
    """
    value, slope = loop.loss_and_slope(loop.LOSS_CODES[loss], float(z), float(y))
    return float(value), float(slope)


class OnlineNewton:
    """Mutable state of a sketched online Newton step learner.

    Each example is one round of the RFD paper's Algorithm 3 ([1]_; FD-SON and
    full-matrix ONS of [2]_, [3]_ with ``method="fd"`` and ``"full"``). Round
    ``t``, with ``u`` the unconstrained iterate of round ``t - 1`` and ``H`` its
    matrix:

    1. ``w = argmin_{|w^T x_t| <= C} ||w - u||_H = u - gamma H^+ x_t`` with
       ``gamma = tau_C(u^T x_t) / (x_t^T H^+ x_t)`` and
       ``tau_C(z) = sign(z) max(|z| - C, 0)`` (closed form, [1]_ Appendix A; when
       ``x_t`` lies outside the range of a singular ``H`` the step is taken along
       the part of ``x_t`` outside the range, where the H-seminorm is zero);
    2. predict ``z = w^T x_t`` and suffer ``l(z, y_t)``; ``g = l'(z, y_t) x_t``;
    3. append ``sqrt(mu + eta / t) g`` to the sketch; with ``update="per_step"``
       shrink to ``l - 1`` rows whenever the sketch has ``l`` rows (Algorithm 3),
       with ``update="buffered"`` only when it has ``2 l`` rows (the ``2 l`` buffer
       of Algorithm 6, O(l d) amortised per step); a shrink subtracts
       ``delta = sigma_l^2`` and RFD adds ``delta / 2`` to ``alpha``;
    4. ``u = w - H^+ g`` with ``H = B^T B + alpha I`` by the Woodbury identity.

    **alpha and the warm-up.** RFD sets ``alpha = alpha0 + shrinkage / 2`` (FD
    and full ONS ``alpha0``). With the hyperparameter-free ``alpha0 = 0`` this is
    0 until the first shrink, and small for a while after it, so the first steps
    divide by tiny eigenvalues: one step can move a prediction by far more than
    the width ``2 C`` of the constraint set, and on sparse data the weights of
    rarely seen features keep such steps for a long time. With
    ``alpha_floor=True`` (the default) alpha is kept above a floor derived from
    the data seen so far::

        alpha_t = max(alpha0 + shrinkage_t / 2, G_t R_t / (2 C)),
        G_t = max_{s<=t} ||g_s||,  R_t = max_{s<=t} ||x_s||,

    where ``R_t`` counts every row seen, with a gradient or not. What it
    guarantees: no Newton step ``H_t^{-1} g_t`` (``||H_t^{-1}|| <= 1 / alpha_t``)
    moves the prediction of any row seen so far by more than ``2 C``, because
    ``|x_s^T H_t^{-1} g_t| <= R_t G_t / alpha_t``. It is the online Newton step's
    initial regulariser of [3]_ (``epsilon = 1 / (beta^2 D^2)`` with D the width of
    the constraint set along the data, expressed in the units of the sketched
    gradients). The floor is non-decreasing, scales with the data as alpha must
    (``x -> s x`` gives ``alpha -> s^2 alpha``), needs no parameter, and stops
    mattering once the shrinkage has grown past it.

    What it does not guarantee: the projection onto ``K_t`` moves the prediction
    of ``x_t`` by exactly its excess ``|u^T x_t| - C``, and that of another row
    ``x`` by at most the excess times ``sqrt(x^T H^{-1} x / x_t^T H^{-1} x_t)``,
    which the floor does not bound (a row along a direction of low curvature can
    move by more than ``2 C``). And no regret bound is claimed with the floor:
    [1]_ (Theorem 4) analyses a fixed ``alpha0``, and a regulariser that grows
    during the run adds ``sum_t (alpha_t - alpha_{t-1}) ||w_t - w*||^2`` to the
    regret, which ``K_t`` (a constraint on margins, not on ``||w||``) does not
    bound. ``alpha_floor=False`` runs Algorithms 3 and 6 as written, the setting of
    the paper's regret bound.

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
        ``C`` of the constraint ``|w^T x_t| <= C``.
    eta, mu : float
        Sketched rows are ``sqrt(mu + eta / t) g_t`` (``mu_t = mu`` and
        ``eta_t = eta / t`` in [1]_).
    update : {"buffered", "per_step"}
    alpha_floor : bool
        Keep alpha above the data-derived floor described above.

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
                 loss="squared", prediction_bound=1.0, eta=1.0, mu=0.0, update="buffered",
                 alpha_floor=True):
        check_online_parameters(n_features, sketch_size, method, alpha0, loss,
                                prediction_bound, eta, mu, update)
        d = int(n_features)
        self.n_features = d
        self.method = method
        self.loss = loss
        self.update = update
        self.alpha_floor = bool(alpha_floor)
        if method == "full":
            self.sketch_size, self.capacity, kmax = d, -1, d  # never shrinks
        else:
            self.sketch_size = int(sketch_size)
            # Rows held before a shrink: l (Algorithm 3) or 2 l (Algorithm 6).
            self.capacity = self.sketch_size * (1 if update == "per_step" else 2)
            kmax = min(self.capacity, d)
        self._v = np.zeros(d)
        self._c = np.zeros(kmax)
        self._Q = np.zeros((kmax, d))
        self._K = np.zeros((kmax, kmax))
        self._P = np.zeros((kmax, kmax))
        self._wt = np.zeros((kmax, kmax))
        self._inv = np.zeros(kmax)
        self._fs = np.zeros(loop.N_FLOAT_STATE)
        self._is = np.zeros(loop.N_INT_STATE, dtype=np.int64)
        self._fp = np.array([alpha0, prediction_bound, eta, mu], dtype=np.float64)
        self._ip = np.array([self.sketch_size, self.capacity, loop.LOSS_CODES[loss],
                             loop.METHOD_CODES[method], int(self.alpha_floor)],
                            dtype=np.int64)
        self._is[loop.HAS_INVERSE] = int(alpha0 > 0)

    # ---------------------------------------------------------------- derived
    alpha0 = property(lambda self: float(self._fp[loop.ALPHA0]))
    prediction_bound = property(lambda self: float(self._fp[loop.BOUND]))
    eta = property(lambda self: float(self._fp[loop.ETA]))
    mu = property(lambda self: float(self._fp[loop.MU]))
    t = property(lambda self: int(self._fs[loop.T]), doc="Examples processed.")
    shrinkage = property(lambda self: float(self._fs[loop.SHRINKAGE]),
                         doc="Sum of every delta subtracted by a shrink.")
    floor = property(lambda self: float(self._fs[loop.FLOOR]),
                     doc="The data-derived floor ``G R / (2 C)`` of alpha.")
    n_shrinks = property(lambda self: int(self._is[loop.N_SHRINKS]))
    n_rows = property(lambda self: int(self._is[loop.N_ROWS]),
                      doc="Rows appended since the last shrink (after it: its rank).")
    rank = property(lambda self: int(self._is[loop.RANK]))

    @property
    def alpha(self):
        """Current ``alpha`` of ``H = B^T B + alpha I``."""
        return float(loop.current_alpha(self._fs, self._fp, self._ip))

    @property
    def u(self):
        """The unconstrained iterate (d,), ``v + Q^T c``."""
        k = self.rank
        return self._v + self._c[:k] @ self._Q[:k]

    @property
    def Q(self):
        """Orthonormal basis (k x d) of the sketch's row space."""
        return self._Q[:self.rank]

    @property
    def B(self):
        """Sketch rows (k x d) with ``B^T B`` the sketch; O(k^2 d), for inspection."""
        k = self.rank
        eig, vecs = np.linalg.eigh(self._K[:k, :k])
        return (np.sqrt(np.maximum(eig, 0.0))[:, None] * vecs.T) @ self.Q

    def covariance(self):
        """Dense ``H = B^T B + alpha I`` (d x d; small d only, for tests)."""
        B = self.B
        return B.T @ B + self.alpha * np.eye(self.n_features)

    def copy(self):
        """An independent copy of the state."""
        return copy.deepcopy(self)

    def solve(self, v):
        """Apply ``H^+`` to a dense vector ``v`` (O(k d)).

        Examples
        --------
        >>> import numpy as np
        >>> learner = OnlineNewton(4, 2, alpha0=1.0)
        >>> learner.solve(np.ones(4))
        array([1., 1., 1., 1.])
        """
        v = np.asarray(v, dtype=np.float64)
        k = self.rank
        kmax = self._c.size
        qx = np.zeros(kmax + 1)
        qx[:k] = self.Q @ v
        coef, null_coef, work = np.zeros(kmax + 1), np.zeros(kmax + 1), np.zeros(kmax + 1)
        beta, _, _ = loop.solve(self._K, self._P, self._wt, self._inv, self._fs, self._is,
                                self.alpha, qx, self.n_features, coef, null_coef, work)
        return coef[:k] @ self._Q[:k] + beta * v

    # ------------------------------------------------------------------ rows
    def fit_rows(self, X, y, *, weights=None, callback=None):
        """Run the online Newton step over the rows of ``X`` in order.

        Parameters
        ----------
        X : ndarray or scipy.sparse matrix of shape (n, d)
            Sparse rows stay sparse (CSR); float32 is promoted row by row.
        y : ndarray of shape (n,)
        weights : ndarray of shape (n,), optional
            Finite weights ``>= 0`` of the examples (default 1). Example ``t``'s
            loss is ``weights[t] * l(z, y_t)``, so its gradient ``g_t`` and its
            sketched row ``sqrt(mu + eta / t) g_t`` are scaled by ``weights[t]``
            (as in scikit-learn's SGD estimators). An example of weight 0 is
            skipped: no projection, no step, and it does not count in ``t`` nor in
            the floor of alpha, exactly as if it were absent. A weight is not a
            repetition of the example: an online step depends on the order of
            the examples and on the iterate each one meets.
        callback : callable, optional
            Called with the number of rows processed, every 1024 rows.

        Returns
        -------
        z : ndarray of shape (n,)
            Predictions made before each update (the online predictions).
        losses : ndarray of shape (n,)
            Weighted losses ``weights[t] * l(z_t, y_t)``.

        Raises
        ------
        ValueError
            When ``weights`` is not ``n`` finite values ``>= 0``.
        DivergenceError
            When the gradient overflows or the iterates diverge (the state is then
            invalid: keep a :meth:`copy` to fall back on).
        """
        n = X.shape[0]
        z = np.empty(n)
        losses = np.empty(n)
        # Writable float64 copies where needed: one compiled signature serves all input.
        y = np.require(y, dtype=np.float64, requirements=("C", "W"))
        weights = np.ones(n) if weights is None else np.require(
            weights, dtype=np.float64, requirements=("C", "W"))
        if weights.shape != (n,) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"weights must be {n} finite values >= 0 (one per row of X), "
                             f"got shape {weights.shape}")
        sparse = scipy.sparse.issparse(X)
        if sparse:
            X = scipy.sparse.csr_matrix(X)
            indptr = X.indptr.astype(np.int64)
            indices = X.indices.astype(np.int64)
            data = X.data.astype(np.float64)
            dense = np.zeros((0, 0))
        else:
            dense = np.require(X, dtype=np.float64, requirements=("C", "W"))
            indptr = indices = np.zeros(1, dtype=np.int64)
            data = np.zeros(0)
        step = _CALLBACK_ROWS if callback is not None else max(n, 1)
        for start in range(0, n, step):
            stop = min(start + step, n)
            status, row = loop.run_rows(
                indptr[start:stop + 1] if sparse else indptr, indices, data,
                dense if sparse else dense[start:stop], sparse, y[start:stop],
                weights[start:stop], self._v, self._c, self._Q, self._K, self._P, self._wt,
                self._inv, self._fs, self._is, self._fp, self._ip, z[start:stop],
                losses[start:stop])
            if status != loop.OK:
                self._raise(status, start + row)
            if callback is not None:
                callback(stop - start)
        return z, losses

    def _raise(self, status, row):
        t = self.t
        if status == loop.GRADIENT_OVERFLOW:
            raise DivergenceError(f"the gradient overflowed at example {t} (row {row} of "
                                  f"this block); rescale the features")
        norm = float(np.linalg.norm(self.u))
        raise DivergenceError(
            f"the iterates diverged at example {t} (||u|| = {norm:.3g}); the step "
            f"H^+ g is too large for this data: increase eta (now {self.eta}), mu (now "
            f"{self.mu}) or alpha0 (now {self.alpha0})")
