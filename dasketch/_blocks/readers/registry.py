"""The ordered list of readers that turn inputs into
:class:`~dasketch._blocks.row_blocks.RowBlocks`.

A reader is an object with

``name`` : str
    How :func:`register_reader`'s ``before`` names it.
``kinds`` : tuple of str
    The inputs it reads, as the error for an input no reader takes lists them.
``opens_stores`` : bool
    Whether it takes ``component`` and ``storage_options`` (and checks them
    itself); for any other reader giving them is an error.
``selects_columns`` : bool, optional
    Whether it takes ``columns`` (and checks them itself); for any other reader
    giving them is an error.
``can_read(X, options)`` : bool
    Whether it reads ``X`` (it may claim an input only to refuse it with a
    clearer error than the next reader's).
``row_blocks(X, options)`` : RowBlocks
    The blocks of ``X``, given :class:`~dasketch._blocks.readers.options.ReadOptions`.

The first registered reader whose ``can_read`` is true reads the input, so a
reader for a new format is one module and one call of :func:`register_reader`.
"""

from __future__ import annotations

_READERS = []


def register_reader(reader, *, before=None):
    """Add ``reader`` to the readers tried, last or just before the reader named
    ``before``; returns ``reader``.

    Raises
    ------
    ValueError
        When a reader of the same name is registered, or none is named ``before``.
    """
    names = [registered.name for registered in _READERS]
    if reader.name in names:
        raise ValueError(f"a reader named {reader.name!r} is registered already")
    if before is None:
        _READERS.append(reader)
    elif before in names:
        _READERS.insert(names.index(before), reader)
    else:
        raise ValueError(f"no reader named {before!r}; the readers are {names}")
    return reader


def unregister_reader(name):
    """Remove the reader named ``name`` and return it (None when there is none)."""
    for index, reader in enumerate(_READERS):
        if reader.name == name:
            return _READERS.pop(index)
    return None


def registered_readers():
    """The readers in the order they are tried."""
    return tuple(_READERS)


def accepted_kinds():
    """The kinds of input the readers take, in the order they are tried, as one
    phrase (``"A, B or C"``)."""
    kinds = [kind for reader in _READERS for kind in reader.kinds]
    return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]


def read_row_blocks(X, options):
    """The row blocks of ``X`` from the first reader that can read it.

    Raises
    ------
    ValueError
        When ``component`` or ``storage_options`` is given for an input that is
        not read from a store, or ``columns`` for one that is not columnar.
    TypeError
        When no reader reads ``X``, naming the argument and the accepted kinds.
    """
    for reader in _READERS:
        if reader.can_read(X, options):
            if not reader.opens_stores:
                options.check_no_store_options()
            if not getattr(reader, "selects_columns", False):
                options.check_no_columns()
            return reader.row_blocks(X, options)
    options.check_no_store_options()
    options.check_no_columns()
    raise TypeError(f"{options.name} must be a {accepted_kinds()}, got {type(X).__name__}")
