"""Storage: what dasketch reads and writes, without Dask.

- :mod:`.reading` opens zarr stores (dense arrays and sparse-by-rows groups) and
  reads their rows;
- :mod:`.fingerprints` takes a store's fingerprint, and :mod:`.store_checks`
  compares it where the work runs (on the workers, before and during reads);
- :mod:`.outputs` writes only dasketch's own outputs, atomically;
- :mod:`.sketch_io` saves and loads sketches, in the file format that
  :mod:`.sketch_files` reads and verifies.

The package stands below the bridge (:mod:`dasketch._blocks`, which builds the
tasks that run these functions) and above the kernels; the bridge imports the
stores it reads, never the sketch file format.
"""
