"""Sketch preconditioner QR(S A) and leverage estimates (Yang et al., JMLR 2018)."""

import subprocess
import sys

import dask.array as da
import numpy as np
import pytest

from dasketch._blocks import as_row_blocks
from dasketch.datasets import ill_conditioned_regression
from dasketch.linear_model import leverage_scores, sketch_precondition
from dasketch.linear_model.preconditioning import precondition_blocks


@pytest.fixture(scope="module")
def problem():
    A, b, _ = ill_conditioned_regression(20000, 30, condition_number=1e6, random_state=4)
    return A, b


def _exact_U(A, P):
    return A @ np.linalg.inv(P.R)


@pytest.mark.parametrize("seed", [0, 1])
def test_osnap_conditions_an_ill_conditioned_matrix(problem, seed):
    A, b = problem
    assert np.linalg.cond(A) > 1e5
    P = sketch_precondition(A, b, sketch_size=4 * A.shape[1], random_state=seed)
    exact = np.linalg.cond(_exact_U(A, P))
    assert exact < 10
    # the independent check sketch estimates it within the distortion of an
    # 8d-row OSNAP embedding
    assert exact / 2.5 < P.condition_number_estimate < exact * 2.5
    # and the sketch-and-solve start is a (1 + O(1)) approximation
    def f(x):
        return np.sum((A @ x - b) ** 2)

    x_opt = np.linalg.lstsq(A, b, rcond=None)[0]
    assert f(P.x0) < 3 * f(x_opt)


def test_countsketch_needs_a_larger_sketch(problem):
    A, _ = problem
    P = sketch_precondition(A, sketch_size=20 * A.shape[1], embedding="countsketch",
                            random_state=0)
    assert np.linalg.cond(_exact_U(A, P)) < 10


def test_leverage_scores_exact_and_estimated(problem):
    A, _ = problem
    P = sketch_precondition(A, random_state=3)
    U = _exact_U(A, P)
    exact2 = leverage_scores(A, P, p=2, exact=True)
    np.testing.assert_allclose(exact2, np.sum(U ** 2, axis=1), rtol=1e-8)
    est2 = leverage_scores(A, P, p=2, n_projections=64)
    ratio = est2 / exact2
    assert np.mean((ratio > 1 / 2) & (ratio < 2)) > 0.99
    heavy = np.argsort(exact2)[-7:]
    assert set(np.argsort(est2)[-7:]) == set(heavy)

    exact1 = leverage_scores(A, P, p=1, exact=True)
    np.testing.assert_allclose(exact1, np.sum(np.abs(U), axis=1), rtol=1e-8)
    est1 = leverage_scores(A, P, p=1, n_projections=64)
    ratio = est1 / exact1
    assert np.mean((ratio > 1 / 2) & (ratio < 2)) > 0.95
    assert np.median(ratio) == pytest.approx(1.0, abs=0.1)


def test_invariant_to_chunking_and_scheduler(problem, cluster_client):
    A, b = problem
    ref = sketch_precondition(A, b, random_state=7)
    lev = leverage_scores(A, ref)
    dask_A = da.from_array(A, chunks=(3333, 30))
    for kwargs in (dict(block_rows=1000), dict(client=cluster_client)):
        other = sketch_precondition(dask_A, b, random_state=7, **kwargs)
        np.testing.assert_allclose(np.abs(other.R), np.abs(ref.R), rtol=1e-9,
                                   atol=1e-12 * np.abs(ref.R).max())
        np.testing.assert_allclose(other.x0, ref.x0, rtol=1e-6)
        np.testing.assert_allclose(leverage_scores(dask_A, other, **kwargs), lev, rtol=1e-6)


