"""Principal components of genotype matrices, as statistical geneticists run them.

A genotype matrix holds, per variant and sample, the dosage of the alternate
allele (``0..ploidy``, usually ``int8``) or a sentinel for a missing call. Its
principal components of samples are those of the matrix with samples as rows,
every variant centred on the mean of its called dosages and divided by
Patterson's scale ``sqrt(p (1 - p))`` (``p`` the allele frequency, Patterson,
Price and Reich, PLoS Genetics 2006), and every missing call imputed to the
variant's mean. :func:`pca` takes the matrix as sgkit, scikit-allel and plink
lay it out, variants by samples, and returns ``(coords, model)`` as
``allel.pca`` does; :class:`GenotypePCA` is the estimator, with samples as rows
as every scikit-learn estimator has them.

The dosages are never copied as floats: one blocked pass computes every
variant's mean, scale and missing calls, and each block task of the
sketch and of the later passes centres, scales and imputes the block it reads,
one float block at a time. Missing calls are counted per variant and per sample and reported on
the model.
"""

from __future__ import annotations

import numbers

import numpy as np

from dasketch._blocks import (
    compute,
    is_dask_collection,
    scaled_blocks,
    stored_array,
    transposed_store_blocks,
)
from dasketch.decomposition import SketchPCA
from dasketch.kernels.column_scaling import (
    COUNT,
    HIGH,
    LOW,
    check_missing,
)
from dasketch.kernels.deprecation import DEPRECATED, renamed_parameter
from dasketch.utils._sklearn_compat import Hidden, StrOptions
from dasketch.utils.params import Interval
from dasketch.utils.validation import validate_input

__all__ = ["GenotypePCA", "pca"]


