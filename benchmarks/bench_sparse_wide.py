"""dasketch.sketch on sparse and wide data against one random projection and
``svd_compressed``, side by side in one run.

Cases (in memory, Dask's threaded scheduler on this machine's cores):

* ``sparse_synthetic``: n x d CSR at density 1e-3 with a decaying column scale
  (``dasketch.datasets`` generator), l = 64, against sparse ``X @ G``.
* ``text_hashed``: lines of the Python sources installed on this machine hashed
  into 2^17 features (scikit-learn's ``HashingVectorizer``, token counts, about
  4 nonzeros a row), l = 32, against sparse ``X @ G``.
* ``wide_dense``: n x d float64 with a decaying column scale for d = 8,192 and
  32,768, l = 32, against dense ``X @ G`` and
  ``dask.array.linalg.svd_compressed(k=l, n_power_iter=2)``; both read the same
  Dask array, built before timing, and run one BLAS thread per task. Also the
  error and time at working sizes l, 1.5 l, 2 l and 4 l (``working_size_tradeoff``).

``X @ G`` is timed with ``G`` already drawn (best of 3). Errors are spectral norms
``||A^T A - approx||_2``, relative to ``||A||_2^2`` in the plot: exact for the
dense cases (``ExactDenseErrors``: one Householder QR of ``A^T`` and one small
symmetric eigensolve per sketch, or the d x d matrix when ``n + l >= d``; about
30 s per sketch at 8,192 x 8,192 and 3-6 s after a 18-31 s QR at 4,096 x 32,768
on 2 cores), and from ARPACK on the d x d operator (never formed, tol 1e-3) for
the sparse ones. "Best possible" is the RFD paper's Theorem 1 value
``(lambda_l - lambda_d) / 2`` with ``lambda_d`` taken as 0 (so the ratio reported
against it is, if anything, flattering by ``lambda_d / lambda_l``; dense cases
record ``lambda_d``). For ``svd_compressed`` the approximation is ``V S^2 V^T``.
``--check`` (on with ``--quick``) compares the exact errors with
``numpy.linalg.norm(E, 2)``. Results go to ``benchmarks/results/sparse_wide.json``
and ``sparse_wide.png``.

Usage: ``python -m benchmarks.bench_sparse_wide [--quick] [--check] [--cases a,b]
[--wide-rows 8192 4096] [--error-threads N] [--merge earlier.json]``
"""

import json
import os
import platform
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse
import scipy.sparse.linalg as sla

import dasketch
import dasketch._blocks
import dasketch.sketching

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_sparse_wide.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import best_time, cpu_seconds, parser, write_results  # noqa: E402
from benchmarks._exact_errors import ExactDenseErrors, check_exact_errors  # noqa: E402
from benchmarks._sparse_cases import (  # noqa: E402
    BLAS,
    gram_operator,
    hashed_text,
    sketch_keeping_blas_threads,
    sparse_synthetic,
    spectral_error,
    wide_dense,
)


def time_dasketch(X, l, working_size=None, repeat=1):
    return best_time(lambda: sketch_keeping_blas_threads(
        X, l, random_state=0, working_size=working_size), repeat)


CHECK_MAX_FEATURES = 4096  # the dense check forms E (d x d) and takes its SVD


class ErrorMeter:
    """Spectral errors of sketches of X, the top-l eigenvalues of ``X^T X``, and the
    wall time spent on both (``seconds``).

    Dense X: :class:`ExactDenseErrors` (a sketch met twice is not recomputed); with
    ``check``, each error is also compared, outside ``seconds``, with
    ``numpy.linalg.norm(E, 2)`` for ``d <= CHECK_MAX_FEATURES`` and must agree to
    1e-10 relative. Sparse X (too large to densify): ARPACK, tol 1e-3 for errors
    and 1e-4 for the eigenvalues.
    """

    def __init__(self, X, l, blas_threads=1, check=False):
        self.X, self.check, self.seen = X, check, []
        start = time.perf_counter()
        if scipy.sparse.issparse(X):
            self.exact = None
            self.method = "ARPACK eigsh (errors tol 1e-3, eigenvalues tol 1e-4)"
            top = sla.eigsh(gram_operator(X), k=l, which="LA", return_eigenvectors=False,
                            tol=1e-4)
            self.eigenvalues = np.sort(top)[::-1]
        else:
            self.exact = ExactDenseErrors(X, l, blas_threads)
            self.method = "exact (LAPACK QR and eigvalsh, float64)"
            self.eigenvalues = self.exact.gram_eigenvalues()
        self.seconds = time.perf_counter() - start

    def __call__(self, B, alpha):
        if self.exact is None:
            start = time.perf_counter()
            value = spectral_error(self.X, B, alpha)
            self.seconds += time.perf_counter() - start
            return value
        for other_B, other_alpha, value in self.seen:
            if other_alpha == alpha and np.array_equal(other_B, B):
                return value
        start = time.perf_counter()
        value = self.exact(B, alpha)
        self.seconds += time.perf_counter() - start
        d = self.X.shape[1]
        if self.check and d <= CHECK_MAX_FEATURES:
            reference = np.linalg.norm(self.X.T @ self.X - B.T @ B - alpha * np.eye(d), 2)
            assert abs(value - reference) <= 1e-10 * reference, (value, reference)
        self.seen.append((B, alpha, value))
        return value


