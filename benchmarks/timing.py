"""Kept for scripts run as files that still import ``timing``: the helpers live in
``_common.py`` (:func:`best_time`, :func:`cpu_seconds`)."""

from _common import best_time, cpu_seconds  # noqa: F401
