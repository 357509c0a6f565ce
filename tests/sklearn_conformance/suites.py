"""Which scikit-learn (and dask-ml) test files run against which shims, and what they skip.

A suite is one test module, the names it imports that are replaced by shims
(``"module.attribute": "ShimName"`` of :mod:`.shims`, or of the suite's
``shims`` module), and one table of
exceptions: ``(pattern, kind, reason)`` where ``pattern`` is a regular
expression searched in the test's name (with its parameters), ``kind`` is
``"skip"`` (the test is about another solver's internals, or a feature
dasketch does not have: not run) or ``"xfail"``
(a difference forced by dasketch's algorithm or a deliberate extension,
documented in the estimator's docstring or README.md: run, and must fail).
A suite may set how many of its tests must reach dasketch (``min_reach``) and
pass (``min_pass_rate``, of those that reach it). Adding a suite is one more
entry here and a shim in :mod:`.shims`.

scikit-learn installs its test files; dask-ml's wheel and sdist carry none, so
a dask-ml suite reads its test file from ``vendor/`` (dask-ml's ``tests/conftest.py``
and the test file, unchanged, at the tag its directory names), or from a checkout
of dask-ml's repository named by ``DASKETCH_DASK_ML_SOURCE`` (:meth:`Suite.location`).
"""

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Suite:
    module: str
    replace: dict
    exceptions: list = field(default_factory=list)
    fast: bool = False  # runs in the default test suite
    min_reach: float = 0.5  # at least this fraction of the tests fit a shim
    min_pass_rate: float = 0.0  # of the tests that fit a shim (runner.SuiteResult.pass_rate)
    shims: str = "tests.sklearn_conformance.shims"  # the module holding the shims
    library: str = "sklearn"  # the library whose tests these are
    # where the library installs no tests: the environment variable naming a
    # checkout of its repository, ``module`` being a path in it
    source_env: str | None = None
    # ... and, when it is unset, the copy of the library's test files in the repository
    vendored: str | None = None

    @property
    def title(self):
        """The test file's name, as README.md's table shows it."""
        return Path(self.module.replace(".", "/")).name + ".py" if self.source_env is None \
            else Path(self.module).name

    def location(self):
        """``(test file, pytest's root directory)``; ``(None, why)`` where the test
        file is not on this machine."""
        if importlib.util.find_spec(self.library) is None:
            return None, f"{self.library} is not installed"
        root = Path(importlib.util.find_spec(self.library).origin).parent
        if self.source_env is None:
            return Path(importlib.util.find_spec(self.module).origin), root
        version = importlib.import_module(self.library).__version__
        source = os.environ.get(self.source_env) or (
            self.vendored and str(Path(__file__).resolve().parents[2] / self.vendored))
        if not source or not (Path(source) / self.module).is_file():
            return None, (f"{self.library}'s wheel and sdist carry no tests: set "
                          f"{self.source_env} to a checkout of its repository at the tag "
                          f"of the installed version, v{version} ({self.module} in it)")
        return Path(source) / self.module, Path(source)


SOLVER = "about another solver's internals: "
SPARSE_PARTIAL_FIT = ("extension: dasketch's partial_fit accepts sparse batches (sketched "
                      "without densifying) where scikit-learn's raises TypeError")
WORDING = ("error message wording: dasketch raises ValueError naming min(n_samples, "
           "n_features), not scikit-learn's IncrementalPCA-specific text")

