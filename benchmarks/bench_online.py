"""RFD-SON against its public reference, side by side in one run.

The reference is Google Research's ``precondition`` package,
``precondition/oco/algorithms.py`` (RFD_SON, JAX): Algorithm 3 of Luo, Chen,
Zhang, Li, Zhang (JMLR 2019) with a shrink after every example, no projection,
``mu = 0``, the logistic loss. The PyPI wheel of ``precondition-opt`` lacks the
``oco`` package, so the reference is installed from GitHub (:data:`REFERENCE_INSTALL`,
not a package extra: an extra cannot name a URL on PyPI). Without it the reference
columns are skipped with a message that gives the command.

1. **Time per example** on a9a (123 features + intercept) for ``l`` in
   {5, 10, 20, 50}, single thread: the reference, dasketch's default
   (``RFDSONClassifier``: 2l buffer of Algorithm 6, projection, alpha floor,
   CSR rows) and dasketch in the peer-equivalent setting (Algorithm 3 per step,
   ``mu = 0``, no projection, no floor), whose iterates must agree with the
   reference's (``alpha0 = 1``; at ``alpha0 = 0`` the reference diverges).
2. **a9a accuracy**: test accuracy and online error at ``l = 20`` over
   ``alpha0`` in {0, 1e-3, 1, 1e3} for dasketch (default), RFD-SON as written
   (no floor), FD-SON, and the reference; online error curves.
3. **Sparse imbalanced data** (``dasketch.datasets.imbalanced_sparse_classification``:
   3 % positives, Zipf-distributed rare features, intercept): online error curves
   of the default, of ``alpha0 = 1`` without the floor, of ``alpha0 = 0`` without
   the floor for ``l`` in {10, 20, 50}, and of the reference at ``l = 20``.
4. **Synthetic sparse data, d in {5k, 20k, 50k}** (40 non-zeros per row): online
   error, test accuracy and time per example against the reference (``l = 20``,
   ``alpha0 = 1``; it densifies the rows) and scikit-learn's ``SGDClassifier``.

Writes ``benchmarks/results/online.json`` and ``online.png``.
Usage: ``python -m benchmarks.bench_online [--quick]``
"""

import os

# Single-threaded runs on both sides (set before jax is imported).
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                      "intra_op_parallelism_threads=1")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import scipy.sparse  # noqa: E402
from sklearn.datasets import load_svmlight_file  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import SGDClassifier  # noqa: E402
from threadpoolctl import threadpool_limits  # noqa: E402

from dasketch import RFDSONClassifier  # noqa: E402
from dasketch.datasets import imbalanced_sparse_classification  # noqa: E402
from dasketch.kernels.online_newton import OnlineNewton  # noqa: E402

if __package__ in (None, ""):  # run as a file: python benchmarks/bench_online.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import machine_facts, parser, result_path, shared_data, write_results  # noqa: E402

# a9a: DASKETCH_SHARED_DATA, or ../shared/data beside the repository (as the tests).
DATA = shared_data() or Path("/nonexistent")
CURVE_STEP = 500
# The reference and JAX, pinned to the commit the figures were measured with.
REFERENCE_INSTALL = ("pip install 'jax>=0.4.30' 'precondition-opt @ git+https://github.com/"
                     "google-research/precondition@239a8cda03e243b8119a8e672893b7e6acc18c37'")


