"""lsio.open_group / lsio.Group and lsio.open(group, name)."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import zarr

import lsio


def _write_group(path, consolidated=True):
    root = zarr.open_group(str(path), mode="w", attributes={"title": "demo", "n": 3})
    data = np.arange(4 * 20 * 30, dtype="f4").reshape(4, 20, 30)
    a = root.create_array(
        "t2m", shape=data.shape, chunks=(1, 5, 5), shards=(2, 10, 15), dtype="f4", dimension_names=["time", "y", "x"]
    )
    a[:] = data
    root.create_array("y", data=np.arange(20.0), dimension_names=["y"])
    sub = root.create_group("forecast", attributes={"kind": "sub"})
    sub.create_array("u10", data=np.arange(12, dtype="i2").reshape(3, 4), chunks=(2, 2))
    sub.create_group("deep").create_array("v", data=np.ones(5, dtype="u1"))
    if consolidated:
        zarr.consolidate_metadata(str(path))
    return data


@pytest.fixture(params=[True, False], ids=["consolidated", "listed"])
def group_store(request, tmp_path):
    path = tmp_path / "g.zarr"
    data = _write_group(path, consolidated=request.param)
    return path, data, request.param


def test_listing(group_store):
    path, _, consolidated = group_store
    g = lsio.open_group(path)
    assert g.consolidated is consolidated
    assert g.array_names == ("t2m", "y")
    assert g.group_names == ("forecast",)
    assert set(g) == {"t2m", "y", "forecast"} and len(g) == 3
    assert g.attrs == {"title": "demo", "n": 3}
    assert "t2m" in g and "forecast/u10" in g and "forecast/deep/v" in g
    assert "nope" not in g and "t2m/x" not in g and 3 not in g
    assert [p for p, _ in g.walk_arrays()] == ["forecast/deep/v", "forecast/u10", "t2m", "y"]
    assert g.member_metadata("t2m")["shape"] == [4, 20, 30]
    sub = g["forecast"]
    assert isinstance(sub, lsio.Group)
    assert sub.attrs == {"kind": "sub"} and sub.array_names == ("u10",) and sub.group_names == ("deep",)
    assert sub.consolidated is consolidated
    assert "t2m" in g.tree() and "forecast/" in g.tree()
    assert "t2m" in repr(g)


def test_members_read_like_zarr(group_store):
    path, data, _ = group_store
    g = lsio.open_group(path, threads=1, io="pread")
    t2m = g["t2m"]
    assert isinstance(t2m, lsio.Array)
    np.testing.assert_array_equal(t2m[:], data)
    np.testing.assert_array_equal(g["forecast/u10"][:], zarr.open_array(str(path / "forecast" / "u10"))[:])
    np.testing.assert_array_equal(g["forecast"]["deep"]["v"][:], np.ones(5, dtype="u1"))
    assert dict(g.arrays()).keys() == {"t2m", "y"}
    assert dict(g.groups()).keys() == {"forecast"}
    assert g.get("missing") is None
    with pytest.raises(KeyError, match="t2m"):
        g["missing"]
    with pytest.raises(KeyError):
        g["t2m/inside"]
    with pytest.raises(KeyError):
        g["../g.zarr"]


def test_open_with_name(group_store):
    path, data, _ = group_store
    a = lsio.open(path, "t2m")
    assert a.path == str(path / "t2m")
    np.testing.assert_array_equal(a[1:3, 2:9, ::4], data[1:3, 2:9, ::4])
    b = lsio.open(str(path), "forecast/u10", threads=1)
    assert b.shape == (3, 4)
    c = pickle.loads(pickle.dumps(b))
    np.testing.assert_array_equal(c[:], b[:])
    with pytest.raises(lsio.StorageError):
        lsio.open(path, "nope")
    with pytest.raises(ValueError):
        lsio.open(path, "../x")
    with pytest.raises(TypeError):
        lsio.open(path, 3)


def test_open_group_path_without_name_lists_arrays(group_store):
    path, _, _ = group_store
    with pytest.raises(lsio.FormatError) as ei:
        lsio.open(path)
    msg = str(ei.value)
    assert "group" in msg
    for name in ("t2m", "y", "forecast/u10", "forecast/deep/v"):
        assert repr(name) in msg
    assert ei.value.path is not None and ei.value.path.endswith("zarr.json")
    with pytest.raises(lsio.FormatError, match="no arrays|group"):
        lsio.open(path / "forecast" / "deep" / "v" / "..")  # a group path again


def test_open_group_errors(tmp_path, group_store):
    path, _, consolidated = group_store
    with pytest.raises(lsio.FormatError, match="array"):
        lsio.open_group(path / "t2m")
    with pytest.raises(lsio.StorageError):
        lsio.open_group(tmp_path / "absent")
    if not consolidated:
        with pytest.raises(lsio.FormatError, match="consolidated"):
            lsio.open_group(path, consolidated=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "zarr.json").write_text("{not json")
    with pytest.raises(lsio.FormatError):
        lsio.open_group(bad)
    (bad / "zarr.json").write_text(json.dumps({"zarr_format": 2, "node_type": "group"}))
    with pytest.raises(lsio.FormatError, match="zarr_format 2"):
        lsio.open_group(bad)
    (bad / "zarr.json").write_text(json.dumps({"zarr_format": 4, "node_type": "group"}))
    with pytest.raises(lsio.UnsupportedError, match="zarr_format is 4"):
        lsio.open_group(bad)


def test_zarr_v2_group_opens(tmp_path):
    # The full v2 group tests are in test_zarr_v2.py; this one pins the entry point.
    zarr.open_group(str(tmp_path / "v2"), mode="w", zarr_format=2).create_array("a", shape=(3,), dtype="i4")
    g = lsio.open_group(tmp_path / "v2")
    assert g.array_names == ("a",)


def test_consolidated_metadata_is_used_and_can_be_bypassed(tmp_path):
    path = tmp_path / "g.zarr"
    _write_group(path, consolidated=True)
    # an array added after consolidation is invisible to consolidated listing only
    zarr.open_group(str(path), mode="a", use_consolidated=False).create_array("late", data=np.arange(3))
    assert "late" not in lsio.open_group(path).array_names
    assert "late" in lsio.open_group(path, consolidated=False).array_names
    # consolidated listing does not read the children's zarr.json
    (path / "y" / "zarr.json").write_text("garbage")
    g = lsio.open_group(path)
    assert g.array_names == ("t2m", "y")
    with pytest.raises(lsio.FormatError):
        g["y"]


def test_non_node_directories_are_ignored(tmp_path):
    path = tmp_path / "g.zarr"
    _write_group(path, consolidated=False)
    (path / "notes").mkdir()
    (path / "notes" / "readme.txt").write_text("hi")
    assert "notes" not in lsio.open_group(path)


def test_a_member_with_malformed_metadata_is_left_out_with_a_warning_local_and_s3(tmp_path, moto_s3):
    path = tmp_path / "g.zarr"
    _write_group(path, consolidated=False)
    (path / "y" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "array", ')  # cut short
    bucket = moto_s3.create_bucket("lsio-malformed-member")
    moto_s3.upload_dir(path, bucket, "g.zarr")
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
          "secret": moto_s3.secret_access_key, "region": moto_s3.region}
    for where, opts in ((str(path), None), (f"s3://{bucket}/g.zarr", so)):
        with pytest.warns(UserWarning, match=r"y.* is left out of its group's members: .*not valid JSON"):
            g = lsio.open_group(where, storage_options=opts)
            assert g.array_names == ("t2m",) and g.group_names == ("forecast",)
        with pytest.raises(lsio.FormatError, match="not valid JSON"):
            g["y"]
        np.testing.assert_array_equal(g["forecast/u10"][...], np.arange(12, dtype="i2").reshape(3, 4))
