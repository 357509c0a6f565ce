"""Error of residual row sampling against dasketch's randomized sketch, side by side.

Row sampling is what the fastest Frequent Directions variants for sparse rows trade
accuracy for: keep ``k`` strong directions, sample the rest of the rows with
probabilities proportional to their squared residual norms and rescale them, so that
``S^T S`` is an unbiased estimate of the residual covariance. This script measures
that family's best case on the two sparse cases of ``bench_sparse_wide.py``: the
``k = l / 2`` kept directions are the exact top eigenvectors of ``X^T X`` (ARPACK, not
timed), and ``s`` residual rows are sampled, for ``s = l - k`` (the same sketch size
``l`` as dasketch) and for 4 and 16 times more rows. Its error is
``||X^T X - V_k Lambda_k V_k^T - S^T S||_2``; dasketch's is that of ``sketch(X, l)``
with its ``alpha I`` term. Both are divided by the best possible error of an
``l``-row sketch, ``lambda_l / 2`` (RFD paper, Theorem 1, ``lambda_d`` taken as 0 as
in ``bench_sparse_wide.py``). Errors are ARPACK estimates (tol 1e-3) on the
``d x d`` operator, never formed.

Results go to ``benchmarks/results/row_sampling.json`` and ``row_sampling.png``.

Usage: ``python -m benchmarks.bench_row_sampling [--quick] [--seeds 3]``
"""

import os
import platform
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse.linalg as sla

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_row_sampling.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import parser, write_results  # noqa: E402
from benchmarks._sparse_cases import (  # noqa: E402
    gram_operator,
    hashed_text,
    sketch_keeping_blas_threads,
    sparse_synthetic,
    spectral_error,
)

SAMPLE_FACTORS = (1, 4, 16)


def residual_sample(X, V, n_samples, rng):
    """``n_samples`` rows of ``X (I - V V^T)`` drawn with probabilities proportional
    to their squared norms and rescaled by ``1 / sqrt(n_samples p_i)``, as dense rows."""
    XV = X @ V
    squared = np.asarray(X.multiply(X).sum(axis=1)).ravel() - (XV ** 2).sum(axis=1)
    probabilities = np.maximum(squared, 0.0)
    probabilities /= probabilities.sum()
    picked = rng.choice(X.shape[0], size=n_samples, p=probabilities)
    rows = X[picked].toarray() - XV[picked] @ V.T
    return rows / np.sqrt(n_samples * probabilities[picked])[:, None]


def run_case(name, X, l, seeds):
    start = time.perf_counter()
    values, vectors = sla.eigsh(gram_operator(X), k=l, which="LA", tol=1e-4)
    order = np.argsort(values)[::-1]
    values, vectors = values[order], vectors[:, order]
    best = values[l - 1] / 2
    sk = sketch_keeping_blas_threads(X, l, random_state=0)
    k = l // 2
    out = {"rows": X.shape[0], "features": X.shape[1], "nnz": int(X.nnz), "sketch_size": l,
           "lambda_1": float(values[0]), "best_possible_rfd_error": float(best),
           "dasketch_error_over_best": spectral_error(X, sk.B, sk.alpha) / best,
           "kept_directions": k, "sampling": []}
    kept = np.sqrt(values[:k])[:, None] * vectors[:, :k].T
    for factor in SAMPLE_FACTORS:
        n_samples = factor * (l - k)
        ratios = []
        for seed in range(seeds):
            S = residual_sample(X, vectors[:, :k], n_samples, np.random.default_rng(seed))
            ratios.append(spectral_error(X, np.vstack([kept, S]), 0.0) / best)
        out["sampling"].append({"sampled_rows": n_samples, "rows_kept": k + n_samples,
                                "error_over_best": ratios})
        print(name, n_samples, [round(r, 2) for r in ratios], flush=True)
    out["seconds"] = time.perf_counter() - start
    return out


def plot(report, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (name, case), color in zip(report["cases"].items(), ("C0", "C1")):
        rows = [p["rows_kept"] for p in case["sampling"]]
        ax.errorbar(rows, [np.median(p["error_over_best"]) for p in case["sampling"]],
                    yerr=[[np.median(p["error_over_best"]) - min(p["error_over_best"])
                           for p in case["sampling"]],
                          [max(p["error_over_best"]) - np.median(p["error_over_best"])
                           for p in case["sampling"]]],
                    marker="o", color=color, capsize=3,
                    label=f"{name}: exact top l/2 + sampled residual rows")
        ax.plot([case["sketch_size"]], [case["dasketch_error_over_best"]], "*", ms=12,
                color=color, label=f"{name}: dasketch.sketch, l = {case['sketch_size']} rows")
    ax.axhline(1.5, color="k", ls="--", lw=1, label="goal: 1.5x best possible")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows held by the sketch")
    ax.set_ylabel("spectral error / best possible at l rows")
    ax.set_title(f"row sampling against dasketch; {report['machine']}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--seeds", type=int, default=3, help="samples drawn per size")
    args = options.parse_args(argv)
    scale = 20 if args.quick else 1
    report = {"machine": f"{platform.node()} ({os.cpu_count()} cores)",
              "quick": args.quick, "cases": {}}
    X = sparse_synthetic(200_000 // scale, 100_000 // scale, 1e-3 * (1 if scale == 1 else 5))
    report["cases"]["sparse_synthetic"] = run_case("sparse_synthetic", X, 64, args.seeds)
    X = hashed_text(200_000 // scale, 2 ** 17)
    report["cases"]["text_hashed"] = run_case("text_hashed", X, 32, args.seeds)
    write_results("row_sampling", report, plot, quick=args.quick)


if __name__ == "__main__":
    main()
