"""The ``dasketch`` command: sketch zarr data sets from a terminal.

Subcommands: ``demo``, ``sketch``, ``info``, ``make-data``; ``dasketch SUBCOMMAND
--help`` describes each. User mistakes print one line on stderr and exit with
status 2; nothing is overwritten without ``--overwrite``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

EXIT_USER_ERROR = 2
_USER_ERRORS = (ValueError, TypeError, FileNotFoundError, FileExistsError, OSError,
                KeyError)


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _density(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}")
    return value


def _add_quiet(parser):
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no progress bar or progress messages")


def _add_cluster_options(parser):
    _add_quiet(parser)
    parser.add_argument("--scheduler", metavar="ADDRESS", default=None,
                        help="scheduler address (default: $DASK_SCHEDULER_ADDRESS, else an "
                             "embedded LocalCluster with one worker process per core)")
    parser.add_argument("--workers", type=_positive_int, default=None,
                        help="worker processes of the embedded cluster")
    parser.add_argument("--memory-limit", default=None,
                        help="memory limit per worker of the embedded cluster, e.g. 2GiB")


def _add_sketch_options(parser):
    parser.add_argument("--sketch-size", "-l", type=_positive_int, default=32,
                        help="sketch size l (the sketch keeps l - 1 rows; default 32)")
    parser.add_argument("--method", choices=("rfd", "fd"), default="rfd",
                        help="Robust Frequent Directions (default) or Frequent Directions")
    parser.add_argument("--split-every", type=_positive_int, default=None,
                        help="fan-in of the merge tree (default 8)")


def build_parser():
    parser = argparse.ArgumentParser(
        prog="dasketch",
        description="Sketch matrices too large for one machine with Robust Frequent "
                    "Directions, on a Dask cluster.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = commands.add_parser(
        "demo", help="write a synthetic zarr data set and sketch it on a local cluster",
        description="Write a synthetic zarr data set with a decaying spectrum (about 1 GB "
                    "by default), sketch it with RFD on an embedded cluster, and report the "
                    "certified bound, the measured error against the exact Gram, time and "
                    "throughput. Writes the sketch and a plot of the spectra to --out.")
    demo.add_argument("--rows", type=_positive_int, default=500_000)
    demo.add_argument("--features", type=_positive_int, default=256)
    demo.add_argument("--out", default=None,
                      help="output directory (default: a new temporary directory)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace the contents of an existing --out directory")
    _add_sketch_options(demo)
    _add_cluster_options(demo)

    sk = commands.add_parser(
        "sketch", help="sketch an existing zarr array and save the sketch",
        description="Sketch the rows of a zarr array (local path or fsspec URL; dense, or "
                    "sparse-by-rows as written by make-data --density) and save the sketch.")
    sk.add_argument("path", metavar="PATH_OR_URL")
    sk.add_argument("--component", default=None, help="array path inside a zarr group")
    sk.add_argument("--center", action="store_true", help="sketch the column-centred data")
    sk.add_argument("--alpha0", type=float, default=0.0, help="regularisation alpha0 >= 0")
    sk.add_argument("--out", default=None,
                    help="output file (.npz, or a .zarr directory; default: "
                         "<name>.sketch.npz beside the input)")
    sk.add_argument("--overwrite", action="store_true", help="replace an existing output")
    _add_sketch_options(sk)
    _add_cluster_options(sk)

    info = commands.add_parser("info", help="print a saved sketch's metadata and bound",
                               description="Print a saved sketch's metadata, certified bound "
                                           "and top singular values.")
    info.add_argument("file", metavar="FILE")
    info.add_argument("--top", type=_positive_int, default=10,
                      help="how many singular values to print (default 10)")
    _add_quiet(info)

    make = commands.add_parser(
        "make-data", help="write a synthetic dense or sparse-by-rows zarr data set",
        description="Write a synthetic data set for trials and benchmarks: dense rows with "
                    "a decaying spectrum, or sparse rows (CSR zarr group) with --density.")
    make.add_argument("path", metavar="PATH")
    make.add_argument("--rows", type=_positive_int, required=True)
    make.add_argument("--features", type=_positive_int, required=True)
    make.add_argument("--density", type=_density, default=None,
                      help="fraction of nonzeros per row: writes a sparse-by-rows store")
    make.add_argument("--chunks", type=_positive_int, default=16384, metavar="R",
                      help="rows per zarr chunk (default 16384)")
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--overwrite", action="store_true", help="replace an existing store")
    _add_quiet(make)
    return parser


def _client(args):
    from dasketch.cluster import get_client

    if args.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS"):
        if args.workers is not None or args.memory_limit is not None:
            raise ValueError("--workers and --memory-limit size an embedded cluster; they "
                             "cannot be used with --scheduler")
        return get_client(args.scheduler)
    return get_client(n_workers=args.workers, memory_limit=args.memory_limit)


def _say(args, message):
    if not args.quiet:
        print(message, flush=True)


def _default_sketch_path(path):
    base = os.path.basename(os.path.normpath(str(path))) or "data"
    return os.path.join(os.path.dirname(os.path.normpath(str(path))) or ".",
                        f"{base}.sketch.npz") if "://" not in str(path) else f"{base}.sketch.npz"


def _check_output(path, overwrite):
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"output {path!r} exists; pass --overwrite to replace it")


def run_sketch(args):
    import dasketch

    out = args.out or _default_sketch_path(args.path)
    _check_output(out, args.overwrite)
    if "://" not in args.path and not os.path.exists(args.path):
        raise FileNotFoundError(f"no zarr store at {args.path!r}")
    with _client(args) as client:
        _say(args, f"dashboard: {client.dashboard_link}")
        start = time.perf_counter()
        sketch = dasketch.sketch(args.path, args.sketch_size, method=args.method,
                                 alpha0=args.alpha0, center=args.center,
                                 split_every=args.split_every, component=args.component,
                                 client=client, progress=not args.quiet)
        elapsed = time.perf_counter() - start
    dasketch.save_sketch(sketch, out, overwrite=args.overwrite)
    print(f"sketched {sketch.n_rows:,} x {sketch.n_features} in {elapsed:.2f} s "
          f"({sketch.n_rows / elapsed:,.0f} rows/s); certified bound "
          f"{sketch.error_bound:.6g}; saved {out}")
    return 0


def run_info(args):
    import dasketch

    sketch = dasketch.load_sketch(args.file)
    s = sketch.singular_values()[:args.top]
    top = s[0] ** 2 + sketch.alpha if s.size else sketch.alpha
    lines = [
        f"file:          {args.file}",
        f"method:        {sketch.method}",
        f"sketch_size:   {sketch.sketch_size}",
        f"rows:          {sketch.n_rows}",
        f"features:      {sketch.n_features}",
        f"centered:      {sketch.centered}",
        f"alpha0:        {sketch.alpha0:.6g}",
        f"shrinkage:     {sketch.shrinkage:.6g}",
        f"alpha:         {sketch.alpha:.6g}",
        f"error_bound:   {sketch.error_bound:.6g}"
        + (f"  ({sketch.error_bound / top:.4%} of the top eigenvalue estimate)" if top else ""),
        "top singular values: " + " ".join(f"{v:.6g}" for v in s),
    ]
    print("\n".join(lines))
    return 0


def run_make_data(args):
    import dasketch
    from dasketch.datasets import write_sparse_synthetic

    start = time.perf_counter()
    if args.density is None:
        X = dasketch.write_synthetic(args.path, args.rows, args.features,
                                     chunk_rows=args.chunks, random_state=args.seed,
                                     overwrite=args.overwrite)
        what = f"dense {X.shape[0]:,} x {X.shape[1]} float64 ({X.nbytes / 2**20:,.0f} MiB)"
    else:
        n, d, nnz = write_sparse_synthetic(args.path, args.rows, args.features,
                                           density=args.density, chunk_rows=args.chunks,
                                           random_state=args.seed, overwrite=args.overwrite)
        what = f"sparse {n:,} x {d} with {nnz:,} nonzeros"
    print(f"wrote {what} to {args.path} in {time.perf_counter() - start:.1f} s")
    return 0


def run_demo(args):
    import dasketch

    out = args.out or tempfile.mkdtemp(prefix="dasketch-demo-")
    if os.path.isdir(out) and os.listdir(out) and not args.overwrite:
        raise FileExistsError(f"output directory {out!r} is not empty; pass --overwrite "
                              "to replace its contents")
    os.makedirs(out, exist_ok=True)
    data_path = os.path.join(out, "data.zarr")
    start = time.perf_counter()
    X = dasketch.write_synthetic(data_path, args.rows, args.features, rank=args.features // 2,
                                 power=0.5, noise=0.01, overwrite=True)
    _say(args, f"wrote {data_path}: {X.shape[0]:,} x {X.shape[1]} float64, "
               f"{X.nbytes / 1e9:.2f} GB in {time.perf_counter() - start:.1f} s")
    with _client(args) as client:
        _say(args, f"cluster: {len(client.scheduler_info()['workers'])} workers, "
                   f"dashboard {client.dashboard_link}")
        start = time.perf_counter()
        sketch = dasketch.sketch(data_path, args.sketch_size, method=args.method,
                                 split_every=args.split_every, client=client,
                                 progress=not args.quiet)
        elapsed = time.perf_counter() - start
        gram = client.compute(X.T @ X).result()
    eig = np.linalg.eigvalsh(gram)[::-1]
    error = float(np.abs(np.linalg.eigvalsh(gram - sketch.covariance())).max())
    sketch_path = os.path.join(out, "sketch.npz")
    dasketch.save_sketch(sketch, sketch_path, overwrite=True)
    plot_path = os.path.join(out, "spectrum.png")
    _plot_spectrum(eig, sketch, plot_path)
    holds = error <= sketch.error_bound * (1 + 1e-9)
    print(f"sketch size l = {sketch.sketch_size} ({sketch.method.upper()}), "
          f"{sketch.n_rows:,} rows x {sketch.n_features} features")
    print(f"time {elapsed:.2f} s, throughput {X.nbytes / elapsed / 1e6:,.0f} MB/s "
          f"({sketch.n_rows / elapsed:,.0f} rows/s)")
    print(f"certified bound  ||A^T A - (B^T B + alpha I)||_2 <= {sketch.error_bound:.6g} "
          f"({sketch.error_bound / eig[0]:.4%} of ||A||_2^2)")
    print(f"measured error   ||A^T A - (B^T B + alpha I)||_2  = {error:.6g} "
          f"({error / eig[0]:.4%} of ||A||_2^2)  -> bound {'holds' if holds else 'VIOLATED'}")
    print(f"wrote {sketch_path} and {plot_path}")
    return 0 if holds else 1


def _plot_spectrum(eig, sketch, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = min(len(eig), 2 * sketch.sketch_size)
    estimate = np.zeros(k)
    s2 = sketch.singular_values()[:k] ** 2
    estimate[:s2.size] = s2
    estimate += sketch.alpha
    fig, ax = plt.subplots(figsize=(6, 4))
    index = np.arange(1, k + 1)
    ax.semilogy(index, eig[:k], "k.-", label="exact eigenvalues of A^T A")
    ax.semilogy(index, estimate, "o", mfc="none", color="tab:orange",
                label="sketch: eigenvalues of B^T B + alpha I")
    ax.fill_between(index, np.maximum(estimate - sketch.error_bound, eig[k - 1] / 10),
                    estimate + sketch.error_bound, color="tab:orange", alpha=0.2,
                    label="certified bound")
    ax.axvline(sketch.sketch_size, color="grey", ls=":", label="sketch size l")
    ax.set_xlabel("index")
    ax.set_ylabel("eigenvalue")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


COMMANDS = {"demo": run_demo, "sketch": run_sketch, "info": run_info,
            "make-data": run_make_data}


def main(argv=None):
    """Entry point of the ``dasketch`` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except _USER_ERRORS as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"dasketch {args.command}: error: {message}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("dasketch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
