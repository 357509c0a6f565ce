"""Growing the random projection once when the preconditioned iteration is slow.

numpy only, besides the one pass of :func:`.passes.growth_pass`. The
preconditioner of :mod:`.preconditioner` is exact when the rank of X is at most
the projection dimension m and good when the spectrum of X beyond its m-th
singular value is small next to lambda. When it is not, conjugate gradients
contract slowly (the rate is about ``(sqrt(kappa) - 1) / (sqrt(kappa) + 1)`` of
the preconditioned system) and every iteration is a pass over X. The solvers
watch the contraction of the residual: after :data:`SLOW_AFTER` iterations
from a (re)start, a geometric mean above :data:`SLOW_RATE` per iteration grows
the projection once, to ``min(GROWTH m, n, d)`` columns, in one pass, when
that can pay: when the columns growth adds are at least :data:`SHARE` of the
effective dimension of the part of the spectrum the projection leaves out
(:meth:`.Preconditioner.uncaptured_dimension`). A flat tail, such as noise
spread over all ``n`` directions, needs nearly ``n`` columns, and growing by a
factor would cost a pass and a larger basis without fewer iterations. The
columns already computed are kept; the new ones come from new tiles of the
random operator (their own stream), so the grown ``R`` is still a function of
``(seed, stream, feature index)`` and the result does not depend on chunking.
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks import device_transfers
from dasketch.linear_model.dual_projection.passes import growth_pass
from dasketch.linear_model.dual_projection.preconditioner import ProjectedBasis

# Iterations from a (re)start before the contraction is judged.
SLOW_AFTER = 5
# Residual contraction per iteration (geometric mean) above which it is slow;
# a preconditioner that captures the spectrum gives about 0.15.
SLOW_RATE = 0.5
# The grown projection has this many times the columns (at most min(n, d)).
GROWTH = 4
# Growth must add at least this share of the uncaptured effective dimension.
SHARE = 0.25


def contracting_slowly(ratio, iterations):
    """Whether a residual that shrank by ``ratio`` (``||r_k|| / ||r_0||``) in
    ``iterations`` iterations contracts slowly (see :data:`SLOW_RATE`)."""
    ratio = np.asarray(ratio, dtype=np.float64)
    return iterations >= SLOW_AFTER and bool(np.any(ratio > SLOW_RATE ** iterations))


class Growth:
    """The projection of a :class:`.solvers.FullProblem` and what its preconditioner
    is built from, grown at most once.

    Parameters
    ----------
    problem : FullProblem
        Its ``xhat``, ``passes`` and ``n_components`` are updated by :meth:`grow`.
    products : ndarray (d, m + 1)
        ``X^T S [X_hat 1]``.
    gram : ndarray (m + 1, m + 1)
        ``[X_hat 1]^T S [X_hat 1]``.
    seed : int
        The seed of ``R``.
    limit : int
        The most columns the projection may have, ``min(n, d)``.
    total_mass : float
        ``sum_i s_i ||x_i||^2``.
    enabled : bool
        False: never grow.
    """

    def __init__(self, problem, products, gram, seed, limit, total_mass, enabled=True):
        self.problem, self.products, self.gram = problem, products, gram
        self.total_mass = total_mass
        self.seed = seed
        m = products.shape[1] - 1
        self.extra = min(GROWTH * m, limit) - m if enabled else 0
        problem.n_components = m

    @property
    def available(self):
        """Whether :meth:`grow` may still be called."""
        return self.extra > 0

    def pays(self, preconditioners):
        """Whether growing can capture what slows the iteration of one of the
        targets of ``preconditioners``: the columns growth adds are at least
        :data:`SHARE` of their uncaptured effective dimension."""
        return self.available and any(
            SHARE * prec.uncaptured_dimension(self.total_mass) <= self.extra
            for prec in preconditioners)

    def basis(self):
        """The :class:`ProjectedBasis` of the current projection."""
        return ProjectedBasis(self.products, self.gram, self.problem.fit_intercept,
                              device_transfers(self.problem.xhat))

    def grow(self, V=None):
        """One pass: the projection grown to ``m + extra`` columns. Returns the new
        basis and ``[X_hat 1]^T S [X_hat 1]`` (``V`` None, squared loss) or the
        projected curvature at the stacked points ``V`` (one per target)."""
        problem = self.problem
        W, b = problem.split(V) if V is not None else (None, None)
        xhat, new_products, new_gram, curvature = growth_pass(
            problem.blocks, problem.xhat, problem.yd, problem.sd, self.extra, self.seed,
            W, b, **problem.options)
        m = self.products.shape[1] - 1
        grown = m + self.extra
        self.products = np.hstack([self.products[:, :m], new_products, self.products[:, m:]])
        old = np.r_[0:m, grown]                # where [X_hat 1] sit in [X_hat X_new 1]
        gram = np.empty((grown + 1, grown + 1))
        gram[np.ix_(old, old)] = self.gram
        gram[m:grown] = new_gram
        gram[:, m:grown] = new_gram.T
        self.gram = gram
        problem.xhat, problem.n_components = xhat, grown
        problem.passes += 1
        self.extra = 0
        return self.basis(), (self.gram if V is None else curvature)
