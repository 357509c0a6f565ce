"""Every benchmark script runs in its --quick mode and writes its results.

Each runs in a subprocess as ``python -m benchmarks.<name> --quick``, writing into a
temporary directory (``DASKETCH_BENCH_RESULTS``), and must leave a JSON file and a
figure there. Scripts whose peers are not installed (the ``bench`` extra) are skipped
with a message; the slower ones are marked ``slow``.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# script -> (extra arguments, result name, modules its peers need, slow?)
SCRIPTS = {
    "bench_store_checks": ([], "store_checks", (), True),
    "bench_block_products": ([], "block_products", (), False),
    "bench_sketch": ([], "sketch", (), True),
    "bench_sparse_wide": ([], "sparse_wide", (), True),
    "bench_row_sampling": (["--seeds", "1"], "row_sampling", (), True),
    "bench_scale": ([], "scale", ("psutil",), True),
    "bench_drp": ([], "drp", ("dask_ml",), True),
    "bench_drp_small": (["--repeat", "1"], "drp_small", (), True),
    "bench_regression": ([], "regression", (), True),
    "bench_online": ([], "online", (), True),  # runs without the JAX reference too
    "bench_faults": ([], "faults", (), True),
    "bench_user_data": ([], "user_data", ("xeofs", "scanpy"), True),
    "bench_column_reads": ([], "column_reads", (), True),
    "bench_sketch_size": ([], "sketch_size", (), True),
    # this tree's code also as the "before" checkout: the subprocess path runs
    "bench_lstsq_store": (["--before", "."], "lstsq_store", (), True),
    "bench_parquet": ([], "parquet", ("pyarrow",), True),
    "bench_l1": ([], "l1", (), True),
    "bench_l1_zarr": ([], "l1_zarr", (), True),  # runs without dask-ml too
    # array_api_strict stands for CuPy: the script and the namespace paths, no GPU
    "bench_gpu": (["--library", "array_api_strict"], "gpu", ("array_api_strict",), False),
    "bench_cores": ([], "cores", (), True),
    "bench_eager_passes": ([], "eager_passes", (), True),
    "bench_hashed_text": ([], "hashed_text", (), True),
    "bench_gram": ([], "gram", (), True),
}


def test_every_script_is_listed():
    scripts = {p.stem for p in (ROOT / "benchmarks").glob("bench_*.py")}
    assert scripts == set(SCRIPTS)


@pytest.mark.parametrize("script", [
    pytest.param(name, marks=[pytest.mark.slow] if slow else [])
    for name, (_, _, _, slow) in SCRIPTS.items()])
@pytest.mark.heavy
def test_quick_run_writes_results(script, tmp_path):
    args, name, peers, _ = SCRIPTS[script]
    missing = [m for m in peers if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{script}: peer modules {missing} are not installed "
                    "(pip install -e '.[bench]')")
    env = dict(os.environ, DASKETCH_BENCH_RESULTS=str(tmp_path), MPLBACKEND="Agg")
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    result = subprocess.run([sys.executable, "-m", f"benchmarks.{script}", "--quick", *args],
                            capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    report = json.loads((tmp_path / f"{name}_quick.json").read_text())
    assert report, f"{script} wrote an empty report"
    png = (tmp_path / f"{name}_quick.png").read_bytes()
    assert png[:8] == PNG_MAGIC and len(png) > 5000
    CHECKS.get(script, lambda report: None)(report)


def _store_checks(report):
    """The checked and plain reads are timings of the same stores, recorded with the
    machine they ran on."""
    assert len(report["cases"]) == 2
    for case in report["cases"]:
        assert case["plain_s"] > 0 and case["checked_s"] > 0
        assert case["ratio"] == pytest.approx(case["checked_s"] / case["plain_s"])
        assert case["chunks"] == -(-case["rows"] // case["chunk_rows"])
    assert report["machine"]["cpus"] == os.cpu_count()


def _block_products(report):
    """Each product in the transposed layout, in panels or whole, equals the plain
    ``@`` to rounding; the narrower block goes in panels, the wider one whole; the
    ratios are those of the seconds."""
    from benchmarks.bench_block_products import RATIOS, WIDTHS

    assert [case["panel_rows"] > 0 for case in report["cases"]] == [True, False]
    for case in report["cases"]:
        assert [row["j"] for row in case["widths"]] == list(WIDTHS)
        for row in case["widths"]:
            assert max(row["relative_difference"].values()) < 1e-12
            for name, (plain, ours) in RATIOS.items():
                assert row["plain_over_dasketch"][name] == pytest.approx(
                    row["seconds"][plain] / row["seconds"][ours])


def _drp_small(report):
    """Eager runs and Dask graphs reach the accuracy in the same passes; every
    ratio is that of the seconds."""
    for case in report["cases"]:
        for task in case["tasks"].values():
            eager, graphs = task["rows"]["dasketch eager"], task["rows"]["dasketch graphs"]
            assert eager["passes"] == graphs["passes"]
            assert eager["relative_error"] == graphs["relative_error"] <= 1e-5
            assert task["graphs_over_eager"] == pytest.approx(
                graphs["seconds"] / eager["seconds"])


def _sketch(report):
    """Dasketch's error is within its certified bound and at least the best possible."""
    errors = report["relative_spectral_error"]
    ours = errors["dasketch.sketch (RFD)"]
    assert report["best_possible_rfd_error"] * (1 - 1e-9) <= ours
    assert ours <= report["certified_bound"] * (1 + 1e-9)


