"""Drop-in stand-ins for scikit-learn estimators, built on dasketch's.

Each shim has the scikit-learn class's name and constructor, so
``get_params``, ``clone``, ``repr`` and ``get_feature_names_out`` behave as the
original's; the parameters that choose scikit-learn's solver are stored and
ignored. The sketch is exact (``sketch_size="exact"``, ``n_features + 1``
rows), so results equal exact PCA's up to rounding and the tests measure
dasketch's estimator, not the approximation of a small sketch.

A shim records that it was fitted (:data:`FITS`), so the report counts only the
tests that reached dasketch.
"""

from dasketch import SketchPCA

FITS = []


class _Counted:
    """Records every fit / partial_fit in :data:`FITS`."""

    def fit(self, X, y=None):
        FITS.append(type(self).__name__)
        return super().fit(X, y)

    def partial_fit(self, X, y=None):
        FITS.append(type(self).__name__)
        return super().partial_fit(X, y)


class PCA(_Counted, SketchPCA):
    """:class:`sklearn.decomposition.PCA` as an exact :class:`dasketch.SketchPCA`
    (``svd_solver``, ``tol``, ``iterated_power``, ``n_oversamples`` and
    ``power_iteration_normalizer`` are ignored; ``copy`` too: X is never
    modified)."""

    sketch_size = "exact"
    method = "rfd"
    split_every = None
    block_rows = None

    def __init__(self, n_components=None, *, copy=True, whiten=False, svd_solver="auto",
                 tol=0.0, iterated_power="auto", n_oversamples=10,
                 power_iteration_normalizer="auto", random_state=None):
        self.n_components = n_components
        self.copy = copy
        self.whiten = whiten
        self.svd_solver = svd_solver
        self.tol = tol
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.power_iteration_normalizer = power_iteration_normalizer
        self.random_state = random_state


class IncrementalPCA(_Counted, SketchPCA):
    """:class:`sklearn.decomposition.IncrementalPCA` as an exact
    :class:`dasketch.SketchPCA`: ``batch_size`` rows per block of :meth:`fit`
    (block sketches merged in a tree), ``copy`` ignored."""

    sketch_size = "exact"
    method = "rfd"
    split_every = None
    random_state = None

    def __init__(self, n_components=None, *, whiten=False, copy=True, batch_size=None):
        self.n_components = n_components
        self.whiten = whiten
        self.copy = copy
        self.batch_size = batch_size

    @property
    def block_rows(self):
        return self.batch_size
