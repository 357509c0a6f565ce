"""Remote stores listed again when the computations that read them end.

A worker checks a remote (fsspec) store's fingerprint once, before its first
read (:func:`dasketch.storage.store_checks.checked_array`); the reads that follow in a
long job are not checked one by one, as the chunk files of a local store are.
So the graph task that opens and checks a remote store is registered here with
its :class:`~dasketch.storage.store_checks.EndOfJobCheck` (:func:`watch`), and
:func:`dasketch._blocks.compute`, through which every pass of the package is
computed, lists each store its graphs read again once the results are in
(:func:`stores_read_by`, :func:`check_unchanged`): a store rewritten while the
job ran is an error, not a result. Blocks kept in worker memory
(:func:`dasketch._blocks.persist`) carry the checks of the stores they were
read from (:func:`carry`), so the passes over them check those stores too.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import dask

# Graph name (a task key or layer name) -> the end-of-job checks of the stores it reads.
_WATCHED = OrderedDict()
_WATCHED_MAX = 2 ** 16
# (url, component, digest) -> its check, shared by every opening of that store version.
_INTERNED = OrderedDict()
_INTERNED_MAX = 64
_LOCK = threading.Lock()


def _names(obj):
    """The layer names (or keys) of a Dask collection's graph."""
    graph = obj.__dask_graph__()
    layers = getattr(graph, "layers", None)
    if layers is not None:
        return set(layers)
    return {key[0] if isinstance(key, tuple) else key for key in graph}


def _register(names, checks):
    with _LOCK:
        for name in names:
            _WATCHED[name] = _WATCHED.get(name, frozenset()) | checks
            _WATCHED.move_to_end(name)
        while len(_WATCHED) > _WATCHED_MAX:
            _WATCHED.popitem(last=False)


def watch(checked, check):
    """Register the Delayed ``checked`` (the task that opens and checks a store)
    with ``check`` (an :class:`~dasketch.storage.store_checks.EndOfJobCheck`, or None for
    a store that needs none); returns ``checked``."""
    if check is not None:
        with _LOCK:  # one check per store version: reopening it adds no listing to keep
            check = _INTERNED.setdefault((check.url, check.component, check.digest), check)
            _INTERNED.move_to_end((check.url, check.component, check.digest))
            while len(_INTERNED) > _INTERNED_MAX:
                _INTERNED.popitem(last=False)
        _register(checked.__dask_layers__(), frozenset([check]))
    return checked


def stores_read_by(objs):
    """The end-of-job checks of the stores that the graphs of ``objs`` read."""
    if not _WATCHED:
        return frozenset()
    checks = set()
    for obj in objs:
        if dask.is_dask_collection(obj):
            for name in _names(obj):
                checks |= _WATCHED.get(name, frozenset())
    return frozenset(checks)


def carry(kept, checks):
    """Register the collections ``kept`` (persisted from graphs that read the
    stores of ``checks``) as reading them."""
    if checks:
        _register([name for obj in kept if dask.is_dask_collection(obj)
                   for name in obj.__dask_layers__()], frozenset(checks))


def check_unchanged(checks):
    """List each store of ``checks`` again; a ``ValueError`` naming the first one
    that was rewritten since the job opened it."""
    for check in sorted(checks, key=lambda c: (c.url, c.component or "")):
        check.check()
