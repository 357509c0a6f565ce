"""The example notebooks are stored without outputs, and run top to bottom at small
sizes writing their figures.

Running them is ``slow``: CI executes every notebook when it builds the documentation
(``.ci/run``, ``tests/test_docs_build.py``), which fails on any cell's error.
"""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _marks(notebook):
    """Notebooks that look for the real data set run again in CI without it."""
    return [pytest.mark.real_data] if "shared/data" in notebook.read_text() else []


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebooks_are_stored_without_outputs(notebook):
    nb = nbformat.read(notebook, as_version=4)
    assert all(not cell.get("outputs") and not cell.get("execution_count")
               for cell in nb.cells if cell.cell_type == "code")


@pytest.mark.slow
@pytest.mark.parametrize("notebook", [pytest.param(p, id=p.stem, marks=_marks(p))
                                      for p in NOTEBOOKS])
def test_notebook_runs_and_writes_figures(notebook, tmp_path, monkeypatch):
    figures = tmp_path / "figures"
    monkeypatch.setenv("DASKETCH_EXAMPLES_SMALL", "1")
    monkeypatch.setenv("DASKETCH_FIGURES", str(figures))
    monkeypatch.setenv("DASKETCH_WORKDIR", str(tmp_path / "data"))
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    nb = nbformat.read(notebook, as_version=4)
    assert all(not cell.get("outputs") for cell in nb.cells if cell.cell_type == "code"), \
        "notebooks are stored with outputs stripped"
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()
    # The gallery shows no warning a reader did not ask for: a warning a notebook
    # demonstrates is caught and printed by its cell, never left on stderr.
    noise = [line for cell in nb.cells if cell.cell_type == "code"
             for out in cell.get("outputs", []) if out.get("name") == "stderr"
             for line in out.get("text", "").splitlines()
             if "Warning" in line or "WARNING" in line]
    assert not noise, f"{notebook.name} leaves warnings on stderr:\n" + "\n".join(noise)
    prefix = notebook.stem.split("_")[0]
    pngs = sorted(figures.glob(f"{prefix}_*.png"))
    assert pngs, f"{notebook.name} wrote no figure"
    for png in pngs:
        data = png.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000, png.name
    assert not os.environ.get("DASK_SCHEDULER_ADDRESS")
