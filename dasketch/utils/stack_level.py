"""The ``stacklevel`` at which a warning names the caller's own line."""

from __future__ import annotations

import inspect
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])


def caller_stacklevel():
    """The ``stacklevel`` of the first frame outside the dasketch package, for a
    :func:`warnings.warn` in the function that calls this one.

    Public functions reach their warnings through a varying number of the
    package's own frames (decorators, solvers, estimators), so a fixed
    ``stacklevel`` names a line inside the package whenever a frame is added;
    counting the package's frames names the line that asked for the fit, as
    pandas' ``find_stack_level`` does.
    """
    frame = inspect.currentframe()
    level = 0
    try:
        while frame is not None and frame.f_code.co_filename.startswith(PACKAGE_ROOT):
            frame = frame.f_back
            level += 1
    finally:
        del frame
    return max(level, 1)
