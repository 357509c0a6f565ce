"""What one Frequent Directions sketch gives on its own, without new rows or other
sketches: its ridge and error bounds, its read-outs (covariance, singular values,
solve), and the sketch of zero rows or of a smaller size.

The private base class of :class:`~dasketch.kernels.frequent_directions.Sketch`,
which holds the fields and documents every member; numpy/scipy only.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import scipy.linalg

from dasketch.kernels.alignment import aligned
from dasketch.kernels.shrink import EPS, _squared_norm, shrink_rounding, shrink_rows
from dasketch.kernels.sketch_checks import check_sketch_parameters
from dasketch.kernels.sketch_scaling import _unscaled, _unscaled_bound


class _BaseSketch:
    """The members of :class:`~dasketch.kernels.frequent_directions.Sketch` that read
    one sketch's fields: bounds, read-outs, :meth:`empty` and :meth:`resize`."""

    def __setstate__(self, state):
        # Unpickled from a message, an array can lie at any byte offset, which
        # numpy multiplies by its own loops (other rounding): a sketch's are aligned.
        self.__dict__.update({name: aligned(value) for name, value in state.items()})

    @classmethod
    def empty(cls, n_features, sketch_size, *, method="rfd", alpha0=0.0, center=False):
        """Return the sketch of zero rows.

        Parameters
        ----------
        n_features : int
            Number of columns ``d``.
        sketch_size : int
            ``l >= 2``.
        method : {"rfd", "fd"}, default "rfd"
            FD or RFD estimate.
        alpha0 : float, default 0.0
            User regularisation ``alpha0 >= 0``.
        center : bool, default False
            Whether rows added later are centred (a covariance sketch).

        Returns
        -------
        Sketch
            With no rows and zero shrinkage.
        """
        check_sketch_parameters(sketch_size, method, alpha0)
        mean = np.zeros(n_features) if center else None
        return cls(np.zeros((0, n_features)), 0.0, 0, int(sketch_size), method,
                   float(alpha0), mean, 0.0)

    # -------------------------------------------------------------- derived
    @property
    def n_features(self):
        """Number of columns ``d``."""
        return self.B.shape[1]

    @property
    def centered(self):
        """Whether the sketch summarises the column-centred rows."""
        return self.mean is not None

    @property
    def alpha(self):
        """Ridge of the estimate: ``alpha0`` for FD, ``alpha0 + Delta / 2`` for RFD."""
        return self.alpha0 + _unscaled(self._added_ridge, 2 * self.scale_exponent)

    @property
    def _added_ridge(self):
        """What RFD adds to ``alpha0``, ``Delta / 2`` (0 for FD), of the stored rows."""
        return self.shrinkage / 2.0 if self.method == "rfd" else 0.0

    @property
    def loss_bound(self):
        """Upper bound on ``||A^T A - B^T B||_2``.

        ``shrinkage_bound`` when set, else ``shrinkage``, plus ``rounding``.
        """
        return _unscaled_bound(self._exact_loss_bound + self.rounding, 2 * self.scale_exponent)

    @property
    def _exact_loss_bound(self):
        """The loss bound in exact arithmetic (without ``rounding``)."""
        return self.shrinkage if self.shrinkage_bound is None else self.shrinkage_bound

    @property
    def error_bound(self):
        """Spectral-norm bound on the error of :meth:`covariance`, known without the data.

        ``Delta`` for FD and ``Delta / 2`` for RFD when certified; for a randomized
        sketch ``shrinkage_bound`` (FD) or ``shrinkage_bound - shrinkage / 2``
        (RFD), holding with probability ``1 - failure_probability``; each plus
        ``rounding`` and ``eps alpha``.

        The last term is the rounding of the ridge (Higham, *Accuracy and
        Stability of Numerical Algorithms*, 2nd ed., 2002, Section 2.2, unit
        roundoff ``u = eps / 2``): RFD's guarantee holds for the exact ridge
        ``alpha0 + Delta / 2`` ([3]_ Thm. 2), while :attr:`alpha` is its float64
        sum, within ``u alpha`` of it; so
        ``||A^T A + alpha0 I - (B^T B + alpha I)||_2 <= Delta / 2 + u alpha``.
        :meth:`covariance` adds ``alpha`` to the diagonal of ``B^T B``, which
        rounds each diagonal entry by at most ``u (alpha + (B^T B)_ii)``: another
        ``u alpha`` (the ``u (B^T B)_ii`` part is of the order of the shrinks'
        rounding). Where ``alpha0`` dwarfs ``Delta`` (``alpha0 = 1e20`` beside
        ``Delta = 100``, whose half is then lost in the sum entirely) this term is
        the bound. It is computed in the units of :meth:`scaled`, where ``alpha``
        is ``alpha0 4**-e + Delta / 2``.
        """
        ridge = math.ldexp(self.alpha0, -2 * self.scale_exponent) + self._added_ridge
        bound = self._exact_loss_bound + self.rounding - self._added_ridge + EPS * ridge
        return _unscaled_bound(bound, 2 * self.scale_exponent)

    def scaled(self):
        """Return the sketch of the rows divided by ``2**scale_exponent``.

        Its fields are this sketch's, ``alpha0`` divided by ``4**scale_exponent``,
        and its ``scale_exponent`` is 0, so every bound and estimate it gives is
        finite, and nonzero for nonzero rows: the form to use for data whose
        squares float64 cannot hold (entries beyond ``2**200``, or all below
        ``2**-200``, where ``scale_exponent < 0``).

        Returns
        -------
        Sketch
            This sketch itself when ``scale_exponent`` is 0.
        """
        if not self.scale_exponent:
            return self
        alpha0 = math.ldexp(self.alpha0, -2 * self.scale_exponent)
        return replace(self, alpha0=alpha0, scale_exponent=0, _svd=self._svd)

    @property
    def guarantee(self):
        """``"certified"`` (deterministic) or ``"probability >= 1 - p"``."""
        if self.failure_probability == 0:
            return "certified"
        return f"probability >= 1 - {self.failure_probability:.3g}"

    def with_loss(self, delta, rounding=0.0):
        """Return the same sketch with more shrinkage and rounding error.

        Both are of the stored (scaled) rows, as the fields are.

        Parameters
        ----------
        delta : float
            Exact shrinkage added to ``shrinkage`` (and to ``shrinkage_bound``).
        rounding : float, default 0.0
            Rounding error added to ``rounding``.

        Returns
        -------
        Sketch
            A new sketch with the same rows.
        """
        bound = None if self.shrinkage_bound is None else self.shrinkage_bound + delta
        return replace(self, shrinkage=self.shrinkage + delta, shrinkage_bound=bound,
                       rounding=self.rounding + rounding)

    def covariance(self):
        """Form the d x d estimate ``B^T B + alpha I`` of ``A^T A + alpha0 I``.

        Only for moderate d; :meth:`solve` never forms it.

        Returns
        -------
        ndarray of shape (d, d)
            Its spectral distance to ``A^T A + alpha0 I`` is at most
            :attr:`error_bound`.
        """
        B = self.B
        estimate = B.T @ B
        if self.scale_exponent:
            estimate = self._finite(estimate, 2 * self.scale_exponent, "covariance()")
        return estimate + self.alpha * np.eye(self.n_features)

    def _finite(self, values, exponent, what):
        """``values * 2**exponent`` if finite, else the error naming :meth:`scaled`."""
        with np.errstate(over="ignore"):
            values = np.ldexp(values, exponent)
        if np.isfinite(values).all():
            return values
        raise ValueError(
            f"{what} of this sketch is beyond float64's range (the data's entries exceed "
            f"it when squared); scaled().{what} gives it for the rows divided by "
            f"2**scale_exponent = 2**{self.scale_exponent}")

    def _thin_svd(self):
        if not self._svd:
            _, s, Vt = scipy.linalg.svd(self.B, full_matrices=False,
                                        lapack_driver="gesdd")
            self._svd.append((s, Vt))
        return self._svd[0]

    def singular_values(self):
        """Return the singular values of ``B``.

        Returns
        -------
        ndarray of shape (r,)
            In descending order; a copy.
        """
        values = self._thin_svd()[0].copy()
        if self.scale_exponent:
            values = self._finite(values, self.scale_exponent, "singular_values()")
        return values

    def components(self):
        """Return the right singular vectors of ``B``.

        Returns
        -------
        ndarray of shape (r, d)
            One vector per row, by descending singular value; a copy.
        """
        return self._thin_svd()[1].copy()

    def solve(self, v):
        """Apply ``(B^T B + alpha I)^{-1}`` to ``v`` without forming a d x d matrix.

        Uses the Woodbury identity in its eigen form: with ``B = U S V^T``,
        ``(B^T B + alpha I)^{-1} v = V (S^2 + alpha)^{-1} V^T v
        + (v - V V^T v) / alpha``, O(l d) per right-hand side. When
        ``alpha == 0`` the Moore-Penrose pseudo-inverse is applied instead (the
        second term is dropped), as in the RFD paper's Algorithm 3.

        Parameters
        ----------
        v : array_like of shape (d,) or (d, k)
            Right-hand side(s).

        Returns
        -------
        ndarray
            ``(B^T B + alpha I)^{-1} v``, of the shape of ``v``.
        """
        v = np.asarray(v, dtype=np.float64)
        if v.ndim not in (1, 2) or v.shape[0] != self.n_features:
            raise ValueError(
                f"v must have shape ({self.n_features},) or ({self.n_features}, k), "
                f"got {v.shape}")
        if self.scale_exponent:
            return np.ldexp(self.scaled().solve(v), -2 * self.scale_exponent)
        s, Vt = self._thin_svd()
        alpha = self.alpha
        eig = s ** 2 + alpha
        keep = eig > 0
        Vt = Vt[keep]
        proj = Vt @ v
        scale = 1.0 / eig[keep]
        inside = Vt.T @ (scale[:, None] * proj if v.ndim == 2 else scale * proj)
        if alpha > 0:
            inside += (v - Vt.T @ proj) / alpha
        return inside

    def resize(self, sketch_size):
        """Shrink to a smaller ``sketch_size`` (one more shrink, ``Delta`` grows by its ``delta``).

        Sketching with a larger working size and resizing at the end keeps every
        guarantee for the final size: each shrink with size ``m >= l`` removes at
        least ``m delta >= l delta`` of Frobenius mass, which is all the proof of
        ``Delta <= ||A - [A]_k||_F^2 / (l - k)`` uses ([2]_ Thm. 3.1).

        Parameters
        ----------
        sketch_size : int
            The new ``l``, at most the current one.

        Returns
        -------
        Sketch
            A new sketch of at most ``sketch_size - 1`` rows.
        """
        check_sketch_parameters(sketch_size, self.method, self.alpha0)
        if sketch_size > self.sketch_size:
            raise ValueError(f"sketch_size must not exceed the current size "
                             f"{self.sketch_size}, got {sketch_size}")
        B, delta = shrink_rows([self.B], sketch_size)
        rounding = 0.0
        if self.B.shape[0] >= sketch_size:
            rounding = shrink_rounding(*self.B.shape, _squared_norm(self.B))
        return replace(self.with_loss(delta, rounding), B=B, sketch_size=int(sketch_size),
                       _svd=[])
