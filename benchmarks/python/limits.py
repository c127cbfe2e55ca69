"""Machine limits and cache control for the benchmark suite (suite.py).

- Page cache: :func:`drop_cache` (fsync + posix_fadvise(POSIX_FADV_DONTNEED) on every file of
  a store; no root needed) and :func:`resident_bytes` (mincore(2) through ctypes, like
  `fincore`), used once per run to check that dropping really worked.
- Limits, measured in the same run as the readers on the same byte ranges / chunks, through
  the private native module ``lsio._core._limits`` (cpp/bindings/limits.cc):
    raw_read(ranges, io, threads)  the engine's pread or io_uring backend over the ranges;
    zstd_seconds(frames, ...)      single-thread libzstd decode of the same chunks;
    memcpy_seconds(nbytes)         one-thread memcpy of the output size.
- Optional `fio` run when fio is installed (random reads over the store's files), reported
  beside the in-tree numbers.
- :func:`machine_info`: cores, RAM, disk, kernel, CPU model for the report.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import sys
import platform
import shutil
import subprocess
from pathlib import Path

from stores import ByteRanges, data_files


def _limits():
    from lsio._core import _limits

    return _limits


# ----------------------------------------------------------------------------- page cache


def release_lsio_files() -> None:
    """lsio keeps local files open between reads, mapped for hot reads in place; pages a
    mapping touched cannot be dropped from the page cache while it lasts. Close them first."""
    lsio = sys.modules.get("lsio")
    if lsio is not None and hasattr(lsio, "close_files"):
        lsio.close_files()


def drop_cache(paths) -> None:
    """Evict every file in `paths` from the page cache (flushes dirty pages first; lsio's
    open files and their mappings are closed before)."""
    release_lsio_files()
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


_libc = None


def resident_bytes(paths) -> int:
    """Bytes of `paths` in the page cache, by mincore(2) on a fresh read-only mapping
    (mapping does not fault pages in)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.mmap.restype = ctypes.c_void_p
        _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                               ctypes.c_int, ctypes.c_long]
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        _libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    page = mmap.PAGESIZE
    total = 0
    for p in paths:
        size = os.path.getsize(p)
        if size == 0:
            continue
        fd = os.open(p, os.O_RDONLY)
        try:
            addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            if addr in (None, ctypes.c_void_p(-1).value):
                raise OSError(ctypes.get_errno(), f"mmap {p}")
            try:
                n = (size + page - 1) // page
                vec = (ctypes.c_ubyte * n)()
                if _libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
                    raise OSError(ctypes.get_errno(), f"mincore {p}")
                total += sum(1 for v in vec if v & 1) * page
            finally:
                _libc.munmap(ctypes.c_void_p(addr), size)
        finally:
            os.close(fd)
    return total


def check_cold(store: Path) -> dict:
    """Reads the store into the page cache, drops it, and reports what mincore says."""
    files = [str(p) for p in data_files(store)]
    total = sum(os.path.getsize(p) for p in files)
    for p in files:  # warm it up completely
        with open(p, "rb") as f:
            while f.read(16 << 20):
                pass
    before = resident_bytes(files)
    drop_cache(files)
    after = resident_bytes(files)
    fincore = None
    if shutil.which("fincore"):
        try:
            r = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", *files[:1]],
                               capture_output=True, text=True, timeout=30)
            fincore = r.stdout.strip() or r.stderr.strip()
        except Exception as e:  # noqa: BLE001 - informational only
            fincore = f"failed: {e}"
    return {"store": store.name, "files": len(files), "bytes": total, "resident_before": before,
            "resident_after": after, "ok": after <= 0.01 * total,
            "fincore_first_file_after": fincore}


# ----------------------------------------------------------------------------- native limits


def uring_usable() -> tuple[bool, str]:
    import lsio

    info = lsio.io_backend_info()
    return bool(info.get("uring_available")), str(info.get("reason") or "")


def raw_read_seconds(ranges: ByteRanges, io: str, threads: int, queue_depth: int = 64) -> float:
    return _limits().raw_read(ranges.paths, ranges.files, ranges.offsets, ranges.lengths,
                              io=io, threads=threads, queue_depth=queue_depth)


def zstd_seconds(frames: list[bytes], decoded_size: int, repeats: int = 1) -> float:
    """Seconds for ONE single-thread pass over `frames` (median-free: total / repeats)."""
    return _limits().zstd_decode(frames, decoded_size, repeats) / repeats


def memcpy_seconds(nbytes: int, repeats: int = 1) -> float:
    return _limits().memcpy(nbytes, repeats) / repeats


# ----------------------------------------------------------------------------- fio (optional)


def fio_random_read(files: list[str], block: int, threads: int, cold: bool, seconds: int = 3) -> dict:
    """Optional cross-check: fio random reads of `block` bytes over `files` (io_uring QD32
    for cold, psync for hot), `threads` jobs. Returns {"available": False} without fio."""
    if not shutil.which("fio"):
        return {"available": False, "note": "fio not installed (optional)"}
    block = max(4096, (block // 4096) * 4096)
    cmd = ["fio", "--name=lsio-limit", "--rw=randread", f"--bs={block}", f"--numjobs={threads}",
           "--group_reporting", "--time_based", f"--runtime={seconds}", "--output-format=json",
           "--filename=" + ":".join(f.replace(":", "\\:") for f in files)]
    if cold:
        cmd += ["--ioengine=io_uring", "--iodepth=32", "--direct=1"]
    else:
        cmd += ["--ioengine=psync", "--invalidate=0"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60)
        job = json.loads(r.stdout)["jobs"][0]["read"]
        return {"available": True, "cmd": " ".join(cmd), "MBps": job["bw_bytes"] / 1e6,
                "iops": job["iops"]}
    except Exception as e:  # noqa: BLE001 - optional tool
        return {"available": True, "error": str(e), "cmd": " ".join(cmd)}


# ----------------------------------------------------------------------------- machine


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def machine_info(where: Path) -> dict:
    info = {
        "cpus": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            info["cpu_model"] = line.split(":", 1)[1].strip()
            break
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal"):
            info["ram_gib"] = round(int(line.split()[1]) / 2**20, 1)
    # Disk under the cache directory: device from findmnt, details from /sys/block.
    disk = {}
    try:
        src = subprocess.run(["findmnt", "-n", "-o", "SOURCE", "--target", str(where)],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        disk["source"] = src
        dev = Path(src).name
        base = dev
        while base and not Path(f"/sys/block/{base}").exists():
            base = base[:-1]
        if base:
            sysb = f"/sys/block/{base}"
            disk["device"] = base
            sectors = _read(f"{sysb}/size")
            if sectors:
                disk["size_gib"] = round(int(sectors) * 512 / 2**30, 1)
            disk["rotational"] = _read(f"{sysb}/queue/rotational") == "1"
            vendor = _read(f"{sysb}/device/vendor")
            disk["model"] = _read(f"{sysb}/device/model") or (
                f"virtio ({vendor})" if vendor == "0x1af4" or base.startswith("vd") else vendor)
            disk["scheduler"] = _read(f"{sysb}/queue/scheduler")
    except Exception as e:  # noqa: BLE001 - informational only
        disk["error"] = str(e)
    info["disk"] = disk
    return info
