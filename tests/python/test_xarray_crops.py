"""Crop datasets built from an xarray Dataset (lsio.grain.CropSource, lsio.torch.CropDataset).

An ERA5-like Dataset (t2m, u10 over (time, lat, lon), an int16 count, a static orography
z(lat, lon), coordinates) written by ``xarray.to_zarr`` as Zarr v3 and v2, opened with
``engine="lsio"`` and with ``xr.open_zarr``, lazily and as dask arrays. Every record equals
xarray's ``.isel`` of the same Dataset at the record's origin, also for a Dataset subset with
``isel``/``sel`` and renamed dimensions, through a torch DataLoader with two workers, and
opened from S3 (moto).
Views lsio cannot reproduce exactly are refused with UnsupportedError naming the variable.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import lsio
from lsio.grain import CropSource, GrainCropSource

xr = pytest.importorskip("xarray")
pytest.importorskip("dask.array")

T, LAT, LON = 10, 24, 36
CROP = {"time": 3, "lat": 8, "lon": 12}
VARS = ["t2m", "u10", "count", "z"]


def _dataset():
    rng = np.random.default_rng(25)
    return xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), rng.normal(280, 5, (T, LAT, LON)).astype("float32")),
            "u10": (("time", "lat", "lon"), rng.standard_normal((T, LAT, LON))),
            "count": (("time", "lat", "lon"), rng.integers(0, 1000, (T, LAT, LON)).astype("int16")),
            "z": (("lat", "lon"), rng.standard_normal((LAT, LON)).astype("float32")),
        },
        coords={"time": np.arange(T), "lat": np.linspace(-60, 60, LAT), "lon": np.arange(LON) * 10.0},
        attrs={"title": "era5-like"},
    )


@pytest.fixture(scope="module", params=[3, 2], ids=["v3", "v2"])
def store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("xrcrops") / f"era5_v{request.param}.zarr"
    ds = _dataset()
    enc = {v: {"chunks": tuple(min(7, n) for n in ds[v].shape)} for v in ds.data_vars}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), zarr_format=request.param, encoding=enc, mode="w")
    return str(path)


OPENERS = {
    "lsio": lambda p: xr.open_dataset(p, engine="lsio"),
    "lsio-dask": lambda p: xr.open_dataset(p, engine="lsio", chunks={}),
    "zarr": lambda p: xr.open_zarr(p, chunks=None),
    "zarr-dask": lambda p: xr.open_zarr(p),
}


def crop_of(view, var, origin, crop):
    """xarray's own values of ``var`` at ``origin`` (positions in ``view``)."""
    return view[var].isel({d: slice(int(o), int(o) + crop[d]) for d, o in zip(view[var].dims, origin)}).values


def assert_records_equal_isel(src, view, names, crop, n):
    keys = list(range(n))
    batch = src.read_batch(keys)
    starts = src.starts(keys)
    offsets = src.offsets
    for i in keys:
        origin = {}
        for j, v in enumerate(names):
            pos = starts[j][i] - np.asarray(offsets[j], dtype=np.int64)
            for d, o in zip(view[v].dims, pos):
                assert origin.setdefault(d, int(o)) == int(o), (v, d)  # one origin per dimension name
            want = crop_of(view, v, pos, crop)
            got = batch[v][i] if isinstance(batch, dict) else batch[i]
            assert got.shape == want.shape, (i, v)
            np.testing.assert_array_equal(got, want, err_msg=f"record {i} {v}")
    return starts


@pytest.mark.parametrize("opener", list(OPENERS))
def test_every_record_equals_xarray_isel(store, opener):
    ds = OPENERS[opener](store)
    src = CropSource(ds, CROP, variables=VARS, length=30, seed=7)
    assert src.dims == ["time", "lat", "lon"]
    assert [a.path for a in src.arrays] == [f"{store}/{v}" for v in VARS]
    assert src.offsets == [(0, 0, 0)] * 3 + [(0, 0)]
    starts = assert_records_equal_isel(src, ds, VARS, CROP, 30)
    t, la, lo = (starts[0][:, d] for d in range(3))
    assert t.max() > 0 and la.max() > 0 and lo.max() > 0
    assert t.max() <= T - 3 and la.max() <= LAT - 8 and lo.max() <= LON - 12


def test_default_variables_are_the_data_variables(store):
    ds = xr.open_dataset(store, engine="lsio")
    src = CropSource(ds, CROP, length=4)
    assert src._names == list(ds.data_vars)
    assert_records_equal_isel(src, ds, list(ds.data_vars), CROP, 4)


