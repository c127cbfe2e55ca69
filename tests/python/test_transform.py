"""Per-chunk transforms: ``read``/``read_crops`` with ``dtype=``, ``scale=``, ``offset=``.

The result must equal numpy's ``(x.astype(float64) * scale + offset).astype(dtype)`` on
zarr-python's read of the same selection, bit for bit, including regions that read as the
fill value (missing chunks) and non-contiguous ``out`` arrays.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from zarr.codecs import ZstdCodec

import lsio

RNG = np.random.default_rng(3)


def _expected(x, dtype, scale, offset):
    return (x.astype(np.float64) * scale + offset).astype(dtype)


@pytest.fixture(scope="module", params=["uint16", "int8", "float16", "float64", "int64"])
def store(request, tmp_path_factory):
    dt = np.dtype(request.param)
    shape = (6, 50, 45)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        data = RNG.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        fill = info.max // 3
    else:
        data = (RNG.standard_normal(shape) * 100).astype(dt)
        fill = -2.5
    path = tmp_path_factory.mktemp("transform") / f"{dt.name}.zarr"
    z = zarr.create_array(str(path), shape=shape, dtype=dt, chunks=(1, 10, 9), shards=(2, 20, 18),
                          compressors=ZstdCodec(level=1), fill_value=fill)
    z[:4] = data[:4]  # frames 4 and 5 stay missing: they read as the fill value
    return str(path), z


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype,scale,offset", [("float32", 1 / 1000, -3.0), ("float64", 2.5, 0.125),
                                                ("float32", None, None), (None, 0.5, None)])
def test_read_crops_transform(store, threads, dtype, scale, offset):
    path, z = store
    arr = lsio.open(path, threads=threads)
    ref = z[...]
    starts = np.array([[0, 0, 0], [3, 17, 30], [4, 40, 3], [2, 5, 5]])
    got = arr.read_crops(starts, (2, 10, 15), dtype=dtype, scale=scale, offset=offset)
    out_dt = np.dtype(dtype) if dtype else np.dtype(np.float64 if arr.dtype == np.float64 else np.float32)
    assert got.dtype == out_dt
    want = np.stack([_expected(ref[a:a + 2, b:b + 10, c:c + 15], out_dt, scale or 1.0, offset or 0.0)
                     for a, b, c in starts])
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_read_transform_with_steps_and_strided_out(store):
    path, z = store
    arr = lsio.open(path)
    key = (slice(None, None, -1), slice(3, 48, 4), 7)
    want = _expected(z[...][key], np.float32, 3.0, 1.0)
    base = np.full(want.shape + (2,), 99.0, dtype=np.float32)
    out = base[..., 1]
    res = arr.read(key, out=out, dtype=np.float32, scale=3.0, offset=1.0)
    assert res is out
    assert np.array_equal(out, want)
    assert (base[..., 0] == 99.0).all()


def test_transform_argument_errors(store, tmp_path):
    path, _ = store
    arr = lsio.open(path)
    with pytest.raises(TypeError):
        arr.read_crops(np.zeros((1, 3), int), (1, 2, 2), dtype=np.int32, scale=2.0)
    with pytest.raises(TypeError):  # out must match the requested dtype exactly
        arr.read_crops(np.zeros((1, 3), int), (1, 2, 2), out=np.empty((1, 1, 2, 2), arr.dtype),
                       dtype=np.float32 if arr.dtype != np.float32 else np.float64)
    c = zarr.create_array(str(tmp_path / "c.zarr"), shape=(4,), dtype="complex64", chunks=(2,))
    c[...] = 1 + 2j
    with pytest.raises(TypeError):
        lsio.open(str(tmp_path / "c.zarr")).read(slice(None), dtype=np.float32)
