"""Fixed-width string arrays: Zarr v3 ``fixed_length_utf32`` (numpy ``<U``) and
``null_terminated_bytes`` (``|S``) as zarr-python 3 writes them, Zarr v2 ``<U``/``>U``/``|S``,
read through the same engine as numbers (strings are fixed-size elements) and compared with
zarr-python: whole reads, selections, crops, fill values (unicode beyond the BMP included),
big-endian UTF-32, sharding. xarray datasets with string coordinates (what ``to_zarr`` writes
for a ``station=["AAA", ...]`` coordinate, v3 and v2) through ``engine="lsio"`` are
``identical()`` to ``xr.open_zarr``. Variable-length strings (v3 ``string``, v2 object
``vlen-utf8``) still raise UnsupportedError, and the xarray backend names the variable to drop.
"""

from __future__ import annotations

import warnings

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


def test_variable_length_strings_are_unsupported_and_xarray_names_the_variable(tmp_path):
    xr = pytest.importorskip("xarray")
    path = tmp_path / "g.zarr"
    g = zarr.open_group(str(path), mode="w")
    a = g.create_array("label", shape=(3,), chunks=(3,), dtype=str)
    a[...] = ["a", "bb", "ccc"]
    v = g.create_array("v", shape=(3,), chunks=(3,), dtype="f4", dimension_names=["x"])
    v[...] = [1, 2, 3]
    g["label"].update_attributes({})
    with pytest.raises(lsio.UnsupportedError, match="string"):
        lsio.open(str(path), "label")
    with pytest.raises(lsio.UnsupportedError, match=r"drop_variables=\['label'\]"):
        xr.open_dataset(path, engine="lsio")
    ds = xr.open_dataset(path, engine="lsio", drop_variables=["label"])
    assert list(ds.data_vars) == ["v"]
