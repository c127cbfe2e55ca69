"""``lsio.open(..., tune=True)``: measure the storage under a store, then pick coalescing.

Merging two reads pays off while reading the bytes between them costs less than issuing
one more request. With many reads in flight (as lsio keeps them), one more request costs
about 1 / IOPS of device time, not its full latency, so the break-even gap is about
bandwidth / IOPS. At open this module samples the store's data files and measures, in a
few milliseconds, through the engine's own I/O layer (io_uring where available, else pread):

1. page-cache residency: 4 KiB reads with ``RWF_NOWAIT`` at random offsets (a miss returns
   EAGAIN at once instead of reading);
2. IOPS: 64 random 4 KiB reads, 32 in flight;
3. bandwidth: reads of 1 MiB (or whole files of 64 KiB..1 MiB), 8 in flight;

then sets ``max_gap`` = bandwidth / IOPS (rounded down to a power of two, 4 KiB..4 MiB) and
``max_request`` = 64 x max_gap (1..64 MiB). On the dev VM's virtio disk this picks 16 KiB /
1 MiB cold, the best pair of a measured sweep. Options given explicitly (argument or
environment variable) are kept. The measurement reads at most ~9 MiB of the store, which
then sits in the page cache; ``Array.options["tuning"]`` shows what was measured.

Usage: ``tune(config)`` updates a configuration from ``_options.resolve`` in place.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any, Dict, List, Tuple

from . import _core

_PROBE = 4096
_BULK = 1 << 20
_BULK_MIN = 64 << 10  # smaller files say little about bandwidth
_SAMPLE_FILES = 8
_SCAN_LIMIT = 4096
_SMALL_READS = 64
_BULK_READS = 8


def _data_files(root: str) -> List[Tuple[str, int]]:
    """Up to _SAMPLE_FILES random (chunk or shard file, size) below ``root``."""
    found: List[Tuple[str, int]] = []
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
                elif e.is_file():
                    size = e.stat().st_size
                    if size >= _PROBE:
                        found.append((e.path, size))
            except OSError:
                continue
    rng = random.Random(0x15105)
    rng.shuffle(found)
    return found[:_SAMPLE_FILES]


def _pow2_floor(x: float, lo: int, hi: int) -> int:
    v = lo
    while v < hi and v * 2 <= x:
        v *= 2
    return v


def _residency(files: List[Tuple[str, int]], rng: random.Random) -> Tuple[int, int]:
    hits = misses = 0
    buf = bytearray(_PROBE)
    for path, size in files:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            for _ in range(2):
                off = rng.randrange(0, size - _PROBE + 1) & ~(_PROBE - 1)
                try:
                    os.preadv(fd, [buf], off, os.RWF_NOWAIT)
                    hits += 1
                except BlockingIOError:
                    misses += 1
        except (OSError, AttributeError):  # RWF_NOWAIT unsupported here
            pass
        finally:
            os.close(fd)
    return hits, misses


def measure(root: str) -> Dict[str, Any]:
    t_start = time.perf_counter()
    files = _data_files(root)
    rng = random.Random(0x7E57)
    out: Dict[str, Any] = {"files_sampled": len(files), "page_cache_hit_fraction": None,
                           "iops": None, "bandwidth_MBps": None}
    if not files:
        out["seconds"] = time.perf_counter() - t_start
        return out
    hits, misses = _residency(files, rng)
    if hits + misses:
        out["page_cache_hit_fraction"] = hits / (hits + misses)
    io = "uring" if _core.io_backend_info()["uring_available"] else "pread"
    # pread has no queue: emulate reads in flight with threads.
    threads, depth = (1, 32) if io == "uring" else (8, 1)
    paths = [p for p, _ in files]
    idx = [rng.randrange(len(files)) for _ in range(_SMALL_READS)]
    offs = [rng.randrange(0, files[i][1] - _PROBE + 1) & ~(_PROBE - 1) for i in idx]
    t_small = _core._limits.raw_read(paths, idx, offs, [_PROBE] * len(idx), io=io,
                                     threads=threads, queue_depth=depth)
    big = [i for i, (_, size) in enumerate(files) if size >= _BULK_MIN]
    if big and t_small > 0:
        bidx = [big[k % len(big)] for k in range(_BULK_READS)]
        blen = [min(_BULK, files[i][1]) for i in bidx]
        boffs = [rng.randrange(0, files[i][1] - n + 1) & ~(_PROBE - 1) for i, n in zip(bidx, blen)]
        t_big = _core._limits.raw_read(paths, bidx, boffs, blen, io=io,
                                       threads=1 if io == "uring" else _BULK_READS,
                                       queue_depth=_BULK_READS if io == "uring" else 1)
        if t_big > 0:
            out["iops"] = _SMALL_READS / t_small
            out["bandwidth_MBps"] = sum(blen) / t_big / 1e6
    out["io"] = io
    out["seconds"] = time.perf_counter() - t_start
    return out


def tune(config: Dict[str, Any]) -> None:
    m = measure(config["path"])
    config["tuning"] = m
    if m["iops"] is None or m["bandwidth_MBps"] is None:
        m["note"] = "too little data to measure; defaults kept"
        return
    gap = _pow2_floor(m["bandwidth_MBps"] * 1e6 / m["iops"], 4 << 10, 4 << 20)
    chosen = {"max_gap": gap, "max_request": min(64 << 20, max(1 << 20, 64 * gap))}
    for k, v in chosen.items():
        if k not in config["explicit"]:
            config[k] = v
    m["chosen"] = {k: config[k] for k in chosen}