def run_case(name, X, l, with_svd, working_sizes=(), blas_threads=1, check=False):
    n, d = X.shape
    nnz = X.nnz if scipy.sparse.issparse(X) else n * d
    errors = ErrorMeter(X, l, blas_threads, check)
    top = errors.eigenvalues[:l]
    best = top[l - 1] / 2
    G = np.random.default_rng(1).standard_normal((d, l))
    out = {"rows": n, "features": d, "nnz": int(nnz), "sketch_size": l,
           "lambda_1": float(top[0]), "best_possible_rfd_error": float(best),
           "error_method": errors.method}
    if not scipy.sparse.issparse(X):
        out["lambda_d"] = float(errors.eigenvalues[-1]) if n >= d else 0.0
    out["seconds_projection"], _ = best_time(lambda: X @ G, 3)
    # CPU seconds (all threads) of one run each: steadier than wall time when the
    # machine is shared; sparse X @ G runs on one thread, dasketch on all cores.
    out["cpu_seconds_projection"] = cpu_seconds(lambda: X @ G)
    source = X
    if with_svd:
        # Dense: dasketch and svd_compressed read the same Dask array, built (copied
        # and chunked as dasketch cuts its blocks by default) before the clocks start.
        source = da.from_array(X, chunks=(dasketch.sketching.dense_block_rows(l, d), d))
    # Dense cases take well under a second each: best of 3, as for X @ G.
    repeat = 3 if with_svd else 1
    seconds, sk = time_dasketch(source, l, repeat=repeat)
    out["cpu_seconds_dasketch"] = cpu_seconds(lambda: time_dasketch(source, l))
    out["dasketch_cpu_over_projection_cpu"] = (out["cpu_seconds_dasketch"]
                                               / out["cpu_seconds_projection"])
    out["seconds_dasketch"] = seconds
    out["working_size"] = dasketch.sketching.default_working_size(
        l, d, sparse=scipy.sparse.issparse(X),
        update=dasketch.sketching.choose_update("auto", scipy.sparse.issparse(X), d, l))
    out["dasketch_guarantee"] = sk.guarantee
    err = errors(sk.B, sk.alpha)
    out["error_dasketch"] = err
    out["error_bound_dasketch"] = float(sk.error_bound)
    out["dasketch_over_projection"] = seconds / out["seconds_projection"]
    out["dasketch_error_over_best"] = err / best
    if with_svd:
        # One BLAS thread per task, as dasketch's tasks run: BLAS threads nested in
        # Dask's made svd_compressed 1.4-2.6x slower (8,192 x 8,192 and 4,096 x 32,768).
        with BLAS.limit(limits=1, user_api="blas"), dask.config.set(scheduler="threads"):
            seconds, (_, S, Vt) = best_time(lambda: dask.compute(
                *da.linalg.svd_compressed(source, k=l, n_power_iter=2, seed=0)), repeat)
        out["seconds_svd_compressed"] = seconds
        out["error_svd_compressed"] = errors(S[:, None] * Vt, 0.0)
        out["svd_compressed_over_dasketch"] = seconds / out["seconds_dasketch"]
        out["svd_compressed_error_over_best"] = out["error_svd_compressed"] / best
    if working_sizes:
        # Error against time for other working sizes of the block sketches.
        out["working_size_tradeoff"] = []
        for size in working_sizes:
            seconds, other = time_dasketch(source, l, size, repeat=repeat)
            out["working_size_tradeoff"].append({
                "working_size": size, "over_projection": seconds / out["seconds_projection"],
                "error_over_best": errors(other.B, other.alpha) / best})
    # Wall time of the error measurements (setup, eigenvalues and every sketch).
    out["seconds_errors"] = errors.seconds
    print(name, json.dumps(out), flush=True)
    return out


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--cases", default="sparse_synthetic,text_hashed,wide_dense")
    options.add_argument("--wide-rows", type=int, nargs=2, default=[8192, 4096],
                        help="rows of the d = 8,192 and d = 32,768 dense cases")
    options.add_argument("--merge", help="earlier JSON whose other cases are kept")
    options.add_argument("--check", action="store_true",
                        help="compare the exact dense errors with numpy.linalg.norm(E, 2) on "
                             "small random cases and on dense cases up to d = 4,096 "
                             "(always on with --quick)")
    options.add_argument("--error-threads", type=int, default=0,
                        help="BLAS threads for the exact dense errors' QR and eigvalsh "
                             "(default 0, the BLAS default: at d = 8,192 two threads took "
                             "29 s where one took 60 s; use 1 when a core is busy "
                             "elsewhere: two threads then took 101 s)")
    args = options.parse_args(argv)
    check = args.check or args.quick
    if check:
        worst = check_exact_errors()
        print(f"exact dense errors against numpy.linalg.norm(E, 2): {worst:.1e} relative")
        assert worst <= 1e-10, worst
    cases = args.cases.split(",")
    scale = 10 if args.quick else 1
    report = {"machine": f"{platform.node()} ({os.cpu_count()} cores), load average "
                         f"{os.getloadavg()[0]:.1f} at the start",
              "quick": args.quick, "cases": {}}
    if args.merge:
        report["cases"].update(json.loads(Path(args.merge).read_text())["cases"])
    # Imports and thread pools, not timed.
    sketch_keeping_blas_threads(sparse_synthetic(2000, 4000, 1e-2), 8, random_state=0)
    sketch_keeping_blas_threads(wide_dense(200, 400), 8)
    if "sparse_synthetic" in cases:
        X = sparse_synthetic(200_000 // scale, 100_000 // scale, 1e-3 * (1 if scale == 1 else 5))
        report["cases"]["sparse_synthetic"] = run_case("sparse_synthetic", X, 64, False,
                                                       working_sizes=(64, 128))
    if "text_hashed" in cases:
        X = hashed_text(200_000 // scale, 2 ** 17)
        report["cases"]["text_hashed"] = run_case("text_hashed", X, 32, False,
                                                  working_sizes=(32, 64))
    if "wide_dense" in cases:
        for n, d in zip(args.wide_rows, (8192, 32768)):
            X = wide_dense(n // scale, d // scale)
            report["cases"][f"wide_dense_{d // scale}"] = run_case(
                f"wide_dense_{d // scale}", X, 32, True, working_sizes=(32, 48, 64, 128),
                blas_threads=args.error_threads or None, check=check)
    report["goals"] = {"dasketch_over_projection": "<= 3",
                       "dasketch_error_over_best": "<= 1.5 (sparse)",
                       "svd_compressed_over_dasketch": ">= 2 (wide dense)"}
    write_results("sparse_wide", report, plot, quick=args.quick)


SERIES = [("dasketch", "dasketch.sketch", "o", "C0"), ("projection", "X @ G", "s", "C1"),
           ("svd_compressed", "svd_compressed(k=l, 2 power iters)", "^", "C2")]


def plot(report, path):
    """Time (left) and spectral error relative to ``||A||_2^2`` (right) against d.

    Wide dense cases (the d series the issue asks for) are joined by lines, one per
    method; sparse cases are hollow markers. ``X @ G`` has no error: it is not an
    approximation of ``A^T A``.
    """
    cases = report["cases"]
    order = sorted(cases, key=lambda c: cases[c]["features"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5))
    for dense in (True, False):
        group = [c for c in order if ("seconds_svd_compressed" in cases[c]) == dense]
        for key, label, marker, color in SERIES:
            style = dict(marker=marker, color=color, ls="-" if dense else "",
                         mfc=color if dense else "none",
                         label=f"{label}, {'dense' if dense else 'sparse'}")
            for ax, value in [(left, lambda c, key=key: cases[c].get(f"seconds_{key}")),
                              (right, lambda c, key=key: cases[c].get(f"error_{key}", None)
                               and cases[c][f"error_{key}"] / cases[c]["lambda_1"])]:
                pts = [(cases[c]["features"], value(c)) for c in group if value(c)]
                if pts:
                    ax.plot(*zip(*pts), **style)
    right.plot([cases[c]["features"] for c in order],
               [cases[c]["best_possible_rfd_error"] / cases[c]["lambda_1"] for c in order],
               "k_", ms=20, mew=2, label="best possible (RFD Thm. 1)")
    for c in order:
        tag = f"{c}\n{cases[c]['rows']:,} x {cases[c]['features']:,}, l = {cases[c]['sketch_size']}"
        left.annotate(tag, (cases[c]["features"], cases[c]["seconds_dasketch"]), fontsize=7,
                      xytext=(0, 6), textcoords="offset points", ha="center")
        right.annotate(c, (cases[c]["features"], cases[c]["error_dasketch"]
                           / cases[c]["lambda_1"]), fontsize=7, xytext=(0, 6),
                       textcoords="offset points", ha="center")
    for ax in (left, right):
        ax.set_xscale("log")
        ax.margins(x=0.15, y=0.1)  # room for the labels inside the panel
        ax.set_xlabel("d (features)")
    # One legend under both panels, so that it hides no point.
    handles, labels = left.get_legend_handles_labels()
    best_handles, best_labels = right.get_legend_handles_labels()
    fig.legend(handles + best_handles[-1:], labels + best_labels[-1:], loc="lower center",
               ncol=3, fontsize=8)
    left.set_yscale("log")
    left.set_ylabel("wall time (s)")
    left.set_title(f"wall time; {report['machine']}", fontsize=9)
    right.set_ylabel(r"$\|A^T A - B^T B - \alpha I\|_2 \,/\, \|A\|_2^2$")
    right.set_title("spectral error (X @ G: none, not a sketch of A^T A)", fontsize=9)
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
