"""W12: W1's crops from the W1 data committed to an Icechunk repository, hot on local disk and
over an S3-compatible HTTP endpoint with 20 ms to first byte.

    python benchmarks/python/w12_icechunk.py                       # local hot + remote 20 ms
    python benchmarks/python/w12_icechunk.py --batches 4 --json /tmp/w12.json

The repository (spec version 1: icechunk 1.x on this interpreter; cached in --cache-dir) holds
the W1 ``weather`` array (float32 (32, 2048, 2048), shards (8, 512, 512), chunks (1, 128, 128),
zstd 3) as ``t2m``, copied from the W1 store (stores.py) by zarr-python into an icechunk
session, one commit. Icechunk keeps one reference per shard: 256 chunk objects.

Readers, on the same batches of 16 crops (4, 256, 256), 2 threads:
- ``lsio``: ``lsio.open_icechunk(repo, threads=2)["t2m"].read_crops`` (the manifest becomes
  the engine's chunk source; crops are coalesced reads of the shard objects);
- ``zarr-python (icechunk)``: ``zarr.open_array(repo.readonly_session("main").store)``, the
  crops of a batch gathered on zarr's event loop (as W1's zarr-python reader), zarr's
  ``threading.max_workers`` = 2.
Remote: the repository directory is served by W7's object_server.py (keep-alive, ranges,
ETags, a first-byte delay per request) as bucket ``bench``; lsio reads ``s3://bench/repo``
(endpoint_url, anonymous), icechunk ``s3_storage(bucket="bench", prefix="repo", endpoint_url,
anonymous=True, force_path_style=True)``. Every result is compared with zarr-python's bit for
bit. Printed: crops/s, lsio's ratio, requests per batch (server counters), open time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CROP = (4, 256, 256)


def log(msg: str = "") -> None:
    print(msg, flush=True)


def ensure_repo(cache_dir: Path) -> Path:
    """The W1 data as an Icechunk repository (cached): <cache>/w12_icechunk/bench/repo."""
    import icechunk
    import zarr

    from stores import ensure_store
    from suite import STORES

    spec = STORES["weather"][0]
    root = cache_dir / f"w12_icechunk_{spec.dirname()}"
    repo_dir = root / "bench" / "repo"
    if (root / ".complete").exists():
        return repo_dir
    src_path = ensure_store(spec, cache_dir, log=log)
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_dir)))
    s = repo.writable_session("main")
    src = zarr.open_array(str(src_path), mode="r")
    dst = zarr.create_array(s.store, name="t2m", shape=src.shape, dtype=src.dtype, shards=spec.shards,
                            chunks=spec.chunks, compressors=zarr.codecs.ZstdCodec(level=3), fill_value=0)
    for a in range(0, src.shape[0], spec.shards[0]):
        dst[a:a + spec.shards[0]] = src[a:a + spec.shards[0]]
    s.commit("W1 data")
    (root / ".complete").write_text(json.dumps({"icechunk": icechunk.__version__, "from": src_path.name}))
    log(f"  wrote {repo_dir} with icechunk {icechunk.__version__} in {time.perf_counter() - t0:.1f} s")
    return repo_dir


def zarr_reader(store, threads: int):
    import zarr

    from readers import set_zarr_threads
    from zarr.core.sync import sync

    set_zarr_threads(threads)
    z = zarr.open_array(store, path="t2m", mode="r")
    a = z.async_array

    def read(starts):
        async def batch():
            return await asyncio.gather(*(a.getitem(tuple(slice(int(o), int(o) + k) for o, k in zip(s, CROP)))
                                          for s in starts))
        set_zarr_threads(threads)
        return np.stack(sync(batch()))

    return read


def run(name: str, readers: dict, batches, server=None) -> dict:
    results = {}
    want = None
    for rname, (opener, _) in readers.items():
        t = time.perf_counter()
        fn = opener()
        open_s = time.perf_counter() - t
        ref = fn(batches[0][:1])  # warmed (metadata), not timed
        del ref
        if server is not None:
            server.reset()
        t = time.perf_counter()
        got = [fn(b) for b in batches]
        dt = time.perf_counter() - t
        reqs = server.stats()["requests"] / len(batches) if server is not None else None
        if want is None:
            want = got
        same = all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
        n = sum(len(b) for b in batches)
        results[rname] = {"crops_s": n / dt, "open_ms": open_s * 1e3, "requests_per_batch": reqs, "same": same}
        log(f"  {name} {rname:24}: {n / dt:8.1f} crops/s, open {open_s * 1e3:6.0f} ms"
            + (f", {reqs:.0f} requests/batch" if reqs is not None else "") + ("" if same else "  DIFFERS"))
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--remote-batches", type=int, default=3)
    ap.add_argument("--cache-dir", type=Path, default=HERE.parent / ".cache")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import icechunk

    import lsio
    from w7 import Server

    repo_dir = ensure_repo(args.cache_dir)
    shape = (32, 2048, 2048)
    rng = np.random.default_rng(12)
    high = np.asarray(shape) - np.asarray(CROP) + 1
    batches = [(rng.random((args.batch, 3)) * high).astype(np.int64) for _ in range(args.batches)]
    doc = {"threads": args.threads, "batch": args.batch, "crop": CROP, "icechunk": icechunk.__version__}

    def ic_local():
        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repo_dir)))
        return zarr_reader(repo.readonly_session(branch="main").store, args.threads)

    def lsio_local():
        a = lsio.open_icechunk(repo_dir, threads=args.threads)["t2m"]
        return lambda st: a.read_crops(st, CROP)

    local = {"zarr-python (icechunk)": (ic_local, None), "lsio": (lsio_local, None)}
    for _ in range(2):  # the second pass is the hot one
        doc["hot"] = run("hot", local, batches)

    server = Server(repo_dir.parent.parent, args.latency_ms)
    try:
        endpoint = server.base
        rb = batches[:args.remote_batches]

        def ic_remote():
            st = icechunk.s3_storage(bucket="bench", prefix="repo", endpoint_url=endpoint, anonymous=True,
                                     allow_http=True, force_path_style=True, region="us-east-1")
            repo = icechunk.Repository.open(st)
            return zarr_reader(repo.readonly_session(branch="main").store, args.threads)

        def lsio_remote():
            so = {"endpoint_url": endpoint, "anonymous": True, "region": "us-east-1", "addressing_style": "path"}
            a = lsio.open_icechunk("s3://bench/repo", storage_options=so, threads=args.threads)["t2m"]
            return lambda st: a.read_crops(st, CROP)

        doc["remote"] = run(f"remote {args.latency_ms:g} ms", {"zarr-python (icechunk)": (ic_remote, None),
                                                              "lsio": (lsio_remote, None)}, rb, server)
    finally:
        server.close()

    log(f"W12 (Icechunk), threads {args.threads}: W1 data {shape} in an Icechunk repository (icechunk "
        f"{icechunk.__version__}, spec version 1), batches of {args.batch} crops {CROP}")
    log("| setting | reader | crops/s | lsio's ratio | requests/batch | open (ms) |")
    log("|---|---|---|---|---|---|")
    for setting in ("hot", "remote"):
        r = doc[setting]
        lsio_rate = r["lsio"]["crops_s"]
        for name, x in r.items():
            ratio = "" if name == "lsio" else f"{lsio_rate / x['crops_s']:.2f}x"
            req = "" if x["requests_per_batch"] is None else f"{x['requests_per_batch']:.0f}"
            log(f"| {setting} | {name} | {x['crops_s']:.1f} | {ratio} | {req} | {x['open_ms']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
    ok = all(x["same"] for s in ("hot", "remote") for x in doc[s].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
