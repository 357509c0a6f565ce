"""Worst-case rounding of the gradients that dual random projection certifies.

The error bounds of :meth:`.solvers.FullProblem.bound_parts` and
:func:`.multinomial.bound_parts` divide the norm of a gradient computed in
float64 by the strong convexity ``lambda``; the rounding error of that gradient
is bounded here and added. Every term is Higham's ``gamma_k = k u / (1 - k u)``,
``u = eps / 2`` (*Accuracy and Stability of Numerical Algorithms*, 2nd ed., 2002,
Lemma 3.1 and eq. (3.5): an inner product of ``k`` terms, in any order, is exact
up to ``gamma_k`` times the inner product of the absolute values), to first order
in ``u``. With ``F^2 = sum_i s_i ||x_i||^2`` (``s`` the sample weights, summing to
``W``), ``||S^(1/2) |X| |w| || <= F ||w||`` and ``|| |X|^T |S v| || <=
F ||S^(1/2) v||`` turn the elementwise bounds into the norms below; rows of
equal positive entries reach them.
"""

from __future__ import annotations

import numpy as np

from dasketch.kernels.shrink import gamma

# Roundings in the evaluation of s l'(t) from a computed margin t, relative to
# |l'(t)|, the product with the weight s included: t - y (squared); expit's exp
# (within one ulp: two), 1 + e and the division (logistic); 1 - y t and the
# division by the smoothing (smoothed hinge).
DERIVATIVE_ROUNDINGS = {"squared": 2, "logistic": 5, "smoothed_hinge": 3}


def derivative_rounding(loss):
    """Bound on ``|fl(s l'(t, y)) - s l'(t, y)|`` relative to ``|s l'(t, y)|`` for a
    float64 margin ``t``, labels ``+-1`` (any target for the squared loss) and
    ``l'`` as :func:`.losses.loss_derivative` computes it:
    ``gamma_{DERIVATIVE_ROUNDINGS[loss]}``. The exponential's error enters
    ``expit = 1 / (1 + exp(-y t))`` weighted by ``exp(-y t) / (1 + exp(-y t)) < 1``."""
    return gamma(DERIVATIVE_ROUNDINGS[loss])


def margin_rounding(d, frobenius, w_norm, weight_sum, b_norm):
    """Bound on ``||S^(1/2) (fl(t) - t)||`` for the margins ``t = X w + b``:
    ``gamma_{d+1} (F ||w|| + sqrt(W) ||b||)``.

    Each margin is an inner product of ``d`` terms and one addition, exact up to
    ``gamma_{d+1} (|x_i|^T |w| + |b|)`` (for several margins per row, as the
    classes of the softmax, ``||w||`` and ``||b||`` are the Frobenius and 2-norms).
    """
    return gamma(d + 1) * (frobenius * w_norm + np.sqrt(weight_sum) * b_norm)


def dual_norm(loss, weight_sum, loss_sum, smoothing=1.0):
    """A bound ``D`` on ``||S^(1/2) l'||`` (``(sum_i s_i ||p_i - y_i||^2)^(1/2)`` for
    the ``"softmax"``) from the weights' sum ``W`` and the loss sum ``sum_i s_i l_i``.

    Logistic: ``|l'| = 1 - exp(-l) <= 1``, so ``l'^2 <= 1 - exp(-l)``, concave in
    ``l``: ``D^2 <= W (1 - exp(-sum_i s_i l_i / W))`` (Jensen). Softmax:
    ``||p - y||^2 <= 2 (1 - p_y)^2 <= 2 (1 - exp(-l))``, twice that. Smoothed hinge
    (smoothing ``h``): ``l'^2 <= min(1, 2 l / h)``, so ``D^2 <= min(W, 2 sum_i s_i
    l_i / h)``.
    """
    loss_sum = np.maximum(loss_sum, 0.0)
    if loss == "smoothed_hinge":
        return np.sqrt(np.minimum(weight_sum, 2.0 * loss_sum / smoothing))
    factor = 2.0 if loss == "softmax" else 1.0
    return np.sqrt(factor * weight_sum * -np.expm1(-loss_sum / weight_sum))


