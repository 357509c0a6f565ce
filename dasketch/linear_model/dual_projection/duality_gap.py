r"""The duality gap of the l1 and elastic-net problems, in closed form.

For ``P(w, b) = sum_i s_i l(x_i^T w + b, y_i) + h(w)``, ``h(w) = l1 ||w||_1 +
l2/2 ||w||^2``, Fenchel duality gives, for every ``theta`` with
``sum_i s_i theta_i = 0`` (the intercept; no condition without one),

.. math:: P(w, b) \ge P^* \ge D(\theta) = -\sum_i s_i l^*(\theta_i)
          - h^*(-X^T S \theta),
          \qquad h^*(v) = \frac{1}{2 l_2} \sum_j (|v_j| - l_1)_+^2

(for ``l2 = 0``, ``h^*`` is 0 where ``||v||_inf <= l1`` and infinite elsewhere),
and with ``w >= 0`` (``positive``; ``h`` plus the indicator of ``w >= 0``) the
one-sided

.. math:: h^*(v) = \frac{1}{2 l_2} \sum_j (v_j - l_1)_+^2

(for ``l2 = 0``: 0 where ``max_j v_j <= l1``, infinite elsewhere, so a ``v``
with no entry above ``l1`` is feasible however large its negative entries),
so ``P(w, b) - D(theta)`` bounds the suboptimality of ``(w, b)``. The dual
point is built from ``theta = l'(X w + b, y)``, the dual variables of the
current point, as in the gap of scikit-learn's coordinate descent (Friedman,
Hastie, Tibshirani, J. Stat. Softw. 2010; Massias, Gramfort, Salmon, ICML 2018):

* made feasible for the intercept: the squared loss shifts ``theta`` by its
  weighted mean (``l^*(t) = t^2/2 + t y`` is finite everywhere); the logistic
  loss scales the dual variables of the class with the larger sum
  ``sum_i s_i |theta_i|`` down to the other's (``l^*(-y p) = p log p + (1-p)
  log(1-p)`` asks ``0 <= p <= 1``, kept by a factor in [0, 1]);
* then scaled by the ``c`` in ``[0, 1]`` that maximises ``D(c theta)``, at most
  ``l1 / ||X^T S theta||_inf`` when ``l2 = 0`` (``l1 / max(-X^T S theta)``
  with ``w >= 0``, 1 when that maximum is at most ``l1``).

Every sum comes from the pass at ``(w, b)``: ``sum_i s_i l^*(theta_i) =
theta^T (X w + b) - sum_i s_i l`` (Fenchel-Young, equality at
``theta = l'``), and for the logistic loss ``sum_i s_i l^*(c g_i theta_i) <= c
min(g) sum_i s_i l^*(theta_i)`` for the class factors ``g_i`` (``l^*`` is
convex, 0 at 0 and at most 0), a bound that errs on the safe side. numpy/scipy
only.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize_scalar


def _conjugate_penalty(reach, l1, l2):
    """``h^*(v)`` from ``reach``, ``|v|`` (``v`` with ``w >= 0``: only entries
    above ``l1`` count); for ``l2 = 0`` it is 0, the scale being kept within the
    feasible set (:func:`_best_scale`)."""
    if l2 == 0:
        return 0.0
    excess = np.maximum(reach - l1, 0.0)
    return float(excess @ excess) / (2.0 * l2)


def _best_scale(loss_conjugate, reach, l1, l2):
    """``max_{0 <= c <= c_max} D(c) = -loss_conjugate(c) - h^*(c v)`` (concave in c),
    ``reach`` as for :func:`_conjugate_penalty` (``c >= 0`` scales it as ``v``)."""
    top = float(np.max(reach)) if reach.size else 0.0
    c_max = 1.0 if l2 > 0 or top <= l1 else l1 / top

    def negative(c):
        return loss_conjugate(c) + _conjugate_penalty(c * reach, l1, l2)

    found = minimize_scalar(negative, bounds=(0.0, c_max), method="bounded",
                            options={"xatol": 1e-12 * max(c_max, 1e-300)})
    return -min(negative(c_max), float(found.fun), negative(0.0))


def duality_gaps(W, b, state, *, loss, l1, l2, fit_intercept, column_sums, weight_sum,
                 weighted_target_sums, positive=False):
    """Primal objective, dual lower bound and their gap per target.

    ``state`` is a :class:`~.l1_passes.PassResult` at ``(W, b)``; ``l1``, ``l2``
    the penalties per target; ``column_sums`` is ``X^T s``, ``weight_sum``
    ``sum_i s_i`` and ``weighted_target_sums`` ``sum_i s_i y_i`` per target;
    ``positive``: the penalty holds the indicator of ``W >= 0`` (a ``W`` with a
    negative entry has an infinite primal objective).

    Returns ``(primal, dual, gap)``, arrays of one value per target; ``gap`` is
    ``primal - dual`` plus the rounding of their evaluation from the pass's sums
    (inner products of length ``d``, :func:`_evaluation_rounding`), so it is
    positive even where the two meet in floating point.
    """
    K = W.shape[1]
    primal, dual = np.empty(K), np.empty(K)
    for k in range(K):
        w, value, theta_sum = W[:, k], float(state.value[k]), float(state.dual_sum[k])
        xt = state.xt_dual[:, k]
        # sum_i s_i theta_i t_i = w^T X^T S theta + b sum_i s_i theta_i
        theta_margin = float(w @ xt) + float(b[k]) * theta_sum
        primal[k] = value + l1[k] * np.abs(w).sum() + 0.5 * l2[k] * float(w @ w)
        if positive and np.any(w < 0):
            primal[k] = np.inf
        if loss == "squared":
            mu = theta_sum / weight_sum if fit_intercept else 0.0
            # theta = t - y: sum s theta^2 = 2 value, sum s theta y = theta.t - 2 value
            square = 0.5 * (2.0 * value - mu * mu * weight_sum)
            linear = theta_margin - 2.0 * value - mu * weighted_target_sums[k]
            v = xt - mu * column_sums

            def conjugate(c, square=square, linear=linear):
                return c * c * square + c * linear
        else:
            negative_entropy = min(theta_margin - value, 0.0)     # sum s l*(theta) <= 0
            mass_p = -float(state.positive_sum[k])                # sum_{y=+1} s p
            mass_n = theta_sum + mass_p                           # sum_{y=-1} s p
            gp = gn = 1.0
            if fit_intercept:
                gp = min(1.0, mass_n / mass_p) if mass_p > 0 else 1.0
                gn = min(1.0, mass_p / mass_n) if mass_n > 0 else 1.0
            xt_positive = state.xt_positive[:, k]
            v = gp * xt_positive + gn * (xt - xt_positive)
            least = min(gp, gn)

            def conjugate(c, least=least, entropy=negative_entropy):
                return c * least * entropy
        # h^* is taken at -v = -X^T S theta
        dual[k] = _best_scale(conjugate, -v if positive else np.abs(v), l1[k], l2[k])
    rounding = _evaluation_rounding(W.shape[0], primal, dual)
    return primal, dual, np.maximum(primal - dual, 0.0) + rounding


def _evaluation_rounding(d, primal, dual):
    """``gamma_{d+4} (|P| + |D|)``: the rounding of ``P`` and ``D`` computed from
    the pass's sums by inner products of length ``d`` and a few operations more
    (Higham, Accuracy and Stability of Numerical Algorithms, 2002, eq. 3.5);
    ``P``'s terms are nonnegative, so ``|P|`` bounds their absolute sum."""
    unit = np.finfo(np.float64).eps / 2
    k = d + 4
    return k * unit / (1 - k * unit) * (np.abs(primal) + np.abs(dual))
