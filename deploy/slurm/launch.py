"""Start a Dask cluster on SLURM for dasketch with dask-jobqueue.

The scheduler runs in this process (on the login node); each SLURM job runs
worker processes as configured in ``jobqueue.yaml`` beside this file. The
scheduler address is printed and written to ``--address-file`` so that
``dasketch sketch ... --scheduler ADDRESS`` or ``dasketch.get_client(ADDRESS)``
can use the cluster; the jobs are cancelled when this process ends (Ctrl-C).

    python deploy/slurm/launch.py --jobs 4
    python deploy/slurm/launch.py --print-job-script     # inspect, submit nothing

Requires ``pip install dask-jobqueue``.
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


def load_config(path):
    """Merge a dask-jobqueue YAML file into the active Dask configuration."""
    with open(path) as fh:
        config = yaml.safe_load(fh)
    if not isinstance(config, dict) or "slurm" not in config.get("jobqueue", {}):
        raise ValueError(f"config: {path} has no jobqueue.slurm section")
    dask.config.update(dask.config.config, config, priority="new")
    return config


def make_cluster(config_path, **overrides):
    """A ``dask_jobqueue.SLURMCluster`` configured from ``config_path``."""
    from dask_jobqueue import SLURMCluster

    load_config(config_path)
    return SLURMCluster(**overrides)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(HERE / "jobqueue.yaml"),
                        help="dask-jobqueue YAML file (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="SLURM jobs to submit")
    parser.add_argument("--adapt-max", type=int, default=None,
                        help="scale adaptively between 1 and this many jobs instead")
    parser.add_argument("--queue", default=None, help="SLURM partition")
    parser.add_argument("--account", default=None, help="SLURM account")
    parser.add_argument("--address-file", default="scheduler-address",
                        help="write the scheduler address here (default: %(default)s)")
    parser.add_argument("--print-job-script", action="store_true",
                        help="print the batch script of one job and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, got {args.jobs}")

    overrides = {key: value for key, value in
                 (("queue", args.queue), ("account", args.account)) if value is not None}
    with make_cluster(args.config, **overrides) as cluster:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        if args.adapt_max:
            cluster.adapt(minimum_jobs=1, maximum_jobs=args.adapt_max)
        else:
            cluster.scale(jobs=args.jobs)
        address = cluster.scheduler_address
        Path(args.address_file).write_text(address + "\n")
        print(f"scheduler: {address}\ndashboard: {cluster.dashboard_link}\n"
              f"export DASK_SCHEDULER_ADDRESS={address}", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        stop.wait()
        if os.path.exists(args.address_file):
            os.remove(args.address_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
