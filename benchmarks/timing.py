"""Timing helpers shared by the benchmark scripts."""

import time

import numpy as np


def best_time(func, repeat):
    """Best wall time of ``repeat`` runs of ``func``, and the last result."""
    best, result = np.inf, None
    for _ in range(repeat):
        result = None  # release the last result, so a persisted one is recomputed
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def cpu_seconds(func):
    """Process CPU time (all threads) of one call of ``func``."""
    start = time.process_time()
    func()
    return time.process_time() - start
