"""Column centring and scaling of integer (or float) matrices, one block at a time.

Genotype dosages are small integers (``int8``, ``0..ploidy`` alternate alleles,
a sentinel such as ``-1`` for a missing call). Their principal components are
those of the matrix with every column (variant) centred on the mean of its
called entries, divided by a scale, and every missing call set to the column
mean (zero after centring). Nothing here holds more than one block as floats:

* :func:`column_moments_block` gives, per column of a block, the number of
  called entries, their mean, the sum of squared deviations from it, their
  minimum and maximum, and per row the number of missing entries;
* :func:`merge_column_moments` merges such summaries (Chan, Golub and LeVeque,
  "Updating formulae and a pairwise algorithm for computing sample variances",
  1979), so a tree of merges gives the moments of the whole matrix;
* :func:`column_scaling` turns them into means and scales: ``"patterson"``
  (Patterson, Price and Reich, PLoS Genetics 2006, eq. 3, as scikit-allel's and
  sgkit's ``PattersonScaler``: allele frequency ``p = mean / ploidy``, scale
  ``sqrt(p (1 - p))``), ``"standard"`` (the standard deviation of the column
  once imputed, as scikit-learn's ``SimpleImputer(strategy="mean")`` then
  ``StandardScaler`` give it) or None (centring only);
* :class:`ColumnScaler` converts one block: a float copy, centred, scaled, the
  missing entries set to 0.

numpy only: these functions run in the block tasks on workers.
"""

from __future__ import annotations

import numbers

import numpy as np

from dasketch.kernels.deprecation import renamed_constants

SCALINGS = ("patterson", "standard", None)
__getattr__ = renamed_constants(__name__, {"SCALERS": "SCALINGS"}, globals())
# Rows of the moments array of :func:`column_moments_block`.
COUNT, MEAN, M2, LOW, HIGH = range(5)


def is_nan_sentinel(missing):
    """Whether ``missing`` says that NaN entries are the missing ones."""
    return isinstance(missing, numbers.Real) and not isinstance(missing, numbers.Integral) \
        and bool(np.isnan(missing))


def check_missing(missing, dtype, name="missing"):
    """``missing`` checked against the matrix's ``dtype``: None, NaN (only
    meaningful for float matrices) or a real number the dtype can hold.

    Examples
    --------
    >>> check_missing(-1, np.dtype("int8"))
    -1
    >>> check_missing(-1, np.dtype("uint8"))
    Traceback (most recent call last):
    ...
    ValueError: missing must be None, NaN or a value of the matrix's dtype uint8, got -1
    """
    if missing is None or is_nan_sentinel(missing):
        return missing
    dtype = np.dtype(dtype)
    ok = isinstance(missing, numbers.Real) and not isinstance(missing, (bool, np.bool_))
    if ok and dtype.kind in "iu":
        info = np.iinfo(dtype)
        ok = float(missing).is_integer() and info.min <= missing <= info.max
    elif ok:
        ok = bool(np.isfinite(missing))
    if not ok:
        raise ValueError(f"{name} must be None, NaN or a value of the matrix's dtype {dtype}, "
                         f"got {missing!r}")
    return missing


def missing_mask(block, missing):
    """Boolean mask of the missing entries of ``block``, or None when none can
    be missing (``missing`` None, or NaN in an integer block)."""
    if missing is None:
        return None
    if is_nan_sentinel(missing):
        return np.isnan(block) if block.dtype.kind == "f" else None
    return block == missing


def _float_dtype(dtype):
    return np.dtype(np.float32) if np.dtype(dtype) == np.float32 else np.dtype(np.float64)


