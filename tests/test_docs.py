"""Every public function and estimator documents itself with a runnable example,
passes numpydoc's validation, and states rules rather than figures of runs."""

import ast
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

import dasketch
import dasketch.linear_model

PUBLIC = [(module, name) for module in (dasketch, dasketch.linear_model)
          for name in module.__all__]


@pytest.mark.parametrize("module,name", PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_api_has_numpydoc_with_example(module, name):
    doc = inspect.getdoc(getattr(module, name)) or ""
    assert "Examples\n--------" in doc and ">>> " in doc, f"{name} has no Examples section"
    assert len(doc.splitlines()[0]) > 10, f"{name} has no summary line"


# -- numpydoc validation and docstrings that state rules ----------------------------
ROOT = Path(__file__).resolve().parents[1]


def _validator():
    """docs/validate_docstrings.py as a module (it is a script, not a package)."""
    try:
        import numpydoc  # noqa: F401
    except ImportError:
        pytest.fail("numpydoc is not installed: pip install -e '.[test]'")
    spec = importlib.util.spec_from_file_location(
        "validate_docstrings", ROOT / "docs" / "validate_docstrings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_numpydoc_validation_passes_for_every_public_name():
    """Every check the script enforces (numpydoc's less EXCLUDED_CHECKS, and how a
    type states its default) holds for every public name, method and property."""
    validator = _validator()
    names = validator.public_names()
    assert "dasketch.sketch" in names and "dasketch.Sketch.solve" in names
    assert "dasketch.RFDSONClassifier.fit" in names  # inherited from a private base
    failures = validator.failures()
    assert not failures, f"{len(failures)} docstring checks fail:\n" + "\n".join(
        f"{name}: {code} {message}" for name, code, message in failures)


# A ratio of a run ("6.1x", "5-10x") or a timing ("53 ms", "2 minutes"); measurements
# belong in benchmarks/README.md, the docstring names the benchmark script.
RUN_FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?x(?!\w)"
                        r"|\b\d+(?:\.\d+)? ?(?:ms|seconds|minutes)\b")


def docstrings(path):
    """``(name, docstring)`` of the module, classes and functions of one file."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield getattr(node, "name", path.stem), doc


def test_docstrings_carry_no_benchmark_figures():
    found = []
    for path in sorted((ROOT / "dasketch").rglob("*.py")):
        for name, doc in docstrings(path):
            text = re.split(r"\nExamples\n-+\n", doc)[0]  # example outputs are data
            found += [f"{path.relative_to(ROOT)}:{name}: {m.group(0)!r}"
                      for m in RUN_FIGURE.finditer(text)]
    assert not found, "docstrings quote figures of runs (move them to " \
        "benchmarks/README.md and name the script):\n" + "\n".join(found)
