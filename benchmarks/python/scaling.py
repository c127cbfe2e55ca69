"""Thread scaling of W1, W4 and W5, with the serial share of a call and Amdahl's projection.

    python benchmarks/python/scaling.py                      # threads 1..CPUs, quick stores for W4/W5
    python benchmarks/python/scaling.py --threads 1,2,4,8,16 --full --json /tmp/scaling.json

For each workload (the suite's definitions and batch generator, page cache hot) and thread
count, lsio's rate (median of --rounds interleaved rounds) and, from the engine's own timer
(``lsio._core._last_call_profile``), how a call splits:
- ``parallel``: inside the parallel phase (the calling thread and the pool threads reading
  and decoding);
- ``serial``: everything else on the calling thread: Python argument handling and output
  allocation, planning, shard-index lookups, coalescing, setup.
The serial fraction f is serial / (serial + parallel) at 1 thread. Amdahl's law projects the
speed-up at n threads as 1 / (f + (1 - f) / n); the table prints it for n = 16 beside the
16-core speed-ups measured in issue 13 (W1 317 -> 2,884 crops/s: 9.1x; W4 and W5 have no
1-thread figure there). A projection well above the measured speed-up means something other
than the calling thread's serial work bounds the 16-thread figure (memory bandwidth, the
tail of a call, the pool's hand-offs).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CACHE_DIR = HERE.parent / ".cache"
ISSUE_16_CORE = {"W1": "9.1x (317 -> 2,884 crops/s)", "W4": "n/a (690,740 chunks/s at 16)",
                 "W5": "n/a (8.2 GB/s at 16)"}


def log(msg: str = "") -> None:
    print(msg, flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default=None, help="comma-separated thread counts (default 1..CPUs)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--full", action="store_true", help="full-size W4/W5 stores (W1 is always full size)")
    ap.add_argument("--workloads", default="W1,W4,W5")
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import lsio
    from lsio import _core
    from stores import ShardLayout, ensure_store
    from suite import STORES, WORKLOADS, make_batches

    cpus = len(os.sched_getaffinity(0))
    threads = [int(t) for t in args.threads.split(",")] if args.threads else list(range(1, cpus + 1))
    out_rows = []
    log(f"thread scaling on {cpus} usable CPUs, threads {threads}, {args.rounds} rounds, page cache hot")
    for wid in args.workloads.split(","):
        w = next(x for x in WORKLOADS if x.id == wid)
        quick = wid != "W1" and not args.full
        spec = STORES[w.store][1 if quick else 0]
        path = ensure_store(spec, args.cache_dir, log=log)
        layout = ShardLayout.open(path)
        rng = np.random.default_rng([7, int(wid[1:])])
        batches = make_batches(w, layout, np.dtype(spec.dtype).itemsize, args.rounds, quick, rng)
        for root, _, files in os.walk(path):  # page cache hot
            for f in files:
                with open(os.path.join(root, f), "rb") as fh:
                    while fh.read(1 << 24):
                        pass
        arrays = {t: lsio.open(str(path), threads=t) for t in threads}
        outs = {}
        samples = {t: [] for t in threads}
        for t in threads:  # warm-up (pool threads, first-touch of outputs)
            b = batches[0]
            _run(arrays[t], b, outs)
        for k in range(args.rounds):
            b = batches[k]
            order = threads[k % len(threads):] + threads[:k % len(threads)]
            for t in order:
                t0 = time.perf_counter()
                _run(arrays[t], b, outs)
                wall = time.perf_counter() - t0
                prof = _core._last_call_profile()
                samples[t].append((wall, prof["workers_ns"] / 1e9, b.units,
                                   (prof["plan_ns"] / 1e9, prof["resolve_ns"] / 1e9, prof["coalesce_ns"] / 1e9)))
        f1 = None
        base_rate = None
        log(f"\n{wid}: {w.title} on {spec.describe()}{' (quick store)' if quick else ''}")
        log("| threads | rate | speed-up | serial ms/call | parallel ms/call | serial share "
            "| of serial: plan / resolve / coalesce ms |")
        log("|---|---|---|---|---|---|---|")
        for t in threads:
            walls = [s[0] for s in samples[t]]
            par = [s[1] for s in samples[t]]
            units = samples[t][0][2]
            wall = statistics.median(walls)
            p = statistics.median(par)
            serial = max(0.0, wall - p)
            rate = units / wall
            if t == threads[0]:
                base_rate = rate
            if t == 1:
                f1 = serial / wall
            unit = w.unit
            phases = [statistics.median(s[3][k] for s in samples[t]) for k in range(3)]
            log(f"| {t} | {rate:,.0f} {unit}/s | {rate / base_rate:.2f}x | {serial * 1e3:.2f} | {p * 1e3:.2f} | "
                f"{serial / wall:.1%} | {' / '.join(f'{x * 1e3:.2f}' for x in phases)} |")
            out_rows.append({"workload": wid, "threads": t, "rate": rate, "unit": unit, "wall_s": wall,
                             "serial_s": serial, "parallel_s": p, "plan_s": phases[0], "resolve_s": phases[1],
                             "coalesce_s": phases[2], "store": spec.describe(), "quick": quick})
        if f1 is not None:
            s16 = 1 / (f1 + (1 - f1) / 16)
            log(f"serial fraction at 1 thread f = {f1:.3%}; Amdahl at 16 threads: {s16:.1f}x "
                f"(measured on the 16-core machine, issue 13: {ISSUE_16_CORE.get(wid, 'n/a')})")
            out_rows.append({"workload": wid, "serial_fraction_1": f1, "amdahl_16": s16})
    if args.json:
        args.json.write_text(json.dumps({"cpus": cpus, "rows": out_rows}, indent=1))
    return 0


def _run(arr, b, outs):
    if b.kind == "crops":
        key = (id(arr), len(b.starts), *b.shape)
        if key not in outs:
            outs[key] = np.zeros((len(b.starts), *b.shape), arr.dtype)
        arr.read_crops(b.starts, b.shape, out=outs[key])
    elif b.kind == "full":
        key = (id(arr), "full")
        if key not in outs:
            outs[key] = np.zeros(arr.shape, arr.dtype)
        arr.read((), out=outs[key])
    else:
        raise ValueError(b.kind)


if __name__ == "__main__":
    sys.exit(main())