SUITES = {
    "incremental_pca": Suite(
        module="sklearn.decomposition.tests.test_incremental_pca",
        replace={"sklearn.decomposition.IncrementalPCA": "IncrementalPCA"},
        fast=False,  # run by .ci/run's slow step
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

# Shared by the linear-model suites.
ARRAY_API = (r"array_api|^test_array_api_", "skip",
             SOLVER + "array API dispatch (torch, CuPy, array_api_strict arrays); dasketch "
             "computes with numpy, scipy.sparse and Dask")
POSITIVE = (SOLVER + "which solvers refuse positive=True, and what lbfgs does at "
            "max_iter=1 (the shim ignores solver and max_iter: positive=True is fitted "
            "by dasketch's projected Newton method)")

SUITES.update({
    "ridge": Suite(
        module="sklearn.linear_model.tests.test_ridge",
        min_pass_rate=0.95,  # at least 95 % of the tests reaching dasketch pass
        replace={"sklearn.linear_model.Ridge": "Ridge",
                 "sklearn.linear_model.RidgeClassifier": "RidgeClassifier"},
        min_reach=0.3,   # most of the others test RidgeCV / RidgeClassifierCV or array API
        exceptions=[
            ARRAY_API,
            (r"^test_ridge_positive_error_test\[|^test_lbfgs_solver_error$", "skip",
             POSITIVE),
            (r"^test_ridge_fit_intercept_sparse_error\[", "skip",
             SOLVER + "which solvers refuse sparse X with an intercept"),
            (r"^test_ridge_fit_intercept_sparse_sag\[", "skip",
             SOLVER + "sag's warning that it needs more iterations on sparse X"),
            (r"^test_n_iter$", "skip",
             SOLVER + "n_iter_ of sag, saga and lsqr at a given max_iter (None for the others)"),
            (r"^test_ridge_individual_penalties$", "xfail",
             "alpha per target 0 for some targets only (0, 1, 2, 3, 4 here): dasketch "
             "raises ValueError, the unpenalised targets being solved by another method "
             "(sketch-preconditioned LSQR) to be fitted separately; scikit-learn's "
             "Ridge fits them together"),
            (r"^test_ridgeclassifier_multilabel\[RidgeClassifier-", "xfail",
             "multilabel y (a 2-D indicator matrix): DualRandomProjectionClassifier takes "
             "one label per sample and raises ValueError"),
            (r"^test_regularization_limits_ridge\[.*-wide-.*zero_alpha\]", "xfail",
             "alpha=1e-16 on wide X: the strong-convexity certificate ||grad F|| / alpha is "
             "vacuous (about 1e7), so DRP raises ConvergenceWarning, and its coefficients "
             "are off the minimum-norm limit the test expects (rounding in the null space "
             "of X is amplified by 1 / alpha)"),
        ],
    ),
    "logistic": Suite(
        module="sklearn.linear_model.tests.test_logistic",
        min_reach=0.12,   # 390 of its 688 tests are array API ones
        min_pass_rate=0.9,  # issue 22: at least 90 % of the tests reaching dasketch
        replace={"sklearn.linear_model.LogisticRegression": "LogisticRegression"},
        exceptions=[
            ARRAY_API,
            (r"^test_logreg_predict_proba_multinomial\[", "skip",
             SOLVER + "compares predict_proba with scikit-learn's private one-vs-rest "
             "probabilities (_predict_proba_lr), which the shim does not have"),
            (r"^test_logistic_cv_multinomial_score\[neg_log_loss-", "skip",
             SOLVER + "compares the multinomial log loss with lbfgs's at its default tol=1e-4 "
             "to 6 decimals; lbfgs's is 3.3e-4 from the optimum's, dasketch's matches "
             "newton-cg's at tol=1e-14"),
            (r"^test_max_iter\[|^test_zero_max_iter\[|"
             r"^test_warm_start\[\d+-(True|False)-False-", "skip",
             SOLVER + "what lbfgs, newton-cg, sag and liblinear do at a given max_iter or "
             "without a warm start (the shim ignores max_iter and warm_start, and certifies "
             "tol=1e-10)"),
            (r"^test_check_solver_option\[LogisticRegression\]|^test_liblinear_dual_random_state"
             r"\[|^test_dtype_match\[.*-liblinear\]|^test_large_sparse_matrix\[.*-(liblinear|"
             r"sag|saga)\]|^test_liblinear_with_large_values$|"
             r"^test_newton_cholesky_fallback_to_lbfgs$|"
             r"^test_liblinear_multiclass_raises\[LogisticRegression\]", "skip",
             SOLVER + "liblinear, sag, saga or newton-cholesky: the options and inputs they "
             "refuse, liblinear's float64 output and dual random state, fallbacks"),
            (r"^test_logistic_cv\[", "skip",
             SOLVER + "compares with liblinear's solution at its default tol=1e-4 to 6 "
             "decimals; liblinear's is 1.6e-5 from the optimum, dasketch's 5e-15"),
            (r"^test_lr_penalty_l1ratio_incompatible\[|^test_l1_ratio_non_elasticnet$|"
             r"^test_penalty_deprecated\[LogisticRegression\]|^test_l1_ratio_None_deprecated$|"
             r"^test_logisticregression_warns_with_n_jobs$", "skip",
             SOLVER + "scikit-learn's deprecation and incompatibility warnings for penalty, "
             "l1_ratio and n_jobs (the shim resolves penalty and l1_ratio as scikit-learn "
             "does, without these warnings, and ignores n_jobs)"),
            (r"^test_logistic_regression_callback", "skip",
             SOLVER + "scikit-learn's experimental callback API (set_callbacks)"),
        ],
    ),
    "linear_regression": Suite(
        module="sklearn.linear_model.tests.test_base",
        fast=False,  # 4 to 17 s on 2 cores: run by .ci/run's slow step
        min_reach=0.45,   # the others test _preprocess_data and other helpers
        min_pass_rate=0.9,  # issue 22: at least 90 % of the tests reaching dasketch
        replace={"sklearn.linear_model.LinearRegression": "LinearRegression"},
        exceptions=[
            ARRAY_API,
            (r"^test_raises_value_error_if_positive_and_sparse$", "xfail",
             "extension: dasketch fits positive=True on sparse X (projected Newton on "
             "products with the sparse X) where scikit-learn's nnls raises TypeError"),
            (r"^test_inplace_data_preprocessing\[.*-None\]", "xfail",
             "copy_X=False: dasketch never modifies X, where scikit-learn centres a dense X "
             "in place and the test checks that it did (its checks that X, y and the "
             "weights are left unchanged pass)"),
        ],
    ),
    "coordinate_descent": Suite(
        module="sklearn.linear_model.tests.test_coordinate_descent",
        min_reach=0.25,   # most of the others test the path functions and the CV classes
        min_pass_rate=0.96,  # 75 of the 78 tests reaching dasketch pass
        replace={"sklearn.linear_model.Lasso": "Lasso",
                 "sklearn.linear_model.ElasticNet": "ElasticNet"},
        exceptions=[
            (r"^test_warm_start_convergence|^test_overridden_gram_matrix$|"
             r"^test_elasticnet_precompute_incorrect_gram$|^test_check_input_false$|"
             r"^test_enet_copy_X_False_check_input_False$|"
             r"^test_enet_coordinate_descent_raises_convergence", "skip",
             SOLVER + "coordinate descent's warm_start, precompute (Gram), check_input and "
             "copy_X options and its own convergence warning, which the shim ignores"),
            (r"^test_lasso_dual_gap$", "xfail",
             "dual_gap_ is dasketch's certified duality gap (its own dual point, plus the "
             "rounding of its evaluation), not scikit-learn's formula at the same point; "
             "both are below 1e-10 of the objective there and differ relatively"),
            (r"^test_enet_nonfinite_params$", "xfail",
             "error message wording: dasketch raises ValueError naming X (values so large "
             "that their projection overflows), not coordinate descent's message"),
            (r"^test_lasso_alpha_warning$", "xfail",
             "extension: alpha=0 is solved (unpenalised least squares by sketch-"
             "preconditioned LSQR), so no warning advises LinearRegression"),
        ],
    ),
})

SUITES["dask_ml_glm"] = Suite(
    module="tests/linear_model/test_glm.py",
    library="dask_ml",
    source_env="DASKETCH_DASK_ML_SOURCE",
    vendored="vendor/dask-ml-v2025.1.0",
    shims="tests.sklearn_conformance.dask_ml_shims",
    fast=False,
    # the others construct estimators only, test add_intercept, or are skipped by dask-ml
    min_reach=0.45,
    min_pass_rate=0.9,
    replace={f"dask_ml.linear_model.{name}": name
             for name in ("LogisticRegression", "LinearRegression", "PoissonRegression")},
    exceptions=[
        (r"^test_poisson_fit\[|^test_model_coef_dask_numpy\[PoissonRegression-", "skip",
         "out of dasketch's scope: a Poisson loss (the PoissonRegression shim refuses to fit)"),
        (r"^test_dataframe_warns_about_chunks\[", "xfail",
         "extension: dasketch fits Dask DataFrames (their partitions as row blocks) where "
         "dask-ml raises TypeError asking for dask arrays"),
    ],
)
