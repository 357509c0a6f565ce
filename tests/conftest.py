"""Shared fixtures: a real distributed LocalCluster and the a9a data set."""

from pathlib import Path

import numpy as np
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


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
