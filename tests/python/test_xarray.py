"""xarray backend: xr.open_dataset(store, engine="lsio") equals xr.open_zarr."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import zarr

xr = pytest.importorskip("xarray")
pytest.importorskip("dask.array")

import lsio  # noqa: E402
from lsio.xarray_backend import LsioBackendArray, LsioBackendEntrypoint  # noqa: E402


def _write(path, consolidated):
    rng = np.random.default_rng(1)
    root = zarr.open_group(str(path), mode="w", attributes={"title": "weather", "source": "test"})
    t = root.create_array(
        "t2m", shape=(6, 20, 30), chunks=(1, 5, 10), shards=(2, 10, 30), dtype="f4",
        dimension_names=["time", "lat", "lon"], attributes={"units": "K", "long_name": "temperature"},
    )
    t[:4] = rng.normal(280, 5, (4, 20, 30)).astype("f4")  # last shard row stays missing (fill)
    p = root.create_array(
        "precip", shape=(6, 20, 30), chunks=(3, 10, 10), dtype="i2", fill_value=-1,
        dimension_names=["time", "lat", "lon"],
        attributes={"scale_factor": 0.1, "add_offset": 1.0, "_FillValue": -1},
    )
    p[:] = rng.integers(-1, 100, (6, 20, 30)).astype("i2")
    root.create_array("lat", data=np.linspace(-45, 45, 20), dimension_names=["lat"], attributes={"units": "degrees_north"})
    root.create_array("lon", data=np.linspace(0, 348, 30).astype("f4"), dimension_names=["lon"])
    root.create_array("time", data=np.arange(6, dtype="i8"), dimension_names=["time"],
                      attributes={"units": "days since 2000-01-01", "calendar": "standard"})
    root.create_array("mask", data=(rng.random((20, 30)) > 0.5), dimension_names=["lat", "lon"])
    root.create_array("scalar", data=np.array(3.5))
    sub = root.create_group("level2", attributes={"kind": "sub"})
    sub.create_array("z", data=np.arange(8, dtype="u4").reshape(2, 4), dimension_names=["a", "b"])
    if consolidated:
        zarr.consolidate_metadata(str(path))


@pytest.fixture(scope="module", params=[True, False], ids=["consolidated", "listed"])
def store(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("xr") / "w.zarr"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _write(path, request.param)
    return path, request.param


def _ref(path, consolidated, **kw):
    return xr.open_zarr(str(path), consolidated=consolidated, **kw)


def test_engine_is_registered():
    assert "lsio" in xr.backends.list_engines()
    assert isinstance(xr.backends.list_engines()["lsio"], LsioBackendEntrypoint)


@pytest.mark.parametrize("decode", [True, False], ids=["decoded", "raw"])
def test_equals_open_zarr(store, decode):
    path, consolidated = store
    kw = {} if decode else {"mask_and_scale": False, "decode_times": False}
    ds = xr.open_dataset(path, engine="lsio", **kw)
    ref = _ref(path, consolidated, **kw)
    assert set(ds.coords) == {"lat", "lon", "time"}
    assert ds.attrs == {"title": "weather", "source": "test"}
    assert ds["t2m"].dims == ("time", "lat", "lon")
    # lazy until loaded
    assert not ds["t2m"].variable._in_memory
    xr.testing.assert_identical(ds.load(), ref.load())
    if decode:
        assert ds["time"].dtype.kind == "M"
        assert ds["precip"].dtype.kind == "f" and np.isnan(ds["precip"].values).any()


def test_lazy_indexing_matches(store):
    path, consolidated = store
    ds = xr.open_dataset(path, engine="lsio")
    ref = _ref(path, consolidated)
    sel = dict(time=slice(1, 5), lat=slice(3, 17, 2), lon=[1, 5, 29])
    xr.testing.assert_identical(ds.isel(sel).load(), ref.isel(sel).load())
    xr.testing.assert_identical(ds["t2m"].isel(time=-1, lon=slice(None, None, -3)).load(), ref["t2m"].isel(time=-1, lon=slice(None, None, -3)).load())
    xr.testing.assert_identical(ds["t2m"].sel(lat=0.0, method="nearest").load(), ref["t2m"].sel(lat=0.0, method="nearest").load())


def test_dask_chunks_follow_shards(store):
    path, consolidated = store
    ds = xr.open_dataset(path, engine="lsio", chunks={})
    assert ds["t2m"].encoding["preferred_chunks"] == {"time": 2, "lat": 10, "lon": 30}
    assert ds["t2m"].encoding["chunks"] == (1, 5, 10)
    assert ds["t2m"].encoding["shards"] == (2, 10, 30)
    assert ds["t2m"].data.chunksize == (2, 10, 30)
    assert ds["precip"].data.chunksize == (3, 10, 10)
    ref = _ref(path, consolidated)
    xr.testing.assert_identical(ds.compute(), ref.compute())
    xr.testing.assert_allclose(ds["t2m"].mean("time").compute(), ref["t2m"].mean("time").compute())


def test_group_and_single_array(store):
    path, consolidated = store
    sub = xr.open_dataset(path, engine="lsio", group="level2")
    xr.testing.assert_identical(sub.load(), _ref(path, consolidated, group="level2").load())
    one = xr.open_dataset(path / "t2m", engine="lsio")
    assert list(one.data_vars) == ["t2m"]
    np.testing.assert_array_equal(one["t2m"].values, lsio.open(path, "t2m")[:])


def test_drop_variables_and_options(store):
    path, _ = store
    ds = xr.open_dataset(path, engine="lsio", drop_variables=["precip", "mask"], threads=1, io="pread")
    assert "precip" not in ds and "mask" not in ds and "t2m" in ds
    with pytest.raises(ValueError):
        xr.open_dataset(path, engine="lsio", io="bogus")


def test_array_dimensions_attribute_fallback(tmp_path):
    root = zarr.open_group(str(tmp_path / "a.zarr"), mode="w")
    a = root.create_array("v", data=np.arange(6.0).reshape(2, 3), attributes={"_ARRAY_DIMENSIONS": ["row", "col"], "u": 1})
    assert a.metadata.dimension_names is None
    root.create_array("w", data=np.arange(4.0).reshape(2, 2))  # no names at all
    ds = xr.open_dataset(tmp_path / "a.zarr", engine="lsio")
    assert ds["v"].dims == ("row", "col")
    assert ds["v"].attrs == {"u": 1}
    assert ds["w"].dims == ("w_dim_0", "w_dim_1")


def test_backend_array_pickles(store):
    path, _ = store
    ba = LsioBackendArray(lsio.open(path, "t2m"))
    ba2 = pickle.loads(pickle.dumps(ba))
    key = xr.core.indexing.BasicIndexer((slice(0, 2), 3, slice(None, None, 2)))
    np.testing.assert_array_equal(ba2[key], ba[key])
    ds = xr.open_dataset(path, engine="lsio")
    ds2 = pickle.loads(pickle.dumps(ds))
    xr.testing.assert_identical(ds2.load(), ds.load())


def test_unreadable_array_raises_unless_dropped(tmp_path):
    from zarr.codecs import BytesCodec, ShardingCodec
    from zarr.codecs.numcodecs import Delta

    root = zarr.open_group(str(tmp_path / "b.zarr"), mode="w")
    root.create_array("ok", data=np.arange(3), dimension_names=["i"])
    # A delta filter over whole shards, which lsio does not read.
    root.create_array("unreadable", shape=(3,), chunks=(3,), dtype="i4", filters=[Delta(dtype="<i4")],
                      serializer=ShardingCodec(chunk_shape=(3,), codecs=[BytesCodec()]), compressors=None,
                      dimension_names=["i"])
    with pytest.raises(lsio.UnsupportedError):
        xr.open_dataset(tmp_path / "b.zarr", engine="lsio")
    ds = xr.open_dataset(tmp_path / "b.zarr", engine="lsio", drop_variables="unreadable")
    assert list(ds.variables) == ["ok"]


def test_not_guessed():
    assert LsioBackendEntrypoint().guess_can_open("x.zarr") is False


def test_dataset_close_closes_the_arrays(store):
    # Dataset.close() (and `with xr.open_dataset(...)`) gives back lsio's descriptors and
    # index caches: reading a closed dataset's lazy variables then fails, as with netCDF.
    path, consolidated = store
    with xr.open_dataset(str(path), engine="lsio", consolidated=consolidated) as ds:
        want = _ref(path, consolidated)["t2m"].values
        np.testing.assert_array_equal(ds["t2m"].values, want)
        lazy = ds["precip"]
    with pytest.raises(ValueError, match="closed"):
        lazy.values


@pytest.mark.parametrize("zarr_format", [3, 2])
@pytest.mark.parametrize("consolidated", [True, False])
def test_dimension_and_variable_order_follow_open_zarr(tmp_path, zarr_format, consolidated):
    # Dimensions come out in the order the variables use them ((time, lat, lon), as
    # open_zarr gives), not sorted. Variables: with consolidated metadata in its order (the
    # same as open_zarr); without it sorted by name, where open_zarr follows the file
    # system's directory listing (hash order on ext4), which lsio does not imitate: sorted is
    # the same on every file system and object store.
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), np.arange(24, dtype="f4").reshape(2, 3, 4)),
         "sp": (("time", "lat", "lon"), np.ones((2, 3, 4), "f4"))},
        coords={"time": [1, 2], "lat": [10.0, 20.0, 30.0], "lon": np.arange(4.0)},
    )
    path = str(tmp_path / "d.zarr")
    ds.to_zarr(path, zarr_format=zarr_format, consolidated=consolidated, mode="w")
    ref = xr.open_zarr(path, consolidated=consolidated)
    got = xr.open_dataset(path, engine="lsio")
    assert list(got.sizes) == list(ref.sizes) == ["time", "lat", "lon"]
    assert got["t2m"].dims == ref["t2m"].dims == ("time", "lat", "lon")
    if consolidated:
        assert list(got.variables) == list(ref.variables)
    else:
        assert set(got.variables) == set(ref.variables)
        assert list(got.data_vars) == sorted(got.data_vars)
    xr.testing.assert_identical(got.load(), ref.load())


def _codec_store(path, zarr_format):
    """Variables with non-default codecs and levels (what a round trip must keep)."""
    import numcodecs
    from zarr.codecs import BloscCodec, Crc32cCodec, GzipCodec, ZstdCodec

    rng = np.random.default_rng(7)
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), rng.normal(280, 5, (4, 16, 20)).astype("f4")),
         "n": (("time", "lat", "lon"), rng.integers(0, 500, (4, 16, 20)).astype("i2")),
         "z": (("lat", "lon"), rng.standard_normal((16, 20)))},
        coords={"lat": np.arange(16.0), "lon": np.arange(20.0)},
    )
    if zarr_format == 3:
        enc = {"t2m": {"compressors": [ZstdCodec(level=3)], "chunks": (2, 8, 10)},
               "n": {"compressors": [BloscCodec(cname="lz4hc", clevel=7, shuffle="bitshuffle")], "chunks": (1, 8, 10),
                     "shards": (2, 16, 20)},
               "z": {"compressors": [GzipCodec(level=6), Crc32cCodec()], "chunks": (8, 10)}}
    else:
        enc = {"t2m": {"compressors": numcodecs.Zstd(level=3, checksum=True), "chunks": (2, 8, 10)},
               "n": {"compressors": numcodecs.Blosc(cname="zstd", clevel=7, shuffle=2), "chunks": (1, 8, 10),
                     "filters": [numcodecs.Delta(dtype="i2")]},
               "z": {"compressors": numcodecs.Zlib(level=4), "chunks": (8, 10)}}
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(path), zarr_format=zarr_format, encoding=enc, mode="w")


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_to_zarr_round_trip_keeps_codecs_and_levels(tmp_path, zarr_format):
    # ds = xr.open_dataset(p, engine="lsio"); ds.to_zarr(q) used to write zarr-python's
    # defaults (zstd level 0): encoding now carries the codecs as xarray's zarr backend does.
    import warnings

    src, dst = tmp_path / "src.zarr", tmp_path / "dst.zarr"
    _codec_store(src, zarr_format)
    ds = xr.open_dataset(src, engine="lsio")
    ref = xr.open_zarr(src)
    for v in ("t2m", "n", "z"):
        for key in ("compressors", "filters", "serializer"):
            assert (key in ds[v].encoding) == (key in ref[v].encoding), (v, key)
            if key in ref[v].encoding:
                assert ds[v].encoding[key] == ref[v].encoding[key], (v, key)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(str(dst), zarr_format=zarr_format, mode="w")
    for v in ("t2m", "n", "z"):
        a, b = zarr.open_array(str(src / v), mode="r"), zarr.open_array(str(dst / v), mode="r")
        assert b.metadata.zarr_format == zarr_format
        assert b.compressors == a.compressors and b.filters == a.filters, v
        assert b.serializer == a.serializer and b.chunks == a.chunks and b.shards == a.shards, v
        np.testing.assert_array_equal(b[...], a[...])
    if zarr_format == 3:
        assert zarr.open_array(str(dst / "t2m")).compressors[0].level == 3
    else:
        assert zarr.open_array(str(dst / "z")).compressors[0].codec_id == "zlib"
    xr.testing.assert_identical(xr.open_dataset(dst, engine="lsio").load(), ds.load())
