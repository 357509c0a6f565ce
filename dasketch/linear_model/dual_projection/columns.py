"""Fit on the features that some sample uses, the others' coefficients being 0.

A column of X that is zero in every row enters the objective only through the
penalty, whose minimum over that coefficient alone is at 0 (l2, l1 and elastic
net alike, with or without ``positive``; without a penalty the iterations start
at 0 and move within the row space of X, so they keep it there). The solution
restricted to the other columns is therefore the solution of the problem
without the empty ones, with the same objective, gradient norm and duality gap,
and the coefficient error bound holds unchanged. Hashed text is the common case
(``HashingVectorizer`` gives ``2**20`` columns of which a corpus uses a small
part): the projection, the ``d x m`` products of the preconditioner and every
update of the coefficients then cost the used columns only.

Only scipy.sparse input is inspected: its column counts come from the index
arrays at no pass over the data, where a dense or out-of-core X would need one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import scipy.sparse


def used_columns(X):
    """The indices of the columns of a scipy.sparse ``X`` that store an entry,
    or None when ``X`` is not scipy.sparse, or every column or none stores one."""
    if not scipy.sparse.issparse(X) or X.ndim != 2:
        return None
    if X.format == "csc":
        counts = np.diff(X.indptr)
    else:
        counts = np.bincount(X.tocsr().indices, minlength=X.shape[1])
    used = np.flatnonzero(counts)
    return used if 0 < used.size < X.shape[1] else None


def _widen(coef, used, n_features):
    """``coef`` (..., len(used)) placed in the columns ``used`` of zeros
    (..., n_features); NaN everywhere when ``coef`` is all NaN (not computed)."""
    coef = np.asarray(coef)
    fill = np.nan if coef.size and np.isnan(coef).all() else 0.0
    out = np.full(coef.shape[:-1] + (n_features,), fill, dtype=coef.dtype)
    out[..., used] = coef
    return out


def select_used_columns(X):
    """``(X, used)``: a scipy.sparse ``X`` on the columns it uses (one copy of
    them) and ``used = (their indices, the number of columns)`` for
    :func:`widened`; any other ``X`` as it is, with ``used = None``."""
    columns = used_columns(X)
    if columns is None:
        return X, None
    return X.tocsr()[:, columns], (columns, X.shape[1])


def widened(result, used):
    """The :class:`~.result.DualRandomProjectionResult` of a fit on the used
    columns, with its coefficients over all columns (0 on the others)."""
    if used is None:
        return result
    columns, n_features = used
    return dataclasses.replace(result, coef=_widen(result.coef, columns, n_features),
                               naive_coef=_widen(result.naive_coef, columns, n_features))