@pytest.mark.parametrize("opener", ["lsio", "zarr"])
def test_a_subset_dataset_is_cropped_inside_its_window(store, opener):
    ds = OPENERS[opener](store)
    views = {
        "isel": ds.isel(time=slice(2, 9), lat=slice(5, None), lon=slice(3, 30)),
        "sel": ds.sel(lat=slice(-30.0, 45.0), lon=slice(50.0, None)),
        "isel twice": ds.isel(time=slice(1, None)).isel(time=slice(2, 8), lon=slice(4, 20)),
        "contiguous list": ds.isel(time=[3, 4, 5, 6], lat=slice(1, 23)),
        "renamed": ds.rename(lat="latitude", lon="longitude").isel(latitude=slice(4, 20)),
    }
    for label, view in views.items():
        crop = {d: min(n, {"time": 3}.get(d, 8)) for d, n in view.sizes.items()}
        src = CropSource(view, crop, variables=["t2m", "z", "count"], length=25, seed=1)
        assert src.dims == list(view["t2m"].dims), label
        off = src.offsets[0]
        assert any(off), label
        starts = assert_records_equal_isel(src, view, ["t2m", "z", "count"], crop, 25)
        # Origins stay inside the view: never a crop of data the Dataset does not show.
        for d, (o, n) in enumerate(zip(off, view["t2m"].shape)):
            assert starts[0][:, d].min() >= o and starts[0][:, d].max() + crop[view["t2m"].dims[d]] <= o + n, label
        assert "[" in repr(src), label  # the window is in the repr (Grain checkpoints)


def test_conversions_and_origins_are_per_variable_of_the_view(store):
    # cache=False: xarray does not keep what the statistics read (kept values are refused below).
    ds = xr.open_dataset(store, engine="lsio", cache=False).isel(time=slice(4, None))
    stats = {v: (float(ds[v].mean()), float(ds[v].std())) for v in ("t2m", "u10")}
    src = CropSource(ds, CROP, variables=["t2m", "u10"], origins=[[0, 0, 0], [3, 16, 24]], dtype="float32",
                     scale={v: 1 / s for v, (m, s) in stats.items()},
                     offset={v: -m / s for v, (m, s) in stats.items()}, stack=True)
    batch = src.read_batch([0, 1])
    assert batch.shape == (2, 2, 3, 8, 12) and batch.dtype == np.float32
    for i, o in enumerate([(0, 0, 0), (3, 16, 24)]):
        for c, v in enumerate(("t2m", "u10")):
            m, s = stats[v]
            want = (crop_of(ds, v, o, CROP).astype(np.float64) * (1 / s) + (-m / s)).astype(np.float32)
            np.testing.assert_array_equal(batch[i, c], want, err_msg=f"{i} {v}")
    with pytest.raises(ValueError, match="outside"):
        CropSource(ds, CROP, variables=["t2m"], origins=[[4, 0, 0]])  # the view has 6 times: 4 + 3 > 6


def test_a_dataarray_and_grain_source(store):
    ds = xr.open_dataset(store, engine="lsio").isel(lat=slice(2, 20))
    src = GrainCropSource(ds["t2m"], CROP, length=6, seed=3)
    st = src.starts(range(6))[0] - np.asarray(src.offsets[0])
    for i in range(6):
        np.testing.assert_array_equal(src[i], crop_of(ds, "t2m", st[i], CROP))
    back = pickle.loads(pickle.dumps(src))  # Grain's mp_prefetch pickles the source
    assert repr(back) == repr(src)
    np.testing.assert_array_equal(back[5], src[5])


def test_the_source_outlives_the_dataset(store):
    ds = xr.open_dataset(store, engine="lsio")
    src = CropSource(ds, CROP, variables=["t2m"], length=3, seed=2)
    want = src.read_batch([0, 1, 2])["t2m"]
    ds.close()  # closes the Dataset's lsio arrays; the source has handles of its own
    np.testing.assert_array_equal(src.read_batch([0, 1, 2])["t2m"], want)


