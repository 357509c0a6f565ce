"""Real ``dask scheduler`` / ``dask worker`` processes on 127.0.0.1, started with the
command lines of ``deploy/docker-compose.yml``.

The compose file is the source of truth: its commands and environment are read,
``${VAR:-default}`` is interpolated as docker compose does, and only what
loopback needs is changed (scheduler host name, bind addresses, ports). Every
process is started in its own session so that it and the worker processes its
nanny spawns can be killed as a group; :meth:`ProcessCluster.close` kills them
all, and every wait here is bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from unittest import mock

import cloudpickle
import yaml

# Functions run on the scheduler and workers travel by value: those processes
# cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
COMPOSE_SCHEDULER = "tcp://scheduler:8786"

_VARIABLE = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                       r"(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value, env):
    """Docker compose variable interpolation: ``${VAR}``, ``${VAR:-default}``,
    ``${VAR-default}``, ``${VAR:?message}``; ``$$`` is a literal ``$``."""
    if not isinstance(value, str):
        return value

    def substitute(match):
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        current = env.get(name)
        if op == ":-":
            return current if current else arg
        if op == "-":
            return arg if current is None else current
        if op in (":?", "?") and not current:
            raise KeyError(f"compose variable {name} is required: {arg}")
        return current or ""

    return _VARIABLE.sub(substitute, value).replace("$$", "$")


def load_compose(path=COMPOSE_FILE):
    with open(path) as fh:
        return yaml.safe_load(fh)


def compose_service(name, env=None, compose=None):
    """``(command, environment)`` of a compose service, interpolated with ``env``."""
    env = {} if env is None else env
    service = (compose or load_compose())["services"][name]
    command = [interpolate(arg, env) for arg in service["command"]]
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    environment = {key: str(interpolate(value, env)) for key, value in environment.items()}
    return command, environment


def set_option(command, option, value):
    """Replace the value of ``option`` in ``command`` (append the option if absent)."""
    command = list(command)
    if option in command:
        command[command.index(option) + 1] = value
    else:
        command += [option, value]
    return command


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    """Poll ``predicate`` until it returns a truthy value, for at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"{what} not reached within {timeout} s")


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent():
    """In the child, before it runs: be killed when the test process ends, however
    it ends (a hard timeout's os._exit, SIGKILL), where no finaliser runs. A
    nanny's worker processes follow it (distributed ends them when their
    nanny's pipe closes), so nothing outlives the suite."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _kill_group(proc, timeout=10.0):
    """SIGTERM the process group of ``proc``, then SIGKILL what is left."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:  # the nanny's worker processes share the group, even after the nanny exits
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:  # pragma: no cover - a zombie we cannot reap
        pass


