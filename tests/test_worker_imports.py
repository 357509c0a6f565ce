"""Workers never import scikit-learn (about 110 MiB per worker process).

For every kind of pass the package runs over blocks, one block task of the graph
it really computes is pickled with cloudpickle (as ``distributed`` ships tasks)
together with the tasks it depends on, and run in a fresh interpreter, which
must end without ``sklearn`` in ``sys.modules``. One subprocess runs all of
them in turn; the known violator runs last.
"""

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import cloudpickle
import dask
import numpy as np
import pytest
import zarr
from dask.optimization import cull

ROOT = Path(__file__).resolve().parents[1]

# Runs each pickled (graph, key) with the synchronous scheduler, in order.
RUNNER = """
import json, pickle, sys
from dask.local import get_sync
cases, out = pickle.load(open(sys.argv[1], "rb")), {}
for label, payload in cases:
    before = "sklearn" in sys.modules
    try:
        import cloudpickle
        graph, key = cloudpickle.loads(payload)
        get_sync(graph, key)
        error = None
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    out[label] = dict(before=before, after="sklearn" in sys.modules, error=error)
print(json.dumps(out))
"""



class _Recorder:
    """A Dask scheduler that keeps every graph it computes."""

    def __init__(self):
        self.graphs = []

    def __call__(self, dsk, keys, **kwargs):
        if not isinstance(dsk, dict):  # an expression, as dask.compute hands it over
            dsk = dict(dsk.__dask_graph__())
        self.graphs.append(dsk)
        return dask.local.get_sync(dsk, keys, **kwargs)


def _one_task(graphs, name):
    """The first task named ``name`` (graphs computed without fusing tasks)
    with the tasks it depends on, pickled."""
    for graph in graphs:
        for key in graph:
            if dask.utils.key_split(key) == name:
                culled, _ = cull(graph, [key])
                return cloudpickle.dumps((culled, key))
    names = sorted({dask.utils.key_split(k) for g in graphs for k in g})
    raise AssertionError(f"no task {name!r} in the graphs computed: {names}")


def _masked_anndata(tmp_path, X):
    """``dasketch.anndata.pca`` of some genes of a backed .h5ad (blocks whose columns
    are selected where they are read), or None without anndata and h5py."""
    try:
        import anndata
        import h5py  # noqa: F401
    except ImportError:
        return None
    from dasketch.anndata import pca

    filename = str(tmp_path / "a.h5ad")
    anndata.AnnData(X).write_h5ad(filename)
    mask = np.arange(X.shape[1]) % 2 == 0
    return lambda: pca(anndata.read_h5ad(filename, backed="r"), n_comps=2, mask_var=mask,
                       block_rows=100)


