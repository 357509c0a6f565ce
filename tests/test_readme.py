"""Every Python snippet of the README runs, in order, as a new user would run them."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def python_snippets():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_snippets():
    assert len(python_snippets()) >= 6


@pytest.mark.slow  # .ci/run runs it by name
def test_readme_snippets_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    namespace = {"__name__": "__main__"}  # as a script: the guards hold
    for number, snippet in enumerate(python_snippets(), start=1):
        code = compile(snippet, f"README.md snippet {number}", "exec")
        exec(code, namespace)  # noqa: S102 - the README's own code, run as documentation
