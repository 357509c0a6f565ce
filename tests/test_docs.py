"""Every public function and estimator documents itself with a runnable example."""

import inspect

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
