"""Names moved into smaller modules, and modules moved into packages, stay
importable from the paths that held them, and objects pickled under those paths
load."""

import importlib
import pickle

import numpy as np
import pytest

from dasketch import RFDSONClassifier, RFDSONRegressor, SketchPCA, estimate_error, sketch
from dasketch.linear_model import dual_random_projection, sketch_lstsq, sketch_precondition

# (path users import from, name, module that defines it now)
MOVED = [
    ("dasketch.decomposition", "SketchPCA", "dasketch.decomposition._sketch_pca"),
    ("dasketch.linear_model.lstsq", "SketchLstsqRegressor", "dasketch.linear_model.lstsq"),
    ("dasketch.linear_model.lstsq", "sketch_lstsq", "dasketch.linear_model.lstsq_solver"),
    ("dasketch.linear_model.lstsq", "LstsqResult", "dasketch.linear_model.lstsq_solver"),
    ("dasketch.linear_model.lstsq", "error_bound", "dasketch.linear_model.lstsq_bounds"),
    ("dasketch.linear_model.lstsq_solver", "error_bound", "dasketch.linear_model.lstsq_bounds"),
    ("dasketch.linear_model.lstsq_solver", "_outside_sketch",
     "dasketch.linear_model.lstsq_bounds"),
    ("dasketch.linear_model.lstsq", "solve_lstsq", "dasketch.linear_model.lstsq_solver"),
    ("dasketch.io", "save_sketch", "dasketch.storage.sketch_io"),
    ("dasketch.io", "load_sketch", "dasketch.storage.sketch_io"),
    ("dasketch.store_checks", "store_fingerprint", "dasketch.storage.fingerprints"),
    ("dasketch.store_checks", "stored_keys", "dasketch.storage.fingerprints"),
    ("dasketch.store_checks", "chunk_keys", "dasketch.storage.fingerprints"),
    ("dasketch.store_checks", "missing_chunk_keys", "dasketch.storage.fingerprints"),
    ("dasketch.store_checks", "SHOWN_KEYS", "dasketch.storage.fingerprints"),
    ("dasketch.storage.store_checks", "store_fingerprint", "dasketch.storage.fingerprints"),
    ("dasketch.storage.store_checks", "SHOWN_KEYS", "dasketch.storage.fingerprints"),
    ("dasketch.utils.blockwise", "squared_norms_along", "dasketch.decomposition._variance"),
    ("dasketch.utils.blockwise", "gaussian_log_likelihood",
     "dasketch.decomposition._probabilistic"),
    ("dasketch.utils.blockwise", "affine_rows", "dasketch._blocks.blockwise"),
    ("dasketch._blocks", "affine_rows", "dasketch._blocks.blockwise"),
    ("dasketch._blocks", "validate_input", "dasketch._blocks.validation"),
    ("dasketch._blocks", "as_target_vector", "dasketch._blocks.validation"),
    ("dasketch._blocks", "Interval", "dasketch._blocks.params"),
    ("dasketch._blocks", "BasePCA", "dasketch._blocks.sklearn_compat"),
    ("dasketch._blocks", "RealNotInt", "dasketch._blocks.sklearn_compat"),
    ("dasketch._blocks", "StrOptions", "dasketch._blocks.sklearn_compat"),
    ("dasketch._blocks", "assess_dimension", "dasketch._blocks.sklearn_compat"),
    ("dasketch.sketching", "estimate_error", "dasketch.error_estimate"),
    ("dasketch", "estimate_error", "dasketch.error_estimate"),
    ("dasketch.sketching", "sparse_embed", "dasketch.sparse_embedding"),
    ("dasketch", "sparse_embed", "dasketch.sparse_embedding"),
    ("dasketch.datasets", "ill_conditioned_regression", "dasketch.problems"),
    ("dasketch.datasets", "l1_regression_linprog", "dasketch.problems"),
    ("dasketch.datasets", "imbalanced_sparse_classification", "dasketch.problems"),
    ("dasketch.linear_model.rfd_son", "RFDSONRegressor",
     "dasketch.linear_model.rfd_son_regressor"),
    ("dasketch", "RFDSONRegressor", "dasketch.linear_model.rfd_son_regressor"),
    ("dasketch.linear_model", "RFDSONRegressor", "dasketch.linear_model.rfd_son_regressor"),
    ("dasketch.linear_model.dual_projection.solve", "DualRandomProjectionResult",
     "dasketch.linear_model.dual_projection.result"),
    ("dasketch.linear_model", "DualRandomProjectionResult",
     "dasketch.linear_model.dual_projection.result"),
    ("dasketch.linear_model.dual_projection.solve", "check_weights",
     "dasketch.linear_model.dual_projection.checks"),
]
MOVED += [("dasketch.sketching", name, "dasketch._blocks.blocked_sketch")
          for name in ("SKETCH_UPDATES", "MERGE_VALUES", "RANDOMIZED_WIDTH_RATIO",
                       "RANDOMIZED_BLOCK_NONZEROS", "RANDOMIZED_MAX_BLOCK_ROWS",
                       "WIDE_BLOCK_VALUES", "choose_update", "randomized_block_rows",
                       "default_working_size", "default_split_every")]
