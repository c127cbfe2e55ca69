"""W10: load a multi-GiB sharded safetensors checkpoint, cold and hot page cache.

    python benchmarks/python/w10.py                       # 2 GiB in 2 shards, 2 threads, 3 rounds
    python benchmarks/python/w10.py --gib 4 --shards 4 --threads 16 --rounds 5 --json /tmp/w10.json

The checkpoint is written once (cached in benchmarks/.cache/w10_<gib>g_<shards>s/) by the
``safetensors`` package, shaped like a language model: per layer four square float32
matrices and two norm vectors, plus embedding and output matrices, split into shards with a
``model.safetensors.index.json`` as ``transformers`` writes it.

Readers (every one returns fresh numpy arrays of every tensor):
- ``lsio``: ``lsio.safetensors.load(index)``: three ``read_ranges`` calls (length prefixes,
  headers, all tensors straight into the result arrays).
- ``safetensors load_file``: ``safetensors.numpy.load_file`` on every shard.
- ``safetensors safe_open``: ``safe_open(framework="np")`` and ``get_tensor`` of every name.
- ``plain reads``: what a hand-written loader does: per shard, read the header with Python,
  then ``readinto`` each tensor's fresh array in file order (one thread).
Limit: ``raw read``: every tensor byte read by the engine's own I/O layer without lsio's
planner (``lsio._core._limits.raw_read``: 4 MiB requests, ``--threads`` threads, into reused
pre-touched buffers): what the storage gives.

Cold rounds evict the shard files first (fsync + posix_fadvise(DONTNEED), checked with
mincore); hot rounds follow an untimed read. Rounds interleave the readers. The first lsio
load is compared byte for byte with ``safetensors.numpy.load_file``.
Targets (issue 15): cold lsio >= 0.9x the raw read; hot lsio >= 2x ``load_file``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import limits  # noqa: E402
from stores import ByteRanges  # noqa: E402

CACHE = HERE.parent / ".cache"
MIB = 1 << 20


def log(msg: str = "") -> None:
    print(msg, flush=True)


def layout(gib: float) -> list[tuple[str, tuple[int, ...]]]:
    """Tensor names and shapes (float32) adding up to about `gib` GiB."""
    hidden, vocab = (2048, 32000) if gib >= 1 else (256, 4000)  # small: smoke tests
    per_layer = 4 * hidden * hidden * 4 + 2 * hidden * 4
    fixed = 2 * vocab * hidden * 4 + hidden * 4
    layers = max(1, int((gib * 2**30 - fixed) // per_layer))
    out = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", (hidden,))]
        out += [(p + f"self_attn.{m}_proj.weight", (hidden, hidden)) for m in "qkvo"]
        out += [(p + "post_attention_layernorm.weight", (hidden,))]
    out += [("model.norm.weight", (hidden,)), ("lm_head.weight", (vocab, hidden))]
    return out


def ensure_checkpoint(gib: float, shards: int, cache: Path = CACHE) -> Path:
    from safetensors.numpy import save_file

    d = cache / f"w10_{gib:g}g_{shards}s"
    if (d / ".complete").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    tensors = layout(gib)
    total = sum(int(np.prod(s)) * 4 for _, s in tensors)
    per_shard = total / shards
    rng = np.random.default_rng(10)
    groups: list[list[tuple[str, tuple[int, ...]]]] = [[] for _ in range(shards)]
    acc = 0
    for name, shape in tensors:
        groups[min(shards - 1, int(acc // per_shard))].append((name, shape))
        acc += int(np.prod(shape)) * 4
    weight_map = {}
    t0 = time.perf_counter()
    for k, group in enumerate(groups):
        fname = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        data = {n: rng.standard_normal(s, dtype=np.float32) for n, s in group}
        save_file(data, str(d / fname), metadata={"format": "np"})
        weight_map.update({n: fname for n in data})
        del data
    (d / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    (d / ".complete").write_text("ok")
    log(f"wrote {d} ({total / 2**30:.2f} GiB, {len(tensors)} tensors, {shards} shards) "
        f"in {time.perf_counter() - t0:.0f} s")
    return d


def shard_files(d: Path) -> list[Path]:
    return sorted(d.glob("*.safetensors"))


def tensor_ranges(d: Path) -> tuple[ByteRanges, int]:
    """Every tensor's absolute byte range, in 4 MiB pieces, for the raw-read limit."""
    paths, files, offs, lens = [], [], [], []
    total = 0
    for i, p in enumerate(shard_files(d)):
        with open(p, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
        paths.append(str(p))
        for k, v in header.items():
            if k == "__metadata__":
                continue
            a, b = v["data_offsets"]
            a += 8 + n
            b += 8 + n
            total += b - a
            for o in range(a, b, 4 * MIB):
                files.append(i)
                offs.append(o)
                lens.append(min(4 * MIB, b - o))
    return ByteRanges(paths, np.asarray(files, np.int64), np.asarray(offs, np.uint64),
                      np.asarray(lens, np.uint64)), total


# ----------------------------------------------------------------------------- readers

def read_lsio(d: Path, threads: int) -> dict:
    import lsio.safetensors

    return lsio.safetensors.load(str(d / "model.safetensors.index.json"), threads=threads)


def read_load_file(d: Path, threads: int) -> dict:
    from safetensors.numpy import load_file

    out: dict = {}
    for p in shard_files(d):
        out.update(load_file(str(p)))
    return out


def read_safe_open(d: Path, threads: int) -> dict:
    from safetensors import safe_open

    out: dict = {}
    for p in shard_files(d):
        with safe_open(str(p), framework="np") as f:
            for k in f.keys():
                out[k] = f.get_tensor(k)
    return out


_NP = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64, "I32": np.int32,
       "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_plain(d: Path, threads: int) -> dict:
    out: dict = {}
    for p in shard_files(d):
        with open(p, "rb", buffering=0) as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n))
            items = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                           key=lambda kv: kv[1]["data_offsets"][0])
            for k, v in items:
                a = np.empty(v["shape"], dtype=_NP[v["dtype"]])
                f.seek(8 + n + v["data_offsets"][0])
                f.readinto(memoryview(a.reshape(-1).view(np.uint8)))
                out[k] = a
    return out


