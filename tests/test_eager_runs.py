"""Eager runs: one block in this process's memory, no cluster.

The bridge's primitives then call their functions on the block at once
(:func:`dasketch._blocks.run_eagerly`). The results must be those of the Dask
computation the run stands for, bit for bit, and the only graph computed is the
one that hands over the block;
everything else (several blocks, a store read by its tasks, a cluster, the
``dasketch.eager`` switch) stays a Dask computation.
"""

import dask
import numpy as np
import pytest
import scipy.sparse
import zarr
from dask.callbacks import Callback

import dasketch
from dasketch._blocks import as_row_blocks, cache_blocks, run_eagerly
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    PWSGDRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
    sketch_lstsq,
)


class _Graphs(Callback):
    """Counts the graphs Dask computes on the local schedulers, and the tasks in
    them that run a block function (any key not naming an in-memory block,
    ``rows-...``, which an eager run takes from its graph once)."""

    def __init__(self):
        super().__init__()
        self.count = 0
        self.block_tasks = 0

    def _start(self, dsk):
        self.count += 1
        self.block_tasks += sum(not dask.utils.key_split(key).startswith("rows")
                                for key in dsk)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 40)) @ np.diag(np.logspace(0, -2, 40))
    y = X @ rng.standard_normal(40) + 0.1 * rng.standard_normal(300)
    return X, y, rng.uniform(0.5, 2.0, 300)


@pytest.mark.parametrize("loss", ["squared", "logistic", "smoothed_hinge"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_an_eager_fit_equals_the_dask_fit_bit_for_bit_without_graphs(loss, fit_intercept):
    X, y, weights = _problem()
    target = y if loss == "squared" else np.sign(y)
    params = dict(loss=loss, alpha=0.1, n_components=8, fit_intercept=fit_intercept,
                  sample_weight=weights, random_state=0)
    with _Graphs() as eager_graphs:
        eager = dual_random_projection(X, target, **params)
    with _Graphs() as dask_graphs, dask.config.set({"dasketch.eager": False}):
        lazy = dual_random_projection(X, target, **params)
    assert eager_graphs.block_tasks == 0
    assert dask_graphs.count >= lazy.n_passes
    np.testing.assert_array_equal(eager.coef, lazy.coef)
    assert eager.intercept == lazy.intercept
    assert (eager.n_passes, eager.coef_error_bound) == (lazy.n_passes, lazy.coef_error_bound)
    # The result's dual variables stay lazy, over the input, whichever way it ran.
    np.testing.assert_array_equal(eager.dual_coef().compute(), lazy.dual_coef().compute())


def test_an_eager_one_vs_rest_classifier_equals_the_dask_one():
    X, y, _ = _problem(1)
    labels = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    eager = DualRandomProjectionClassifier(alpha=0.5, n_components=8, random_state=0).fit(
        X, labels)
    with dask.config.set({"dasketch.eager": False}):
        lazy = DualRandomProjectionClassifier(alpha=0.5, n_components=8,
                                              random_state=0).fit(X, labels)
    np.testing.assert_array_equal(eager.coef_, lazy.coef_)
    np.testing.assert_array_equal(eager.predict(X), lazy.predict(X))


@pytest.mark.parametrize("weighted", [False, True])
def test_an_eager_least_squares_fit_equals_the_dask_fit_bit_for_bit(weighted):
    """sketch_lstsq's preconditioner passes (the sketch, the check sketch, the
    leverage) run eagerly; its LSQR products are in memory either way."""
    X, y, weights = _problem(2)
    weights = weights if weighted else None
    with _Graphs() as eager_graphs:
        eager = sketch_lstsq(X, y, random_state=0)
        eager_model = SketchLstsqRegressor(random_state=0).fit(X, y, sample_weight=weights)
    with _Graphs() as dask_graphs, dask.config.set({"dasketch.eager": False}):
        lazy = sketch_lstsq(X, y, random_state=0)
        lazy_model = SketchLstsqRegressor(random_state=0).fit(X, y, sample_weight=weights)
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.x, lazy.x)
    assert (eager.n_iter, eager.coef_error_bound) == (lazy.n_iter, lazy.coef_error_bound)
    np.testing.assert_array_equal(eager_model.coef_, lazy_model.coef_)
    assert eager_model.intercept_ == lazy_model.intercept_


@pytest.mark.parametrize("p", [1, 2])
def test_an_eager_pwsgd_fit_equals_the_dask_fit_bit_for_bit(p):
    """The preconditioner pass of pwSGD and its row gathers run eagerly."""
    X, y, weights = _problem(3)
    with _Graphs() as eager_graphs:
        eager = PWSGDRegressor(p=p, n_iter=500, random_state=0).fit(X, y, sample_weight=weights)
    with _Graphs() as dask_graphs, dask.config.set({"dasketch.eager": False}):
        lazy = PWSGDRegressor(p=p, n_iter=500, random_state=0).fit(X, y, sample_weight=weights)
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.coef_, lazy.coef_)
    assert eager.intercept_ == lazy.intercept_