class ProcessCluster:
    """A scheduler and worker processes on loopback, from the compose command lines.

    Parameters
    ----------
    logdir : path
        Where each process's output goes (``scheduler.log``, ``worker-<i>.log``).
    n_workers : int
        Worker processes (each one ``dask worker`` with its nanny, like one
        replica of the compose ``worker`` service).
    env : dict
        Values for the compose variables (``DASK_WORKER_MEMORY_LIMIT``, ...).
    protocol : str
        ``"tcp"``, or ``"tls"`` with the certificate options in ``extra_args``.
    extra_args : sequence of str
        Appended to both command lines (e.g. ``--tls-ca-file``, ``--tls-cert``).
    """

    def __init__(self, logdir, n_workers=2, env=None, compose_path=COMPOSE_FILE,
                 protocol="tcp", extra_args=()):
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.env = dict(env or {})
        self.protocol = protocol
        self.extra_args = list(extra_args)
        self.compose = load_compose(compose_path)
        self.procs = {}
        self.address = None
        self.dashboard_port = None
        self.n_started = 0
        try:
            self.start_scheduler()
            for _ in range(n_workers):
                self.start_worker()
        except BaseException:
            self.close()
            raise

    # -- processes
    def _popen(self, name, command, extra_env=None):
        environ = dict(os.environ)
        environ.update(extra_env or {})
        environ.setdefault("PYTHONUNBUFFERED", "1")
        # The console script of the running interpreter, so the tests use the
        # environment they run in (the image has exactly one).
        if command[0] == "dask":
            command = [sys.executable, "-m", "dask"] + command[1:]
        log = open(self.logdir / f"{name}.log", "ab")
        try:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=environ,
                                    start_new_session=True, cwd=self.logdir,
                                    preexec_fn=_die_with_parent)
        finally:
            log.close()
        self.procs[name] = proc
        return proc

    def scheduler_command(self, port=None):
        command, _ = compose_service("scheduler", self.env, self.compose)
        self.port = port or free_port()
        self.dashboard_port = free_port()
        command = set_option(command, "--host", "127.0.0.1")
        command = set_option(command, "--port", str(self.port))
        command = set_option(command, "--dashboard-address", f"127.0.0.1:{self.dashboard_port}")
        if self.protocol != "tcp":
            command = set_option(command, "--protocol", self.protocol)
        return command + self.extra_args

    def start_scheduler(self, port=None):
        command = self.scheduler_command(port)
        self.address = f"{self.protocol}://127.0.0.1:{self.port}"
        self.scheduler_cmdline = command
        self._popen("scheduler", command)
        wait_until(self._scheduler_listening, 30, what="scheduler listening")

    def _scheduler_listening(self):
        if self.procs["scheduler"].poll() is not None:
            raise RuntimeError("scheduler exited:\n" + self.log("scheduler")[-3000:])
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def worker_command(self):
        command, environment = compose_service("worker", self.env, self.compose)
        assert COMPOSE_SCHEDULER in command, command
        command = [self.address if arg == COMPOSE_SCHEDULER else arg for arg in command]
        command = set_option(command, "--dashboard-address", "127.0.0.1:0")
        command = set_option(command, "--host", "127.0.0.1")
        return command + self.extra_args, environment

    def start_worker(self):
        command, environment = self.worker_command()
        self.worker_cmdline = command
        self.worker_environment = environment
        name = f"worker-{self.n_started}"
        self.n_started += 1
        return self._popen(name, command, environment)

    def log(self, name):
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self, prefix="worker"):
        return "\n".join(self.log(name) for name in self.procs if name.startswith(prefix))

    def kill_scheduler(self):
        proc = self.procs["scheduler"]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def close(self):
        for name in sorted(self.procs, key=lambda n: n == "scheduler"):  # workers first
            _kill_group(self.procs[name])

    # -- client side
    def client(self, timeout="20s", n_workers=None, wait=60):
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=False)
        if n_workers:
            client.wait_for_workers(n_workers, timeout=wait)
        return client

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------ fault injection
JOB_TIMEOUT = 180  # no job may take longer; a hang fails instead of blocking


@contextlib.contextmanager
def without_xarray(folder):
    """Processes started inside run as a worker image without the xarray extra does.

    dask.array imports xarray when it is installed, and xarray imports pandas and
    pyarrow: some 165 MiB per process, which tests of small worker memory limits
    must not count against dasketch. A package ``xarray`` that raises ImportError
    is put first on ``PYTHONPATH`` (dask ignores the import error).
    """
    folder = Path(folder)
    (folder / "xarray").mkdir(parents=True, exist_ok=True)
    (folder / "xarray" / "__init__.py").write_text(
        'raise ImportError("xarray is left out of these workers")\n')
    search_path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    with mock.patch.dict(os.environ, {"PYTHONPATH": search_path}):
        yield


def progress(dask_scheduler):
    """Finished / total tasks on the scheduler, and keys held by each worker."""
    done_states = {"memory", "released", "forgotten", "erred"}
    states = [ts.state for ts in dask_scheduler.tasks.values()]
    held = {addr: len(ws.has_what) for addr, ws in dask_scheduler.workers.items()}
    return sum(s in done_states for s in states), len(states), held


class Job:
    """Run ``func`` in a thread; keep its result or exception; bounded join."""

    def __init__(self, func):
        self.result = self.error = None
        self.elapsed = None
        self._thread = threading.Thread(target=self._run, args=(func,), daemon=True)
        self._start = time.monotonic()
        self._thread.start()

    def _run(self, func):
        try:
            self.result = func()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc
        self.elapsed = time.monotonic() - self._start

    @property
    def running(self):
        return self._thread.is_alive()

    def join(self, timeout=JOB_TIMEOUT):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"job still running after {timeout} s")
        return self


