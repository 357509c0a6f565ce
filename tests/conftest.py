"""Shared fixtures: a real distributed LocalCluster and the a9a data set.

The real data set is looked up in ``../shared/data`` beside the repository, or in
the directory named by ``DASKETCH_SHARED_DATA``; ``DASKETCH_SHARED_DATA=none``
disables the lookup, which is what a fresh clone without ``../shared`` sees (CI
runs the ``real_data`` tests that way too). Tests that use the a9a fixtures are
marked ``real_data`` automatically.

Tests that start a Dask cluster with worker processes (``LocalCluster``, the
``dask scheduler``/``dask worker`` processes of ``cluster_procs``, or the CLI's
embedded cluster) are marked ``cluster``: the test itself or a fixture it uses
starts one. ``pytest -m "not slow and not cluster and not heavy"`` is the quick
subset; ``heavy`` marks tests of several seconds or more each.
"""

import inspect
import os
import re
from pathlib import Path

import numpy as np
import pytest

SHARED_DATA_ENV = "DASKETCH_SHARED_DATA"
REAL_DATA_FIXTURES = {"a9a_train", "a9a_test"}
# What starts a cluster of worker processes, in a test or in a fixture it uses: this
# file's cluster_client, LocalCluster, cluster_procs' ProcessCluster, get_client
# (which starts the embedded cluster when no scheduler is given) and the CLI commands
# that start the embedded cluster (run in a subprocess by test_cli.py and others).
CLUSTER_SOURCE = re.compile(
    r"\bcluster_client\b|LocalCluster\(|ProcessCluster|get_client\(|run_on_small_workers"
    r"|run\(\s*\"(?:sketch|demo)\"|COMMAND, \"sketch\"|\"--workers\"")


def _shared_data():
    setting = os.environ.get(SHARED_DATA_ENV, "")
    if setting.lower() == "none":
        return None
    if setting:
        return Path(setting)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


SHARED_DATA = _shared_data()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_data: reads ../shared/data when present (CI runs these again "
                   f"with {SHARED_DATA_ENV}=none)")


def _sources(item):
    """The source of a test function and of the fixtures it uses that live in tests/."""
    here = Path(__file__).resolve().parent
    functions = [getattr(item, "function", None)]
    fixtureinfo = getattr(item, "_fixtureinfo", None)
    for definitions in (fixtureinfo.name2fixturedefs.values() if fixtureinfo else ()):
        functions += [definition.func for definition in definitions]
    for function in functions:
        try:
            if here in Path(inspect.getsourcefile(function)).resolve().parents:
                yield inspect.getsource(function)
        except (TypeError, OSError):
            continue


def pytest_collection_modifyitems(config, items):
    for item in items:
        if REAL_DATA_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.real_data)
        if any(CLUSTER_SOURCE.search(source) for source in _sources(item)):
            item.add_marker(pytest.mark.cluster)


@pytest.fixture(scope="session")
def cluster_client():
    """A LocalCluster with 2 worker processes (1 thread each) and its client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster,
                                                                 set_as_default=False) as client:
        yield client


def _load_libsvm(name):
    from sklearn.datasets import load_svmlight_file

    if SHARED_DATA is None:
        pytest.skip(f"real data lookup disabled ({SHARED_DATA_ENV}=none)")
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"real data set {path} is absent (it lives in ../shared/data)")
    X, y = load_svmlight_file(str(path), n_features=123)
    return X.tocsr(), np.where(y > 0, 1.0, -1.0)


@pytest.fixture(scope="session")
def a9a_train():
    """a9a train split (sparse CSR, labels in {-1, +1}); skipped when absent."""
    return _load_libsvm("a9a")


@pytest.fixture(scope="session")
def a9a_test():
    """a9a test split (sparse CSR, labels in {-1, +1}); skipped when absent."""
    return _load_libsvm("a9a.t")
