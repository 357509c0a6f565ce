"""Renamed constants, parameters and positional arguments keep working for two
releases with a ``FutureWarning``, scikit-learn's deprecation cycle: the old
spelling is served and announced, then removed in :data:`REMOVED_IN`.

Standard library only, so the kernels, the lowest layer, use it for their renamed
constants.
"""

import warnings

# The release from which a deprecated spelling is an error (two after 0.1).
REMOVED_IN = "0.3"
# The default of a deprecated parameter (scikit-learn's convention): a value the
# user did not pass.
DEPRECATED = "deprecated"


def renamed_constants(module_name, renames, namespace):
    """A module ``__getattr__`` serving each old name of ``renames`` (old -> new)
    as its new one, with a ``FutureWarning``.

    Parameters
    ----------
    module_name : str
        The module's ``__name__``, for the messages.
    renames : dict of str to str
        Old name to new name.
    namespace : dict
        The module's ``globals()``, where the new names live.

    Returns
    -------
    callable
        The ``__getattr__`` to bind at module level (PEP 562).

    Examples
    --------
    >>> import warnings
    >>> get = renamed_constants("m", {"OLD": "NEW"}, {"NEW": (1, 2)})
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     get("OLD"), caught[0].category.__name__
    ((1, 2), 'FutureWarning')
    """
    def __getattr__(name):
        if name not in renames:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        warnings.warn(f"{module_name}.{name} was renamed {renames[name]} and is removed in "
                      f"{REMOVED_IN}; import {module_name}.{renames[name]}", FutureWarning,
                      stacklevel=2)
        return namespace[renames[name]]

    return __getattr__


def renamed_parameter(owner, old, new, old_value, new_value, new_default=None):
    """The value of parameter ``new`` when it may still be passed as ``old``.

    Parameters
    ----------
    owner : str
        The estimator or function, for the messages.
    old, new : str
        The parameter's old and new names.
    old_value, new_value : object
        What was passed for each; :data:`DEPRECATED` for an ``old`` not passed.
    new_default : object, default=None
        The default of ``new``: a ``new_value`` equal to it counts as not passed.

    Returns
    -------
    object
        ``old_value`` (with a ``FutureWarning``) if it was passed, else
        ``new_value``.

    Raises
    ------
    ValueError
        If both were passed.

    Examples
    --------
    >>> renamed_parameter("f", "n_components", "sketch_size", DEPRECATED, 40)
    40
    """
    if isinstance(old_value, str) and old_value == DEPRECATED:
        return new_value
    if new_value is not new_default and new_value != new_default:
        raise ValueError(f"{owner} got both {old}={old_value!r} and {new}={new_value!r}; "
                         f"{old} was renamed {new}: pass {new} only")
    warnings.warn(f"{old} was renamed {new} in {owner} and is removed in {REMOVED_IN}; "
                  f"pass {new}={old_value!r} instead", FutureWarning, stacklevel=3)
    return old_value
