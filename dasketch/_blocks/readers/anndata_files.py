"""AnnData matrices on disk: CSR groups and dense datasets of ``.h5ad`` (HDF5)
files, and CSR groups of AnnData zarr stores, read by
:mod:`dasketch._blocks.anndata_blocks` (a task reads only its block's rows).
"""

from __future__ import annotations

from dasketch._blocks.anndata_blocks import anndata_row_blocks, is_anndata_matrix
from dasketch._blocks.row_blocks import RowBlocks, reader_blocks


class AnnDataReader:
    """Reads HDF5 files and h5py nodes, and the zarr groups that AnnData marks
    as CSR matrices; claims AnnData nodes it refuses (CSC matrices, whole
    AnnData stores) to explain how to read them."""

    name = "anndata"
    kinds = ()
    opens_stores = True

    def can_read(self, X, options):
        return is_anndata_matrix(X, component=options.component,
                                 storage_options=options.storage_options)

    def row_blocks(self, X, options):
        fields = anndata_row_blocks(
            X, component=options.component, storage_options=options.storage_options,
            missing_chunks=options.missing_chunks, name=options.name, rows=options.rows)
        return RowBlocks(reader_blocks(fields["offsets"], fields["reader"]), **fields)
