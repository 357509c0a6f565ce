"""Public names of a package imported on first use (PEP 562)."""

import importlib


def lazy_attributes(package, public):
    """``__getattr__`` and ``__dir__`` for ``package`` whose public names map to
    the modules defining them.

    Importing the package then costs nothing: a worker process unpickling a
    block task, or the command line answering ``--help``, loads only the modules
    it uses.

    Examples
    --------
    >>> getattr_, dir_ = lazy_attributes("json", {"dumps": "json"})
    >>> getattr_("dumps")({"a": 1})
    '{"a": 1}'
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name):
        if name in public:
            value = getattr(importlib.import_module(public[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(public))

    return __getattr__, __dir__


def moved_names(module, *homes):
    """``__getattr__`` and ``__dir__`` for a module path whose names live in
    ``homes`` (module names, searched in order): every name of theirs is served
    under ``module`` too, imported on first use, so imports and pickles that name
    ``module`` keep working.

    Examples
    --------
    >>> getattr_, dir_ = moved_names("json", "json.decoder")
    >>> getattr_("JSONDecodeError").__module__
    'json.decoder'
    """
    def __getattr__(name):
        for home in homes:
            value = getattr(importlib.import_module(home), name, _MISSING)
            if value is not _MISSING:
                return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    def __dir__():
        return sorted({name for home in homes for name in dir(importlib.import_module(home))})

    return __getattr__, __dir__


_MISSING = object()
