"""Empirical orthogonal functions (EOFs, principal components) of xarray data.

A field such as sea-surface temperature on ``(time, lat, lon)`` becomes a matrix
whose rows are the samples (``sample_dim``) and whose columns are the grid
points (the other dimensions, stacked). Grid points that are NaN at every
sample (a land mask) are dropped before the analysis and come back as NaN in the
patterns; grid points may be weighted (area weights, e.g. ``sqrt(cos(lat))``).
The EOFs are then the principal axes of :class:`dasketch.SketchPCA` fitted to
the weighted, masked, centred matrix, and every number comes with the sketch's
certified bound. xarray is imported only when these functions run (install
``dasketch[xarray]``).

A Dask-backed DataArray stays lazy: the data are read in blocks by one pass
that counts NaN per grid point, then by the sketch's passes; the scores come
back as a lazy Dask array. A variable opened from a zarr store
(``xr.open_zarr``, ``xr.open_dataset(engine="zarr")``) and passed as it is
opened is read from the store by the block tasks themselves: each reads its
samples across all the store's chunks and drops the mask and applies the
weights, so a store chunked along space is neither reshaped nor rechunked.
Where those reads would decode every
chunk 1.5 times a pass or more, the EOFs come from the sketch of the
transpose instead, read by blocks of grid points, every chunk decoded once a
pass, with the same statement; its last
pass gives the scores too (in memory, ``n_samples x n_modes``).
``attrs["plan"]`` of the result says which plan ran.
"""

from __future__ import annotations

import numpy as np

from dasketch._blocks import (
    compute,
    masked_weighted,
    stacked_plan,
    stacked_store_blocks,
    stacked_transposed_blocks,
)
from dasketch._optional import import_optional
from dasketch.decomposition import SketchPCA
from dasketch.decomposition._transposed import TRANSPOSED_AMPLIFICATION
from dasketch.storage.reading import open_store_array

__all__ = ["eofs"]


def _data_array(data, variable):
    """``(DataArray, source)``: the variable, and the path of the store its
    Dataset was opened from (``encoding["source"]``), if any."""
    xr = import_optional("xarray", "xarray")
    if isinstance(data, xr.Dataset):
        names = list(data.data_vars)
        if variable is None and len(names) == 1:
            variable = names[0]
        if variable not in data.data_vars:
            raise ValueError(f"variable must name one of the Dataset's variables {names}, "
                             f"got {variable!r}")
        return data[variable], data.encoding.get("source")
    if not isinstance(data, xr.DataArray):
        raise TypeError("data must be an xarray.DataArray or Dataset, got "
                        f"{type(data).__name__}")
    if variable is not None:
        raise ValueError("variable applies only when data is an xarray.Dataset")
    return data, None


def _backing_store(data, source, sample_dim):
    """The ``zarr.Array`` that ``data`` reads as it is stored, or None.

    ``data`` must be as ``xr.open_zarr`` (or ``open_dataset(engine="zarr")``)
    opened it: Dask-backed with nothing applied since (its graph the opening
    alone), with the source path in its or its Dataset's ``encoding``, no
    decoding that changes stored values (``scale_factor``, ``add_offset``, a
    ``_FillValue`` other than NaN), ``sample_dim`` first, and the shape and
    dtype of the stored array: the one xarray's backend wraps, else the one
    named after ``data`` in the store at ``encoding["source"]``."""
    encoding = data.encoding
    source = encoding.get("source", source)
    array = data.data
    layers = getattr(getattr(array, "dask", None), "layers", {})
    fill = encoding.get("_FillValue")
    if (data.name is None or "preferred_chunks" not in encoding
            or len(layers) != 2 or not str(getattr(array, "name", "")).startswith(
                "open_dataset-") or data.dims[0] != sample_dim
            or "scale_factor" in encoding or "add_offset" in encoding
            or (fill is not None and not (isinstance(fill, float | np.floating)
                                          and np.isnan(fill)))):
        return None
    store = _opened_array(layers)
    if store is None and source is not None:
        try:
            store = open_store_array(source, component=str(data.name), name="data")
        except (ValueError, FileNotFoundError):
            return None
    if store is None or tuple(store.shape) != tuple(data.shape) or store.dtype != data.dtype:
        return None
    return store


def _transposed(store, valid, weights, block_rows, sketch_size):
    """Row blocks of the transpose of the masked, weighted matrix of ``store``
    when reading its rows across the chunks of its second axis would decode
    every chunk at least :data:`~dasketch.decomposition._transposed.TRANSPOSED_AMPLIFICATION`
    times a pass (and the sketch is not ``"exact"``), else None."""
    plan = stacked_plan(store, block_rows, "data")[2]
    if plan is None or plan.amplification < TRANSPOSED_AMPLIFICATION or sketch_size == "exact":
        return None
    return stacked_transposed_blocks(store, valid, weights, block_rows=block_rows, name="data")