class Reference:
    """The reference RFD_SON (JAX), run in jit-compiled chunks of rows; counts the
    online mistakes of ``w_t`` before each update. Logistic loss, intercept in X."""

    def __init__(self, n_features, sketch_size, delta):
        import jax
        import jax.numpy as jnp
        from precondition.oco import algorithms

        jax.config.update("jax_enable_x64", True)
        hparams = algorithms.HParams(delta=float(delta), lr=1.0, sketch_size=int(sketch_size),
                                     algorithm=algorithms.Algorithm.RFD_SON)
        init, update = algorithms.generate_init_update((n_features,), hparams)

        def logistic(w, x, y01):  # precondition/oco/datasets.py's loss
            pred = jnp.dot(w, x, precision=jax.lax.Precision.HIGHEST)
            return y01 * jnp.logaddexp(0.0, -pred) + (1 - y01) * jnp.logaddexp(0.0, pred)

        loss_and_grad = jax.value_and_grad(logistic)

        @jax.jit
        def run(state, xs, ys):
            def body(i, carry):
                s, mistakes = carry
                wrong = (jnp.dot(s["w"], xs[i]) > 0) != (ys[i] > 0)
                f, g = loss_and_grad(s["w"], xs[i], ys[i])
                return update(s, f, g), mistakes + wrong

            return jax.lax.fori_loop(0, xs.shape[0], body, (state, 0))

        self._jax, self._run, self._init = jax, run, init
        self.state = init()
        self.mistakes = self.n_seen = 0

    def compile_for(self, n_rows, step):
        """Compile for the chunk shapes of a pass of ``n_rows`` in chunks of ``step``
        (so that the timed pass measures no compilation)."""
        d = self.coef.size
        for rows in {min(step, n_rows), n_rows % step or step}:
            self._jax.block_until_ready(self._run(self._init(), np.zeros((rows, d)),
                                                  np.zeros(rows)))

    def partial_fit(self, X, y):
        dense = X.toarray() if scipy.sparse.issparse(X) else np.asarray(X)
        self.state, mistakes = self._run(self.state, dense, (y > 0).astype(np.float64))
        self._jax.block_until_ready(self.state)
        self.mistakes += int(mistakes)
        self.n_seen += X.shape[0]
        return self

    @property
    def coef(self):
        return np.asarray(self.state["w"])

    @property
    def diverged(self):
        return not np.isfinite(self.coef).all()


def reference_available():
    try:
        import jax  # noqa: F401
        from precondition.oco import algorithms  # noqa: F401
    except ImportError as error:
        print(f"reference not installed ({error}); skipping it. Install it with: "
              f"{REFERENCE_INSTALL}")
        return False
    return True


def with_intercept(X):
    return scipy.sparse.hstack([X, np.ones((X.shape[0], 1))], format="csr")


def accuracy(coef, X, y):
    """Test accuracy of the linear model ``coef`` (intercept last) on labels +-1."""
    return float(np.mean(np.where(with_intercept(X) @ coef > 0, 1, -1) == y))


def online_curve(learner_fit, X, y, step=CURVE_STEP):
    """Feed rows in chunks; return (online error curve, seconds spent learning)."""
    points, elapsed = [], 0.0
    for start in range(0, X.shape[0], step):
        t0 = time.perf_counter()
        mistakes, seen = learner_fit(X[start:start + step], y[start:start + step])
        elapsed += time.perf_counter() - t0
        points.append((seen, mistakes / seen))
    return points, elapsed


def run_dasketch(X, y, X_test, y_test, curve=False, **params):
    model = RFDSONClassifier(**params)
    classes = np.array([-1, 1])

    def fit(Xc, yc):
        model.partial_fit(Xc, yc, classes=classes)
        return model.online_error_rate_ * model.n_seen_, model.n_seen_

    points, elapsed = online_curve(fit, X, y, CURVE_STEP if curve else X.shape[0])
    return {"test_accuracy": model.score(X_test, y_test),
            "online_error_rate": model.online_error_rate_,
            "us_per_example": 1e6 * elapsed / X.shape[0], "curve": points}


def run_reference(X, y, X_test, y_test, sketch_size, delta, curve=False, n_rows=None):
    """The reference on the first ``n_rows`` rows (its per-step SVD of an l x d
    matrix makes whole passes slow at large d)."""
    if n_rows is not None:
        X, y = X[:n_rows], y[:n_rows]
    ref = Reference(X.shape[1] + 1, sketch_size, delta)
    step = CURVE_STEP if curve else 256
    ref.compile_for(X.shape[0], step)
    Xi = with_intercept(X)

    def fit(Xc, yc):
        ref.partial_fit(Xc, yc)
        return ref.mistakes, ref.n_seen

    points, elapsed = online_curve(fit, Xi, y, step)
    return {"test_accuracy": accuracy(ref.coef, X_test, y_test) if not ref.diverged else None,
            "online_error_rate": ref.mistakes / ref.n_seen, "diverged": ref.diverged,
            "us_per_example": 1e6 * elapsed / X.shape[0], "curve": points}


