"""How much memory one task of :func:`dasketch.sketch` holds, checked against the
workers' memory limit before anything runs.

A merge holds ``split_every`` working sketches and the merged one, each up to
``(working_size - 1) x d`` float64 values, whatever the number of rows; the
randomized update of a block also holds its Lanczos basis (one float64 row of
``d`` values per step, :func:`~dasketch.kernels.certificates.lanczos_steps`) and its
test matrix. When that alone passes the fraction of the memory limit at which
``distributed`` restarts a worker, every attempt would be killed and the run
would end in a ``KilledWorker`` error after several restarts; here it is a
``ValueError`` up front that names the sketch size that fits; above the
fraction at which workers pause it is a warning. So is an input
whose chunks are too large for a worker to read one (a zarr chunk is read whole).
"""

from __future__ import annotations

import math
import warnings

from dasketch.kernels.certificates import lanczos_steps

# distributed's default fraction of the memory limit at which the nanny restarts a
# worker (``distributed.worker.memory.terminate``).
TERMINATE_FRACTION = 0.95
# ... and at which it pauses the worker (``distributed.worker.memory.pause``).
PAUSE_FRACTION = 0.8
# Resident memory of an idle worker process that has imported numpy, scipy, zarr,
# distributed and dasketch (about 150 MiB; 178 MiB measured at most), counted
# against its limit.
WORKER_BASELINE_BYTES = 150 * 2 ** 20


def task_memory_bytes(working_size, n_features, split_every, *, update="auto",
                      failure_probability=1e-6, read_bytes=0):
    """Bytes one task of the sketch holds at least: the largest of a merge
    (``split_every + 1`` sketches of ``working_size - 1`` rows, and one more that
    the worker holds while it waits for a merge's other inputs or sends one;
    a run at d = 1e7 and l = 8 passed the restart limit with one fewer), a block task's
    read (``read_bytes``, see :class:`~dasketch._blocks.RowBlocks`) and its
    sketch, and, for the randomized update, a block's rows in four copies
    (float64 and float32, and their transposes), its Lanczos basis and test matrix
    on the columns it touches (at most its ``read_bytes / 16`` nonzeros of sparse
    rows) and two sketches.

    Examples
    --------
    >>> task_memory_bytes(32, 1_000_000, 2) / 2 ** 20      # four 31 x 1e6 sketches
    946.044921875
    """
    return max(_task_parts(working_size, n_features, split_every, update,
                           failure_probability, read_bytes).values())


