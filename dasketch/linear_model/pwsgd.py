"""Preconditioned weighted SGD (pwSGD) for l1 and l2 regression.

Yang, Chow, Re, Mahoney, "Weighted SGD for l_p regression with randomized
preconditioning", JMLR 18(211), 2018, Algorithm 1.
"""

from __future__ import annotations

import numbers
import time
import warnings

import numpy as np
import scipy.linalg
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning

from dasketch._blocks import as_row_blocks, gather_rows, run_eagerly
from dasketch.kernels.embeddings import EMBEDDINGS
from dasketch.kernels.weighted_sgd import run_pwsgd, step_schedule, to_metric
from dasketch.linear_model._pwsgd_setup import (
    check_bounds,
    default_steps,
    draw_rows,
    metric_factor,
)
from dasketch.linear_model._regression_passes import row_power
from dasketch.linear_model._sketched_regression import SketchedRegressorMixin
from dasketch.linear_model.preconditioner import (  # noqa: F401 - STREAM_DRAWS is re-exported
    STREAM_DRAWS,
    leverage_scores,
    metric_singular_values,
)
from dasketch.linear_model.preconditioning import precondition_blocks
from dasketch.utils._sklearn_compat import Options, StrOptions, deprecate_positional_args
from dasketch.utils.params import Interval

PRECONDITIONERS = ("full", "diag", "none")
# Relative excess of the final objective estimate over that of the start above
# which pwSGD warns: a start that is already near-optimal (an l2 start for an l1
# problem with symmetric noise) may end a little above it by SGD noise alone.
_WORSE_THAN_START = 0.01
# Draws whose importance-weighted residuals estimate the objective for
# ``objective_history_``.
_OBJECTIVE_SAMPLE = 2000