def time_per_example(X, y, sketch_sizes, have_reference, repeats):
    """Section 1: single-thread time per example on dense/CSR a9a rows."""
    Xi = with_intercept(X)
    dense = Xi.toarray()
    rows = {}
    for l in sketch_sizes:
        row = {}
        runs = {
            "dasketch default": lambda l=l: RFDSONClassifier(l, loss="logistic").fit(X, y),
            "dasketch peer-equivalent": lambda l=l: OnlineNewton(
                dense.shape[1], l, loss="logistic", prediction_bound=1e300, mu=0.0,
                update="per_step", alpha_floor=False).fit_rows(dense, y),
        }
        if have_reference:
            reference = Reference(dense.shape[1], l, 1.0)
            reference.compile_for(dense.shape[0], dense.shape[0])

            def run_reference_pass(reference=reference):
                reference.state, reference.mistakes, reference.n_seen = reference._init(), 0, 0
                reference.partial_fit(dense, y)

            runs["reference"] = run_reference_pass
        for name, job in runs.items():
            best = np.inf
            for _ in range(repeats):
                with threadpool_limits(limits=1):
                    t0 = time.perf_counter()
                    job()
                    best = min(best, time.perf_counter() - t0)
            row[name] = 1e6 * best / X.shape[0]
        if have_reference:
            row["speed-up of default"] = row["reference"] / row["dasketch default"]
            row["speed-up of peer-equivalent"] = row["reference"] / row[
                "dasketch peer-equivalent"]
            ours = OnlineNewton(dense.shape[1], l, loss="logistic", prediction_bound=1e300,
                                mu=0.0, update="per_step", alpha_floor=False, alpha0=1.0)
            ours.fit_rows(dense, y)
            run_reference_pass()
            row["relative difference of iterates (alpha0 = 1)"] = float(
                np.linalg.norm(ours.u - reference.coef) / np.linalg.norm(reference.coef))
        rows[f"l={l}"] = row
        print(f"time per example l={l}: " + ", ".join(
            f"{k} {v:.3g}" for k, v in row.items()), flush=True)
    return rows


def sparse_synthetic(n, d, nnz, seed):
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
    y = np.where(margin + 0.3 * margin.std() * rng.standard_normal(n) > 0, 1, -1)
    return X, y


def compare(label, X, y, X_test, y_test, configs, have_reference, reference_deltas,
            sketch_size, curve, reference_rows=None):
    rows = {}
    for name, params in configs.items():
        rows[name] = run_dasketch(X, y, X_test, y_test, curve=curve, **params)
    if have_reference:
        for delta in reference_deltas:
            rows[f"reference delta={delta:g}"] = run_reference(
                X, y, X_test, y_test, sketch_size, delta, curve=curve, n_rows=reference_rows)
            rows[f"reference delta={delta:g}"]["n_rows"] = min(reference_rows or X.shape[0],
                                                              X.shape[0])
    for name, r in rows.items():
        acc = "diverged" if r["test_accuracy"] is None else f"{100 * r['test_accuracy']:.2f} %"
        print(f"{label} {name:34s} test {acc:>9s}  online err "
              f"{100 * r['online_error_rate']:6.2f} %  {r['us_per_example']:8.1f} us/ex",
              flush=True)
    return rows