def _cases(tmp_path):
    from sklearn.exceptions import ConvergenceWarning

    import dasketch
    from dasketch._blocks import (
        as_row_blocks,
        cache_blocks,
        compute,
        gather_rows,
        matvec,
        random_projection,
        rmatvec,
    )
    from dasketch.datasets import write_sparse_synthetic
    from dasketch.decomposition import SketchPCA
    from dasketch.linear_model import (
        DualRandomProjectionClassifier,
        DualRandomProjectionRegressor,
        PWSGDRegressor,
        RFDSONClassifier,
        RFDSONRegressor,
        SketchLstsqRegressor,
        dual_random_projection,
        leverage_scores,
        sketch_lstsq,
        sketch_precondition,
    )

    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 6))
    y = X @ np.arange(1.0, 7.0) + 0.1 * rng.standard_normal(400)
    labels = (y > 0).astype(int)
    path = str(tmp_path / "x.zarr")
    zarr.create_array(path, data=X, chunks=(64, 6))
    blocks = as_row_blocks(path, block_rows=100)
    sparse_path = str(tmp_path / "sparse.zarr")
    write_sparse_synthetic(sparse_path, 400, 50, density=0.1, chunk_rows=128)
    precond = sketch_precondition(X, random_state=0)
    fitted = {
        "SketchPCA transform": (SketchPCA(n_components=2, sketch_size=4).fit(X), "transform",
                                "affine_block"),
        "SketchPCA score_samples": (SketchPCA(n_components=2, sketch_size=4).fit(X),
                                    "score_samples", "gaussian_log_likelihood_block"),
        "PWSGD predict": (PWSGDRegressor(n_iter=200, random_state=0).fit(X, y), "predict",
                          "affine_block"),
        "LSQR regressor predict": (SketchLstsqRegressor(random_state=0).fit(X, y), "predict",
                                   "affine_block"),
        "RFD-SON regressor predict": (RFDSONRegressor(sketch_size=2).fit(X, y), "predict",
                                      "affine_block"),
        "RFD-SON classifier predict": (RFDSONClassifier(sketch_size=2).fit(X, labels),
                                       "predict", "affine_block"),
        "DRP regressor predict": (DualRandomProjectionRegressor(sketch_size=4).fit(X, y),
                                  "predict", "matvec_block"),
        "DRP classifier predict": (
            DualRandomProjectionClassifier(sketch_size=4).fit(X, labels), "predict",
            "class_labels"),
    }
    def lstsq():
        return sketch_lstsq(path, y, random_state=0, block_rows=100)

    def drp_ridge():
        return compute(dual_random_projection(path, y, sketch_size=4).dual_coef())

    def drp_paper():
        return dual_random_projection(path, np.sign(y), loss="logistic", sketch_size=4,
                                      solver="paper", max_iter=2)

    def drp_multinomial():
        with warnings.catch_warnings():     # two Newton steps: a missed tolerance
            warnings.simplefilter("ignore", ConvergenceWarning)
            return DualRandomProjectionClassifier(n_components=4, max_iter=2).fit(
                path, np.digitize(y, [-2.0, 2.0]))

    runs = {
        "sketch": (lambda: dasketch.sketch(path, 3, block_rows=100), "summarise_block"),
        "sketch, block shrinks": (lambda: dasketch.sketch(path, 3, block_rows=100,
                                                          update="block"), "sketch_block"),
        "estimate_error": (lambda: dasketch.estimate_error(
            path, dasketch.sketch(X, 3), n_vectors=3, block_rows=100), "gram_block"),
        "random projection": (lambda: compute(random_projection(blocks, 3, seed=0)),
                              "project_block"),
        "X w": (lambda: compute(matvec(blocks, np.ones(6))), "matvec_block"),
        "X^T v": (lambda: compute(rmatvec(blocks, y)), "rmatvec_block"),
        "sparse embedding": (lambda: dasketch.sparse_embed(path, 12, block_rows=100),
                             "embed_block"),
        "row gather": (lambda: gather_rows(blocks, [1, 150, 399]), "gather_block"),
        "leverage": (lambda: leverage_scores(blocks, precond), "leverage_block"),
        "sketch_lstsq": (lstsq, "residual_gradient_block"),
        "sketch_lstsq Gram pass": (lstsq, "basis_gram_block"),
        "sketch_lstsq LSQR": (lambda: sketch_lstsq(path, y, random_state=0, block_rows=100,
                                                   solver="lsqr"), "rmatvec_block"),
        "folded sketch pass": (lambda: sketch_lstsq(X, y, random_state=0,
                                                    block_rows=10), "weighted_embed_block"),
        "SketchPCA variance pass": (lambda: SketchPCA(n_components=2, sketch_size=4).fit(
            path), "squared_norms_block"),
        "DRP fit passes": (drp_ridge, "hessian_block"),
        "DRP projection pass": (drp_ridge, "projection_block"),
        "DRP dual variables": (drp_ridge, "dual_block"),
        "DRP gradient pass": (drp_paper, "evaluate_block"),
        "DRP recovery pass": (drp_paper, "recovery_block"),
        "DRP projected problem": (drp_paper, "projected_terms"),
        "cached block read": (lambda: cache_blocks(blocks, True), "read_block"),
        "DRP multinomial gradient pass": (drp_multinomial, "softmax_evaluate_block"),
        "DRP multinomial Hessian pass": (drp_multinomial, "softmax_hessian_block"),
        "sparse store pass": (lambda: dasketch.sketch(sparse_path, 3, block_rows=100),
                              "sketch_block"),
    }
    masked = _masked_anndata(tmp_path, X)
    if masked is not None:
        runs["AnnData masked genes"] = (masked, "sketch_block")
    for label, (model, method, name) in fitted.items():
        runs[label] = (lambda m=model, f=method: compute(getattr(m, f)(path)), name)
    cases, recorded = [], {}
    for label, (run, name) in runs.items():
        if run not in recorded:  # runs shared by several pass kinds run once
            recorded[run] = _Recorder()
            # Eager runs (one block in memory) ship no tasks; every pass here is
            # computed by Dask, as on a cluster.
            with dask.config.set({"scheduler": recorded[run],
                                  "optimization.fuse.active": False,
                                  "dasketch.eager": False}):
                run()
        cases.append((label, _one_task(recorded[run].graphs, name)))
    return cases


@pytest.fixture(scope="module")
def worker_runs(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("worker_imports")
    cases = _cases(tmp_path)
    payload = tmp_path / "cases.pkl"
    payload.write_bytes(pickle.dumps(cases))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", RUNNER, str(payload)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


PASSES = ["sketch", "sketch, block shrinks", "estimate_error", "random projection", "X w", "X^T v",
          "sparse embedding", "row gather", "leverage", "sketch_lstsq",
          "sketch_lstsq Gram pass", "sketch_lstsq LSQR",
          "SketchPCA variance pass", "DRP fit passes", "SketchPCA transform",
          "SketchPCA score_samples", "PWSGD predict",
          "LSQR regressor predict", "RFD-SON regressor predict",
          "RFD-SON classifier predict", "DRP regressor predict", "DRP classifier predict",
          "DRP projection pass",
          "DRP gradient pass", "DRP recovery pass", "DRP projected problem",
          "DRP dual variables", "sparse store pass", "cached block read",
          "folded sketch pass", "DRP multinomial gradient pass",
          "DRP multinomial Hessian pass"]


@pytest.mark.heavy
def test_masked_anndata_genes_run_without_scikit_learn(worker_runs):
    """dasketch.anndata imports the estimators (and so scikit-learn): the columns
    of its masked genes are taken by a bridge function inside the read task."""
    pytest.importorskip("anndata")
    _check(worker_runs["AnnData masked genes"], "AnnData masked genes")


def _check(result, label):
    assert result["error"] is None, f"{label}: the task failed: {result['error']}"
    assert not result["before"], f"{label}: scikit-learn was imported by an earlier case"
    assert not result["after"], f"{label}: running its task imported scikit-learn"


@pytest.mark.parametrize("label", PASSES)
def test_block_task_runs_without_scikit_learn(worker_runs, label):
    _check(worker_runs[label], label)

