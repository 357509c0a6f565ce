"""Single-machine kernels (numpy/scipy only; this package never imports dask)."""

from dasketch.sketch.frequent_directions import Sketch, merge_sketches, shrink, sketch_rows

__all__ = ["Sketch", "merge_sketches", "shrink", "sketch_rows"]
