"""Every public function and estimator documents itself with a runnable example,
passes numpydoc's validation, and states rules rather than figures of runs."""

import ast
import importlib
import importlib.util
import inspect
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _docs_module(name):
    """A script of docs/ as a module (docs/ is no package; its scripts import each other)."""
    if str(DOCS) not in sys.path:
        sys.path.insert(0, str(DOCS))
    return importlib.import_module(name)


PUBLIC_MODULES = [importlib.import_module(m) for m in _docs_module("api_page").MODULES]
PUBLIC = [(module, name) for module in PUBLIC_MODULES for name in module.__all__]


@pytest.mark.parametrize("module,name", PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_api_has_numpydoc_with_example(module, name):
    doc = inspect.getdoc(getattr(module, name)) or ""
    assert "Examples\n--------" in doc and ">>> " in doc, f"{name} has no Examples section"
    assert len(doc.splitlines()[0]) > 10, f"{name} has no summary line"


# -- the API reference ----------------------------------------------------------------
# A public name as the user guide, the README and the examples write it:
# dasketch.<module>.<name>, the module's path without a private part.
DOTTED = re.compile(r"\bdasketch(?:\.[a-z][a-z0-9_]*)+\.[A-Za-z][A-Za-z0-9_]*\b")


def _documented_names():
    """``(module, name)`` of every ``dasketch.module.name`` the documents mention
    that is a function or class of an importable, non-private module."""
    texts = [ROOT / "README.md", *sorted((DOCS / "user_guide").glob("*.md")),
             *sorted((ROOT / "examples").glob("*.ipynb"))]
    found = set()
    for path in texts:
        for dotted in DOTTED.findall(path.read_text()):
            module_name, _, name = dotted.rpartition(".")
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            if inspect.isfunction(getattr(module, name, None)) or \
                    inspect.isclass(getattr(module, name, None)):
                found.add((module_name, name))
    return found


def test_every_public_module_and_name_has_an_api_page():
    api = _docs_module("api_page")
    listed = {(module, name) for module, names in api.entries() for name in names}
    page = api.text()
    for module, name in PUBLIC:
        obj = getattr(module, name)
        assert any(getattr(importlib.import_module(m), n) is obj for m, n in listed), name
    for module, names in api.entries():
        assert f".. currentmodule:: {module}" in page
        assert all(f"\n   {name}\n" in page for name in names), module
    # what the documents tell users to call is public, hence on the page
    mentioned = _documented_names()
    assert ("dasketch.xarray", "eofs") in mentioned
    exported = {(m.__name__, n) for m, n in PUBLIC}
    missing = sorted(f"{m}.{n}" for m, n in mentioned - exported
                     if not any(getattr(importlib.import_module(m), n) is
                                getattr(module, name) for module, name in PUBLIC))
    assert not missing, f"documented but without an API page: {missing}"


# What a docstring must not send a reader to: a private module or name, or a
# document the package does not ship (the design notes).
PRIVATE_LINK = re.compile(r"dasketch(?:\.\w+)*\._\w+|\b_blocks\.|\bDESIGN\b")


def test_public_docstrings_link_no_private_names_or_missing_documents():
    validator = _validator()
    found = []
    for path in [*validator.public_names(), *validator.MODULES]:
        module_name, obj = path, None
        while obj is None:
            try:
                obj = importlib.import_module(module_name)
            except ImportError:
                module_name = module_name.rpartition(".")[0]
        for part in path[len(module_name):].split(".")[1:]:
            obj = getattr(obj, part)
        found += [f"{path}: {line.strip()}" for line in (inspect.getdoc(obj) or "").splitlines()
                  if PRIVATE_LINK.search(line)]
    assert not found, "public docstrings point to private names or the design notes:\n" + \
        "\n".join(found)


# -- numpydoc validation and docstrings that state rules ----------------------------


def _validator():
    """docs/validate_docstrings.py as a module (it is a script, not a package)."""
    try:
        import numpydoc  # noqa: F401
    except ImportError:
        pytest.fail("numpydoc is not installed: pip install -e '.[test]'")
    return _docs_module("validate_docstrings")


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


def test_benchmarks_page_opens_with_the_summary_and_follows_the_order(tmp_path):
    page = _docs_module("benchmark_page")
    page.write(ROOT / "benchmarks" / "results", tmp_path)
    text = (tmp_path / "index.md").read_text()
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings[0] == "Summary"
    summary = text.partition("## Summary")[2].partition("\n## ")[0]
    assert "| task (script) |" in summary and "`bench_sketch`" in summary
    shown = [h.replace(" ", "_") for h in headings[1:]]
    ranks = [page.ORDER.index(s) if s in page.ORDER else len(page.ORDER) for s in shown]
    assert ranks == sorted(ranks) and shown[0] == "sketch"
    assert text.count(":width: 100%") == text.count("```{image}") > 0


def test_install_lines_work_from_the_repository():
    """The landing page and the README install what a clone holds (the package is not
    on PyPI), and the quick subset the README offers names registered markers."""
    import tomllib

    for page in (ROOT / "README.md", DOCS / "index.md"):
        first = re.search(r"^pip install (\S+)", page.read_text(), flags=re.M)
        assert first and first.group(1) in (".", "-e", '".[test]"'), (page, first)
    markers = {m.split(":")[0] for m in tomllib.loads((ROOT / "pyproject.toml").read_text())
               ["tool"]["pytest"]["ini_options"]["markers"]}
    quick = re.search(r'python -m pytest -m "(not slow and not cluster and not heavy)"',
                      (ROOT / "README.md").read_text())
    assert quick and set(re.findall(r"\b(?!not\b|and\b)\w+", quick.group(1))) <= markers
