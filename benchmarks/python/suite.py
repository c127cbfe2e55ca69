"""lsio benchmark suite: lsio vs TensorStore, zarr-python and zarrs, beside machine limits.

Run everything (about 10-15 minutes on a 2-core VM; installs the peers first):

    bash scripts/bench.sh                      # = python benchmarks/python/suite.py
    bash scripts/bench.sh --quick              # small stores, 2 rounds: a < 2 min smoke run
    python benchmarks/python/suite.py --only W1,W3 --rounds 5 --threads 2 --out /tmp/res

What it does, in one process (W6 forks one child per reader):
  1. Writes the stores it needs once with zarr-python (sharded, zstd level 3) under
     benchmarks/.cache/ and prints each one's compression ratio (stores.py).
  2. Checks once that dropping a store from the page cache works (mincore before/after).
  3. Runs the workloads W1..W8 and W13 (WORKLOADS below; W7, the W1 crops over HTTP from an
     emulated object store on loopback, is in w7.py; W8, the W1 crops from a Zarr v2 blosc-lz4
     copy of the store, in w8.py; W13, zarr-python's API with zarr's, zarrs' and lsio's codec
     pipelines, in w13.py). Within a workload every reader gets the same
     thread count and the same batches; contenders (readers and machine limits) run
     interleaved, round by round, in a rotating order; round 0 is an untimed warm-up whose
     results are checked bit for bit against zarr-python's (a mismatching reader is flagged
     and not timed). Cold rows reopen every reader and drop the store's page cache before
     each of its rounds. Reported figures are medians over the timed rounds.
  4. Writes results.json (all raw timings), results.md (the tables) and results.png to --out
     (default benchmarks/results/), and in full mode (no --quick, no --only) or with
     --write-results also benchmarks/RESULTS.md (report.py).

Machine limits (limits.py, native code in cpp/bindings/limits.cc) use exactly the chunks and
byte ranges of each batch: raw reads with the engine's pread and io_uring backends and the
same thread count, single-thread libzstd decode times the thread count, memcpy of the output.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import limits  # noqa: E402
import readers as readers_mod  # noqa: E402
import report  # noqa: E402
import w7  # noqa: E402
import w8  # noqa: E402
import w11  # noqa: E402
import w13  # noqa: E402
from stores import ShardLayout, StoreSpec, byte_ranges, data_files, ensure_store, stored_bytes  # noqa: E402

BENCH_DIR = HERE.parent
PEERS = ["tensorstore", "zarr-python", "zarrs"]

# ----------------------------------------------------------------------------- configuration

# Stores: name -> (full, quick).
STORES = {
    "weather": (StoreSpec("weather", "weather", "float32", (32, 2048, 2048), (8, 512, 512), (1, 128, 128)),
                StoreSpec("weather", "weather", "float32", (8, 1024, 1024), (8, 512, 512), (1, 128, 128))),
    "volume": (StoreSpec("volume", "imagery", "uint16", (512, 512, 512), (256, 256, 256), (64, 64, 64)),
               StoreSpec("volume", "imagery", "uint16", (256, 256, 256), (128, 128, 128), (64, 64, 64))),
    "tiles": (StoreSpec("tiles", "imagery", "uint16", (4096, 4096), (1024, 1024), (32, 32)),
              StoreSpec("tiles", "imagery", "uint16", (1024, 1024), (512, 512), (32, 32))),
    "full": (StoreSpec("full", "weather", "float32", (256, 1024, 1024), (8, 512, 512), (1, 256, 256)),
             StoreSpec("full", "weather", "float32", (16, 1024, 1024), (8, 512, 512), (1, 256, 256))),
}


@dataclass
class WorkloadDef:
    id: str
    title: str
    store: str
    cache: str                      # "hot" | "cold"
    batch: str                      # "crops" | "singles" | "full" | "rss"
    unit: str                       # what units/s counts: "crops", "chunks"
    readers: list[str]
    target: str
    primary_limit: str              # "vs limit" divides by: "zstd" (x threads) or "raw" (fastest raw read)
    crop: tuple[int, ...] | None = None
    n: int = 0                      # crops per batch / single reads per round (full mode)
    n_quick: int = 0
    rounds: int = 10
    per_thread: bool = False        # W3: rows for 1 and N threads
    extra_stores: tuple = ()        # W13: stores it reads besides `store`


LSIO_CROP_READERS = ["lsio", "lsio io=pread"]
WORKLOADS = [
    WorkloadDef("W1", "batches of random crops, page cache hot", "weather", "hot", "crops", "crops",
                LSIO_CROP_READERS + PEERS, "lsio >= 2x best peer", "zstd", (4, 256, 256), 16, 16, 10),
    WorkloadDef("W2", "W1 with the page cache dropped before every round", "weather", "cold", "crops", "crops",
                LSIO_CROP_READERS + ["lsio direct"] + PEERS, "lsio >= 2x best peer and >= 0.9x raw read", "raw", (4, 256, 256),
                16, 16, 8),
    WorkloadDef("W3", "single inner-chunk reads (64^3 uint16 in 256^3 shards), hot", "volume", "hot", "singles",
                "chunks", ["lsio", "lsio read_crops"] + PEERS, "lsio >= 2x TensorStore per thread count",
                "zstd", None, 256, 32, 5, per_thread=True),
    WorkloadDef("W4", "tiny inner chunks (32x32 uint16 = 2 KiB), crops of 512x512, hot", "tiles", "hot", "crops",
                "chunks", ["lsio"] + PEERS, "lsio >= 1,000,000 inner chunks/s", "zstd", (512, 512), 8, 4, 6),
    WorkloadDef("W5", "full read of a 1 GiB array into a preallocated out, hot", "full", "hot", "full", "chunks",
                ["lsio"] + PEERS, "lsio >= 0.9x threads x single-thread libzstd", "zstd", None, 1, 1, 3),
    WorkloadDef("W6", "peak RSS of a full read of the W5 array (one subprocess per reader)", "full", "hot", "rss",
                "bytes", ["lsio"] + PEERS, "lsio peak RSS <= output + 64 MiB", "", None, 1, 1, 1),
    WorkloadDef("W7", "the W1 crops over HTTP from an emulated object store on loopback (w7.py)", "weather",
                "remote", "crops", "crops", list(readers_mod.REMOTE_READERS),
                "lsio >= 2x best peer's crops/s; requests/batch <= best peer's; >= 0.8x link bound when capped",
                "", (4, 256, 256), 16, 8, 5),
    WorkloadDef("W8", "W1's crops on the same data as Zarr v2, blosc-lz4 + byte shuffle, hot (w8.py)", "weather",
                "hot", "crops", "crops", ["lsio"] + PEERS, "lsio >= 2x best peer", "blosc", (4, 256, 256), 16, 16, 10),
    WorkloadDef("W11", "W1's crops from the same data as a NetCDF4 file (deflate 1 + shuffle), hot and cold: lsio on "
                "the file and on its kerchunk references vs xarray h5netcdf, netCDF4-python, h5py and zarr-python "
                "on the references (w11.py)", "", "hot", "crops", "crops",
                ["lsio", "lsio refs", "zarr-python refs", "xarray h5netcdf", "netCDF4-python", "h5py"],
                "lsio on the file >= 5x the best reader of the file; on the references >= 3x zarr-python", "",
                (4, 256, 256), 16, 16, 5),
    WorkloadDef("W13", "zarr-python's API (z[box], z.oindex, xarray isel, dask mean) with zarr's default, zarrs' and "
                "lsio's codec pipelines (w13.py)", "weather", "hot", "crops", "crops", list(w13.PIPELINES),
                "lsio pipeline >= 3x default and >= 1.5x zarrs on crops; >= both on every row", "",
                (4, 256, 256), 16, 16, 10, extra_stores=("volume", "full")),
]


def log(msg: str = "") -> None:
    print(msg, flush=True)


# ----------------------------------------------------------------------------- batches


@dataclass
class Batch:
    kind: str                 # "crops" | "singles" | "full"
    starts: np.ndarray | None
    shape: tuple[int, ...]
    chunks: list              # inner chunk coordinates read (unique, or repeated for singles)
    units: int                # crops, or chunks, counted for units/s
    out_bytes: int


def make_batches(w: WorkloadDef, layout: ShardLayout, itemsize: int, count: int, quick: bool,
                 rng: np.random.Generator) -> list[Batch]:
    shape = layout.shape
    out = []
    for _ in range(count):
        if w.batch == "crops":
            n = w.n_quick if quick else w.n
            crop = tuple(min(c, s) for c, s in zip(w.crop, shape))
            high = np.asarray(shape) - np.asarray(crop) + 1
            starts = (rng.random((n, len(shape))) * high).astype(np.int64)
            chunks = sorted({c for s in starts for c in layout.chunks_in_box(s, crop)})
            units = n if w.unit == "crops" else len(chunks)
            out.append(Batch("crops", starts, crop, chunks, units, n * int(np.prod(crop)) * itemsize))
        elif w.batch == "singles":
            n = w.n_quick if quick else w.n
            allc = layout.all_chunks()
            pick = rng.choice(len(allc), size=n, replace=n > len(allc))
            chunks = [allc[i] for i in pick]
            starts = np.asarray(chunks, dtype=np.int64) * np.asarray(layout.chunks)
            out.append(Batch("singles", starts, tuple(layout.chunks), chunks, n,
                             n * int(np.prod(layout.chunks)) * itemsize))
        elif w.batch == "full":
            chunks = layout.all_chunks()
            out.append(Batch("full", None, tuple(shape), chunks, len(chunks), int(np.prod(shape)) * itemsize))
        else:
            raise ValueError(w.batch)
    return out


def as_list(result: Any, batch: Batch) -> list[np.ndarray]:
    if batch.kind == "full":
        return [np.asarray(result)]
    return [np.asarray(r) for r in result]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8)))


def compare(result: Any, ref: list[np.ndarray], batch: Batch) -> str:
    got = as_list(result, batch)
    if len(got) != len(ref):
        return f"MISMATCH: {len(got)} results, expected {len(ref)}"
    bad = [i for i, (g, r) in enumerate(zip(got, ref)) if not same_bits(g, r)]
    if bad:
        return f"MISMATCH in {len(bad)}/{len(ref)} results (first: #{bad[0]})"
    return "ok"


# ----------------------------------------------------------------------------- contenders


@dataclass
class Contender:
    name: str
    kind: str                                   # "reader" | "limit"
    threads: int
    run: Callable[[Batch, int], tuple[float, Any]]  # (batch, round) -> (seconds, result)
    reopen: Callable[[], None] | None = None
    cold_drop: bool = True                      # drop page cache before a cold round
    status: str = "ok"                          # "ok", "not installed", "error: ...", "MISMATCH ..."
    times: list[float] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def reader_contender(name: str, path: Path, threads: int, batch_kind: str) -> Contender:
    r = readers_mod.make_reader(name, path, threads)

    def run(b: Batch, _round: int):
        t0 = time.perf_counter()
        if b.kind == "crops":
            res = r.crops(b.starts, b.shape)
        elif b.kind == "singles":
            res = r.singles(b.starts, b.shape)
        else:
            res = r.full()
        return time.perf_counter() - t0, res

    c = Contender(name, "reader", threads, run, reopen=r.open)
    c.extra["config"] = r.config()
    c.extra["reader"] = r
    return c


def lsio_coalescing(path: Path) -> tuple[int, int]:
    """The (max_gap, max_request) lsio uses on this store by default (for the merged limit)."""
    try:
        import lsio

        o = lsio.open(str(path)).options
        return int(o["max_gap"]), int(o["max_request"])
    except Exception:  # noqa: BLE001 - older lsio without Array.options: its old defaults
        return 64 << 10, 16 << 20


class LimitCache:
    """Per-batch inputs of the limit contenders (byte ranges, frames), computed untimed."""

    def __init__(self, layout: ShardLayout, cold: bool):
        self.layout, self.cold = layout, cold
        self.max_gap, self.max_request = lsio_coalescing(layout.path)
        self._ranges: dict[tuple, Any] = {}
        self._frames: dict[int, list[bytes]] = {}

    def ranges(self, b: Batch, merged: bool = False):
        k = (id(b), merged)
        if k not in self._ranges:
            if (id(b), False) not in self._ranges:  # keep only the current batch's ranges
                self._ranges = {(id(b), False): byte_ranges(self.layout, b.chunks, include_indexes=self.cold)}
            if merged:
                self._ranges[k] = self._ranges[(id(b), False)].merged(self.max_gap, self.max_request)
        return self._ranges[k]

    def frames(self, b: Batch):
        k = id(b)
        if k not in self._frames:
            self._frames = {k: byte_ranges(self.layout, b.chunks, include_indexes=False).read_frames()}
        return self._frames[k]


def limit_contenders(layout: ShardLayout, store_files: list[str], cold: bool, threads: int,
                     chunk_nbytes: int, uring_ok: bool, uring_why: str) -> list[Contender]:
    cache = LimitCache(layout, cold)
    out = []
    # Cold: also the same ranges merged like a coalescing reader would (gap <= 64 KiB).
    for merged in (False, True) if cold else (False,):
        for io in ("pread", "uring"):
            def run(b, _r, io=io, merged=merged):
                return limits.raw_read_seconds(cache.ranges(b, merged), io, threads), None
            c = Contender(f"limit: raw read {io}{' merged' if merged else ''}", "limit", threads, run)
            c.extra["merged"] = merged
            if io == "uring" and not uring_ok:
                c.status = f"unavailable: {uring_why}"
            out.append(c)

    def run_zstd(b, _r):
        single = limits.zstd_seconds(cache.frames(b), chunk_nbytes)
        return single / threads, None

    out.append(Contender(f"limit: zstd 1 thread x{threads}", "limit", threads, run_zstd, cold_drop=False))
    out.append(Contender("limit: memcpy output", "limit", 1,
                         lambda b, _r: (limits.memcpy_seconds(b.out_bytes), None), cold_drop=False))
    for c in out:
        c.extra["cache"] = cache
    return out


# ----------------------------------------------------------------------------- running


def run_interleaved(w: WorkloadDef, contenders: list[Contender], batches: list[Batch], store_files: list[str],
                    cold: bool) -> dict:
    """Round 0: warm-up + correctness (zarr-python's result is the reference); rounds 1..:
    timed, in a rotating order. Returns details for the JSON."""
    ref: list[np.ndarray] | None = None
    ref_name = None
    ref_tried = False
    rounds = len(batches) - 1
    live = [c for c in contenders if c.status == "ok"]
    # Round 0 order: zarr-python first (the reference), then the others.
    order0 = sorted(live, key=lambda c: 0 if c.name == "zarr-python" else 1)
    for r in range(rounds + 1):
        b = batches[r]
        order = order0 if r == 0 else live[r % len(live):] + live[:r % len(live)]
        for c in order:
            if c.status != "ok":
                continue
            try:
                if cold:
                    if c.reopen is not None:
                        c.reopen()
                    if c.cold_drop:
                        limits.drop_cache(store_files)
                dt, res = c.run(b, r)
            except Exception as e:  # noqa: BLE001 - a failing reader is reported, not fatal
                c.status = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
                c.extra["traceback"] = traceback.format_exc()
                log(f"    {c.name}: {c.status}")
                continue
            if r == 0:
                if c.kind == "reader":
                    if ref is None and not ref_tried:
                        ref_tried = True
                        if c.name != "zarr-python":
                            ref = reference_result(w, b, c)
                            ref_name = "zarr-python (separate read)" if ref is not None else None
                        else:
                            ref = as_list(res, b)
                            ref_name = "zarr-python"
                    if ref is None:
                        c.extra["check"] = "unchecked (no zarr-python reference)"
                    else:
                        c.extra["check"] = compare(res, ref, b)
                        if c.extra["check"] != "ok":
                            c.status = c.extra["check"]
                            log(f"    {c.name}: {c.status} vs {ref_name}")
            else:
                c.times.append(dt)
            del res
        gc.collect()
    return {"reference": ref_name}


_ref_path: Path | None = None


def reference_result(w: WorkloadDef, b: Batch, c: Contender) -> list[np.ndarray] | None:
    """zarr-python's result for batch b when zarr-python is not among the readers (or failed)."""
    try:
        r = readers_mod.make_reader("zarr-python", _ref_path, c.threads)
        if b.kind == "crops":
            return as_list(r.crops(b.starts, b.shape), b)
        if b.kind == "singles":
            return as_list(r.singles(b.starts, b.shape), b)
        return [r.full()]
    except Exception as e:  # noqa: BLE001
        log(f"    no zarr-python reference: {type(e).__name__}: {e}")
        return None


def summarize(w: WorkloadDef, contenders: list[Contender], batches: list[Batch], threads: int,
              versions: dict, selected: list[str]) -> list[dict]:
    rows = []
    b0 = batches[1] if len(batches) > 1 else batches[0]
    for c in contenders:
        row = {
            "workload": w.id, "cache": w.cache, "reader": c.name, "kind": c.kind, "threads": threads,
            "unit": w.unit, "status": c.status, "check": c.extra.get("check", "n/a" if c.kind == "limit" else "-"),
            "times_s": list(c.times), "config": c.extra.get("config"),
        }
        if c.times and c.status == "ok":
            # Per-round rates (batches differ in units/bytes when crops are random).
            rates = [batches[i + 1].units / t for i, t in enumerate(c.times)]
            mbps = [batches[i + 1].out_bytes / t / 1e6 for i, t in enumerate(c.times)]
            row["median_s"] = statistics.median(c.times)
            row["units_per_s"] = statistics.median(rates)
            row["MBps"] = statistics.median(mbps)
            if c.name.startswith("limit: raw"):
                cache, m = c.extra["cache"], c.extra["merged"]
                rb = [cache.ranges(batches[i + 1], m).nbytes / t / 1e6 for i, t in enumerate(c.times)]
                row["read_MBps"] = statistics.median(rb)
                row["ranges_per_batch"] = len(cache.ranges(b0, m))
                row["read_bytes_per_batch"] = cache.ranges(b0, m).nbytes
                if m:
                    row["merge"] = {"max_gap": cache.max_gap, "max_request": cache.max_request}
        rows.append(row)
    for name in w.readers:
        if name in (c.name for c in contenders) or (selected and name not in selected):
            continue
        base = name.split()[0]
        rows.append({"workload": w.id, "cache": w.cache, "reader": name, "kind": "reader", "threads": threads,
                     "unit": w.unit,
                     "status": readers_mod.unavailable_reason(name) if versions.get(base) is None else "not run",
                     "check": "-", "times_s": []})
    return rows


def run_workload(w: WorkloadDef, args, store: Path, spec: StoreSpec, versions: dict, uring: tuple) -> dict:
    global _ref_path
    _ref_path = store
    layout = ShardLayout.open(store)
    files = [str(p) for p in data_files(store)]
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else w.rounds)
    thread_list = sorted({1, args.threads}) if w.per_thread else [args.threads]
    cold = w.cache == "cold"
    out_rows, details = [], []
    for threads in thread_list:
        rng = np.random.default_rng([args.seed, int(w.id[1:]), threads])
        batches = make_batches(w, layout, np.dtype(spec.dtype).itemsize, rounds + 1, args.quick, rng)
        b = batches[0]
        log(f"  {w.id} threads={threads}: {rounds} timed rounds + 1 warm-up; per batch {b.units} {w.unit}, "
            f"{len(b.chunks)} chunk reads, {b.out_bytes / 2**20:.1f} MiB out")
        contenders = []
        for name in w.readers:
            if args.readers and name not in args.readers:
                continue
            base = name.split()[0]
            if versions.get(base) is None:
                continue
            try:
                contenders.append(reader_contender(name, store, threads, w.batch))
            except Exception as e:  # noqa: BLE001
                c = Contender(name, "reader", threads, lambda b, r: (0.0, None))
                c.status = f"error: {type(e).__name__}: {e}"
                log(f"    {name}: cannot open: {c.status}")
                contenders.append(c)
        contenders += limit_contenders(layout, files, cold, threads, spec.chunk_nbytes, *uring)
        t0 = time.perf_counter()
        info = run_interleaved(w, contenders, batches, files, cold)
        for c in contenders:
            if "reader" in c.extra:
                c.extra.pop("reader").close()
        rows = summarize(w, contenders, batches, threads, versions, args.readers)
        out_rows += rows
        details.append({"threads": threads, "rounds": rounds, "seconds": time.perf_counter() - t0,
                        "batch_units": [x.units for x in batches], "batch_out_bytes": [x.out_bytes for x in batches],
                        **info})
        for row in rows:
            log("    " + report.short_line(row))
    return {"rows": out_rows, "details": details}


