"""get_client closes what it started and nothing else; every mistake in an
address or a cluster size fails fast, in one line, before anything starts."""

import re
import socket
import subprocess
import sys
import time

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


@pytest.mark.parametrize("address, error", [
    ("tcp://127.0.0.1:1", "OSError"), ("not-an-address", "ValueError"),
    ("tcp://127.0.0.1:70000", "ValueError"), ("ftp://host:1", "ValueError"),
    ("tcp://host.invalid:8786", "OSError")])
def test_bad_addresses_fail_fast_in_one_line_naming_them(address, error):
    """In a fresh process, so that what it leaves at exit shows: distributed's
    Client alone takes 30 s on a refused port, and after a malformed address its
    ``__del__`` hangs 60 s and prints a traceback."""
    code = ("from dasketch import get_client\n"
            f"try:\n    get_client({address!r})\n"
            "except (OSError, ValueError) as exc:\n    print(type(exc).__name__, exc)\n")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60)
    assert time.monotonic() - started < 10
    assert result.stderr == ""
    (line,) = result.stdout.splitlines()
    assert line.startswith(error) and repr(address) in line, line


def test_a_port_that_does_not_answer_fails_within_the_timeout():
    """A listening socket that never answers (a firewall, another service) holds
    a plain ``distributed.Client`` forever."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(OSError, match=re.escape(address) + ".*no answer within 2 s"):
            get_client(address, timeout="2s")
        assert time.monotonic() - started < 5


def test_a_worker_address_is_not_a_scheduler(cluster_client):
    worker = next(iter(cluster_client.scheduler_info()["workers"]))
    with pytest.raises(OSError, match="not a scheduler .*'Worker'"):
        get_client(worker)


@pytest.mark.parametrize("sizing", [
    {"n_workers": 0}, {"n_workers": -1}, {"n_workers": 1.5}, {"n_workers": True},
    {"threads_per_worker": 0}, {"memory_limit": "lots"}, {"memory_limit": -1},
    {"timeout": "never"}])
def test_impossible_clusters_are_rejected_before_anything_starts(sizing):
    with pytest.raises(ValueError, match=next(iter(sizing))):
        get_client(**sizing)