class GenotypePCA(SketchPCA):
    """PCA of samples by variants, each variant scaled inside the block tasks.

    :class:`dasketch.SketchPCA` of samples (rows) by variants (columns), each
    variant centred, scaled and its missing calls imputed by the task that reads
    its block. :meth:`fit` makes one blocked pass for the variants' means, scales and
    missing calls, then fits :class:`~dasketch.SketchPCA` to the scaled matrix
    (its sketch pass and the pass that measures the variance along the
    components); :meth:`transform` scales new samples with the fitted means and
    scales. The results are those of :class:`~dasketch.SketchPCA` on the
    explicitly scaled float matrix, up to rounding, and carry its certified
    ``eigenvalue_bound_``.

    Parameters
    ----------
    n_components : int, float in (0, 1), "mle" or None, default 10
        As :class:`~dasketch.SketchPCA`.
    sketch_size : int, "exact" or None, optional
        As :class:`~dasketch.SketchPCA`.
    scaling : {"patterson", "standard"} or None, default "patterson"
        ``"patterson"`` (as scikit-allel's and sgkit's ``pca``): divide
        each variant by ``sqrt(p (1 - p))``, ``p = mean / ploidy``, which needs
        every called dosage in ``[0, ploidy]``; ``"standard"``: by the standard
        deviation of the variant with its missing calls imputed (as
        scikit-learn's ``SimpleImputer(strategy="mean")`` then
        ``StandardScaler``); None: centre only. A variant with the
        same dosage at every called sample (scale 0) becomes zero.
    ploidy : int, default 2
        Copies of each chromosome; the dosages lie in ``[0, ploidy]``.
    missing : int, float, NaN or None, default -1
        The value of a missing call; NaN for float dosages with
        NaN gaps; None when nothing is missing. Missing calls are imputed to
        the variant's mean (0 after centring), as plink's ``--pca`` and
        scikit-allel do.
    method : {"rfd", "fd"}, default "rfd"
        As :class:`~dasketch.SketchPCA`.
    whiten : bool, default False
        As :class:`~dasketch.SketchPCA`.
    split_every : int, optional
        As :class:`~dasketch.SketchPCA`.
    block_rows : int, optional
        As :class:`~dasketch.SketchPCA`; blocks of samples.
    random_state : int, numpy.random.Generator or None, optional
        As :class:`~dasketch.SketchPCA`.
    scaler : {"patterson", "standard"} or None, default "deprecated"
        The former name of ``scaling``, served with a ``FutureWarning`` until
        its removal in 0.3.

    Attributes
    ----------
    scaler_mean_ : ndarray of shape (n_features,)
        Mean dosage of each variant's called entries (``ploidy`` times the
        allele frequency).
    scaler_scale_ : ndarray of shape (n_features,)
        The divisor of each centred variant.
    missing_per_variant_ : ndarray of shape (n_features,)
        Missing calls imputed, per variant, by :meth:`fit`.
    missing_per_sample_ : ndarray of shape (n_samples,)
        Missing calls imputed, per sample (row), by :meth:`fit`.
    n_missing_ : int
        Missing calls imputed by :meth:`fit`.
    components_, explained_variance_, explained_variance_ratio_, eigenvalue_bound_, ...
        Those of :class:`~dasketch.SketchPCA`, of the scaled matrix (whose
        ``mean_`` is zero up to rounding).

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.genotype import GenotypePCA
    >>> rng = np.random.default_rng(0)
    >>> G = rng.binomial(2, rng.uniform(0.1, 0.9, 40), size=(60, 40)).astype(np.int8)
    >>> G[3, 5] = -1  # a missing call
    >>> model = GenotypePCA(n_components=2).fit(G)
    >>> model.transform(G).shape, model.n_missing_, int(model.missing_per_sample_[3])
    ((60, 2), 1, 1)
    """

    _parameter_constraints = {
        **SketchPCA._parameter_constraints,
        "scaling": [StrOptions({"patterson", "standard"}), None],
        "scaler": [StrOptions({"patterson", "standard"}), Hidden(StrOptions({DEPRECATED})),
                   None],
        "ploidy": [Interval(numbers.Integral, 1, None, closed="left")],
        "missing": [numbers.Real, None],
    }

    def __init__(self, n_components=10, sketch_size=None, *, scaling="patterson", ploidy=2,
                 missing=-1, method="rfd", whiten=False, split_every=None, block_rows=None,
                 random_state=None, scaler=DEPRECATED):
        super().__init__(n_components, sketch_size, method=method, whiten=whiten,
                         split_every=split_every, block_rows=block_rows,
                         random_state=random_state, scaling=scaling)
        self.scaler = scaler
        self.ploidy = ploidy
        self.missing = missing

    def _missing_value(self, dtype):
        return check_missing(self.missing, dtype)

    def __setstate__(self, state):
        # a GenotypePCA pickled before scaler= was renamed scaling= (scaling None)
        if state.get("scaler", DEPRECATED) != DEPRECATED:
            state = {**state, "scaling": state["scaler"], "scaler": DEPRECATED}
        super().__setstate__(state)

    def _learn_scaling(self, blocks):
        scaling = renamed_parameter(type(self).__name__, "scaler", "scaling", self.scaler,
                                    self.scaling, new_default="patterson")
        scaler, moments, row_missing = self._fit_scaler(blocks, scaling, self.ploidy)
        called = moments[COUNT] > 0
        if scaling == "patterson":
            outside = called & ((moments[LOW] < 0) | (moments[HIGH] > self.ploidy))
            if outside.any():
                j = int(np.flatnonzero(outside)[0])
                raise ValueError(
                    f"X has dosages outside [0, ploidy={self.ploidy}] in {int(outside.sum())} "
                    f"variants (first: column {j}, from {moments[LOW, j]:g} to "
                    f"{moments[HIGH, j]:g}); Patterson scaling needs allele counts: set "
                    f"missing= to the missing-call value (now {self.missing!r}) or ploidy=, "
                    "or use scaling='standard'")
        self.missing_per_variant_ = (blocks.n_rows - moments[COUNT]).astype(np.int64)
        self.missing_per_sample_ = row_missing
        self.n_missing_ = int(row_missing.sum())
        return scaler

    def fit(self, X, y=None):
        """Learn the variants' scaling, then fit the PCA of the scaled samples.

        One pass for the variants' means, scales and missing calls, then
        :meth:`dasketch.SketchPCA.fit` of the samples each task scales.

        Parameters
        ----------
        X : array-like, dask.array.Array, zarr.Array, str or os.PathLike
            Samples (rows) by variants (columns), dense: numpy (``int8`` is
            read as it is), Dask, ``zarr.Array`` or zarr path/URL.
        y : None, optional
            Ignored.

        Returns
        -------
        self : GenotypePCA
            Fitted.
        """
        self._validate_params()
        blocks = self._blocks(X)
        scaled = scaled_blocks(blocks, self._learn_scaling(blocks))
        validate_input(self, scaled, reset=True)
        return self._fit_rows(scaled)

    def partial_fit(self, X, y=None):
        """Refuse: the scaling needs the moments of every sample first.

        Parameters
        ----------
        X : array-like
            Ignored.
        y : None, optional
            Ignored.

        Raises
        ------
        NotImplementedError
            Always; use :meth:`fit`.
        """
        raise NotImplementedError(f"{type(self).__name__} scales each variant by the moments "
                                  "of all samples, which needs the whole matrix: use fit")