def _task_parts(working_size, n_features, split_every, update, failure_probability,
                read_bytes):
    """Bytes of each kind of task, described."""
    sketch_bytes = 8.0 * max(int(working_size) - 1, 1) * int(n_features)
    parts = {
        f"a merge holds {split_every + 1} sketches of {working_size - 1} x {n_features:,} "
        "float64 values, and a worker one more while it waits for or sends it":
        (int(split_every) + 2) * sketch_bytes,
        "a block task holds its rows and its sketch": read_bytes + sketch_bytes}
    if update == "randomized":
        # A block is compressed on the columns it touches: at most its nonzeros.
        active = min(int(n_features), read_bytes // 16) if read_bytes else int(n_features)
        steps = lanczos_steps(active, failure_probability)
        # Its rows in float64 and float32 and the transposes of both: about 44 bytes
        # a nonzero, under three times the 16 of read_bytes.
        parts[f"the randomized update holds its rows in four copies and {steps} "
              f"Lanczos vectors of {active:,} values"] = (
            3.0 * read_bytes + 8.0 * steps * active + 2 * sketch_bytes
            + 4.0 * working_size * active)
    return parts


def fits_workers(client, working_size, n_features, split_every, *, read_bytes=0):
    """Whether one task of an exact update at ``working_size`` fits within the
    workers' memory limit (True without a limit)."""
    limit = worker_memory_limit(client)
    if limit is None:
        return True
    return task_memory_bytes(working_size, n_features, split_every,
                             read_bytes=read_bytes) <= _worker_budget(limit)[0]


def worker_memory_limit(client):
    """The smallest memory limit in bytes of the client's workers; None without
    a ``distributed`` client or when no worker has a limit."""
    if client is None or not hasattr(client, "scheduler_info"):
        return None
    workers = client.scheduler_info().get("workers", {}).values()
    limits = [w.get("memory_limit") or 0 for w in workers]
    limits = [limit for limit in limits if limit > 0]
    return min(limits) if limits else None


def largest_fitting_sketch_size(limit, n_features, split_every, *,
                                fraction=TERMINATE_FRACTION, **kwargs):
    """The largest ``l >= 2`` (working size = l) whose task memory fits within
    ``fraction`` of a worker's ``limit`` bytes, or None when even ``l = 2`` does
    not."""
    budget = fraction * limit - WORKER_BASELINE_BYTES
    if task_memory_bytes(2, n_features, split_every, **kwargs) > budget:
        return None
    low, high = 2, 2 + math.ceil(budget / (8.0 * n_features))
    while low < high:  # the largest l with task_memory_bytes(l) <= budget
        mid = (low + high + 1) // 2
        if task_memory_bytes(mid, n_features, split_every, **kwargs) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _worker_budget(limit):
    """Bytes a task may hold on a worker with ``limit`` bytes, and those words."""
    budget = TERMINATE_FRACTION * limit - WORKER_BASELINE_BYTES
    room = (f"more than the {max(budget, 0) / 2 ** 30:.2f} GiB a worker has for it "
            f"({TERMINATE_FRACTION:.0%} of its memory limit of {limit / 2 ** 30:.2f} GiB, "
            f"where it is restarted, less {WORKER_BASELINE_BYTES // 2 ** 20} MiB for the "
            "worker itself)")
    return budget, room


def estimate_memory_bytes(n_vectors, n_features, split_every, read_bytes=0):
    """Bytes one task of :func:`~dasketch.error_estimate.estimate_error` holds at least:
    a block's rows, its test vectors and its product ``X^T X Omega`` (d x r float64
    each), or a sum of ``split_every`` products and one more held while waiting."""
    product = 8.0 * int(n_vectors) * int(n_features)
    return max(read_bytes + 2 * product, (int(split_every) + 2) * product)


def check_estimate_memory(client, n_vectors, n_features, split_every, *, read_bytes=0,
                          lower_fan_in=False):
    """The fan-in to run :func:`~dasketch.error_estimate.estimate_error` with, after
    checking that one of its tasks fits the workers' memory limit.

    With ``lower_fan_in`` (no ``split_every`` given) the fan-in drops, down to 2,
    until a task fits. Raises ValueError, naming the ``n_vectors`` that fits, when
    it still does not.
    """
    limit = worker_memory_limit(client)
    if limit is None:
        return split_every
    budget, room = _worker_budget(limit)
    while lower_fan_in and split_every > 2 and estimate_memory_bytes(
            n_vectors, n_features, split_every, read_bytes) > budget:
        split_every -= 1
    need = estimate_memory_bytes(n_vectors, n_features, split_every, read_bytes)
    if need <= budget:
        return split_every
    fits = int(n_vectors)
    while fits >= 1 and estimate_memory_bytes(fits, n_features, split_every,
                                              read_bytes) > budget:
        fits -= 1
    advice = (f"use n_vectors <= {fits} (failure probability 1e-{fits})" if fits >= 1
              else "no number of vectors fits")
    raise ValueError(
        f"n_vectors={n_vectors} with {n_features:,} features needs about "
        f"{need / 2 ** 30:.2f} GiB in one worker task ({split_every} products of "
        f"{n_features:,} x {n_vectors} float64 values summed at once), {room}; "
        f"{advice}, or workers with more memory")


def check_task_memory(client, sketch_size, working_size, n_features, split_every, *,
                      update, failure_probability, requested="auto", read_bytes=0):
    """The update to run with, after checking that one task fits the workers' limit.

    When the randomized update was chosen by ``requested="auto"`` and does not fit
    but the exact update does, the exact update (``"auto"``) is returned.

    Raises
    ------
    ValueError
        When the task does not fit, naming ``sketch_size``, the memory the task
        needs, the workers' limit and the largest sketch size that fits.
    """
    limit = worker_memory_limit(client)
    if limit is None:
        return update
    budget, room = _worker_budget(limit)
    if read_bytes > budget:
        raise ValueError(
            f"X: one block task reads {read_bytes / 2 ** 30:.2f} GiB at once (its largest "
            f"input chunk of whole rows and its block), {room}; pass fewer rows per "
            "block (block_rows, command line --block-rows), store X with fewer rows per "
            "chunk if its chunks are larger (make-data and write_synthetic keep chunks "
            "within 32 MiB), or use workers with more memory")
    need = task_memory_bytes(working_size, n_features, split_every, update=update,
                             failure_probability=failure_probability, read_bytes=read_bytes)
    if need <= budget:
        if need > PAUSE_FRACTION * limit - WORKER_BASELINE_BYTES:
            calm = largest_fitting_sketch_size(
                limit, n_features, split_every, fraction=PAUSE_FRACTION, update=update,
                failure_probability=failure_probability, read_bytes=read_bytes)
            below = (f"sketch_size <= {calm} stays below it" if calm is not None else
                     "no sketch size stays below it with these blocks; use smaller blocks "
                     "(block_rows, command line --block-rows) or workers with more memory")
            warnings.warn(
                f"sketch_size={sketch_size} with {n_features:,} features needs about "
                f"{need / 2 ** 30:.2f} GiB in one worker task, above {PAUSE_FRACTION:.0%} "
                f"of the workers' memory limit of {limit / 2 ** 30:.2f} GiB (with "
                f"{WORKER_BASELINE_BYTES // 2 ** 20} MiB for the worker itself), where "
                f"they pause and the sketch slows down; {below}", stacklevel=3)
        return update
    if requested == "auto" and update == "randomized" and task_memory_bytes(
            working_size, n_features, split_every, read_bytes=read_bytes) <= budget:
        return "auto"
    sizes = dict(failure_probability=failure_probability, read_bytes=read_bytes)
    fits = largest_fitting_sketch_size(limit, n_features, split_every, update=update, **sizes)
    exact = largest_fitting_sketch_size(limit, n_features, split_every, **sizes)
    if requested == "auto" and exact is not None:
        fits = max(fits or 0, exact)  # "auto" falls back to the exact update
    if fits is not None and fits < sketch_size:
        advice = f"use sketch_size <= {fits}"
    elif exact is not None:
        advice = f"use update='block' with sketch_size <= {exact}"
    else:
        advice = "no sketch size fits"
    parts = _task_parts(working_size, n_features, split_every, update, failure_probability,
                        read_bytes)
    what = max(parts, key=parts.get)
    raise ValueError(
        f"sketch_size={sketch_size} with {n_features:,} features needs about "
        f"{need / 2 ** 30:.2f} GiB in one worker task ({what}), {room}; {advice}, or "
        "workers with more memory")
