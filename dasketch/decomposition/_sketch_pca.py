"""The estimator :class:`SketchPCA`: its parameters, fits and projections."""

from __future__ import annotations

import numbers

from dasketch._blocks import (
    BasePCA,
    Interval,
    RealNotInt,
    StrOptions,
    as_row_blocks,
    foreign_array_type,
    run_eagerly,
    scaled_blocks,
    transposed_store_blocks,
    validate_input,
)
from dasketch.decomposition._probabilistic import ProbabilisticPCA
from dasketch.decomposition._projections import Projections
from dasketch.decomposition._readout import SketchReadOut
from dasketch.decomposition._scaling import ColumnScaling
from dasketch.decomposition._transposed import TRANSPOSED_BASIS_VALUES, transposed_store
from dasketch.decomposition._variance import fit_sizes
from dasketch.kernels.frequent_directions import SKETCH_METHODS


class SketchPCA(ColumnScaling, SketchReadOut, Projections, ProbabilisticPCA, BasePCA):
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
        Minka's rule from the measured variances (as scikit-learn's ``PCA``
        does; needs ``n_samples >= n_features``).
    sketch_size : int or "exact", optional
        ``l``, more than ``n_components``; default ``k + max(3 k, 10)`` for
        ``k = n_components`` (``min(n_samples, n_features)`` unless an int),
        chosen so that the ``k`` components capture at least 0.98 of the
        variance of the best ``k``-dimensional subspace on flat as well as steep
        spectra (measured on both kinds of spectrum), capped at
        ``min(n_samples, n_features) + 1`` (``n_features + 1`` in
        :meth:`partial_fit`): a sketch of that size is exact for the
        deterministic updates (the centred data have rank below it), so the
        defaults work on data of any size. ``"exact"`` is ``n_features + 1``
        whatever the rows: nothing is shrunk away, ``error_bound`` is the float64
        rounding term alone and the results are exact PCA's
        up to rounding (every singular value to about ``eps sigma_1``, as an SVD
        of the data: an ill-conditioned stack is factored by QR, not through its
        Gram matrix), at ``O(n d^2)`` time and ``d^2`` memory.
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
        (``block_rows`` then counts the store's columns per block). The
        statements above hold for every plan.

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
      scikit-learn raises one, worded differently).
    * CuPy input (and Dask arrays of CuPy blocks) is computed on its device
      without ``array_api_dispatch``, and the fitted attributes are always numpy
      on the host; ``array_api_dispatch`` only keeps the results of
      :meth:`transform`, :meth:`inverse_transform` and :meth:`score_samples` in
      the input's library. Both paths agree to rounding.

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
        "method": [StrOptions(set(SKETCH_METHODS))],
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

    def fit(self, X, y=None):
        """Sketch the centred rows of ``X`` and keep the components of largest variance.

        The variance along each direction of the sketch is measured in one more
        pass over ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            A numpy array, pandas DataFrame, scipy.sparse matrix, Dask array,
            ``zarr.Array`` or zarr path or URL; or a CuPy array, a Dask array of
            CuPy blocks or another array API array, whose sketch and measured
            variances are computed in its own namespace (on the device), with the
            same certificate (not with ``scaling``).
        y : None, optional
            Ignored.

        Returns
        -------
        self : SketchPCA
            The fitted estimator.
        """
        self._validate_params()
        if self.scaling is not None and foreign_array_type(X) is not None:
            raise TypeError("X: scaling='standard' reads numpy blocks only, got an array of "
                            f"type {foreign_array_type(X).__name__}; scale X beforehand or "
                            "pass scaling=None")
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
        X = validate_input(self, X, reset=True, accept_sparse="csr", array_libraries="any",
                           library_blocks=True)
        blocks = run_eagerly(as_row_blocks(X, block_rows=self.block_rows, name="X"))
        if self.scaling is not None:
            blocks = scaled_blocks(blocks, self._fit_scaler(blocks, self.scaling)[0])
        return self._fit_rows(blocks)

    def partial_fit(self, X, y=None):
        """Merge the centred sketch of the rows of ``X`` into the fitted one.

        :meth:`fit` or the first call fixes the sketch size (the default is
        capped at ``n_features + 1`` here, not by the rows of the first batch) and
        ``n_components_`` (``None`` keeps ``min(n_samples, n_features)`` of the
        first batch, as :class:`sklearn.decomposition.IncrementalPCA` does; a
        fraction or ``"mle"`` is re-chosen at every call). Each call sketches its
        batch centred on its own mean and merges it with the parallel-variance row
        (Ghashami et al. 2016, Section 3), so any batching of
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
        X = validate_input(self, X, reset=first, accept_sparse="csr", array_libraries="any",
                           library_blocks=True)
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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
