"""Multi-variable crops aligned by dimension name (lsio.grain.CropSource, lsio.torch).

An ERA5-like dataset written by xarray (Zarr v3 and v2): t2m, u10, v10 over (time, lat, lon),
a variable stored as (lon, lat, time), and a static orography z(lat, lon). Every record of a
CropSource over all of them, with crops given by dimension name, equals xarray's ``.isel`` of
each variable at the record's origin; the same through ``lsio.torch.CropDataset`` in two
DataLoader workers. Arrays that cannot be aligned are refused with a message saying what to
do, never cropped at unrelated places.
"""

from __future__ import annotations

import numpy as np
import pytest

import lsio
from lsio.grain import CropSource

xr = pytest.importorskip("xarray")

T, LAT, LON = 12, 40, 56
CROP = {"time": 3, "lat": 16, "lon": 24}


def era5_like(path, zarr_format):
    rng = np.random.default_rng(11)
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), rng.standard_normal((T, LAT, LON)).astype("float32")),
            "u10": (("time", "lat", "lon"), rng.standard_normal((T, LAT, LON)).astype("float32")),
            "v10": (("time", "lat", "lon"), rng.standard_normal((T, LAT, LON)).astype("float64")),
            "sst": (("lon", "lat", "time"), rng.integers(0, 1000, (LON, LAT, T)).astype("uint16")),
            "z": (("lat", "lon"), rng.standard_normal((LAT, LON)).astype("float32")),
        }
    )
    enc = {v: {"chunks": tuple(min(8, n) for n in ds[v].shape)} for v in ds.data_vars}
    ds.to_zarr(str(path), zarr_format=zarr_format, encoding=enc, consolidated=False)
    return ds


def isel(ds, var, starts):
    dims = ds[var].dims
    return ds[var].isel({d: slice(int(s), int(s) + CROP[d]) for d, s in zip(dims, starts)}).values


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_every_record_equals_xarray_isel(tmp_path, zarr_format):
    p = tmp_path / f"era5_v{zarr_format}.zarr"
    ds = era5_like(p, zarr_format)
    arrays = {v: lsio.open(str(p), v) for v in ds.data_vars}
    assert arrays["sst"].dimension_names == ("lon", "lat", "time")
    src = CropSource(arrays, CROP, length=40, seed=3)
    assert src.dims == ["time", "lat", "lon"]
    assert src.crop_shapes[list(arrays).index("z")] == (16, 24)
    assert src.crop_shapes[list(arrays).index("sst")] == (24, 16, 3)
    keys = list(range(len(src)))
    starts = src.starts(keys)
    batch = src.read_batch(keys)
    names = list(arrays)
    for i in keys:
        origin = {}
        for v, st in zip(names, starts):
            for d, s in zip(ds[v].dims, st[i]):
                assert origin.setdefault(d, int(s)) == int(s), (v, d)  # one origin per name
            np.testing.assert_array_equal(batch[v][i], isel(ds, v, st[i]), err_msg=f"record {i} {v}")
    # Origins cover the valid range of every dimension (not stuck at 0 anywhere).
    t, la, lo = (np.asarray(starts[0])[:, d] for d in range(3))
    assert t.max() > 0 and la.max() > 0 and lo.max() > 0
    assert t.max() <= T - 3 and la.max() <= LAT - 16 and lo.max() <= LON - 24


def test_torch_dataset_in_two_workers_is_aligned(tmp_path):
    torch = pytest.importorskip("torch")
    from lsio.torch import CropDataset, CropSampler, collate

    p = tmp_path / "era5.zarr"
    ds = era5_like(p, 3)
    names = ["t2m", "z", "sst"]
    data = CropDataset({v: lsio.open(str(p), v) for v in names}, CROP, length=24, seed=5)
    loader = torch.utils.data.DataLoader(data, batch_size=6, sampler=CropSampler(data, shuffle=False),
                                         collate_fn=collate, num_workers=2)
    seen = 0
    for batch in loader:
        for j in range(batch["t2m"].shape[0]):
            k = seen + j
            starts = data.source.starts([k])
            for v, st in zip(names, starts):
                np.testing.assert_array_equal(batch[v][j].numpy(), isel(ds, v, st[0]), err_msg=f"{k} {v}")
        seen += batch["t2m"].shape[0]
    assert seen == 24


def test_explicit_origins_are_per_dimension_name(tmp_path):
    p = tmp_path / "era5.zarr"
    ds = era5_like(p, 3)
    src = CropSource({v: lsio.open(str(p), v) for v in ("t2m", "z")}, CROP, origins=[[1, 2, 3], [0, 24, 32]])
    got = src.read_batch([0, 1])
    np.testing.assert_array_equal(got["z"][1], ds["z"].values[24:40, 32:56])
    np.testing.assert_array_equal(got["t2m"][0], ds["t2m"].values[1:4, 2:18, 3:27])
    with pytest.raises(ValueError, match="one column per dimension"):
        CropSource({v: lsio.open(str(p), v) for v in ("t2m", "z")}, CROP, origins=[[1, 2]])


def write_plain(path, shape, dims=None):
    import zarr

    z = zarr.create_array(str(path), shape=shape, chunks=shape, dtype="float32", dimension_names=dims)
    z[...] = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    return lsio.open(str(path))


