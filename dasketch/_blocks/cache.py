"""Decoded blocks kept in (worker) memory for algorithms that read X several times.

An algorithm that passes over X many times (the dual random projection, LSQR)
pays every pass as a full read of the store when X streams from it. With
:func:`cache_blocks` the blocks are read and decoded once, kept where they were
read (``persist``, as dask-glm does with its data), and every later pass reads
them from memory. The rule of ``cache="auto"``:

* inputs already in memory (numpy, scipy.sparse, persisted Dask arrays) are not
  copied: nothing to cache;
* otherwise X is cached when its decoded size is at most the fraction
  ``dask.config`` ``"dasketch.cache-fraction"`` (default
  :data:`CACHE_FRACTION`) of the memory the workers can still hold, and
  streams from its source on every pass when it is larger. A worker can hold
  what keeps it below ``distributed``'s ``worker.memory`` thresholds
  (``target`` of its limit in stored data, ``spill`` and ``pause`` in process
  memory, measured with the modules block tasks load), so that cached blocks
  are neither spilled to disk nor pause the worker; a worker without a limit,
  the available memory of its machine. With the local schedulers it is the
  available memory of this machine.

The decision and its numbers come back as a :class:`CacheChoice`, which the
results of the algorithms record.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import dask

from dasketch._blocks.scheduler import active_client, persist
from dasketch._blocks.tasks import check_number

# Share of the workers' free memory that cached blocks may take (the rest is for
# the tasks of the passes and what they persist, e.g. a projection X R).
CACHE_FRACTION = 0.5
CACHE_FRACTION_KEY = "dasketch.cache-fraction"
CACHE_CHOICES = ("auto", True, False)
_MIB = 2 ** 20


@dataclass(frozen=True)
class CacheChoice:
    """What was decided about keeping the decoded blocks of X in memory.

    Attributes
    ----------
    cached : bool
        Whether the passes read the blocks from (worker) memory after the
        first read.
    reason : str
        Why, with the numbers.
    nbytes : int
        The decoded size of X (for sparse X, of its nonzeros and their column
        indices).
    budget : int or None
        Bytes the cache could take under ``cache="auto"``; None when it was not
        needed (``cache`` given, or X in memory already).
    """

    cached: bool
    reason: str
    nbytes: int
    budget: int | None = None


def check_cache(cache):
    """``cache`` if it is ``"auto"``, True or False, else a ``ValueError``."""
    if not any(cache is choice or (isinstance(cache, str) and cache == choice)
               for choice in CACHE_CHOICES):
        raise ValueError(f"cache must be 'auto', True or False, got {cache!r}")
    return cache


def cache_fraction():
    """The share of the workers' free memory the cache may take (``dask.config``
    ``"dasketch.cache-fraction"``, default :data:`CACHE_FRACTION`)."""
    fraction = dask.config.get(CACHE_FRACTION_KEY, CACHE_FRACTION)
    return float(check_number(fraction, f"dask.config {CACHE_FRACTION_KEY!r}", high=1))


def decoded_bytes(blocks):
    """Bytes the decoded blocks take in memory: ``n x d`` values for dense X;
    for sparse X the nonzeros and their column indices of every block
    (``read_bytes`` per block)."""
    if blocks.sparse:
        return int(blocks.read_bytes) * len(blocks.blocks)
    return int(blocks.n_rows) * int(blocks.n_features) * blocks.dtype.itemsize


def _available_memory():
    import psutil

    return int(psutil.virtual_memory().available)


def _holdable(dask_worker=None):
    """Bytes this ``distributed`` worker can still hold before it spills or
    pauses, measured once the modules block tasks import are loaded (they take
    a good part of a small worker's limit); the available memory of its machine
    when it has no memory limit. Run by ``Client.run``."""
    import psutil

    import dasketch._blocks.block_functions  # noqa: F401 - what block tasks load
    import dasketch.storage.reading  # noqa: F401

    memory = dask_worker.memory_manager
    limit = memory.memory_limit
    if not limit:
        return _available_memory()
    rss = psutil.Process().memory_info().rss
    room = [limit - rss]
    if memory.memory_target_fraction:  # managed memory beyond it is spilled
        room.append(memory.memory_target_fraction * limit - dask_worker.state.nbytes)
    room += [fraction * limit - rss for fraction in (memory.memory_spill_fraction,
                                                     memory.memory_pause_fraction) if fraction]
    return max(int(min(room)), 0)


def free_memory(client):
    """Bytes the workers of ``client`` can still hold (see the module), or, with
    ``client`` None, the available memory of this machine."""
    if client is None:
        return _available_memory()
    # A worker lost meanwhile holds nothing: it is left out, not an error.
    held = client.run(_holdable, on_error="ignore").values()
    return int(sum(value for value in held if isinstance(value, int)))


def cache_blocks(blocks, cache="auto", *, client=None):
    """``(blocks, choice)``: ``blocks`` whose decoded rows are kept in (worker)
    memory when ``cache`` says so (see the module for ``"auto"``), and the
    :class:`CacheChoice`.

    The blocks are read once, by ``persist`` (asynchronous on a
    ``distributed`` cluster: the first pass runs as the blocks arrive, each on
    the worker that read it); the memory is released when the returned blocks
    are no longer referenced. Results do not depend on the choice.

    Examples
    --------
    >>> import numpy as np
    >>> from dasketch._blocks import as_row_blocks
    >>> from dasketch._blocks.cache import cache_blocks
    >>> _, choice = cache_blocks(as_row_blocks(np.ones((100, 4))))
    >>> choice.cached, choice.reason
    (False, 'X is in memory already')
    """
    check_cache(cache)
    nbytes = decoded_bytes(blocks)
    size = f"{nbytes / _MIB:.4g} MiB decoded"
    if cache is False:
        return blocks, CacheChoice(False, f"cache=False: X ({size}) streams on every pass",
                                   nbytes)
    if blocks.resident and cache == "auto":
        return blocks, CacheChoice(False, "X is in memory already", nbytes)
    client = client if client is not None else active_client()
    budget = None
    if cache == "auto":
        fraction = cache_fraction()
        free = free_memory(client)
        budget = int(fraction * free)
        where = "the workers'" if client is not None else "this machine's"
        if nbytes > budget:
            return blocks, CacheChoice(
                False, f"X ({size}) is more than {fraction:g} of {where} free memory "
                f"({free / _MIB:.4g} MiB): it streams from its source on every pass",
                nbytes, budget)
        reason = (f"X ({size}) is within {fraction:g} of {where} free memory "
                  f"({free / _MIB:.4g} MiB)")
    else:
        reason = f"cache=True: X ({size}) is kept in memory"
    if blocks.resident:
        return blocks, CacheChoice(True, reason + " (it is in memory already)", nbytes, budget)
    kept = persist(*blocks.blocks, client=client)
    return (replace(blocks, blocks=tuple(kept), reader=None, transform=(), resident=True),
            CacheChoice(True, reason, nbytes, budget))
