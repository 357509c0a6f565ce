"""RFD-SON against its peers, side by side in one run (Luo et al., JMLR 2019, Table 2).

One pass over the training rows in their order, squared loss, ``C = 1`` for the
online Newton methods:

* RFD-SON (``l = 10, 20, 50``; ``alpha0 = 0``, the hyperparameter-free RFD0-SON,
  and ``alpha0 in {1e-3, 1, 1e3}`` at ``l = 20``), with the ``2 l`` buffer of
  Algorithm 6, and at ``l = 20`` also with a shrink after every step (Algorithm 3
  as written, O(l^2 d) per step; d <= 20,000),
* FD-SON (``alpha0 in {0, 1e-3, 1, 1e3}`` at ``l = 20``),
* FULL-ON, the full-matrix online Newton step (``alpha0 = 1``, O(d^2) per step;
  only where d allows),
* scikit-learn ``SGDClassifier`` (one ``partial_fit`` pass, default settings),
* diagonal ADAGRAD (Duchi et al. 2011) on the same loss and constraint, with its
  step size ``lr in {0.01, 0.1, 1}``,

on a9a (``../shared/data``) and on synthetic sparse data with d = 5,000 / 20,000 /
50,000 (the per-example time of RFD-SON should grow linearly in d). Reports test
accuracy, online error rate (mistakes made while learning) and per-example time,
writes ``benchmarks/results/online.json`` and ``online.png`` (online error rate
against examples seen on a9a; per-example time against d).

Usage: ``python benchmarks/bench_online.py [--quick]``
"""

import argparse
import json
import platform
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402
from sklearn.datasets import load_svmlight_file  # noqa: E402
from sklearn.linear_model import SGDClassifier  # noqa: E402

from dasketch import RFDSONClassifier  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CHECKPOINT = 1000


class Adagrad:
    """Diagonal ADAGRAD (Duchi, Hazan, Singer 2011) for the squared loss with the
    constraint ``|w^T x_t| <= C`` (the prediction is clipped), O(nnz) per step."""

    def __init__(self, n_features, lr=0.1, prediction_bound=1.0, eps=1e-8):
        self.w = np.zeros(n_features)
        self.G = np.zeros(n_features)
        self.lr, self.prediction_bound, self.eps = lr, C, eps
        self.mistakes = self.n_seen = 0

    def partial_fit(self, X, y):
        X = scipy.sparse.csr_matrix(X)
        indptr, indices, data = X.indptr, X.indices, X.data
        w, G = self.w, self.G
        for i in range(X.shape[0]):
            idx, val = indices[indptr[i]:indptr[i + 1]], data[indptr[i]:indptr[i + 1]]
            z = float(np.clip(w[idx] @ val, -self.prediction_bound, self.prediction_bound))
            self.mistakes += (z > 0) != (y[i] > 0)
            g = 2.0 * (z - y[i]) * val
            G[idx] += g * g
            w[idx] -= self.lr * g / (np.sqrt(G[idx]) + self.eps)
        self.n_seen += X.shape[0]
        return self

    @property
    def online_error_rate(self):
        return self.mistakes / self.n_seen

    def score(self, X, y):
        return float(np.mean(np.where(X @ self.w > 0, 1.0, -1.0) == y))


class SGD:
    """scikit-learn's SGDClassifier, one partial_fit pass; the online error of a
    chunk is counted with the model before that chunk (progressive validation per
    chunk of rows)."""

    def __init__(self):
        self.model = SGDClassifier(random_state=0)
        self.mistakes = self.n_seen = 0

    def partial_fit(self, X, y):
        if self.n_seen:
            self.mistakes += int(np.sum(self.model.predict(X) != y))
        else:
            self.mistakes += int(np.sum(y != 1.0))  # predicts nothing yet: count as +1
        self.model.partial_fit(X, y, classes=np.array([-1.0, 1.0]))
        self.n_seen += X.shape[0]
        return self

    @property
    def online_error_rate(self):
        return self.mistakes / self.n_seen

    def score(self, X, y):
        return float(self.model.score(X, y))


class SON:
    """An RFDSONClassifier (RFD-SON / FD-SON / FULL-ON) fed chunk by chunk."""

    def __init__(self, **params):
        self.model = RFDSONClassifier(loss="squared", prediction_bound=1.0, **params)

    def partial_fit(self, X, y):
        self.model.partial_fit(X, y, classes=np.array([-1.0, 1.0]))
        return self

    @property
    def online_error_rate(self):
        return self.model.online_error_rate_

    def score(self, X, y):
        return self.model.score(X, y)


