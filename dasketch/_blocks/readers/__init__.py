"""One reader per kind of input, each answering whether it can read an input
and giving its :class:`~dasketch._blocks.row_blocks.RowBlocks`
(:mod:`.registry` states what a reader is).

The readers are tried in the order registered below; the first that can read
an input reads it. Arrays of other libraries than numpy come first
(:mod:`.array_types`): read as blocks of their library for callers that compute
there, refused by type for the others. Parquet comes next (it tells its paths by their first
bytes, a directory's files or a URL's suffix, where the next readers would open
them as zarr stores), then AnnData (its zarr groups are also paths), zarr
(which takes every other path) after the in-memory types, and array-likes last
(Dask and zarr arrays, and Arrow tables, are array-likes too). In-memory types dispatch on type
(:data:`~.in_memory.row_blocks_of`). A new format is one module and one
:func:`register_reader` call.
"""

from dasketch._blocks.readers.anndata_files import AnnDataReader
from dasketch._blocks.readers.array_types import (
    ArrayLibraryReader,
    check_array_library,
    host_values,
)
from dasketch._blocks.readers.arrow import ArrowReader
from dasketch._blocks.readers.dask_arrays import DaskReader
from dasketch._blocks.readers.in_memory import ArrayLikeReader, InMemoryReader, row_blocks_of
from dasketch._blocks.readers.options import ReadOptions
from dasketch._blocks.readers.parquet import ParquetReader
from dasketch._blocks.readers.registry import (
    accepted_kinds,
    read_row_blocks,
    register_reader,
    registered_readers,
    unregister_reader,
)
from dasketch._blocks.readers.zarr_stores import ZarrReader

register_reader(ArrayLibraryReader())
register_reader(ParquetReader())
register_reader(AnnDataReader())
register_reader(DaskReader())
register_reader(InMemoryReader())
register_reader(ArrowReader())
register_reader(ZarrReader())
register_reader(ArrayLikeReader())

__all__ = [
    "ReadOptions", "accepted_kinds", "check_array_library", "host_values", "read_row_blocks",
    "register_reader",
    "registered_readers", "row_blocks_of", "unregister_reader",
]
