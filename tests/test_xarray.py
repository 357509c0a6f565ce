"""EOFs of xarray fields (dasketch.xarray) against exact weighted EOFs."""

import warnings

import numpy as np
import pytest

xr = pytest.importorskip("xarray", reason="xarray is not installed (pip install "
                                           "'dasketch[xarray]'); dasketch.xarray untested")
da = pytest.importorskip("dask.array")
import dask  # noqa: E402

from dasketch import SketchPCA  # noqa: E402
from dasketch.xarray import eofs  # noqa: E402

N_TIME, N_LAT, N_LON = 240, 16, 24


def _climate(seed=0):
    """SST-like anomalies on (time, lat, lon): four smooth modes of decreasing
    variance plus noise, NaN on a land rectangle at every time."""
    rng = np.random.default_rng(seed)
    lat = np.linspace(-75.0, 75.0, N_LAT)
    lon = np.linspace(0.0, 345.0, N_LON)
    la, lo = np.meshgrid(np.deg2rad(lat), np.deg2rad(lon), indexing="ij")
    patterns = [np.cos(la), np.sin(2 * la) * np.cos(lo), np.cos(la) * np.sin(2 * lo),
                np.sin(la) * np.sin(lo)]
    amplitudes = [4.0, 2.5, 1.6, 1.0]
    values = 0.3 * rng.standard_normal((N_TIME, N_LAT, N_LON)) + 20.0
    for pattern, amplitude in zip(patterns, amplitudes):
        values += amplitude * rng.standard_normal((N_TIME, 1, 1)) * pattern
    values[:, 3:7, 5:11] = np.nan  # land
    time = np.arange("2000-01", "2020-01", dtype="datetime64[M]")
    return xr.DataArray(values, dims=("time", "lat", "lon"), name="sst",
                        coords={"time": time, "lat": lat, "lon": lon})


def _reference(field, weights):
    """The weighted, masked, centred matrix, its exact EOFs and eigenvalues."""
    X = field.values.reshape(N_TIME, -1)
    valid = ~np.isnan(X).all(axis=0)
    w = np.broadcast_to(weights.values[:, None], (N_LAT, N_LON)).ravel()
    Xc = X[:, valid] * w[valid]
    Xc = Xc - Xc.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc, valid, Vt, s ** 2 / (N_TIME - 1)


@pytest.fixture(scope="module")
def field():
    return _climate()


@pytest.fixture(scope="module")
def weights(field):
    return np.sqrt(np.cos(np.deg2rad(field.lat)))


@pytest.mark.heavy
def test_eofs_are_certified_against_exact_weighted_eofs(field, weights):
    k = 4
    result = eofs(field, "time", k, weights=weights, sketch_size=8)
    Xc, valid, Vt, lam = _reference(field, weights)
    comps = result.components.values.reshape(k, -1)
    # land is NaN in the patterns and the mean, the ocean is not
    assert np.isnan(comps[:, ~valid]).all() and not np.isnan(comps[:, valid]).any()
    assert np.isnan(result["mean"].values.reshape(-1)[~valid]).all()
    # coordinates survive
    np.testing.assert_array_equal(result.components.lat, field.lat)
    np.testing.assert_array_equal(result.components.lon, field.lon)
    np.testing.assert_array_equal(result.scores.time, field.time)
    assert result.components.dims == ("mode", "lat", "lon")
    assert result.scores.dims == ("time", "mode")
    V = comps[:, valid]
    # reported variances and scores are the weighted data's own along the EOFs
    np.testing.assert_allclose(result.explained_variance,
                               np.var(Xc @ V.T, axis=0, ddof=1), rtol=1e-10)
    np.testing.assert_allclose(result.scores, Xc @ V.T, atol=1e-9)
    bound = float(result.eigenvalue_bound)
    assert result.attrs["guarantee"] == "certified" and 0 < bound < lam[0]
    # exact eigenvalues within the certified interval (Weyl)
    assert np.all(np.abs(lam[:k] - result.sketch_eigenvalues) <= bound * (1 + 1e-9))
    # variance captured: at most the optimum (Ky Fan), at least optimum - 2 k bound
    captured = float(result.explained_variance.sum())
    assert lam[:k].sum() - 2 * k * bound <= captured <= lam[:k].sum() * (1 + 1e-12)
    # largest principal angle to the exact EOFs: sin^2 <= missed variance / gap
    cos = np.linalg.svd(V @ Vt[:k].T, compute_uv=False)
    sin2 = 1 - cos.min() ** 2
    assert sin2 <= (lam[:k].sum() - captured) / (lam[k - 1] - lam[k]) + 1e-10
    assert sin2 <= 2 * k * bound / (lam[k - 1] - lam[k])


