"""The documentation site builds with warnings as errors (notebooks executed small)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_docs_build_with_warnings_as_errors(tmp_path):
    for module in ("sphinx", "numpydoc", "myst_nb", "pydata_sphinx_theme"):
        pytest.importorskip(module, reason=f"{module} is not installed: pip install -e '.[docs]'")
    env = dict(os.environ, DASKETCH_WORKDIR=str(tmp_path / "data"),
               DASKETCH_FIGURES=str(tmp_path / "figures"))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    out = tmp_path / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(ROOT / "docs"), str(out)],
        capture_output=True, text=True, timeout=1800, cwd=ROOT, env=env)
    assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
    # The pages a reader needs are there, with the gallery's figures and the API.
    api = out / "generated" / "api"
    assert (api / "dasketch.sketch.html").exists()
    assert (api / "dasketch.linear_model.sketch_lstsq.html").exists()
    for page in ("dasketch.xarray.eofs", "dasketch.anndata.pca", "dasketch.genotype.pca",
                 "dasketch.genotype.GenotypePCA"):
        assert (api / f"{page}.html").exists(), page
    gallery = out / "generated" / "gallery"
    for page, min_images in (("01_sketch_larger_than_memory", 2), ("03_dual_random_projection", 2),
                             ("05_online_newton", 3)):
        html = (gallery / f"{page}.html").read_text()
        assert html.count("<img") >= min_images, page
    benchmarks = (out / "generated" / "benchmarks" / "index.html").read_text()
    assert benchmarks.count("<table") >= 10 and "sketch_time_over_read_time" in benchmarks
    assert benchmarks.index("Summary") < benchmarks.index("sketch_time_over_read_time")
