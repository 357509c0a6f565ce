r"""Dual random projection for l2-regularised linear models, and past the paper.

Zhang, Mahdavi, Jin, Yang, Zhu, "Recovering the Optimal Solution by Dual Random
Projection", COLT 2013. The problem

.. math:: \min_{w, b} \frac{\lambda}{2} \|w\|^2 + \sum_i s_i \ell(x_i^T w + b, y_i)

(``s_i >= 0`` the sample weights, 1 by default)

is projected to ``X_hat = X R / sqrt(m)`` (one blocked pass); the dual variables
of the small problem give back a d-dimensional solution
``w = -(1/lambda) X^T alpha`` (Algorithm 1), repeated around the current solution
in Algorithm 2 (``solver="paper"``). Algorithm 2 is a preconditioned Richardson
iteration whose rate is about 0.5 per round at ``m = 20 r`` and which diverges
when X is not low rank. The default ``solver="cg"`` keeps the projection as a
preconditioner of the full problem instead (:mod:`.preconditioner`), with
conjugate gradients for the squared loss and Newton-CG for the others
(:mod:`.solvers`): one pass over X per iteration, no divergence, and exact
preconditioning when the rank of X is at most m; a projection too small for
the spectrum of X is grown once when that can pay (:mod:`.growth`).

Every fit reports its relative optimality residual
``||grad F(w, b)|| / ||grad F(0, b0)||`` (``b0`` the best constant model, 0
without an intercept), taken from the last pass, and a bound on the error of the
coefficients, ``||w - w*|| <= coef_error_bound`` (strong convexity, see
:meth:`.solvers.FullProblem.error_bound`). The iteration stops when
``coef_error_bound <= tol ||w||`` and warns with
:class:`~sklearn.exceptions.ConvergenceWarning` exactly when that is not reached.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from dasketch._blocks import (
    cache_blocks,
    fit_blas_threads,
    fit_size,
    foreign_array_type,
    gaussian_tile,
    run_eagerly,
)
from dasketch.kernels.deprecation import DEPRECATED, renamed_parameter
from dasketch.kernels.embeddings import TILE, resolve_seed
from dasketch.linear_model.dual_projection.checks import (  # noqa: F401 - re-exported
    DEFAULT_TOL,
    DRP_CONSTRAINTS,
    FIT_BLOCKS,
    SOLVERS,
    _check_alpha,
    _check_targets,
    _warn,
    check_library_options,
    check_weights,
    fit_blocks,
)
from dasketch.linear_model.dual_projection.columns import select_used_columns, widened
from dasketch.linear_model.dual_projection.growth import Growth
from dasketch.linear_model.dual_projection.losses import (
    intercept_only,
    loss_derivative,
    loss_value,
)
from dasketch.linear_model.dual_projection.newton import newton_cg
from dasketch.linear_model.dual_projection.paper import algorithm_one, paper_rounds
from dasketch.linear_model.dual_projection.passes import (
    PROJECTION_STREAM,
    curvature_at_constant,
    projection_pass,
)
from dasketch.linear_model.dual_projection.positive import check_positive, positive_squared
from dasketch.linear_model.dual_projection.proximal import fit_l1, l1_share
from dasketch.linear_model.dual_projection.result import DualRandomProjectionResult
from dasketch.linear_model.dual_projection.solvers import FullProblem, pcg_squared, record
from dasketch.linear_model.dual_projection.unpenalised import (
    check_unpenalised,
    least_squares,
    separable,
    warn_separable,
)
from dasketch.utils._sklearn_compat import validate_parameter_constraints

__all__ = ["DualRandomProjectionResult", "dual_random_projection"]


def _gaussian_combination(seed, stream, n_rows, Z):
    """``R Z`` for the Gaussian ``R`` (n_rows x m) of ``(seed, stream)``, tile by
    tile so that ``R`` is never held whole: the tiles the projection pass drew
    and kept in this process (:func:`~dasketch._blocks.gaussian_tile`), else
    drawn again."""
    out = np.empty((n_rows, Z.shape[1]))
    for lo in range(0, n_rows, TILE):
        hi = min(lo + TILE, n_rows)
        out[lo:hi] = gaussian_tile(seed, stream, lo, hi, Z.shape[0]) @ Z
    return out


@fit_blas_threads
def dual_random_projection(X, y, *, loss="squared", alpha=1.0, smoothing=1.0,
                           sketch_size=100, solver="cg", tol=DEFAULT_TOL, max_iter=100,
                           fit_intercept=True, block_rows=None, split_every=None,
                           random_state=None, client=None, sample_weight=None, cache="auto",
                           positive=False, penalty="l2", l1_ratio=None,
                           n_components=DEPRECATED):
    """Fit a regularised linear model by dual random projection (Zhang et al., COLT 2013).

    Solves ``min_{w,b} alpha/2 ||w||^2 + sum_i s_i l(x_i^T w + b, y_i)`` for one or
    several targets at once; with an l1 part in the penalty,
    ``alpha (l1_ratio ||w||_1 + (1 - l1_ratio) ||w||^2 / 2)`` in place of
    ``alpha/2 ||w||^2`` (:mod:`.proximal`).

    Parameters
    ----------
    X : numpy array, scipy.sparse matrix, Dask array, zarr array, zarr path or URL
        ``n x d``, rows are samples; read block by block. A scipy.sparse X is
        fitted on the columns some row uses (``d`` then counts those), the
        others' coefficients being exactly 0 (:mod:`.columns`). A CuPy array
        or a Dask array of CuPy blocks (any array API array with the linalg
        extension) is multiplied in its own library (:mod:`.passes`), with
        ``R`` drawn on the host and moved there, so that the result and its
        certificate agree with numpy's to rounding and come back on the host;
        it is read with ``penalty="l2"`` and ``positive=False`` (and
        ``alpha > 0`` for the squared loss).
    y : array-like (n,) or (n, K)
        Real targets (squared loss) or labels in ``{-1, +1}``; each column is an
        independent problem (one-vs-rest) and all share every pass over X.
    loss : {"squared", "logistic", "smoothed_hinge"}, default "squared"
        The loss ``l``.
    alpha : float or array (n_targets,), default 1.0
        ``lambda >= 0`` (one per target of a 2-D ``y`` if an array). Dual random
        projection needs ``lambda > 0``; 0 (for every target) is the
        unpenalised problem, solved by sketch-preconditioned LSQR (squared
        loss, minimum-norm) or Newton-CG without the ridge term (logistic
        loss), see :mod:`.unpenalised`.
    smoothing : float, default 1.0
        ``s > 0`` of the smoothed hinge loss.
    sketch_size : int, default 100
        ``m``, the projection dimension (the columns of the sketch ``X R``);
        ``min(sketch_size, n, d)`` is used.
        Algorithm 1 recovers well, and the default solver converges in a few
        iterations, when m is a modest multiple of the rank of X (the paper's
        Theorems 1 and 2 ask ``m = O(r log r)``). When m is too small for the
        spectrum of X and the conjugate gradients of ``solver="cg"`` contract
        slowly, the projection is grown once, to ``min(4 m, n, d)`` columns, in
        one more pass that keeps the columns already computed, unless the
        spectrum left out is too flat for the new columns to capture a quarter
        of it (:mod:`.growth`; the result's ``n_components`` is the size it
        ended with).
    solver : {"cg", "paper"}, default "cg"
        ``"cg"``: conjugate gradients (squared loss) or Newton-CG (other losses)
        on the full problem, preconditioned through the projection and started
        from the Algorithm 1 solution. ``"paper"``: Algorithm 2 (``max_iter=1``:
        Algorithm 1, the one-shot solution).
    tol : float, default 1e-4
        Stop when the coefficients are certified to relative accuracy ``tol``:
        ``coef_error_bound <= tol ||w||`` (so ``||w - w*|| <= tol/(1-tol) ||w*||``).
        The default, scikit-learn's default ``tol`` of ``LogisticRegression``
        and ``Ridge``, makes a default fit at least as accurate as their default
        fits (theirs bounds a gradient or a residual, not the coefficients'
        error).
    max_iter : int, default 100
        At most this many iterations (see ``n_iter`` of the result).
    fit_intercept : bool, default True
        Fit an unpenalised intercept.
    block_rows, split_every : int, optional
        Rows per block and fan-in of the reduction trees (see
        :func:`dasketch.sketch`); the result does not depend on them beyond
        rounding.
    random_state : None, int or numpy.random.Generator, optional
        Seed of the Gaussian ``R`` (d x m), regenerated tile by tile from
        ``(seed, stream, feature index)``; never materialised whole.
    client : distributed.Client, optional
        Run on this client; default: the current Dask scheduler.
    sample_weight : array-like (n,) or Dask array, optional
        ``s_i >= 0`` (zeros allowed, negative weights a ``ValueError``); held
        as one more array aligned with the row blocks of X, never a copy of X.
        An integer weight is the same as repeating the row. Default all 1.
    cache : {"auto", True, False}, default "auto"
        Keep the decoded blocks of X in (worker) memory after the first pass,
        so that the later passes do not read the store again: ``"auto"`` when
        they fit within a fraction of the workers' free memory
        (the Dask config ``dasketch.cache-fraction``; X in memory is never copied). The
        result's ``cache`` records the choice; the solution does not depend on it.
    positive : bool, default False
        Constrain ``w >= 0`` (the intercept stays free). With ``penalty="l2"``,
        squared loss only: projected Newton with the projection's
        preconditioner restricted to the free coefficients (:mod:`.positive`),
        or for ``alpha=0`` nonnegative least squares
        (:mod:`dasketch.linear_model.nonnegative_lstsq`); the certificate is
        then the KKT residual (the projected gradient). With an l1 part
        (``"l1"``, ``"elasticnet"``; squared and logistic losses) the proximal
        Newton method over ``w >= 0``, certified by its one-sided duality gap
        (:mod:`.proximal`). Other losses, ``solver="paper"`` and the logistic
        loss at ``alpha=0`` raise ``InvalidParameterError``.
    penalty : {"l2", "l1", "elasticnet"}, default "l2"
        The penalty, as scikit-learn's ``LogisticRegression`` names it, weighted
        by ``alpha`` (``alpha = 1/C``, the loss summed, not averaged). ``"l1"``
        and ``"elasticnet"`` (squared and logistic losses, ``solver="cg"``) are
        fitted by a sketch-preconditioned proximal Newton method and certified
        by their duality gap: the iteration stops when it is at most ``tol``
        times the objective of the best constant model (:mod:`.proximal`).
    l1_ratio : float in [0, 1], optional
        ``rho`` of ``"elasticnet"``, which needs it (ignored otherwise): the
        penalty is ``alpha (rho ||w||_1 + (1 - rho) ||w||^2 / 2)``.
    n_components : int, default "deprecated"
        The former name of ``sketch_size``, served with a ``FutureWarning``
        until its removal in 0.3.

    Returns
    -------
    DualRandomProjectionResult
        The coefficients and intercept with their certificate
        (``coef_error_bound``, ``optimality_residual``) and the passes taken.

    Warns
    -----
    ConvergenceWarning
        Exactly when ``coef_error_bound > tol ||w||`` for some target (including
        every one-shot solution that is not accurate, and Algorithm 2 diverging).

    See Also
    --------
    DualRandomProjectionRegressor : The estimator for ridge regression.
    DualRandomProjectionClassifier : The estimator for classification.
    dasketch.sketch : The same blocked passes over X for a matrix sketch.

    Notes
    -----
    Passes over X: the projection pass computes ``X_hat`` (kept in worker memory,
    n x m) and ``X^T [X_hat, 1]``; the squared loss then needs one pass per
    conjugate-gradient iteration plus one for the start, the other losses one
    per inner iteration plus one (two when the line search shortens the step)
    per Newton step, one in all for a step taken without inner iterations when
    the preconditioner matches the Hessian (see
    :func:`~dasketch.linear_model.dual_projection.newton.newton_cg`), and one
    when the projection grows. Memory on the client:
    ``X^T [X_hat, 1]`` and the basis of the preconditioner, ``d x (m + 1)``
    floats each, like a sketch of ``m`` rows (m as grown).
    For the smoothed hinge with little regularisation on data far from low rank
    the generalised Newton steps are often cut short by the line search and the
    iteration can need many passes (a ``ConvergenceWarning`` says when
    ``max_iter`` is reached).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.linear_model import dual_random_projection
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 5)) @ rng.standard_normal((5, 1000))
    >>> y = X @ rng.standard_normal(1000) + rng.standard_normal(200)
    >>> res = dual_random_projection(X, y, alpha=1.0, sketch_size=50, random_state=0)
    >>> bool(res.converged), res.optimality_residual < 1e-6, res.n_passes <= 5
    (True, True, True)
    """
    validate_parameter_constraints(DRP_CONSTRAINTS, locals(), caller_name="dual_random_projection")
    rho = l1_share(penalty, l1_ratio, solver=solver, loss=loss)
    check_positive(positive, loss, solver, rho, alpha)
    sketch_size = renamed_parameter("dual_random_projection", "n_components", "sketch_size",
                                    n_components, sketch_size, new_default=100)
    smoothing, m, max_iter, tol = float(smoothing), int(sketch_size), int(max_iter), \
        float(tol)
    if foreign_array_type(X) is not None:
        check_library_options(rho, positive, alpha, loss)
    X, used = select_used_columns(X)
    source = fit_blocks(X, block_rows, client)
    n, d = source.shape
    m = min(m, n, d)
    fit_size(d, m)
    Y = _check_targets(y, n, loss)
    K = Y.shape[1]
    lam = _check_alpha(alpha, K)
    weights = check_weights(sample_weight, n)
    s = weights[:, None]
    seed = resolve_seed(random_state)
    fit_intercept = bool(fit_intercept)
    unpenalised = not lam.any()
    if unpenalised:
        check_unpenalised(loss, solver)
        if loss == "squared":
            return widened(least_squares(
                X, source, Y, weights, fit_intercept=fit_intercept, tol=tol,
                max_iter=max_iter, seed=seed, client=client, cache=cache,
                block_rows=block_rows, squeeze=np.ndim(y) == 1, positive=positive), used)
    b0 = intercept_only(Y, loss, smoothing, weights) if fit_intercept else np.zeros(K)
    blocks, cache_choice = cache_blocks(source, cache, client=client)
    blocks = run_eagerly(blocks, client, threaded=True)

    xhat, yd, sd, products, gram, finite, row_norms = projection_pass(
        blocks, Y, weights, m, seed, b0=b0, loss=loss, smoothing=smoothing,
        split_every=split_every, client=client)
    if not finite:
        raise ValueError("X contains NaN or infinity (or values so large that their "
                         "projection overflows); only finite values are accepted")
    column_sums, xt_dual0 = products[:, m], products[:, m + 1:]   # X^T s, X^T S l'(b0)
    full = FullProblem(blocks, xhat, yd, sd, lam=lam, loss=loss, smoothing=smoothing,
                       fit_intercept=fit_intercept, split_every=split_every, client=client,
                       coupling=(column_sums, weights.sum(), *row_norms))
    full.passes = 1
    V0 = full.stack(np.zeros((d, K)), b0)
    g_v0 = full.stack(xt_dual0, (s * loss_derivative(b0, Y, loss, smoothing)).sum(axis=0))
    reference = np.sqrt(np.einsum("ij,ij->j", g_v0, g_v0))
    reference = np.where(reference > 0, reference, 1.0)
    full.reference = reference
    f_v0 = (s * loss_value(b0, Y, loss, smoothing)).sum(axis=0)
    if rho > 0 and not unpenalised:
        setup = SimpleNamespace(Y=Y, weights=weights, b0=b0, column_sums=column_sums,
                                products=products, gram=gram)
        return widened(fit_l1(full, setup, lam=lam, rho=rho, tol=tol, max_iter=max_iter,
                              squeeze=np.ndim(y) == 1, seed=seed, cache=cache_choice,
                              source=source, positive=positive), used)
    history = []
    diverged, best = False, None
    if solver == "paper":
        V, cert, f, bound = (np.empty((V0.shape[0], K)), np.empty(K), np.empty(K),
                             np.empty(K))
        Z, B, n_iter = np.empty((m, K)), np.empty(K), 0
        for k in range(K):
            V[:, k], cert[k], f[k], bound[k], rounds, best, div, (Z[:, k], B[k]) = \
                paper_rounds(full, xhat, k, b0[k], reference[k], tol, max_iter, history,
                             record)
            n_iter, diverged = max(n_iter, rounds), diverged or div
    else:
        target_products = column_sums[:, None] * b0 - xt_dual0 if loss == "squared" \
            else None    # X^T S y = b0 X^T s - X^T S (b0 - y)
        if unpenalised:   # no Algorithm 1 without a penalty: from the best constant
            Z, B, V = np.zeros((m, K)), b0.copy(), V0.copy()
        else:
            Z, B, W1 = algorithm_one(full, xhat, b0, products[:, :m], column_sums,
                                     target_products)
            V = full.stack(W1, B)
        growth = Growth(full, products[:, :m + 1], gram[:, :m + 1], seed, min(n, d),
                        total_mass=row_norms[0])
        if loss == "squared":
            g_zero = full.stack(-target_products, -(s * Y).sum(axis=0))
            V, cert, f, n_iter, G = (positive_squared if positive else pcg_squared)(
                full, V, V0, g_v0, g_zero, 0.5 * np.sum(s * Y ** 2, axis=0), growth,
                reference, tol, max_iter, history)
        else:
            V, cert, f, n_iter, G = _newton_from_algorithm_one(
                full, V, V0, g_v0, f_v0, growth, b0, reference, tol, max_iter, history)
        bound = full.error_bound(V, G, f)
        converged = full.done(V, G, f, tol)
        if unpenalised:      # no strong convexity: nothing bounds ||w - w*||
            bound = np.full(K, np.inf)
            apart = separable(f, weights)
            converged = converged & ~apart
    W, b = full.split(V)
    if solver == "paper":
        converged = bound <= tol * np.linalg.norm(W, axis=0)
    squeeze = np.ndim(y) == 1
    naive = _gaussian_combination(seed, PROJECTION_STREAM, d, Z) / np.sqrt(m)
    pick = (lambda a: a[0]) if squeeze else (lambda a: a)
    result = DualRandomProjectionResult(
        coef=W[:, 0] if squeeze else W.T, intercept=b[0] if squeeze else b,
        optimality_residual=float(cert[0]) if squeeze else cert,
        coef_error_bound=float(bound[0]) if squeeze else bound,
        objective=float(f[0]) if squeeze else f,
        converged=bool(np.all(converged)), n_iter=int(n_iter), n_passes=full.passes,
        history=history, naive_coef=naive[:, 0] if squeeze else naive.T,
        naive_intercept=pick(B), best_iteration=int(best if best else n_iter),
        n_components=full.n_components, random_state=seed, cache=cache_choice,
        _dual=(source, yd, sd, W, b, loss, smoothing, squeeze))
    if unpenalised and apart.any():
        warn_separable(None if squeeze else np.flatnonzero(apart).tolist(), n_iter, cert)
    elif not result.converged:
        _warn(result, tol, solver, loss, diverged, lam)
    return widened(result, used)


def _newton_from_algorithm_one(full, V, V0, g_v0, f_v0, growth, b0, reference, tol,
                               max_iter, history):
    """Newton-CG from the Algorithm 1 solution, or from the intercept-only model for
    targets where that has the lower objective (the recovery can be far off when
    X is not low rank or, for the smoothed hinge, when lambda is small)."""
    K = V.shape[1]
    f, G, curvature = full.evaluate(V, np.arange(K))
    worse = np.flatnonzero(f > f_v0)
    if worse.size:
        V[:, worse], f[worse], G[:, worse] = V0[:, worse], f_v0[worse], g_v0[:, worse]
        curvature[worse] = curvature_at_constant(full.xhat, full.yd[:, worse], full.sd,
                                                 b0[worse], offsets=full.blocks.offsets,
                                                 **full.options)
    return newton_cg(full, V, f, G, curvature, growth, reference, tol, max_iter, history)


