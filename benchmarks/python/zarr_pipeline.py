"""zarr-python with lsio as its codec pipeline vs zarr-python's default pipeline.

Random small crops of a sharded zstd array through ``zarr.open_array(...)[y:y+c, x:x+c]``,
from 1 and 2 Python threads, page cache warm; lsio's own ``Array.read`` is the reference.
Rounds interleave the readers; the median round is reported.

    python benchmarks/python/zarr_pipeline.py [--dir DIR] [--crops N] [--crop 64] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

import lsio
import lsio.zarr as lz

DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"


def make_store(path: str, shape=(4096, 4096), chunks=(64, 64), shards=(512, 512)) -> None:
    if os.path.exists(os.path.join(path, "zarr.json")):
        return
    z = zarr.create_array(path, shape=shape, chunks=chunks, shards=shards, dtype="float32",
                          compressors=ZstdCodec(level=3))
    rng = np.random.default_rng(0)
    for y in range(0, shape[0], shards[0]):
        yy, xx = np.mgrid[y:y + shards[0], 0:shape[1]].astype(np.float32)
        z[y:y + shards[0], :] = (np.sin(yy / 50) * np.cos(xx / 70) * 20 + rng.standard_normal(yy.shape)).astype("f4")


def run(read, origins, crop, threads):
    def work(part):
        for y, x in part:
            read(y, x, crop)

    parts = [origins[i::threads] for i in range(threads)]
    t0 = time.perf_counter()
    if threads == 1:
        work(parts[0])
    else:
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(work, parts))
    return len(origins) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "lsio-zarr-pipeline-bench"))
    ap.add_argument("--crops", type=int, default=2000)
    ap.add_argument("--crop", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    path = os.path.join(args.dir, "w.zarr")
    os.makedirs(args.dir, exist_ok=True)
    make_store(path)

    with zarr.config.set({"codec_pipeline.path": DEFAULT}):
        zd = zarr.open_array(path, mode="r")
    with zarr.config.set({"codec_pipeline.path": lz.PATH}):
        zl = zarr.open_array(path, mode="r")
    la = lsio.open(path)
    shape = zd.shape
    rng = np.random.default_rng(1)
    origins = [(int(y), int(x)) for y, x in zip(rng.integers(0, shape[0] - args.crop, args.crops),
                                                rng.integers(0, shape[1] - args.crop, args.crops))]
    y, x = origins[0]
    c = args.crop
    assert np.array_equal(zd[y:y + c, x:x + c], zl[y:y + c, x:x + c])
    assert zl._async_array.codec_pipeline.fallback_reason is None
    for y, x in origins:  # warm the page cache and every reader
        zd[y:y + c, x:x + c]
        zl[y:y + c, x:x + c]
        la[y:y + c, x:x + c]
    readers = {
        "zarr default pipeline": lambda y, x, c: zd[y:y + c, x:x + c],
        "zarr + lsio pipeline": lambda y, x, c: zl[y:y + c, x:x + c],
        "lsio.Array.read": lambda y, x, c: la[y:y + c, x:x + c],
    }
    print(f"store {path}: shape {shape} chunks {zd.chunks} shards {zd.shards} float32 zstd; "
          f"{args.crops} random {c}x{c} crops per round, {args.rounds} rounds, {os.cpu_count()} CPUs")
    for threads in (1, 2):
        results = {k: [] for k in readers}
        for _ in range(args.rounds):
            for name, read in readers.items():
                results[name].append(run(read, origins, c, threads))
        med = {k: statistics.median(v) for k, v in results.items()}
        base = med["zarr default pipeline"]
        print(f"\n{threads} thread(s):")
        for name, v in med.items():
            print(f"  {name:24s} {v:9.0f} crops/s  {v / base:5.2f}x default")


if __name__ == "__main__":
    main()
