"""Logistic regression on hashed text at defaults: dual random projection and scikit-learn.

Sparse high-dimensional logistic regression is where dual random projection
comes from (Zhang et al., COLT 2013) and where users first compare it. The
text is synthetic (nothing is downloaded): documents of 50 to 300 tokens drawn
from a Zipf law over a vocabulary, labelled by the sign of a sparse linear score
of their tokens (above or below its median) with a share of the labels
flipped, and hashed by scikit-learn's ``HashingVectorizer`` (``n_features``
``2**18``, its other defaults: signed, rows of unit norm) into a CSR matrix.

Both estimators run at their defaults, ``C = 1 / alpha = 1``, side by side in
this process (interleaved rounds; the best wall time of each, the CPU time of
that round, and the medians of the rounds):

* ``LogisticRegression()``: lbfgs, ``tol=1e-4``;
* ``DualRandomProjectionClassifier()``: Newton-CG preconditioned through the
  projection, stopped when ``coef_error_bound_ <= tol ||coef_||``.

Accuracy, against a tight reference (scikit-learn's Newton-CG at
``tol=1e-10``, checked against a dasketch fit certified to 1e-10): the held-out
accuracy, the relative coefficient error, and the relative optimality residual
``||grad F(w, b)|| / ||grad F(0, b0)||`` (``b0`` the best constant model), the
measure dasketch certifies, computed here for both. The goal is a ratio
``dasketch seconds / scikit-learn seconds`` of at most 1 at no worse accuracy.

Writes ``benchmarks/results/hashed_text.json`` and ``hashed_text.png``
(``hashed_text_quick`` with ``--quick``).

Usage: ``python -m benchmarks.bench_hashed_text [--quick] [--n N] [--repeat R]``
"""

import sys
import warnings
from pathlib import Path

import numpy as np
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.linear_model import LogisticRegression

from dasketch.linear_model import DualRandomProjectionClassifier

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_hashed_text.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import (  # noqa: E402
    machine_facts,
    parser,
    relative_error,
    side_by_side,
    write_results,
)

N_FEATURES = 2 ** 18
VOCABULARY = 50_000
FLIPPED = 0.05
SKLEARN = "scikit-learn LogisticRegression()"
DASKETCH = "dasketch DualRandomProjectionClassifier()"


def hashed_text(n, seed=0):
    """``(X, y)``: ``n`` synthetic documents hashed to CSR, and their 0/1 labels."""
    rng = np.random.default_rng(seed)
    frequency = 1.0 / np.arange(1, VOCABULARY + 1)
    tokens = np.array([f"w{i}" for i in range(VOCABULARY)], dtype=object)
    weight = rng.standard_normal(VOCABULARY) * (rng.random(VOCABULARY) < 0.05)
    lengths = rng.integers(50, 301, size=n)
    ids = np.split(rng.choice(VOCABULARY, size=lengths.sum(), p=frequency / frequency.sum()),
                   np.cumsum(lengths)[:-1])
    score = np.array([weight[i].sum() / np.sqrt(i.size) for i in ids])
    y = (score > np.median(score)).astype(int)
    y ^= rng.random(n) < FLIPPED
    vectorizer = HashingVectorizer(n_features=N_FEATURES, analyzer=lambda doc: doc)
    return vectorizer.transform(tokens[i].tolist() for i in ids).tocsr(), y


def relative_residual(X, y, coef, intercept, alpha=1.0):
    """``||grad F(w, b)|| / ||grad F(0, b0)||`` of
    ``F = alpha/2 ||w||^2 + sum_i log(1 + exp(-s_i (x_i^T w + b)))``, ``s = 2y - 1``."""
    s = 2.0 * y - 1.0

    def gradient(w, b):
        dual = -s * expit(-s * (X @ w + b))
        return np.append(alpha * w + X.T @ dual, dual.sum())

    p = y.mean()
    start = gradient(np.zeros(X.shape[1]), np.log(p / (1 - p)))
    return float(np.linalg.norm(gradient(coef, intercept)) / np.linalg.norm(start))