@pytest.mark.heavy
def test_an_exact_sketch_gives_the_exact_weighted_eofs(field, weights):
    k = 4
    result = eofs(field.to_dataset(), "time", k, weights=weights, sketch_size=N_TIME + 1)
    Xc, valid, Vt, lam = _reference(field, weights)
    V = result.components.values.reshape(k, -1)[:, valid]
    signs = np.sign(np.sum(V * Vt[:k], axis=1))
    np.testing.assert_allclose(V * signs[:, None], Vt[:k], atol=1e-8)
    np.testing.assert_allclose(result.explained_variance, lam[:k], rtol=1e-10)
    np.testing.assert_allclose(result.explained_variance_ratio, lam[:k] / lam.sum(),
                               rtol=1e-10)


class _TaskSizes:
    """The largest result of any task, and how many chunks of the input were read."""

    def __init__(self):
        self.largest, self.reads = 0, 0

    def callback(self):
        from dask.callbacks import Callback

        def posttask(key, result, dsk, state, worker_id):
            self.largest = max(self.largest, getattr(result, "nbytes", 0))
        return Callback(posttask=posttask)

    def counted(self, block):
        self.reads += 1
        return block


def test_dask_backed_field_stays_lazy(field, weights):
    sizes = _TaskSizes()
    lazy = da.from_array(field.values, chunks=(30, N_LAT, N_LON)).map_blocks(
        sizes.counted, dtype=field.dtype)
    lazy_field = field.copy(data=lazy)
    with sizes.callback():
        result = eofs(lazy_field, "time", 3, weights=weights, sketch_size=10, block_rows=40)
        read_by_fit = sizes.reads
        assert read_by_fit > 0 and isinstance(result.scores.data, da.Array)
        assert sizes.reads == read_by_fit  # the scores are not computed yet
        scores = result.scores.values
    # no task ever held the whole field (as .values on the client would)
    assert 0 < sizes.largest < field.nbytes / 4
    assert isinstance(lazy_field.data, da.Array)
    in_memory = eofs(field, "time", 3, weights=weights, sketch_size=10, block_rows=40)
    np.testing.assert_allclose(result.components, in_memory.components, atol=1e-10)
    np.testing.assert_allclose(scores, in_memory.scores, atol=1e-8)


def test_a_2d_dask_dataarray_fits_sketchpca_lazily():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((400, 30)) * np.linspace(3, 0.1, 30)
    sizes = _TaskSizes()
    arr = xr.DataArray(da.from_array(values, chunks=(50, 30)), dims=("cell", "gene"))
    with sizes.callback():
        fitted = SketchPCA(3, 10, block_rows=50).fit(arr)
    assert 0 < sizes.largest < values.nbytes / 4
    expected = SketchPCA(3, 10, block_rows=50).fit(values)
    np.testing.assert_allclose(fitted.components_, expected.components_, atol=1e-12)