def run(make, X, y, X_test, y_test, n_rows=None, curve=False):
    """One pass in order; returns accuracy, online error, per-example time, curve."""
    n = X.shape[0] if n_rows is None else min(n_rows, X.shape[0])
    learner = make()
    points = []
    elapsed = 0.0
    for start in range(0, n, CHECKPOINT):
        stop = min(start + CHECKPOINT, n)
        t0 = time.perf_counter()
        learner.partial_fit(X[start:stop], y[start:stop])
        elapsed += time.perf_counter() - t0
        points.append((stop, learner.online_error_rate))
    result = {"test_accuracy": learner.score(X_test, y_test),
              "online_error_rate": learner.online_error_rate,
              "us_per_example": 1e6 * elapsed / n, "n_train": n}
    if curve:
        result["curve"] = points
    return result


def methods(d, *, full_ok, alpha_sweep, sketch_sizes):
    out = {}
    for l in sketch_sizes:
        if l <= d:
            out[f"RFD0-SON l={l}"] = lambda l=l: SON(sketch_size=l, alpha0=0.0)
    if d <= 20000:
        out["RFD0-SON l=20 per-step (Alg. 3)"] = lambda: SON(sketch_size=20, alpha0=0.0,
                                                          update="per_step")
    if alpha_sweep:
        for a in (1e-3, 1.0, 1e3):
            out[f"RFD-SON l=20 alpha0={a:g}"] = lambda a=a: SON(sketch_size=20, alpha0=a)
        for a in (0.0, 1e-3, 1.0, 1e3):
            out[f"FD-SON l=20 alpha0={a:g}"] = lambda a=a: SON(sketch_size=20, method="fd",
                                                             alpha0=a)
    else:
        out["FD-SON l=20 alpha0=1"] = lambda: SON(sketch_size=20, method="fd", alpha0=1.0)
    if full_ok:
        out["FULL-ON alpha0=1"] = lambda: SON(method="full", alpha0=1.0)
    out["SGDClassifier"] = SGD
    for lr in (0.01, 0.1, 1.0):
        out[f"ADAGRAD lr={lr:g}"] = lambda lr=lr: Adagrad(d, lr=lr)
    return out


