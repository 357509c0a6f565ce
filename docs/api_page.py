"""The API reference page: an autosummary table per public module, over its ``__all__``.

The public modules are ``MODULES``: their ``__all__`` lists are the API; each
name is listed once, under the first module that exports it. ``docs/conf.py`` writes
the page when the site is built; ``tests/test_docs.py`` checks that every public
name has an entry.
"""

import importlib

MODULES = ("dasketch", "dasketch.linear_model", "dasketch.xarray", "dasketch.anndata",
           "dasketch.genotype")

INTRO = """API reference
=============

Generated from the docstrings of every name in the ``__all__`` lists of {modules}
(read from the package when the site is built). A name exported by two modules
(``RFDSONClassifier`` and ``RFDSONRegressor``, by ``dasketch`` and
``dasketch.linear_model``) is documented once, under the first.
"""


def entries():
    """``(module name, [public names])`` in page order, each object once."""
    seen, out = set(), []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        names = [n for n in module.__all__ if id(getattr(module, n)) not in seen]
        seen.update(id(getattr(module, n)) for n in names)
        out.append((module_name, names))
    return out


def text():
    """The page, in reStructuredText."""
    lines = [INTRO.format(modules=", ".join(f"``{m}``" for m in MODULES))]
    for title, names in entries():
        lines += [title, "-" * len(title), "", f".. currentmodule:: {title}", "",
                  ".. autosummary::", "   :toctree: api", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names] + [""]
    return "\n".join(lines)


def write(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text())
