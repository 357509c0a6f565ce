"""The certificate of the multinomial fit: a bound on ``||W - W*||_F`` from the
gradient, with the rounding of its evaluation (:mod:`.rounding`)."""

from __future__ import annotations

import numpy as np
import scipy.linalg

from dasketch.linear_model.dual_projection.rounding import (
    dual_norm,
    evaluated_rounding,
    margin_rounding,
    norm_rounding,
    softmax_rounding,
)

# Lipschitz constant of the softmax in the 2-norm: the largest eigenvalue of
# diag(p) - p p^T, the covariance of a one-hot vector, is at most 1/2.
SOFTMAX_LIPSCHITZ = 0.5


def bound_parts(problem, V, G, curvature, coupling, reference, f=None):
    r"""A bound on ``||W - W*||_F`` from the gradient ``G`` at ``V``: its
    gradient's and its rounding's parts.

    The profiled objective ``phi(W) = min_b F(W, b)`` is ``lambda``-strongly
    convex, so ``||W - W*||_F <= ||grad phi(W)||_F / lambda``, with
    ``grad phi(W) = g_W + X^T U``, ``U_i = s_i (p_i(t_i + delta) - p_i(t_i))``
    and ``delta = b*(W) - b`` (in the intercepts summing to 0). The softmax is
    1/2-Lipschitz, so ``||X^T U||_F <= max_i ||x_i|| sum_i s_i ||delta|| / 2``.
    ``||delta||`` is bounded from the intercept gradient ``g_b``: along the
    segment the intercept Hessian ``H_b = sum_i s_i (diag(p_i) - p_i p_i^T)`` is
    at least ``exp(-sqrt(2) tau ||delta||)`` times its value at ``b`` (every
    ``p_ik`` changes by at most the factor ``exp(range of tau delta)``, the
    generalised self-concordance of Bach, Electron. J. Stat. 2010), so with
    ``mu`` the smallest eigenvalue of ``H_b`` across the classes,
    ``||g_b|| >= mu (1 - exp(-sqrt(2) ||delta||)) / sqrt(2)``, i.e.
    ``||delta|| <= -log(1 - sqrt(2) ||g_b|| / mu) / sqrt(2)`` (infinite when
    ``sqrt(2) ||g_b|| >= mu``). The rounding of the computed gradient is
    bounded as in :meth:`.solvers.FullProblem.bound_parts` (:mod:`.rounding`,
    with the softmax's evaluation, :func:`.rounding.softmax_rounding`, and
    ``sum_i s_i ||p_i - y_i||^2`` bounded from the objective ``f`` when given,
    :func:`.rounding.dual_norm`) and added.

    With ``lambda = 0`` nothing is bounded: the "bound" is ``||W||_F`` times
    ``(||G|| + rounding) / reference``, as in :mod:`.unpenalised`."""
    W, b = problem.split(V)
    weight_sum, frobenius2, row_norm, (n, d) = coupling
    w_norm = float(np.linalg.norm(W))
    frobenius = np.sqrt(frobenius2)
    dual = np.sqrt(2.0 * weight_sum) if f is None else \
        dual_norm("softmax", weight_sum, f - 0.5 * problem.lam * w_norm ** 2)
    margins = margin_rounding(d, frobenius, w_norm, weight_sum, float(np.linalg.norm(b)))
    rounding, rounding_b = evaluated_rounding(
        n, frobenius, weight_sum, problem.lam, w_norm, dual,
        SOFTMAX_LIPSCHITZ * margins + softmax_rounding(G.shape[1]) * np.sqrt(weight_sum))
    gw = np.linalg.norm(G[:-1] if problem.fit_intercept else G)
    rounding += norm_rounding(G.size, gw)
    if problem.lam == 0:
        scale = max(w_norm, np.finfo(float).tiny) / reference
        gb = float(np.linalg.norm(G[-1])) if problem.fit_intercept else 0.0
        return (gw + gb) * scale, (rounding + rounding_b) * scale
    if not problem.fit_intercept:
        return gw / problem.lam, rounding / problem.lam
    K = G.shape[1]
    m1 = curvature.shape[0] // K
    H = curvature[m1 - 1::m1, m1 - 1::m1]
    basis = centring_basis(K)                # the intercepts summing to 0
    mu = float(np.linalg.eigvalsh(basis.T @ H @ basis)[0])
    gb = float(np.linalg.norm(G[-1] - G[-1].mean()))

    def shift(g):
        ratio = np.sqrt(2.0) * g / mu if mu > 0 else np.inf
        return -np.log1p(-ratio) / np.sqrt(2.0) if ratio < 1.0 else np.inf

    coupled = row_norm * weight_sum * SOFTMAX_LIPSCHITZ
    exact = coupled * shift(gb) if gb > 0 else 0.0
    rounded = coupled * shift(gb + rounding_b) - exact if np.isfinite(exact) else 0.0
    return (gw + exact) / problem.lam, (rounding + rounded) / problem.lam


def centring_basis(K):
    """An orthonormal basis (K x (K-1)) of the vectors of K entries summing to 0."""
    return scipy.linalg.null_space(np.ones((1, K)))
