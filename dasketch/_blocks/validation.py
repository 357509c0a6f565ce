"""Input validation shared by the estimators.

scikit-learn's validation utilities check in-memory inputs; what they do not
cover is out-of-core input (Dask arrays, ``zarr.Array`` objects, zarr paths and
fsspec URLs), which is read lazily block by block and whose values are checked
by the kernels during the pass that reads them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from sklearn import get_config
from sklearn.utils.validation import column_or_1d, validate_data

from dasketch._blocks.array_libraries import block_namespace
from dasketch._blocks.inputs import as_row_blocks, is_out_of_core
from dasketch._blocks.readers import check_array_library, host_values
from dasketch._blocks.readers.array_types import foreign_array_type
from dasketch._blocks.row_blocks import run_eagerly
from dasketch._blocks.scheduler import compute, is_dask_collection

FLOAT_DTYPES = (np.float64, np.float32)


def _check_out_of_core_features(estimator, blocks, reset):
    if reset:
        estimator.n_features_in_ = blocks.n_features
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
        return
    expected = getattr(estimator, "n_features_in_", None)
    if expected is not None and blocks.n_features != expected:
        raise ValueError(f"X has {blocks.n_features} features, but "
                         f"{type(estimator).__name__} is expecting {expected} features "
                         "as input.")


def _check_not_1d(X):
    # scikit-learn's own message for 1-D X does not name the argument
    if not scipy.sparse.issparse(X) and hasattr(X, "__len__") and np.ndim(X) == 1:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got 1-D input with shape "
                         f"{np.shape(X)}. Reshape your data either using X.reshape(-1, 1) if "
                         "it has a single feature or X.reshape(1, -1) if it contains a "
                         "single sample.")


def validate_input(estimator, X, y="no_validation", *, reset, accept_sparse=("csr", "csc"),
                   dtype=FLOAT_DTYPES, y_numeric=False, array_libraries="numpy",
                   library_blocks=False):
    """Validate ``X`` (and ``y``) as ``fit`` (``reset=True``) or ``predict``,
    ``transform`` and ``score`` (``reset=False``) do.

    In-memory input (numpy, lists, pandas DataFrames, scipy.sparse in any format)
    goes through :func:`sklearn.utils.validation.validate_data`: NaN/Inf,
    complex and object dtypes, 1-D ``X``, empty input, the feature count and
    ``n_features_in_`` / ``feature_names_in_`` are checked or set there.
    Out-of-core input becomes :class:`~dasketch._blocks.RowBlocks` (rows per
    block from the estimator's ``block_rows`` if it has one); its shape, dtype
    and feature count are checked here. A Dask DataFrame, or a Dask array with
    unknown row chunk sizes, first has its chunk sizes computed
    (:func:`dasketch._blocks.known_row_chunks`).

    Parameters
    ----------
    estimator : BaseEstimator
    X : array-like, sparse matrix, DataFrame, dask.array.Array, dask DataFrame, zarr.Array, \
str or PathLike
    y : array-like, optional
        Targets; ``"no_validation"`` (default) to validate ``X`` only, None when
        ``y`` is required but was not given (raises).
    reset : bool
        True in ``fit``: record ``n_features_in_``; False elsewhere: check it.
    accept_sparse, dtype
        As in :func:`sklearn.utils.check_array` for in-memory input.
    y_numeric : bool
        Require finite real targets (regression); they come back as float64.
    array_libraries : {"numpy", "any"}, default "numpy"
        ``"any"``: an array of another library (a CuPy array, a Dask array of
        CuPy blocks, :mod:`dasketch._blocks.readers.array_types`) is checked as
        blocks of that library and comes back as it is, never converted by
        scikit-learn, its values checked by the passes that read it;
        ``"numpy"``: a ``TypeError``.
    library_blocks : bool, default False
        With ``array_libraries="any"``, return such an array as its
        ``RowBlocks`` instead (an array in memory as eager blocks,
        :func:`~dasketch._blocks.run_eagerly`), for estimators that compute on
        blocks only.

    Returns
    -------
    X or (X, y)
        ``X`` as an ndarray, a sparse matrix or ``RowBlocks``; ``y`` as a 1-D
        ndarray on the host.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import Ridge
    >>> est = Ridge()
    >>> X, y = validate_input(est, np.ones((3, 2)), [1, 2, 3], reset=True)
    >>> est.n_features_in_, y.dtype.name
    (2, 'int64')
    >>> validate_input(est, np.ones((3, 4)), reset=False)
    Traceback (most recent call last):
    ...
    ValueError: X has 4 features, but Ridge is expecting 2 features as input.
    """
    check_array_library(X, "X", array_libraries)  # before scikit-learn converts it
    if not is_out_of_core(X) and foreign_array_type(X) is None:
        _check_not_1d(X)
        if isinstance(y, str) and y == "no_validation":
            return validate_data(estimator, X, reset=reset, accept_sparse=accept_sparse,
                                 dtype=dtype)
        return validate_data(estimator, X, y, reset=reset, accept_sparse=accept_sparse,
                             dtype=dtype, y_numeric=y_numeric)
    blocks = row_blocks_in_library(X, getattr(estimator, "block_rows", None),
                                   array_libraries=array_libraries, eager=library_blocks)
    library = foreign_array_type(X) is not None
    _check_out_of_core_features(estimator, blocks, reset)
    checked = X if library and not library_blocks else blocks
    if isinstance(y, str) and y == "no_validation":
        return checked
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the "
                         "target y is None")
    return checked, as_target_vector(y, blocks.n_rows, real=y_numeric)


def row_blocks_in_library(X, block_rows, *, array_libraries="any", eager=True):
    """``RowBlocks`` of ``X`` (:func:`~dasketch._blocks.as_row_blocks` with
    ``array_libraries``); with ``eager``, those of an array of another library in
    memory as eager blocks (:func:`~dasketch._blocks.run_eagerly`), as the
    estimators that compute on blocks take them."""
    blocks = as_row_blocks(X, name="X", block_rows=block_rows, array_libraries=array_libraries)
    if eager and foreign_array_type(X) is not None and not is_out_of_core(X):
        blocks = run_eagerly(blocks, threaded=True)
    return blocks


def host_targets(y):
    """Targets as an array in this process's memory on the host: an array of
    another library (CuPy) copied to numpy (:func:`host_values`), Dask input
    computed (targets are n values, small next to X)."""
    y = host_values(y)
    if is_dask_collection(y):
        (y,) = compute(y)
    return y


def result_meta(X, ndim, dtype):
    """Where an estimator's results for ``X`` go, by scikit-learn's array API
    convention: None (numpy on the host) for numpy ``X``, and for ``X`` of another
    library (:func:`~dasketch._blocks.readers.array_types.foreign_array_type`)
    unless scikit-learn's ``array_api_dispatch`` is on; then an empty array of
    ``X``'s library (``ndim`` dimensions, the standard dtype named as the numpy
    ``dtype``), for :func:`~dasketch._blocks.map_rows` to keep them there."""
    if foreign_array_type(X) is None or not get_config()["array_api_dispatch"]:
        return None
    xp = block_namespace(X._meta if is_dask_collection(X) else X)
    return xp.empty((0,) * ndim, dtype=getattr(xp, np.dtype(dtype).name))


def as_target_vector(y, n_rows, *, name="y", matrix="X", real=False):
    """Targets or labels as a 1-D numpy vector of ``n_rows`` entries.

    Dask input is computed (targets are n values, small next to the matrix); an
    ``(n, 1)`` column is flattened with a ``DataConversionWarning``. With
    ``real=True`` the values must be finite real numbers and come back as
    float64.

    Examples
    --------
    >>> import numpy as np
    >>> as_target_vector([1, 2, 3], 3, real=True)
    array([1., 2., 3.])
    """
    y = np.asarray(host_targets(y))
    if y.ndim not in (1, 2) or (y.ndim == 2 and y.shape[1] != 1):
        raise ValueError(f"{name} must be 1-D, got shape {y.shape}")
    y = column_or_1d(y, warn=True)  # DataConversionWarning for a column, as scikit-learn
    if y.shape[0] != n_rows:
        raise ValueError(f"{name} has {y.shape[0]} entries but {matrix} has {n_rows} rows; "
                         "they must match")
    if real:
        if y.dtype.kind not in "biuf":
            raise TypeError(f"{name} must hold real numbers, got dtype {y.dtype}")
        y = y.astype(np.float64)
        if not np.isfinite(y).all():
            raise ValueError(f"{name} contains NaN or Inf; only finite values are accepted")
    return y
