"""The names of :mod:`dasketch._blocks.sklearn_compat`, served under this path too
(imports and pickles that name it keep working)."""

from dasketch.utils.lazy import moved_names

__getattr__, __dir__ = moved_names(__name__, "dasketch._blocks.sklearn_compat")
