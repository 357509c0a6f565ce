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
        exceptions=[
            (r"^test_pca_svd_solver_auto\[", "skip",
             SOLVER + "which solver svd_solver='auto' picks (_fit_svd_solver)"),
            (r"^test_pca_validation\[(arpack|randomized)-", "skip",
             SOLVER + "the limits arpack and randomized put on n_components"),
            (r"^test_n_components_none\[.*-arpack-", "skip",
             SOLVER + "arpack keeps min(n_samples, n_features) - 1 components"),
            (r"^test_n_components_mle_error\[", "skip",
             SOLVER + "arpack and randomized refuse n_components='mle'"),
            (r"^test_sparse_pca_solver_error\[", "skip",
             SOLVER + "the full and randomized solvers refuse sparse input"),
            (r"^test_pca_(mle_)?array_api_compliance\[|^test_array_api_error", "skip",
             SOLVER + "array API dispatch (torch, CuPy, array_api_strict arrays); "
             "SketchPCA computes with numpy, scipy.sparse and Dask"),
            (r"^test_pca_validation\[auto-3-", "xfail",
             "error message wording: dasketch raises ValueError naming min(n_samples, "
             "n_features), not scikit-learn's text naming svd_solver='full'"),
        ],
    ),
}