def main(argv=None):
    options = parser(__doc__)
    options.add_argument("--sections", default="timing,a9a,imbalanced,synthetic",
                        help="comma-separated subset to (re)run; the others are kept from "
                             "an existing results file")
    args = options.parse_args(argv)
    quick, sections = args.quick, set(args.sections.split(","))
    # The online error of each run is recorded; the per-chunk warnings are noise here.
    warnings.simplefilter("ignore", ConvergenceWarning)
    # Compile the per-example loop once (numba caches it on disk) before timing.
    RFDSONClassifier(2).fit(np.eye(4), [0, 1, 0, 1])
    RFDSONClassifier(2).fit(scipy.sparse.csr_matrix(np.eye(4)), [0, 1, 0, 1])
    have_reference = reference_available()
    previous = result_path("online", quick)
    report = json.loads(previous.read_text()) if previous.exists() else {}
    if "reference_installed" not in report:  # results of an older version of this script
        report = {"imbalanced_sparse": report["imbalanced_sparse"]} if (
            "imbalanced_sparse" in report) else {}
    report.update({"machine": machine_facts(),
                   "quick": quick, "reference_installed": have_reference})

    # ------------------------------------------------------------- a9a
    if (DATA / "a9a").exists() and sections & {"timing", "a9a"}:
        X, y = load_svmlight_file(str(DATA / "a9a"), n_features=123)
        Xt, yt = load_svmlight_file(str(DATA / "a9a.t"), n_features=123)
        X, Xt = X.tocsr(), Xt.tocsr()
        y, yt = np.where(y > 0, 1, -1), np.where(yt > 0, 1, -1)
        n_time = 2000 if quick else 10000
        if "timing" in sections:
            report["time_per_example_a9a"] = time_per_example(
                X[:n_time], y[:n_time], (5, 10, 20, 50), have_reference, 1 if quick else 3)
            write(report, quick)
    if (DATA / "a9a").exists() and "a9a" in sections:
        n = 3000 if quick else X.shape[0]
        configs = {}
        for a in (0.0, 1e-3, 1.0, 1e3):
            configs[f"default alpha0={a:g}"] = dict(sketch_size=20, alpha0=a)
            configs[f"no floor alpha0={a:g}"] = dict(sketch_size=20, alpha0=a, alpha_floor=False)
            configs[f"FD-SON alpha0={a:g}"] = dict(sketch_size=20, alpha0=a, method="fd",
                                                  alpha_floor=False)
        rows = compare("a9a", X[:n], y[:n], Xt, yt, configs, have_reference,
                       (0.0, 1e-3, 1.0, 1e3), 20, curve=True)
        sweep = {}
        for family in ("default", "no floor", "FD-SON", "reference"):
            names = [f"{family} alpha0={a:g}" if family != "reference" else f"reference delta={a:g}"
                     for a in (0.0, 1e-3, 1.0, 1e3)]
            accs = [rows[k]["test_accuracy"] for k in names if k in rows]
            if accs:
                finite = [a for a in accs if a is not None]
                sweep[family] = {"test_accuracy": accs,
                                 "spread (points)": 100 * (max(finite) - min(finite))}
        report["a9a"] = {"methods": rows, "alpha0_sweep": sweep,
                         "paper_table2_rfd0_son_m20": 0.8327}
        print("a9a alpha0 sweep:", json.dumps(sweep))
        write(report, quick)
    elif not (DATA / "a9a").exists():
        print(f"a9a not found under {DATA}; skipping")

    # ------------------------------------------- sparse imbalanced data
    if "imbalanced" in sections:
        report["imbalanced_sparse"] = imbalanced_section(quick, have_reference)
        write(report, quick)
    if "synthetic" in sections:
        report["synthetic"] = synthetic_section(quick, have_reference)
    write(report, quick)


