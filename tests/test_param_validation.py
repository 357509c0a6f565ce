"""Bad parameters of the public functions and estimators raise scikit-learn's
InvalidParameterError (a ValueError and a TypeError) naming the parameter and
the function, before any work starts: a bool is never taken for a number, counts
must be positive, and string options must be known. Values read from
``dask.config`` are checked by the bridge with the same rules."""

import dask
import numpy as np
import pytest

import dasketch
from dasketch._blocks import as_row_blocks, check_split_every
from dasketch.decomposition import SketchPCA
from dasketch.linear_model import (
    PWSGDRegressor,
    RFDSONClassifier,
    RFDSONRegressor,
    SketchLstsqRegressor,
    dual_random_projection,
    leverage_scores,
    sketch_lstsq,
    sketch_precondition,
)

X = np.random.default_rng(0).standard_normal((60, 4))
Y = X @ np.arange(1.0, 5.0)
LABELS = np.where(Y > 0, 1, 0)


def _sketch(**kwargs):
    return dasketch.sketch(X, **{"sketch_size": 3, **kwargs})


def _estimate(**kwargs):
    return dasketch.estimate_error(X, **{"sketch": dasketch.sketch(X, 3), **kwargs})


def _embed(**kwargs):
    return dasketch.sparse_embed(X, **{"sketch_size": 8, **kwargs})


def _drp(**kwargs):
    return dual_random_projection(X, Y, **kwargs)


def _get_client(**kwargs):
    with dasketch.get_client(dashboard_address=None, **kwargs):
        pass


def _fit(estimator, y=Y, **fit_params):
    return lambda **params: estimator(**params).fit(X, y, **fit_params)


FUNCTIONS = {"sketch": _sketch, "estimate_error": _estimate, "sparse_embed": _embed,
             "dual_random_projection": _drp, "get_client": _get_client,
             "RFDSONRegressor": _fit(RFDSONRegressor),
             "RFDSONClassifier": _fit(RFDSONClassifier, LABELS),
             "PWSGDRegressor": _fit(PWSGDRegressor),
             "SketchLstsqRegressor": _fit(SketchLstsqRegressor),
             "SketchPCA": lambda **params: SketchPCA(**params).fit(X),
             "sketch_lstsq": lambda **params: sketch_lstsq(X, Y, **params),
             "the preconditioner": lambda **params: sketch_precondition(X, **params),
             "leverage_scores": lambda **params: leverage_scores(
                 X, sketch_precondition(X, random_state=0), **params)}

CASES = [
    ("sketch", dict(sketch_size=True)),
    ("sketch", dict(sketch_size=1)),
    ("sketch", dict(method="oja")),
    ("sketch", dict(alpha0=-1.0)),
    ("sketch", dict(update="fast")),
    ("sketch", dict(center=1)),
    ("sketch", dict(block_rows=0)),
    ("sketch", dict(split_every=True)),
    ("sketch", dict(working_size=np.float64(8))),
    ("sketch", dict(failure_probability=1.0)),
    ("sketch", dict(random_state=True)),
    ("sketch", dict(missing_chunks="zero")),
    ("sketch", dict(progress="yes")),
    ("estimate_error", dict(sketch=X)),
    ("estimate_error", dict(n_vectors=True)),
    ("estimate_error", dict(n_vectors=0)),
    ("estimate_error", dict(block_rows=False)),
    ("sparse_embed", dict(sketch_size=True)),
    ("sparse_embed", dict(sketch_size=0)),
    ("sparse_embed", dict(embedding="gaussian")),
    ("sparse_embed", dict(nnz_per_column=True)),
    ("sparse_embed", dict(stream=-1)),
    ("dual_random_projection", dict(sketch_size=True)),
    ("dual_random_projection", dict(sketch_size=0)),
    ("dual_random_projection", dict(max_iter=True)),
    ("dual_random_projection", dict(loss="hinge")),
    ("dual_random_projection", dict(solver="lbfgs")),
    ("dual_random_projection", dict(smoothing=0.0)),
    ("dual_random_projection", dict(tol=np.inf)),
    ("dual_random_projection", dict(fit_intercept=1)),
    ("dual_random_projection", dict(cache="always")),
    ("dual_random_projection", dict(split_every=1)),
    ("dual_random_projection", dict(sample_weight=True)),
    ("dual_random_projection", dict(sample_weight=-1.0)),
    ("get_client", dict(n_workers=True)),
    ("get_client", dict(n_workers=0)),
    ("get_client", dict(threads_per_worker=True)),
    ("get_client", dict(memory_limit=True)),
    ("get_client", dict(timeout=False)),
    ("get_client", dict(set_as_default="yes")),
    ("RFDSONRegressor", dict(sketch_size=True)),
    ("RFDSONRegressor", dict(sketch_size=0)),
    ("RFDSONRegressor", dict(method="oja")),
    ("RFDSONRegressor", dict(alpha0=True)),
    ("RFDSONRegressor", dict(prediction_bound=np.inf)),
    ("RFDSONRegressor", dict(eta=-1.0)),
    ("RFDSONRegressor", dict(mu="fixed")),
    ("RFDSONRegressor", dict(update="lazy")),
    ("RFDSONRegressor", dict(fit_intercept=1)),
    ("RFDSONRegressor", dict(alpha_floor=None)),
    ("RFDSONRegressor", dict(block_rows=True)),
    ("RFDSONRegressor", dict(progress="sometimes")),
    ("RFDSONClassifier", dict(loss="cubic")),
    ("PWSGDRegressor", dict(sketch_size=True)),
    ("SketchLstsqRegressor", dict(max_iter=True)),
    ("SketchPCA", dict(block_rows=True)),
    ("sketch_lstsq", dict(tol=True)),
    ("sketch_lstsq", dict(tol=0.0)),
    ("sketch_lstsq", dict(max_iter=True)),
    ("the preconditioner", dict(sketch_size=True)),
    ("the preconditioner", dict(check_size=-1)),
    ("leverage_scores", dict(n_projections=True)),
]


