"""W8: W1's crops on the same data stored as Zarr v2 with blosc-lz4 + byte shuffle (zarr-python
2's default compressor), hot page cache (used by suite.py).

Blosc-lz4 decodes several times faster than zstd, so the engine (planning, I/O, scatter),
not the codec, is what W8 measures. The store is the W1 ``weather`` data copied into a v2
array whose chunks are W1's inner chunks (no sharding in v2: one file per chunk), written
once by zarr-python 3 (``zarr_format=2``, ``numcodecs.Blosc(cname="lz4", clevel=5,
shuffle=SHUFFLE)``). The batches are W1's (same generator and seed), so W8 and W1 read the
same crops.

Readers: lsio (``lsio.open`` on the v2 directory), TensorStore (``"driver": "zarr"``),
zarr-python 3 and zarrs-python (the same adapters as W1). Rounds are interleaved in a
rotating order after an untimed warm-up whose result every reader must match (zarr-python's
read of the first batch). The limit row is single-thread c-blosc (numcodecs, its own threads
off) decoding the batch's chunk files, times the thread count: the decode bound.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

import readers as readers_mod
from stores import ShardLayout, store_path

PEERS = ["tensorstore", "zarr-python", "zarrs"]


def log(msg: str = "") -> None:
    print(msg, flush=True)


def v2_store_path(spec, cache_dir: Path) -> Path:
    return store_path(spec, cache_dir).with_name(store_path(spec, cache_dir).name.replace(".zarr", "_v2blosclz4.zarr"))


def ensure_v2_store(spec, v3_store: Path, cache_dir: Path) -> Path:
    """The W1 data as a Zarr v2 blosc-lz4 array, copied from the v3 store (cached)."""
    import numcodecs
    import zarr

    path = v2_store_path(spec, cache_dir)
    if (path / ".complete").exists():
        return path
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    src = zarr.open_array(str(v3_store), mode="r")
    dst = zarr.create_array(str(tmp), shape=src.shape, chunks=spec.chunks, dtype=src.dtype, zarr_format=2,
                            compressors=numcodecs.Blosc(cname="lz4", clevel=5, shuffle=numcodecs.Blosc.SHUFFLE),
                            fill_value=0)
    step = spec.shards[0]
    for a in range(0, src.shape[0], step):
        dst[a:a + step] = src[a:a + step]
    (tmp / ".complete").write_text(json.dumps({"zarr": zarr.__version__, "from": v3_store.name}))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    log(f"  wrote {path.name} with zarr-python {zarr.__version__} in {time.perf_counter() - t0:.1f} s")
    return path


def _as_list(result, n):
    if isinstance(result, np.ndarray) and result.ndim and len(result) == n:
        return [result[i] for i in range(n)]
    return [np.asarray(x) for x in result]


def _chunk_file(path: Path, c) -> Path:
    return path / ".".join(str(int(i)) for i in c)


def run(w, args, v3_store: Path, spec, make_batches, log_line) -> dict:
    """W8 for suite.py: returns {"rows", "details"} like suite.run_workload."""
    from numcodecs import blosc

    threads = args.threads
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else w.rounds)
    path = ensure_v2_store(spec, v3_store, args.cache_dir)
    layout = ShardLayout.open(v3_store)  # the same inner chunks: W1's batches and chunk lists
    rng = np.random.default_rng([args.seed, 1, threads])  # W1's seed: the same crops
    batches = make_batches(w, layout, np.dtype(spec.dtype).itemsize, rounds + 1, args.quick, rng)
    b0 = batches[0]
    log(f"  W8 threads={threads}: {rounds} timed rounds + 1 warm-up; per batch {b0.units} crops, "
        f"{len(b0.chunks)} chunk files, {b0.out_bytes / 2**20:.1f} MiB out; store {path.name}")

    contenders = {}
    makers = {"lsio": lambda: readers_mod.LsioReader(str(path), threads),
              "tensorstore": lambda: readers_mod.TensorStoreReader(str(path), threads, driver="zarr"),
              "zarr-python": lambda: readers_mod.ZarrPythonReader(str(path), threads),
              "zarrs": lambda: readers_mod.ZarrsReader(str(path), threads)}
    status = {}
    for name, make in makers.items():
        if args.readers and name not in args.readers:
            continue
        try:
            contenders[name] = make()
            status[name] = "ok"
        except Exception as e:  # noqa: BLE001
            status[name] = f"error: {type(e).__name__}: {e}"
            log(f"    {name}: cannot open: {status[name]}")

    # Warm-up batch: every reader must return zarr-python's crops, bit for bit.
    ref = _as_list(readers_mod.ZarrPythonReader(str(path), threads).crops(b0.starts, b0.shape), b0.units)
    check = {}
    for name, r in contenders.items():
        try:
            got = _as_list(r.crops(b0.starts, b0.shape), b0.units)
            same = all(np.array_equal(g.view(np.uint8), e.view(np.uint8)) for g, e in zip(got, ref))
            check[name] = "ok" if same else "MISMATCH"
        except Exception as e:  # noqa: BLE001
            check[name] = "error"
            status[name] = f"error: {type(e).__name__}: {e}"
    if check.get("lsio") == "MISMATCH":
        status["lsio"] = "MISMATCH"

    # The decode bound: each batch's chunk files decoded by c-blosc on one thread.
    blosc.use_threads = False
    codec = __import__("numcodecs").Blosc()
    blobs = [[_chunk_file(path, c).read_bytes() for c in b.chunks] for b in batches]

    def decode(i):
        t0 = time.perf_counter()
        for blob in blobs[i]:
            codec.decode(blob)
        return (time.perf_counter() - t0) / threads

    times = {n: [] for n in contenders if status[n] == "ok"}
    times["limit: blosc x%d" % threads] = []
    order = list(times)
    for k in range(1, rounds + 1):
        b = batches[k]
        for name in order[k % len(order):] + order[:k % len(order)]:
            if name.startswith("limit"):
                times[name].append(decode(k))
                continue
            t0 = time.perf_counter()
            contenders[name].crops(b.starts, b.shape)
            times[name].append(time.perf_counter() - t0)
    for r in contenders.values():
        r.close()

    rows = []
    for name in list(makers) + [n for n in times if n.startswith("limit")]:
        if args.readers and name not in args.readers and not name.startswith("limit"):
            continue
        kind = "limit" if name.startswith("limit") else "reader"
        row = {"workload": "W8", "cache": "hot", "reader": name, "kind": kind, "threads": threads, "unit": "crops",
               "status": status.get(name, "ok"), "check": check.get(name, "n/a" if kind == "limit" else "-"),
               "times_s": times.get(name, [])}
        if row["times_s"] and row["status"] == "ok":
            rates = [batches[i + 1].units / t for i, t in enumerate(row["times_s"])]
            row["median_s"] = statistics.median(row["times_s"])
            row["units_per_s"] = statistics.median(rates)
            row["MBps"] = statistics.median(batches[i + 1].out_bytes / t / 1e6 for i, t in enumerate(row["times_s"]))
        rows.append(row)
        log("    " + log_line(row))
    stored = sum(p.stat().st_size for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    return {"rows": rows, "details": [{"threads": threads, "rounds": rounds, "store": str(path),
                                       "stored_bytes": stored, "layout": "Zarr v2, chunks " + str(spec.chunks) +
                                       ", blosc lz4 clevel 5 byte shuffle, fill 0"}]}
