"""Import an optional dependency, or say which extra installs it."""

from __future__ import annotations

import importlib


def import_optional(module, extra):
    """The module ``module``, or an ImportError naming ``dasketch[extra]``.

    Examples
    --------
    >>> import_optional("numpy", "none").__name__
    'numpy'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"this needs {module}: pip install 'dasketch[{extra}]'") from exc
