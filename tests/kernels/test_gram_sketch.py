"""Exact Gram summaries: summed over a tree and shrunk once, they give the sketch of
one shrink of all the rows, certified, centred or not; blocks off scale 1 merge as
sketches; the bridge chooses them for dense rows of moderate width while the
workers hold them."""

import numpy as np
import pytest
import scipy.sparse
from distributed import Client, LocalCluster

import dasketch
from dasketch import Sketch
from dasketch._blocks import as_row_blocks
from dasketch._blocks.blocked_sketch import GRAM_MAX_FEATURES, _gram_fits
from dasketch.kernels.gram_sketch import GramSummary, merge_summaries, summarise_rows
from dasketch.sketching import choose_update
from tests.helpers import spectral_norm


def _decaying(n, d, seed=0, decay=0.9):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) * decay ** np.arange(d)


def _loss(sketch, A):
    """``||A^T A - B^T B||_2`` with ``A`` centred for a centred sketch."""
    if sketch.centered:
        A = A - A.mean(axis=0)
    return spectral_norm(A.T @ A - sketch.B.T @ sketch.B)


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
def test_a_tree_of_gram_summaries_is_one_shrink_of_all_the_rows(center):
    X = _decaying(3000, 40)
    tree = dasketch.sketch(X, 8, block_rows=250, split_every=3, center=center)
    one = Sketch.from_rows(X, 8, update="block", center=center)
    shrinks = dasketch.sketch(X, 8, block_rows=250, split_every=3, center=center,
                              update="block", working_size=8)
    scale = float(np.sum(X * X))
    assert tree.n_rows == 3000 and tree.B.shape == one.B.shape
    assert tree.shrinkage == pytest.approx(one.shrinkage, rel=1e-9)
    assert spectral_norm(tree.B.T @ tree.B - one.B.T @ one.B) <= 1e-12 * scale
    # A tree of block sketches adds a shrinkage at every block and merge.
    assert shrinks.shrinkage > 1.02 * tree.shrinkage
    assert _loss(tree, X) <= tree.loss_bound
    assert 0 < tree.rounding <= 1e-9 * tree.shrinkage


def test_centred_summaries_merge_by_the_parallel_variance_identity():
    X = _decaying(900, 12, seed=1) + 50.0
    parts = [summarise_rows(X[a:b], 4, center=True) for a, b in ((0, 100), (100, 700),
                                                               (700, 900))]
    merged = merge_summaries(parts)
    centred = X - X.mean(axis=0)
    assert isinstance(merged, GramSummary) and merged.n_rows == 900
    np.testing.assert_allclose(merged.mean, X.mean(axis=0), rtol=1e-13)
    assert spectral_norm(merged.gram - centred.T @ centred) <= merged.rounding
    assert merged.frobenius_sq == pytest.approx(float(np.sum(centred ** 2)), rel=1e-12)


def test_a_block_off_scale_one_is_sketched_and_the_merge_still_certified():
    X = _decaying(1200, 16, seed=2)
    X[400:800] *= 2.0 ** 250  # entries beyond 2**200: sketched divided by a power of two
    huge = summarise_rows(X[400:800], 6)
    assert isinstance(huge, Sketch) and huge.scale_exponent > 0
    assert isinstance(summarise_rows(X[:400], 6), GramSummary)
    sketch = dasketch.sketch(X, 6, block_rows=400)
    assert sketch.scale_exponent > 0 and sketch.n_rows == 1200
    scaled = sketch.scaled()
    assert _loss(scaled, X / 2.0 ** sketch.scale_exponent) <= scaled.loss_bound


def test_a_block_with_nan_is_named():
    X = _decaying(600, 10, seed=3)
    X[437, 2] = np.nan
    with pytest.raises(ValueError, match="437"):
        dasketch.sketch(X, 4, block_rows=200)


