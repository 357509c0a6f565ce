"""The public entry point :func:`estimate_error`: a randomized bracket of the
actual spectral error of a sketch, computed in one blocked pass over the data."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from dasketch._blocks import (
    add,
    as_row_blocks,
    check_estimate_memory,
    check_split_every,
    compute,
    default_client,
    gram_block,
    map_reduce,
    transformed_blocks,
)
from dasketch.kernels.certificates import error_from_products
from dasketch.kernels.embeddings import gaussian_rows, resolve_seed
from dasketch.kernels.frequent_directions import Sketch
from dasketch.kernels.sketch_scaling import _unscaled_bound, divide_by_power_of_two
from dasketch.utils._sklearn_compat import validate_parameter_constraints
from dasketch.utils.params import PASS_CONSTRAINTS, POSITIVE_INT, RANDOM_STATE

_ESTIMATE_CONSTRAINTS = {
    **PASS_CONSTRAINTS,
    "sketch": [Sketch],
    "n_vectors": [POSITIVE_INT],
    "random_state": RANDOM_STATE,
}


def estimate_error(X, sketch, *, n_vectors=10, random_state=None, split_every=None,
                   client=None, block_rows=None, component=None, storage_options=None):
    """Bracket the actual spectral error of ``sketch`` on ``X`` in one blocked pass.

    With ``r = n_vectors`` Gaussian vectors ``Omega`` (d x r) the pass computes
    ``X^T X Omega``; then for ``E = A^T A + alpha0 I - (B^T B + alpha I)`` (``A``
    centred for a centred sketch) ``lower = ||E Q||_2``, ``Q`` an orthonormal basis
    of ``Omega``, is at most the error, and ``upper = 10 sqrt(2/pi) max_i ||E
    omega_i||`` is at least the error except with probability ``10 ** -r``
    (Halko, Martinsson, Tropp, SIAM Review 2011, Section 4.3, Lemma 4.1). The
    upper end is loose (it grows with the Frobenius norm of ``E``); ``lower`` is
    the estimate to read. For a sketch of tiny rows (``scale_exponent < 0``) the
    pass works on the rows multiplied by ``2**-scale_exponent`` and the bracket is
    scaled back outwards, so it never collapses through underflow.

    Parameters
    ----------
    X : dask.array.Array, numpy.ndarray, scipy.sparse matrix, str or os.PathLike
        The data that was sketched, any input :func:`sketch` accepts.
    sketch : Sketch
        The sketch of ``X`` to check.
    n_vectors : int, default 10
        ``1 <= r <= d``; the upper end fails with probability ``10 ** -r``.
    random_state : None, int or numpy.random.Generator, optional
        Seeds the Gaussian vectors.
    split_every : int, optional
        As for :func:`sketch`.
    client : distributed.Client, optional
        As for :func:`sketch`.
    block_rows : int, optional
        As for :func:`sketch`.
    component : str, optional
        As for :func:`sketch`.
    storage_options : dict, optional
        As for :func:`sketch`.

    Returns
    -------
    ErrorEstimate
        ``lower``, ``upper``, ``n_vectors`` and ``failure_probability``.

    Raises
    ------
    ValueError
        When one task would not fit the workers' memory limit (a partial sum holds
        ``split_every`` products of ``d x n_vectors`` float64 values; see
        :func:`dasketch.sketch_memory.check_estimate_memory`), naming the
        ``n_vectors`` that fits.

    See Also
    --------
    sketch : Make the sketch this checks.
    Sketch.error_bound : The certified bound the estimate is compared with.

    Examples
    --------
    >>> import numpy as np, dasketch
    >>> X = np.random.default_rng(0).standard_normal((500, 30))
    >>> s = dasketch.sketch(X, 5)
    >>> est = dasketch.estimate_error(X, s, random_state=0)
    >>> err = np.linalg.norm(X.T @ X - s.covariance(), 2)
    >>> bool(est.lower <= err <= est.upper), est.failure_probability
    (True, 1e-10)
    """
    validate_parameter_constraints(_ESTIMATE_CONSTRAINTS, locals(), caller_name="estimate_error")
    e = sketch.scale_exponent
    if e > 0:
        raise ValueError(f"sketch: it holds rows divided by 2**{e} (their squares are beyond "
                         f"float64's range); check it as estimate_error(numpy.ldexp(X, -{e}), "
                         f"sketch.scaled())")
    blocks = as_row_blocks(X, block_rows=block_rows, component=component,
                           storage_options=storage_options, array_libraries="any")
    if blocks.n_features != sketch.n_features or blocks.n_rows != sketch.n_rows:
        raise ValueError(f"X has shape ({blocks.n_rows}, {blocks.n_features}) but the sketch "
                         f"summarises ({sketch.n_rows}, {sketch.n_features})")
    if n_vectors > blocks.n_features:
        raise ValueError(f"n_vectors must be at most the number of columns of X "
                         f"({blocks.n_features}): the vectors span a subspace of them, got "
                         f"{n_vectors}")
    seed = resolve_seed(random_state)
    fan_in = check_estimate_memory(
        client if client is not None else default_client(), int(n_vectors),
        blocks.n_features, check_split_every(split_every), read_bytes=blocks.read_bytes,
        lower_fan_in=split_every is None)
    if e < 0:
        # Tiny rows (sketched multiplied by 2**-e): the products are taken on the rows
        # multiplied up as well, where no square underflows, and the bracket scaled back
        # outwards (lower rounded down, upper up).
        blocks = transformed_blocks(blocks, partial(divide_by_power_of_two, exponent=e),
                                    blocks.n_features)
    gram = map_reduce(blocks, partial(gram_block, seed=seed, n_vectors=int(n_vectors)),
                      add, split_every=fan_in, keeps_block=False)
    (gram_omega,) = compute(gram, client=client)
    omega = gaussian_rows(seed, 1, 0, sketch.n_features, int(n_vectors))
    estimate = error_from_products(sketch.scaled(), omega, gram_omega)
    if e == 0:
        return estimate
    return replace(estimate, lower=_unscaled_bound(estimate.lower, 2 * e, lower=True),
                   upper=_unscaled_bound(estimate.upper, 2 * e))
