"""Progress bars for every pass over the data, asked for through the Dask config
``dasketch.progress`` (or an estimator's own ``progress=True``), and silence otherwise."""

import dask
import dask.array as da
import numpy as np
import pytest

from dasketch import SketchPCA
from dasketch.linear_model import DualRandomProjectionRegressor, RFDSONRegressor

BAR = "% Completed"  # dask's ProgressBar, drawn on stderr by the local schedulers


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 12))
    y = X @ rng.standard_normal(12) + 0.1 * rng.standard_normal(600)
    return da.from_array(X, chunks=(150, 12)), da.from_array(y, chunks=150)


FITS = {
    "SketchPCA": lambda X, y: SketchPCA(n_components=3, sketch_size=8).fit(X),
    "DRP": lambda X, y: DualRandomProjectionRegressor(alpha=1.0, n_components=12).fit(X, y),
}


@pytest.mark.parametrize("fit", FITS.values(), ids=FITS.keys())
def test_progress_bars_appear_on_stderr_only_when_asked(fit, data, capsys):
    fit(*data)
    quiet = capsys.readouterr()
    assert BAR not in quiet.err and BAR not in quiet.out
    with dask.config.set({"dasketch.progress": True}):
        fit(*data)
    shown = capsys.readouterr()
    assert "100" + BAR in shown.err
    assert BAR not in shown.out


def test_rfd_son_follows_the_config_with_one_bar_over_the_rows(data, capsys):
    """RFD-SON streams a Dask array block by block: one bar over its rows, none per block."""
    with dask.config.set({"dasketch.progress": True}):
        RFDSONRegressor(sketch_size=4).fit(*data)
        shown = capsys.readouterr().err
    # the targets' pass may draw its bar; the 4 blocks of the walk draw none
    assert "600/600" in shown and shown.count("100" + BAR) <= 1
    RFDSONRegressor(sketch_size=4).fit(*data)
    assert "rows" not in capsys.readouterr().err