def test_arrays_that_cannot_be_aligned_are_refused(tmp_path):
    x = write_plain(tmp_path / "x.zarr", (10, 20, 30))
    z = write_plain(tmp_path / "z.zarr", (20, 30))
    # No names and no equal leading dimension: the old default cropped them unrelated.
    with pytest.raises(ValueError, match="shared_dims=0"):
        CropSource([x, z], [(2, 5, 5), (5, 5)], length=4)
    independent = CropSource([x, z], [(2, 5, 5), (5, 5)], length=4, shared_dims=0)  # the explicit choice
    assert independent.dims is None and independent.shared_dims == 0
    a = write_plain(tmp_path / "a.zarr", (10, 20, 30), ("time", "lat", "lon"))
    b = write_plain(tmp_path / "b.zarr", (4, 5), ("x", "y"))
    with pytest.raises(ValueError, match="shares no dimension name"):
        CropSource([a, b], [(2, 5, 5), (2, 2)], length=4)
    c = write_plain(tmp_path / "c.zarr", (21, 30), ("lat", "lon"))
    with pytest.raises(ValueError, match="'lat' has size 20"):
        CropSource({"a": a, "c": c}, {"time": 2, "lat": 5, "lon": 5}, length=4)
    with pytest.raises(ValueError, match=r"no size for dimension\(s\) \['lon'\]"):
        CropSource(a, {"time": 2, "lat": 5}, length=4)
    with pytest.raises(ValueError, match="no array has"):
        CropSource(a, {"time": 2, "lat": 5, "lon": 5, "level": 1}, length=4)


def test_named_single_array_keeps_its_origins(tmp_path):
    """Alignment by name draws the same origins as before for one array (and for arrays whose
    names match position by position), so existing seeds give the same crops."""
    a = write_plain(tmp_path / "a.zarr", (10, 20, 30), ("time", "lat", "lon"))
    u = write_plain(tmp_path / "u.zarr", (10, 20, 30))
    named = CropSource(a, (2, 5, 5), length=16, seed=9).starts(range(16))[0]
    unnamed = CropSource(u, (2, 5, 5), length=16, seed=9).starts(range(16))[0]
    np.testing.assert_array_equal(named, unnamed)


def test_normalised_channels_in_one_tensor(tmp_path):
    """Per-variable normalisation and channel stacking happen in the engine's copy: each
    variable is converted (value * scale + offset, in double precision, rounded once) straight
    into its channel of one (N, C, *crop) batch."""
    p = tmp_path / "era5.zarr"
    ds = era5_like(p, 3)
    names = ["t2m", "u10", "v10"]
    stats = {v: (float(ds[v].mean()), float(ds[v].std())) for v in names}
    src = CropSource({v: lsio.open(str(p), v) for v in names}, CROP, length=10, seed=1, dtype="float32",
                     scale={v: 1 / s for v, (m, s) in stats.items()},
                     offset={v: -m / s for v, (m, s) in stats.items()}, stack=True)
    assert src.stacked and src.out_dtypes == [np.dtype("float32")] * 3
    keys = list(range(10))
    batch = src.read_batch(keys)
    assert batch.shape == (10, 3, 3, 16, 24) and batch.dtype == np.float32
    starts = src.starts(keys)
    for i in keys:
        for c, v in enumerate(names):
            m, s = stats[v]
            want = (isel(ds, v, starts[c][i]).astype(np.float64) * (1 / s) + (-m / s)).astype(np.float32)
            np.testing.assert_array_equal(batch[i, c], want, err_msg=f"{i} {v}")
    assert src[3].shape == (3, 3, 16, 24)
    with pytest.raises(ValueError, match="stack=True needs one crop shape"):
        CropSource({v: lsio.open(str(p), v) for v in ("t2m", "z")}, CROP, length=2, stack=True)


def test_torch_dataset_converts_and_stacks(tmp_path):
    torch = pytest.importorskip("torch")
    from lsio.torch import CropDataset, CropLoader

    p = tmp_path / "era5.zarr"
    era5_like(p, 3)
    data = CropDataset({v: lsio.open(str(p), v) for v in ("t2m", "v10")}, CROP, length=8, seed=2,
                       dtype="float32", scale={"v10": 0.01}, stack=True)  # v10 is stored as float64
    batch = data.read_batch(list(range(4)))
    assert isinstance(batch, torch.Tensor) and batch.shape == (4, 2, 3, 16, 24) and batch.dtype == torch.float32
    ref = data.source.read_batch(list(range(4)))
    np.testing.assert_array_equal(batch.numpy(), ref)
    got = list(CropLoader(data, batch_size=4, device="cpu"))
    np.testing.assert_array_equal(got[0].numpy(), ref)
    # out= may be a CPU torch tensor: filled in place, returned itself.
    arr = lsio.open(str(p), "t2m")
    t = torch.empty((2, 3, 16, 24))
    assert arr.read_crops([[0, 0, 0], [1, 2, 3]], (3, 16, 24), out=t) is t
    np.testing.assert_array_equal(t.numpy(), arr.read_crops([[0, 0, 0], [1, 2, 3]], (3, 16, 24)))
    with pytest.raises(TypeError):
        arr.read_crops([[0, 0, 0]], (3, 16, 24), out=torch.empty((1, 3, 16, 24), dtype=torch.float64))


def test_a_group_and_variable_names(tmp_path):
    p = tmp_path / "era5.zarr"
    ds = era5_like(p, 3)
    g = lsio.open_group(str(p))
    src = CropSource(g, CROP, variables=["t2m", "z"], length=5, seed=4)
    batch = src.read_batch(list(range(5)))
    starts = src.starts(list(range(5)))
    for i in range(5):
        np.testing.assert_array_equal(batch["z"][i], isel(ds, "z", starts[1][i]))
        np.testing.assert_array_equal(batch["t2m"][i], isel(ds, "t2m", starts[0][i]))
    with pytest.raises(ValueError, match="variables="):
        CropSource(g, CROP, length=5)
