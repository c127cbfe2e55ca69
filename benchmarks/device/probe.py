"""GPU decode probe (device runs): where one batch's time goes, and what nvCOMP does with a
corrupt frame that passes lsio's header checks.

    python3 benchmarks/device/probe.py --cache-dir /tmp/bcache [--json out.json]

1. Phases of a W1 batch (64 crops (4, 256, 256) float32 of the suite's weather store) and of
   a whole-array batch: host staging (the engine's read into pinned memory, 16 threads),
   then on the GPU the copy, nvCOMP's decode and the scatter kernel (CUDA events), medians
   of 10 batches, with the bytes each phase moved.
2. In a child process: a zstd chunk whose block content is overwritten with 0xFF (frame and
   block headers intact, no checksum) read into a CUDA tensor; prints what happens (a typed
   error through the CPU redo, a CUDA error, or a crash).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

CHILD = r"""
import os, sys, numpy as np, torch, zarr, lsio
from zarr.codecs import ZstdCodec
p = sys.argv[1]
z = zarr.create_array(p, shape=(4, 64, 64), chunks=(2, 32, 32), dtype="float32", compressors=[ZstdCodec(level=1)])
z[...] = np.random.default_rng(0).standard_normal((4, 64, 64)).astype("float32") * 100
c = os.path.join(p, "c", "0", "0", "0")
b = bytearray(open(c, "rb").read()); b[12:-8] = b"\xff" * len(b[12:-8]); open(c, "wb").write(bytes(b))
arr = lsio.open(p)
out = torch.empty((1, 2, 32, 32), device="cuda")
try:
    arr.read_crops([[0, 0, 0]], (2, 32, 32), out=out)
    print("probe: no error; equal to CPU read:", end=" ")
    try:
        print(np.array_equal(out.cpu().numpy(), arr.read_crops([[0, 0, 0]], (2, 32, 32))))
    except Exception as e:
        print("CPU read raised", type(e).__name__, e)
except Exception as e:
    print("probe: raised", type(e).__module__, type(e).__name__, str(e)[:300])
try:
    torch.cuda.synchronize(); x = torch.ones(4, device="cuda").sum().item()
    print("probe: CUDA context usable afterwards:", x == 4)
except Exception as e:
    print("probe: CUDA context broken afterwards:", type(e).__name__, str(e)[:200])
import lsio.gpu; print("probe: stats", lsio.gpu.stats())
"""


def phases(arr, starts, crop, rounds=10):
    import torch

    from lsio.gpu import _cuda, _plan

    isz = np.dtype(arr.dtype).itemsize
    box = int(np.prod(crop)) * isz
    staging = _cuda.Staging()
    out = torch.empty((len(starts),) + tuple(crop), dtype=torch.float32, device="cuda")
    ex = _cuda.executor_for(out.device)
    stream = torch.cuda.current_stream()
    rows = []
    for r in range(rounds + 2):
        t0 = time.perf_counter()
        plan = _cuda.stage_for(arr, starts, crop, None, box, _plan.out_layout(crop, isz), box * len(starts), staging)
        t1 = time.perf_counter()
        prof = {}
        assert ex.run(plan, out, stream, profile=prof)
        t2 = time.perf_counter()
        if r >= 2:
            rows.append(dict(stage_ms=(t1 - t0) * 1e3, gpu_wall_ms=(t2 - t1) * 1e3, **prof))
    med = {k: float(np.median([x[k] for x in rows])) for k in rows[0]}
    med.update(staged_mb=plan.staging_used / 1e6, decoded_mb=plan.decoded_bytes / 1e6, out_mb=out.numel() * isz / 1e6,
               frames=int(len(plan.frames)), ops=int(len(plan.ops)))
    return med


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache-dir", default="/tmp/bcache")
    ap.add_argument("--json")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    import lsio
    from stores import ensure_store
    from suite import STORES

    res = {}
    path = ensure_store(STORES["weather"][0], args.cache_dir)
    arr = lsio.open(str(path), threads=args.threads)
    rng = np.random.default_rng(0)
    crop = (4, 256, 256)
    starts = rng.integers(0, np.array(arr.shape) - crop + 1, size=(64, 3))
    res["w1_batch64"] = phases(arr, starts, crop)
    res["whole_array"] = phases(arr, np.array([[z, y, x] for z in range(0, 32, 8) for y in (0, 1024) for x in (0, 1024)]),
                                (8, 1024, 1024), rounds=4)
    for k, v in res.items():
        print(k, " ".join(f"{a}={b:.2f}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items()))
    d = f"/tmp/probe-corrupt-{os.getpid()}.zarr"
    r = subprocess.run([sys.executable, "-c", CHILD, d], capture_output=True, text=True, timeout=120)
    print(r.stdout.strip())
    print(f"probe child exit {r.returncode}; stderr tail: {r.stderr.strip()[-600:]}")
    res["corrupt_child"] = dict(rc=r.returncode, stdout=r.stdout[-2000:], stderr=r.stderr[-2000:])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