def test_a_subgroup_opened_with_open_zarr_is_read_at_its_path(tmp_path):
    # zarr's group= is not in ds.encoding["source"]; the variable's own array path is used,
    # never the root's array of the same name.
    root = str(tmp_path / "g.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _dataset().to_zarr(root, mode="w")
        (_dataset()[["t2m"]] * 0 + 1).to_zarr(root, group="sub", mode="w")
    for view in (xr.open_zarr(root, group="sub", chunks=None), xr.open_dataset(root, engine="lsio", group="sub")):
        src = CropSource(view, CROP, variables=["t2m"], length=4, seed=0)
        assert src.arrays[0].path.endswith("sub/t2m")
        assert (src.read_batch(range(4))["t2m"] == 1).all()


def test_torch_dataloader_two_workers(store):
    torch = pytest.importorskip("torch")
    from lsio.torch import CropDataset, CropSampler, collate

    ds = xr.open_dataset(store, engine="lsio").isel(time=slice(1, 9), lon=slice(6, None))
    names = ["t2m", "z", "count"]
    data = CropDataset(ds, CROP, variables=names, length=20, seed=5)
    loader = torch.utils.data.DataLoader(data, batch_size=4, sampler=CropSampler(data, shuffle=False),
                                         collate_fn=collate, num_workers=2)
    seen = 0
    for batch in loader:
        for j in range(batch["t2m"].shape[0]):
            k = seen + j
            for v, st, off in zip(names, data.source.starts([k]), data.source.offsets):
                want = crop_of(ds, v, st[0] - np.asarray(off), CROP)
                np.testing.assert_array_equal(batch[v][j].numpy(), want, err_msg=f"{k} {v}")
        seen += batch["t2m"].shape[0]
    assert seen == 20


# -- views lsio cannot reproduce: refused, naming the variable ---------------------------------


def refused(match, obj, variables=("t2m",), crop=None):
    with pytest.raises(lsio.UnsupportedError, match=match) as e:
        CropSource(obj, crop or CROP, variables=None if obj.__class__.__name__ == "DataArray" else list(variables),
                   length=2)
    assert isinstance(e.value, ValueError)
    return str(e.value)


def test_values_in_memory_are_refused(store):
    msg = refused("variable 't2m': its values are in memory", _dataset())  # built in memory
    assert "engine='lsio'" in msg  # says what is supported
    refused("in memory", xr.open_dataset(store, engine="lsio").load())
    ds = xr.open_dataset(store, engine="lsio")
    ds["t2m"].values  # xarray keeps the loaded values: they may have been edited since
    refused("variable 't2m': its values are in memory", ds)
    refused("variable 'lat'", xr.open_dataset(store, engine="lsio"), variables=["lat"], crop={"lat": 2})  # an index


def test_views_that_are_not_a_window_are_refused(store):
    ds = xr.open_dataset(store, engine="lsio")
    refused("dimension 'lon' is selected with step 2", ds.isel(lon=slice(None, None, 2)))
    refused("step -1", ds.isel(lat=slice(None, None, -1)))
    refused("not one ascending run", ds.sortby("lat", ascending=False))
    refused("not one ascending run", ds.isel(time=[0, 2, 1]))
    refused("dropped by an integer selection", ds.isel(time=0), crop={"lat": 2, "lon": 2})
    refused("transposed", ds.transpose("lon", "lat", "time"))
    refused("dask array computed after chunking", xr.open_dataset(store, engine="lsio", chunks={}).isel(time=slice(1, 5)))
    refused("dask array computed after chunking", xr.open_zarr(store).sel(lat=slice(0, None)))
    refused("dask array computed after chunking", xr.open_dataset(store, engine="lsio", chunks={})["t2m"] * 2)
    refused("inline_array=True", xr.open_dataset(store, engine="lsio", chunks={}, inline_array=True))


def test_decoded_values_are_refused(tmp_path):
    p = str(tmp_path / "cf.zarr")
    ds = _dataset()
    ds["packed"] = ds["count"].astype("float64") * 0.5 + 1.0
    ds["packed"].encoding = {"scale_factor": 0.5, "add_offset": 1.0, "dtype": "int16", "_FillValue": -1}
    ds["when"] = ("time", np.arange(T).astype("datetime64[D]").astype("datetime64[ns]"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(p, mode="w")
    decoded = xr.open_dataset(p, engine="lsio")
    refused("variable 'packed': xarray decodes its stored values", decoded, ["packed"])
    refused("variable 'when'", decoded, ["when"], crop={"time": 2})
    # The stored values, undecoded, are what lsio reads.
    raw = xr.open_dataset(p, engine="lsio", mask_and_scale=False, decode_times=False)
    src = CropSource(raw, CROP, variables=["packed", "t2m"], length=5, seed=4)
    assert_records_equal_isel(src, raw, ["packed", "t2m"], CROP, 5)


def test_other_stores_and_bad_arguments_are_refused(store):
    zarr = pytest.importorskip("zarr")
    mem = zarr.storage.MemoryStore()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _dataset().to_zarr(mem)
    refused("variable 't2m': it was opened by zarr-python from a MemoryStore", xr.open_zarr(mem, chunks=None))
    ds = xr.open_dataset(store, engine="lsio")
    with pytest.raises(ValueError, match=r"\['nope'\] are not in the Dataset"):
        CropSource(ds, CROP, variables=["t2m", "nope"], length=2)
    with pytest.raises(TypeError, match="list of names"):
        CropSource(ds, CROP, variables="t2m", length=2)
    with pytest.raises(ValueError, match="a DataArray is one variable"):
        CropSource(ds["t2m"], CROP, variables=["t2m"], length=2)
    with pytest.raises(ValueError, match="no size for dimension"):
        CropSource(ds, {"time": 2, "lat": 2}, variables=["t2m"], length=2)


def test_a_dataset_opened_from_s3(store, moto_s3):
    # engine="lsio" on a URL: the source's handles keep the URL and storage options (they
    # pickle as such to DataLoader and Grain workers).
    bucket = moto_s3.create_bucket("lsio-xr-crops", public=True)  # an existing one is fine
    name = store.rstrip("/").rsplit("/", 1)[-1]
    moto_s3.upload_dir(store, bucket, name)
    so = {"anon": True, "endpoint_url": moto_s3.endpoint_url, "timeout": 5, "retries": 1}
    ds = xr.open_dataset(f"s3://{bucket}/{name}", engine="lsio", storage_options=so).isel(lat=slice(3, None))
    src = pickle.loads(pickle.dumps(CropSource(ds, CROP, variables=["t2m", "z"], length=6, seed=8)))
    assert src.arrays[0].path.startswith("s3://")
    assert_records_equal_isel(src, ds, ["t2m", "z"], CROP, 6)
