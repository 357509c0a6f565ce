"""The layers of the package: only the bridge (``dasketch/_blocks/``) builds Dask
graphs, the kernels never import Dask, and each layer imports only from itself
and the layers below it (read from the source, so a lazy import inside a
function counts as much as one at the top). Modules stay short and the bridge's
functions simple."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dasketch"
BRIDGE = PACKAGE / "_blocks"
# cluster.py starts and configures clusters (dask.utils, dask.config), building no graph.
# The layers, lowest first: kernels, storage, the bridge. Every other module of the
# package (estimators, entry points, utils) stands above them.
LAYERS = ("kernels", "storage", "_blocks")
# The sketch file format, which importing the bridge does not load.
SKETCH_FORMAT_MODULES = ("dasketch.storage.sketch_files", "dasketch.storage.sketch_io")
GRAPH_MODULES = ("dask.array", "dask.delayed", "dask.highlevelgraph", "dask.base",
                 "dask.blockwise", "dask.graph_manipulation", "dask.bag", "dask.dataframe")


def _dask_uses(path):
    """``(line, what)`` of every Dask module imported or reached as an attribute
    of ``dask`` (``dask.delayed(...)``, ``dask.array.map_blocks``) in a file."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names
                        if alias.name.split(".")[0] == "dask")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dask":
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "dask"):
            yield node.lineno, f"dask.{node.attr}"


def _dasketch_imports(path):
    """``(line, module)`` of every import of a dasketch module in a file."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names
                        if alias.name.split(".")[0] == "dasketch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "dasketch":
            yield node.lineno, node.module


def _rank(module):
    """The layer of a dasketch module: its index in :data:`LAYERS`, or above them
    all (``dasketch`` itself included)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def _builds_graphs(what):
    return any(what == module or what.startswith(module + ".") for module in GRAPH_MODULES)


def _sources(folder):
    return sorted(folder.rglob("*.py"))


def test_only_the_bridge_builds_dask_graphs():
    outside = [path for path in _sources(PACKAGE)
               if BRIDGE not in path.parents and path.name != "cluster.py"]
    assert PACKAGE / "storage" / "reading.py" in outside and len(outside) > 20
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
             for path in outside for line, what in _dask_uses(path) if _builds_graphs(what)]
    assert not found, "Dask graphs built outside dasketch/_blocks/:\n" + "\n".join(found)


def test_kernels_never_import_dask():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
             for path in _sources(PACKAGE / "kernels") for line, what in _dask_uses(path)]
    assert not found, "the kernels import Dask:\n" + "\n".join(found)


@pytest.mark.parametrize("module", ["dasketch.storage.reading", "dasketch.storage.store_checks"])
def test_reading_stores_loads_no_dask(module):
    code = f"import sys, {module}; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.parametrize("layer", LAYERS)
def test_layers_import_only_themselves_and_the_layers_below(layer):
    rank = LAYERS.index(layer)
    sources = _sources(PACKAGE / layer)
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
             for path in sources for line, module in _dasketch_imports(path)
             if _rank(module) > rank]
    assert len(sources) > 5
    assert not found, f"dasketch/{layer}/ imports from layers above it:\n" + "\n".join(found)


@pytest.mark.heavy
def test_importing_the_bridge_loads_no_sketch_file_format():
    code = ("import sys, dasketch._blocks; "
            f"print([m for m in {SKETCH_FORMAT_MODULES!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "[]", out.stderr


SKLEARN_COMPAT = BRIDGE / "sklearn_compat.py"


def _private_sklearn_imports(path):
    """``(line, what)`` of every import of a private scikit-learn name or from a
    private scikit-learn module (a dotted part starting with ``_``) in a file."""
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sklearn":
            private_module = any(part.startswith("_") for part in node.module.split("."))
            yield from ((node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                        if private_module or alias.name.startswith("_"))
        elif isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names
                        if alias.name.split(".")[0] == "sklearn"
                        and any(part.startswith("_") for part in alias.name.split(".")))


def test_private_scikit_learn_names_are_imported_by_the_compatibility_module_only():
    root = PACKAGE.parent
    sources = [path for folder in ("dasketch", "tests", "benchmarks")
               for path in _sources(root / folder) if path != SKLEARN_COMPAT]
    assert PACKAGE / "decomposition" / "_sketch_pca.py" in sources
    found = [f"{path.relative_to(root)}:{line}: {what}"
             for path in sources for line, what in _private_sklearn_imports(path)]
    assert not found, ("private scikit-learn names imported outside "
                       "dasketch/_blocks/sklearn_compat.py:\n" + "\n".join(found))
    assert dict(_private_sklearn_imports(SKLEARN_COMPAT)), "the scan finds nothing"


def test_the_package_reaches_the_bridge_through_its_face():
    """Outside ``dasketch/_blocks/``, the package imports ``dasketch._blocks``
    itself, never its submodules."""
    outside = [path for path in _sources(PACKAGE) if BRIDGE not in path.parents]
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
             for path in outside for line, module in _dasketch_imports(path)
             if module.startswith("dasketch._blocks.")]
    assert not found, "imports past the face of dasketch._blocks:\n" + "\n".join(found)