class PWSGDRegressor(SketchedRegressorMixin, BaseEstimator):
    """Solve l2 or l1 regression by preconditioned weighted SGD (pwSGD).

    Solves ``min_{x in Z} ||A x - b||_p`` (p in {1, 2}, ``n >> d``, ``Z`` all of
    ``R^d`` or a box) following Yang, Chow, Re, Mahoney, "Weighted SGD for l_p
    regression with randomized preconditioning", JMLR 18(211), 2018,
    Algorithm 1:

    1. ``R`` from ``QR(S A)`` with a distributed sparse embedding ``S`` (one
       blocked pass, which also gives the sketch-and-solve start ``x0`` and an
       independent estimate of ``cond(A R^{-1})``);
    2. leverage weights ``lambda_i ~ ||(A R^{-1})_i||_p^p`` (one blocked pass);
    3. all ``T`` draws ``xi_t ~ lambda / sum(lambda)`` made up front; each block
       gathers the rows drawn in it (one pass, no random access to storage);
    4. SGD steps ``c_t = 2 (a_xi x - b_xi) / p_xi`` (p = 2) or
       ``sgn(a_xi x - b_xi) / p_xi`` (p = 1), ``x <- argmin_{x in Z} eta c_t a_xi x
       + 1/2 ||x - x_t||_H^2`` with ``H = R^T R`` (``"full"``),
       ``H = diag(R^T R)`` (``"diag"``, Jacobi scaling; a box becomes clipping) or
       ``H = I`` (``"none"``), started from ``x0`` (clipped to the box); the last
       iterate (p = 2) or the average (p = 1) is returned.

    With ``sample_weight`` the problem is ``min sum_i w_i |a_i x - b_i|^p``,
    that of the rows ``w_i^(1/p) [a_i b_i]``: step 1 sketches them (formed
    block by block in the pass), step 2 weights row ``i`` by ``w_i lambda_i``
    (its leverage as a weighted row) and step 4 scales the gathered rows.
    Integer weights give the objective of the rows repeated ``w_i`` times, and
    given one preconditioner ``R`` the run is that of the repeated rows (copies
    adjacent, same ``random_state``): the same rows drawn as often, the same
    steps. A weighted fit does not equal a fit on the repeated rows, though:
    step 1 sketches the rows ``w_i^(1/p) a_i``, a different random draw from the
    sketch of the repeated rows, so ``R``, then the draws and the steps, differ;
    both fits are runs of pwSGD on the same problem, each within its accuracy of
    the weighted optimum, not equal to each other to rounding.

    **Default step sizes** (derivation). In ``y = P x`` (``H = P^T P``) the
    problem is ``F(y) = sum_i |u_i y - b_i|^p`` with ``U = A P^{-1}`` whose
    singular values ``sigma`` are estimated from the check sketch. With sampling
    ``p_i ~ ||u_i||^2`` each weighted component of the l2 objective is
    ``2 ||U||_F^2``-smooth and ``F`` is ``2 sigma_min^2``-strongly convex; at a
    constant step ``eta`` SGD reaches a relative excess ``(F - F*)/F*`` of about
    ``eta ||U||_F^2`` after about ``1 / (2 eta sigma_min^2)`` steps. We start at
    ``eta0 = 1 / (4 ||U||_F^2)`` (relative level 1/4, stable) with
    ``mu = 2 sigma_min^2`` and halve the step each epoch (:func:`step_schedule`):
    after ``T`` steps the relative excess is about ``||U||_F^2 / (sigma_min^2 T)``
    (``d kappa^2 / T``), matching the paper's ``O(d log(1/eps) / eps)``. For
    p = 1 the averaged iterate of an epoch at step ``eta`` is within
    ``eta G^2 / 2`` of the optimum, ``G^2 = E ||c_t u_xi||^2`` estimated on the
    drawn rows; ``eta0 = F(x0) / (2 G^2)`` is the level ``F(x0) / 4``, and when
    residuals have a density near 0 (Laplace or Gaussian noise) ``F`` is locally
    quadratic with curvature about ``sigma_min^2 n / F*``; we take
    ``mu = sigma_min^2 n / (2 F(x0))``, ``n`` the rows of weight > 0 (which
    keeps ``mu`` invariant to a common scale of the weights). Default ``n_iter`` is
    ``500 ||U||_F^2 / sigma_min^2`` (at most 10^6): a relative error of about
    ``2e-3`` by the estimate above (the relative errors the defaults reach are
    checked by tests/linear_model/test_pwsgd.py and reported by
    benchmarks/bench_regression.py).

    Parameters
    ----------
    p : {1, 2}, default 2
        The norm of the residual: least squares (2) or least absolute deviations
        (1).
    fit_intercept : bool, default True
        Fit an intercept, as the coefficient of an appended column of ones
        (``A = [X 1]`` below; the preconditioner absorbs its scale, sparse ``X``
        stays sparse). Bounds apply to ``coef_`` only.
    embedding : {"osnap", "countsketch", "cauchy"}, default "osnap"
        The embedding for ``R``. The paper conditions l1 problems with the sparse
        Cauchy transform, whose l1 guarantee does not depend on ``n``; OSNAP is
        the default for both p because its ``cond_2(A R^{-1})`` is far smaller,
        so that its ``R`` needs far fewer steps for the same l1 accuracy (figures
        in benchmarks/README.md).
    sketch_size : int, optional
        Rows of ``S A``, ``>= d``; default ``4 d`` (``d`` counts the intercept
        column), so the defaults suit any size.
    n_iter : int, optional
        Number of SGD steps (row visits) ``T``, all taken (not a cap, hence not
        ``max_iter``); default above.
    preconditioner : {"full", "diag", "none"}, default "full"
        The metric ``H``; box constraints need ``"diag"`` or ``"none"``.
    bounds : (lower, upper), optional
        Box constraints (scalars or length-d arrays, infinities allowed).
    step_size : float, optional
        A constant step ``eta`` instead of the default schedule.
    leverage : {"estimate", "exact"}, default "estimate"
        Leverage weights from a thin random projection or exact (``O(n d^2)``).
    random_state : None, int or numpy.random.Generator, optional
        Seeds the embeddings, the leverage projection and the row draws.
    block_rows : int, optional
        Rows per block of the passes over ``X``; default about 32 MiB of values
        per block.

    Attributes
    ----------
    coef_ : ndarray (n_features,)
        In the dtype of ``X`` (float32 stays float32; the steps run in float64).
    intercept_ : numpy float
        In the dtype of ``coef_``; 0 when ``fit_intercept=False``.
    n_iter_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        For a pandas DataFrame ``X``.
    objective_history_ : ndarray
        Importance-weighted estimate of ``||A x - b||_p^p`` on a fixed sample of
        the drawn rows, at the end of every chunk of steps (for plots).
    history_steps_, history_times_ : ndarray
        Steps and seconds since the start of ``fit`` of those records.
    coef_history_ : ndarray (k, d)
        The iterate (p = 2) or running average (p = 1) at those records (the
        intercept last when ``fit_intercept``).
    condition_number_estimate_ : float
        Estimate of ``cond(A R^{-1})``.
    metric_condition_number_ : float
        Estimate of ``cond(A P^{-1})`` for the metric used.
    sketch_solution_ : ndarray (d,)
        The sketch-and-solve start ``R^{-1} Q^T S b`` (the intercept last when
        ``fit_intercept``). A ``ConvergenceWarning`` is raised when the final
        objective estimate is more than 1% above that of the start (clipped to
        the box).
    sampled_rows_, sample_counts_ : ndarray of int
        The distinct rows the steps visited (sorted) and how many of the
        ``n_iter_`` draws landed on each: rows are drawn with probability
        proportional to their leverage ``lambda_i``.

    See Also
    --------
    SketchLstsqRegressor : Least squares to a certified tolerance by
        sketch-preconditioned LSQR.
    leverage_scores : The row weights pwSGD samples by.
    dasketch.RFDSONRegressor : Online regression in one pass.
    DualRandomProjectionRegressor : Ridge regression for ``d >> n``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import PWSGDRegressor
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((20000, 5)) * np.logspace(0, 4, 5)
    >>> b = A @ np.ones(5) + rng.standard_normal(20000)
    >>> model = PWSGDRegressor(random_state=0).fit(A, b)
    >>> f = lambda x: np.sum((A @ x - b) ** 2)
    >>> f_opt = f(np.linalg.lstsq(A, b, rcond=None)[0])
    >>> bool((f(model.coef_) - f_opt) / f_opt < 1e-2)
    True
    """

    _parameter_constraints = {
        "p": [Options(numbers.Integral, {1, 2})],
        "fit_intercept": ["boolean"],
        "embedding": [StrOptions(set(EMBEDDINGS))],
        "sketch_size": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "n_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "preconditioner": [StrOptions(set(PRECONDITIONERS))],
        "bounds": [tuple, list, None],
        "step_size": [Interval(numbers.Real, 0, None, closed="neither"), None],
        "leverage": [StrOptions({"estimate", "exact"})],
        "random_state": ["random_state"],
        "block_rows": [Interval(numbers.Integral, 1, None, closed="left"), None],
    }

    @deprecate_positional_args(version="0.3")
    def __init__(self, p=2, *, fit_intercept=True, embedding="osnap", sketch_size=None,
                 n_iter=None, preconditioner="full", bounds=None, step_size=None,
                 leverage="estimate", random_state=None, block_rows=None):
        self.p = p
        self.fit_intercept = fit_intercept
        self.embedding = embedding
        self.sketch_size = sketch_size
        self.n_iter = n_iter
        self.preconditioner = preconditioner
        self.bounds = bounds
        self.step_size = step_size
        self.leverage = leverage
        self.random_state = random_state
        self.block_rows = block_rows

    def _check_params(self):
        self._validate_params()
        if self.bounds is not None and self.preconditioner == "full":
            raise ValueError("bounds need preconditioner='diag' or 'none': projecting onto "
                             "a box in the full metric R^T R is itself a QP")

    def fit(self, X, y, sample_weight=None):
        """Fit the coefficients by pwSGD.

        Parameters
        ----------
        X : array-like of shape (n, d)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL.
        y : array-like of shape (n,)
            Targets.
        sample_weight : array-like of shape (n,), optional
            Weights ``w_i >= 0`` of the loss terms: pwSGD minimises
            ``sum_i w_i |x_i^T coef + intercept - y_i|^p``, the problem of the
            rows ``w_i^(1/p) [x_i 1 y_i]``, which the sketch pass forms block by
            block; the rows are then drawn with probability proportional to
            ``w_i lambda_i`` (the leverage of the weighted row) and scaled as
            they are gathered. A scalar, numpy or a Dask array of any chunking
            (computed, like ``y``). Integer weights give the objective of the
            rows repeated, not the same fit: the sketch of the weighted rows is
            another random draw (see the class description).

        Returns
        -------
        self : PWSGDRegressor
            The fitted estimator.
        """
        start_time = time.perf_counter()
        self._check_params()
        blocks, b, sample_weight, dtype = self._validate_fit_data(X, y, sample_weight)
        blocks = run_eagerly(as_row_blocks(blocks, block_rows=self.block_rows, name="X"))
        n, d = blocks.shape
        if n <= d:
            extra = " plus one for the intercept" if self.fit_intercept else ""
            raise ValueError(f"X has n_samples={n} and n_features={self.n_features_in_}"
                             f"{extra}; {type(self).__name__} solves overdetermined problems "
                             "and needs more samples than that")
        box = check_bounds(self.bounds, self.n_features_in_)
        if box is not None and self.fit_intercept:  # the intercept is not bounded
            box = tuple(np.append(side, value) for side, value in zip(box, (-np.inf, np.inf)))
        precond = precondition_blocks(blocks, b, sketch_size=self.sketch_size,
                                      embedding=self.embedding, random_state=self.random_state,
                                      name="X", sample_weight=sample_weight, power=int(self.p))
        return self._fit_preconditioned(blocks, b, sample_weight, precond, box=box,
                                        dtype=dtype, start_time=start_time)

    def _fit_preconditioned(self, blocks, b, sample_weight, precond, *, box=None,
                            dtype=np.float64, start_time=None):
        """Steps 2-4 of :meth:`fit` on the row blocks ``blocks`` (with the
        intercept column when ``fit_intercept``), given the preconditioner
        ``precond`` of the weighted rows: a deterministic function of
        ``precond`` (and its seed)."""
        start_time = time.perf_counter() if start_time is None else start_time
        n = blocks.shape[0]
        p = int(self.p)
        weights = leverage_scores(blocks, precond, p=p, exact=self.leverage == "exact")
        scale = None
        if sample_weight is not None:
            # ||(w^(1/p) x_i) M||_p^p = w ||x_i M||_p^p: the leverage of the weighted row
            weights = weights * sample_weight
            scale = row_power(sample_weight, p)
        total = weights.sum()
        if not (np.isfinite(total) and total > 0):
            raise ValueError("X has no row with nonzero leverage; is it all zeros?")
        probs = weights / total

        P = metric_factor(self.preconditioner, precond.R)
        sv = metric_singular_values(precond, P)
        fro2, smin2 = float(np.sum(sv ** 2)), float(sv[-1] ** 2)
        n_iter = default_steps(fro2, smin2) if self.n_iter is None else int(self.n_iter)
        drawn = draw_rows(probs, n_iter, precond.seed)
        distinct, draws, counts = np.unique(drawn, return_inverse=True, return_counts=True)
        rows = gather_rows(blocks, distinct)
        if scale is not None:
            rows *= scale[distinct, None]
            b = b * scale
        b_drawn, p_drawn = b[drawn], probs[drawn]

        x0 = precond.x0
        if box is not None:
            x0 = np.clip(x0, *box)
        y0 = P @ x0 if np.ndim(P) == 2 else P * x0
        sample = rows[draws[:_OBJECTIVE_SAMPLE]]
        sample_b, sample_p = b_drawn[:_OBJECTIVE_SAMPLE], p_drawn[:_OBJECTIVE_SAMPLE]

        def objective(x):
            return float(np.mean(np.abs(sample @ x - sample_b) ** p / sample_p))

        if p == 2:
            eta0, mu = 1.0 / (4.0 * fro2), 2.0 * smin2
        else:
            U = to_metric(sample, P)
            G2 = float(np.mean(np.einsum("ij,ij->i", U, U) / sample_p ** 2))
            f0 = max(objective(x0), np.finfo(float).tiny)
            # n counts the rows of the problem, those of weight 0 excluded
            rows_in = n if sample_weight is None else np.count_nonzero(sample_weight)
            eta0, mu = f0 / (2.0 * G2), smin2 * rows_in / (2.0 * f0)
        etas, ends = step_schedule(n_iter, eta0, mu, self.step_size)

        def from_metric(v):
            return scipy.linalg.solve_triangular(P, v) if np.ndim(P) == 2 else v / P

        steps, times, path = [0], [time.perf_counter() - start_time], [x0]

        def record(t, v):
            steps.append(t)
            times.append(time.perf_counter() - start_time)
            path.append(from_metric(v))

        y_box = None
        if box is not None:
            y_box = (P * box[0], P * box[1])
        y_final = run_pwsgd(rows, draws, b_drawn, p_drawn, P, y0, p=p, etas=etas,
                            ends=ends, box=y_box, record=record)
        coef = from_metric(y_final)
        if box is not None:  # undo rounding in the change of metric
            coef = np.clip(coef, *box)
        if self.fit_intercept:
            self._set_coef(coef[:-1], coef[-1], dtype)
        else:
            self._set_coef(coef, None, dtype)
        self.n_iter_ = n_iter
        self.history_steps_ = np.asarray(steps)
        self.history_times_ = np.asarray(times)
        self.coef_history_ = np.asarray(path)
        self.objective_history_ = np.array([objective(x) for x in path])
        self.condition_number_estimate_ = precond.condition_number_estimate
        self.metric_condition_number_ = float(sv[0] / sv[-1]) if sv[-1] > 0 else np.inf
        self.sketch_solution_ = precond.x0
        self.sampled_rows_, self.sample_counts_ = distinct, counts
        start, end = self.objective_history_[0], self.objective_history_[-1]
        if end > (1.0 + _WORSE_THAN_START) * start:
            warnings.warn(
                f"pwSGD ended with an objective estimate of {end:.6g}, above the "
                f"{start:.6g} of its sketch-and-solve start (sketch_solution_): the steps "
                f"did not converge (metric condition number {self.metric_condition_number_:.3g}"
                "); use preconditioner='full' or 'diag', more n_iter or a smaller step_size",
                ConvergenceWarning, stacklevel=2)
        return self