def column_moments_block(block, start, stop, *, missing):
    """Moments of the called entries of every column of ``block`` and the
    number of missing entries of every row.

    Returns
    -------
    moments : ndarray of shape (5, n_columns)
        float64 rows ``COUNT, MEAN, M2, LOW, HIGH``: the number of called
        entries, their mean, the sum of their squared deviations from it, their
        minimum and maximum (``+inf`` / ``-inf`` without any). NaN entries that
        are not ``missing`` make the column's moments NaN.
    row_missing : ndarray of shape (n_rows,)
        int64.
    """
    values = np.array(block, dtype=np.float64)  # the block's one float copy
    mask = missing_mask(block, missing)
    n_rows, n_columns = values.shape
    moments = np.empty((5, n_columns))
    if mask is None:
        called = None
        row_missing = np.zeros(n_rows, dtype=np.int64)
        moments[COUNT] = n_rows
    else:
        called = ~mask
        row_missing = mask.sum(axis=1, dtype=np.int64)
        moments[COUNT] = n_rows - mask.sum(axis=0)
        values[mask] = 0.0
    moments[LOW] = values.min(axis=0, where=called, initial=np.inf) if called is not None \
        else values.min(axis=0, initial=np.inf)
    moments[HIGH] = values.max(axis=0, where=called, initial=-np.inf) if called is not None \
        else values.max(axis=0, initial=-np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        moments[MEAN] = np.where(moments[COUNT] > 0, values.sum(axis=0) / moments[COUNT], 0.0)
    values -= moments[MEAN]
    if mask is not None:
        values[mask] = 0.0
    moments[M2] = np.einsum("ij,ij->j", values, values)
    return moments, row_missing


def merge_column_moments(*parts):
    """Merge ``(moments, row_missing)`` summaries of consecutive row blocks, in
    order (Chan, Golub and LeVeque 1979: counts add, means are weighted, and
    ``M2 = M2_a + M2_b + delta^2 n_a n_b / n``)."""
    total, rows = parts[0][0].copy(), [parts[0][1]]
    for moments, row_missing in parts[1:]:
        n_a, n_b = total[COUNT], moments[COUNT]
        n = n_a + n_b
        with np.errstate(invalid="ignore", divide="ignore"):
            weight = np.where(n > 0, n_b / n, 0.0)
            delta = moments[MEAN] - total[MEAN]
            total[M2] += moments[M2] + delta * delta * n_a * weight
        total[MEAN] += delta * weight
        total[COUNT] = n
        total[LOW] = np.minimum(total[LOW], moments[LOW])
        total[HIGH] = np.maximum(total[HIGH], moments[HIGH])
        rows.append(row_missing)
    return total, np.concatenate(rows)


def column_scaling(moments, scaling, ploidy=2, n_rows=None):
    """Means and scales of the columns from their merged ``moments``.

    ``"patterson"``: ``p = mean / ploidy`` and scale ``sqrt(p (1 - p))``;
    ``"standard"``: the standard deviation (``ddof=0``) of the column with its
    missing entries imputed to the mean, ``sqrt(M2 / n_rows)`` (imputed
    entries add no deviation; ``n_rows`` defaults to the largest count);
    None: scale 1. A column with a zero scale (one value at every called
    entry) keeps scale 1, as :class:`sklearn.preprocessing.StandardScaler`
    does: it becomes zero. A column without any called entry has mean 0.

    Examples
    --------
    >>> block = np.array([[0, 2], [1, -1], [2, 2]], dtype=np.int8)
    >>> moments, row_missing = column_moments_block(block, 0, 3, missing=-1)
    >>> mean, scale = column_scaling(moments, "patterson")
    >>> mean.tolist(), scale.tolist(), row_missing.tolist()
    ([1.0, 2.0], [0.5, 1.0], [0, 1, 0])
    """
    if scaling not in SCALINGS:
        raise ValueError(f"scaling must be one of {SCALINGS}, got {scaling!r}")
    mean = moments[MEAN].copy()
    if scaling == "patterson":
        p = mean / ploidy
        scale = np.sqrt(np.clip(p * (1.0 - p), 0.0, None))
    elif scaling == "standard":
        n_rows = moments[COUNT].max() if n_rows is None else n_rows
        scale = np.sqrt(moments[M2] / max(n_rows, 1))
    else:
        scale = np.ones_like(mean)
    scale[~(scale > 0)] = 1.0
    return mean, scale


class ColumnScaler:
    """``(block - mean) / scale`` with the ``missing`` entries set to 0 (the
    column mean, imputed): one new float array the size of the block, float32
    for float32 blocks, else float64.

    Examples
    --------
    >>> scaler = ColumnScaler(np.array([1.0, 2.0]), np.array([0.5, 1.0]), missing=-1)
    >>> scaler(np.array([[0, 2], [1, -1]], dtype=np.int8)).tolist()
    [[-2.0, 0.0], [0.0, 0.0]]
    """

    def __init__(self, mean, scale, missing=None):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.inverse_scale = 1.0 / np.asarray(scale, dtype=np.float64)
        self.missing = missing

    def __call__(self, block):
        out = np.array(block, dtype=_float_dtype(block.dtype))
        mask = missing_mask(block, self.missing)
        out -= self.mean.astype(out.dtype, copy=False)
        out *= self.inverse_scale.astype(out.dtype, copy=False)
        if mask is not None:
            out[mask] = 0.0
        return out

    def __dask_tokenize__(self):
        import hashlib  # noqa: PLC0415 - only where Dask names a task

        digest = hashlib.sha1(self.mean.tobytes() + self.inverse_scale.tobytes()).hexdigest()
        return (type(self).__name__, digest, repr(self.missing))
