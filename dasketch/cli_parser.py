"""The options of the ``dasketch`` command: argument types that check values as
they are parsed, so that a bad option fails in one line before any cluster
starts, and the parser of every subcommand. Standard library only."""

from __future__ import annotations

import argparse
import difflib
import re

EXIT_USER_ERROR = 2
# What errors call the positional arguments: the names that usage lines show.
PATH = "PATH"
FILE = "FILE"


# ------------------------------------------------------------------ option types
def _integer_at_least(lowest):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < lowest:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lowest}, got {text!r}")
        return value
    parse.__name__ = f"integer >= {lowest}"
    return parse


def _number_in(accept, expected):
    """An argument type: a float for which ``accept`` holds (NaN never does)."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    parse.__name__ = expected
    return parse


_nonnegative_float = _number_in(lambda v: 0 <= v < float("inf"), "a finite number >= 0")
_density = _number_in(lambda v: 0 < v <= 1, "a number in (0, 1]")


def _memory_limit(text):
    from dasketch.cluster import check_memory_limit

    try:
        return check_memory_limit(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size such as 2GiB, got {text!r}") \
            from None


def _scheduler_address(text):
    from dasketch.cluster import check_address

    try:
        check_address(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


_positive_int = _integer_at_least(1)


# ------------------------------------------------------------------ parser
class _Parser(argparse.ArgumentParser):
    """Option errors in one line (argparse prints the usage block first), with
    the closest valid spelling when an option, a subcommand or a choice is
    misspelt (as ``suggest_on_error`` does from Python 3.12)."""

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        # Unknown options reach the top-level parser: suggest those of the subcommand.
        self._misspelt = [text.split("=", 1)[0] for text in extras if text.startswith("-")]
        self._options = self._option_strings(getattr(namespace, "command", None))
        return namespace, extras

    def _option_strings(self, command):
        options = list(self._option_string_actions)
        for action in self._subparsers._group_actions if self._subparsers else ():
            subcommands = getattr(action, "choices", None) or {}
            if command in subcommands:
                options += list(subcommands[command]._option_string_actions)
        return options

    def error(self, message):
        self.exit(EXIT_USER_ERROR, f"{self.prog}: error: {message}{self._suggestion(message)} "
                                   f"(see {self.prog} --help)\n")

    def _suggestion(self, message):
        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)$", message)
        if choice:
            wrong, candidates = choice[1], re.findall(r"'(.*?)'", choice[2])
        elif message.startswith("unrecognized arguments") and getattr(self, "_misspelt", None):
            wrong, candidates = self._misspelt[0], self._options
        else:
            return ""
        close = difflib.get_close_matches(wrong, candidates, n=1)
        return f"; did you mean {close[0]!r}?" if close else ""


def _version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dasketch")
    except PackageNotFoundError:  # run from a source tree
        return "unknown"


def _add_common(parser):
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress bar or progress messages (stderr)")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the cluster's log and the traceback of errors")


def _add_cluster_options(parser):
    parser.add_argument("--scheduler", metavar="ADDRESS", type=_scheduler_address,
                        default=None,
                        help="scheduler address (default: $DASK_SCHEDULER_ADDRESS, else an "
                             "embedded LocalCluster with one worker process per core)")
    parser.add_argument("--workers", type=_positive_int, default=None,
                        help="worker processes of the embedded cluster")
    parser.add_argument("--memory-limit", type=_memory_limit, default=None,
                        help="memory limit per worker of the embedded cluster, e.g. 2GiB")


def _add_sketch_options(parser):
    parser.add_argument("--sketch-size", "-l", type=_integer_at_least(2), default=32,
                        help="sketch size l >= 2 (the sketch keeps l - 1 rows; default 32)")
    parser.add_argument("--method", choices=("rfd", "fd"), default="rfd",
                        help="Robust Frequent Directions (default) or Frequent Directions")
    parser.add_argument("--split-every", type=_integer_at_least(2), default=None,
                        help="fan-in >= 2 of the merge tree (default 8)")


def build_parser():
    parser = _Parser(
        prog="dasketch",
        description="Sketch matrices too large for one machine with Robust Frequent "
                    "Directions, on a Dask cluster.")
    parser.add_argument("--version", action="version", version=f"dasketch {_version()}")
    # Without a subcommand, main prints this help.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    make = commands.add_parser(
        "make-data", help="write a synthetic dense or sparse-by-rows zarr data set",
        description="Write a synthetic data set for trials and benchmarks: dense rows with "
                    "a decaying spectrum, or sparse rows (CSR zarr group) with --density. "
                    "The store appears only once complete.")
    make.add_argument("path", metavar=PATH,
                      help="where to write the zarr store")
    make.add_argument("--rows", type=_positive_int, required=True,
                      help="rows of the data set")
    make.add_argument("--features", type=_positive_int, required=True,
                      help="features (columns) of the data set")
    make.add_argument("--density", type=_density, default=None,
                      help="fraction of nonzeros per row: writes a sparse-by-rows store")
    make.add_argument("--chunks", type=_positive_int, default=None, metavar="R",
                      help="rows per zarr chunk (default 16384; fewer for wide dense rows, "
                           "32 MiB a chunk)")
    make.add_argument("--seed", type=int, default=0,
                      help="seed of the random values: the same seed writes the same data "
                           "(default 0)")
    make.add_argument("--overwrite", action="store_true", help="replace an existing store")
    _add_common(make)
    sk = commands.add_parser(
        "sketch", help="sketch an existing zarr array and save the sketch",
        description="Sketch the rows of a zarr array (local path or fsspec URL; dense, or "
                    "sparse-by-rows as written by make-data --density) and save the sketch. "
                    "The store is checked on a worker first: a store the workers cannot "
                    "read, or one that changes during the job, is an error.")
    sk.add_argument("path", metavar=PATH,
                    help="the zarr array or group to sketch: a local path or an fsspec URL")
    sk.add_argument("--component", default=None, help="array path inside a zarr group")
    sk.add_argument("--center", action="store_true", help="sketch the column-centred data")
    sk.add_argument("--alpha0", type=_nonnegative_float, default=0.0,
                    help="regularisation alpha0 >= 0")
    sk.add_argument("--missing-chunks", choices=("fill", "raise"), default="fill",
                    help="chunks absent from the store when the job starts: read as the "
                         "array's fill value, as zarr does (default), or an error; a "
                         "store that changes during the job is an error either way")
    sk.add_argument("--out", default=None,
                    help="output file (.npz, or a .zarr directory; default: "
                         "<name>.sketch.npz beside the input)")
    sk.add_argument("--overwrite", action="store_true",
                    help="replace an existing output, if it is a sketch or data store that "
                         "dasketch wrote")
    sk.add_argument("--block-rows", type=_positive_int, default=None,
                    help="rows per block task (default: about 32 MiB of values a block)")
    _add_sketch_options(sk)
    _add_cluster_options(sk)
    _add_common(sk)

    info = commands.add_parser("info", help="print a saved sketch's metadata and bound",
                               description="Print a saved sketch's metadata, certified bound "
                                           "and top singular values.")
    info.add_argument("file", metavar=FILE,
                      help="a sketch saved by dasketch sketch (.npz file or .zarr directory)")
    info.add_argument("--top", type=_positive_int, default=10,
                      help="how many singular values to print (default 10)")
    _add_common(info)

    demo = commands.add_parser(
        "demo", help="write a synthetic zarr data set and sketch it on a local cluster",
        description="Write a synthetic zarr data set with a decaying spectrum (about 1 GiB "
                    "by default), sketch it with RFD on an embedded cluster, and report the "
                    "certified bound, the measured error against the exact Gram, time and "
                    "throughput. Writes the sketch and a plot of the spectra to --out.")
    demo.add_argument("--rows", type=_positive_int, default=500_000,
                      help="rows of the data set (default 500000)")
    demo.add_argument("--features", type=_positive_int, default=256,
                      help="features (columns) of the data set (default 256)")
    demo.add_argument("--out", default=None,
                      help="output directory (default: a new temporary directory)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace the contents of an existing --out directory")
    _add_sketch_options(demo)
    _add_cluster_options(demo)
    _add_common(demo)

    return parser


