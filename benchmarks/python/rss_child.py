"""W6 child process: peak RSS of one reader reading a whole array once. Run by suite.py.

    python benchmarks/python/rss_child.py --reader lsio --path STORE --threads 2

Prints one JSON line: out_bytes (the array's size), baseline_bytes (VmHWM before the read;
for lsio this includes the preallocated and touched `out`, for peers, which cannot read into
a caller's array, it is the interpreter with the array opened), peak_bytes (VmHWM after the
read; getrusage's ru_maxrss is useless here, it survives execve and still holds the
parent's peak), delta_bytes = peak - baseline, seconds,
and crc32 of the result so the parent can check it against zarr-python's.

Only the reader's own modules are imported, so each baseline is that reader's interpreter.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import zlib
from pathlib import Path


def vm_hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--reader", required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    import numpy as np

    if a.reader.startswith("lsio"):
        import lsio

        arr = lsio.open(a.path, threads=a.threads, io="pread" if "pread" in a.reader else None)
        out = np.empty(arr.shape, dtype=arr.dtype)
        out.fill(0)  # touch every page: the output is part of the baseline
        base = vm_hwm()
        t0 = time.perf_counter()
        res = arr.read((), out=out)
        dt = time.perf_counter() - t0
        assert res is out
    else:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import readers

        r = readers.make_reader(a.reader, a.path, a.threads)
        base = vm_hwm()
        t0 = time.perf_counter()
        res = np.asarray(r.full())
        dt = time.perf_counter() - t0
    peak = vm_hwm()
    # ru_maxrss survives execve (it still holds the parent's peak at fork time), so the
    # figure is VmHWM, which belongs to this process image; ru_maxrss is kept for reference.
    ru = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    crc = zlib.crc32(np.ascontiguousarray(res).view(np.uint8).reshape(-1))
    print(json.dumps({"out_bytes": int(res.nbytes), "baseline_bytes": base, "peak_bytes": peak,
                      "ru_maxrss_bytes": ru, "delta_bytes": peak - base, "seconds": dt, "crc32": crc}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
