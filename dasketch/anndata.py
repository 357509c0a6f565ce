"""Principal components of AnnData objects, as ``scanpy.pp.pca`` writes them.

:func:`pca` fits :class:`dasketch.SketchPCA` to ``adata.X`` (or a layer) and
stores the results under scanpy's keys, plus the sketch's certified bound. The
matrix may be in memory (numpy, scipy.sparse, Dask) or on disk: a backed
``.h5ad`` file, or an AnnData whose ``X`` is a sparse dataset of a zarr store
(``anndata.io.sparse_dataset``). On disk, a CSR matrix is read in blocks of
rows by its ``indptr``, and sparse data are centred implicitly: no block is
ever densified. A path works too:
``SketchPCA().fit("adata.zarr/X")`` or ``dasketch.sketch("adata.h5ad", 32,
component="X")``. anndata is imported only when :func:`pca` runs (install
``dasketch[anndata]``).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import scipy.sparse

from dasketch._blocks import as_row_blocks, compute, select_columns
from dasketch._optional import import_optional
from dasketch.decomposition import SketchPCA

__all__ = ["pca"]


def _matrix(adata, layer):
    """The matrix to analyse: in memory as it is, a backed sparse dataset as
    its on-disk group, an HDF5 dataset as it is."""
    if layer is not None:
        if layer not in adata.layers:
            raise ValueError(f"layer must name one of adata.layers {list(adata.layers)}, "
                             f"got {layer!r}")
        X = adata.layers[layer]
    else:
        X = adata.X
    if X is None:
        raise ValueError("adata has no X; pass layer=")
    if getattr(X, "format", None) in ("csr", "csc") and hasattr(X, "group"):
        return X.group  # anndata's backed sparse dataset: read its group by rows
    return X


def _mask(adata, mask_var):
    """``(mask or None, name or None)`` of the genes to analyse."""
    if isinstance(mask_var, str) and mask_var == "auto":
        mask_var = "highly_variable" if "highly_variable" in adata.var else None
    if mask_var is None:
        return None, None
    if isinstance(mask_var, str):
        if mask_var not in adata.var:
            raise ValueError(f"mask_var {mask_var!r} is not a column of adata.var")
        mask = adata.var[mask_var].to_numpy()
    else:
        mask = np.asarray(mask_var)
    if mask.dtype != bool or mask.shape != (adata.n_vars,):
        raise ValueError(f"mask_var must be a boolean mask of the {adata.n_vars} genes (or "
                         f"the name of one in adata.var), got dtype {mask.dtype} and shape "
                         f"{mask.shape}")
    if not mask.any():
        raise ValueError("mask_var selects no gene")
    return mask, mask_var if isinstance(mask_var, str) else None


def _masked_input(X, mask, block_rows):
    """``X`` restricted to the genes of ``mask``: in-memory matrices sliced,
    out-of-core ones as row blocks sliced block by block."""
    in_memory = isinstance(X, np.ndarray) or scipy.sparse.issparse(X)
    everything = mask is None or mask.all()
    if in_memory:
        return X if everything else X[:, np.flatnonzero(mask)]
    blocks = as_row_blocks(X, block_rows=block_rows, name="adata.X")
    return blocks if everything else select_columns(blocks, np.flatnonzero(mask))


def pca(adata, n_comps=None, *, layer=None, zero_center=True, mask_var="auto",
        random_state=0, sketch_size=None, method="rfd", block_rows=None, dtype="float32",
        key_added=None, copy=False):
    """Compute the principal components of an AnnData object from a certified sketch.

    The results are written as ``scanpy.pp.pca`` writes them; the analysis is that
    of :class:`dasketch.SketchPCA`.

    Parameters
    ----------
    adata : anndata.AnnData
        In memory, backed (``anndata.read_h5ad(..., backed="r")``), or with a
        zarr sparse dataset as ``X``; cells are rows.
    n_comps : int, optional
        Number of components; default as scanpy: 50, or ``min(n_obs, n_vars) -
        1`` when that is at most 50.
    layer : str, optional
        Use ``adata.layers[layer]`` instead of ``X``.
    zero_center : bool, default True
        Only True (centred PCA; sparse data are centred implicitly, never
        densified).
    mask_var : "auto", str, bool array or None, default "auto"
        Genes to use: ``"auto"`` is ``adata.var["highly_variable"]``
        when present, as in scanpy, and every gene otherwise; a column name of
        ``adata.var``, a boolean mask, or None for every gene. Masked-out genes
        get zero loadings.
    random_state : None, int or numpy.random.Generator, default 0
        As for :class:`dasketch.SketchPCA`.
    sketch_size : int or "exact", optional
        As for :class:`dasketch.SketchPCA`; an exact sketch (``sketch_size >
        min(n_obs, n_genes)``, the default for small data) gives the exact PCA.
    method : {"rfd", "fd"}, default "rfd"
        As for :class:`dasketch.SketchPCA`.
    block_rows : int, optional
        As for :class:`dasketch.SketchPCA`.
    dtype : str or numpy.dtype, default "float32"
        Of ``obsm["X_pca"]``, as scanpy.
    key_added : str, optional
        Store under this key in ``obsm``, ``varm`` and ``uns`` instead of
        ``"X_pca"``, ``"PCs"`` and ``"pca"``.
    copy : bool, default False
        Return a modified copy instead of writing into ``adata``.

    Returns
    -------
    anndata.AnnData or None
        The copy with ``copy=True``. Written: ``obsm["X_pca"]`` (n_obs,
        n_comps), the centred projections; ``varm["PCs"]`` (n_vars, n_comps),
        the loadings, zero on masked-out genes; ``uns["pca"]`` with
        ``params``, ``variance`` and ``variance_ratio`` (measured on the
        data) and ``dasketch``: ``eigenvalue_bound`` (every exact covariance
        eigenvalue lies within ``sketch_eigenvalues +- eigenvalue_bound``),
        ``sketch_eigenvalues``, ``guarantee`` and ``sketch_size``. A
        ``UserWarning`` names the components whose variance the bound does not
        resolve.

    See Also
    --------
    dasketch.SketchPCA : The estimator that computes them.
    dasketch.xarray.eofs : The same analysis for xarray fields.
    scanpy.pp.pca : The exact peer, whose output layout this follows.

    Examples
    --------
    >>> import numpy as np, anndata
    >>> from dasketch.anndata import pca
    >>> adata = anndata.AnnData(np.random.default_rng(0).poisson(1.0, (60, 8)).astype(float))
    >>> pca(adata, n_comps=3)
    >>> adata.obsm["X_pca"].shape, adata.varm["PCs"].shape, sorted(adata.uns["pca"])
    ((60, 3), (8, 3), ['dasketch', 'params', 'variance', 'variance_ratio'])
    """
    anndata = import_optional("anndata", "anndata")
    if not isinstance(adata, anndata.AnnData):
        raise TypeError(f"adata must be an anndata.AnnData, got {type(adata).__name__}")
    if zero_center is not True:
        raise ValueError("zero_center must be True: dasketch computes centred PCA only "
                         "(scanpy's zero_center=False, a truncated SVD, is not provided)")
    if copy:
        adata = adata.copy()
    mask, mask_name = _mask(adata, mask_var)
    n_genes = adata.n_vars if mask is None else int(mask.sum())
    if n_comps is None:
        smallest = min(adata.n_obs, n_genes)
        n_comps = smallest - 1 if smallest <= 50 else 50
    if not isinstance(n_comps, numbers.Integral) or n_comps < 1:
        raise ValueError(f"n_comps must be a positive integer, got {n_comps!r}")
    X = _masked_input(_matrix(adata, layer), mask, block_rows)
    model = SketchPCA(int(n_comps), sketch_size, method=method, block_rows=block_rows,
                      random_state=random_state).fit(X)
    projections = model.transform(X)
    if not isinstance(projections, np.ndarray):
        (projections,) = compute(projections)
    unresolved = np.flatnonzero(model.explained_variance_ <= model.eigenvalue_bound_)
    if unresolved.size:
        warnings.warn(
            f"components {unresolved[0]}-{model.n_components_ - 1} have variance at most "
            f"the sketch's eigenvalue bound {model.eigenvalue_bound_:.4g}: the sketch "
            "does not resolve them; raise sketch_size (or lower n_comps)", stacklevel=2)
    loadings = np.zeros((adata.n_vars, model.n_components_), dtype=model.components_.dtype)
    loadings[slice(None) if mask is None else mask] = model.components_.T
    keys = ("X_pca", "PCs", "pca") if key_added is None else (key_added,) * 3
    adata.obsm[keys[0]] = np.asarray(projections, dtype=dtype)
    adata.varm[keys[1]] = loadings
    adata.uns[keys[2]] = {
        "params": {"zero_center": True, "use_highly_variable": mask_name == "highly_variable",
                   "mask_var": mask_name},
        "variance": model.explained_variance_,
        "variance_ratio": model.explained_variance_ratio_,
        "dasketch": {"eigenvalue_bound": model.eigenvalue_bound_,
                     "sketch_eigenvalues": model.sketch_eigenvalues_,
                     "guarantee": model.sketch_.guarantee,
                     "sketch_size": int(model.sketch_.sketch_size)}}
    return adata if copy else None