@pytest.mark.parametrize("caller, params", CASES,
                         ids=[f"{c}-{next(iter(p))}={next(iter(p.values()))!r}"
                              for c, p in CASES])
def test_bad_parameter_is_named(caller, params):
    (name,) = params
    with pytest.raises((ValueError, TypeError),
                       match=rf"^The '{name}' parameter of {caller} must be .* Got "):
        FUNCTIONS[caller](**params)


@pytest.mark.parametrize("estimator", [RFDSONRegressor, RFDSONClassifier])
@pytest.mark.parametrize("n_epochs", [True, 0, 1.0])
def test_bad_n_epochs_is_named(estimator, n_epochs):
    with pytest.raises(ValueError, match=rf"^The 'n_epochs' parameter of "
                                         rf"{estimator.__name__}.fit must be an int"):
        estimator(sketch_size=2).fit(X, LABELS, n_epochs=n_epochs)


def test_good_parameters_of_the_same_kinds_pass():
    """NumPy integers and floats are numbers; numpy bools are booleans."""
    s = dasketch.sketch(X, np.int64(3), alpha0=np.float32(0.5), center=np.bool_(True),
                        split_every=np.int32(2), block_rows=np.int64(7), random_state=0)
    assert s.B.shape == (2, 4)
    assert dasketch.estimate_error(X, s, n_vectors=np.int8(2), random_state=0).n_vectors == 2
    est = RFDSONRegressor(sketch_size=np.int64(2), prediction_bound=np.float64(50.0),
                          fit_intercept=np.bool_(False)).fit(X, Y, n_epochs=np.int64(1))
    assert est.n_seen_ == X.shape[0]


@pytest.mark.parametrize("key, value, message", [
    ("split_every", True, r"dask.config 'split_every' must be an integer in \[2, inf\), "
                          r"got True"),
    ("split_every", 1, r"dask.config 'split_every' must be an integer in \[2, inf\), got 1"),
    ("dasketch.combine-bytes", True, r"dask.config 'dasketch.combine-bytes' \(bytes\) must "
                                     r"be a number in \(0, inf\), got True"),
])
def test_bad_dask_config_values_are_named(key, value, message):
    with dask.config.set({key: value}), pytest.raises(ValueError, match=message):
        check_split_every(None, part_bytes=2 ** 20)
    if key == "split_every":
        with dask.config.set({key: value}), pytest.raises(ValueError, match=message):
            dasketch.sketch(X, 3)


def test_bridge_refuses_bool_block_rows():
    with pytest.raises(ValueError, match=r"block_rows must be an integer in \[1, inf\), "
                                         r"got True"):
        as_row_blocks(X, block_rows=True)


def test_a_number_is_every_weight():
    """As in scikit-learn, ``sample_weight=2.0`` weighs every row by 2."""
    scalar = dual_random_projection(X, Y, alpha=1.0, sample_weight=2.0, random_state=0)
    vector = dual_random_projection(X, Y, alpha=1.0, sample_weight=np.full(len(Y), 2.0),
                                    random_state=0)
    np.testing.assert_array_equal(scalar.coef, vector.coef)