def _sketch_size(report):
    """No subspace captures more than the optimum, and the default sketch size
    (l = 4 k) meets its target on both spectra."""
    from dasketch.decomposition._variance import CAPTURED_VARIANCE_TARGET

    for case in ("flat", "steep"):
        runs = report[case]["runs"]
        assert all(r["captured_fraction"] <= 1 + 1e-9 for r in runs)
        assert all(r["captured_fraction"] >= CAPTURED_VARIANCE_TARGET
                   for r in runs if r["sketch_size"] == 4 * r["k"])


def _lstsq_store(report):
    """Every solver agrees with NumPy at cond(A) = 1e6, sketch_lstsq within its
    stated bound; cache="auto" reads the store
    once, cache=False once per pass (the sketch, the Gram pass, one per
    refinement step); the refinement takes fewer passes than LSQR; the
    subprocess ran this tree's code; the ratios are those of the seconds."""
    solvers = dict(report["solvers"])
    read = solvers.pop("read of A (da.from_zarr(A).sum())")
    assert all(facts["relative_error"] < 1e-8 for facts in solvers.values())
    assert all(facts["relative_error"] <= facts["relative_error_bound"]
               for name, facts in solvers.items() if name.startswith("sketch_lstsq"))
    auto, streamed = solvers['sketch_lstsq, cache="auto"'], solvers["sketch_lstsq, cache=False"]
    assert auto["cache"]["cached"] and not streamed["cache"]["cached"]
    assert 0.99 < auto["store_reads"] < 1.5
    assert streamed["store_reads"] >= 0.99 * streamed["n_passes"]
    assert streamed["n_passes"] == streamed["n_iter"] + 2
    lsqr = solvers['sketch_lstsq, solver="lsqr", cache="auto"']
    assert lsqr["n_passes"] >= 2 * lsqr["n_iter"] + 2 > streamed["n_passes"]
    assert report["ratios"]["sketch_lstsq auto / read"] == pytest.approx(
        auto["seconds"] / read["seconds"])
    before = solvers["sketch_lstsq, before"]
    assert Path(before["dasketch"]).resolve() == ROOT / "dasketch"
    assert before["n_iter"] == auto["n_iter"] == streamed["n_iter"]
    assert report["ratios"]["before / after cache=False"] == pytest.approx(
        before["seconds"] / streamed["seconds"])


