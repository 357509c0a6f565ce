"""Estimators built on a Frequent Directions sketch.

:class:`SketchPCA` (:mod:`._sketch_pca`); how a centred sketch becomes its
fitted attributes is :class:`~._readout.SketchReadOut`, with the sizes,
variances and number of components of :mod:`._variance`, and the probabilistic
PCA model of the fitted components is :class:`~._probabilistic.ProbabilisticPCA`
and their projections :class:`~._projections.Projections`.
Columns are scaled in the block tasks (:class:`~._scaling.ColumnScaling`); a
store chunked along its columns is fitted from a sketch of its transpose
(:mod:`._transposed`).
"""

from dasketch.decomposition._sketch_pca import SketchPCA

__all__ = ["SketchPCA"]
