"""Sphinx configuration of the dasketch documentation.

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``
(``pip install -e ".[docs]"`` first). The example notebooks run at build time at
the small sizes the test suite uses (``DASKETCH_EXAMPLES_SMALL=1``), and the
benchmark page is written from ``benchmarks/results/*.json``.
"""

import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
GENERATED = DOCS / "generated"
sys.path.insert(0, str(DOCS))

import api_page  # noqa: E402  (docs/api_page.py)
import benchmark_page  # noqa: E402  (docs/benchmark_page.py)
import sphinx.ext.autosummary  # noqa: E402

import dasketch  # noqa: E402

# -- the notebooks: small sizes, scratch files outside the tree -----------------------
os.environ["DASKETCH_EXAMPLES_SMALL"] = "1"
SCRATCH = Path(tempfile.mkdtemp(prefix="dasketch-docs-"))
os.environ.setdefault("DASKETCH_WORKDIR", str(SCRATCH / "data"))
os.environ.setdefault("DASKETCH_FIGURES", str(SCRATCH / "figures"))
os.environ.pop("DASK_SCHEDULER_ADDRESS", None)  # the gallery runs on an embedded cluster
# The real a9a data set, as the tests look it up: DASKETCH_SHARED_DATA, else
# ../shared/data beside the repository; the notebooks fall back to a stand-in.
os.environ.setdefault("DASKETCH_SHARED_DATA", str(ROOT.parent / "shared" / "data"))

GALLERY = GENERATED / "gallery"
shutil.rmtree(GALLERY, ignore_errors=True)
GALLERY.mkdir(parents=True)
for notebook in sorted((ROOT / "examples").glob("*.ipynb")):
    shutil.copy2(notebook, GALLERY / notebook.name)
benchmark_page.write(ROOT / "benchmarks" / "results", GENERATED / "benchmarks")

# -- project -------------------------------------------------------------------------
project = "dasketch"
author = "the dasketch developers"
copyright = "the dasketch developers"
release = dasketch.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
]
try:
    import sphinx_copybutton  # noqa: F401
except ImportError:
    pass
else:
    extensions.append("sphinx_copybutton")

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# -- API reference -------------------------------------------------------------------
autosummary_generate = True


def _foreign_bases():
    """Names of the classes, not dasketch's, that the public classes derive from."""
    import importlib

    return sorted({base.__name__ for module_name, names in api_page.entries()
                   for name in names
                   for base in getattr(getattr(importlib.import_module(module_name), name),
                                       "__mro__", ())
                   if not base.__module__.startswith("dasketch")})


# A class's page lists the members dasketch defines, those of its private base classes
# included (as docs/validate_docstrings.py validates them); scikit-learn's inherited
# members are documented by scikit-learn.
autodoc_default_options = {"members": True, "inherited-members": ",".join(_foreign_bases())}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# numpydoc's validation of every documented object: every check but those the
# project does not require of each name, recorded (with the reasons) in
# docs/validate_docstrings.py, which tests/test_docs.py runs in the test suite.
# Findings are warnings, so -W fails the build on them (DASKETCH_DOCS_VALIDATE=0
# leaves the validation out).
from validate_docstrings import EXCLUDED_CHECKS  # noqa: E402

NUMPYDOC_EXCLUDED_CHECKS = set(EXCLUDED_CHECKS)
if os.environ.get("DASKETCH_DOCS_VALIDATE") != "0":
    numpydoc_validation_checks = {"all", *NUMPYDOC_EXCLUDED_CHECKS}
    numpydoc_validation_exclude = {r"\._[a-z]"}  # private names

# -- notebooks (myst-nb) -------------------------------------------------------------
# The notebooks are stored without outputs: run them (DASKETCH_DOCS_EXECUTE=0 skips
# them, for a quick look at the other pages; such a build shows no figures).
nb_execution_mode = "off" if os.environ.get("DASKETCH_DOCS_EXECUTE") == "0" else "force"
nb_execution_timeout = 900
nb_execution_raise_on_error = True   # a failing notebook fails the build
nb_execution_show_tb = True
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = [
    # Progress-bar widgets have no static rendering; their text output is shown.
    "mystnb.unknown_mime_type",
]

# -- HTML ----------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"dasketch {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}
html_static_path = []


# -- the API lists: autosummary over the public modules' __all__ (docs/api_page.py) --
api_page.write(GENERATED / "api.rst")


# Three docstring problems in dasketch/ that -W would otherwise stop the build on
# (to be fixed in the docstrings; until then the text is kept, without the link):
# a citation in a summary line (merge_sketches: "([2]_ Section 3)") has no target in
# autosummary's tables; a citation without a References entry (Sketch's Notes cite
# [2]_ and [3]_) has none on its page; a name ending in "_" in a type ("ndarray of
# shape (n_components_,)" in SketchPCA) is read by reST as a link to a target.
_CITATION = re.compile(r"\[([^\]\s]+)\]_")


def _summary_without_citations(doc, settings):
    return _extract_summary([_CITATION.sub("", line) for line in doc], settings)


def _unlink_dangling_citations(app, what, name, obj, options, lines):
    defined = {m.group(1) for line in lines
               for m in [re.match(r"\s*\.\. \[([^\]]+)\]", line)] if m}
    for i, line in enumerate(lines):
        line = _CITATION.sub(
            lambda m: m.group(0) if m.group(1) in defined else rf"\[{m.group(1)}\]", line)
        name, colon, kind = line.partition(" : ")
        lines[i] = name + colon + re.sub(r"\b(\w+)_(?=[,)\s]|$)", r"\1\\_", kind)


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods (metadata routing) are
    documented by scikit-learn; their docstrings link into its documentation."""
    return True if re.fullmatch(r"set_\w+_request", name) else None


_extract_summary = sphinx.ext.autosummary.extract_summary
sphinx.ext.autosummary.extract_summary = _summary_without_citations


def setup(app):
    app.connect("autodoc-process-docstring", _unlink_dangling_citations, priority=900)
    app.connect("autodoc-skip-member", _skip_metadata_requests)