def imbalanced_section(quick, have_reference):
    n_imb, d_imb = (4000, 2000) if quick else (10000, 3000)
    X, y01 = imbalanced_sparse_classification(n_imb + n_imb // 2, d_imb, random_state=0)
    y = 2 * y01 - 1
    X, Xt, y, yt = X[:n_imb], X[n_imb:], y[:n_imb], y[n_imb:]
    imbalanced = {"n": n_imb, "d": d_imb, "majority_rate_test": float(np.mean(yt < 0)),
                  "positive_rate_train": float(np.mean(y > 0))}
    for l in (10, 20, 50):
        configs = {"default": dict(sketch_size=l),
                   "alpha0=1, no floor": dict(sketch_size=l, alpha0=1.0, alpha_floor=False),
                   "alpha0=0, no floor (as written)": dict(sketch_size=l, alpha_floor=False)}
        # The reference's per-step SVD of an l x d matrix is slow at this d: its curves
        # are drawn at l = 20 only.
        rows = compare(f"imbalanced l={l}", X, y, Xt, yt, configs, have_reference,
                       (0.0, 1.0) if l == 20 else (), l, curve=True,
                       reference_rows=1000 if quick else 3000)
        rows["ratio default / alpha0=1"] = (rows["default"]["online_error_rate"]
                                            / rows["alpha0=1, no floor"]["online_error_rate"])
        imbalanced[f"l={l}"] = rows
        print(f"imbalanced l={l}: default / alpha0=1 online error ratio "
              f"{rows['ratio default / alpha0=1']:.2f}")
    return imbalanced


def synthetic_section(quick, have_reference):
    dims = (5000, 20000) if quick else (5000, 20000, 50000)
    n_train = {5000: 1500, 20000: 1000} if quick else {5000: 4000, 20000: 2000, 50000: 1000}
    synth = {}
    for d in dims:
        X, y = sparse_synthetic(n_train[d] + 3000, d, nnz=40, seed=d)
        X, Xt, y, yt = X[:n_train[d]], X[n_train[d]:], y[:n_train[d]], y[n_train[d]:]
        rows = compare(f"d={d}", X, y, Xt, yt, {f"default l={l}": dict(sketch_size=l)
                                                  for l in (10, 20, 50)},
                       have_reference, (1.0,), 20, curve=False,
                       reference_rows={5000: 1000, 20000: 400, 50000: 200}[d])
        t0 = time.perf_counter()
        sgd = SGDClassifier(random_state=0)
        sgd.partial_fit(X, y, classes=np.array([-1, 1]))
        rows["SGDClassifier (one pass)"] = {"test_accuracy": float(sgd.score(Xt, yt)),
                                            "us_per_example": 1e6 * (time.perf_counter() - t0)
                                            / X.shape[0]}
        synth[str(d)] = rows
    return synth


def write(report, quick):
    write_results("online", report, plot, quick=quick)


def plot(report, path):
    fig, axes = plt.subplots(2, 2, figsize=(13, 10))
    timing = report.get("time_per_example_a9a")
    if timing:
        ls = [int(k[2:]) for k in timing]
        for name, style in (("reference", "s-"), ("dasketch default", "o-"),
                            ("dasketch peer-equivalent", "^--")):
            if name in timing[f"l={ls[0]}"]:
                axes[0, 0].loglog(ls, [timing[f"l={l}"][name] for l in ls], style, label=name)
        axes[0, 0].set_xlabel("sketch size l")
        axes[0, 0].set_ylabel("time per example (us), single thread")
        axes[0, 0].set_title("a9a (124 columns with the intercept)")
        axes[0, 0].legend(fontsize=8)
    for ax, rows, title in (
            (axes[0, 1], report.get("imbalanced_sparse", {}).get("l=20", {}),
             "sparse imbalanced data (3 % positives), l = 20"),
            (axes[1, 0], report.get("a9a", {}).get("methods", {}), "a9a, l = 20")):
        for name, r in rows.items():
            if not isinstance(r, dict) or not r.get("curve") or len(r["curve"]) < 2:
                continue
            if "FD-SON" in name or ("alpha0=1e-" in name) or "alpha0=1000" in name:
                continue
            xs, ys = zip(*r["curve"])
            ax.plot(xs, 100 * np.array(ys), label=name,
                    linestyle="--" if "reference" in name else "-")
        ax.set_xlabel("examples seen")
        ax.set_ylabel("online error rate (%)")
        ax.set_title(title)
        ax.set_yscale("log")
        ax.legend(fontsize=7)
    dims = sorted(int(d) for d in report.get("synthetic", {}))
    for name in report["synthetic"][str(dims[0])] if dims else ():
        if "us_per_example" in report["synthetic"][str(dims[0])][name]:
            axes[1, 1].loglog(dims, [report["synthetic"][str(d)][name]["us_per_example"]
                                     for d in dims], "o-", label=name)
    axes[1, 1].set_xlabel("d")
    axes[1, 1].set_ylabel("time per example (us)")
    axes[1, 1].set_title("synthetic sparse data, 40 non-zeros per row")
    axes[1, 1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
