"""W9: several epochs of crops over the W1 store with a decoded-chunk cache that holds it all.

    python benchmarks/python/w9.py                         # 4 epochs, 2 threads, 1 GiB cache
    python benchmarks/python/w9.py --epochs 6 --threads 16 --json /tmp/w9.json
    python benchmarks/python/w9.py --quick                 # the 8x smaller W1 store

The store is W1's (float32 (32, 2048, 2048) = 512 MiB decoded, shards (8, 512, 512), inner
chunks (1, 128, 128), zstd 3; written once by zarr-python into benchmarks/.cache). An epoch
visits every (4, 256, 256) tile of the array once, in a new random order each epoch, in
batches of 16 crops (512 crops per epoch): epoch 1 decodes every chunk, later epochs find
them all in the cache. Page cache hot throughout (an untimed read first), so the cache's
gain is decoding, not I/O.

Readers, each in its own subprocess (so caches and RSS are its own):
- ``lsio cache``: ``lsio.open(store, chunk_cache_bytes=--cache-gib, threads=--threads)``;
- ``lsio``: the same without a cache (every epoch decodes);
- ``tensorstore cache_pool``: TensorStore 0.1.x ``zarr3`` with a context
  ``cache_pool.total_bytes_limit`` of the same size (and data_copy/file_io concurrency =
  threads), crops read with ``ts.Batch`` as in the suite.
Per epoch: crops/s; per reader: RSS after each epoch and the peak (ru_maxrss), and the RSS of
the process before its first read, so the cache's resident cost is RSS - baseline.
Target (issue 13): lsio's epoch 2+ >= 3x its epoch 1, RSS within the cache bound.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CACHE_DIR = HERE.parent / ".cache"
CROP = (4, 256, 256)
BATCH = 16
READERS = ("lsio cache", "lsio", "tensorstore cache_pool")


def log(msg: str = "") -> None:
    print(msg, flush=True)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def epoch_batches(shape, epoch: int, seed_base: int = 1000) -> list[np.ndarray]:
    """Every CROP-sized tile of `shape` once, in the random order of `epoch`, in batches."""
    grid = np.stack(np.meshgrid(*[np.arange(0, s - c + 1, c) for s, c in zip(shape, CROP)], indexing="ij"),
                    axis=-1).reshape(-1, len(shape))
    order = np.random.default_rng(seed_base + epoch).permutation(len(grid))
    tiles = grid[order].astype(np.int64)
    return [tiles[i:i + BATCH] for i in range(0, len(tiles), BATCH)]


def run_epochs(read, shape, epochs: int, extra, seed_base: int = 1000) -> tuple[list[dict], float]:
    """Times `epochs` epochs of read(starts) over epoch_batches; per epoch crops/s, RSS and
    extra()'s fields. Also returns the sum of the last crop read (the same for every reader)."""
    rows = []
    check = None
    for e in range(epochs):
        batches = epoch_batches(shape, e, seed_base)
        t0 = time.perf_counter()
        for b in batches:
            got = read(b)
        dt = time.perf_counter() - t0
        n = sum(len(b) for b in batches)
        last = np.asarray(got[-1] if isinstance(got, list) else got[len(batches[-1]) - 1])
        check = float(np.float64(last.astype(np.float64).sum()))
        rows.append({"epoch": e + 1, "crops": n, "seconds": dt, "crops_s": n / dt, "rss": rss_bytes(), **extra()})
    return rows, check


