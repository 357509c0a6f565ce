"""The layers of the package: only the bridge (``dasketch/_blocks/``) builds Dask
graphs, and the kernels never import Dask (read from the source, so a lazy
import inside a function counts as much as one at the top)."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dasketch"
BRIDGE = PACKAGE / "_blocks"
# cluster.py starts and configures clusters (dask.utils, dask.config), building no graph.
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


def _builds_graphs(what):
    return any(what == module or what.startswith(module + ".") for module in GRAPH_MODULES)


def _sources(folder):
    return sorted(folder.rglob("*.py"))


def test_only_the_bridge_builds_dask_graphs():
    outside = [path for path in _sources(PACKAGE)
               if BRIDGE not in path.parents and path.name != "cluster.py"]
    assert PACKAGE / "io.py" in outside and len(outside) > 20
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
             for path in outside for line, what in _dask_uses(path) if _builds_graphs(what)]
    assert not found, "Dask graphs built outside dasketch/_blocks/:\n" + "\n".join(found)


def test_kernels_never_import_dask():
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
             for path in _sources(PACKAGE / "kernels") for line, what in _dask_uses(path)]
    assert not found, "the kernels import Dask:\n" + "\n".join(found)


@pytest.mark.parametrize("module", ["dasketch.io", "dasketch.store_checks"])
def test_reading_stores_loads_no_dask(module):
    code = f"import sys, {module}; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=PACKAGE.parent)
    assert out.stdout.strip() == "False", out.stderr


SKLEARN_COMPAT = PACKAGE / "utils" / "_sklearn_compat.py"


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
                       "dasketch/utils/_sklearn_compat.py:\n" + "\n".join(found))
    assert dict(_private_sklearn_imports(SKLEARN_COMPAT)), "the scan finds nothing"
