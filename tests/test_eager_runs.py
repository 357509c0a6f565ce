"""Eager runs: blocks in this process's memory, one block or the synchronous
scheduler, no cluster.

The bridge's primitives then call their functions on the blocks at once
(:func:`dasketch._blocks.run_eagerly`). The results must be those of the Dask
computation the run stands for, bit for bit, and no graph computed may run a
block function (the only graphs hand over the in-memory blocks); everything
else (several blocks under the threaded scheduler, a store read by its tasks, a
cluster, the ``dasketch.eager`` switch) stays a Dask computation.
"""

import contextlib

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.sparse
import zarr
from dask.callbacks import Callback

import dasketch
from dasketch._blocks import (
    add,
    as_row_blocks,
    cache_blocks,
    compute,
    map_reduce,
    run_eagerly,
    transformed_blocks,
    tree_reduce,
)
from dasketch._blocks.block_functions import append_ones
from dasketch._blocks.tasks import streamed_tree
from dasketch.linear_model import (
    DualRandomProjectionClassifier,
    PWSGDRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
    sketch_lstsq,
)
from dasketch.linear_model.dual_projection.checks import FIT_BLOCKS, fit_blocks


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


# How the rows are blocked: one block (eager under any local scheduler), or three
# blocks under the synchronous scheduler (eager: its tasks would run one at a time).
LAYOUTS = {"one block": ({}, None),
           "three blocks, synchronous": ({"block_rows": 100}, "synchronous")}


@contextlib.contextmanager
def _scheduled(layout, eager):
    block_params, scheduler = LAYOUTS[layout]
    settings = {"dasketch.eager": eager}
    if scheduler:
        settings["scheduler"] = scheduler
    with dask.config.set(settings):
        yield block_params


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((300, 40)) @ np.diag(np.logspace(0, -2, 40))
    y = X @ rng.standard_normal(40) + 0.1 * rng.standard_normal(300)
    return X, y, rng.uniform(0.5, 2.0, 300)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("loss", ["squared", "logistic", "smoothed_hinge"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_an_eager_fit_equals_the_dask_fit_bit_for_bit_without_graphs(loss, fit_intercept,
                                                                     layout):
    X, y, weights = _problem()
    target = y if loss == "squared" else np.sign(y)
    params = dict(loss=loss, alpha=0.1, sketch_size=8, fit_intercept=fit_intercept,
                  sample_weight=weights, random_state=0)
    with _Graphs() as eager_graphs, _scheduled(layout, True) as blocks:
        eager = dual_random_projection(X, target, **params, **blocks)
    with _Graphs() as dask_graphs, _scheduled(layout, False) as blocks:
        lazy = dual_random_projection(X, target, **params, **blocks)
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
    eager = DualRandomProjectionClassifier(alpha=0.5, sketch_size=8, random_state=0).fit(
        X, labels)
    with dask.config.set({"dasketch.eager": False}):
        lazy = DualRandomProjectionClassifier(alpha=0.5, sketch_size=8,
                                              random_state=0).fit(X, labels)
    np.testing.assert_array_equal(eager.coef_, lazy.coef_)
    np.testing.assert_array_equal(eager.predict(X), lazy.predict(X))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("weighted", [False, True])
def test_an_eager_least_squares_fit_equals_the_dask_fit_bit_for_bit(weighted, layout):
    """sketch_lstsq's preconditioner passes (the sketch, the check sketch, the
    leverage) run eagerly; its LSQR products are in memory either way."""
    X, y, weights = _problem(2)
    weights = weights if weighted else None
    fits = []
    for eager in (True, False):
        with _Graphs() as graphs, _scheduled(layout, eager) as blocks:
            fits.append((graphs, sketch_lstsq(X, y, random_state=0, **blocks),
                         SketchLstsqRegressor(random_state=0, **blocks).fit(
                             X, y, sample_weight=weights)))
    (eager_graphs, eager, eager_model), (dask_graphs, lazy, lazy_model) = fits
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.x, lazy.x)
    assert (eager.n_iter, eager.coef_error_bound) == (lazy.n_iter, lazy.coef_error_bound)
    np.testing.assert_array_equal(eager_model.coef_, lazy_model.coef_)
    assert eager_model.intercept_ == lazy_model.intercept_


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("p", [1, 2])
def test_an_eager_pwsgd_fit_equals_the_dask_fit_bit_for_bit(p, layout):
    """The preconditioner pass of pwSGD and its row gathers run eagerly."""
    X, y, weights = _problem(3)
    fits = []
    for eager in (True, False):
        with _Graphs() as graphs, _scheduled(layout, eager) as blocks:
            fits.append((graphs, PWSGDRegressor(p=p, n_iter=500, random_state=0, **blocks).fit(
                X, y, sample_weight=weights)))
    (eager_graphs, eager), (dask_graphs, lazy) = fits
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.coef_, lazy.coef_)
    assert eager.intercept_ == lazy.intercept_


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["dense", "centred", "sparse randomized"])
def test_an_eager_sketch_and_pca_equal_the_dask_ones_bit_for_bit(kind, layout):
    X, _, _ = _problem(4)
    params = dict(center=kind == "centred")
    if kind == "sparse randomized":
        X = scipy.sparse.random(300, 40, density=0.2, format="csr", random_state=0)
        params = dict(update="randomized", random_state=0)
    fits = []
    for eager in (True, False):
        with _Graphs() as graphs, _scheduled(layout, eager) as blocks:
            fits.append((graphs, dasketch.sketch(X, 6, **params, **blocks),
                         dasketch.SketchPCA(n_components=3, random_state=0, **blocks).fit(X)))
    (eager_graphs, eager, eager_pca), (dask_graphs, lazy, lazy_pca) = fits
    assert eager_graphs.block_tasks == 0 < dask_graphs.block_tasks
    np.testing.assert_array_equal(eager.B, lazy.B)
    assert eager.error_bound == lazy.error_bound
    np.testing.assert_array_equal(eager_pca.components_, lazy_pca.components_)
    np.testing.assert_array_equal(eager_pca.explained_variance_, lazy_pca.explained_variance_)