def _samples_by_variants(dosages, block_rows):
    """The transpose of a variants-by-samples matrix, without reading it: a
    zarr store (or a Dask array reading one) as row blocks read across its row
    chunks by the tasks, other inputs transposed as they are."""
    if type(dosages).__module__.split(".")[0] == "xarray":
        dosages = dosages.data
    store = stored_array(dosages)
    if store is not None:
        return transposed_store_blocks(store, block_rows=block_rows, name="dosages")
    if not is_dask_collection(dosages):
        dosages = np.asarray(dosages)
    if dosages.ndim != 2:
        raise ValueError(f"dosages must be 2-D (variants, samples), got shape "
                         f"{tuple(dosages.shape)}")
    return dosages.T


def pca(dosages, n_components=10, *, scaling="patterson", ploidy=2, missing=-1,
        sketch_size=None, method="rfd", block_rows=None, split_every=None, random_state=None,
        scaler=DEPRECATED):
    """Principal components of the samples of a genotype matrix.

    As ``allel.pca(gn, n_components, scaler=, ploidy=)`` computes them, from a
    sketch with a certified bound, with missing calls imputed in the tasks.

    Parameters
    ----------
    dosages : array-like, dask.array.Array, xarray.DataArray, zarr.Array, str or os.PathLike
        Alternate-allele dosages of shape ``(n_variants, n_samples)``, as
        sgkit (``call_dosage``), scikit-allel and plink lay them out; integer
        (``int8``) or float. A zarr path or array is read lazily.
    n_components : int, default 10
        Components to keep.
    scaling : {"patterson", "standard"} or None, default "patterson"
        Of :class:`GenotypePCA`.
    ploidy : int, default 2
        Of :class:`GenotypePCA`.
    missing : int, float, NaN or None, default -1
        Of :class:`GenotypePCA`.
    sketch_size : int, "exact" or None, optional
        Of :class:`GenotypePCA`.
    method : {"rfd", "fd"}, default "rfd"
        Of :class:`GenotypePCA`.
    block_rows : int, optional
        Samples per block.
    split_every : int, optional
        Of :class:`GenotypePCA`.
    random_state : int, numpy.random.Generator or None, optional
        Of :class:`GenotypePCA`.
    scaler : {"patterson", "standard"} or None, default "deprecated"
        The former name of ``scaling``, served with a ``FutureWarning`` until
        its removal in 0.3.

    Returns
    -------
    coords : ndarray of shape (n_samples, n_components)
        The samples' coordinates on the components.
    model : GenotypePCA
        Fitted to the samples: ``components_`` (variant loadings),
        ``explained_variance_`` (measured on the data),
        ``explained_variance_ratio_``, ``eigenvalue_bound_`` (the sketch's
        certified bound on every covariance eigenvalue), ``scaler_mean_``
        (``ploidy`` times each variant's allele frequency), ``scaler_scale_``,
        ``missing_per_variant_``, ``missing_per_sample_`` and ``n_missing_``.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch.genotype import pca
    >>> rng = np.random.default_rng(1)
    >>> gn = rng.binomial(2, 0.3, size=(200, 30)).astype(np.int8)  # variants x samples
    >>> coords, model = pca(gn, n_components=3)
    >>> coords.shape, model.components_.shape
    ((30, 3), (3, 200))
    """
    scaling = renamed_parameter("pca", "scaler", "scaling", scaler, scaling,
                                new_default="patterson")
    model = GenotypePCA(n_components, sketch_size, scaling=scaling, ploidy=ploidy,
                        missing=missing, method=method, block_rows=block_rows,
                        split_every=split_every, random_state=random_state)
    blocks = model._blocks(_samples_by_variants(dosages, block_rows))
    coords = model.fit(blocks).transform(blocks)
    if not isinstance(coords, np.ndarray):
        (coords,) = compute(coords)
    return coords, model