@pytest.mark.parametrize("kind", ["dense", "centred", "sparse randomized"])
def test_an_eager_sketch_and_pca_equal_the_dask_ones_bit_for_bit(kind):
    X, _, _ = _problem(4)
    params = dict(center=kind == "centred")
    if kind == "sparse randomized":
        X = scipy.sparse.random(300, 40, density=0.2, format="csr", random_state=0)
        params = dict(update="randomized", random_state=0)
    with _Graphs() as eager_graphs:
        eager = dasketch.sketch(X, 6, **params)
        eager_pca = dasketch.SketchPCA(n_components=3, random_state=0).fit(X)
    with _Graphs() as dask_graphs, dask.config.set({"dasketch.eager": False}):
        lazy = dasketch.sketch(X, 6, **params)
        lazy_pca = dasketch.SketchPCA(n_components=3, random_state=0).fit(X)
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.B, lazy.B)
    assert eager.error_bound == lazy.error_bound
    np.testing.assert_array_equal(eager_pca.components_, lazy_pca.components_)
    np.testing.assert_array_equal(eager_pca.explained_variance_, lazy_pca.explained_variance_)


def test_only_one_block_in_this_process_runs_eagerly(tmp_path):
    X, _, _ = _problem()
    assert run_eagerly(as_row_blocks(X)).eager
    assert not run_eagerly(as_row_blocks(X, block_rows=100)).eager    # three blocks
    with dask.config.set({"dasketch.eager": False}):
        assert not run_eagerly(as_row_blocks(X)).eager
    path = str(tmp_path / "x.zarr")
    zarr.create_array(path, data=X, chunks=(64, 40))
    stored = as_row_blocks(path)
    assert not run_eagerly(stored).eager     # its task reads the store
    cached, choice = cache_blocks(stored, True)
    assert choice.cached and run_eagerly(cached).eager
    np.testing.assert_array_equal(run_eagerly(cached).blocks[0], X)


def test_a_cluster_runs_every_pass_on_its_workers(cluster_client):
    """With a client given or active the passes are tasks on the workers, and
    give the eager run's result to rounding."""
    X, y, _ = _problem()
    params = dict(alpha=0.1, n_components=8, random_state=0)
    assert not run_eagerly(as_row_blocks(X), cluster_client).eager
    from distributed import get_task_stream

    with get_task_stream(cluster_client) as stream:
        given = dual_random_projection(X, y, client=cluster_client, **params)
    names = {dask.utils.key_split(task["key"]) for task in stream.data}
    assert {"projection_block", "hessian_block"} <= names, sorted(names)
    with cluster_client.as_current(), get_task_stream(cluster_client) as stream:
        assert not run_eagerly(as_row_blocks(X)).eager
        active = dual_random_projection(X, y, **params)
    assert "hessian_block" in {dask.utils.key_split(task["key"]) for task in stream.data}
    eager = dual_random_projection(X, y, **params)
    # To rounding: workers get their arrays through serialisation, in their own layout.
    np.testing.assert_allclose(given.coef, eager.coef, rtol=1e-10)
    np.testing.assert_allclose(active.coef, eager.coef, rtol=1e-10)