def softmax_rounding(n_classes):
    """Bound on the 2-norm of the rounding error of ``s_i (p_i - y_i)`` per unit of
    weight, ``p_i = softmax(t_i)`` computed as ``exp(t - max t) / sum`` and ``y_i``
    one-hot: ``gamma_K + u (5/3 + ln(K - 1) / 2 + 1/2 + sqrt(2))``.

    To first order in ``u``, with ``z_k = max t - t_k``: each exponential is exact
    up to a relative ``phi_k``, ``|phi_k| <= (2 + z_k) u`` (exp within one ulp and
    the subtraction), 0 for the largest (``exp(0) = 1``); the sum of ``K`` terms up
    to ``gamma_{K-1}`` in any order and the division up to ``u`` (Higham, *Accuracy
    and Stability of Numerical Algorithms*, 2nd ed., 2002, Lemma 3.1 and section 4.2).
    So ``fl(p) - p = J phi`` plus at most ``gamma_K p`` elementwise, with the
    softmax's Jacobian ``J = diag(p) - p p^T``; ``||J phi||^2 <= max p sum_k p_k
    phi_k^2`` (the ``p``-variance of ``phi`` is at most its mean square), and the sum
    over the other classes of ``p_k (2 + z_k)^2``, concave in each ``p_k = max p
    exp(-z_k)``, is at most ``(1 - max p) (2 + ln((K - 1) max p / (1 - max p)))^2``
    (Jensen), so that ``||J phi|| <= u (1 + ln(K - 1) / 2 + max_x (x (1 - x))^(1/2)
    ln(x / (1 - x)))``, the maximum being 0.663. ``p - y`` is exact except in the
    label's entry, and there too when ``p_y >= 1/2`` (Sterbenz); otherwise it rounds
    by at most half an ulp of ``[1/2, 1)``, ``u / 2``. The weight adds ``u ||p - y||
    <= sqrt(2) u``.
    """
    u = np.finfo(np.float64).eps / 2
    return gamma(n_classes) + u * (5.0 / 3.0 + 0.5 * np.log(max(n_classes - 1, 1))
                                   + 0.5 + np.sqrt(2.0))


def evaluated_rounding(n, frobenius, weight_sum, lam, w_norm, dual, dual_error):
    """Bounds on the rounding errors of ``g_w = X^T S l' + lambda w`` and
    ``g_b = sum_i s_i l'_i`` computed by one pass at ``(w, b)``.

    ``D >= ||S^(1/2) l'||`` is ``dual`` and ``E >= ||S^(-1/2) (fl(s l') - s l')||``
    is ``dual_error`` (the margins' :func:`margin_rounding` through the Lipschitz
    constant of ``l'``, and the evaluation of ``l'``). The sum over ``n`` rows and
    the addition of ``lambda w`` (itself a product) make ``g_w`` exact up to
    ``gamma_{n+1} F D + F E + gamma_2 lambda ||w||`` and ``g_b`` up to
    ``sqrt(W) (gamma_{n-1} D + E)``.
    """
    coef = gamma(n + 1) * frobenius * dual + frobenius * dual_error + gamma(2) * lam * w_norm
    return coef, np.sqrt(weight_sum) * (gamma(max(n - 1, 0)) * dual + dual_error)


def product_rounding(n, frobenius, weight_sum, lam, w_norm, spread, margins, targets,
                     intercept):
    """Bounds on the rounding errors of the squared loss's gradient computed as
    products, ``g = [X 1]^T S [X 1] v + diag(lambda, 0) v + g(0)`` with ``g(0) =
    -[X 1]^T S y`` (as ``b0 X^T s - X^T S (b0 - y)`` with an ``intercept``).

    With ``spread = F ||w|| + sqrt(W) |b| >= ||S^(1/2) t||`` and ``targets >=
    ||S^(1/2) y||``: ``X^T (S fl(t)) + lambda w`` is exact up to ``gamma_{n+2} F
    spread`` (the weights, the sum, the addition) plus ``F`` times the
    :func:`margin_rounding` ``margins`` plus ``gamma_2 lambda ||w||``; ``g(0)`` up
    to ``gamma_{n+3} F targets``, twice that with an intercept (``sqrt(W) |b0|``
    and ``||S^(1/2) (b0 - y)||`` are at most ``||S^(1/2) y||``). The intercept's
    gradient: ``sqrt(W) (gamma_{n+1} (spread + targets) + margins)``. The final
    addition is relative to the result (:func:`norm_rounding`). These also cover
    the gradient computed from the residual, ``X^T S (t - y)`` (the paper's solver).
    Conjugate gradients update ``g`` with the step, not from ``v`` itself; the
    update ``v + eta p``, rounded by ``u |v|``, moves the gradient by at most
    ``u (F_a spread + lambda ||w||)`` (``F_a^2 = F^2 + W`` with an intercept),
    added; the step's own rounding is of the order of the bound times this term.
    """
    moved = gamma(1) * (np.sqrt(frobenius ** 2 + (weight_sum if intercept else 0.0)) * spread
                        + lam * w_norm)
    coef = moved + (gamma(n + 2) * frobenius * spread + frobenius * margins
            + (2.0 if intercept else 1.0) * gamma(n + 3) * frobenius * targets
            + gamma(2) * lam * w_norm)
    return coef, np.sqrt(weight_sum) * (gamma(n + 1) * (spread + targets) + margins)


def norm_rounding(d, size):
    """Bound on the rounding of the last additions to a computed vector of ``d``
    entries and of its norm ``size``: ``gamma_{d+3} size``."""
    return gamma(d + 3) * size
