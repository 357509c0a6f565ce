"""Which scikit-learn test files run against which shims, and what they skip.

A suite is one scikit-learn test module, the names it imports that are replaced
by shims (``"module.attribute": "ShimName"`` of :mod:`.shims`), and one table of
exceptions: ``(pattern, kind, reason)`` where ``pattern`` is a regular
expression searched in the test's name (with its parameters), ``kind`` is
``"skip"`` (the test is about another solver's internals: not run) or
``"xfail"`` (a difference forced by dasketch's algorithm or a deliberate
extension, documented in the estimator's docstring: run, and must fail).
Adding a suite (Ridge, LogisticRegression, ...) is one more entry here and a
shim in :mod:`.shims`.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Suite:
    module: str
    replace: dict
    exceptions: list = field(default_factory=list)
    fast: bool = False  # runs in the default test suite


SOLVER = "about another solver's internals: "
SPARSE_PARTIAL_FIT = ("extension: dasketch's partial_fit accepts sparse batches (sketched "
                      "without densifying) where scikit-learn's raises TypeError")
WORDING = ("error message wording: dasketch raises ValueError naming min(n_samples, "
           "n_features), not scikit-learn's IncrementalPCA-specific text")

SUITES = {
    "incremental_pca": Suite(
        module="sklearn.decomposition.tests.test_incremental_pca",
        replace={"sklearn.decomposition.IncrementalPCA": "IncrementalPCA"},
        fast=True,
        exceptions=[
            (r"^test_incremental_pca_sparse\[", "xfail", SPARSE_PARTIAL_FIT),
            (r"^test_incremental_pca_validation$", "xfail", WORDING),
        ],
    ),
    "pca": Suite(
        module="sklearn.decomposition.tests.test_pca",
        replace={"sklearn.decomposition.PCA": "PCA"},
        exceptions=[],
    ),
}
