"""W7 with the local disk cache: the W1 crops over HTTP (20 ms to first byte), cold vs warm.

    python benchmarks/python/w7_cache.py                  # 8 batches, 2 threads
    python benchmarks/python/w7_cache.py --batches 16 --latency-ms 20 --json /tmp/w7c.json

The W1 store is served by ``object_server.py`` (the emulated object store of W7: keep-alive,
ranges, ETags, If-Match, a first-byte delay per request). One set of W7 batches (16 crops
(4, 256, 256) each, the suite's generator) is read three times, each time by a new
``lsio.Array`` (so no in-process shard index cache carries over: every pass reads its shard
indexes from the server, as a new process would):
- ``no cache``: plain remote reads;
- ``cold``: ``storage_options={"cache_dir": <empty dir>, "disk_cache_bytes": ...}``: the same
  requests, plus writing every fetched chunk range to disk;
- ``warm``: the same directory again (a second epoch, or a restart): only the index requests
  go to the server (revalidating ETags); chunks come from the disk cache.
Printed per pass: crops/s, requests and MiB fetched per batch (server counters), disk-cache
hits. The result of every pass is compared with the no-cache pass.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CACHE_DIR = HERE.parent / ".cache"


def log(msg: str = "") -> None:
    print(msg, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--quick", action="store_true", help="the 8x smaller W1 store")
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR, help="where the W1 store is cached")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import lsio
    from stores import ShardLayout, ensure_store
    from suite import STORES, WORKLOADS, make_batches
    from w7 import Server

    w = next(x for x in WORKLOADS if x.id == "W7")
    spec = STORES["weather"][1 if args.quick else 0]
    store = ensure_store(spec, args.cache_dir, log=log)
    layout = ShardLayout.open(store)
    batches = make_batches(w, layout, 4, args.batches, args.quick, np.random.default_rng(77))
    server = Server(store.parent, args.latency_ms)
    url = server.base + "/" + store.name
    disk = Path(tempfile.mkdtemp(prefix="lsio-w7-cache-"))
    log(f"W7 disk cache: {spec.describe()}, {len(batches)} batches of {len(batches[0].starts)} crops, "
        f"{args.latency_ms:g} ms to first byte, threads {args.threads}, cache dir {disk}")
    results = {}
    ref = None
    try:
        for name, so in (("no cache", {}),
                         ("cold", {"cache_dir": str(disk), "disk_cache_bytes": 8 << 30}),
                         ("warm", {"cache_dir": str(disk), "disk_cache_bytes": 8 << 30})):
            arr = lsio.open(url, threads=args.threads, storage_options=so or None)
            out = np.empty((len(batches[0].starts), *batches[0].shape), np.float32)
            times, reqs, mib, got = [], [], [], []
            for b in batches:
                server.reset()
                t0 = time.perf_counter()
                arr.read_crops(b.starts, b.shape, out=out)
                times.append(time.perf_counter() - t0)
                st = server.stats()
                reqs.append(st["requests"])
                mib.append(st["bytes"] / 2**20)
                got.append(out.copy())
            if ref is None:
                ref = got
            same = all(np.array_equal(g, r) for g, r in zip(got, ref))
            n = sum(len(b.starts) for b in batches)
            stats = arr.stats()
            results[name] = {"crops_s": n / sum(times), "requests_per_batch": statistics.mean(reqs),
                             "mib_per_batch": statistics.mean(mib), "disk_cache_hits": stats["disk_cache_hits"],
                             "same_as_no_cache": same}
            r = results[name]
            log(f"  {name:8}: {r['crops_s']:7.1f} crops/s, {r['requests_per_batch']:.0f} requests and "
                f"{r['mib_per_batch']:.1f} MiB fetched per batch, {r['disk_cache_hits']} disk-cache hits, "
                f"{'same crops' if same else 'MISMATCH'}")
    finally:
        server.close()
        blocks = sum(p.stat().st_size for p in disk.rglob("*.blk"))
        shutil.rmtree(disk, ignore_errors=True)
    log(f"  disk cache held {blocks / 2**20:.0f} MiB of blocks")
    if "warm" in results and "no cache" in results:
        log(f"  warm vs no cache: {results['warm']['crops_s'] / results['no cache']['crops_s']:.2f}x crops/s")
    if "warm" in results and "cold" in results:
        log(f"  warm vs cold: {results['warm']['crops_s'] / results['cold']['crops_s']:.2f}x crops/s, "
            f"{results['warm']['requests_per_batch']:.0f} vs {results['cold']['requests_per_batch']:.0f} requests per batch")
    if args.json:
        args.json.write_text(json.dumps({"latency_ms": args.latency_ms, "threads": args.threads,
                                         "batches": len(batches), "results": results, "blocks_bytes": blocks},
                                        indent=1))
    return 0 if all(r["same_as_no_cache"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
