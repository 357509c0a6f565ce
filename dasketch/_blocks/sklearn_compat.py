"""The private scikit-learn names dasketch uses, imported here and nowhere else.

scikit-learn does not promise that its private modules keep their names from one
release to the next, so every import from them goes through this module (a test
reads the sources and refuses one elsewhere), and the package states the range of
scikit-learn releases it is tested with (``pyproject.toml``: the oldest supported
and the newest are both run by CI). When a release moves one of these names, this
module is the one place that follows it.

The names are re-exported without their leading underscore:

- parameter validation (``sklearn.utils._param_validation``): ``Interval``,
  ``Options``, ``StrOptions``, ``RealNotInt``, ``Hidden``, ``InvalidParameterError`` and
  ``validate_parameter_constraints``, the rules behind ``_parameter_constraints``;
- ``check_sample_weight``, ``check_y`` and ``deprecate_positional_args``
  (``sklearn.utils.validation``);
- ``BasePCA`` (``sklearn.decomposition._base``), the transform and inverse
  transform of a fitted PCA, and ``assess_dimension`` / ``infer_dimension``
  (``sklearn.decomposition._pca``), Minka's MLE of the dimension;
- ``SparseCoefMixin`` (``sklearn.linear_model._base``): ``densify`` and ``sparsify``.
"""

from sklearn.decomposition._base import _BasePCA as BasePCA
from sklearn.decomposition._pca import _assess_dimension as assess_dimension
from sklearn.decomposition._pca import _infer_dimension as infer_dimension
from sklearn.linear_model._base import SparseCoefMixin
from sklearn.utils._param_validation import (
    Hidden,
    Interval,
    InvalidParameterError,
    Options,
    RealNotInt,
    StrOptions,
    validate_parameter_constraints,
)
from sklearn.utils.validation import _check_sample_weight as check_sample_weight
from sklearn.utils.validation import _check_y as check_y
from sklearn.utils.validation import _deprecate_positional_args as deprecate_positional_args

__all__ = ["BasePCA", "Hidden", "Interval", "InvalidParameterError", "Options", "RealNotInt",
           "SparseCoefMixin", "StrOptions", "assess_dimension", "check_sample_weight",
           "check_y", "deprecate_positional_args", "infer_dimension",
           "validate_parameter_constraints"]
