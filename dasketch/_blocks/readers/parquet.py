"""Parquet datasets, read by pyarrow: a file, a directory of files (as Spark
and Dask write them, partitioned or not), local or at an fsspec URL. Each block
task reads the row groups that hold its rows, one at a time, and only those:
the client reads the files' footers (their row groups' sizes) and nothing else.
Row groups larger than blocks are each read once, by a task of their own that
hands the group on as Arrow, and each block converts only its rows from it
(:func:`group_blocks`), so that no row is decoded or converted more than once a
pass: a task then holds a row group, the file's unit of reading. A process
parses a local file's footer once (the file's signature keys it).

The features follow :mod:`.arrow` (``columns``, numeric columns only, nulls as
NaN). A directory's files are those under it whose names, and the names of
the directories between, start with neither ``_`` nor ``.`` (pyarrow's rule:
Spark's ``_SUCCESS`` and ``.crc`` files are not data), in sorted order; the
values of hive partitions (``key=value`` directory names) are not read. Every
file has every feature column. A path is read as Parquet when it is a local
file that starts as Parquet files do, a local directory that holds a
``.parquet`` (``.parq``, ``.pq``) file and is no zarr store, or a URL whose
path ends in such a suffix; :func:`open_parquet` (``dasketch.read_parquet``)
reads any other. Every file's signature is noted when the dataset is opened
and checked by every task after its read
(:mod:`dasketch._blocks.file_checks`), so a file rewritten since is an error.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from dasketch._blocks.file_checks import check_file, file_signature, remote_signature
from dasketch._blocks.readers.arrow import check_columns, feature_columns, fill_rows
from dasketch._blocks.readers.options import MAX_DECODED, check_shape, decoded_rows
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks
from dasketch._blocks.tasks import task
from dasketch.storage.fingerprints import local_file_path

PARQUET_MAGIC = b"PAR1"
PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
ZARR_METADATA = ("zarr.json", ".zarray", ".zgroup")


def _is_data_name(name):
    return not name.startswith(("_", "."))


def _local_files(root):
    """The data files under the local directory ``root``, sorted."""
    found = []
    for where, directories, files in os.walk(root, followlinks=True):
        directories[:] = [d for d in directories if _is_data_name(d)]
        found.extend(os.path.join(where, f) for f in files if _is_data_name(f))
    return sorted(found)


def _holds_parquet(root):
    if any(os.path.exists(os.path.join(root, m)) for m in ZARR_METADATA):
        return False
    return any(path.endswith(PARQUET_SUFFIXES) for path in _local_files(root))


def is_parquet_path(X):
    """Whether the path or URL ``X`` is read as Parquet (see the module's rule)."""
    if not isinstance(X, (str, os.PathLike)):
        return False
    path = local_file_path(X)
    if path is None:
        return os.fspath(X).split("?")[0].rstrip("/").endswith(PARQUET_SUFFIXES)
    if os.path.isdir(path):
        return _holds_parquet(path)
    if not os.path.exists(path):   # reported as a missing Parquet dataset
        return path.rstrip("/").endswith(PARQUET_SUFFIXES)
    if not os.path.isfile(path):
        return False
    with open(path, "rb") as file:
        return file.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC


@dataclass(frozen=True, eq=False)
class ParquetSource:
    """A Parquet dataset opened for reading by rows: its files, their row
    groups' sizes and signatures, and the feature columns (:func:`open_parquet`).

    Attributes
    ----------
    url : str
        The path or URL it was opened from.
    fs : fsspec.AbstractFileSystem or None
        The filesystem of ``files``; None for local files.
    files : tuple of str
    group_rows : tuple of tuple of int
        Rows of each row group of each file.
    signatures : tuple
        Each file's signature when it was opened.
    columns : tuple of str
    dtype : numpy.dtype
    """

    url: str
    fs: Any
    files: tuple
    group_rows: tuple
    signatures: tuple
    columns: tuple
    dtype: np.dtype

    @property
    def offsets(self):
        """First row of every row group of the dataset, then its number of rows."""
        sizes = [rows for groups in self.group_rows for rows in groups]
        return tuple(int(v) for v in np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]))

    @property
    def shape(self):
        return (self.offsets[-1], len(self.columns))

    def __repr__(self):
        return (f"ParquetSource({self.url!r}, {len(self.files)} files, {self.shape[0]:,} rows "
                f"x {self.shape[1]} columns, {self.dtype})")

    def __dask_tokenize__(self):
        return (type(self).__name__, self.url, self.files, self.group_rows, self.signatures,
                self.columns, self.dtype.str)

    def _open(self, index):
        import pyarrow.parquet as pq

        path = self.files[index]
        if self.fs is None:
            footer = _local_footer(path, tuple(self.signatures[index]))
            return contextlib.closing(pq.ParquetFile(path, metadata=footer))
        return _closing_parquet(self.fs.open(path, "rb"))

    @property
    def _groups(self):
        """``(file index, row group)`` of every row group of the dataset, in order."""
        return [(i, g) for i, rows in enumerate(self.group_rows) for g in range(len(rows))]

    @contextlib.contextmanager
    def _reading(self, index, name):
        """The file ``index`` opened for reading, checked against its signature
        after the reads, and before a failed read's error is raised: a file
        rewritten since it was opened may not decode by its footer as parsed."""
        try:
            with self._open(index) as file:
                yield file
        except Exception:
            check_file(self.files[index], self.signatures[index], name, self.fs)
            raise
        check_file(self.files[index], self.signatures[index], name, self.fs)

    def read_group(self, k, name="X"):
        """Row group ``k`` of the dataset (numbered across its files) as a
        ``pyarrow.Table`` of the feature columns; the file is checked against
        its signature after the read."""
        index, group = self._groups[k]
        with self._reading(index, name) as file:
            return file.read_row_group(group, columns=list(self.columns))

    def read(self, start, stop, name="X"):
        """Rows ``[start, stop)`` as an ndarray, read from the row groups that
        hold them, one group at a time; every file read is checked against its
        signature after the read."""
        block = np.empty((stop - start, len(self.columns)), self.dtype)
        offsets, groups = self.offsets, self._groups
        first = bisect.bisect_right(offsets, start) - 1
        last = bisect.bisect_left(offsets, stop)
        by_file = {}
        for k in range(first, last):
            by_file.setdefault(groups[k][0], []).append(k)
        for index, ks in by_file.items():
            with self._reading(index, name) as file:
                for k in ks:
                    lo, hi = max(start, offsets[k]), min(stop, offsets[k + 1])
                    table = file.read_row_group(groups[k][1], columns=list(self.columns))
                    fill_rows(block[lo - start:hi - start],
                              table.slice(lo - offsets[k], hi - lo), self.dtype)
        return block


