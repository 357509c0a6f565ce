"""Estimators built on a Frequent Directions sketch."""

from __future__ import annotations

import math
import numbers

import numpy as np
from sklearn.decomposition._base import _BasePCA
from sklearn.utils import check_array
from sklearn.utils._param_validation import RealNotInt, StrOptions
from sklearn.utils.validation import check_is_fitted

from dasketch._blocks import RowBlocks, as_row_blocks, compute
from dasketch._blocks.scaling import scaled_blocks
from dasketch._blocks.transposed_store import transposed_store_blocks
from dasketch._pca_scaling import ColumnScaling
from dasketch._pca_variance import (
    candidate_axes,
    fit_sizes,
    fraction_components,
    measured_variances,
    mle_components,
    noise_variance,
    sketch_variances,
)
from dasketch._transposed_pca import (
    TRANSPOSED_BASIS_VALUES,
    fit_transposed,
    transposed_store,
)
from dasketch.kernels.frequent_directions import METHODS
from dasketch.sketching import sketch
from dasketch.utils.blockwise import affine_rows, gaussian_log_likelihood
from dasketch.utils.params import Interval
from dasketch.utils.validation import is_out_of_core, validate_input


class SketchPCA(ColumnScaling, _BasePCA):
    """Principal component analysis from a centred Robust Frequent Directions sketch.

    One pass over the data (block sketches merged in a tree, see
    :func:`dasketch.sketch`) gives ``B`` with ``B^T B + alpha I`` within
    ``error_bound`` of the centred Gram ``A_c^T A_c`` in spectral norm (Luo et al.,
    JMLR 2019, Algorithms 1-2 and Theorem 2). The right singular vectors of ``B``
    (signs fixed as :func:`sklearn.utils.extmath.svd_flip` does) are candidate
    axes; a second blocked pass measures the variance of the data along each
    of them, and the components are the candidates of largest measured variance,
    in decreasing order. Every reported variance is thus the data's own, and the
    variance the components capture never exceeds the best possible for their
    number (they are orthonormal: Ky Fan's maximum principle).

    Parameters
    ----------
    n_components : int, float in (0, 1) or "mle", optional
        Number of components to keep, at most ``min(n_samples, n_features)``
        (0 keeps none: probabilistic PCA's isotropic model);
        None (default) keeps ``min(n_samples, n_features)`` as
        :class:`sklearn.decomposition.PCA` does. A float keeps the smallest
        number whose measured explained variance ratio exceeds it (all sketch
        directions, with a warning, when they never do); "mle" picks it by
        Minka's rule from the measured variances (see
        :func:`dasketch._pca_variance.mle_components`; needs ``n_samples >=
        n_features``).
    sketch_size : int or "exact", optional
        ``l``, more than ``n_components``; default ``k + max(3 k, 10)`` for
        ``k = n_components`` (``min(n_samples, n_features)`` unless an int),
        chosen so that the ``k`` components capture at least 0.98 of the
        variance of the best ``k``-dimensional subspace on flat as well as steep
        spectra (measured; see
        :func:`dasketch._pca_variance.default_sketch_size`), capped at
        ``min(n_samples, n_features) + 1`` (``n_features + 1`` in
        :meth:`partial_fit`): a sketch of that size is exact for the
        deterministic updates (the centred data have rank below it), so the
        defaults work on data of any size. ``"exact"`` is ``n_features + 1``
        whatever the rows: nothing is shrunk away, ``error_bound`` is the float64
        rounding term alone and the results are exact PCA's
        up to rounding, at ``O(n d^2)`` time and ``d^2`` memory.
    method : {"rfd", "fd"}, default "rfd"
        Robust Frequent Directions or Frequent Directions (see
        :func:`dasketch.sketch`).
    whiten : bool, default False
        Scale the projections to unit variance: :meth:`transform` divides by
        ``sqrt(explained_variance_)`` and :meth:`inverse_transform` multiplies
        back, as in scikit-learn.
    split_every, block_rows : int, optional
        See :func:`dasketch.sketch`.
    random_state : None, int or numpy.random.Generator, optional
        Seeds the randomized update of :func:`dasketch.sketch` (sparse input much
        wider than the sketch), so equal seeds give equal fits.
    scaling : {"standard"} or None, default None
        ``"standard"``: centre every column and divide it by its standard
        deviation (``ddof=0``; a constant column keeps scale 1 and becomes zero),
        as :class:`sklearn.preprocessing.StandardScaler` does, before the PCA.
        The means and deviations come from one more blocked pass (moments merged
        as Chan, Golub and LeVeque 1979), and every block task of the later
        passes, and of :meth:`transform`, :meth:`inverse_transform` and
        :meth:`score_samples`, scales the rows it reads: the scaled matrix is
        never stored. Dense input only; not with :meth:`partial_fit`.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        Orthonormal rows, in the dtype of ``X`` (float32 stays float32; the sketch
        accumulates in float64). Where the sketch holds fewer directions than
        ``n_components_`` (data of lower rank), it is completed by directions
        orthogonal to the sketch.
    explained_variance_ : ndarray of shape (n_components_,)
        Variance of the data along each component, ``||X_c v_i||^2 / (n - 1)``,
        decreasing. After :meth:`fit` it is measured in one blocked pass (dense,
        sparse, Dask and zarr ``X``). After :meth:`partial_fit` the earlier
        batches are gone, so it is the sketch's estimate, equal to
        ``sketch_eigenvalues_`` and within ``eigenvalue_bound_`` of the data's
        variance along each component (exact when the sketch is:
        ``sketch_size="exact"``); ``variance_source_`` says which.
    variance_source_ : {"data", "sketch"}
        Where ``explained_variance_`` (and the ratios, singular values and noise
        variance derived from it) comes from: measured on the data by
        :meth:`fit`, or estimated from the sketch by :meth:`partial_fit`.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        ``explained_variance_`` over the exact total variance (tracked during the
        sketch pass).
    singular_values_ : ndarray of shape (n_components_,)
        ``sqrt((n - 1) explained_variance_)``: the norms ``||X_c v_i||``.
    sketch_eigenvalues_ : ndarray of shape (n_components_,)
        The sketch's estimates ``(s_i^2 + alpha) / (n - 1)`` of the ``i``-th
        largest eigenvalue of the covariance ``A_c^T A_c / (n - 1)`` (``s_i`` the
        singular values of ``B``, zero beyond its rank). They estimate the
        spectrum, not the variance along ``components_[i]``.
    eigenvalue_bound_ : float
        ``error_bound / (n - 1)``: every exact covariance eigenvalue
        ``lambda_i`` lies in ``sketch_eigenvalues_[i] +- eigenvalue_bound_``
        (Weyl's inequality), certified or with the probability of
        ``sketch_.guarantee``.
    noise_variance_ : float
        As in :class:`sklearn.decomposition.PCA`: the exact total variance minus
        ``explained_variance_``, over ``min(n_samples, n_features) -
        n_components_`` (0 when that is 0), for the probabilistic PCA of
        :meth:`score`.
    mean_ : ndarray of shape (n_features,)
        The mean of the (scaled, with ``scaling``) data.
    scaler_mean_, scaler_scale_ : ndarray of shape (n_features,)
        With ``scaling="standard"``: every column's mean and the divisor of the
        centred column.
    n_components_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        For a pandas DataFrame ``X``.
    n_samples_, n_samples_seen_ : int
        Rows summarised by the sketch (all batches of :meth:`partial_fit`).
    sketch_ : dasketch.Sketch
        The centred sketch, with its certified ``error_bound`` (with
        ``plan_ == "transposed"``, the sketch of ``X_c^T``, of ``n_samples``
        columns: its Gram estimates ``X_c X_c^T``, whose nonzero eigenvalues are
        the covariance's times ``n - 1``).
    plan_ : {"rows", "column reads", "rechunk", "transposed"}
        How :meth:`fit` read ``X``: blocks of whole rows; blocks of rows read
        across the column chunks of a zarr store; a Dask array chunked along
        columns rechunked to whole rows; or, for a 2-D zarr store chunked along
        columns whose column reads would decode every chunk at least 1.5 times
        a pass, the sketch of its transpose, whose rows are whole in those
        chunks, followed by two passes that measure the components
        (:mod:`dasketch._transposed_pca`; ``block_rows`` then counts the
        store's columns per block). The statements above hold for every plan.

    See Also
    --------
    sketch : The centred sketch alone, with its error bound.
    dasketch.xarray.eofs : Empirical orthogonal functions of an xarray data set.
    dasketch.anndata.pca : Principal components of an AnnData object, as
        ``scanpy.pp.pca``.
    sklearn.decomposition.PCA : The exact peer.

    Notes
    -----
    A drop-in for :class:`sklearn.decomposition.PCA` and
    :class:`sklearn.decomposition.IncrementalPCA`: with ``sketch_size="exact"``
    the results are theirs up to rounding, and scikit-learn's own test files for
    both pass through thin shims (``tests/sklearn_conformance``; README.md,
    "scikit-learn conformance"). The differences:

    * No ``svd_solver`` and its options: the sketch replaces every solver, so
      nothing depends on one (arpack's ``min(n_samples, n_features) - 1``
      components, randomized's refusal of ``"mle"``, the full solver's refusal of
      sparse input).
    * :meth:`partial_fit` accepts sparse batches (IncrementalPCA raises
      TypeError) and batches of any size after the first; after it,
      ``explained_variance_`` is the sketch's certified estimate
      (``variance_source_``).
    * ``block_rows`` plays the role of IncrementalPCA's ``batch_size`` in
      :meth:`fit`; the block sketches are merged in a tree.
    * Error messages are dasketch's (a ValueError or TypeError where
      scikit-learn raises one, worded differently); no array API dispatch.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch import SketchPCA
    >>> X = np.random.default_rng(0).standard_normal((500, 10)) * np.arange(10, 0, -1)
    >>> pca = SketchPCA(n_components=2, sketch_size=10).fit(X)
    >>> pca.transform(X).shape, pca.get_feature_names_out().tolist()
    ((500, 2), ['sketchpca0', 'sketchpca1'])
    >>> measured = np.var((X - X.mean(0)) @ pca.components_.T, axis=0, ddof=1)
    >>> bool(np.allclose(pca.explained_variance_, measured, rtol=1e-12))
    True
    """

    _parameter_constraints = {
        "n_components": [Interval(numbers.Integral, 0, None, closed="left"),
                         Interval(RealNotInt, 0, 1, closed="neither"),
                         StrOptions({"mle"}), None],
        "sketch_size": [Interval(numbers.Integral, 2, None, closed="left"),
                        StrOptions({"exact"}), None],
        "method": [StrOptions(set(METHODS))],
        "whiten": ["boolean"],
        "split_every": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "block_rows": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "scaling": [StrOptions({"standard"}), None],
    }

    def __init__(self, n_components=None, sketch_size=None, *, method="rfd", whiten=False,
                 split_every=None, block_rows=None, random_state=None, scaling=None):
        self.n_components = n_components
        self.sketch_size = sketch_size
        self.method = method
        self.whiten = whiten
        self.split_every = split_every
        self.block_rows = block_rows
        self.random_state = random_state
        self.scaling = scaling

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

    def fit(self, X, y=None):
        """Sketch the centred rows of ``X`` and keep the components of largest variance.

        The variance along each direction of the sketch is measured in one more
        pass over ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL.
        y : None, optional
            Ignored.

        Returns
        -------
        self : SketchPCA
            The fitted estimator.
        """
        self._validate_params()
        for name in ("scaler_mean_", "scaler_scale_"):
            self.__dict__.pop(name, None)
        store = None
        if self.scaling is None and self.sketch_size != "exact":
            store = transposed_store(X, self.block_rows)
        if store is not None:
            sizes = fit_sizes(self.n_components, self.sketch_size, *store.shape)
            if store.shape[1] * sizes[1] <= TRANSPOSED_BASIS_VALUES:
                return self._fit_transposed(transposed_store_blocks(
                    store, block_rows=self.block_rows, name="X"))
        X = validate_input(self, X, reset=True, accept_sparse="csr")
        blocks = as_row_blocks(X, block_rows=self.block_rows, name="X")
        if self.scaling is not None:
            blocks = scaled_blocks(blocks, self._fit_scaler(blocks, self.scaling)[0])
        return self._fit_rows(blocks)

    def _fit_transposed(self, blocks):
        """Fit from the sketch of ``X^T``, whose row blocks are ``blocks``
        (:mod:`dasketch._transposed_pca`)."""
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

    def partial_fit(self, X, y=None):
        """Merge the centred sketch of the rows of ``X`` into the fitted one.

        :meth:`fit` or the first call fixes the sketch size (the default is
        capped at ``n_features + 1`` here, not by the rows of the first batch) and
        ``n_components_`` (``None`` keeps ``min(n_samples, n_features)`` of the
        first batch, as :class:`sklearn.decomposition.IncrementalPCA` does; a
        fraction or ``"mle"`` is re-chosen at every call). Each call sketches its
        batch centred on its own mean and merges it with the parallel-variance row
        (Ghashami et al. 2016, Section 3; DESIGN section 2), so any batching of
        the same rows gives a sketch with the same guarantee against the exact
        centred Gram of every row seen (the failure probabilities of randomized
        sparse updates add up). The components and ``explained_variance_`` then
        come from the sketch (``variance_source_ == "sketch"``): earlier batches
        cannot be read again.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A batch of rows, in any form :meth:`fit` accepts.
        y : None, optional
            Ignored.

        Returns
        -------
        self : SketchPCA
            The estimator, updated.

        Raises
        ------
        ValueError
            When ``n_components`` (an int), ``sketch_size`` or ``method`` changed
            since the first call, or the first batch has fewer rows than
            ``n_components``.
        """
        self._validate_params()
        if self.scaling is not None:
            raise ValueError("scaling='standard' needs the moments of every row before the "
                             "sketch: use fit, or scale the batches beforehand")
        first = not hasattr(self, "sketch_")
        if not first and self.plan_ == "transposed":
            raise ValueError("fit sketched the transpose of a store chunked along columns "
                             "(plan_ == 'transposed'), which later rows cannot be merged "
                             "into; call fit on all the rows, or partial_fit from the start")
        X = validate_input(self, X, reset=first, accept_sparse="csr")
        blocks = as_row_blocks(X, block_rows=self.block_rows, name="X")
        n, d = blocks.shape
        if first:
            k, sketch_size = fit_sizes(self.n_components, self.sketch_size, n, d,
                                       streaming=True)
        else:
            k, sketch_size = self._continued_sizes(n)
        merged = self._sketch(blocks, sketch_size)
        if not first:
            merged = self.sketch_.merge(merged)
        return self._read_out(merged, k, None, blocks.dtype)

    def _sketch(self, blocks, sketch_size):
        return sketch(blocks, sketch_size, method=self.method, center=True,
                      split_every=self.split_every, random_state=self.random_state)

    def _read_out(self, sk, k, blocks, dtype):
        """Set the fitted attributes from the centred sketch ``sk``: the variances
        along its directions are measured on ``blocks`` (or, when None, taken
        from the sketch), then ``k`` (or the rule of ``n_components``) of them are
        kept."""
        n = sk.n_rows
        # A sketch of rows divided by 2**e (entries beyond 2**200) is read out in the
        # data's own units while its squares are floats (checked by _set_fitted).
        mean = np.ldexp(np.asarray(sk.mean, dtype=np.float64), sk.scale_exponent)
        counted = self.n_components is None or isinstance(self.n_components, numbers.Integral)
        axes = candidate_axes(sk, k if counted else 1)
        if blocks is not None:
            variances = measured_variances(blocks, axes, mean, split_every=self.split_every)
            order = np.argsort(-variances, kind="stable")
            axes, variances = axes[order], variances[order]
        else:
            variances = sketch_variances(sk, axes.shape[0])
        return self._set_fitted(sk, k, axes, variances, mean, n, dtype,
                                "data" if blocks is not None else "sketch",
                                "rows" if blocks is None else blocks.plan)

    def _set_fitted(self, sk, k, axes, variances, mean, n, dtype, source, plan):
        """Keep ``k`` (or the rule of ``n_components``) of the orthonormal
        ``axes`` (by decreasing ``variances``, from ``source``) of the sketch
        ``sk`` of data of ``n`` rows, column means ``mean``."""
        d = axes.shape[1]
        counted = self.n_components is None or isinstance(self.n_components, numbers.Integral)
        dof = max(n - 1, 1)
        with np.errstate(over="ignore"):
            frobenius_sq = float(np.ldexp(sk.frobenius_sq, 2 * sk.scale_exponent))
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
        self.explained_variance_ = variances[:k].astype(dtype)
        self.explained_variance_ratio_ = ratios[:k].astype(dtype)
        self.singular_values_ = np.sqrt(variances[:k] * dof).astype(dtype)
        self.sketch_eigenvalues_ = sketch_variances(sk, k, n)
        self.eigenvalue_bound_ = float(sk.error_bound) / dof
        self.noise_variance_ = noise_variance(total, variances[:k], min(n, d) - k, d)
        self.mean_ = mean.astype(dtype)
        self.n_components_ = k
        self.n_samples_ = self.n_samples_seen_ = n
        return self

    def _projection(self):
        """``(matrix, scale)`` of the transform: components scaled for ``whiten``
        (variances clipped below at the dtype's eps, as scikit-learn does)."""
        scale = np.ones(self.n_components_)
        if self.whiten:
            scale = np.maximum(np.sqrt(self.explained_variance_.astype(np.float64)),
                               np.finfo(self.components_.dtype).eps)
        return self.components_.T.astype(np.float64) / scale, scale

    def transform(self, X):
        """Project ``X`` on the principal axes.

        ``X`` is validated exactly as in ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_components)
            The projections (divided by ``sqrt(explained_variance_)`` when
            ``whiten``), in the dtype of ``components_``; for out-of-core ``X``
            (Dask, ``zarr.Array``, zarr path or URL) a lazy Dask array whose blocks
            raise on NaN or Inf when computed.
        """
        check_is_fitted(self, "components_")
        if hasattr(self, "scaler_mean_"):
            return self._in_kind_of(X, self._transform(self._scaled(X)))
        return self._transform(validate_input(self, X, reset=False, accept_sparse="csr"))

    def _transform(self, X):
        """:meth:`transform` of validated ``X`` (RowBlocks: lazy)."""
        projection = self._projection()[0]
        offset = -(self.mean_.astype(np.float64) @ projection)
        if not isinstance(X, RowBlocks):
            return (np.asarray(X @ projection) + offset).astype(self.components_.dtype,
                                                               copy=False)
        return affine_rows(X, projection, offset, self.components_.dtype)

    def inverse_transform(self, X):
        """Map projections back to the input space (undoing ``whiten``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components)
            Projections, as :meth:`transform` returns them.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples, n_features)
            Rows in the input space; lazy for out-of-core ``X``, as
            :meth:`transform`.
        """
        check_is_fitted(self, "components_")
        if is_out_of_core(X):
            X = as_row_blocks(X, block_rows=self.block_rows, name="X")
            width = X.n_features
        else:
            X = check_array(X, dtype=(np.float64, np.float32))
            width = X.shape[1]
        if width != self.n_components_:
            raise ValueError(f"X has {width} columns, but {type(self).__name__} has "
                             f"{self.n_components_} components")
        matrix = (self.components_.astype(np.float64).T * self._projection()[1]).T
        offset = self.mean_.astype(np.float64)
        if hasattr(self, "scaler_mean_"):  # undo the scaling too: x = z scale + mean
            matrix, offset = matrix * self.scaler_scale_, offset * self.scaler_scale_ \
                + self.scaler_mean_
        if isinstance(X, RowBlocks):
            return affine_rows(X, matrix, offset, self.components_.dtype)
        return (X @ matrix + offset).astype(self.components_.dtype, copy=False)

    def _singular(self):
        """Whether the probabilistic PCA covariance is singular: no noise, and fewer
        components than features or a component of (numerically) zero variance."""
        variances = np.asarray(self.explained_variance_, dtype=np.float64)
        if self.noise_variance_ > 0:
            return False
        eps = np.finfo(self.components_.dtype).eps
        return self.n_components_ < self.n_features_in_ or \
            variances.min() <= self.n_features_in_ * eps * variances.max()

    def get_precision(self):
        """Compute the precision of the probabilistic PCA model (Tipping and Bishop, 1999).

        It is the inverse of :meth:`get_covariance` as scikit-learn's PCA defines it
        (with ``whiten``, its covariance scales the components by
        ``sqrt(explained_variance_)``). With the orthonormal components ``V`` and
        ``e`` the variances in excess of the noise ``s2``, ``C = V^T diag(e) V +
        s2 I`` and ``C^{-1} = I / s2 - V^T diag(e / (s2 (s2 + e))) V``, which stays
        finite when a component has no excess variance.

        Returns
        -------
        ndarray of shape (n_features, n_features)
            ``C^{-1}``, in the dtype of ``components_``.

        Raises
        ------
        numpy.linalg.LinAlgError
            When the covariance is singular (``noise_variance_ == 0`` with fewer
            components than features, or a component without variance).
        """
        check_is_fitted(self, "components_")
        if self._singular():
            raise np.linalg.LinAlgError(
                f"the model's covariance is singular (noise_variance_ = 0 with "
                f"{self.n_components_} components for {self.n_features_in_} features, or "
                "a component without variance): it has no precision; fit fewer components "
                "than min(n_samples, n_features) for a proper model")
        axes = self.components_.astype(np.float64)
        variances = self.explained_variance_.astype(np.float64)
        noise = float(self.noise_variance_)
        excess = np.maximum(variances - noise, 0.0)
        if self.whiten:
            excess *= variances
        if noise == 0:
            return ((axes.T / excess) @ axes).astype(self.components_.dtype)
        precision = -(axes.T * (excess / (noise * (noise + excess)))) @ axes
        precision[np.diag_indices_from(precision)] += 1.0 / noise
        return precision.astype(self.components_.dtype)

    def score_samples(self, X):
        """Compute the log-likelihood of each sample under the probabilistic PCA model.

        As :meth:`sklearn.decomposition.PCA.score_samples`. A singular model (see
        :meth:`get_precision`) gives ``-inf`` for every sample, as scikit-learn's PCA
        does.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_samples,)
            Log-likelihoods; lazy for out-of-core ``X``.
        """
        check_is_fitted(self, "components_")
        if hasattr(self, "scaler_mean_"):
            return self._in_kind_of(X, self._score_samples(self._scaled(X)))
        return self._score_samples(validate_input(self, X, reset=False, accept_sparse="csr"))

    def _score_samples(self, X):
        """:meth:`score_samples` of validated ``X`` (RowBlocks: lazy)."""
        precision = None if self._singular() else self.get_precision().astype(np.float64)
        return gaussian_log_likelihood(X, self.mean_.astype(np.float64), precision)

    def score(self, X, y=None):
        """Return the average log-likelihood of the samples under the probabilistic PCA model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Any input :meth:`fit` accepts.
        y : None, optional
            Ignored.

        Returns
        -------
        float
            The mean of :meth:`score_samples` (higher is better).
        """
        log_likelihood = self.score_samples(X)
        if not isinstance(log_likelihood, np.ndarray):
            (log_likelihood,) = compute(log_likelihood)
        return float(np.mean(log_likelihood))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
