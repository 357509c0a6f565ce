"""Single-machine kernels: numpy, scipy and numba only; this package never imports dask."""

from dasketch.kernels.frequent_directions import Sketch, merge_sketches, shrink, sketch_rows

__all__ = ["Sketch", "merge_sketches", "shrink", "sketch_rows"]
