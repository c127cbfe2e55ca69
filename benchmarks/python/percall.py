"""Per-call overhead: the time one read of one tiny chunk takes, where decoding costs nothing.

    python benchmarks/python/percall.py                      # 20,000 calls per reader, 1 thread
    python benchmarks/python/percall.py --calls 5000 --py-threads 2 --json /tmp/percall.json

Issue 13 asks for the per-call overhead of a one-chunk read in microseconds (W3: many Python
threads, each reading one chunk per call). W3's chunks take ~0.5 ms to decode, which hides
the overhead; here the chunk is 8 x 8 uint8 (64 bytes, zstd level 3, in a 64 x 64 shard written
by zarr-python into a temporary directory), so a call is almost all overhead: argument
handling, planning, the shard-index lookup (cached after the first call), one ``pread`` of a
few dozen bytes from the page cache, a zstd frame, and the copy into the result.

Readers, each timing the same calls on the same 8 x 8 boxes (a different chunk each call,
cycling over the shard's 64):
- ``lsio arr[box]``: ``Array.__getitem__`` (new result array);
- ``lsio read(out=)``: into a preallocated array (no allocation);
- ``lsio read_crops(1)``: one crop per call, into a preallocated ``out``;
- ``tensorstore``: ``t[box].read().result()`` (zarr3 driver, concurrency 1);
- ``zarr-python``: ``z[box]``; ``zarrs``: zarr-python with zarrs' codec pipeline.
For lsio it also prints the engine's own share of a call (``lsio._core._last_call_profile``'s
``total_ns``: from entering the C++ read to leaving it), so the rest is Python and binding.

``--py-threads N`` additionally runs lsio and TensorStore from N Python threads at once (each
its own boxes), the W3 shape, and reports calls/s.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SHAPE = (64, 64)
CHUNK = (8, 8)


def log(msg: str = "") -> None:
    print(msg, flush=True)


def write_store(root: Path) -> Path:
    import zarr
    from zarr.codecs import ZstdCodec

    path = root / "percall.zarr"
    z = zarr.create_array(store=str(path), shape=SHAPE, chunks=CHUNK, shards=SHAPE, dtype="uint8",
                          compressors=ZstdCodec(level=3))
    z[:] = (np.arange(SHAPE[0] * SHAPE[1]) % 251).astype(np.uint8).reshape(SHAPE)
    return path


def boxes(n: int, offset: int = 0) -> list[tuple[slice, slice]]:
    gy, gx = SHAPE[0] // CHUNK[0], SHAPE[1] // CHUNK[1]
    out = []
    for i in range(n):
        c = (i * 7 + offset) % (gy * gx)
        y, x = divmod(c, gx)
        out.append((slice(y * CHUNK[0], (y + 1) * CHUNK[0]), slice(x * CHUNK[1], (x + 1) * CHUNK[1])))
    return out


def make_calls(name: str, path: Path):
    """-> (call(box, out), check(box) -> array) for reader ``name``, or raises ImportError."""
    if name.startswith("lsio"):
        import lsio

        arr = lsio.open(str(path), threads=1)
        if name == "lsio arr[box]":
            return lambda box, out: arr[box]
        if name == "lsio read(out=)":
            return lambda box, out: arr.read(box, out=out)
        if name == "lsio read_crops(1)":
            def crops(box, out):
                st = np.array([[box[0].start, box[1].start]], dtype=np.int64)
                return arr.read_crops(st, CHUNK, out=out[None])
            return crops
    if name == "tensorstore":
        import tensorstore as ts

        ctx = ts.Context({"data_copy_concurrency": {"limit": 1}, "file_io_concurrency": {"limit": 1}})
        t = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}, read=True,
                    context=ctx).result()
        return lambda box, out: t[box].read().result()
    if name in ("zarr-python", "zarrs"):
        import zarr

        conf = {"threading.max_workers": 1}
        if name == "zarrs":
            import zarrs  # noqa: F401

            conf.update({"codec_pipeline.path": "zarrs.ZarrsCodecPipeline", "codec_pipeline.strict": True})
        with zarr.config.set(conf):
            z = zarr.open_array(str(path), mode="r")
        return lambda box, out: z[box]
    raise ValueError(name)


READERS = ("lsio arr[box]", "lsio read(out=)", "lsio read_crops(1)", "tensorstore", "zarr-python", "zarrs")


def time_calls(call, calls: int, reps: int) -> list[float]:
    """Microseconds per call, one figure per repetition."""
    bx = boxes(calls)
    out = np.empty(CHUNK, np.uint8)
    for b in bx[:200]:
        call(b, out)
    per = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for b in bx:
            call(b, out)
        per.append((time.perf_counter() - t0) / calls * 1e6)
    return per


def threaded_rate(call, calls: int, threads: int) -> float:
    """Calls/s with ``threads`` Python threads each making ``calls`` calls."""
    outs = [np.empty(CHUNK, np.uint8) for _ in range(threads)]

    def work(k):
        for b in boxes(calls, offset=k):
            call(b, outs[k])

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))  # warm
        t0 = time.perf_counter()
        list(pool.map(work, range(threads)))
        return threads * calls / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--py-threads", type=int, default=0, help="also time N Python threads calling at once")
    ap.add_argument("--readers", default=",".join(READERS))
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    rows = []
    with tempfile.TemporaryDirectory(prefix="lsio_percall_") as tmp:
        path = write_store(Path(tmp))
        want = np.asarray(__import__("zarr").open_array(str(path), mode="r")[:])
        for name in [r.strip() for r in args.readers.split(",") if r.strip()]:
            try:
                call = make_calls(name, path)
            except ImportError as e:
                log(f"{name}: not installed ({e})")
                rows.append({"reader": name, "status": "not installed"})
                continue
            box = boxes(1, offset=5)[0]
            got = np.asarray(call(box, np.empty(CHUNK, np.uint8))).reshape(CHUNK)
            if not np.array_equal(got, want[box]):
                log(f"{name}: WRONG DATA")
                return 1
            per = time_calls(call, args.calls, args.reps)
            row = {"reader": name, "status": "ok", "us_per_call": statistics.median(per), "reps": per}
            if name.startswith("lsio"):
                from lsio import _core

                call(box, np.empty(CHUNK, np.uint8))
                eng = []
                for b in boxes(2000):
                    call(b, np.empty(CHUNK, np.uint8))
                    eng.append(_core._last_call_profile()["total_ns"] / 1e3)
                row["engine_us"] = statistics.median(eng)
            if args.py_threads and name in ("lsio read(out=)", "tensorstore"):
                row["py_threads"] = args.py_threads
                row["threaded_calls_s"] = threaded_rate(call, max(1000, args.calls // 4), args.py_threads)
            rows.append(row)
            log(f"{name}: {row['us_per_call']:.1f} us/call" +
                (f" (engine {row['engine_us']:.1f} us)" if "engine_us" in row else "") +
                (f"; {args.py_threads} Python threads: {row['threaded_calls_s']:,.0f} calls/s"
                 if "threaded_calls_s" in row else ""))

    log("")
    log(f"| reader | us per call (median of {args.reps}) | engine us | calls/s, 1 thread |"
        + (f" calls/s, {args.py_threads} Python threads |" if args.py_threads else ""))
    log("|---|---|---|---|" + ("---|" if args.py_threads else ""))
    for r in rows:
        if r["status"] != "ok":
            log(f"| {r['reader']} | {r['status']} | | |" + (" |" if args.py_threads else ""))
            continue
        eng = f"{r['engine_us']:.1f}" if "engine_us" in r else ""
        thr = f" {r['threaded_calls_s']:,.0f} |" if "threaded_calls_s" in r else (" |" if args.py_threads else "")
        log(f"| {r['reader']} | {r['us_per_call']:.1f} | {eng} | {1e6 / r['us_per_call']:,.0f} |" + thr)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"benchmark": "percall", "shape": SHAPE, "chunk": CHUNK, "calls": args.calls,
                                         "reps": args.reps, "cpus": os.cpu_count(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
