"""The result of :func:`~dasketch.linear_model.dual_random_projection`: the
solution, its certificate and the passes it took."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from dasketch._blocks import CacheChoice
from dasketch.linear_model.dual_projection.passes import dual_variables

__all__ = ["DualRandomProjectionResult"]


@dataclass
class DualRandomProjectionResult:
    """Solution of :func:`dual_random_projection`.

    Made by :func:`dual_random_projection`; the parameters are also its attributes.

    Parameters
    ----------
    coef : ndarray (n_features,) or (n_targets, n_features)
        The coefficients ``w``.
    intercept : float or ndarray (n_targets,)
        The intercept ``b`` (0 without ``fit_intercept``).
    optimality_residual : float or ndarray (n_targets,)
        ``||grad F(w, b)|| / ||grad F(0, b0)||`` of the full problem at the
        returned solution: ``grad F = [lambda w + X^T S l'; sum s l']`` with
        ``l' = l'(X w + b, y)``, ``b0`` the optimal constant (0 without an
        intercept). Computed in the last pass over X, not estimated. With
        ``positive=True`` the coefficients' part of ``grad F`` is the projected
        gradient (the KKT residual, see :mod:`.positive`).
        With an l1 part in the penalty: the relative duality gap
        ``duality_gap / F(0, b0)``.
    coef_error_bound : float or ndarray (n_targets,)
        ``||w - w*|| <= coef_error_bound`` for the exact minimiser ``w*``: the
        norm of the gradient of the objective with the intercept profiled out,
        divided by ``lambda`` (see :meth:`.solvers.FullProblem.error_bound`);
        for ``alpha=0`` that of sketch-preconditioned LSQR (squared loss) or
        infinite (logistic: no strong convexity, see :mod:`.unpenalised`).
        With an l1 part: ``sqrt(2 duality_gap / (alpha (1 - l1_ratio)))``,
        infinite for ``penalty="l1"``.
    objective : float or ndarray (n_targets,)
        ``lambda/2 ||w||^2 + sum_i s_i l(x_i^T w + b, y_i)`` at the solution
        (the penalty ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2)``
        with an l1 part).
    converged : bool
        Whether every target reached ``coef_error_bound <= tol ||w||`` (with an
        l1 part: ``duality_gap <= tol F(0, b0)``).
    n_iter : int
        Iterations run (the most over targets): conjugate-gradient iterations
        (squared loss), Newton steps (other losses) or rounds of Algorithm 2.
    n_passes : int
        Passes over X, the projection included.
    history : list of dict
        Per iteration: ``iteration``, ``passes`` (over X so far),
        ``optimality_residual`` and ``objective`` (per target when several),
        for ``solver="cg"`` ``n_components`` (the projection dimension then),
        and for Newton-CG ``cg_iterations`` and ``step_size``.
    naive_coef, naive_intercept : ndarray or float
        The naive solution ``R z / sqrt(m)`` of the first projected problem, the
        baseline the paper shows to be far off (zeros with an l1 part: no
        projected problem is solved).
    best_iteration : int
        ``solver="paper"``: the round returned (the one with the lowest
        objective when the iteration stopped contracting), else ``n_iter``.
    n_components : int
        The projection dimension the fit ended with: ``min(sketch_size,
        n_samples, n_features)``, or up to four times that when ``solver="cg"``
        grew the projection once because its conjugate gradients contracted
        slowly (:mod:`dasketch.linear_model.dual_projection.growth`).
    random_state : int
        The seed of ``R``.
    cache : CacheChoice, optional
        Whether the decoded blocks of X were kept in (worker) memory after the
        first pass, and why.
    duality_gap : float or ndarray (n_targets,), optional
        With an l1 part in the penalty (``penalty="l1"`` or ``"elasticnet"``):
        ``objective - D(theta) >= objective - min F``, the duality gap of a
        dual feasible point built from the solution's dual variables
        (:mod:`dasketch.linear_model.dual_projection.duality_gap`); None for
        the ridge penalty.
    _dual : tuple, optional
        What :meth:`dual_coef` needs; never pass it.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import dual_random_projection
    >>> rng = np.random.default_rng(1)
    >>> X = rng.standard_normal((100, 4)) @ rng.standard_normal((4, 300))
    >>> y = np.where(X @ rng.standard_normal(300) > 0, 1, -1)
    >>> res = dual_random_projection(X, y, loss="logistic", alpha=10.0, sketch_size=20,
    ...                              tol=1e-8, random_state=0)
    >>> res.converged, res.coef.shape, res.history[-1]["passes"] == res.n_passes
    (True, (300,), True)
    >>> dual = res.dual_coef().compute()     # l'(X w + b, y): one more pass
    >>> bool(np.allclose(res.coef, -X.T @ dual / 10.0, atol=1e-6 * abs(res.coef).max()))
    True
    """

    coef: np.ndarray
    intercept: object
    optimality_residual: object
    coef_error_bound: object
    objective: object
    converged: bool
    n_iter: int
    n_passes: int
    history: list
    naive_coef: np.ndarray
    naive_intercept: object
    best_iteration: int
    n_components: int
    random_state: int
    cache: CacheChoice = None
    duality_gap: object = None
    _dual: tuple = field(default=None, repr=False)

    def dual_coef(self):
        """Return the dual variables ``s l'(X w + b, y)`` of the solution, lazily.

        Returns
        -------
        dask.array.Array of shape (n_samples,) or (n_samples, n_targets)
            Computing it is one pass over X.
        """
        if self._dual is None:
            raise ValueError("no dual variables: this least-squares fit (alpha=0) was "
                             "solved by sketch-preconditioned LSQR, not by dual random "
                             "projection")
        blocks, yd, sd, W, b, loss, smoothing, squeeze = self._dual
        dual = dual_variables(blocks, yd, sd, W, b, loss=loss, smoothing=smoothing)
        return dual[:, 0] if squeeze else dual
