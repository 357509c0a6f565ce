"""The exact Frequent Directions update of dense rows on any array library.

The rows stay in their own array namespace ``xp`` (an implementation of the
Python array API standard: numpy, CuPy through ``array_api_compat``, ...). The
Gram matrix of each chunk, its symmetric eigendecomposition and the shrink run
there; only the sketch (at most ``l - 1`` rows and a few scalars) comes back to
the host, as numpy, through the ``to_host`` function the caller passes.

It follows :func:`~dasketch.kernels.frequent_directions.sketch_rows`: the same
chunks (:func:`~dasketch.kernels.shrink_schedule.rows_per_shrink`), the same
shrink from the smaller Gram matrix (Liberty, KDD 2013; Luo, Chen, Zhang, Li,
Zhang, JMLR 20(45) 2019, Algorithm 2), the same power-of-two
scaling of blocks with huge or tiny entries
(:func:`~dasketch.kernels.sketch_scaling.block_scale_exponent`) and the same
certificate terms (:func:`~dasketch.kernels.shrink.shrink_rounding`,
:func:`~dasketch.kernels.sketch_checks.centring_rounding`). Its sketch equals
the numpy path's to rounding, not bit for bit (other products, another
eigensolver). What only scipy offers stays on the numpy path: LAPACK's
fallback eigensolvers and the diagonal Gram of an orthogonal top. The
namespace needs the standard's ``linalg`` extension (``eigh``, ``svd``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import partial

import numpy as np

from dasketch.kernels.frequent_directions import Sketch
from dasketch.kernels.shrink import (
    GRAM_FLOOR,
    NonFiniteError,
    _positive_largest_entries,
    check_finite_rows,
    rows_per_shrink,
    shrink_rounding,
)
from dasketch.kernels.sketch_checks import centring_rounding, check_sketch_parameters
from dasketch.kernels.sketch_scaling import (
    largest_entry_exponent,
    scaled_block_sketch,
    unit_scale_from_mass,
)


def sketch_dense_rows(rows, sketch_size, *, xp, to_host, method="rfd", alpha0=0.0,
                      center=False, update="auto", row_offset=0):
    """Sketch one block of dense rows in its own array namespace.

    Parameters
    ----------
    rows : array of shape (b, d)
        Real rows of the namespace ``xp``.
    sketch_size : int
        ``l >= 2``.
    xp : module
        The array namespace of ``rows`` (array API standard, with ``linalg``).
    to_host : callable
        ``to_host(array)``: the numpy ndarray of an array of ``xp``.
    method, alpha0, center, update, row_offset
        As for :func:`~dasketch.kernels.frequent_directions.sketch_rows`.

    Returns
    -------
    Sketch
        On the host (numpy ``B`` and ``mean``), with ``scale_exponent`` that of
        :func:`~dasketch.kernels.sketch_scaling.block_scale_exponent`.
    """
    check_sketch_parameters(sketch_size, method, alpha0)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {rows.shape}")
    n_rows, d = rows.shape
    result = Sketch.empty(d, sketch_size, method=method, alpha0=alpha0, center=center)
    if n_rows == 0 or d == 0:
        return result
    absorb = partial(_absorb_on, xp, rows, sketch_size, update=update, to_host=to_host)
    if not center:
        # Almost every block is sketched at scale 1: that is read off the sum of
        # squares the shrinks compute anyway (as on the numpy path), rather than off
        # a pass for the largest entry; a block beyond the safe range (or holding
        # NaN or Inf, named below) is sketched again.
        try:
            with np.errstate(over="ignore", invalid="ignore"):  # numpy-backed namespaces
                absorbed = absorb(0, None)
        except NonFiniteError:
            absorbed = None
        if absorbed is not None and unit_scale_from_mass(absorbed[3], n_rows * d, alpha0):
            return _block_sketch(result, n_rows, *absorbed)
    # The largest magnitude without a |rows| temporary.
    exponent = largest_entry_exponent(max(float(xp.max(rows)), -float(xp.min(rows))),
                                      alpha0)
    mean = None
    if center:
        mean = xp.mean(_chunk_on(xp, rows, 0, n_rows, exponent, None), axis=0)
    try:
        absorbed = absorb(exponent, mean)
    except NonFiniteError:
        check_finite_rows(to_host(rows), row_offset)  # names the rows, then raises
        raise
    block = _block_sketch(result, n_rows, *absorbed)
    if mean is not None:
        mean = np.asarray(to_host(mean), dtype=np.float64)
        block = replace(block, mean=mean, rounding=block.rounding + centring_rounding(
            n_rows, block.frobenius_sq, mean))
    return scaled_block_sketch(block, exponent, rows) if exponent else block


def _chunk_on(xp, rows, start, stop, exponent, mean):
    """Rows ``start:stop`` in float64, multiplied by ``2**-exponent`` and centred
    on ``mean`` (when given)."""
    chunk = times_power_of_two(xp, xp.astype(rows[start:stop, :], xp.float64, copy=False),
                               -exponent)
    return chunk if mean is None else chunk - mean


def _absorb_on(xp, rows, sketch_size, exponent, mean, *, update, to_host):
    """The shrinks over a nonempty block of ``rows`` at scale ``2**-exponent``,
    centred on ``mean`` when given: ``(B, shrinkage, rounding, frobenius_sq,
    shrunk)``, ``B`` on the host.

    Raises
    ------
    NonFiniteError
        When a stack's sum of squares is not finite (``NaN`` or ``Inf`` in the
        rows, or a Gram beyond float64's range).
    """
    n_rows, d = rows.shape
    step = rows_per_shrink(n_rows, d, sketch_size, update=update)
    B = xp.zeros((0, d), dtype=xp.float64)
    shrinkage = rounding = frobenius_sq = 0.0
    start, shrunk = 0, False
    while start < n_rows:
        if update == "buffered":  # Algorithm 5's buffer of 2 l rows
            step = 2 * sketch_size - B.shape[0]
        n_stack = B.shape[0] + min(step, n_rows - start)
        top_norm = float(xp.sum(B * B)) if n_stack >= sketch_size else 0.0
        chunk = _chunk_on(xp, rows, start, min(start + step, n_rows), exponent, mean)
        B, delta, chunk_norm = shrink_on(xp, B, chunk, sketch_size)
        start += step
        frobenius_sq += chunk_norm
        shrinkage += delta
        if n_stack >= sketch_size:
            rounding += shrink_rounding(n_stack, d, top_norm + chunk_norm)
        shrunk = n_stack >= sketch_size
    B = np.ascontiguousarray(to_host(B), dtype=np.float64)
    if shrunk:  # the signs of a shrink's rows, as the numpy path chooses them
        B = _positive_largest_entries(B)
    return B, shrinkage, rounding, frobenius_sq, shrunk


def _block_sketch(empty, n_rows, B, shrinkage, rounding, frobenius_sq, shrunk):
    """The block's sketch: ``empty`` with the shrinks' results (no mean yet)."""
    return replace(empty, B=B, shrinkage=shrinkage, n_rows=n_rows, mean=None,
                   frobenius_sq=frobenius_sq, rounding=rounding, _svd=[])


def shrink_on(xp, top, extra, sketch_size):
    """FD's shrink of the stack ``[top; extra]`` in the namespace ``xp``.

    As :func:`~dasketch.kernels.shrink.shrink`: ``C = U S V^T``, ``delta =
    s_l^2``, ``B = sqrt(max(s_i^2 - delta, 0)) v_i^T`` for ``i < l`` (Liberty 2013), from
    the eigendecomposition of ``C C^T`` when the stack has at most ``d`` rows,
    of ``C^T C`` otherwise; a stack of fewer than ``l`` rows is returned as it
    is. When nothing is shrunk away (``l > d``) and the Gram's condition exceeds
    ``1 / GRAM_FLOOR``, the rows are the stack's own ``S V^T``.

    Returns
    -------
    B : array of ``xp``, delta : float, extra_norm : float
        ``extra_norm`` is ``||extra||_F^2``.

    Raises
    ------
    NonFiniteError
        If the stack holds NaN or Inf.
    """
    n_top, d = top.shape[0], extra.shape[1]
    n_stack, keep = n_top + extra.shape[0], sketch_size - 1
    if n_stack < sketch_size:
        extra_norm = _finite_sum(xp, extra * extra)
        return xp.concat([top, extra], axis=0), 0.0, extra_norm
    if n_stack <= d:  # row side: eigendecomposition of C C^T
        stack = xp.concat([top, extra], axis=0)
        gram = stack @ stack.T
        extra_norm = _finite_sum(xp, xp.linalg.diagonal(gram)[n_top:])
        values, vectors = _descending_eigh(xp, gram)
        delta = float(values[keep])
        kept = int(xp.count_nonzero(values[:keep] > delta))  # a prefix: values descend
        weights = xp.sqrt(1.0 - delta / values[:kept])
        return (vectors[:, :kept] * weights).T @ stack, delta, extra_norm
    inner = extra.T @ extra  # column side: eigendecomposition of C^T C
    extra_norm = _finite_sum(xp, xp.linalg.diagonal(inner))
    values, vectors = _descending_eigh(xp, top.T @ top + inner)
    delta = float(values[keep]) if keep < d else 0.0
    lead = values[:min(keep, d)] - delta
    if keep >= d and float(values[-1]) < GRAM_FLOOR * float(values[0]):
        # Nothing is shrunk away, and the Gram has lost the small singular values'
        # relative accuracy: the rows come from the stack's own SVD.
        _, singular, Vt = xp.linalg.svd(xp.concat([top, extra], axis=0),
                                        full_matrices=False)
        kept = int(xp.count_nonzero(singular > 0))
        return xp.expand_dims(singular[:kept], axis=1) * Vt[:kept, :], delta, extra_norm
    kept = int(xp.count_nonzero(lead > 0))
    new = xp.expand_dims(xp.sqrt(lead[:kept]), axis=1) * vectors[:, :kept].T
    return new, delta, extra_norm


def _descending_eigh(xp, gram):
    """Eigenvalues (descending, negatives from rounding clamped to 0) and
    eigenvectors of the symmetric Gram matrix ``gram``."""
    values, vectors = xp.linalg.eigh(gram)
    return xp.clip(xp.flip(values), min=0.0), xp.flip(vectors, axis=1)


def _finite_sum(xp, squares):
    """``sum(squares)`` as a float; NaN or Inf in the stack shows in it."""
    total = float(xp.sum(squares))
    if not math.isfinite(total):
        raise NonFiniteError("the stack holds NaN or Inf")
    return total


def times_power_of_two(xp, values, exponent):
    """``values * 2**exponent``: exact but for entries pushed below float64's
    smallest subnormal (counted by ``scaled_block_sketch``). Two factors, as
    ``2**exponent`` alone may be beyond float64 when ``exponent`` is near 1074."""
    if not exponent:
        return values
    half = exponent // 2
    return values * (2.0 ** half) * (2.0 ** (exponent - half))
