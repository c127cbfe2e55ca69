"""``lsio.open(..., tune=True)``: measure the storage under a store, then pick coalescing.

Coalescing two reads pays off while the bytes in the gap cost less than one more request,
so the break-even gap is about latency x bandwidth (the bandwidth-delay product). At open
this module samples the store's data files and measures, in a few milliseconds:

1. page-cache residency: 4 KiB reads with ``RWF_NOWAIT`` at random offsets (a miss returns
   EAGAIN at once instead of reading);
2. request latency: the median of random 4 KiB reads;
3. bandwidth: reads of 1 MiB (or whole files of 64 KiB..1 MiB) at random offsets;

then sets ``max_gap`` = latency x bandwidth (rounded to a power of two, 4 KiB..4 MiB) and
``max_request`` = 16 x max_gap (1..64 MiB). Options given explicitly (argument or
environment variable) are kept. The measurement reads at most ~3 MiB of the store, which
then sits in the page cache; ``Array.options["tuning"]`` shows what was measured.

Usage: ``tune(config)`` updates a configuration from ``_options.resolve`` in place.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any, Dict, List

_PROBE = 4096
_BULK = 1 << 20
_BULK_MIN = 64 << 10  # smaller files say little about bandwidth
_SAMPLE_FILES = 8
_SCAN_LIMIT = 4096


def _data_files(root: str) -> List[str]:
    """Up to _SAMPLE_FILES random chunk or shard files below ``root`` (metadata excluded)."""
    found: List[str] = []
    stack = [root]
    while stack and len(found) < _SCAN_LIMIT:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            if e.name in ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                elif e.is_file() and e.stat().st_size >= _PROBE:
                    found.append(e.path)
            except OSError:
                continue
    rng = random.Random(0x15105)
    rng.shuffle(found)
    return found[:_SAMPLE_FILES]


def _pow2(x: float, lo: int, hi: int) -> int:
    v = lo
    while v < hi and v * 2 <= x:
        v *= 2
    return v


def measure(root: str) -> Dict[str, Any]:
    files = _data_files(root)
    rng = random.Random(0x7E57)
    buf = bytearray(_PROBE)
    bulk = bytearray(_BULK)
    hits = misses = 0
    latencies: List[float] = []
    rates: List[float] = []
    t_start = time.perf_counter()
    for path in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            size = os.fstat(fd).st_size
            offsets = [rng.randrange(0, max(1, size - _PROBE)) & ~(_PROBE - 1) for _ in range(4)]
            for off in offsets[:2]:
                try:
                    os.preadv(fd, [buf], off, os.RWF_NOWAIT)
                    hits += 1
                except BlockingIOError:
                    misses += 1
                except (OSError, AttributeError):
                    break
            for off in offsets[2:]:
                t = time.perf_counter()
                os.preadv(fd, [buf], off)
                latencies.append(time.perf_counter() - t)
            if size >= _BULK_MIN:
                length = min(_BULK, size)
                off = rng.randrange(0, size - length + 1) & ~(_PROBE - 1)
                t = time.perf_counter()
                n = os.preadv(fd, [memoryview(bulk)[:length]], off)
                dt = time.perf_counter() - t
                if n > 0 and dt > 0:
                    rates.append(n / dt)
        except OSError:
            continue
        finally:
            os.close(fd)
    out: Dict[str, Any] = {
        "files_sampled": len(files),
        "page_cache_hit_fraction": hits / (hits + misses) if hits + misses else None,
        "latency_us": statistics.median(latencies) * 1e6 if latencies else None,
        "bandwidth_MBps": statistics.median(rates) / 1e6 if rates else None,
        "seconds": time.perf_counter() - t_start,
    }
    return out


def tune(config: Dict[str, Any]) -> None:
    m = measure(config["path"])
    config["tuning"] = m
    if m["latency_us"] is None or m["bandwidth_MBps"] is None:
        m["note"] = "too little data to measure; defaults kept"
        return
    bdp = (m["latency_us"] * 1e-6) * (m["bandwidth_MBps"] * 1e6)
    gap = _pow2(bdp, 4 << 10, 4 << 20)
    chosen = {"max_gap": gap, "max_request": min(64 << 20, max(1 << 20, 16 * gap))}
    for k, v in chosen.items():
        if k not in config["explicit"]:
            config[k] = v
    m["chosen"] = {k: config[k] for k in chosen}