def test_bad_input(problem):
    A, b = problem
    with pytest.raises(ValueError, match="sketch_size must be >= d"):
        sketch_precondition(A, sketch_size=A.shape[1] - 1)
    with pytest.raises(ValueError, match="n >> d"):
        sketch_precondition(A[:20], b[:20])
    with pytest.raises(ValueError, match="b has 19999 entries"):
        sketch_precondition(A, b[:-1])
    bad = A[:2000].copy()
    bad[17, 3] = np.nan
    with pytest.raises(ValueError, match="NaN or Inf"):
        sketch_precondition(bad)
    bad[17, 3] = np.inf
    with pytest.raises(ValueError, match="NaN or Inf"):
        sketch_precondition(bad)
    b_bad = b.copy()
    b_bad[5] = np.inf
    with pytest.raises(ValueError, match="b contains NaN or Inf"):
        sketch_precondition(A, b_bad)
    with pytest.raises(ValueError, match="embedding"):
        sketch_precondition(A, embedding="srht")
    with pytest.raises(ValueError, match="p must be 1 or 2"):
        leverage_scores(A, sketch_precondition(A, random_state=0), p=3)


@pytest.mark.parametrize("power", [1, 2])
def test_weighted_centred_sketch_is_that_of_the_weighted_centred_rows(problem, power):
    # one pass over X gives the sketch of the rows w^(1/p) x_i, and, centred,
    # of W^(1/2) (X - 1 m^T) with m the weighted means: the same embedding S
    # (its columns follow the row positions) applied to the rows formed explicitly
    A, b = problem
    A, b = A[:5000], b[:5000]
    w = np.random.default_rng(0).integers(0, 4, 5000).astype(float)
    blocks = as_row_blocks(A, block_rows=1500)
    scaled = w[:, None] ** (1 / power)
    weighted = precondition_blocks(blocks, b, sample_weight=w, power=power, random_state=2,
                                   full_rank=False)
    explicit = precondition_blocks(as_row_blocks(scaled * A), scaled[:, 0] * b,
                                   random_state=2)
    np.testing.assert_allclose(weighted.R, explicit.R, atol=1e-10 * np.abs(explicit.R).max())
    np.testing.assert_allclose(weighted.x0, explicit.x0, rtol=1e-8)
    assert weighted.weight_sum == w.sum()
    assert weighted.frobenius == pytest.approx(np.sqrt(w @ (A ** 2).sum(axis=1)))
    if power == 2:
        m, ym = w @ A / w.sum(), w @ b / w.sum()
        centred = precondition_blocks(blocks, b, sample_weight=w, centre=True, random_state=2)
        explicit = precondition_blocks(as_row_blocks(scaled * (A - m)), scaled[:, 0] * (b - ym),
                                       random_state=2)
        np.testing.assert_allclose(centred.mean, m, rtol=1e-12)
        assert centred.target_mean == pytest.approx(ym, rel=1e-12)
        np.testing.assert_allclose(centred.R, explicit.R, atol=1e-10 * np.abs(explicit.R).max())
        np.testing.assert_allclose(centred.x0, explicit.x0, rtol=1e-8)


def test_rank_deficient_basis_spans_the_row_space(problem):
    A, _ = problem
    X = np.column_stack([A[:, :6], A[:, 1] - 2 * A[:, 4]])
    with pytest.raises(ValueError, match="rank deficient .*rank 6 of 7 columns.*minimum-norm"):
        sketch_precondition(X, random_state=0)
    P = precondition_blocks(as_row_blocks(X), random_state=0, full_rank=False)
    assert P.rank == 6 and P.basis.shape == (7, 6)
    null = np.array([0, 1, 0, 0, -2, 0, -1.0]) / np.sqrt(6)
    assert np.abs(null @ P.basis).max() <= 1e-10 * np.abs(P.basis).max()  # N in row(X)
    assert np.linalg.cond(X @ P.basis) < 10 and 1 <= P.condition_number_estimate < 10


@pytest.mark.heavy
def test_the_weighted_sketch_pass_runs_without_scikit_learn():
    # workers import the module of the block function they unpickle
    code = ("import sys, dasketch.linear_model._regression_passes; "
            "sys.exit('sklearn' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
