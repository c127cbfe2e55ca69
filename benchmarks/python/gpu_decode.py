"""GPU decode: W1's crops decoded on the GPU (nvCOMP) against decoded on the CPU and copied.

    python benchmarks/python/gpu_decode.py                        # needs CUDA; W1 store, 64 crops per batch
    python benchmarks/python/gpu_decode.py --threads 16 --gpu-threads 1,2,4 --json /tmp/gpu_decode.json
    python benchmarks/python/gpu_decode.py --full                 # the whole array in (8, 1024, 1024) boxes
    python benchmarks/python/gpu_decode.py --device cpu --quick   # CPU smoke run of the script

Without CUDA (and without ``--device cpu``) it prints one line saying it skipped and exits 0.

Store: W1's (float32 (32, 2048, 2048), shards (8, 512, 512), inner chunks (1, 128, 128), zstd 3;
``--quick``: the (8, 1024, 1024) one; ``--codec gzip|lz4``: the same data with gzip level 5 or
numcodecs' LZ4 as the inner chunks' compressor), written once by zarr-python into benchmarks/.cache (the
same helper and cache as gpu_feed.py and the suite: ``stores.ensure_store``). Page cache hot
(every file read once first). Crops (4, 256, 256) float32, ``--batch`` (64) per batch, seeded
random origins, the same batches in the same order for every mode. ``--full``: one batch is the
whole array, as ``--box`` boxes (default (8, 1024, 1024); 16 boxes of 32 MiB for W1) read by
one ``read_crops`` call.

Modes (each its own ``lsio.open(path, threads=N)``):
- ``cpu``: ``arr.read_crops(starts, shape, out=pinned.numpy())`` (threads ``--threads``), then
  ``pinned.to("cuda", non_blocking=True)`` and ``torch.cuda.synchronize()``: decoded on the
  CPU, one host-to-device copy of the decoded crops. The pinned buffer is allocated once.
- ``gpu``: ``arr.read_crops(starts, shape, out=cuda_tensor)`` (threads ``--threads``), then
  ``torch.cuda.synchronize()``: lsio reads the compressed chunks into pinned staging, copies
  them to the device, nvCOMP decodes them and a Triton kernel scatters them into ``out``.
- ``gpu t=N``: the same with ``threads=N`` for the host staging part, for each N of
  ``--gpu-threads`` (default 1,2,4 on CUDA; none with ``--device cpu``).
Every batch is synchronized before the next starts (no overlap between batches: the rate of
one mode is what one caller gets per call; gpu_feed.py measures the overlapped pipelines).

Measured per mode, over ``--rounds`` rounds of ``--batches`` batches, modes interleaved in an
order that rotates from round to round, after ``--warmup`` untimed batches per mode (the
first GPU call compiles the Triton kernel):
- GB/s of decoded crops delivered to the device and crops/s (medians over the rounds);
- CPU seconds per GB delivered: process CPU time (``time.process_time()``: user + system of
  every thread of the process, lsio's pool included) over the timed batches / GB delivered,
  and the mean number of cores that kept busy (CPU time / wall time);
- ``cpu`` also splits its wall time into the read (decode into pinned memory) and the copy.
Check (before timing): the first ``--check`` batches of every ``gpu`` mode must be bitwise
equal to the ``cpu`` mode's (``torch.equal`` on the int32 view, on the device). Exit status 1
if one differs; 2 if a mode failed with an error (its traceback is printed); else 0.

``--device cpu`` (a smoke test of this script, NOT a measurement): ``cpu`` reads into a plain
tensor and clones it; the ``gpu`` modes run ``lsio.gpu.read_crops_reference(arr, starts,
shape)`` (the CPU reference executor of the same device plan) and copy its numpy result into a
tensor. Where ``lsio.gpu`` (or that function) is not there, those modes are skipped with a
message.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CACHE_DIR = HERE.parent / ".cache"
CROP = (4, 256, 256)
SKIP_MSG = "gpu_decode: no CUDA device (torch.cuda.is_available() is False): skipped"


def log(msg: str = "") -> None:
    print(msg, flush=True)


def warm_page_cache(path: Path) -> None:
    for root, _, files in os.walk(path):
        for f in files:
            with open(os.path.join(root, f), "rb") as fh:
                while fh.read(1 << 24):
                    pass


def gpu_api(cuda: bool):
    """(lsio.gpu module or None, why not). On CUDA it must report itself available; on the
    CPU it must have the reference executor."""
    try:
        import lsio.gpu as lg
    except Exception as e:  # noqa: BLE001 - the API may not be there (yet), or fail to import
        return None, f"lsio.gpu not importable: {type(e).__name__}: {e}"
    if cuda:
        try:
            ok, why = lg.available()
        except Exception as e:  # noqa: BLE001
            return None, f"lsio.gpu.available() failed: {type(e).__name__}: {e}"
        return (lg, why) if ok else (None, f"lsio.gpu.available() is False: {why}")
    if not hasattr(lg, "read_crops_reference"):
        return None, "lsio.gpu has no read_crops_reference"
    return lg, "CPU reference executor (lsio.gpu.read_crops_reference)"


class Mode:
    """One way of getting a batch of crops onto the device; ``run(starts)`` -> device tensor
    (synchronized)."""

    def __init__(self, name: str, threads: int, run, status: str = "ok", note: str = ""):
        self.name, self.threads, self.run, self.status, self.note = name, threads, run, status, note
        self.walls: list[float] = []
        self.cpus: list[float] = []
        self.read_s = 0.0
        self.copy_s = 0.0
        self.check = "-"
        self.traceback = None


def make_modes(torch, device, args, path: Path, n: int, shape: tuple, gpu_threads: list[int]) -> list[Mode]:
    import lsio

    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    modes = []

    # cpu: decode on the CPU into pinned memory, then one H2D copy.
    arr_cpu = lsio.open(str(path), threads=args.threads)
    host = torch.empty((n, *shape), dtype=torch.float32, pin_memory=cuda)
    host.zero_()  # first touch: page faults are not charged to the reads
    host_np = host.numpy()
    cpu_mode = Mode("cpu", args.threads, None)

    def run_cpu(starts, _m=cpu_mode):
        t0 = time.perf_counter()
        arr_cpu.read_crops(starts, shape, out=host_np)
        t1 = time.perf_counter()
        xd = host.to(device, non_blocking=True) if cuda else host.clone()
        sync()
        _m.read_s += t1 - t0
        _m.copy_s += time.perf_counter() - t1
        return xd

    cpu_mode.run = run_cpu
    modes.append(cpu_mode)

    lg, why = gpu_api(cuda)
    log(f"lsio.gpu: {why}")
    for t in [args.threads] + [t for t in gpu_threads if t != args.threads]:
        name = "gpu" if t == args.threads else f"gpu t={t}"
        if lg is None:
            modes.append(Mode(name, t, None, status=f"skipped: {why}"))
            continue
        arr = lsio.open(str(path), threads=t)
        if cuda:
            out = torch.empty((n, *shape), dtype=torch.float32, device=device)

            def run_gpu(starts, _arr=arr, _out=out):
                _arr.read_crops(starts, shape, out=_out)
                sync()
                return _out
        else:
            def run_gpu(starts, _arr=arr):
                return torch.from_numpy(np.ascontiguousarray(lg.read_crops_reference(_arr, starts, shape))).clone()
        modes.append(Mode(name, t, run_gpu, note="read_crops(out=cuda tensor)" if cuda else
                          "lsio.gpu.read_crops_reference (CPU smoke)"))
    return modes


def bitwise_equal(torch, a, b) -> tuple[bool, str]:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False, f"shape/dtype {tuple(a.shape)} {a.dtype} vs {tuple(b.shape)} {b.dtype}"
    ai, bi = a.contiguous().view(torch.int32), b.contiguous().view(torch.int32)
    if torch.equal(ai, bi):
        return True, ""
    diff = (ai != bi)
    first = [int(i) for i in diff.nonzero()[0].tolist()]
    return False, f"{int(diff.sum())} of {diff.numel()} values differ, first at {first}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None,
                    help="default: cuda when available, else skip; cpu: smoke run of the script")
    ap.add_argument("--batch", type=int, default=64, help="crops per batch (not with --full)")
    ap.add_argument("--batches", type=int, default=None, help="timed batches per mode and round (default 20; --full 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2, help="untimed batches per mode first")
    ap.add_argument("--check", type=int, default=3, help="batches compared bitwise between cpu and each gpu mode")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="native threads of cpu and gpu")
    ap.add_argument("--gpu-threads", default=None,
                    help="more gpu rows with these threads for the host staging (default 1,2,4 on CUDA; none on cpu)")
    ap.add_argument("--full", action="store_true", help="read the whole array per batch, in --box boxes")
    ap.add_argument("--box", default="8,1024,1024", help="--full: box shape (must tile the array)")
    ap.add_argument("--quick", action="store_true", help="the 4x smaller W1 store, fewer batches")
    ap.add_argument("--codec", choices=("zstd", "gzip", "lz4"), default="zstd",
                    help="the store's inner-chunk compressor (W1's is zstd; gzip/lz4: nvCOMP's deflate/LZ4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache-dir", type=Path, default=CACHE_DIR)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    try:
        import torch
    except ImportError as e:
        log(f"gpu_decode: torch is not importable ({e}): skipped")
        return 0
    if args.device != "cpu" and not torch.cuda.is_available():
        log(SKIP_MSG)
        return 0
    device = torch.device(args.device or "cuda")
    cpu = device.type == "cpu"
    if args.gpu_threads is None:
        args.gpu_threads = "" if cpu else "1,2,4"
    gpu_threads = [int(t) for t in args.gpu_threads.split(",") if t.strip()]
    if args.batches is None:
        args.batches = 2 if args.full else (3 if args.quick or cpu else 20)
    if cpu and args.quick:
        args.rounds = min(args.rounds, 2)

    import lsio
    from stores import ensure_store
    from suite import STORES

    spec = STORES["weather"][1 if args.quick else 0]
    if args.codec != "zstd":
        import dataclasses

        spec = dataclasses.replace(spec, codec=args.codec)
    path = ensure_store(spec, args.cache_dir, log=log)
    warm_page_cache(path)

    rng = np.random.default_rng(args.seed)
    nb = max(args.check, args.warmup) + args.rounds * args.batches
    if args.full:
        shape = tuple(int(x) for x in args.box.split(","))
        if len(shape) != 3 or any(s % b for s, b in zip(spec.shape, shape)):
            ap.error(f"--box {shape} does not tile the array {spec.shape}")
        grid = np.stack(np.meshgrid(*[np.arange(0, s, b) for s, b in zip(spec.shape, shape)], indexing="ij"), -1)
        one = grid.reshape(-1, 3).astype(np.int64)
        batches = [one] * nb
    else:
        shape = CROP
        high = np.asarray(spec.shape) - np.asarray(shape) + 1
        batches = [(rng.random((args.batch, 3)) * high).astype(np.int64) for _ in range(nb)]
    n = len(batches[0])
    batch_bytes = n * int(np.prod(shape)) * 4

    if cpu:
        log("gpu_decode: CPU SMOKE RUN (--device cpu): no pinning, no CUDA; gpu modes run lsio.gpu's CPU reference "
            "executor; NOT a measurement")
        dev_name = "cpu"
    else:
        dev_name = torch.cuda.get_device_name(device)
    log(f"gpu_decode: {spec.describe()}, {'whole array as ' if args.full else ''}{n} crops {shape} float32 per batch "
        f"({batch_bytes / 2**20:.0f} MiB), {args.rounds} rounds x {args.batches} timed batches + {args.warmup} "
        f"warm-up per mode, device {dev_name}, {os.cpu_count()} CPUs, threads {args.threads}, "
        f"gpu staging threads {[args.threads] + [t for t in gpu_threads if t != args.threads]}, "
        f"lsio {getattr(lsio, '__version__', '?')}, torch {torch.__version__}")

    errors = 0
    try:
        modes = make_modes(torch, device, args, path, n, shape, gpu_threads)
    except Exception:  # noqa: BLE001
        log("gpu_decode: setting up the modes failed:\n" + traceback.format_exc())
        return 2

    def fail(m: Mode, where: str) -> None:
        nonlocal errors
        errors += 1
        m.traceback = traceback.format_exc()
        m.status = f"error ({where}): {m.traceback.strip().splitlines()[-1]}"
        log(f"  {m.name}: {m.status}\n{m.traceback}")

    # 1. check: every gpu mode against cpu, bitwise, on the device; also the warm-up.
    cpu_mode = modes[0]
    mismatch = False
    for k in range(max(args.check, args.warmup)):
        ref = None
        for m in modes:
            if m.status != "ok":
                continue
            try:
                x = m.run(batches[k])
            except Exception:  # noqa: BLE001
                fail(m, f"batch {k}")
                continue
            if m is cpu_mode:
                ref = x.clone() if k < args.check else None
            elif ref is not None:
                ok, detail = bitwise_equal(torch, x, ref)
                if not ok:
                    mismatch = True
                    log(f"  {m.name}: MISMATCH in batch {k}: {detail}")
                    if not m.check.startswith("MISMATCH"):  # keep the first
                        m.check = f"MISMATCH (batch {k}: {detail})"
                elif m.check == "-":
                    m.check = "ok"
            del x
        del ref
    if cpu_mode.status != "ok":
        for m in modes[1:]:
            if m.check == "-":
                m.check = "unchecked (cpu mode failed)"
    for m in modes:
        m.read_s = m.copy_s = 0.0

    # 2. timed rounds, rotating order.
    first = max(args.check, args.warmup)
    for r in range(args.rounds):
        live = [m for m in modes if m.status == "ok"]
        if not live:
            break
        order = live[r % len(live):] + live[:r % len(live)]
        for m in order:
            bs = batches[first + r * args.batches:first + (r + 1) * args.batches]
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                for b in bs:
                    m.run(b)
            except Exception:  # noqa: BLE001
                fail(m, f"round {r}")
                continue
            m.walls.append(time.perf_counter() - t0)
            m.cpus.append(time.process_time() - c0)

    # 3. report.
    results = []
    for m in modes:
        row = {"mode": m.name, "threads": m.threads, "status": m.status, "check": m.check, "note": m.note}
        if m.traceback:
            row["traceback"] = m.traceback
        if m.status == "ok" and m.walls:
            nbytes = args.batches * batch_bytes
            gbps = [nbytes / w / 1e9 for w in m.walls]
            total_gb = nbytes * len(m.walls) / 1e9
            row.update({
                "rounds": len(m.walls), "batches_per_round": args.batches, "batch_bytes": batch_bytes,
                "wall_s": m.walls, "cpu_s": m.cpus, "GBps": statistics.median(gbps), "GBps_rounds": gbps,
                "crops_s": statistics.median(args.batches * n / w for w in m.walls),
                "cpu_s_per_GB": sum(m.cpus) / total_gb, "cores_busy": sum(m.cpus) / sum(m.walls),
            })
            if m is cpu_mode:
                nb_t = args.batches * len(m.walls)
                row["read_ms_per_batch"] = m.read_s / nb_t * 1e3
                row["copy_ms_per_batch"] = m.copy_s / nb_t * 1e3
        results.append(row)
        if "GBps" in row:
            log(f"  {m.name}: {row['GBps']:.2f} GB/s, {row['crops_s']:.0f} crops/s, "
                f"{row['cpu_s_per_GB']:.3f} CPU s/GB, check {m.check}")

    log(f"check: gpu modes equal to cpu (bitwise, first {args.check} batches): "
        f"{'MISMATCH' if mismatch else 'ok'}")
    log("")
    if cpu:
        log("CPU smoke run (--device cpu), not a measurement.")
    log("| mode | threads | GB/s to device | crops/s | CPU s per GB | cores busy | check |")
    log("|---|---|---|---|---|---|---|")
    for row in results:
        if "GBps" not in row:
            log(f"| {row['mode']} | {row['threads']} | {row['status']} | | | | {row['check']} |")
            continue
        extra = ""
        if "read_ms_per_batch" in row:
            extra = f" (read {row['read_ms_per_batch']:.1f} + copy {row['copy_ms_per_batch']:.1f} ms/batch)"
        log(f"| {row['mode']}{extra} | {row['threads']} | {row['GBps']:.2f} | {row['crops_s']:.0f} | "
            f"{row['cpu_s_per_GB']:.3f} | {row['cores_busy']:.1f} | {row['check']} |")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        lg, why = gpu_api(not cpu)
        args.json.write_text(json.dumps({
            "benchmark": "gpu_decode", "cpu_smoke_run": cpu, "device": dev_name, "store": spec.describe(),
            "full": args.full, "crop": shape, "batch": n, "batch_bytes": batch_bytes, "batches": args.batches,
            "rounds": args.rounds, "warmup": args.warmup, "check_batches": args.check, "threads": args.threads,
            "gpu_threads": gpu_threads, "cpus": os.cpu_count(), "torch": torch.__version__,
            "lsio": getattr(lsio, "__version__", None), "lsio_gpu": why, "checks_ok": not mismatch,
            "errors": errors, "results": results}, indent=1))
    if mismatch:
        return 1
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