def _opened_array(layers):
    """The ``zarr.Array`` that xarray's zarr backend wraps in the opening layer
    of a Dask graph (its ``get_array()``), or None."""
    opening = [layer for key, layer in layers.items() if str(key).startswith("original-")]
    if len(opening) != 1 or len(opening[0]) != 1:
        return None
    wrapped = next(iter(opening[0].values()))
    for _ in range(8):  # the backend's adapters, each holding the next as .array
        if hasattr(wrapped, "get_array"):
            array = wrapped.get_array()
            return array if type(array).__module__.split(".")[0] == "zarr" else None
        wrapped = getattr(wrapped, "array", None)
    return None


def _feature_weights(weights, template, feature_dims):
    """Weights broadcast by name to the feature dimensions, as a flat ndarray."""
    xr = import_optional("xarray", "xarray")
    if not isinstance(weights, xr.DataArray):
        raise TypeError("weights must be an xarray.DataArray over some of the dimensions "
                        f"{feature_dims} (broadcast by name), got {type(weights).__name__}")
    extra = [dim for dim in weights.dims if dim not in feature_dims]
    if extra:
        raise ValueError(f"weights has dimensions {extra} that are not feature dimensions "
                         f"of data {feature_dims}")
    try:
        weights, _ = xr.align(weights, template, join="exact")
    except ValueError as exc:
        raise ValueError(f"weights' coordinates differ from data's: {exc}") from None
    flat = np.asarray(weights.broadcast_like(template).transpose(*feature_dims).values,
                      dtype=np.float64).ravel()
    if not np.all(np.isfinite(flat)) or np.any(flat < 0):
        raise ValueError("weights must be finite and non-negative")
    return flat


def _valid_features(data, sample_dim, feature_dims):
    """Indices of the stacked grid points (columns) without NaN; those NaN at
    every sample are the mask; a grid point NaN at some samples only is an error
    naming it. One pass over ``data`` (transposed to ``sample_dim`` first),
    without reshaping it."""
    counts = np.isnan(data.data).sum(axis=0)
    if not isinstance(counts, np.ndarray):
        (counts,) = compute(counts)
    counts = np.asarray(counts).ravel()
    n = data.sizes[sample_dim]
    partial = np.flatnonzero((counts > 0) & (counts < n))
    if partial.size:
        where = np.unravel_index(partial[0], [data.sizes[d] for d in feature_dims])
        first = {d: data[d].values[i].item() if d in data.coords else int(i)
                 for d, i in zip(feature_dims, where)}
        raise ValueError(f"data has {partial.size} grid points that are NaN at some but not "
                         f"all {sample_dim} samples (first: {first}); fill them (e.g. "
                         "data.fillna(...)) or mask them at every sample")
    valid = np.flatnonzero(counts == 0)
    if valid.size == 0:
        raise ValueError("data is NaN everywhere: no grid point to analyse")
    return valid


