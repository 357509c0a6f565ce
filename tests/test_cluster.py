"""get_client closes what it started and nothing else; every mistake in an
address or a cluster size fails fast, in one line, before anything starts."""

import json
import re
import socket
import subprocess
import sys

import pytest

from dasketch import get_client
from dasketch.cluster import MAIN_GUARD_MESSAGE


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


# Run in a fresh interpreter, which counts what each get_client call tried: TCP
# probes (with their timeout), connection attempts of distributed (each retry of
# distributed.comm.connect is one) and distributed.Client objects made.
_COUNTING = """
import json, socket, sys
from distributed import Client
from distributed.comm import tcp
from dasketch import get_client
from dasketch.cluster import MAIN_GUARD_MESSAGE

counts = {}
real_probe, real_attempt = socket.create_connection, tcp.BaseTCPConnector.connect
real_client_init = Client.__init__

def probe(address, timeout=None, *args, **kwargs):
    counts["probe_timeouts"].append(timeout)
    return real_probe(address, timeout, *args, **kwargs)

async def attempt(self, *args, **kwargs):
    counts["attempts"] += 1
    return await real_attempt(self, *args, **kwargs)

def client_init(self, *args, **kwargs):
    counts["clients"] += 1
    return real_client_init(self, *args, **kwargs)

socket.create_connection, tcp.BaseTCPConnector.connect = probe, attempt
Client.__init__ = client_init
for address in json.loads(sys.argv[1]):
    counts.update(probe_timeouts=[], attempts=0, clients=0)
    try:
        get_client(address, timeout="5s")
        counts["error"] = None
    except (OSError, ValueError) as exc:
        counts["error"] = f"{type(exc).__name__} {exc}"
    print(json.dumps(counts), flush=True)
"""

BAD_ADDRESSES = {  # address: (error, TCP probes made)
    "tcp://127.0.0.1:1": ("OSError", 1), "not-an-address": ("ValueError", 0),
    "tcp://127.0.0.1:70000": ("ValueError", 0), "ftp://host:1": ("ValueError", 0),
    "tcp://host.invalid:8786": ("OSError", 1)}


@pytest.mark.timeout(300)  # a hang guard only: each address is judged by what it tried
@pytest.mark.heavy
def test_bad_addresses_fail_fast_in_one_line_naming_them():
    """Failing fast is counted, not timed: a malformed address tries no
    connection; a refused port and an unknown host take one plain TCP probe,
    bounded by the ``timeout`` given, and never reach distributed, whose
    connection retries a refused port until its timeout and whose ``Client``
    (30 s on a refused port, and a ``__del__`` that hangs and prints a
    traceback after a malformed address) is never made. In a fresh process, so
    that what it leaves at exit shows on its stderr."""
    result = subprocess.run([sys.executable, "-c", _COUNTING, json.dumps(list(BAD_ADDRESSES))],
                            capture_output=True, text=True, timeout=240)
    assert result.stderr == ""
    outcomes = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(outcomes) == len(BAD_ADDRESSES), result.stdout
    for (address, (error, probes)), tried in zip(BAD_ADDRESSES.items(), outcomes):
        line = tried["error"]
        assert line.startswith(error) and repr(address) in line and "\n" not in line, line
        assert tried["probe_timeouts"] == [5.0] * probes, (address, tried)
        assert tried["attempts"] == 0 and tried["clients"] == 0, (address, tried)


def _connections_made(server):
    """How many connections the listening ``server`` holds unaccepted."""
    server.setblocking(False)
    count = 0
    while True:
        try:
            connection, _ = server.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


@pytest.mark.timeout(120)  # a hang guard only: the bound is counted below
def test_a_port_that_does_not_answer_fails_within_the_timeout(monkeypatch):
    """A listening socket that never answers (a firewall, another service) holds
    a plain ``distributed.Client`` forever: the question asked over Dask's
    protocol is bounded by the timeout given, asked once, and no ``Client`` is
    made."""
    import asyncio

    import distributed

    bounds = []
    real_wait_for = asyncio.wait_for

    def wait_for(awaitable, timeout):
        bounds.append(timeout)
        return real_wait_for(awaitable, timeout)

    def no_client(*args, **kwargs):
        raise AssertionError("a distributed.Client was made")

    monkeypatch.setattr(asyncio, "wait_for", wait_for)
    monkeypatch.setattr(distributed, "Client", no_client)
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(OSError, match=re.escape(address) + ".*no answer within 2 s"):
            get_client(address, timeout="2s")
        # the TCP probe and the one connection that asked, no retry
        assert _connections_made(server) == 2
    assert len(bounds) == 1 and 0 < bounds[0] <= 2


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


_SCRIPT = """import dasketch
{guard}{indent}with dasketch.get_client(n_workers=1, dashboard_address=None) as client:
{indent}    print(client.submit(sum, [1, 2]).result())
"""


@pytest.mark.timeout(300)  # a hang guard only
@pytest.mark.slow  # heavy; run in CI by .ci/run's slow step
def test_a_script_without_the_main_guard_is_told_so_in_one_line(tmp_path):
    """Each worker process imports the script again; without the guard its
    get_client would start a cluster there: refused with one line naming the
    guard, instead of hundreds of lines of nested start-up tracebacks."""
    script = tmp_path / "unguarded.py"
    script.write_text(_SCRIPT.format(guard="", indent=""))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode != 0 and result.stdout == ""
    assert f"RuntimeError: {MAIN_GUARD_MESSAGE}" in result.stderr.splitlines(), result.stderr
    assert "Failed to start process" not in result.stderr
    assert len(result.stderr.splitlines()) < 120, result.stderr
    script.write_text(_SCRIPT.format(guard='if __name__ == "__main__":\n', indent="    "))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=240, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "3\n", result.stderr
