"""dasketch: sketching and solving with matrices too large for one machine.

The public names are imported on first use (PEP 562), so that worker processes
unpickling a block task, and the command line, load only what they need.
"""

from dasketch.utils.lazy import lazy_attributes

__version__ = "0.1.0"

_PUBLIC = {
    "RFDSONClassifier": "dasketch.linear_model.rfd_son",
    "RFDSONRegressor": "dasketch.linear_model.rfd_son_regressor",
    "Sketch": "dasketch.kernels.frequent_directions",
    "SketchPCA": "dasketch.decomposition",
    "estimate_error": "dasketch.error_estimate",
    "get_client": "dasketch.cluster",
    "load_sketch": "dasketch.storage.sketch_io",
    "merge_sketches": "dasketch.kernels.frequent_directions",
    "read_parquet": "dasketch.parquet",
    "save_sketch": "dasketch.storage.sketch_io",
    "sketch": "dasketch.sketching",
    "sparse_embed": "dasketch.sparse_embedding",
    "write_synthetic": "dasketch.datasets",
}

__all__ = sorted(_PUBLIC)

__getattr__, __dir__ = lazy_attributes(__name__, _PUBLIC)
