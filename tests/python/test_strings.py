"""Fixed-width string arrays: Zarr v3 ``fixed_length_utf32`` (numpy ``<U``) and
``null_terminated_bytes`` (``|S``) as zarr-python 3 writes them, Zarr v2 ``<U``/``>U``/``|S``,
read through the same engine as numbers (strings are fixed-size elements) and compared with
zarr-python: whole reads, selections, crops, fill values (unicode beyond the BMP included),
big-endian UTF-32, sharding. xarray datasets with string coordinates (what ``to_zarr`` writes
for a ``station=["AAA", ...]`` coordinate, v3 and v2) through ``engine="lsio"`` are
``identical()`` to ``xr.open_zarr``. Variable-length strings (v3 ``string``, v2 object
``vlen-utf8``) are read by :class:`lsio.StringArray` (whole chunks, on the calling thread), in
groups, over HTTP and through xarray; other unreadable variables make the xarray backend name
the variable to drop.
"""

from __future__ import annotations

import warnings

import json

import numpy as np
import pytest
import zarr

import lsio
from selections import crop_slices, random_crops, random_keys

warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification.*")

WORDS = ["", "a", "ü", "bcd", "é€😀", "zz", "long!", "日本"]


def _data(dt: str, shape, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(WORDS), size=shape)
    words = np.array(WORDS, dtype=object)[picks]
    if dt[1] == "S":
        return np.array([w.encode("utf-8")[: int(dt[2:])] for w in words.ravel()], dtype=dt).reshape(shape)
    n = int(dt[2:])
    return np.array([w[:n] for w in words.ravel()], dtype=dt).reshape(shape)


CASES = [
    # (zarr_format, dtype, fill, shards)
    (3, "<U4", "ab", None),
    (3, "<U3", "é€😀", (8, 8)),
    (3, ">U2", "", None),
    (3, "|S5", b"xy", None),
    (3, "|S8", b"", (8, 4)),
    (2, "<U4", "ab", None),
    (2, ">U3", None, None),
    (2, "|S5", b"xy", None),
    (2, "|S2", None, None),
]


@pytest.mark.parametrize("fmt,dt,fill,shards", CASES, ids=[f"v{c[0]}-{c[1]}-{c[3] is not None}" for c in CASES])
@pytest.mark.parametrize("threads", [1, 2])
def test_fixed_width_strings_match_zarr_python(tmp_path, fmt, dt, fill, shards, threads):
    path = tmp_path / "s.zarr"
    shape = (13, 11)
    kw = {"shards": shards} if shards else {}
    z = zarr.create_array(str(path), shape=shape, chunks=(4, 4), dtype=dt, zarr_format=fmt, fill_value=fill, **kw)
    data = _data(dt, shape, len(dt) + fmt)
    z[:9, 2:] = data[:9, 2:]  # the rest is missing: the fill value
    want = z[...]
    arr = lsio.open(str(path), threads=threads)
    assert arr.dtype == np.dtype(dt).newbyteorder("=") and arr.dtype.isnative
    got = arr[...]
    assert got.dtype == arr.dtype
    assert np.array_equal(got, want.astype(arr.dtype))
    expected_fill = fill if fill is not None else np.zeros((), dt)[()]
    assert arr.fill_value == np.asarray(expected_fill, dtype=arr.dtype)
    for key in random_keys(len(dt), shape, 10):
        assert np.array_equal(arr[key], want[key].astype(arr.dtype)), key
    starts, crop = random_crops(3, shape, arr.chunks)
    crops = arr.read_crops(starts, crop)
    assert np.array_equal(crops, np.stack([want[crop_slices(s, crop)] for s in starts]).astype(arr.dtype))


@pytest.mark.parametrize("dt", ["<U3", "|S3"])
def test_zarr_python_2_fill_value_zero_on_strings_reads_as_empty(tmp_path, dt):
    """zarr-python 2.1 wrote `"fill_value": 0` for fixed-width string arrays (numpy's zero of
    the dtype). zarr-python 3 refuses to open them; lsio reads missing chunks as that zero,
    the empty string, in the engine, a group listing and the xarray backend alike."""
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=2)
    z = g.create_array("s", shape=(6,), chunks=(2,), dtype=dt, fill_value=None, compressors=None)
    path = tmp_path / "g.zarr" / "s"
    z[:2] = ["ab", "c"] if dt[1] == "U" else [b"ab", b"c"]
    want = z[...]  # the chunks past the first are missing: empty strings
    meta = json.loads((path / ".zarray").read_text())
    meta["fill_value"] = 0
    (path / ".zarray").write_text(json.dumps(meta))
    with pytest.raises(Exception):
        zarr.open_array(str(path), mode="r")[...]
    arr = lsio.open(str(path))
    assert np.array_equal(arr[...], want.astype(arr.dtype))
    assert arr.fill_value == np.zeros((), dt)[()]
    root = lsio.open_group(str(tmp_path / "g.zarr"))
    assert np.array_equal(root["s"][...], want.astype(arr.dtype))
    xr = pytest.importorskip("xarray")
    meta_attrs = tmp_path / "g.zarr" / "s" / ".zattrs"
    meta_attrs.write_text(json.dumps({"_ARRAY_DIMENSIONS": ["x"]}))
    ds = xr.open_dataset(str(tmp_path / "g.zarr"), engine="lsio", consolidated=False)
    assert np.array_equal(ds["s"].values, want)


