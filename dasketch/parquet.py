"""Parquet datasets as input to every estimator and function of the package
(:func:`read_parquet`); pyarrow reads them, in the block tasks."""

from __future__ import annotations

from dasketch._blocks import ParquetSource, open_parquet

__all__ = ["ParquetSource", "read_parquet"]


def read_parquet(path, columns=None, *, storage_options=None):
    """Open a Parquet dataset as a lazy matrix, for ``fit`` and every function.

    Only the files' footers are read here (the row groups' sizes and the
    schema); the rows are read by the block tasks, each reading the row groups
    that hold its block, one at a time, so no task and not the client holds the
    table. It is what ``dask.dataframe.read_parquet`` is to a Dask DataFrame:
    ``SketchPCA().fit(read_parquet("features.parquet", columns=[...]))`` reads
    the columns it names, where they are. Each file's signature (local: size,
    modification and status-change time, inode; fsspec: size and ETag, hash or
    modification time) is noted here and checked by every task after its read,
    so a file rewritten since is an error; open it again after a rewrite.

    Parameters
    ----------
    path : str or os.PathLike
        A Parquet file or a directory of them (partitioned as Spark and Dask
        write them; files and directories whose names start with ``_`` or ``.``
        are not data, and hive partition values are not read), local or an
        fsspec URL (``s3://bucket/features.parquet``).
    columns : list of str, optional
        The features, in this order; default every column except the index
        columns pandas wrote. Each must be integer or floating: any other column
        is an error naming it. Integers are read as float64 and nulls as NaN,
        which the estimators reject as they reject NaN.
    storage_options : dict, optional
        Passed to fsspec for a URL (credentials, endpoints).

    Returns
    -------
    ParquetSource
        Its ``shape``, ``dtype``, ``columns`` and ``files``; pass it as ``X``.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``, or a directory without data files.
    ValueError
        A file that is not Parquet, a column that a file lacks, or a column
        that is not numeric, named.

    See Also
    --------
    dasketch.sketch : Takes a Parquet path with ``columns=`` directly.

    Examples
    --------
    >>> import os, tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
    >>> from dasketch import SketchPCA, read_parquet
    >>> path = os.path.join(tempfile.mkdtemp(), "features.parquet")
    >>> rng = np.random.default_rng(0)
    >>> pq.write_table(pa.table({"a": rng.standard_normal(500), "b": rng.standard_normal(500),
    ...                          "id": np.arange(500), "name": ["x"] * 500}), path,
    ...                row_group_size=100)
    >>> X = read_parquet(path, columns=["a", "b"])
    >>> X.shape, X.dtype.name
    ((500, 2), 'float64')
    >>> SketchPCA(n_components=1, random_state=0).fit(X).n_features_in_
    2
    """
    return open_parquet(path, columns, storage_options, name="path")