def test_auto_chooses_gram_summaries_for_dense_rows_of_moderate_width():
    assert choose_update("auto", False, 256, 32) == "gram"
    assert choose_update("auto", False, GRAM_MAX_FEATURES, 32) == "gram"
    assert choose_update("auto", False, GRAM_MAX_FEATURES + 1, 32) == "auto"
    assert choose_update("auto", False, 32, 32) == "auto"  # nothing to shrink
    assert choose_update("block", False, 256, 32) == "block"
    with pytest.raises(ValueError, match="update='gram'"):
        dasketch.sketch(scipy.sparse.random(100, 50, density=0.1, format="csr",
                                            random_state=0), 4, update="gram")


def test_gram_summaries_give_way_to_shrinks_when_workers_cannot_hold_them():
    blocks = as_row_blocks(np.zeros((4096, 2048)), block_rows=2048)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      memory_limit="400MiB", dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        assert _gram_fits(client, "gram", "auto", blocks, 32, None) == ("auto", 32)
        with pytest.raises(ValueError, match="update='gram' holds 2,048 x 2,048"):
            _gram_fits(client, "gram", "gram", blocks, 32, None)
        assert _gram_fits(client, "gram", "auto", blocks, 32, 2) == ("gram", 2049)
    assert _gram_fits(None, "gram", "auto", blocks, 32, None) == ("gram", 2049)


def test_blocks_shorter_than_wide_are_left_to_the_shrinks():
    short = as_row_blocks(np.zeros((600, 300)), block_rows=100)
    assert _gram_fits(None, "gram", "auto", short, 32, None) == ("auto", 32)
    assert _gram_fits(None, "gram", "gram", short, 32, None) == ("gram", 301)
    tall = as_row_blocks(np.zeros((600, 300)), block_rows=300)
    assert _gram_fits(None, "gram", "auto", tall, 32, None) == ("gram", 301)


@pytest.mark.parametrize("center", [False, True], ids=["plain", "centred"])
def test_blocks_of_another_namespace_summarise_as_numpy_blocks(center):
    xps = pytest.importorskip("array_api_strict")
    from dasketch._blocks.block_functions import summarise_block

    X = _decaying(300, 10, seed=4) + 3.0
    params = dict(sketch_size=4, method="rfd", alpha0=0.0, center=center)
    ours = summarise_block(xps.asarray(X), 0, 300, **params)
    reference = summarise_block(X, 0, 300, **params)
    assert isinstance(ours, GramSummary) and isinstance(ours.gram, np.ndarray)
    assert spectral_norm(ours.gram - reference.gram) <= ours.rounding + reference.rounding
    X[117, 2] = np.inf
    with pytest.raises(ValueError, match="rows 217 "):
        summarise_block(xps.asarray(X), 100, 400, **params)


def test_a_wide_gram_shrinks_from_its_top_eigenpairs_as_from_all():
    from dasketch.kernels.shrink import TOP_EIGH_RATIO, shrink_gram

    X = _decaying(400, 4 * TOP_EIGH_RATIO, seed=5, decay=0.95)
    gram = X.T @ X
    top, delta = shrink_gram(gram, 4)            # d = 16 l: the top 4 eigenpairs only
    eigenvalues, eigenvectors = np.linalg.eigh(gram)
    lead = eigenvalues[::-1][:3] - eigenvalues[::-1][3]
    full = np.sqrt(lead)[:, None] * eigenvectors[:, ::-1][:, :3].T
    assert delta == pytest.approx(eigenvalues[::-1][3], rel=1e-12)
    assert spectral_norm(top.T @ top - full.T @ full) <= 1e-10 * eigenvalues[-1]
    everything, _ = shrink_gram(gram, 5)         # d < 16 l: every eigenpair
    assert everything.shape == (4, X.shape[1])


def test_the_sketch_is_the_same_bits_on_the_local_schedulers_and_chunkings():
    import dask
    import dask.array as da

    X = _decaying(20000, 256, seed=6, decay=0.97)
    sketches = []
    for scheduler in ("threads", "sync"):
        with dask.config.set(scheduler=scheduler):
            for A in (X, da.from_array(X, chunks=(7000, 256))):
                sketches.append(dasketch.sketch(A, 16, block_rows=4096))
    for other in sketches[1:]:
        np.testing.assert_array_equal(other.B, sketches[0].B)
        assert other.shrinkage == sketches[0].shrinkage
