"""The names of :mod:`dasketch._blocks.blockwise` (``affine_rows``) and of
SketchPCA's own passes (``squared_norms_along`` in
:mod:`dasketch.decomposition._variance`, ``gaussian_log_likelihood`` in
:mod:`dasketch.decomposition._probabilistic`), served under this path too
(imports and pickles that name it keep working)."""

from dasketch.utils.lazy import moved_names

__getattr__, __dir__ = moved_names(__name__, "dasketch._blocks.blockwise",
                                   "dasketch.decomposition._variance",
                                   "dasketch.decomposition._probabilistic")