MOVED += [("dasketch.linear_model.preconditioning", name, "dasketch.linear_model.preconditioner")
          for name in ("SketchPreconditioner", "leverage_scores", "metric_singular_values",
                       "STREAM_SKETCH", "STREAM_CHECK", "STREAM_LEVERAGE", "STREAM_DRAWS",
                       "_check_int")]
MOVED += [("dasketch.linear_model", name, "dasketch.linear_model.preconditioner")
          for name in ("SketchPreconditioner", "leverage_scores")]
MOVED += [("dasketch.kernels.sparse_fd", name, "dasketch.kernels.certificates")
          for name in ("DEFAULT_FAILURE_PROBABILITY", "LANCZOS_TOLERANCE", "ErrorEstimate",
                       "certified_largest_eigenvalue", "check_failure_probability",
                       "error_from_products", "lanczos_steps", "largest_eigenvalue",
                       "product_rounding")]
MOVED += [("dasketch.kernels.frequent_directions", name, f"dasketch.kernels.{module}")
          for module, names in [
              ("sketch_scaling", ("SAFE_EXPONENT", "block_scale_exponent",
                                  "divide_by_power_of_two", "scaled_block_sketch",
                                  "with_scale_exponent", "_unscaled", "_underflow_rounding")),
              ("sketch_checks", ("check_mergeable", "_merged_norm")),
              ("shrink", ("_squared_norm",)),
              ("shrink_schedule", ("rows_per_shrink",)),
              ("merging", ("merge_sketches",)),
          ] for name in names]
MOVED += [("dasketch.kernels.shrink", name, "dasketch.kernels.shrink_schedule")
          for name in ("SHRINK_UPDATES", "rows_per_shrink", "_shrink_flops",
                       "_CALL_OVERHEAD_FLOPS", "_EIGH_FLOPS", "_FLOPS_PER_VALUE_READ",
                       "_CHUNK_SLACK", "_WIDE_CHUNK_SLACK")]
MOVED += [(old, "merge_sketches", "dasketch.kernels.merging")
          for old in ("dasketch", "dasketch.kernels")]
MOVED += [("dasketch.kernels._online_newton_loop", name, "dasketch.kernels._online_newton_sketch")
          for name in ("RCOND", "BASIS_TOL", "T", "SHRINKAGE", "TRACE", "GRAD_MAX", "ROW_MAX",
                       "FLOOR", "INV_ALPHA", "TOP", "V_NORM_SQ", "N_FLOAT_STATE", "N_ROWS",
                       "RANK", "HAS_INVERSE", "FACTORED", "N_EIG", "N_SHRINKS", "N_INT_STATE",
                       "ALPHA0", "BOUND", "ETA", "MU", "N_FLOAT_PARAMS", "SKETCH_SIZE",
                       "CAPACITY", "LOSS", "METHOD", "USE_FLOOR", "N_INT_PARAMS",
                       "METHOD_CODES", "_RFD", "_FULL", "current_alpha",
                       "add_basis_combination", "rebuild_inverse", "shrink", "append",
                       "update_floor")]
MOVED += [("dasketch.linear_model.pwsgd", "check_bounds", "dasketch.linear_model._pwsgd_setup"),
          ("dasketch.linear_model.pwsgd", "STREAM_DRAWS", "dasketch.linear_model.preconditioner")]

# (module path users import from, the modules that define its names now)
MOVED_MODULES = [
    ("dasketch.io", ("dasketch.storage.reading", "dasketch.storage.sketch_io")),
    ("dasketch.store_checks", ("dasketch.storage.store_checks",)),
    ("dasketch._fingerprints", ("dasketch.storage.fingerprints",)),
    ("dasketch.outputs", ("dasketch.storage.outputs",)),
    ("dasketch.sketch_io", ("dasketch.storage.sketch_io",)),
    ("dasketch._sketch_files", ("dasketch.storage.sketch_files",)),
    ("dasketch._transposed_pca", ("dasketch.decomposition._transposed",)),
    ("dasketch._pca_variance", ("dasketch.decomposition._variance",)),
    ("dasketch._pca_scaling", ("dasketch.decomposition._scaling",)),
    ("dasketch.sketch_memory", ("dasketch._blocks.task_memory",)),
    ("dasketch.utils.validation", ("dasketch._blocks.validation",)),
    ("dasketch.utils.params", ("dasketch._blocks.params",)),
    ("dasketch.utils._sklearn_compat", ("dasketch._blocks.sklearn_compat",)),
    ("dasketch.utils.blockwise", ("dasketch._blocks.blockwise", "dasketch.decomposition._variance",
                                  "dasketch.decomposition._probabilistic")),
]