def child(reader: str, path: str, threads: int, cache_bytes: int, epochs: int) -> dict:
    """Runs in a subprocess: the epochs of one reader; prints one JSON line."""
    import lsio

    # the page cache hot: read every file once, untimed
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass
    base = rss_bytes()
    if reader.startswith("lsio"):
        arr = lsio.open(path, threads=threads, chunk_cache_bytes=cache_bytes if reader == "lsio cache" else 0)
        shape = arr.shape
        out = np.empty((BATCH, *CROP), np.float32)

        def read(starts):
            return arr.read_crops(starts, CROP, out=out[:len(starts)])
    else:
        import tensorstore as ts

        ctx = ts.Context({"cache_pool": {"total_bytes_limit": cache_bytes},
                          "data_copy_concurrency": {"limit": threads}, "file_io_concurrency": {"limit": threads}})
        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}, read=True, context=ctx).result()
        shape = tuple(t.shape)

        def read(starts):
            with ts.Batch() as batch:
                futs = [t[tuple(slice(int(s), int(s) + c) for s, c in zip(st, CROP))].read(batch=batch) for st in starts]
            return [f.result() for f in futs]
    rows, check = run_epochs(read, shape, epochs, (lambda: {"cache": lsio.cache_info()}) if reader == "lsio cache"
                             else (lambda: {}))
    return {"reader": reader, "rss_base": base, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "epochs": rows, "check": check}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache-gib", type=float, default=1.0, help="chunk_cache_bytes / cache_pool size (GiB)")
    ap.add_argument("--quick", action="store_true", help="the 8x smaller W1 store")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--path", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    cache_bytes = int(args.cache_gib * 2**30)
    if args.child:
        print(json.dumps(child(args.child, args.path, args.threads, cache_bytes, args.epochs)), flush=True)
        return 0

    from stores import ensure_store
    from suite import STORES

    spec = STORES["weather"][1 if args.quick else 0]
    path = ensure_store(spec, args.cache_dir, log=log)
    decoded = int(np.prod(spec.shape)) * 4
    log(f"W9: {spec.describe()} ({decoded / 2**20:.0f} MiB decoded), cache {cache_bytes / 2**20:.0f} MiB, "
        f"threads {args.threads}, {args.epochs} epochs of {len(epoch_batches(spec.shape, 0))} batches x {BATCH} crops")
    results = []
    for reader in args.readers.split(","):
        cmd = [sys.executable, __file__, "--child", reader, "--path", str(path), "--threads", str(args.threads),
               "--cache-gib", str(args.cache_gib), "--epochs", str(args.epochs)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(f"  {reader}: failed: {p.stderr.strip()[-2000:]}")
            continue
        res = json.loads(p.stdout.strip().splitlines()[-1])
        results.append(res)
        for r in res["epochs"]:
            extra = ""
            if "cache" in r:
                c = r["cache"]
                extra = f", cache {c['bytes'] / 2**20:.0f} MiB held, {c['hits']} hits / {c['misses']} misses"
            log(f"  {reader} epoch {r['epoch']}: {r['crops_s']:.0f} crops/s, RSS {r['rss'] / 2**20:.0f} MiB{extra}")
    checks = {round(r["check"], 3) for r in results}
    log(f"check: every reader's last crop sums to the same value: {'ok' if len(checks) == 1 else 'MISMATCH ' + str(checks)}")
    log("")
    log("| reader | epoch 1 crops/s | epochs 2+ crops/s (median) | 2+ vs 1 | RSS above baseline after the last epoch | peak RSS |")
    log("|---|---|---|---|---|---|")
    for res in results:
        e = res["epochs"]
        first = e[0]["crops_s"]
        later = statistics.median(r["crops_s"] for r in e[1:]) if len(e) > 1 else float("nan")
        log(f"| {res['reader']} | {first:.0f} | {later:.0f} | {later / first:.2f}x | "
            f"{(e[-1]['rss'] - res['rss_base']) / 2**20:.0f} MiB | {res['peak_rss'] / 2**20:.0f} MiB |")
        res["epoch1_crops_s"] = first
        res["later_crops_s"] = later
    by = {r["reader"]: r for r in results}
    if "lsio cache" in by:
        r = by["lsio cache"]
        ratio = r["later_crops_s"] / r["epoch1_crops_s"]
        held = r["epochs"][-1]["cache"]["bytes"]
        log(f"target epoch 2+ >= 3x epoch 1: {ratio:.2f}x -> {'met' if ratio >= 3 else 'MISSED'}; "
            f"cache held {held / 2**20:.0f} MiB of {cache_bytes / 2**20:.0f} MiB allowed -> "
            f"{'within' if held <= cache_bytes else 'OVER'}")
        if "tensorstore cache_pool" in by:
            t = by["tensorstore cache_pool"]
            log(f"lsio cache vs TensorStore cache_pool, epochs 2+: {r['later_crops_s'] / t['later_crops_s']:.2f}x")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"workload": "W9", "store": spec.describe(), "cache_bytes": cache_bytes,
                                         "threads": args.threads, "results": results}, indent=1))
    return 0 if len(checks) <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
