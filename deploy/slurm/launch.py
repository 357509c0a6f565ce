"""Start a Dask cluster on SLURM for dasketch with dask-jobqueue, over TLS.

The scheduler runs in this process (on the login node); each SLURM job runs
worker processes as configured in ``jobqueue.yaml`` beside this file. The
scheduler listens with TLS (``tls://``), on the one network interface the
workers use (``interface`` in the YAML file, or ``--interface``), and its
dashboard on 127.0.0.1 only. TLS uses throwaway credentials made for this
cluster (``distributed.security.Security.temporary``): the workers read them
from ``--tls-dir``, which must be on a file system the compute nodes see, and
the client files (CA, certificate, key; readable by you only) are written
there too, with ``client.env`` holding the Dask settings that use them. The
scheduler address is printed and written to ``--address-file``; the jobs are
cancelled and the client files removed when this process ends (Ctrl-C).

    python deploy/slurm/launch.py --interface ib0 --jobs 4
    python deploy/slurm/launch.py --print-job-script     # inspect, submit nothing

Requires ``pip install dask-jobqueue`` (and ``cryptography``, for the credentials).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

import dask
import yaml

HERE = Path(__file__).resolve().parent
CONFIG = "jobqueue.slurm"
# Files of the client credentials in the TLS directory, and the Dask settings
# (as environment variables) that make a client use them.
CLIENT_FILES = {"ca_file": "ca.pem", "cert": "client-cert.pem", "key": "client-key.pem"}
CLIENT_ENV = "client.env"
TLS_VARIABLES = {"ca_file": "DASK_DISTRIBUTED__COMM__TLS__CA_FILE",
                 "cert": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
                 "key": "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"}
NO_INTERFACE = ("no network interface is configured for the scheduler and workers: pass "
                "--interface NAME (this node has: {names}) or set jobqueue.slurm.interface "
                "in {config}")


def load_config(path):
    """Merge a dask-jobqueue YAML file into the active Dask configuration."""
    with open(path) as fh:
        config = yaml.safe_load(fh)
    if not isinstance(config, dict) or "slurm" not in config.get("jobqueue", {}):
        raise ValueError(f"config: {path} has no jobqueue.slurm section")
    dask.config.update(dask.config.config, config, priority="new")
    return config


def interface_names():
    """Names of this machine's network interfaces that have an IPv4 address."""
    import socket

    import psutil

    return sorted(name for name, addrs in psutil.net_if_addrs().items()
                  if any(a.family == socket.AF_INET for a in addrs))


def check_interface(interface, config_path):
    """``interface`` if this machine has it; ``ValueError`` in one line otherwise."""
    names = ", ".join(interface_names())
    if not interface:
        raise ValueError(NO_INTERFACE.format(names=names, config=config_path))
    if interface not in interface_names():
        raise ValueError(f"interface {interface!r} has no IPv4 address on this node "
                         f"(it has: {names}); pass --interface NAME")
    return interface


def make_cluster(config_path, *, interface=None, security=True, tls_dir=None, **overrides):
    """A ``dask_jobqueue.SLURMCluster`` configured from ``config_path``.

    Parameters
    ----------
    config_path : path
        dask-jobqueue YAML file with a ``jobqueue.slurm`` section.
    interface : str, optional
        Network interface of the scheduler and the workers (default: the
        file's ``interface``); one of them is required.
    security : bool or distributed.security.Security
        True (default): TLS with throwaway credentials; a ``Security``: those;
        False: plain TCP (anyone who reaches the interface can run code).
    tls_dir : path, optional
        Where the workers' credential files are written (default: the file's
        ``shared-temp-directory``); created readable by the user only.
    **overrides
        Passed to ``SLURMCluster`` (``queue``, ``account``, ...).

    Raises
    ------
    ValueError
        No interface given or configured, or one this machine does not have.
    """
    from dask_jobqueue import SLURMCluster

    load_config(config_path)
    interface = check_interface(interface or dask.config.get(f"{CONFIG}.interface"),
                                config_path)
    if security is False:
        return SLURMCluster(interface=interface, **overrides)
    if security is True:
        from distributed.security import Security

        security = Security.temporary()
    tls_dir = tls_dir or dask.config.get(f"{CONFIG}.shared-temp-directory")
    Path(os.path.expanduser(os.path.expandvars(tls_dir))).mkdir(mode=0o700, parents=True,
                                                                exist_ok=True)
    return SLURMCluster(interface=interface, security=security, protocol="tls://",
                        shared_temp_directory=str(tls_dir), **overrides)


