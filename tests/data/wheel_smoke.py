"""Smoke test of an installed lsio (a wheel in a clean root; see scripts/wheel_smoke.sh):
imports lsio with only numpy beside it, reads the shipped store (tests/data/smoke_store.zarr,
written by make_smoke_store.py) through each decoder the wheel must carry (zstd + crc32c in
shards, v2 blosc-lz4), and checks every value against the formulas the store was written
from. Prints one line per check and "wheel smoke: ok"; exits 1 on any mismatch.

    python wheel_smoke.py STORE
"""

import os
import sys

import numpy as np

import lsio


def main(store: str) -> int:
    print("lsio", lsio.__version__, "from", os.path.dirname(lsio.__file__))
    print("io backend:", lsio.io_backend_info())
    t, y, x = np.meshgrid(np.arange(8), np.arange(64), np.arange(64), indexing="ij")
    want = (t * 10000 + y * 100 + x).astype("f4")
    want[4:8, 32:64, 32:64] = np.nan  # the shard left unwritten reads as the fill value
    a = lsio.open(store, "sharded")
    got = a[...]
    assert np.array_equal(got, want, equal_nan=True), "sharded: whole-array read differs"
    rng = np.random.default_rng(0)
    starts = rng.integers(0, np.subtract(a.shape, (2, 20, 20)) + 1, size=(16, 3))
    crops = a.read_crops(starts, (2, 20, 20))
    for s, c in zip(starts, crops):
        assert np.array_equal(c, want[s[0]:s[0] + 2, s[1]:s[1] + 20, s[2]:s[2] + 20], equal_nan=True)
    print("sharded zstd+crc32c: ok", a.shape, a.codecs)

    yy, xx = np.meshgrid(np.arange(40), np.arange(30), indexing="ij")
    b = lsio.open(os.path.join(store, "v2_blosc"))
    assert np.array_equal(b[...], ((yy * 31 + xx) % 1000 - 500).astype("i2")), "v2 blosc differs"
    print("v2 blosc-lz4: ok", b.shape, b.codecs)

    try:
        lsio.open("s3://bucket/x.zarr", storage_options={"endpoint_url": "http://127.0.0.1:9", "anon": True,
                                                         "retries": 0, "connect_timeout": 2})
    except lsio.StorageError as e:  # the HTTP stack (libcurl, OpenSSL) loads and reports
        print("remote store stack: ok (", type(e).__name__, ")")
    print("wheel smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "smoke_store.zarr")))