def synthetic(n, d, nnz, seed):
    """Sparse rows with ``nnz`` non-zeros, labels from a sparse linear model."""
    rng = np.random.default_rng(seed)
    truth = np.zeros(d)
    support = rng.choice(d, size=min(d, 2000), replace=False)
    truth[support] = rng.standard_normal(support.size)
    # A few frequent features carry most of the signal (as in text data).
    popular = rng.choice(d, size=200, replace=False)
    truth[popular] = 3.0 * rng.standard_normal(200)
    cols = np.where(rng.random((n, nnz)) < 0.5, rng.choice(popular, (n, nnz)),
                    rng.integers(0, d, (n, nnz)))
    X = scipy.sparse.csr_matrix((np.ones(n * nnz) / np.sqrt(nnz), cols.ravel(),
                                 np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    X.sum_duplicates()
    margin = X @ truth
    y = np.where(margin + 0.3 * margin.std() * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    quick = args.quick
    report = {"machine": {"platform": platform.platform(), "processor": platform.processor()},
              "quick": quick}

    # ------------------------------------------------------------------ a9a
    if (DATA / "a9a").exists():
        X, y = load_svmlight_file(str(DATA / "a9a"), n_features=123)
        Xt, yt = load_svmlight_file(str(DATA / "a9a.t"), n_features=123)
        X, Xt = X.tocsr(), Xt.tocsr()
        y, yt = np.where(y > 0, 1.0, -1.0), np.where(yt > 0, 1.0, -1.0)
        n = 3000 if quick else None
        rows = {}
        for name, make in methods(123, full_ok=True, alpha_sweep=True,
                                  sketch_sizes=(10, 20, 50)).items():
            rows[name] = run(make, X, y, Xt, yt, n_rows=n, curve=True)
            r = rows[name]
            print(f"a9a  {name:28s} acc {100 * r['test_accuracy']:6.2f} %  online err "
                  f"{100 * r['online_error_rate']:6.2f} %  {r['us_per_example']:9.1f} us/ex",
                  flush=True)
        rfd = [rows["RFD0-SON l=20"]["test_accuracy"]] + [
            rows[f"RFD-SON l=20 alpha0={a:g}"]["test_accuracy"] for a in (1e-3, 1.0, 1e3)]
        fd = [rows[f"FD-SON l=20 alpha0={a:g}"]["test_accuracy"] for a in (0, 1e-3, 1.0, 1e3)]
        report["a9a"] = {
            "methods": rows,
            "alpha0_sweep": {"alpha0": [0, 1e-3, 1, 1e3], "RFD-SON": rfd, "FD-SON": fd,
                             "RFD-SON spread (points)": 100 * (max(rfd) - min(rfd)),
                             "FD-SON spread (points)": 100 * (max(fd) - min(fd))},
            "paper_table2_rfd0_son_m20": 0.8327,
        }
        print("alpha0 spread (points): RFD-SON %.2f, FD-SON %.2f" % (
            report["a9a"]["alpha0_sweep"]["RFD-SON spread (points)"],
            report["a9a"]["alpha0_sweep"]["FD-SON spread (points)"]))
    else:
        print(f"a9a not found under {DATA}; skipping")

    # ------------------------------------------------------------ synthetic
    dims = (5000, 20000) if quick else (5000, 20000, 50000)
    n_train = {5000: 6000, 20000: 4000, 50000: 3000}
    if quick:
        n_train = {5000: 1500, 20000: 1000}
    n_full = 150 if quick else 300
    synth = {}
    for d in dims:
        X, y = synthetic(n_train[d] + 5000, d, nnz=40, seed=d)
        X, Xt, y, yt = X[:n_train[d]], X[n_train[d]:], y[:n_train[d]], y[n_train[d]:]
        rows = {}
        for name, make in methods(d, full_ok=(d <= 5000), alpha_sweep=False,
                                  sketch_sizes=(10, 20, 50)).items():
            # FULL-ON costs O(d^2) per step: time it on its first rows only.
            rows[name] = run(make, X, y, Xt, yt,
                             n_rows=n_full if name.startswith("FULL") else None)
            r = rows[name]
            print(f"d={d:<6d} {name:24s} acc {100 * r['test_accuracy']:6.2f} %  online err "
                  f"{100 * r['online_error_rate']:6.2f} %  {r['us_per_example']:9.1f} us/ex "
                  f"(n={r['n_train']})", flush=True)
        synth[d] = rows
    report["synthetic"] = {str(d): rows for d, rows in synth.items()}
    scaling = {}
    for l in (10, 20, 50):
        times = [synth[d][f"RFD0-SON l={l}"]["us_per_example"] for d in dims]
        scaling[f"l={l}"] = {"d": list(dims), "us_per_example": times,
                             "time_ratio_vs_d_ratio": [
                                 (t / times[0]) / (d / dims[0]) for t, d in zip(times, dims)]}
    report["scaling"] = scaling
    full = synth[5000]["FULL-ON alpha0=1"]["us_per_example"]
    report["speedup_vs_full_on_d5000"] = {
        f"l={l}": full / synth[5000][f"RFD0-SON l={l}"]["us_per_example"] for l in (10, 20, 50)}
    print("RFD-SON per-example time vs d:", json.dumps(scaling))
    print("speed-up over FULL-ON at d=5000:", json.dumps(report["speedup_vs_full_on_d5000"]))

    RESULTS.mkdir(exist_ok=True)
    suffix = "_quick" if quick else ""
    (RESULTS / f"online{suffix}.json").write_text(json.dumps(report, indent=2))
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    if "a9a" in report:
        for name, r in report["a9a"]["methods"].items():
            xs, ys = zip(*r["curve"])
            axes[0].plot(xs, 100 * np.array(ys), label=name,
                         linestyle="-" if "SON" in name or "FULL" in name else "--")
        axes[0].set_xlabel("examples seen")
        axes[0].set_ylabel("online error rate (%)")
        axes[0].set_title("a9a, one pass in file order")
        axes[0].set_ylim(10, 55)
        axes[0].legend(fontsize=7)
    for l in (10, 20, 50):
        axes[1].loglog(dims, scaling[f"l={l}"]["us_per_example"], "o-", label=f"RFD0-SON l={l}")
    axes[1].loglog([5000], [full], "s", label="FULL-ON (alpha0=1)")
    ref = np.array(dims, dtype=float)
    base = scaling["l=20"]["us_per_example"][0]
    axes[1].loglog(dims, base * ref / ref[0], "k:", label="linear in d")
    axes[1].set_xlabel("d")
    axes[1].set_ylabel("time per example (us)")
    axes[1].set_title("synthetic sparse data, 40 non-zeros per row")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / f"online{suffix}.png", dpi=120)
    print(f"wrote {RESULTS / f'online{suffix}.json'} and .png")


if __name__ == "__main__":
    main()
