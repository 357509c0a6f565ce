r"""The projected problem and Algorithms 1 and 2 of Zhang, Mahdavi, Jin, Yang, Zhu,
"Recovering the Optimal Solution by Dual Random Projection", COLT 2013.

The projected problem of round t is

.. math:: \min_{z, b} \frac{\lambda}{2} \|z + a\|^2
          + \sum_i s_i \ell(\hat x_i^T z + c_i + b, y_i)

with ``a = R^T w / sqrt(m)`` and ``c = X w`` for the current recovered ``w`` (both
zero in round 1, Algorithm 1), ``s`` the sample weights. Its dual variables
``alpha_i = s_i l'(...)`` give back
``w = -(1/lambda) X^T alpha`` (one pass over X). Every evaluation of the projected
problem is a tree-reduced pass over the persisted ``X_hat``, never over X.
"""

from __future__ import annotations

import warnings
from functools import partial

import numpy as np
import scipy.linalg

from dasketch._blocks import add, chunk_blocks, compute, like, map_reduce, to_host
from dasketch.linear_model.dual_projection.losses import loss_curvature, loss_derivative, loss_value
from dasketch.linear_model.dual_projection.passes import (
    _times,
    _weighted_grams,
    _with_ones,
    recovery_pass,
)

SOLVER_TOL = 1e-11
MAX_SOLVER_ITER = 100


def _projected_terms(xhat, start, stop, y, s, c=None, *, z, b, loss, smoothing, hessian):
    """Packed ``[sum s l, X_hat^T s l', sum s l', vec([X_hat 1]^T diag(s l'') [X_hat 1])]``
    of one chunk at the projected margins ``t = X_hat z + c + b``."""
    t = _times(xhat, z) + b
    if c is not None:
        t += c.reshape(-1)
    y, s = y.reshape(-1), s.reshape(-1)
    dl = s * loss_derivative(t, y, loss, smoothing)
    parts = [[s @ loss_value(t, y, loss, smoothing)], to_host(xhat.T @ like(xhat, dl)),
             [dl.sum()]]
    if hessian:
        curvature = s * loss_curvature(t, y, loss, smoothing)
        parts.append(_weighted_grams(curvature[:, None], _with_ones(xhat)))
    return np.concatenate([np.asarray(p, dtype=np.float64).ravel() for p in parts])


class ProjectedProblem:
    """One target's projected problem over the persisted ``xhat`` (n x m) and
    ``y`` (n x 1) and weights ``s`` (n x 1), with margins ``c`` (n x 1 Dask array or
    None) and shift ``a``."""

    def __init__(self, xhat, y, s, c, a, *, lam, loss, smoothing, fit_intercept,
                 split_every, client, offsets=None):
        self.xhat_blocks = chunk_blocks(xhat, offsets)
        self.aligned = (y, s) if c is None else (y, s, c)
        self.a, self.m = a, a.size
        self.lam, self.loss, self.smoothing = lam, loss, smoothing
        self.fit_intercept = fit_intercept
        self.split_every, self.client = split_every, client
        self.cache = {}

    def _split(self, v):
        return v[:self.m], (v[self.m] if self.fit_intercept else 0.0)

    def terms(self, v, hessian):
        key = (v.tobytes(), hessian)
        if key not in self.cache:
            z, b = self._split(v)
            func = partial(_projected_terms, z=z, b=b, loss=self.loss,
                           smoothing=self.smoothing, hessian=hessian)
            (packed,) = compute(map_reduce(self.xhat_blocks, func, add, *self.aligned,
                                           split_every=self.split_every), client=self.client)
            self.cache = {key: packed}
        return self.cache[key]

    def value_and_gradient(self, v, hessian=False):
        m = self.m
        packed = self.terms(v, hessian)
        z, _ = self._split(v)
        shift = z + self.a
        f = 0.5 * self.lam * shift @ shift + packed[0]
        g = self.lam * shift + packed[1:m + 1]
        if self.fit_intercept:
            g = np.append(g, packed[m + 1])
        return f, g

    def hessian(self, v):
        m = self.m
        H = self.terms(v, True)[m + 2:].reshape(m + 1, m + 1).copy()
        if not self.fit_intercept:
            H = H[:m, :m].copy()
        H[np.arange(m), np.arange(m)] += self.lam
        return H

    def solve(self, v):
        """Damped Newton method with Armijo backtracking from ``v``.

        Written out because scipy's Newton methods do not fit: ``trust-exact``
        refactorises the Hessian several times per step (more costly than the
        distributed evaluation here) and ``Newton-CG`` asks for objective values
        at points where the Hessian is not needed. Here one pass returns value,
        gradient and Hessian, and steps are taken in full once the Newton
        decrement is at the objective's rounding level. One step is exact for the
        squared loss.
        """
        m = self.m
        packed = self.terms(v, False)
        z, _ = self._split(v)
        scale = max(self.lam * np.linalg.norm(z + self.a) + np.linalg.norm(packed[1:m + 1])
                    + abs(packed[m + 1]), np.finfo(float).tiny)
        f, g = self.value_and_gradient(v, hessian=True)
        for _ in range(1 if self.loss == "squared" else MAX_SOLVER_ITER):
            if np.linalg.norm(g) <= SOLVER_TOL * scale:
                break
            H = self.hessian(v)
            try:
                # an ill-conditioned H (lambda near 0) still gives a usable step;
                # the fit's certificate, not scipy's warning, says how good it is
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                    step = scipy.linalg.solve(H, g, assume_a="pos")
            except np.linalg.LinAlgError:
                # Flat in the intercept (no sample with positive curvature, as can
                # happen with the smoothed hinge): the least-squares step.
                step = scipy.linalg.lstsq(H, g)[0]
            decrement = float(g @ step)
            t = 1.0
            while True:
                f_new, g_new = self.value_and_gradient(v - t * step, hessian=True)
                rounding = decrement <= 1e-8 * max(abs(f), 1.0)
                if (self.loss == "squared" or rounding or t < 1e-10
                        or f_new <= f - 1e-4 * t * decrement):
                    break
                t *= 0.5
            v, f, g = v - t * step, f_new, g_new
        return v


