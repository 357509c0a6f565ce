"""Estimators built on a Frequent Directions sketch.

:class:`SketchPCA` (:mod:`._sketch_pca`); how a centred sketch becomes its
fitted attributes is :class:`~._readout.SketchReadOut`, and the probabilistic
PCA model of the fitted components is :class:`~._probabilistic.ProbabilisticPCA`.
"""

from dasketch.decomposition._sketch_pca import SketchPCA

__all__ = ["SketchPCA"]