def eofs(data, sample_dim, n_modes=10, *, variable=None, weights=None, sketch_size=None,
         method="rfd", random_state=0, block_rows=None, split_every=None):
    """Compute the EOFs (principal components) of an xarray field from a certified sketch.

    Parameters
    ----------
    data : xarray.DataArray or xarray.Dataset
        Numbers on ``sample_dim`` and any feature dimensions (numpy- or
        Dask-backed; Dask stays lazy). Grid points NaN at every sample are
        masked; NaN at some samples only is a ValueError.
    sample_dim : str
        The dimension whose entries are the samples (rows), e.g. ``"time"``.
    n_modes : int, default 10
        Number of EOFs.
    variable : str, optional
        The variable of a Dataset (needed when it has several).
    weights : xarray.DataArray, optional
        Non-negative weights of the grid points, over some of the feature
        dimensions and broadcast by name (e.g. ``np.sqrt(np.cos(np.deg2rad(
        data.lat)))``); the analysis is of the weighted data, and coordinates
        must match ``data``'s exactly.
    sketch_size : int or "exact", optional
        As for :class:`dasketch.SketchPCA`.
    method : {"rfd", "fd"}, default "rfd"
        As for :class:`dasketch.SketchPCA`.
    random_state : None, int or numpy.random.Generator, default 0
        As for :class:`dasketch.SketchPCA`.
    block_rows, split_every : int, optional
        As for :class:`dasketch.SketchPCA`.

    Returns
    -------
    xarray.Dataset
        ``components`` (mode, feature dims...): the EOFs, orthonormal over the
        unmasked grid points in the weighted space, NaN on the mask;
        ``scores`` (sample_dim, mode): the projections of the weighted,
        centred data on them (lazy for Dask input), of variance
        ``explained_variance``; ``explained_variance`` and
        ``explained_variance_ratio`` (mode), measured on the data;
        ``sketch_eigenvalues`` (mode) and ``eigenvalue_bound``: every exact
        eigenvalue of the weighted covariance lies within
        ``sketch_eigenvalues +- eigenvalue_bound`` (``attrs["guarantee"]``
        says whether certified or with a probability); ``mean`` (feature
        dims). Modes are numbered from 1. Coordinates of ``data`` on the
        feature (sample) dimensions are kept on ``components`` (``scores``).

    See Also
    --------
    dasketch.SketchPCA : The estimator that computes them.
    dasketch.anndata.pca : The same analysis for AnnData objects.

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from dasketch.xarray import eofs
    >>> rng = np.random.default_rng(0)
    >>> field = xr.DataArray(rng.standard_normal((50, 3, 4)), dims=("time", "lat", "lon"),
    ...                      coords={"lat": [-30.0, 0.0, 30.0]})
    >>> field[:, 0, 0] = np.nan  # a land point
    >>> result = eofs(field, "time", 2, weights=np.sqrt(np.cos(np.deg2rad(field.lat))))
    >>> result.components.dims, result.scores.dims
    (('mode', 'lat', 'lon'), ('time', 'mode'))
    >>> bool(result.components.isel(lat=0, lon=0).isnull().all())
    True
    """
    xr = import_optional("xarray", "xarray")
    data, source = _data_array(data, variable)
    if sample_dim not in data.dims:
        raise ValueError(f"sample_dim must be one of data's dimensions {data.dims}, got "
                         f"{sample_dim!r}")
    store = _backing_store(data, source, sample_dim)
    feature_dims = tuple(d for d in data.dims if d != sample_dim)
    data = data.transpose(sample_dim, *feature_dims)
    shape = tuple(data.sizes[d] for d in feature_dims)
    valid = _valid_features(data, sample_dim, feature_dims)
    flat = None
    if weights is not None:
        template = data.isel({sample_dim: 0}, drop=True)
        flat = _feature_weights(weights, template, feature_dims)[valid]
    transposed = None
    if store is not None:  # each task reads its samples across the store's chunks
        matrix = masked_weighted(stacked_store_blocks(store, block_rows=block_rows,
                                                      name="data"), valid, flat)
        transposed = _transposed(store, valid, flat, block_rows, sketch_size)
    else:
        matrix = data.data.reshape(data.sizes[sample_dim], int(np.prod(shape)))
        if valid.size < matrix.shape[1]:
            matrix = matrix[:, valid]
        if flat is not None:
            dtype = matrix.dtype if matrix.dtype.kind == "f" else np.float64
            matrix = matrix * flat.astype(dtype)
    pca = SketchPCA(n_modes, sketch_size, method=method, random_state=random_state,
                    block_rows=block_rows, split_every=split_every)
    pca = pca.fit(matrix) if transposed is None else pca._fit_transposed(transposed)
    # The transposed plan's last pass gave the projections of the rows it fitted.
    scores = pca._fit_scores if pca.plan_ == "transposed" else pca.transform(matrix)
    modes = np.arange(1, pca.n_components_ + 1)

    def unmasked(rows, fill=np.nan):
        full = np.full((rows.shape[0], int(np.prod(shape))), fill, dtype=rows.dtype)
        full[:, valid] = rows
        return full.reshape((rows.shape[0],) + shape)

    def coords(dims):
        return {name: coord for name, coord in data.coords.items()
                if coord.dims and set(coord.dims) <= set(dims)}

    feature_coords = coords(feature_dims)
    return xr.Dataset(
        {"components": xr.DataArray(unmasked(pca.components_), dims=("mode",) + feature_dims,
                                    coords={"mode": modes, **feature_coords}),
         "scores": xr.DataArray(scores, dims=(sample_dim, "mode"),
                                coords={"mode": modes, **coords((sample_dim,))}),
         "explained_variance": ("mode", pca.explained_variance_),
         "explained_variance_ratio": ("mode", pca.explained_variance_ratio_),
         "sketch_eigenvalues": ("mode", pca.sketch_eigenvalues_),
         "eigenvalue_bound": ((), pca.eigenvalue_bound_),
         "mean": xr.DataArray(unmasked(pca.mean_[None])[0], dims=feature_dims,
                              coords=feature_coords)},
        coords={"mode": modes},
        attrs={"sample_dim": sample_dim, "guarantee": pca.sketch_.guarantee,
               "sketch_size": int(pca.sketch_.sketch_size), "method": method,
               "n_samples": int(pca.n_samples_), "weighted": int(weights is not None),
               "plan": pca.plan_ if store is not None else
               ("in memory" if isinstance(data.data, np.ndarray) else "dask array")})