def _parquet(report):
    """Every run read all the rows; the sketch's ratio is its time over
    pyarrow's read of the same file."""
    runs = report["runs"]
    assert {r["rows"] for r in runs.values()} == {report["rows"]}
    assert report["ratio"] == pytest.approx(runs["dasketch.sketch"]["wall"]
                                            / runs["pyarrow.read_table"]["wall"])


def _hashed_text(report):
    """Both models at their defaults, the certificate of dasketch's holding against
    the tight reference, and dasketch at least as accurate as scikit-learn's default
    by both measures."""
    sklearn, ours = report["rows"]
    assert ours["relative_coef_error"] <= ours["certified_relative_bound"] + 1e-8
    assert ours["certified_relative_bound"] <= 1e-4
    assert report["at_least_as_accurate"] == (
        ours["relative_coef_error"] <= sklearn["relative_coef_error"]
        and ours["relative_optimality_residual"] <= sklearn["relative_optimality_residual"])
    assert report["at_least_as_accurate"]
    assert report["time_ratio"] == pytest.approx(ours["wall_seconds"] / sklearn["wall_seconds"])


def _l1_zarr(report):
    """The dasketch fit is certified to the accuracy asked; every objective is at
    or above the best, and every ratio is that of the seconds."""
    ours = report["rows"][0]
    assert ours["certified_relative_gap"] <= report["config"]["accuracy"]
    assert all(r["relative_suboptimality"] >= 0 for r in report["rows"])
    for entry, peer in zip(report["ratios"], report["rows"][1:]):
        assert entry["ratio_cpu"] == pytest.approx(peer["seconds"] / ours["seconds"])


def _gpu(report):
    """Every entry point ran on the stand-in library, agreed with the CPU path to
    rounding and kept its certificate; the ratios are those of the seconds."""
    cases = report["cases"]
    assert set(cases) == {"sketch", "pca", "ridge", "logistic", "lstsq"}
    for case in cases.values():
        assert "error" not in case, case
        assert case["cpu_over_gpu"] == pytest.approx(case["cpu_s"] / case["gpu_s"])
    assert all(cases["sketch"]["bound_holds"].values())
    assert cases["sketch"]["gpu_over_cpu_error"] <= 1.05
    assert cases["pca"]["explained_variance_difference"] < 1e-10
    for name in ("ridge", "logistic"):
        assert cases[name]["coef_difference"] < 1e-8
        assert cases[name]["passes"]["gpu"] == cases[name]["passes"]["cpu"]
    assert cases["lstsq"]["solution_difference"] < 1e-8


CHECKS = {"bench_store_checks": _store_checks, "bench_gpu": _gpu, "bench_l1_zarr": _l1_zarr,
          "bench_block_products": _block_products,
          "bench_drp_small": _drp_small,
          "bench_sketch": _sketch,
          "bench_sketch_size": _sketch_size, "bench_lstsq_store": _lstsq_store,
          "bench_parquet": _parquet, "bench_hashed_text": _hashed_text}



def test_extras_name_no_url_and_the_online_reference_is_skipped_with_its_command(
        monkeypatch, capsys):
    """An extra with a direct URL cannot be published on PyPI and fails offline:
    bench_online's GitHub-only reference is no extra; without it the script says how
    to install it and goes on."""
    import tomllib
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    urls = [spec for specs in extras.values() for spec in specs if Requirement(spec).url]
    assert not urls, f"extras name direct URLs: {urls}"
    from benchmarks import bench_online

    monkeypatch.setitem(sys.modules, "precondition", None)  # import fails as if absent
    monkeypatch.setitem(sys.modules, "precondition.oco", None)
    assert bench_online.reference_available() is False
    message = capsys.readouterr().out
    assert "skipping it" in message and bench_online.REFERENCE_INSTALL in message
    assert "git+https://github.com/google-research/precondition@" in message