def test_bad_inputs_are_named(field, weights):
    partial = field.copy()
    partial[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN at some but not all time samples"):
        eofs(partial, "time", 2)
    with pytest.raises(ValueError, match="sample_dim must be one of"):
        eofs(field, "month", 2)
    with pytest.raises(ValueError, match="not feature dimensions"):
        eofs(field, "time", 2, weights=field.time.astype(float))
    with pytest.raises(ValueError, match="weights' coordinates differ"):
        eofs(field, "time", 2, weights=weights.assign_coords(lat=weights.lat + 1))
    with pytest.raises(TypeError, match="weights must be an xarray.DataArray"):
        eofs(field, "time", 2, weights=weights.values)
    with pytest.raises(TypeError, match="data must be an xarray"):
        eofs(field.values, "time", 2)


def _stores(field, tmp_path):
    opened = {}
    for name, chunks in {"time": {"time": 40}, "space": {"time": -1, "lat": 4}}.items():
        field.to_dataset().chunk(chunks).to_zarr(tmp_path / f"{name}.zarr", mode="w")
        opened[name] = xr.open_zarr(tmp_path / f"{name}.zarr")
    return opened


def _recorded_eofs(data, **kwargs):
    """EOFs with their scores computed, the graphs recorded and no rechunk warning."""
    from tests.helpers import GraphRecorder

    recorder = GraphRecorder()
    with dask.config.set(scheduler=recorder), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = eofs(data, "time", 4, weights=kwargs.pop("weights"), **kwargs)
        result["scores"] = result.scores.compute()
    assert not [w for w in seen if "rechunk" in str(w.message)]
    return result, recorder


def test_a_space_chunked_store_is_read_by_samples_in_the_tasks(field, weights, tmp_path):
    """A variable opened from a zarr store chunked along space, in one block of
    samples (each chunk decoded once: column reads), gives the EOFs of the same
    field chunked along time, and of it in memory (to 1e-10), read by block
    tasks across the store's chunks, with no rechunk or shuffle in any graph."""
    from tests.helpers import graph_tasks, moved_whole, store_read

    opened, results, recorders = _stores(field, tmp_path), {}, {}
    for name, ds in opened.items():
        results[name], recorders[name] = _recorded_eofs(
            ds if name == "time" else ds.sst, weights=weights, sketch_size=10,
            block_rows=N_TIME)
        assert not moved_whole(recorders[name]), name
    in_memory = eofs(field, "time", 4, weights=weights, sketch_size=10, block_rows=N_TIME)
    assert results["space"].attrs["plan"] == "column reads"
    assert results["time"].attrs["plan"] == "rows" and in_memory.attrs["plan"] == "in memory"
    for other in (results["time"], in_memory):
        for var in ("components", "scores", "explained_variance", "mean"):
            np.testing.assert_allclose(results["space"][var].values, other[var].values,
                                       rtol=1e-10, atol=1e-10)
    assert np.isnan(results["space"].components.values[:, 3:7, 5:11]).all()
    reads = [store_read(task) for graph in recorders["space"].graphs
             for task in graph_tasks(graph)]
    assert [(start, stop) for _, start, stop in filter(None, reads)] == [(0, N_TIME)] * 3


@pytest.mark.heavy
def test_a_space_chunked_store_is_sketched_transposed(field, weights, tmp_path):
    """With blocks of 48 samples, column reads would decode every chunk 5 times a
    pass: the EOFs come from the sketch of the masked, weighted transpose instead,
    every grid point read once a pass, with the statement of the row plan
    (eigenvalues certified, variances measured to 1e-10, captured variance within
    2 k bounds of the optimum's) and no rechunk or shuffle."""
    from dasketch._blocks.stacked_store import StackedColumns
    from tests.helpers import graph_tasks, moved_whole, store_read

    k, ds = 4, _stores(field, tmp_path)["space"]
    result, recorder = _recorded_eofs(ds, weights=weights, sketch_size=6, block_rows=48)
    assert result.attrs["plan"] == "transposed" and not moved_whole(recorder)
    Xc, valid, _, lam = _reference(field, weights)
    comps = result.components.values.reshape(k, -1)[:, valid]
    measured = np.var(Xc @ comps.T, axis=0, ddof=1)
    np.testing.assert_allclose(result.explained_variance.values, measured, rtol=1e-10)
    np.testing.assert_allclose(result.scores.values, Xc @ comps.T, atol=1e-9)
    bound = float(result.eigenvalue_bound)
    assert np.all(np.abs(result.sketch_eigenvalues.values - lam[:k]) <= bound * (1 + 1e-9))
    assert lam[:k].sum() - 2 * k * bound <= measured.sum() <= lam[:k].sum() * (1 + 1e-12)
    assert np.isnan(result.components.values[:, 3:7, 5:11]).all()
    reads = [r for r in (store_read(task) for graph in recorder.graphs
                         for task in graph_tasks(graph)) if r is not None]
    columns = sorted((start, stop) for read, start, stop in reads
                     if isinstance(read, StackedColumns))
    n_valid = int(valid.sum())
    assert columns == sorted(2 * [(a, min(a + 48, n_valid)) for a in range(0, n_valid, 48)])
