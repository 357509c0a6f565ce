"""Constraints for scikit-learn's parameter validation
(``sklearn.utils._param_validation``: ``validate_params`` on public functions,
``_parameter_constraints`` on estimators).

Client-side only: worker processes never import this module (scikit-learn would
add about 110 MiB to each of them), so block tasks never reach it.

Public functions call ``validate_parameter_constraints(CONSTRAINTS, locals(),
caller_name=...)`` first thing in their body rather than wearing the
``validate_params`` decorator: the decorator's wrapper is one more frame, and
the warnings these functions raise (``ConvergenceWarning`` among them) would
point into scikit-learn instead of at the caller's line. The rules and the
messages are the same.
"""

from __future__ import annotations

import numbers

import numpy as np

from dasketch._blocks.sklearn_compat import Interval as _Interval


class Interval(_Interval):
    """scikit-learn's ``Interval`` that does not take a bool for a number.

    ``numbers.Integral`` and ``numbers.Real`` include ``bool``, so scikit-learn's
    own ``Interval(numbers.Integral, 1, None, closed="left")`` accepts ``True``
    as 1; here ``True`` and ``False`` satisfy no interval, and the error reads
    e.g. "The 'sketch_size' parameter of sketch must be an int in the range
    [2, inf). Got True instead."

    Examples
    --------
    >>> import numbers
    >>> counts = Interval(numbers.Integral, 1, None, closed="left")
    >>> counts.is_satisfied_by(3), counts.is_satisfied_by(True), counts.is_satisfied_by(0)
    (True, False, False)
    """

    def is_satisfied_by(self, val):
        return not isinstance(val, bool) and super().is_satisfied_by(val)


# The seeds :func:`dasketch.kernels.embeddings.resolve_seed` takes: None, an int >= 0,
# a numpy RandomState or Generator.
RANDOM_STATE = [None, Interval(numbers.Integral, 0, None, closed="left"),
                np.random.RandomState, np.random.Generator]
# Counts of at least one (sizes, iterations, rows per block).
POSITIVE_INT = Interval(numbers.Integral, 1, None, closed="left")
# Fan-in of a reduction tree.
FAN_IN = Interval(numbers.Integral, 2, None, closed="left")
# The arguments of a blocked pass over X (X itself is checked by as_row_blocks).
PASS_CONSTRAINTS = {
    "X": "no_validation",
    "split_every": [FAN_IN, None],
    "client": "no_validation",
    "block_rows": [POSITIVE_INT, None],
    "component": [str, None],
    "storage_options": [dict, None],
}
