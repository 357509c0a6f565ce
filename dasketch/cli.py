"""The ``dasketch`` command: sketch zarr data sets from a terminal.

Subcommands: ``make-data``, ``sketch``, ``info``, ``demo``; ``dasketch SUBCOMMAND
--help`` describes each, and a bare ``dasketch`` prints the help (exit status 0).
A misspelt option, subcommand or choice is answered with the closest valid one.
Results go to stdout, progress and errors to stderr.
Every user mistake (options, paths, unreadable stores or sketch files, errors
raised on the workers) prints one line and exits with status 2, before any
cluster starts where it can be known then; Ctrl-C exits with status 130 and
SIGTERM with 143, and neither leaves a partial output or a temporary behind.
Nothing is overwritten without ``--overwrite``, and ``--overwrite`` replaces
only a sketch or data store that dasketch wrote, never an input of the same
job (:mod:`dasketch.storage.outputs`).

This module dispatches the subcommands and turns what they raise into exit
statuses; each subcommand is a module of its own (``cli_sketch``, ``cli_info``,
``cli_make_data``, ``cli_demo``), and what they share is in ``cli_cluster``
(the client of a job) and ``cli_output`` (messages and output checks).

Only the standard library is imported at start (``--help`` answers at once);
NumPy, Dask and the sketching code are imported by the subcommand that runs.
"""

from __future__ import annotations

import logging
import os
import signal
import sys

from dasketch.cli_cluster import _close_interrupted_clusters, _workers_ignore_sigint  # noqa: F401
from dasketch.cli_demo import DEMO_RANK, TIGHT_BOUND, _plot_spectrum, run_demo  # noqa: F401
from dasketch.cli_info import run_info
from dasketch.cli_make_data import run_make_data
from dasketch.cli_parser import EXIT_USER_ERROR, build_parser
from dasketch.cli_sketch import run_sketch

EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
_USER_ERRORS = (ValueError, TypeError, OSError, KeyError)


def _terminate(signum, frame):
    from dasketch.storage.outputs import signal_interrupt

    raise signal_interrupt(signum)


COMMANDS = {"demo": run_demo, "sketch": run_sketch, "info": run_info,
            "make-data": run_make_data}


def _one_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def main(argv=None):
    """Entry point of the ``dasketch`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # a bare `dasketch`: what it can do
        parser.print_help()
        return 0
    prefix = f"dasketch {args.command}: error:"
    if not args.verbose:
        # "Task exception was never retrieved" at shutdown after an error or Ctrl-C.
        logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # stdout closed early (`dasketch info FILE | head`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return EXIT_FAILURE
    except KeyboardInterrupt as exc:
        from dasketch.storage.outputs import Terminated

        terminated = isinstance(exc, Terminated)
        _close_interrupted_clusters()
        print(f"dasketch {args.command}: {'terminated' if terminated else 'interrupted'}; "
              "no partial output was left behind", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except _USER_ERRORS as exc:
        if args.verbose:
            raise
        print(f"{prefix} {_one_line(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as exc:  # noqa: BLE001 - e.g. a worker lost; --verbose shows it
        if args.verbose:
            raise
        if "scheduler-connection-lost" in str(exc):
            print(f"{prefix} the connection to the Dask scheduler was lost (it stopped, or "
                  "the network failed); the job was cancelled and nothing was written",
                  file=sys.stderr)
            return EXIT_FAILURE
        print(f"{prefix} {type(exc).__name__}: {_one_line(exc)} (run with --verbose for "
              "the traceback)", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