@functools.lru_cache(maxsize=8)
def _local_footer(path, signature):
    """The footer of the local Parquet file ``path``, parsed once a process for
    each ``signature`` (a rewritten file has another, and every task checks the
    file against it after its read). The few most recent are kept: a task reads
    one file or two, and a wide file's footer can hold megabytes."""
    import pyarrow.parquet as pq

    return pq.read_metadata(path)


@contextlib.contextmanager
def _closing_parquet(handle):
    import pyarrow.parquet as pq

    with handle:
        yield pq.ParquetFile(handle)


def _dataset_files(url, storage_options, name):
    """``(fs, files)``: the filesystem (None for local) and data files at ``url``."""
    path = local_file_path(url)
    if path is not None:
        path = os.path.abspath(path)   # the workers' working directories may differ
        if os.path.isdir(path):
            files = _local_files(path)
        elif os.path.exists(path):
            files = [path]
        else:
            raise FileNotFoundError(f"{name}: no Parquet file or directory at {path!r}")
        return None, files
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **(storage_options or {}))
    if fs.isdir(root):
        files = sorted(p for p in fs.find(root)
                       if all(map(_is_data_name, p[len(root):].strip("/").split("/"))))
    elif fs.exists(root):
        files = [root]
    else:
        raise FileNotFoundError(f"{name}: no Parquet file or directory at {url!r}")
    return fs, files


def open_parquet(url, columns=None, storage_options=None, name="X"):
    """Open the Parquet dataset at ``url`` (a file or a directory, local or an
    fsspec URL) for reading by rows: list its files and read their footers.

    Returns
    -------
    ParquetSource

    Raises
    ------
    FileNotFoundError
        When nothing is at ``url``, or a directory holds no data file.
    ValueError
        Naming a file that is not Parquet, a column asked for that a file lacks,
        or a feature column that is not numeric.
    """
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(f"{name}: {url!r} is read as Parquet, which needs pyarrow "
                          "(pip install pyarrow)") from exc
    url = os.fspath(url)
    columns = check_columns(columns, name)
    fs, files = _dataset_files(url, storage_options, name)
    if not files:
        raise FileNotFoundError(f"{name}: {url!r} holds no data file")
    group_rows, signatures, dtypes = [], [], []
    for path in files:
        signature = file_signature(path) if fs is None else remote_signature(fs, path)
        try:
            with (open(path, "rb") if fs is None else fs.open(path, "rb")) as handle:
                metadata = pq.ParquetFile(handle).metadata
        except Exception as exc:  # pyarrow's errors for what is not Parquet vary by version
            raise ValueError(f"{name}: {path!r} is not a Parquet file ({exc})") from exc
        names, dtype = feature_columns(metadata.schema.to_arrow_schema(), columns,
                                       repr(path), name)
        columns = columns or names
        group_rows.append(tuple(metadata.row_group(g).num_rows
                                for g in range(metadata.num_row_groups)))
        signatures.append(signature)
        dtypes.append(dtype)
    source = ParquetSource(url, fs, tuple(files), tuple(group_rows), tuple(signatures),
                           tuple(columns), np.result_type(*dtypes))
    check_shape(source.shape, name)
    return source


