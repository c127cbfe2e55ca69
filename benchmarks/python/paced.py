"""Paced reads: batches of crops with an idle pause before each call, as in a training loop
whose step (on the GPU) leaves the reader idle between batches.

    python benchmarks/python/paced.py                          # the W8 store, pauses 0/5/30/100 ms
    python benchmarks/python/paced.py --store PATH --gaps 0,30 --batches 40 --json /tmp/paced.json
    python benchmarks/python/paced.py --quick                  # a small store written here (smoke run)

Each reader reads the same batches of 16 random (4, 256, 256) crops (W1's shape), sleeping
``gap`` ms before each call, and the call alone is timed (median crops/s over the batches).
Back to back (gap 0) this is W8/W1; with pauses it shows what the pause costs the next call.
On the 2-core dev VM (a KVM guest), a pause of 30 ms or more used to make lsio's 2-thread
calls run at about 1-thread speed: the kernel woke the pool's helper onto the caller's CPU
(the other, idle vCPU looked preempted) and the two shared it until load balancing moved one,
several ms later. lsio's helpers now stay off the caller's CPU for the call when they start
on it (``LeaveCallerCpu``, util/thread_pool.h).

Readers: the suite's adapters from ``readers.py``, lsio (``read_crops`` into a reused ``out``)
and TensorStore (its zarr driver for v2 stores, zarr3 for v3, concurrency limits =
``threads``, one batch per call), each checked against zarr-python on the first batch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parents[1]
W8_STORE = BENCH / ".cache" / "weather_weather_float32_32x2048x2048_s8x512x512_c1x128x128_zstd3_seed0_v2blosclz4.zarr"
CROP = (4, 256, 256)


def log(msg: str = "") -> None:
    print(msg, flush=True)


def write_quick_store(root: Path) -> Path:
    """float32 (8, 1024, 1024) in (1, 128, 128) chunks, Zarr v2 blosc-lz4 + shuffle (W8's codec)."""
    import numcodecs
    import zarr

    path = root / "paced_quick.zarr"
    data = np.random.default_rng(0).standard_normal((8, 1024, 1024), dtype=np.float32)
    z = zarr.create_array(str(path), shape=data.shape, chunks=(1, 128, 128), dtype="float32", zarr_format=2,
                          fill_value=0, compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE))
    z[:] = data
    return path


def make_batches(shape, n, seed=0):
    rng = np.random.default_rng(seed)
    return [np.stack([rng.integers(0, shape[d] - CROP[d] + 1, 16) for d in range(3)], axis=1) for _ in range(n)]


def open_readers(path: Path, threads: int, names):
    """The suite's adapters (readers.py), so paced and suite figures compare alike."""
    import readers as readers_mod

    makers = {"lsio": lambda: readers_mod.LsioReader(str(path), threads),
              # driver "zarr" for Zarr v2 stores (W8's), "zarr3" for v3
              "tensorstore": lambda: readers_mod.TensorStoreReader(
                  str(path), threads, driver="zarr" if (path / ".zarray").exists() else "zarr3")}
    out = {}
    for name in names:
        try:
            r = makers[name]()
        except ImportError as e:
            log(f"  {name}: not installed ({e})")
            continue
        out[name] = lambda starts, r=r: r.crops(starts, CROP)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--store", type=Path, default=W8_STORE, help="a 3-d float array of at least (4, 256, 256)")
    p.add_argument("--quick", action="store_true", help="write a small store here and run a few batches")
    p.add_argument("--gaps", default="0,5,30,100", help="pauses before each call, ms")
    p.add_argument("--batches", type=int, default=40, help="timed batches per reader and pause")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--readers", default="lsio,tensorstore")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    import zarr

    tmp = None
    if args.quick:
        tmp = tempfile.TemporaryDirectory()
        args.store = write_quick_store(Path(tmp.name))
        args.batches = min(args.batches, 4)
    if not args.store.exists():
        log(f"no store at {args.store}: run `python benchmarks/python/suite.py --only W8` first, or pass --store")
        return 2
    gaps = [float(g) for g in args.gaps.split(",")]
    z = zarr.open_array(str(args.store), mode="r")
    batches = make_batches(z.shape, args.batches + 1)
    readers = open_readers(args.store, args.threads, args.readers.split(","))
    want = np.stack([z[a:a + CROP[0], b:b + CROP[1], c:c + CROP[2]] for a, b, c in batches[0]])
    rows = []
    for name, read in readers.items():
        got = np.stack([np.asarray(x) for x in read(batches[0])])
        check = "ok" if np.array_equal(got.view(np.uint8), want.view(np.uint8)) else "MISMATCH"
        for gap in gaps:
            times = []
            for starts in batches[1:]:
                if gap:
                    time.sleep(gap / 1000)
                t0 = time.perf_counter()
                read(starts)
                times.append(time.perf_counter() - t0)
            rate = 16 / statistics.median(times)
            rows.append({"reader": name, "gap_ms": gap, "crops_per_s": rate, "check": check, "threads": args.threads})
            log(f"  {name:12s} pause {gap:5.0f} ms: {rate:8.0f} crops/s  ({check})")
    if args.json:
        args.json.write_text(json.dumps({"store": str(args.store), "crop": CROP, "rows": rows}, indent=1))
    return 0 if all(r["check"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