def _write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a file left by an earlier run keeps its mode otherwise
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def write_client_credentials(security, directory):
    """Write the client's CA, certificate and key of ``security`` to ``directory``
    (mode 0600, directory 0700) and ``client.env`` with the Dask settings that
    use them.

    Returns
    -------
    dict
        ``{"ca_file", "cert", "key", "env"}``: the paths written.
    """
    directory = Path(os.path.expanduser(os.path.expandvars(directory)))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    tls = security.get_tls_config_for_role("client")
    paths = {}
    for key, name in CLIENT_FILES.items():
        value = tls[key]
        if value and "\n" not in value:  # a file already: read it, keep one copy here
            value = Path(value).read_text()
        paths[key] = str(directory / name)
        _write_private(paths[key], value)
    lines = ["export DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION=True"]
    lines += [f"export {TLS_VARIABLES[key]}={paths[key]}" for key in CLIENT_FILES]
    paths["env"] = str(directory / CLIENT_ENV)
    _write_private(paths["env"], "\n".join(lines) + "\n")
    return paths


def client_security(paths):
    """The ``distributed.security.Security`` of a client, from
    :func:`write_client_credentials`' files."""
    from distributed.security import Security

    return Security(tls_ca_file=paths["ca_file"], tls_client_cert=paths["cert"],
                    tls_client_key=paths["key"], require_encryption=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(HERE / "jobqueue.yaml"),
                        help="dask-jobqueue YAML file (default: %(default)s)")
    parser.add_argument("--interface", default=None,
                        help="network interface shared by this node and the compute nodes "
                             "(e.g. ib0); default: the config's interface")
    parser.add_argument("--tls-dir", default=None,
                        help="directory on a shared file system for the TLS credentials "
                             "(default: the config's shared-temp-directory)")
    parser.add_argument("--jobs", type=int, default=2, help="SLURM jobs to submit")
    parser.add_argument("--adapt-max", type=int, default=None,
                        help="scale adaptively between 1 and this many jobs instead")
    parser.add_argument("--queue", default=None, help="SLURM partition")
    parser.add_argument("--account", default=None, help="SLURM account")
    parser.add_argument("--address-file", default="scheduler-address",
                        help="write the scheduler address here (default: %(default)s)")
    parser.add_argument("--print-job-script", action="store_true",
                        help="print the batch script of one job and exit (the interface "
                             "defaults to the loopback interface lo)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")

    overrides = {key: value for key, value in
                 (("queue", args.queue), ("account", args.account)) if value is not None}
    interface = args.interface
    if args.print_job_script and not interface:
        load_config(args.config)
        interface = dask.config.get(f"{CONFIG}.interface") or "lo"
    try:
        cluster = make_cluster(args.config, interface=interface, tls_dir=args.tls_dir,
                               **overrides)
    except ValueError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    with cluster:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        paths = write_client_credentials(cluster.security, cluster.shared_temp_directory)
        try:
            if args.adapt_max:
                cluster.adapt(minimum_jobs=1, maximum_jobs=args.adapt_max)
            else:
                cluster.scale(jobs=args.jobs)
            address = cluster.scheduler_address
            Path(args.address_file).write_text(address + "\n")
            print(f"scheduler: {address} (TLS; certificates for this cluster only)\n"
                  f"dashboard: {cluster.dashboard_link} (this node only: ssh -L)\n"
                  f"clients need the CA, certificate and key in {Path(paths['env']).parent};"
                  f" in a shell:\n  source {paths['env']}\n"
                  f"  export DASK_SCHEDULER_ADDRESS={address}\n"
                  f"or in Python: dasketch.get_client({address!r}, security=Security("
                  f"tls_ca_file={paths['ca_file']!r}, tls_client_cert={paths['cert']!r}, "
                  f"tls_client_key={paths['key']!r}, require_encryption=True))", flush=True)
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            stop.wait()
        finally:
            for path in [args.address_file] + list(paths.values()):
                if os.path.exists(path):
                    os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
