"""W11 for suite.py: W1's crops from the same data as a NetCDF4 file, hot and cold.

The file and its kerchunk references, the readers and the cold drop are kerchunk_refs.py's
(which also runs on its own, with the first-open timings); this module runs them the suite's
way: the same random batches for every reader in a round, readers interleaved in an order
rotated per round, round 0 an untimed check that every reader (lsio included) returns h5py's
crops bit for bit, rows and targets in the suite's format. It needs no Zarr store. Cold rounds drop the NetCDF4 file from the page
cache (posix_fadvise DONTNEED) before each reader's round (checked once with mincore); handles
stay open, and so do the readers' own chunk caches (netCDF-C's, HDF5's).

Targets (issue "Data where it already is"): lsio on the file >= 5x the best other reader of
the file (xarray h5netcdf, netCDF4-python, h5py); lsio on the references >= 3x zarr-python on
the same references.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import kerchunk_refs as kr
import limits

FILE_PEERS = ("h5netcdf (xarray)", "netCDF4", "h5py")
NAMES = {"lsio file": "lsio", "lsio refs": "lsio refs", "zarr-python refs": "zarr-python refs",
         "h5netcdf (xarray)": "xarray h5netcdf", "netCDF4": "netCDF4-python", "h5py": "h5py"}


def run(w, args, log_line) -> dict:
    threads = args.threads
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else w.rounds)
    per_batch = w.n_quick if args.quick else w.n
    shape = (4, 512, 512) if args.quick else (32, 2048, 2048)
    tag = "x".join(map(str, shape))
    nc = args.cache_dir / f"w11_{tag}_deflate1_shuffle.nc"
    refs = args.cache_dir / f"w11_{tag}_deflate1_shuffle.json"
    rows: list[dict] = []
    try:
        args.cache_dir.mkdir(parents=True, exist_ok=True)
        if not nc.exists():
            kr.write_file(nc, shape)
        if not refs.exists() or refs.stat().st_mtime < nc.stat().st_mtime:
            kr.make_refs(nc, refs)
        readers = kr.readers(nc, refs, threads)
    except Exception as e:  # noqa: BLE001 - netCDF4 / kerchunk / h5py missing: one row says so
        status = "not installed" if isinstance(e, ModuleNotFoundError) else f"error: {type(e).__name__}: {e}"
        for cache in ("hot", "cold"):
            rows.append({"workload": "W11", "cache": cache, "reader": "lsio", "kind": "reader", "threads": threads,
                         "unit": "crops", "status": status, "check": "-", "times_s": []})
        return {"rows": rows, "details": [{"error": status}]}
    rng = np.random.default_rng([args.seed, 11, threads])
    high = np.asarray(shape) - np.asarray(kr.CROP) + 1
    batches = [(rng.random((per_batch, 3)) * high).astype(np.int64) for _ in range(2 * rounds + 1)]
    out_bytes = per_batch * int(np.prod(kr.CROP)) * 4
    kr.warm([nc, refs])
    # The reference is h5py's reading of the file (lsio's own answer if h5py cannot run).
    ref = "h5py" if callable(readers.get("h5py")) else "lsio refs"
    want = np.asarray(readers[ref](batches[0]))
    status, check = {}, {}
    for name, fn in readers.items():
        if isinstance(fn, str):
            status[name] = fn
            continue
        try:
            got = fn(batches[0])
            status[name] = "ok"
            check[name] = "ok" if np.asarray(got).tobytes() == want.tobytes() else "MISMATCH"
        except Exception as e:  # noqa: BLE001
            status[name] = f"error: {type(e).__name__}: {e}"
    live = [n for n in readers if status[n] == "ok" and check.get(n) == "ok"]
    print(f"  W11 threads={threads}: {rounds} rounds hot, {rounds} cold; batches of {per_batch} crops "
          f"{kr.CROP}; file {nc.name}", flush=True)
    details = {"threads": threads, "rounds": rounds, "file": str(nc), "shape": shape, "reference": ref,
               "layout": "NetCDF4, chunks (1, 128, 128), deflate 1 + shuffle (netCDF4-python); kerchunk "
                         "SingleHdf5ToZarr references",
               "note": "cold: the file is dropped from the page cache before each reader's round; the readers' "
                       "own chunk caches (netCDF-C's, HDF5's) are kept, which favours them on small files"}
    for cache, first in (("hot", 1), ("cold", 1 + rounds)):
        times: dict[str, list[float]] = {n: [] for n in live}
        if cache == "hot":
            kr.warm([nc])
        else:
            kr.drop(nc)  # that the drop works here (not on tmpfs, say): else the cold rows are not
            details["cold_resident_after_drop"] = limits.resident_bytes([str(nc)])
            if details["cold_resident_after_drop"] > nc.stat().st_size // 10:
                print(f"    W11 cold: {details['cold_resident_after_drop']} bytes stay resident after "
                      "posix_fadvise(DONTNEED): the cold rows are not cold", flush=True)
        for k in range(rounds):
            b = batches[first + k]
            for n in live[k % len(live):] + live[:k % len(live)]:
                if cache == "cold":
                    kr.drop(nc)
                t0 = time.perf_counter()
                readers[n](b)
                times[n].append(time.perf_counter() - t0)
        for name in readers:
            row = {"workload": "W11", "cache": cache, "reader": NAMES.get(name, name), "kind": "reader",
                   "threads": threads, "unit": "crops", "status": status[name] if check.get(name, "ok") == "ok"
                   else "MISMATCH", "check": check.get(name, "-"), "times_s": times.get(name, [])}
            if row["times_s"]:
                row["median_s"] = statistics.median(row["times_s"])
                row["units_per_s"] = per_batch / row["median_s"]
                row["MBps"] = out_bytes / row["median_s"] / 1e6
            rows.append(row)
            print("    " + log_line(row), flush=True)
    return {"rows": rows, "details": [details]}


def targets(w, cache: str, threads: int, rs: list[dict], verdict) -> list[dict]:
    """lsio (the file) >= 5x the best file reader; lsio refs >= 3x zarr-python refs."""
    rate = {r["reader"]: r["units_per_s"] for r in rs if r.get("status") == "ok" and "units_per_s" in r}
    out = []
    peers = {NAMES[n]: rate[NAMES[n]] for n in FILE_PEERS if NAMES[n] in rate}
    for r in rs:
        if r["reader"] in peers and "lsio" in rate:
            r["lsio_ratio"] = rate["lsio"] / rate[r["reader"]]
        if r["reader"] == "zarr-python refs" and "lsio refs" in rate and r["reader"] in rate:
            r["lsio_ratio"] = rate["lsio refs"] / rate[r["reader"]]
    if "lsio" in rate and peers:
        best = max(peers, key=peers.get)
        ratio = rate["lsio"] / peers[best]
        out.append(verdict("W11", cache, threads, "lsio", "lsio on the file >= 5x the best reader of the file",
                           ratio >= 5, f"{ratio:.2f}x {best}"))
    if "lsio refs" in rate and "zarr-python refs" in rate:
        ratio = rate["lsio refs"] / rate["zarr-python refs"]
        out.append(verdict("W11", cache, threads, "lsio refs", "lsio on the references >= 3x zarr-python on them",
                           ratio >= 3, f"{ratio:.2f}x zarr-python refs"))
    return out