def test_which_blocks_run_eagerly(tmp_path):
    X, _, _ = _problem()
    assert run_eagerly(as_row_blocks(X)).eager
    three = as_row_blocks(X, block_rows=100)
    assert not run_eagerly(three).eager        # the threaded scheduler runs them in parallel
    with dask.config.set(scheduler="synchronous"):
        assert run_eagerly(three).eager
        np.testing.assert_array_equal(np.concatenate(run_eagerly(three).blocks), X)
    with dask.config.set({"dasketch.eager": False}):
        assert not run_eagerly(as_row_blocks(X)).eager
    path = str(tmp_path / "x.zarr")
    zarr.create_array(path, data=X, chunks=(64, 40))
    stored = as_row_blocks(path)
    assert not run_eagerly(stored).eager     # its task reads the store
    cached, choice = cache_blocks(stored, True)
    assert choice.cached and run_eagerly(cached).eager
    np.testing.assert_array_equal(run_eagerly(cached).blocks[0], X)


def _on_threads_equals(lazy, thread_counts, X, y, **params):
    """The eager fit on each thread count runs no block task in a graph and
    gives the Dask fit ``lazy``, bit for bit."""
    for threads in thread_counts:
        with _Graphs() as graphs, dask.config.set(scheduler="threads", num_workers=threads):
            eager = dual_random_projection(X, y, **params)
        assert graphs.block_tasks == 0
        np.testing.assert_array_equal(eager.coef, lazy.coef)
        assert (eager.intercept, eager.n_passes, eager.coef_error_bound) == \
            (lazy.intercept, lazy.n_passes, lazy.coef_error_bound)


@pytest.mark.parametrize("loss", ["squared", "logistic"])
def test_a_fit_on_threads_equals_the_dask_fit_bit_for_bit_at_every_thread_count(loss):
    """Under the threaded scheduler a fit's passes run eagerly on its thread
    count, one block a thread: no graph runs a block function, and the result
    is the Dask computation's, bit for bit, whatever the number of threads."""
    X, y, weights = _problem(5)
    target = y if loss == "squared" else np.sign(y)
    params = dict(loss=loss, alpha=0.1, sketch_size=8, sample_weight=weights,
                  random_state=0, block_rows=32)   # ten blocks
    with dask.config.set({"dasketch.eager": False}):
        lazy = dual_random_projection(X, target, **params)
    _on_threads_equals(lazy, (1, 2, 3, 16), X, target, **params)