class ParquetRows:
    """How a task reads rows ``[start, stop)`` of a :class:`ParquetSource`:
    ``ParquetRows(name)(source, start, stop, reuse)`` is a context manager
    giving a fresh block (``reuse`` is ignored)."""

    def __init__(self, name):
        self.name = name

    def __call__(self, source, start, stop, reuse=False):
        return contextlib.nullcontext(source.read(start, stop, self.name))

    def __dask_tokenize__(self):
        return (type(self).__name__, self.name)


class ParquetReader:
    """Reads Parquet datasets by row groups: paths and URLs read as Parquet,
    and the :class:`ParquetSource` of ``dasketch.read_parquet``."""

    name = "parquet"
    kinds = ("Parquet path/URL",)
    opens_stores = True
    selects_columns = True

    def can_read(self, X, options):
        return isinstance(X, ParquetSource) or is_parquet_path(X) or (
            options.columns is not None and isinstance(X, (str, os.PathLike)))

    def row_blocks(self, X, options):
        if options.component is not None:
            raise ValueError(f"component applies only when {options.name} is a zarr store; "
                             f"{X!r} is read as Parquet (select its columns with columns=)")
        if isinstance(X, ParquetSource):
            if options.columns is not None or options.storage_options is not None:
                raise ValueError(f"{options.name} is an opened Parquet dataset: give columns "
                                 "and storage_options to dasketch.read_parquet instead")
            source = X
        else:
            source = open_parquet(X, options.columns, options.storage_options, options.name)
        shape, groups = source.shape, source.offsets
        rows = options.dense_rows(shape)
        offsets = tuple(range(0, shape[0], rows)) + (shape[0],)
        # A task holds its block and a row group as Arrow.
        row_bytes = shape[1] * source.dtype.itemsize
        largest_group = int(np.diff(groups).max())
        if decoded_rows(offsets, groups) <= MAX_DECODED * shape[0]:
            reader = (source, ParquetRows(options.name))
            return RowBlocks(reader_blocks(offsets, reader), offsets, shape[1], source.dtype,
                             False, (largest_group + rows) * row_bytes, reader)
        return RowBlocks(group_blocks(source, offsets, options.name), offsets, shape[1],
                         source.dtype, False, (largest_group + rows) * row_bytes)


def _read_group(source, k, name):
    return source.read_group(k, name)


def _block_from_groups(start, stop, firsts, dtype, *groups):
    """Rows ``[start, stop)`` of the row groups ``groups`` (``pyarrow.Table``
    objects whose first rows are ``firsts``) as a new C-ordered ndarray, the
    layout of a block read by a task of its own (the rounding of the sketch
    depends on the layout of its blocks)."""
    block = np.empty((stop - start, groups[0].num_columns), dtype)
    for first, group in zip(firsts, groups):
        lo, hi = max(start, first), min(stop, first + group.num_rows)
        fill_rows(block[lo - start:hi - start], group.slice(lo - first, hi - lo), dtype)
    return block


def group_blocks(source, offsets, name):
    """Blocks cut from row groups that are each read once, by a task of their own
    (row groups larger than blocks, which reading them in each block's task
    would decode several times): a read task hands its row group on as Arrow,
    and each block's task converts only its rows."""
    groups = source.offsets
    read = task(_read_group)
    reads = [read(source, k, name) for k in range(len(groups) - 1)]
    cut = task(_block_from_groups)
    blocks = []
    for start, stop in zip(offsets[:-1], offsets[1:]):
        ks = range(bisect.bisect_right(groups, start) - 1, bisect.bisect_left(groups, stop))
        blocks.append(cut(start, stop, tuple(groups[k] for k in ks), source.dtype,
                          *(reads[k] for k in ks)))
    return tuple(blocks)
