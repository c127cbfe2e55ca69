"""Smoke test of an installed lsio wheel against zarr-python (scripts/wheel_smoke.sh --venv runs
it in a clean venv outside the repository, one per CPython version): writes small arrays with
whatever zarr-python pip chose for this Python (zarr 3 from Python 3.11: a sharded zstd Zarr v3
array in a group and a Zarr v2 array; zarr 2 on Python 3.10: Zarr v2 arrays with zstd and
blosc), reads each with lsio into numpy (whole, a strided slice, a batch of crops) and compares
with what zarr-python reads. Prints one line per array and "wheel zarr smoke: ok"; any
mismatch raises.

    python wheel_smoke_zarr.py WORKDIR
"""

import os
import sys

import numpy as np
import zarr

import lsio


def check(name, arr, want):
    got = arr[...]
    assert got.dtype == want.dtype, (name, got.dtype, want.dtype)
    assert np.array_equal(got, want), f"{name}: whole-array read differs from zarr-python"
    assert np.array_equal(arr[1:, ::3, 5:70:2], want[1:, ::3, 5:70:2]), f"{name}: strided read differs"
    rng = np.random.default_rng(1)
    crop = (2, 17, 23)
    starts = rng.integers(0, np.subtract(want.shape, crop) + 1, size=(12, 3))
    for s, c in zip(starts, arr.read_crops(starts, crop)):
        assert np.array_equal(c, want[tuple(slice(a, a + n) for a, n in zip(s, crop))]), f"{name}: crop at {s}"
    print(f"{name}: ok", arr.shape, arr.dtype, arr.codecs)


def main(work: str) -> int:
    print("lsio", lsio.__version__, "from", os.path.dirname(lsio.__file__))
    print("zarr-python", zarr.__version__, "numpy", np.__version__, "Python", sys.version.split()[0])
    rng = np.random.default_rng(0)
    data = {
        "f4": rng.normal(size=(5, 70, 90)).astype("f4"),
        "i2": rng.integers(-3000, 3000, size=(5, 70, 90)).astype("i2"),
    }
    major = int(zarr.__version__.split(".")[0])
    if major >= 3:
        from zarr.codecs import ZstdCodec

        path = os.path.join(work, "v3.zarr")
        g = zarr.open_group(path, mode="w")
        for dt, v in data.items():
            a = g.create_array(dt, shape=v.shape, dtype=v.dtype, chunks=(1, 16, 16), shards=(2, 32, 32),
                               compressors=[ZstdCodec(level=3)], fill_value=0)
            a[...] = v
            check(f"v3 sharded zstd {dt}", lsio.open(path, dt), zarr.open_group(path, mode="r")[dt][...])
        v2 = os.path.join(work, "v2.zarr")
        z = zarr.create_array(v2, shape=data["f4"].shape, dtype="f4", chunks=(2, 32, 32), zarr_format=2)
        z[...] = data["f4"]
        check("v2 default compressor f4", lsio.open(v2), zarr.open_array(v2, mode="r")[...])
    else:  # zarr-python 2 (the last release for Python 3.10): Zarr v2 only
        from numcodecs import Blosc, Zstd

        for dt, comp in (("f4", Zstd(level=3)), ("i2", Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE))):
            path = os.path.join(work, f"v2_{dt}.zarr")
            z = zarr.open_array(path, mode="w", shape=data[dt].shape, chunks=(2, 32, 32), dtype=dt,
                                compressor=comp)
            z[...] = data[dt]
            check(f"v2 {comp.codec_id} {dt}", lsio.open(path), zarr.open_array(path, mode="r")[...])
    print("wheel zarr smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