def _rss():
    import psutil

    return psutil.Process().memory_info().rss


def run_sampling_memory(client, func, timeout=JOB_TIMEOUT, interval=0.25):
    """Run ``func`` as a :class:`Job`, sampling the RSS of every worker every
    ``interval`` s; returns the joined job and the peak RSS per worker address."""
    job, peak = Job(func), {}
    deadline = time.monotonic() + timeout
    while job.running and time.monotonic() < deadline:
        try:
            for address, value in client.run(_rss).items():
                peak[address] = max(peak.get(address, 0), value)
        except Exception:  # noqa: BLE001 - a worker may be restarting
            pass
        time.sleep(interval)
    return job.join(max(deadline - time.monotonic(), 1)), peak


def kill_mid_job(client, func, *, kill, at_fraction=0.3, timeout=JOB_TIMEOUT):
    """Start ``func`` and, once ``at_fraction`` of the scheduler's tasks are done and
    a worker holds results, kill the worker holding the most (``kill(addr, pid)``).

    Returns ``(job, info)`` with what was killed and when.
    """
    pids = worker_pids(client)
    job = Job(func)
    state = {}

    def ready():
        if not job.running:
            raise AssertionError("the job finished before the fault was injected; "
                                 "make it larger")
        done, total, held = client.run_on_scheduler(progress)
        if total and done >= at_fraction * total and max(held.values(), default=0):
            state.update(done=done, total=total, held=held)
            return True
        return False

    wait_until(ready, timeout, interval=0.02, what="fault injection point")
    victim = max(state["held"], key=state["held"].get)
    kill(victim, pids[victim])
    info = {"victim": victim, "tasks_done": state["done"], "tasks_total": state["total"],
            "results_lost": state["held"][victim], "killed_at_s": time.monotonic() - job._start}
    job.join(timeout)
    return job, info


def transitions(dask_scheduler):
    """The scheduler's count of task state transitions so far (monotonic)."""
    return dask_scheduler.transition_counter


def measure(client, func):
    """Run ``func`` to completion; return ``(job, scheduler transitions it took)``."""
    before = client.run_on_scheduler(transitions)
    job = Job(func).join()
    return job, client.run_on_scheduler(transitions) - before


def kill_while_running(client, func, *, kill, after_transitions, timeout=JOB_TIMEOUT):
    """Start ``func`` (e.g. a stream over row blocks that submits one small graph per
    block, so that no single graph shows the progress) and kill a busy worker once
    the scheduler has made ``after_transitions`` task transitions for it (see
    :func:`measure` for the count of a whole fault-free run).

    Returns ``(job, info)``.
    """
    pids = worker_pids(client)
    start = client.run_on_scheduler(transitions)
    job = Job(func)

    def busy():
        if not job.running:
            raise AssertionError("the job finished before the fault was injected")
        if client.run_on_scheduler(transitions) - start < after_transitions:
            return None
        busy = client.run_on_scheduler(
            lambda dask_scheduler: [a for a, ws in dask_scheduler.workers.items()
                                    if ws.processing])
        return busy[0] if busy else None

    victim = wait_until(busy, timeout, interval=0.01, what="a busy worker")
    kill(victim, pids[victim])
    info = {"victim": victim, "killed_at_s": time.monotonic() - job._start}
    job.join(timeout)
    return job, info


def kill_process(_address, pid):
    """SIGKILL a worker process; its nanny starts a fresh one (a container restart)."""
    os.kill(pid, signal.SIGKILL)


def kill_worker_and_nanny(_address, pid):
    """SIGKILL a whole ``dask worker``: the nanny (the parent of the worker process
    and leader of its process group) and its worker process (a node lost)."""
    import psutil

    os.killpg(os.getpgid(psutil.Process(pid).ppid()), signal.SIGKILL)


def worker_pids(client):
    """``{worker address: pid}`` of the worker processes (children of the nannies)."""
    return client.run(os.getpid)