# What a walk of SketchPCA reaches: its own package, the bridge (whose face serves the
# estimators' validation and parameter rules) and the layers below the bridge.
DECOMPOSITION_LAYERS = ("dasketch.decomposition", "dasketch._blocks", "dasketch.kernels",
                        "dasketch.storage")


def _in_layers(module, layers):
    return any(module == layer or module.startswith(layer + ".") for layer in layers)


def test_decomposition_imports_only_itself_the_bridge_and_the_kernels():
    """``dasketch/decomposition/`` imports from itself, the face of the bridge and
    the kernels: nothing from ``dasketch.utils`` or other modules of the package."""
    sources = _sources(PACKAGE / "decomposition")
    imports = [(path, line, module) for path in sources
               for line, module in _dasketch_imports(path)]
    assert PACKAGE / "decomposition" / "_transposed.py" in sources and len(imports) > 10
    own = ("dasketch.decomposition", "dasketch._blocks", "dasketch.kernels")
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {module}"
             for path, line, module in imports if not _in_layers(module, own)]
    assert not found, "dasketch/decomposition/ imports past its layers:\n" + "\n".join(found)


WALK = """
import sys
import dask.array as da, numpy as np, zarr
import dasketch
before = set(sys.modules)
from dasketch.decomposition import SketchPCA
X = np.random.default_rng(0).standard_normal((300, 6))
store = sys.argv[1]
zarr.create_array(store, shape=X.shape, chunks=(100, 6), dtype=X.dtype)[:] = X
for data in (X, da.from_array(X, chunks=(100, 6)), store):
    pca = SketchPCA(n_components=2, random_state=0).fit(data)
    np.asarray(pca.transform(data)), pca.score(data)
print(" ".join(sorted(m for m in set(sys.modules) - before if m.split(".")[0] == "dasketch")))
"""


@pytest.mark.heavy
def test_a_walk_of_sketch_pca_stays_in_decomposition_and_the_bridge(tmp_path):
    """Fitting SketchPCA (and transforming, scoring) in memory, from a Dask array
    and from a zarr store loads no module of the package but those of
    ``dasketch/decomposition/``, the bridge and the layers below it (not
    ``dasketch.utils``): the modules ``import dasketch`` loaded are its face."""
    out = subprocess.run([sys.executable, "-c", WALK, str(tmp_path / "x.zarr")],
                         capture_output=True, text=True, check=True, cwd=PACKAGE.parent)
    loaded = out.stdout.split()
    assert "dasketch.decomposition._sketch_pca" in loaded and "dasketch._blocks" in loaded
    found = [module for module in loaded if not _in_layers(module, DECOMPOSITION_LAYERS)]
    assert not found, f"a walk of SketchPCA loads {found}"


MAX_MODULE_LINES = 400
MAX_BRIDGE_COMPLEXITY = 12


def test_no_module_exceeds_the_line_limit():
    sources = _sources(PACKAGE)
    lines = {path: len(path.read_text().splitlines()) for path in sources}
    found = [f"{path.relative_to(PACKAGE.parent)}: {n} lines"
             for path, n in lines.items() if n > MAX_MODULE_LINES]
    assert len(sources) > 50
    assert not found, (f"modules over {MAX_MODULE_LINES} lines (split them along a seam "
                       "of meaning, re-exporting the names they held):\n" + "\n".join(found))


def _ruff():
    """The ruff executable of this interpreter's environment, else on the PATH."""
    beside = Path(sys.executable).with_name("ruff")
    return str(beside) if beside.exists() else shutil.which("ruff")


def test_bridge_functions_stay_simple():
    """No function of ``dasketch/_blocks/`` has a McCabe complexity (ruff's C901)
    over :data:`MAX_BRIDGE_COMPLEXITY`."""
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed")
    out = subprocess.run(
        [ruff, "check", "--no-cache", "--isolated", "--select", "C901", "--config",
         f"lint.mccabe.max-complexity={MAX_BRIDGE_COMPLEXITY}", "--output-format",
         "concise", str(BRIDGE)], capture_output=True, text=True)
    assert out.returncode == 0, (f"functions of dasketch/_blocks/ over complexity "
                                 f"{MAX_BRIDGE_COMPLEXITY}:\n{out.stdout}{out.stderr}")