def test_a_fit_spread_over_equal_blocks_is_the_same_for_every_chunking_and_thread_count():
    """A matrix of few default blocks is cut into equal ones from its shape
    (here 2 blocks of 750 rows, not 1,024 and 476): a Dask array of other
    chunks, fitted as a Dask computation, and the eager fit on any number of
    threads give the same result, bit for bit."""
    rng = np.random.default_rng(6)
    X = rng.standard_normal((1500, 3000))
    y = X[:, :20].sum(axis=1) + 0.1 * rng.standard_normal(1500)
    params = dict(alpha=1000.0, sketch_size=8, random_state=0)
    assert as_row_blocks(X, min_blocks=FIT_BLOCKS).offsets == (0, 750, 1500)
    with dask.config.set({"dasketch.eager": False}):
        lazy = dual_random_projection(da.from_array(X, chunks=(400, -1)), y, **params)
    _on_threads_equals(lazy, (1, 2, 3), X, y, **params)


def test_a_fit_cuts_every_input_kind_into_the_same_blocks_of_four_times_the_default():
    """A fit's dense blocks hold 2^24 values (512 rows of 24,000 columns), four
    times the readers' default (128 rows), for a matrix in memory and a Dask array
    of any chunks alike: the blocks, and so the fit's result bit for bit, follow
    from the shape alone; ``block_rows`` still decides when given."""
    X = np.broadcast_to(np.float64(1.0), (8192, 24_000))   # a view: no memory
    assert as_row_blocks(X).offsets[1] == 128
    expected = tuple(range(0, 8193, 512))
    for source in (X, da.from_array(X, chunks=(3000, -1), name="x"),
                   da.from_array(X, chunks=(1000, 8000), name="y")):
        assert fit_blocks(source, None).offsets == expected
    assert fit_blocks(X, 100).offsets[:3] == (0, 100, 200)
    assert fit_blocks(X[:6000], None).offsets == tuple(range(0, 6001, 375))  # spread to 16


def test_an_eager_fit_names_its_blocks_in_memory_without_hashing_them(cluster_client):
    """Where a fit's passes run eagerly (the threaded or synchronous scheduler, no
    client), the blocks of a matrix in memory get a fresh token, X unhashed, so two
    reads name them apart; where their keys reach a Dask computation (eager off,
    the process scheduler, a client given or active) they are named after the
    content, as every other reader names them: two reads agree, other data differ."""
    X = np.arange(200.0).reshape(40, 5)

    def key(data=X, client=None):
        return fit_blocks(data, 8, client).blocks[0].key

    assert key() != key()
    with dask.config.set(scheduler="synchronous"):
        assert key() != key()
    with dask.config.set({"dasketch.eager": False}):
        assert key() == key() != key(X + 1.0)
    with dask.config.set(scheduler="processes"):
        assert key() == key()
    assert key(client=cluster_client) == key(client=cluster_client)
    with cluster_client.as_current():
        assert key() == key()
    assert as_row_blocks(X).blocks[0].key == as_row_blocks(X).blocks[0].key


def test_threads_of_eager_passes_follow_the_threaded_scheduler():
    X, _, _ = _problem()
    three = as_row_blocks(X, block_rows=100)
    with dask.config.set(num_workers=2):
        assert run_eagerly(three, threaded=True).threads == 2
        with dask.config.set({"dasketch.progress": True}):   # a bar counts Dask tasks
            assert not run_eagerly(three, threaded=True).eager
    with dask.config.set(num_workers=64):
        assert run_eagerly(three, threaded=True).threads == 3   # one block a thread at most
    with dask.config.set(scheduler="processes"):
        assert not run_eagerly(three, threaded=True).eager
    for bad in (0, 1.5, "two", True):
        with dask.config.set(num_workers=bad), \
                pytest.raises(ValueError, match="dask.config 'num_workers' must be an integer"):
            run_eagerly(three, threaded=True)


