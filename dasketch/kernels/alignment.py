"""Arrays aligned to their item size.

numpy multiplies arrays whose data are not aligned to their item size by its own
loops instead of BLAS: other rounding (a result would then depend on how its data
travelled) and many times the time (figures in benchmarks/README.md). Such arrays
come out of messages: ``distributed`` and pickle can deserialize an array at any
byte offset of a buffer. Numpy only.
"""

from __future__ import annotations

import numpy as np


def aligned(value):
    """``value``, or a copy of it where it is an ndarray whose data are not aligned
    to its item size."""
    if isinstance(value, np.ndarray) and not value.flags.aligned:
        return np.require(value, requirements="A")
    return value