def test_strings_cannot_be_scaled(tmp_path):
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(4,), chunks=(2,), dtype="<U2")
    z[...] = ["a", "b", "c", "d"]
    arr = lsio.open(str(tmp_path / "s.zarr"))
    with pytest.raises((TypeError, ValueError)):
        arr.read(..., out=np.empty(4, np.float32))


@pytest.mark.parametrize("fmt", [3, 2])
def test_xarray_string_coordinates(tmp_path, fmt):
    xr = pytest.importorskip("xarray")
    ds = xr.Dataset({"t": (("time", "station"), np.arange(12.0).reshape(4, 3))},
                    coords={"station": ["AAA", "BB", "C"], "name": ("station", ["x", "yy", "zzz"]),
                            "time": np.arange(4)},
                    attrs={"source": "test"})
    path = tmp_path / "ds.zarr"
    ds.to_zarr(path, zarr_format=fmt)
    ref = xr.open_zarr(path).load()
    got = xr.open_dataset(path, engine="lsio").load()
    assert got.identical(ref), (got, ref)
    assert list(got.station.values) == ["AAA", "BB", "C"]
    assert got.sel(station="BB").t.values.tolist() == [1.0, 4.0, 7.0, 10.0]


VLEN_CASES = [(3, "C", None), (3, "C", "zstd"), (2, "C", "zstd"), (2, "F", "blosc"), (2, "C", None)]


@pytest.mark.parametrize("fmt,order,comp", VLEN_CASES, ids=[f"v{c[0]}-{c[1]}-{c[2]}" for c in VLEN_CASES])
def test_variable_length_strings_match_zarr_python(tmp_path, fmt, order, comp):
    from numcodecs import Blosc, Zstd

    path = tmp_path / "v.zarr"
    kw = {"order": order} if fmt == 2 else {}
    if comp is None:
        kw["compressors"] = None
    elif fmt == 2:
        kw["compressors"] = Zstd(level=1) if comp == "zstd" else Blosc(cname="lz4")
    z = zarr.create_array(str(path), shape=(9, 7), chunks=(4, 3), dtype=str, zarr_format=fmt, **kw)
    data = _data("<U5", (9, 7), 11 + fmt).astype(object)
    z[:6, 1:] = data[:6, 1:]
    want = z[...]
    arr = lsio.open(str(path))
    assert isinstance(arr, lsio.StringArray)
    assert arr.shape == (9, 7) and arr.chunks == (4, 3) and arr.zarr_format == fmt
    assert np.array_equal(arr[...], want) and arr[...].dtype == want.dtype
    for key in random_keys(5 + fmt, (9, 7), 12):
        assert np.array_equal(arr[key], want[key]), key
    assert arr[5, 6] == want[5, 6] and np.array_equal(np.asarray(arr), want)
    with pytest.raises(lsio.BoundsError):
        arr[9, 0]
    again = __import__("pickle").loads(__import__("pickle").dumps(arr))
    assert np.array_equal(again[...], want)


def test_variable_length_strings_in_groups_over_http_and_xarray(tmp_path, nginx_server):
    xr = pytest.importorskip("xarray")
    root = tmp_path / "www"
    ds = xr.Dataset({"t": (("station",), np.arange(3.0))},
                    coords={"station": np.array(["AAA", "BB", "ü😀"], dtype=object)})
    ds.to_zarr(root / "ds.zarr", zarr_format=3, consolidated=True)
    ref = xr.open_zarr(root / "ds.zarr").load()
    got = xr.open_dataset(root / "ds.zarr", engine="lsio").load()
    assert got.identical(ref)
    g = lsio.open_group(root / "ds.zarr")
    assert isinstance(g["station"], lsio.StringArray)
    server = nginx_server(root)
    remote = lsio.open(server.url("ds.zarr/station"))
    assert list(remote[...]) == ["AAA", "BB", "ü😀"]
    assert list(lsio.open_group(server.url("ds.zarr"))["station"][::-1]) == ["ü😀", "BB", "AAA"]