def test_an_error_in_a_block_on_threads_names_its_rows():
    X, y, _ = _problem()
    X = X.copy()
    X[250, 3] = np.nan
    with dask.config.set(scheduler="threads", num_workers=2), \
            pytest.raises(ValueError, match="NaN"):
        dual_random_projection(X, y, alpha=0.1, sketch_size=8, block_rows=32)


@pytest.mark.parametrize("split_every", [2, 3, 5])
def test_the_streamed_tree_is_the_tree_of_dask_graphs(split_every):
    """Eager parts are combined by the groups, in the order, of the Dask tree
    (a combine that records its groups shows them)."""
    def group(*parts):
        return "(" + ",".join(parts) + ")"

    for n in range(1, 40):
        graphs = tree_reduce([dask.delayed(str(i)) for i in range(n)], group, split_every)
        assert streamed_tree(map(str, range(n)), group, split_every) == \
            dask.compute(graphs, scheduler="synchronous")[0]
        assert tree_reduce([np.ones(2)] * n, add, split_every).tolist() == [n, n]


def test_a_cluster_runs_every_pass_on_its_workers(cluster_client):
    """With a client given or active the passes are tasks on the workers, and
    give the eager run's result to rounding."""
    X, y, _ = _problem()
    params = dict(alpha=0.1, sketch_size=8, random_state=0)
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


def test_in_order_yields_in_order_raises_the_first_error_and_does_not_nest():
    import threading
    import time

    from dasketch._blocks.tasks import in_order

    def late(i):
        def call():
            time.sleep(0.01 * ((7 * i) % 5))   # later calls often finish first
            return i, threading.current_thread().name
        return call

    results = list(in_order([late(i) for i in range(12)], threads=3))
    assert [i for i, _ in results] == list(range(12))
    assert all(name.startswith("dasketch-pass") for _, name in results)

    def failing(i):
        def call():
            if i in (4, 7):
                raise ValueError(f"block {i}")
            return i
        return call

    with pytest.raises(ValueError, match="block 4"):
        list(in_order([failing(i) for i in range(10)], threads=3))

    def nested():   # a call on a pass thread runs its own calls in that thread
        return [name for _, name in in_order([late(i) for i in range(3)], threads=3)]

    (names,) = list(in_order([nested], threads=2))
    assert len(set(names)) == 1


def test_eager_blocks_in_memory_are_views_of_the_input_and_others_are_computed():
    X = np.arange(60.0).reshape(20, 3)
    blocks = as_row_blocks(X, block_rows=8)
    with dask.config.set(scheduler="synchronous"):
        eager = run_eagerly(blocks)
        assert all(np.shares_memory(block, X) for block in eager.blocks)
        # Blocks replaced by a transformation are computed, never the input's views.
        with_ones = run_eagerly(transformed_blocks(blocks, append_ones, 4))
    assert np.array_equal(np.vstack(with_ones.blocks), np.hstack([X, np.ones((20, 1))]))


def test_the_eager_tree_sums_into_its_own_sums_only_and_as_the_graph_does():
    rng = np.random.default_rng(0)
    parts = [rng.standard_normal(1000) for _ in range(11)]
    copies = [part.copy() for part in parts]
    for split_every in (2, 3):
        eager = streamed_tree(iter(parts), add, split_every)
        graph = tree_reduce([dask.delayed(part) for part in parts], add, split_every)
        assert np.array_equal(eager, dask.compute(graph)[0])   # bit for bit
        assert all(np.array_equal(part, copy) for part, copy in zip(parts, copies))


def test_fresh_parts_are_summed_into_and_the_sum_is_the_graphs():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 5))
    blocks = as_row_blocks(X, block_rows=4)
    with dask.config.set(scheduler="synchronous"):
        eager = run_eagerly(blocks)

        def gram(block, start, stop):
            return block.T @ block   # a new array each call

        ours = map_reduce(eager, gram, add, split_every=2, keeps_block=False,
                          fresh_parts=True)
        graph = compute(map_reduce(blocks, gram, add, split_every=2, keeps_block=False,
                                   fresh_parts=True))[0]
    assert np.array_equal(ours, graph)
    assert np.allclose(ours, X.T @ X)