def run(n, repeat):
    n_test = max(n // 4, 200)
    X, y = hashed_text(n + n_test)
    X, X_test, y, y_test = X[:n], X[n:], y[:n], y[n:]
    used = int(np.count_nonzero(np.bincount(X.indices, minlength=X.shape[1])))
    print(f"hashed text {X.shape[0]:,} x {X.shape[1]:,}, {X.nnz:,} non-zeros, "
          f"{used:,} columns used", flush=True)
    reference = LogisticRegression(solver="newton-cg", tol=1e-10, max_iter=1000).fit(X, y)
    tight = DualRandomProjectionClassifier(tol=1e-10, random_state=0).fit(X, y)
    ref = reference.coef_.ravel()
    DualRandomProjectionClassifier().fit(X[:100], y[:100])   # imports and first calls
    timings, models = side_by_side({
        SKLEARN: lambda: LogisticRegression().fit(X, y),
        DASKETCH: lambda: DualRandomProjectionClassifier().fit(X, y),
    }, repeat=repeat)
    rows = []
    for name, model in models.items():
        coef, intercept = model.coef_.ravel(), float(model.intercept_[0])
        row = {"method": name, "wall_seconds": timings[name]["wall"],
               "cpu_seconds": timings[name]["cpu"], "rounds": timings[name]["rounds"],
               "iterations": int(np.ravel(model.n_iter_)[0]),
               "test_accuracy": float(model.score(X_test, y_test)),
               "relative_coef_error": relative_error(coef, ref),
               "relative_optimality_residual": relative_residual(X, y, coef, intercept)}
        if name == DASKETCH:
            row.update(passes=int(model.n_passes_), sketch_size=int(model.sketch_size_),
                       certified_relative_bound=float(model.coef_error_bound_
                                                      / np.linalg.norm(coef)))
        rows.append(row)
        print(f"{name:42s} wall {row['wall_seconds']:6.2f}s  cpu {row['cpu_seconds']:6.2f}s  "
              f"test acc {row['test_accuracy']:.4f}  coef err "
              f"{row['relative_coef_error']:.1e}  residual "
              f"{row['relative_optimality_residual']:.1e}", flush=True)
    ours, theirs = rows[1], rows[0]
    ratio = ours["wall_seconds"] / theirs["wall_seconds"]
    cpu_ratio = ours["cpu_seconds"] / theirs["cpu_seconds"]
    median_ratio = float(np.median(ours["rounds"]) / np.median(theirs["rounds"]))
    as_accurate = (ours["relative_coef_error"] <= theirs["relative_coef_error"]
                   and ours["relative_optimality_residual"]
                   <= theirs["relative_optimality_residual"])
    print(f"dasketch / scikit-learn wall time {ratio:.2f} (goal <= 1; CPU time "
          f"{cpu_ratio:.2f}, median rounds {median_ratio:.2f}), at least as accurate: "
          f"{as_accurate}", flush=True)
    return {"config": {"n_train": n, "n_test": n_test, "n_features": N_FEATURES,
                       "vocabulary": VOCABULARY, "flipped_labels": FLIPPED,
                       "nnz": int(X.nnz), "used_columns": used, "C": 1.0, "repeat": repeat,
                       "reference": "LogisticRegression(solver='newton-cg', tol=1e-10)",
                       "reference_vs_dasketch_tol_1e-10": relative_error(tight.coef_, ref)},
            "machine": machine_facts(), "rows": rows,
            "time_ratio": ratio, "cpu_time_ratio": cpu_ratio, "median_time_ratio": median_ratio,
            "at_least_as_accurate": bool(as_accurate)}


def plot(result, path):
    import matplotlib.pyplot as plt

    rows = result["rows"]
    names = [r["method"].split(" ", 1)[1] for r in rows]
    colours = ["C7", "C0"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    axes[0].bar(names, [r["wall_seconds"] for r in rows], color=colours)
    for i, r in enumerate(rows):
        axes[0].text(i, r["wall_seconds"], f"{r['wall_seconds']:.2f} s\n"
                     f"test acc {r['test_accuracy']:.4f}", ha="center", va="bottom",
                     fontsize=8)
    axes[0].set_ylabel("wall seconds (best round)")
    axes[0].set_ylim(0, 1.3 * max(r["wall_seconds"] for r in rows))
    measures = ("relative_coef_error", "relative_optimality_residual")
    x = np.arange(len(measures))
    for i, r in enumerate(rows):
        axes[1].bar(x + 0.38 * (i - 0.5), [r[k] for k in measures], 0.38, color=colours[i],
                    label=names[i])
    axes[1].set_xticks(x, ["coefficient error", "optimality residual"])
    axes[1].set_yscale("log")
    axes[1].set_ylim(top=30 * max(r[k] for r in rows for k in measures))
    axes[1].set_ylabel("relative, lower is better")
    axes[1].legend(fontsize=8)
    cfg = result["config"]
    fig.suptitle(f"Hashed text {cfg['n_train']:,} x {cfg['n_features']:,} "
                 f"({cfg['used_columns']:,} columns used), both at defaults (C = 1): "
                 f"dasketch / scikit-learn time {result['time_ratio']:.2f}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    options = parser(__doc__, "2,000 documents, one round")
    options.add_argument("--n", type=int, default=24_000, help="training documents")
    options.add_argument("--repeat", type=int, default=3, help="interleaved rounds")
    args = options.parse_args(argv)
    n, repeat = (2000, 1) if args.quick else (args.n, args.repeat)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = run(n, repeat)
    write_results("hashed_text", result, plot, quick=args.quick)


if __name__ == "__main__":
    main()