# ----------------------------------------------------------------------------- W6 (memory)


def run_memory(w: WorkloadDef, args, store: Path, spec: StoreSpec, versions: dict) -> dict:
    rows = []
    child = HERE / "rss_child.py"
    crcs = {}
    for name in w.readers:
        if args.readers and name not in args.readers:
            continue
        if versions.get(name.split()[0]) is None:
            rows.append({"workload": w.id, "cache": "hot", "reader": name, "kind": "reader",
                         "threads": args.threads, "status": readers_mod.unavailable_reason(name), "check": "-"})
            continue
        cmd = [sys.executable, str(child), "--reader", name, "--path", str(store), "--threads", str(args.threads)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            res = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
            status = "ok" if res else f"error: exit {p.returncode}: {p.stderr.strip()[-300:]}"
        except Exception as e:  # noqa: BLE001
            res, status = None, f"error: {e}"
        row = {"workload": w.id, "cache": "hot", "reader": name, "kind": "reader", "threads": args.threads,
               "status": status, "check": "-"}
        if res:
            row.update(res)
            crcs[name] = res["crc32"]
        rows.append(row)
        log("    " + report.short_line(row))
    ref = crcs.get("zarr-python")
    for row in rows:
        if row.get("status") == "ok":
            row["check"] = "n/a (no zarr-python)" if ref is None else ("ok" if row["crc32"] == ref else "MISMATCH (crc32)")
            if row["check"].startswith("MISMATCH"):
                row["status"] = row["check"]
    return {"rows": rows, "details": [{"threads": args.threads}]}


# ----------------------------------------------------------------------------- targets


def evaluate_targets(rows: list[dict]) -> list[dict]:
    """Adds vs-limit ratios and lsio/reader ratios to rows; returns one verdict per target."""
    verdicts = []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["workload"], r["cache"], r["threads"]), []).append(r)
    wdefs = {w.id: w for w in WORKLOADS}
    for (wid, cache, threads), rs in groups.items():
        w = wdefs[wid]
        if wid == "W13":
            verdicts += w13.targets(w, threads, rs)
            continue
        if wid == "W11":
            verdicts += w11.targets(w, cache, threads, rs, _verdict)
            continue
        ok = {r["reader"]: r for r in rs if r.get("status") == "ok"}
        if wid == "W7":
            verdicts += w7_targets(w, cache, threads, rs, ok)
            continue
        if wid == "W6":
            lr = ok.get("lsio")
            if lr:
                limit = lr["out_bytes"] + (64 << 20)
                met = lr["peak_bytes"] <= limit
                verdicts.append(_verdict(wid, cache, threads, "lsio", w.target, met,
                                         f"peak {lr['peak_bytes'] / 2**20:.0f} MiB vs {limit / 2**20:.0f} MiB"))
                lr["target"] = ("met" if met else "missed")
            continue
        rate = {n: r["units_per_s"] for n, r in ok.items() if "units_per_s" in r}
        lim = None
        if w.primary_limit == "zstd":
            lim = next((v for n, v in rate.items() if n.startswith("limit: zstd")), None)
        elif w.primary_limit == "blosc":
            lim = next((v for n, v in rate.items() if n.startswith("limit: blosc")), None)
        elif w.primary_limit == "raw":
            raws = [v for n, v in rate.items() if n.startswith("limit: raw")]
            lim = max(raws) if raws else None
        peers = {n: v for n, v in rate.items() if n in PEERS}
        for r in rs:
            if r["reader"] in rate:
                if lim:
                    r["vs_limit"] = rate[r["reader"]] / lim
                if "lsio" in rate and r["kind"] == "reader" and not r["reader"].startswith("lsio"):
                    r["lsio_ratio"] = rate["lsio"] / rate[r["reader"]]
        lsio_names = [n for n in rate if n.startswith("lsio")]
        for n in lsio_names:
            v = rate[n]
            checks = []
            if wid in ("W1", "W2", "W8") and peers:
                best = max(peers, key=peers.get)
                checks.append((v >= 2 * peers[best], f"{v / peers[best]:.2f}x {best}"))
            if wid == "W2" and lim:
                checks.append((v >= 0.9 * lim, f"{v / lim:.2f}x raw read"))
            if wid == "W3" and "tensorstore" in peers:
                checks.append((v >= 2 * peers["tensorstore"], f"{v / peers['tensorstore']:.2f}x tensorstore"))
            if wid == "W4":
                checks.append((v >= 1e6, f"{v:,.0f} chunks/s"))
            if wid == "W5" and lim:
                checks.append((v >= 0.9 * lim, f"{v / lim:.2f}x zstd x{threads}"))
            if not checks:
                continue
            met = all(m for m, _ in checks)
            detail = ", ".join(d for _, d in checks)
            ok[n]["target"] = ("met" if met else "missed") + f" ({detail})"
            verdicts.append(_verdict(wid, cache, threads, n, w.target, met, detail))
    return verdicts