# (path imported from, name there, module that defines it now, its name there)
RENAMED = [("dasketch._blocks.inputs", old, f"dasketch._blocks.readers.{module}", new)
           for old, module, new in [
               ("_check_shape", "options", "check_shape"),
               ("_check_dtype", "options", "check_dtype"),
               ("_check_block_rows", "options", "check_block_rows"),
               ("_block_rows", "options", "dense_block_rows"),
               ("_sparse_block_rows", "options", "sparse_block_rows"),
               ("_csr_block_bytes", "options", "csr_block_bytes"),
               ("_in_memory_row_blocks", "in_memory", "in_memory_row_blocks"),
               ("_is_zarr_array", "zarr_stores", "is_zarr_array"),
               ("_is_zip_store", "zarr_stores", "is_zip_store"),
               ("_open_zip_array", "zarr_stores", "open_zip_array"),
           ]]
RENAMED += [("dasketch._blocks.row_blocks", "_transformed", "dasketch._blocks",
             "transformed_blocks"),
            ("dasketch.sketching", "dense_block_rows", "dasketch._blocks.blocked_sketch",
             "sketch_dense_block_rows")]


@pytest.mark.parametrize("old,name,new", MOVED, ids=[f"{o}.{n}" for o, n, _ in MOVED])
def test_moved_names_are_importable_from_their_old_module(old, name, new):
    assert getattr(importlib.import_module(old), name) is \
        getattr(importlib.import_module(new), name)


@pytest.mark.parametrize("old,homes", MOVED_MODULES, ids=[o for o, _ in MOVED_MODULES])
def test_moved_modules_serve_every_name_under_their_old_path(old, homes):
    """Every name of the modules a path's contents moved to is served under the
    path (the first module holding a name wins), and a pickle naming a class by
    the old path loads as the class."""
    module, seen = importlib.import_module(old), set()
    for home in homes:
        names = {n: v for n, v in vars(importlib.import_module(home)).items()
                 if not n.startswith("__") and n not in seen}
        seen.update(names)
        for name, value in names.items():
            assert getattr(module, name) is value, name
        classes = [v for v in names.values() if isinstance(v, type) and v.__module__ == home]
        for cls in classes:
            data = pickle.dumps(cls, protocol=2)
            here = f"c{home}\n{cls.__qualname__}\n".encode()
            assert here in data
            assert pickle.loads(data.replace(here, f"c{old}\n{cls.__qualname__}\n".encode())) \
                is cls
    assert len(seen) > 5
    assert not hasattr(module, "no_such_name")


@pytest.mark.parametrize("old,old_name,new,new_name", RENAMED,
                         ids=[f"{o}.{n}" for o, n, _, _ in RENAMED])
def test_renamed_names_are_importable_under_their_old_name(old, old_name, new, new_name):
    assert getattr(importlib.import_module(old), old_name) is \
        getattr(importlib.import_module(new), new_name)


@pytest.mark.parametrize("path,make", [
    ("dasketch.decomposition.SketchPCA", lambda X, y: SketchPCA(n_components=2).fit(X)),
    ("dasketch.linear_model.lstsq.LstsqResult",
     lambda X, y: sketch_lstsq(X, y, random_state=0)),
    ("dasketch.linear_model.rfd_son.RFDSONClassifier",
     lambda X, y: RFDSONClassifier(sketch_size=3).fit(X, y > 0)),
    ("dasketch.linear_model.rfd_son.RFDSONRegressor",
     lambda X, y: RFDSONRegressor(sketch_size=3).fit(X, y)),
    ("dasketch.linear_model.dual_projection.solve.DualRandomProjectionResult",
     lambda X, y: dual_random_projection(X, y, random_state=0)),
    ("dasketch.linear_model.preconditioning.SketchPreconditioner",
     lambda X, y: sketch_precondition(X, random_state=0)),
    ("dasketch.kernels.sparse_fd.ErrorEstimate",
     lambda X, y: estimate_error(X, sketch(X, sketch_size=3), n_vectors=3, random_state=0)),
])
def test_a_pickle_naming_the_old_path_loads(path, make):
    """A pickle written when the class lived at ``path`` (its reference rewritten to
    that path in protocol 2, whose GLOBAL opcode names it in plain text) loads as
    the class."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200, 5))
    obj = make(X, X @ np.arange(5.0))
    cls = type(obj)
    data = pickle.dumps(obj, protocol=2)
    here = f"c{cls.__module__}\n{cls.__qualname__}\n".encode()
    assert here in data
    module, name = path.rsplit(".", 1)
    loaded = pickle.loads(data.replace(here, f"c{module}\n{name}\n".encode()))
    assert type(loaded) is cls
    if hasattr(obj, "components_"):
        np.testing.assert_array_equal(loaded.transform(X), obj.transform(X))
    elif hasattr(obj, "predict"):
        np.testing.assert_array_equal(loaded.predict(X), obj.predict(X))
    else:
        field = next(f for f in ("x", "coef", "R", "upper") if hasattr(obj, f))
        np.testing.assert_array_equal(getattr(loaded, field), getattr(obj, field))
