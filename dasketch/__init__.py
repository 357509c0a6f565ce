"""dasketch: sketching and solving with matrices too large for one machine."""

from dasketch.blocked import sketch, sparse_embed
from dasketch.cluster import get_client
from dasketch.decomposition import SketchPCA
from dasketch.io import load_sketch, save_sketch, write_synthetic
from dasketch.online import RFDSONClassifier, RFDSONRegressor
from dasketch.sketch.frequent_directions import Sketch, merge_sketches

__version__ = "0.1.0"

__all__ = [
    "RFDSONClassifier",
    "RFDSONRegressor",
    "Sketch",
    "SketchPCA",
    "get_client",
    "load_sketch",
    "merge_sketches",
    "save_sketch",
    "sketch",
    "sparse_embed",
    "write_synthetic",
]