def w7_targets(w: WorkloadDef, cache: str, threads: int, rs: list[dict], ok: dict[str, dict]) -> list[dict]:
    """W7: crops/s >= 2x the fastest peer and requests/batch <= the fewest of any peer (the
    strict reading of "the best peer's"; the fastest peer's count is shown too) at the
    configured latency; >= 0.8x the link bound in the capped group."""
    out = []
    rate = {n: r["units_per_s"] for n, r in ok.items() if "units_per_s" in r}
    peers = {n: v for n, v in rate.items() if n in w7.PEERS}
    for r in rs:
        if r["reader"] in rate and r["kind"] == "reader" and not r["reader"].startswith("lsio") and "lsio" in rate:
            r["lsio_ratio"] = rate["lsio"] / rate[r["reader"]]
    bound = next((r for n, r in ok.items() if n.startswith("limit: link")), None)
    if bound:
        for r in rs:
            if r["reader"] in rate and r["kind"] == "reader":
                r["vs_limit"] = rate[r["reader"]] / bound["units_per_s"]
    for n in [n for n in rate if n.startswith("lsio")]:
        v, row = rate[n], ok[n]
        checks = []
        if bound:
            checks.append((v >= 0.8 * bound["units_per_s"], f"{v / bound['units_per_s']:.2f}x link bound"))
        elif peers:
            best = max(peers, key=peers.get)
            checks.append((v >= 2 * peers[best], f"{v / peers[best]:.2f}x {best}"))
            req = {p: ok[p]["requests_per_batch"] for p in peers}
            fewest = min(req, key=req.get)
            also = f", {req[best]:g} ({best})" if best != fewest else ""
            checks.append((row["requests_per_batch"] <= req[fewest],
                           f"{row['requests_per_batch']:g} requests/batch vs {req[fewest]:g} ({fewest}){also}"))
        if not checks:
            continue
        met = all(m for m, _ in checks)
        detail = ", ".join(d for _, d in checks)
        row["target"] = ("met" if met else "missed") + f" ({detail})"
        out.append(_verdict("W7", cache, threads, n, w.target, met, detail))
    return out


