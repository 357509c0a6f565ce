"""A scheduler and worker processes on 127.0.0.1 that a benchmark can kill, and a
job run in a thread while it does.

``dask scheduler`` and ``dask worker`` (with its nanny) run as separate process
groups of this interpreter, so a worker process, a whole worker (nanny included) or
the scheduler can be killed with a signal, as a machine would lose them.
"""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import cloudpickle

# Functions sent to the scheduler travel by value: it cannot import this module.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

JOB_TIMEOUT = 180  # seconds; a job that takes longer is an error, not a hang


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    """The first truthy value of ``predicate()``, polled for at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while (value := predicate()) is None or value is False or value == 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout} s")
        time.sleep(interval)
    return value


class ProcessCluster:
    """``n_workers`` single-threaded ``dask worker`` processes and their scheduler,
    each in its own process group, logging to ``logdir``."""

    def __init__(self, logdir, n_workers=2, env=None):
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.procs = []
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        self.address = f"tcp://127.0.0.1:{port}"
        try:
            self.scheduler = self._spawn("scheduler", "--host", "127.0.0.1", "--port",
                                         str(port), "--dashboard-address", "127.0.0.1:0")
            wait_until(lambda: self._listening(port), 30, what="scheduler listening")
            for _ in range(n_workers):
                self.start_worker()
        except BaseException:
            self.close()
            raise

    def _spawn(self, role, *args):
        log = self.logdir / f"{role}-{len(self.procs)}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen([sys.executable, "-m", "dask", role, *args],
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env,
                                    start_new_session=True, cwd=self.logdir)
        self.procs.append(proc)
        return proc

    def _listening(self, port):
        if self.scheduler.poll() is not None:
            raise RuntimeError(f"the scheduler exited; see {self.logdir}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def start_worker(self):
        return self._spawn("worker", self.address, "--nthreads", "1", "--host", "127.0.0.1",
                           "--dashboard-address", "127.0.0.1:0")

    def client(self, n_workers=None, timeout="20s", wait=60):
        from distributed import Client

        client = Client(self.address, timeout=timeout, set_as_default=False)
        if n_workers:
            client.wait_for_workers(n_workers, timeout=wait)
        return client

    def kill_scheduler(self):
        os.killpg(self.scheduler.pid, signal.SIGKILL)
        self.scheduler.wait(timeout=10)

    def close(self):
        """SIGKILL every process group (a nanny's worker shares its group); workers first."""
        for proc in sorted(self.procs, key=lambda p: p is self.scheduler):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def progress(dask_scheduler):
    """Tasks finished, tasks known, and results held per worker, on the scheduler."""
    tasks = dask_scheduler.tasks.values()
    finished = sum(t.state in ("memory", "released", "forgotten", "erred") for t in tasks)
    return finished, len(tasks), {a: len(w.has_what) for a, w in dask_scheduler.workers.items()}


class Job:
    """``func()`` running in a thread: ``result``, ``error`` and ``elapsed`` once
    :meth:`join` returns."""

    _pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)

    def __init__(self, func):
        self.result = self.error = self.elapsed = None
        self._start = time.monotonic()
        self._future = self._pool.submit(func)

    @property
    def running(self):
        return not self._future.done()

    def join(self, timeout=JOB_TIMEOUT):
        try:
            self.result = self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"job still running after {timeout} s") from None
        except BaseException as exc:  # noqa: BLE001 - recorded, the caller reports it
            self.error = exc
        self.elapsed = time.monotonic() - self._start
        return self


def kill_mid_job(client, func, *, kill, at_fraction=0.3, timeout=JOB_TIMEOUT):
    """Run ``func`` and, once ``at_fraction`` of the scheduler's tasks are finished,
    ``kill(address, pid)`` the worker holding the most results. Returns the joined
    :class:`Job` and what was killed when."""
    pids = client.run(os.getpid)
    job = Job(func)

    def injection_point():
        if not job.running:
            raise RuntimeError("the job ended before the fault; make it larger")
        done, total, held = client.run_on_scheduler(progress)
        ready = total and done >= at_fraction * total and max(held.values(), default=0)
        return (done, total, held) if ready else None

    done, total, held = wait_until(injection_point, timeout, 0.02, "fault injection point")
    victim = max(held, key=held.get)
    kill(victim, pids[victim])
    info = {"victim": victim, "tasks_done": done, "tasks_total": total,
            "results_lost": held[victim], "killed_at_s": time.monotonic() - job._start}
    return job.join(timeout), info


def kill_process(_address, pid):
    """SIGKILL a worker process; its nanny starts a fresh one."""
    os.kill(pid, signal.SIGKILL)


def kill_worker_and_nanny(_address, pid):
    """SIGKILL a whole ``dask worker``: the process group of the worker's nanny."""
    os.killpg(os.getpgid(pid), signal.SIGKILL)