def _projected_problem(full, xhat, k, margins, shift):
    return ProjectedProblem(xhat, full.yd[:, [k]], full.sd, margins, shift, lam=full.lam[k],
                            loss=full.loss, smoothing=full.smoothing,
                            fit_intercept=full.fit_intercept,
                            split_every=full.options["split_every"],
                            client=full.options["client"], offsets=full.blocks.offsets)


def _start(m, b0, fit_intercept):
    return np.append(np.zeros(m), b0) if fit_intercept else np.zeros(m)


def algorithm_one(full, xhat, b0, products=None, column_sums=None, target_products=None):
    """Algorithm 1 for every target: the projected solutions ``Z`` (m x K) and
    intercepts, and the recovered ``W = -(1/lambda) X^T alpha`` (d x K).

    For the squared loss ``X^T alpha = X^T X_hat z + b X^T 1 - X^T y`` comes from
    the projection pass (``products``, ``column_sums``, ``target_products``), so
    no further pass over X is needed; otherwise one recovery pass serves all
    targets."""
    m, K = xhat.shape[1], b0.size
    Z, B = np.empty((m, K)), np.zeros(K)
    for k in range(K):
        v = _projected_problem(full, xhat, k, None, np.zeros(m)).solve(
            _start(m, b0[k], full.fit_intercept))
        Z[:, k] = v[:m]
        B[k] = v[m] if full.fit_intercept else 0.0
    if full.loss == "squared" and products is not None:
        xt_alpha = products @ Z + np.outer(column_sums, B) - target_products
    else:
        full.passes += 1
        xt_alpha = recovery_pass(full.blocks, xhat, full.yd, full.sd, Z, B, loss=full.loss,
                                 smoothing=full.smoothing, **_pass_options(full))
    return Z, B, -xt_alpha / full.lam


def _pass_options(full):
    return {"split_every": full.options["split_every"], "client": full.options["client"]}


def paper_rounds(full, xhat, k, b0, reference, tol, max_iter, history, record):
    """Algorithm 2 for target ``k``: ``max_iter`` rounds of projected solve and
    recovery around the current ``w``, with the projection computed once.

    Each round costs one recovery pass and one pass that evaluates the full
    objective and gradient (the certificate) and keeps the margins ``X w`` for
    the next round. When the objective increases the iteration does not
    contract (``n_components`` too small for the rank of X): it stops and the
    round with the lowest objective is returned. Rounds stop when the
    coefficients are certified to ``tol`` (:meth:`FullProblem.done`).

    Returns ``(v, certificate, objective, error_bound, rounds, best_round, diverged,
    (z, b))``, ``z, b`` being the first round's projected solution.
    """
    m = xhat.shape[1]
    shift, margins, W = np.zeros(m), None, None
    v = _start(m, b0, full.fit_intercept)
    rounds = []
    diverged = False
    for t in range(1, max_iter + 1):
        v = _projected_problem(full, xhat, k, margins, shift).solve(
            np.append(np.zeros(m), v[m:]))
        z, b = v[:m], np.array([v[m] if full.fit_intercept else 0.0])
        if t == 1:
            first = (z, float(b[0]))
        full.passes += 1
        W = -recovery_pass(full.blocks, xhat, full.yd[:, [k]], full.sd, z[:, None], b, W=W,
                           loss=full.loss, smoothing=full.smoothing,
                           **_pass_options(full)) / full.lam[k]
        # R^T w / sqrt(m) = -(1/lambda) X_hat^T alpha = z + shift at the projected optimum.
        shift = z + shift
        V = full.stack(W, b)
        f, G, _, *kept = full.evaluate(V, [k], curvature_gram=False,
                                       keep_margins=t < max_iter)
        cert = float(np.linalg.norm(G) / reference)
        history.append(record(t, full.passes, np.array([cert]), f))
        bound = float(full.error_bound(V, G, f, [k])[0])
        rounds.append((V[:, 0], cert, float(f[0]), bound))
        if full.done(V, G, f, tol, [k])[0]:
            break
        if t >= 2 and rounds[-1][2] > rounds[-2][2]:
            diverged = True
            break
        margins = kept[0] if kept else None
    best = int(np.argmin([r[2] for r in rounds])) if diverged else len(rounds) - 1
    V, cert, f, bound = rounds[best]
    return V, cert, f, bound, len(rounds), best + 1, diverged, first