def _verdict(wid, cache, threads, reader, target, met, detail) -> dict:
    return {"workload": wid, "cache": cache, "threads": threads, "reader": reader, "target": target,
            "met": bool(met), "detail": detail}


# ----------------------------------------------------------------------------- main


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small stores and 2 rounds (smoke run, < 2 min)")
    p.add_argument("--only", default="", help="comma-separated workload ids, e.g. W1,W3")
    p.add_argument("--rounds", type=int, default=None, help="timed rounds per workload (default: per workload)")
    p.add_argument("--threads", type=int, default=2, help="threads for every reader (W3 also runs 1)")
    p.add_argument("--readers", default="", help="comma-separated readers to run (default: all installed)")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results", help="where results.{json,md,png} go")
    p.add_argument("--cache-dir", type=Path, default=BENCH_DIR / ".cache", help="where the stores live")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--write-results", action="store_true",
                   help="also write benchmarks/RESULTS.md (default only in full mode)")
    p.add_argument("--results-md", type=Path, default=BENCH_DIR / "RESULTS.md", help=argparse.SUPPRESS)
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    p.add_argument("--w7-latency-ms", type=float, default=20.0,
                   help="W7: the object server's delay before the first byte of every response")
    p.add_argument("--w7-rate", type=float, default=100e6,
                   help="W7: bytes/s of the bandwidth-capped rows (lsio, TensorStore); 0: none; never in --quick")
    args = p.parse_args(argv)
    ids = {w.id for w in WORKLOADS}
    args.only = [s.strip().upper() for s in args.only.split(",") if s.strip()]
    bad = [s for s in args.only if s not in ids]
    if bad:
        p.error(f"unknown workload(s) {bad}; choose from {sorted(ids)}")
    args.readers = [s.strip() for s in args.readers.split(",") if s.strip()]
    known = list(dict.fromkeys([*readers_mod.READERS, *readers_mod.REMOTE_READERS]))
    badr = [s for s in args.readers if s not in known]
    if badr:
        p.error(f"unknown reader(s) {badr}; choose from {known} (W7 uses {list(readers_mod.REMOTE_READERS)})")
    if args.threads < 1 or (args.rounds is not None and args.rounds < 1):
        p.error("--threads and --rounds must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    full_mode = not args.quick and not args.only
    workloads = [w for w in WORKLOADS if not args.only or w.id in args.only]
    versions = readers_mod.peer_versions()
    if versions.get("lsio") is None:
        log("error: lsio is not importable (bash scripts/bench.sh installs it)")
        return 2
    if versions.get("zarr-python") is None:
        log("error: zarr-python >= 3 is needed to write the stores (pip install 'zarr>=3')")
        return 2
    machine = limits.machine_info(args.cache_dir if args.cache_dir.exists() else BENCH_DIR)
    uring = limits.uring_usable()
    log(f"lsio benchmark suite ({'quick' if args.quick else 'full'}): threads={args.threads}, "
        f"workloads {','.join(w.id for w in workloads)}")
    log(f"machine: {machine.get('cpu_model', '?')}, {machine['cpus_usable']} usable CPUs, "
        f"{machine.get('ram_gib', '?')} GiB RAM, kernel {machine['kernel']}, disk {machine['disk']}")
    log("readers: " + ", ".join(f"{k} {v}" if v else f"{k}: {readers_mod.unavailable_reason(k)}"
                                for k, v in versions.items()))
    log(f"io_uring: {'available' if uring[0] else 'unavailable: ' + uring[1]}")

    # 1. stores
    log("\nstores (written once with zarr-python, zstd level 3):")
    store_info = {}
    paths = {}
    for key in dict.fromkeys(k for w in workloads for k in (w.store, *w.extra_stores) if k):  # W11: no store
        spec = STORES[key][1 if args.quick else 0]
        path = ensure_store(spec, args.cache_dir, log=log)
        packed = stored_bytes(path)
        store_info[key] = {"path": str(path), "spec": spec.describe(), "raw_bytes": spec.nbytes,
                           "stored_bytes": packed, "ratio": spec.nbytes / packed}
        paths[key] = (path, spec)
        log(f"  {key}: {spec.describe()}: {spec.nbytes / 2**20:.0f} MiB raw, {packed / 2**20:.0f} MiB stored, "
            f"compression ratio {spec.nbytes / packed:.2f}")

    # 2. cold check, once
    cold_check = None
    if any(w.cache == "cold" for w in workloads):
        key = next(w.store for w in workloads if w.cache == "cold")
        cold_check = limits.check_cold(paths[key][0])
        log(f"\ncold check ({key}): {cold_check['resident_before'] / 2**20:.0f} MiB in page cache after reading it, "
            f"{cold_check['resident_after'] / 2**20:.1f} MiB after posix_fadvise(DONTNEED) -> "
            f"{'ok' if cold_check['ok'] else 'FAILED: cold rows are not cold'}")

    # 3. workloads
    results = {}
    all_rows = []
    for w in workloads:
        path, spec = paths[w.store] if w.store else (None, None)
        log(f"\n{w.id}: {w.title} [{w.cache}] on {w.store or 'its own file'}")
        t0 = time.perf_counter()
        if w.batch == "rss":
            res = run_memory(w, args, path, spec, versions)
        elif w.id == "W7":
            res = w7.run(w, args, path, spec, make_batches, report.short_line)
        elif w.id == "W8":
            res = w8.run(w, args, path, spec, make_batches, report.short_line)
        elif w.id == "W13":
            res = w13.run(w, args, paths, make_batches, {x.id: x for x in WORKLOADS}, report.short_line)
        elif w.id == "W11":
            res = w11.run(w, args, report.short_line)
        else:
            res = run_workload(w, args, path, spec, versions, uring)
        res["seconds"] = time.perf_counter() - t0
        res["title"] = w.title
        res["target"] = w.target
        results[w.id] = res
        all_rows += res["rows"]
        log(f"  ({res['seconds']:.0f} s)")

    verdicts = evaluate_targets(all_rows)
    fio = None
    if any(w.cache == "cold" for w in workloads):
        key = next(w.store for w in workloads if w.cache == "cold")
        fio = limits.fio_random_read([str(p) for p in data_files(paths[key][0])],
                                     paths[key][1].chunk_nbytes, args.threads, cold=True)
    elapsed = time.perf_counter() - t_start
    doc = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": os.environ.get("LSIO_BENCH_COMMAND") or " ".join([Path(sys.executable).name, *sys.argv]),
        "mode": "quick" if args.quick else ("full" if full_mode else "partial"),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "machine": machine, "versions": versions, "unavailable": dict(readers_mod.IMPORT_ERRORS),
        "io_uring": {"available": uring[0], "reason": uring[1]},
        "stores": store_info, "cold_check": cold_check, "fio": fio,
        "workloads": results, "rows": all_rows, "targets": verdicts, "elapsed_s": elapsed,
        "checks_passed": all(not str(r.get("status", "")).startswith("MISMATCH") for r in all_rows),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(doc, indent=1, default=str))
    md = report.markdown(doc)
    (args.out / "results.md").write_text(md)
    if not args.no_plot:
        try:
            report.plot(doc, args.out / "results.png")
        except Exception as e:  # noqa: BLE001 - the plot is a nicety
            log(f"plot failed: {e}")
    log("\n" + md)
    alone = [w.id for w in workloads]
    if args.write_results and alone in (["W7"], ["W13"]) and args.results_md.exists() and not args.quick:
        # W7 or W13 alone: update its section of the existing RESULTS.md, keep the rest.
        args.results_md.write_text(report.merge_section(args.results_md.read_text(), doc, md, alone[0]))
        log(f"updated the {alone[0]} section of {args.results_md}")
    elif full_mode or args.write_results:
        new = report.results_md(doc, md)
        if args.results_md.exists():
            new = report.keep_standalone(args.results_md.read_text(), new, frozenset(w.id for w in WORKLOADS))
        args.results_md.write_text(new)
        log(f"wrote {args.results_md}")
    log(f"wrote {args.out}/results.json, results.md{'' if args.no_plot else ', results.png'} "
        f"({elapsed / 60:.1f} min)")
    return 0 if doc["checks_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
