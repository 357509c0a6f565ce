"""From a centred sketch to the fitted attributes of :class:`dasketch.SketchPCA`:
the sizes of a fit, the sketch, the candidate axes and their variances
(measured on the data, or the sketch's), and the components kept."""

from __future__ import annotations

import math
import numbers
from functools import partial

import numpy as np

from dasketch._blocks import power_of_two_rows, sketch_blocks, transformed_blocks
from dasketch.decomposition._transposed import fit_transposed
from dasketch.decomposition._variance import (
    candidate_axes,
    fit_sizes,
    fraction_components,
    measured_variances,
    mle_components,
    noise_variance,
    sketch_variances,
)


class SketchReadOut:
    """The read-out of :class:`dasketch.SketchPCA`: sketch the rows (or the
    transpose of a store chunked along columns) and set the fitted attributes
    from the sketch."""

    def _continued_sizes(self, n_samples):
        """``(k, sketch_size)`` of a :meth:`partial_fit` after the first: those of
        the fitted sketch, which the parameters must not contradict."""
        size, d = self.sketch_.sketch_size, self.n_features_in_
        requested = {None: size, "exact": d + 1}.get(self.sketch_size, self.sketch_size)
        for name, now, fitted in [("sketch_size", requested, size),
                                  ("method", self.method, self.sketch_.method)]:
            if now != fitted:
                raise ValueError(f"{name} changed from {fitted!r} to {now!r} between calls "
                                 "to partial_fit; call fit to start a new sketch")
        k = self.n_components
        if k is None:
            k = self.n_components_
        elif isinstance(k, numbers.Integral) and k != self.n_components_:
            raise ValueError(f"n_components changed from {self.n_components_} to {k} between "
                             "calls to partial_fit; call fit to start a new sketch")
        elif not isinstance(k, numbers.Integral):
            k = min(self.sketch_.n_rows + n_samples, d)
        return k, size

    def _fit_transposed(self, blocks):
        """Fit from the sketch of ``X^T``, whose row blocks are ``blocks``
        (:mod:`dasketch.decomposition._transposed`)."""
        self._validate_params()
        n, d = blocks.n_features, blocks.n_rows
        k, sketch_size = fit_sizes(self.n_components, self.sketch_size, n, d)
        sk, axes, variances, mean, scores = fit_transposed(
            blocks, sketch_size, method=self.method, split_every=self.split_every,
            random_state=self.random_state)
        self.n_features_in_ = d
        self.__dict__.pop("feature_names_in_", None)
        # Signs as sklearn.utils.extmath.svd_flip fixes them from V: the largest
        # entry of every axis positive.
        signs = np.sign(axes[np.arange(axes.shape[0]), np.argmax(np.abs(axes), axis=1)])
        signs[signs == 0] = 1.0
        self._set_fitted(sk, k, axes * signs[:, None], variances, mean, n, blocks.dtype,
                         "data", "transposed")
        # The projections X_c V^T of the fitted rows, which the last pass gave.
        self._fit_scores = (scores[:, :self.n_components_] * signs[:self.n_components_]
                            ).astype(self.components_.dtype)
        return self

    def _fit_rows(self, blocks):
        """Sketch ``blocks`` (RowBlocks) and read the components out."""
        k, sketch_size = fit_sizes(self.n_components, self.sketch_size, *blocks.shape)
        return self._read_out(self._sketch(blocks, sketch_size), k, blocks, blocks.dtype)

    def _sketch(self, blocks, sketch_size):
        return sketch_blocks(blocks, sketch_size, method=self.method, center=True,
                             split_every=self.split_every, random_state=self.random_state)

    def _read_out(self, sk, k, blocks, dtype):
        """Set the fitted attributes from the centred sketch ``sk``: the variances
        along its directions are measured on ``blocks`` (or, when None, taken
        from the sketch), then ``k`` (or the rule of ``n_components``) of them are
        kept."""
        n = sk.n_rows
        # A sketch of rows divided by 2**e (entries beyond 2**200) is read out in the
        # data's own units while its squares are floats (checked by _set_fitted).
        # Tiny rows (e < 0) have their variances measured multiplied by 2**-e, where
        # their squares do not underflow, and scaled back when they are set.
        unit = min(sk.scale_exponent, 0)
        mean = np.ldexp(np.asarray(sk.mean, dtype=np.float64), sk.scale_exponent)
        counted = self.n_components is None or isinstance(self.n_components, numbers.Integral)
        axes = candidate_axes(sk, k if counted else 1)
        if blocks is not None:
            if unit:
                blocks = transformed_blocks(
                    blocks, partial(power_of_two_rows, exponent=unit), blocks.n_features)
            variances = measured_variances(blocks, axes, np.ldexp(mean, -unit),
                                           split_every=self.split_every)
            order = np.argsort(-variances, kind="stable")
            axes, variances = axes[order], variances[order]
        else:
            variances = sketch_variances(sk.scaled() if unit else sk, axes.shape[0])
        return self._set_fitted(sk, k, axes, variances, mean, n, dtype,
                                "data" if blocks is not None else "sketch",
                                "rows" if blocks is None else blocks.plan, unit=unit)

    def _set_fitted(self, sk, k, axes, variances, mean, n, dtype, source, plan, unit=0):
        """Keep ``k`` (or the rule of ``n_components``) of the orthonormal
        ``axes`` (by decreasing ``variances``, from ``source``) of the sketch
        ``sk`` of data of ``n`` rows, column means ``mean``; ``variances`` are of
        the data multiplied by ``2**-unit`` (``unit <= 0``), as are the ratios and
        the choice of ``k``, the fitted variances scaled back."""
        d = axes.shape[1]
        counted = self.n_components is None or isinstance(self.n_components, numbers.Integral)
        dof = max(n - 1, 1)
        with np.errstate(over="ignore"):
            frobenius_sq = float(np.ldexp(sk.frobenius_sq, 2 * (sk.scale_exponent - unit)))
        if not (np.isfinite(frobenius_sq) and np.isfinite(sk.error_bound)):
            norm = math.ldexp(math.sqrt(sk.frobenius_sq), sk.scale_exponent)
            raise ValueError(
                f"X: its centred Frobenius norm is {norm:.3g}; the variances SketchPCA "
                "reports (its square over n - 1) exceed float64's range; rescale X (e.g. "
                "divide it by that norm) and scale the variances back")
        total = frobenius_sq / dof
        ratios = variances / total if total > 0 else np.zeros_like(variances)
        if self.n_components == "mle":
            k = mle_components(variances, total, n, d)
        elif not counted:
            k = fraction_components(ratios, self.n_components)
        k = min(k, axes.shape[0])
        dtype = dtype if dtype in (np.float32, np.float64) else np.float64
        self.sketch_, self.plan_ = sk, plan
        self.variance_source_ = source
        self.components_ = axes[:k].astype(dtype)
        self.explained_variance_ = np.ldexp(variances[:k], 2 * unit).astype(dtype)
        self.explained_variance_ratio_ = ratios[:k].astype(dtype)
        self.singular_values_ = np.ldexp(np.sqrt(variances[:k] * dof), unit).astype(dtype)
        self.sketch_eigenvalues_ = sketch_variances(sk, k, n)
        self.eigenvalue_bound_ = float(sk.error_bound) / dof
        self.noise_variance_ = float(np.ldexp(
            noise_variance(total, variances[:k], min(n, d) - k, (n, d),
                           float(np.linalg.norm(np.ldexp(mean, -unit))),
                           float(np.ldexp(sk.rounding, 2 * (sk.scale_exponent - unit)))),
            2 * unit))
        self.mean_ = mean.astype(dtype)
        self.n_components_ = k
        self.n_samples_ = self.n_samples_seen_ = n
        return self
