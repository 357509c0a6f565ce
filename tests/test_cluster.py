"""get_client closes what it started and nothing else."""

import pytest

from dasketch import get_client


def test_embedded_cluster_is_closed_with_the_client():
    with get_client(n_workers=1, dashboard_address=None) as client:
        cluster = client.cluster
        assert len(client.scheduler_info()["workers"]) == 1
        assert client.submit(sum, [1, 2]).result() == 3
    assert cluster.status.name == "closed"


def test_connecting_leaves_the_scheduler_running(cluster_client, monkeypatch):
    address = cluster_client.scheduler.address
    with get_client(address) as client:
        assert client.submit(sum, [2, 3]).result() == 5
    assert cluster_client.submit(sum, [3, 4]).result() == 7
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", address)
    with get_client() as client:
        assert client.scheduler.address == address
    assert cluster_client.submit(sum, [4, 5]).result() == 9


def test_sizing_an_address_is_an_error(cluster_client):
    with pytest.raises(ValueError, match="n_workers"):
        get_client(cluster_client.scheduler.address, n_workers=2)


def test_unreachable_scheduler_fails_in_bounded_time():
    with pytest.raises(OSError):
        get_client("tcp://127.0.0.1:1", timeout="2s")
