"""Writes tests/data/smoke_store.zarr: the small store the wheel smoke test reads in a clean
Debian root (scripts/wheel_smoke.sh, tests/data/wheel_smoke.py). About 80 KB, committed.

    python tests/data/make_smoke_store.py     # needs zarr-python 3 and numcodecs

Arrays (values are formulas the smoke script recomputes, so it needs no reference reader):
  - ``sharded``: v3, float32 (8, 64, 64), shards (4, 32, 32) of chunks (1, 16, 16), zstd +
    crc32c, value ``t * 10000 + y * 100 + x``; shard (1, 1, 1) left unwritten (fill NaN).
  - ``v2_blosc``: Zarr v2, int16 (40, 30), chunks (16, 16), blosc lz4 + byte shuffle (the
    zarr-python 2 default), value ``(y * 31 + x) % 1000 - 500``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from zarr.codecs import Crc32cCodec, ZstdCodec

OUT = Path(__file__).resolve().parent / "smoke_store.zarr"


def sharded_values() -> np.ndarray:
    t, y, x = np.meshgrid(np.arange(8), np.arange(64), np.arange(64), indexing="ij")
    return (t * 10000 + y * 100 + x).astype("f4")


def blosc_values() -> np.ndarray:
    y, x = np.meshgrid(np.arange(40), np.arange(30), indexing="ij")
    return ((y * 31 + x) % 1000 - 500).astype("i2")


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    g = zarr.open_group(str(OUT), mode="w", zarr_format=3)
    a = g.create_array("sharded", shape=(8, 64, 64), chunks=(1, 16, 16), shards=(4, 32, 32), dtype="f4",
                       compressors=[ZstdCodec(level=3), Crc32cCodec()], fill_value=np.nan)
    v = sharded_values()
    for t0 in (0, 4):
        for y0 in (0, 32):
            for x0 in (0, 32):
                if (t0, y0, x0) != (4, 32, 32):
                    a[t0:t0 + 4, y0:y0 + 32, x0:x0 + 32] = v[t0:t0 + 4, y0:y0 + 32, x0:x0 + 32]
    b = zarr.create_array(str(OUT / "v2_blosc"), shape=(40, 30), chunks=(16, 16), dtype="i2", zarr_format=2,
                          compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    b[...] = blosc_values()
    print(f"wrote {OUT} ({sum(p.stat().st_size for p in OUT.rglob('*') if p.is_file())} bytes)")


if __name__ == "__main__":
    main()