def test_corrupt_and_unsupported_variable_length_strings(tmp_path):
    path = tmp_path / "v.zarr"
    z = zarr.create_array(str(path), shape=(4,), chunks=(2,), dtype=str, zarr_format=3)
    z[...] = ["a", "b", "c", "d"]
    arr = lsio.open(str(path))
    chunk = path / "c" / "1"
    good = chunk.read_bytes()
    for bad in (good[:-3], b"garbage"):
        chunk.write_bytes(bad)
        with pytest.raises(lsio.CorruptDataError) as info:
            arr[...]
        assert str(chunk) in str(info.value)
        assert list(arr[:2]) == ["a", "b"]
    sharded = tmp_path / "s.zarr"
    zarr.create_array(str(sharded), shape=(4,), chunks=(2,), shards=(4,), dtype=str, zarr_format=3)
    with pytest.raises(lsio.UnsupportedError, match="sharded variable-length strings"):
        lsio.open(str(sharded))


def test_unreadable_variables_make_the_xarray_backend_name_them(tmp_path):
    xr = pytest.importorskip("xarray")
    path = tmp_path / "g.zarr"
    g = zarr.open_group(str(path), mode="w")
    a = g.create_array("label", shape=(3,), chunks=(3,), dtype="<M8[ns]", dimension_names=["x"])
    a[...] = np.array([0, 1, 2], dtype="<M8[ns]")
    v = g.create_array("v", shape=(3,), chunks=(3,), dtype="f4", dimension_names=["x"])
    v[...] = [1, 2, 3]
    with pytest.raises(lsio.UnsupportedError, match=r"drop_variables=\['label'\]"):
        xr.open_dataset(path, engine="lsio")
    ds = xr.open_dataset(path, engine="lsio", drop_variables=["label"])
    assert list(ds.data_vars) == ["v"]


@pytest.mark.parametrize("fmt", [3, 2])
def test_variable_length_strings_take_none_like_numpy(tmp_path, fmt):
    """``None`` (np.newaxis) in a StringArray key inserts an axis exactly where numpy puts it
    (it raised TypeError, or on 1-d arrays a misleading 'too many indices')."""
    for shape, chunks in (((9, 7), (4, 3)), ((6,), (4,))):
        path = tmp_path / f"v{fmt}-{len(shape)}.zarr"
        z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=str, zarr_format=fmt)
        z[...] = _data("<U5", shape, 3).astype(object)
        arr = lsio.open(str(path))
        assert isinstance(arr, lsio.StringArray)
        whole = arr[...]
        keys = [None, (None,), (None, None), (..., None), (None, ...), (None, ..., None), (0, None),
                (None, 0), (slice(1, 4), None), (None, slice(None, None, -2)), (None, -1, None)]
        if len(shape) == 2:
            keys += [(slice(1, 3), None, 2), (None, 1, ..., None), (0, None, slice(2, 6), None),
                     (..., None, 3), (None, None, 2, slice(None, None, 3))]
        for key in keys:
            want = whole[key]
            got = arr[key]
            assert got.shape == np.shape(want), key
            assert np.array_equal(got, want), key
        with pytest.raises(IndexError, match="too many indices"):
            arr[(None, 0) * (len(shape) + 1)]
        with pytest.raises(TypeError):
            arr[True]


@pytest.mark.parametrize("fmt", [3, 2])
def test_variable_length_strings_integer_keys_give_a_str_like_numpy(tmp_path, fmt):
    """An integer for every dimension selects one element: numpy returns it (a str), where
    StringArray returned a 0-d array. Every key is compared with numpy indexing the whole
    array, type included; ``read`` keeps returning arrays."""
    cases = (((9, 7), (4, 3), [(0, 0), (8, 6), (-1, -1), (-9, 2), (np.int64(3), np.int32(-2)),
                               (0,), 0, -1, (0, slice(None)), (..., 2), (2, ...), (1, None, 2), ()]),
             ((6,), (4,), [0, 5, -1, -6, np.int64(4), (2,), (-3,), (...,), slice(1, 2), (None, 1), ()]),
             ((), (), [(), ..., (...,), None, (None,)]))
    for shape, chunks, keys in cases:
        path = tmp_path / f"v{fmt}-{len(shape)}.zarr"
        z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=str, zarr_format=fmt)
        z[...] = _data("<U5", shape, 5).astype(object) if shape else np.array("é€😀", dtype=object)
        arr = lsio.open(str(path))
        assert isinstance(arr, lsio.StringArray)
        whole = np.asarray(arr)
        assert whole.shape == shape
        for key in keys:
            want, got = whole[key], arr[key]
            assert type(got) is type(want), (shape, key, type(got), type(want))
            if isinstance(want, np.ndarray):
                assert got.shape == want.shape and np.array_equal(got, want), (shape, key)
            else:
                assert isinstance(got, str) and got == want, (shape, key)
            assert isinstance(arr.read(key), np.ndarray), key
        if shape:
            with pytest.raises(lsio.BoundsError):
                arr[(shape[0],) + (0,) * (len(shape) - 1)]