READERS = {
    "lsio": read_lsio,
    "safetensors load_file": read_load_file,
    "safetensors safe_open": read_safe_open,
    "plain reads": read_plain,
}


def verify(d: Path, threads: int) -> None:
    got = read_lsio(d, threads)
    want = read_load_file(d, threads)
    assert got.keys() == want.keys(), "lsio and safetensors load different names"
    for k in want:
        g, w = got[k], want[k]
        assert g.dtype == w.dtype and g.shape == w.shape, k
        assert g.tobytes() == w.tobytes(), f"{k}: bytes differ"
    log(f"check: lsio equals safetensors.numpy.load_file on all {len(want)} tensors")


# ----------------------------------------------------------------------------- main

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=2.0, help="checkpoint size in GiB (default 2)")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2, help="lsio threads and raw-read threads")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated readers (default: all)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--cache-dir", type=Path, default=CACHE, help="where the checkpoint is written once")
    args = ap.parse_args(argv)

    import lsio

    d = ensure_checkpoint(args.gib, args.shards, args.cache_dir)
    files = [str(p) for p in shard_files(d)]
    ranges, total = tensor_ranges(d)
    readers = [r for r in READERS if not args.only or r in args.only.split(",")]
    log(f"W10: {total / 2**30:.2f} GiB of tensors in {len(files)} shards, threads={args.threads}, "
        f"rounds={args.rounds}, lsio {lsio.__version__}, io {lsio.io_backend_info()['auto']}")
    verify(d, args.threads)

    cold_check = None
    times: dict = {(c, r): [] for c in ("cold", "hot") for r in readers + ["raw read"]}
    for cache in ("cold", "hot"):
        if cache == "hot":
            for p in files:  # untimed: everything in the page cache
                with open(p, "rb") as f:
                    while f.read(64 * MIB):
                        pass
        for rnd in range(args.rounds):
            order = (readers + ["raw read"])[rnd % (len(readers) + 1):] + (readers + ["raw read"])[:rnd % (len(readers) + 1)]
            for r in order:
                if cache == "cold":
                    limits.drop_cache(files)
                    if cold_check is None:
                        cold_check = limits.resident_bytes(files)
                gc.collect()
                t0 = time.perf_counter()
                if r == "raw read":
                    dt = limits.raw_read_seconds(ranges, "pread", args.threads)
                else:
                    res = READERS[r](d, args.threads)
                    dt = time.perf_counter() - t0
                    del res
                times[(cache, r)].append(dt)
                log(f"  {cache} round {rnd + 1} {r}: {total / dt / 1e9:.2f} GB/s ({dt:.2f} s)")
    rows = []
    for (cache, r), ts in times.items():
        if not ts:
            continue
        med = statistics.median(ts)
        rows.append({"cache": cache, "reader": r, "seconds": med, "gb_s": total / med / 1e9})
    by = {(x["cache"], x["reader"]): x for x in rows}
    log("")
    log("| cache | reader | GB/s (median) | vs raw read | vs safetensors load_file |")
    log("|---|---|---|---|---|")
    for x in rows:
        raw = by.get((x["cache"], "raw read"))
        lf = by.get((x["cache"], "safetensors load_file"))
        log(f"| {x['cache']} | {x['reader']} | {x['gb_s']:.2f} | "
            f"{(x['gb_s'] / raw['gb_s']) if raw else float('nan'):.2f}x | "
            f"{(x['gb_s'] / lf['gb_s']) if lf else float('nan'):.2f}x |")
    verdicts = {}
    if ("cold", "lsio") in by and ("cold", "raw read") in by:
        v = by[("cold", "lsio")]["gb_s"] / by[("cold", "raw read")]["gb_s"]
        verdicts["cold >= 0.9x raw read"] = {"value": v, "met": v >= 0.9}
    if ("hot", "lsio") in by and ("hot", "safetensors load_file") in by:
        v = by[("hot", "lsio")]["gb_s"] / by[("hot", "safetensors load_file")]["gb_s"]
        verdicts["hot >= 2x load_file"] = {"value": v, "met": v >= 2.0}
    for k, v in verdicts.items():
        log(f"target {k}: {v['value']:.2f}x -> {'met' if v['met'] else 'MISSED'}")
    log(f"cold check: {cold_check or 0} bytes of the shards resident after eviction")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "workload": "W10", "total_bytes": total, "shards": len(files), "threads": args.threads,
            "rounds": args.rounds, "rows": rows, "targets": verdicts, "resident_after_evict": cold_check,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
            "times": {f"{c}/{r}": ts for (c, r), ts in times.items()},
        }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
