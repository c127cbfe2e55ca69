"""W11 (local, hot or cold): W1's crops from a NetCDF4 file, read in place.

    python benchmarks/python/kerchunk_refs.py                 # W1's (32, 2048, 2048) float32, 2 threads
    python benchmarks/python/kerchunk_refs.py --cold          # the file dropped from the page cache per round
    python benchmarks/python/kerchunk_refs.py --small         # (16, 1024, 1024)
    python benchmarks/python/kerchunk_refs.py --quick         # a smoke run (tiny, 1 round)

The file: float32, chunks (1, 128, 128), deflate level 1 + shuffle, written by netCDF4-python
(the data of the suite's W1 store: benchmarks/python/stores.py generate_slab), and kerchunk
references to it made by kerchunk.hdf.SingleHdf5ToZarr; both cached in --cache-dir. Crops
(4, 256, 256), batches of 16, seeded random origins, the same batches for every reader in a
round and new ones in every round (so no reader's cache of decoded chunks serves a repeated
batch: netCDF-C and HDF5 keep such caches by default; the file, 512 MiB decoded, is larger
than them); the page cache is warmed first (every file read once), and with ``--cold`` the
NetCDF4 file is dropped from it before each reader's round (handles stay open). Readers:
- ``lsio refs``: ``lsio.open(refs, "t2m", threads=2).read_crops(starts, shape)``;
- ``lsio file``: the same on the NetCDF file itself (``lsio.open(nc, "t2m")``: h5py reads its
  chunk index once, lsio/_hdf5.py);
- ``zarr-python refs``: zarr-python on the same references (fsspec's ReferenceFileSystem,
  ``zarr.open_array(...)[box]`` per crop; zarr's async concurrency 2);
- ``h5netcdf (xarray)``: ``xr.open_dataset(nc, engine="h5netcdf").t2m.isel(...).values``
  per crop (CF decoding off: ``mask_and_scale=False``);
- ``netCDF4``: ``Dataset(nc)["t2m"][box]`` per crop (auto mask/scale off);
- ``h5py``: ``File(nc)["t2m"][box]`` per crop.
Every result is compared with lsio's bit for bit (first batch). Rounds interleave the readers,
rotating their order; the median round's crops/s is reported with the ratios the issue's
targets name (lsio >= 5x the best reader of the file, >= 3x zarr-python on the references),
and the time lsio takes to open the references, and the file, the first time in a fresh process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CROP = (4, 256, 256)


def log(msg: str = "") -> None:
    print(msg, flush=True)


def write_file(nc: Path, shape, seed: int = 0) -> None:
    import netCDF4
    from stores import StoreSpec, generate_slab

    spec = StoreSpec("w11", "weather", "float32", shape, (1,) + shape[1:], (1, 128, 128), seed=seed)
    tmp = nc.with_suffix(".tmp.nc")
    with netCDF4.Dataset(tmp, "w") as d:
        for name, n in zip(("time", "y", "x"), shape):
            d.createDimension(name, n)
        v = d.createVariable("t2m", "f4", ("time", "y", "x"), zlib=True, complevel=1, shuffle=True,
                             chunksizes=(1, 128, 128))
        v.set_auto_maskandscale(False)
        for t in range(shape[0]):
            v[t] = generate_slab(spec, t, t + 1)[0]
    tmp.rename(nc)


def make_refs(nc: Path, refs: Path) -> None:
    from kerchunk.hdf import SingleHdf5ToZarr

    refs.write_text(json.dumps(SingleHdf5ToZarr(str(nc), inline_threshold=0).translate()))


def warm(paths) -> None:
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def drop(path: Path) -> None:
    # lsio's mappings of the file (hot reads in place) would keep the pages they touched.
    import lsio

    lsio.close_files()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def readers(nc: Path, refs: Path, threads: int):
    import h5py
    import netCDF4
    import xarray as xr
    import zarr

    import lsio

    out = {}
    a = lsio.open(str(refs), "t2m", threads=threads)
    out["lsio refs"] = lambda starts: a.read_crops(starts, CROP)
    f = lsio.open(str(nc), "t2m", threads=threads)  # the file itself: its chunk index read by h5py
    out["lsio file"] = lambda starts: f.read_crops(starts, CROP)

    def boxes(starts):
        return [tuple(slice(int(o), int(o) + k) for o, k in zip(s, CROP)) for s in starts]

    try:
        import fsspec

        zarr.config.set({"async.concurrency": threads, "threading.max_workers": threads})
        fs = fsspec.filesystem("reference", fo=str(refs), remote_protocol="file", asynchronous=True)
        z = zarr.open_array(zarr.storage.FsspecStore(fs, read_only=True), path="t2m", mode="r")
        out["zarr-python refs"] = lambda starts: np.stack([z[b] for b in boxes(starts)])
    except Exception as e:  # noqa: BLE001 - a reader that cannot run gets a row saying why
        out["zarr-python refs"] = f"error: {type(e).__name__}: {e}"
    ds = xr.open_dataset(nc, engine="h5netcdf", mask_and_scale=False)
    out["h5netcdf (xarray)"] = lambda starts: np.stack([
        ds.t2m.isel(time=b[0], y=b[1], x=b[2]).values for b in boxes(starts)])
    nd = netCDF4.Dataset(nc)
    var = nd["t2m"]
    var.set_auto_maskandscale(False)
    out["netCDF4"] = lambda starts: np.stack([var[b] for b in boxes(starts)])
    hf = h5py.File(nc, "r")
    hd = hf["t2m"]
    out["h5py"] = lambda starts: np.stack([hd[b] for b in boxes(starts)])
    return out


def open_ms(path: Path) -> float:
    code = ("import time, lsio; t = time.perf_counter(); a = lsio.open(%r, 't2m'); "
            "print((time.perf_counter() - t) * 1e3)") % str(path)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="(16, 1024, 1024) instead of W1's (32, 2048, 2048)")
    ap.add_argument("--quick", action="store_true", help="smoke run: (4, 512, 512), 1 round of 2 batches")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batches", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cache-dir", type=Path, default=HERE.parent / ".cache")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--cold", action="store_true",
                    help="drop the NetCDF4 file from the page cache (posix_fadvise DONTNEED) before each "
                         "reader's round; handles stay open (h5py's own chunk cache stays at its default)")
    args = ap.parse_args(argv)
    shape = (4, 512, 512) if args.quick else (16, 1024, 1024) if args.small else (32, 2048, 2048)
    if args.quick:
        args.rounds, args.batches = 1, 2
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    tag = "x".join(map(str, shape))
    nc = args.cache_dir / f"w11_{tag}_deflate1_shuffle.nc"
    refs = args.cache_dir / f"w11_{tag}_deflate1_shuffle.json"
    if not nc.exists():
        t = time.perf_counter()
        write_file(nc, shape)
        log(f"wrote {nc.name} with netCDF4-python in {time.perf_counter() - t:.1f} s")
    if not refs.exists() or refs.stat().st_mtime < nc.stat().st_mtime:
        make_refs(nc, refs)
    nchunks = sum(1 for k, v in json.loads(refs.read_text())["refs"].items() if k.startswith("t2m/") and
                  isinstance(v, list))
    warm([nc, refs])
    rng = np.random.default_rng(0)
    high = np.asarray(shape) - np.asarray(CROP) + 1
    rounds = [[(rng.random((args.batch, 3)) * high).astype(np.int64) for _ in range(args.batches)]
              for _ in range(args.rounds + 1)]
    batches = rounds[0]
    rs = readers(nc, refs, args.threads)
    want = rs["lsio refs"](batches[0])
    status = {}
    for name, fn in rs.items():
        if isinstance(fn, str):
            status[name] = fn
            continue
        try:
            got = fn(batches[0])
            status[name] = "ok" if got.tobytes() == want.tobytes() else "DIFFERS from lsio"
        except Exception as e:  # noqa: BLE001
            status[name] = f"error: {type(e).__name__}: {e}"
    live = [n for n in rs if status[n] == "ok"]
    rates = {n: [] for n in live}
    for r in range(args.rounds):
        order = live[r % len(live):] + live[:r % len(live)]
        for n in order:
            if args.cold:
                drop(nc)
            t = time.perf_counter()
            for b in rounds[r + 1]:
                rs[n](b)
            rates[n].append(args.batch * len(batches) / (time.perf_counter() - t))
    med = {n: statistics.median(v) for n, v in rates.items()}
    ms = open_ms(refs)
    ms_file = open_ms(nc)
    lsio_rate = med.get("lsio refs", 0.0)
    file_rate = med.get("lsio file", 0.0)
    file_readers = [n for n in ("h5netcdf (xarray)", "netCDF4", "h5py") if n in med]
    best_file = max(file_readers, key=lambda n: med[n]) if file_readers else None
    log(f"W11 local {'cold' if args.cold else 'hot'}: float32 {shape}, chunks (1, 128, 128) deflate 1 + shuffle ({nchunks} chunks), crops "
        f"{CROP}, batches of {args.batch}, {args.batches} batches x {args.rounds} rounds, threads {args.threads}, "
        f"{os.cpu_count()} CPUs")
    log("| reader | crops/s | lsio's ratio | check |")
    log("|---|---|---|---|")
    for n in rs:
        if n in med:
            ratio = "" if n == "lsio refs" else f"{lsio_rate / med[n]:.2f}x (file: {file_rate / med[n]:.2f}x)"
            log(f"| {n} | {med[n]:.0f} | {ratio} | {status[n]} |")
        else:
            log(f"| {n} | | | {status[n]} |")
    if best_file:
        log(f"target >= 5x the best reader of the file ({best_file}): lsio on the file {file_rate / med[best_file]:.2f}x, "
            f"on its references {lsio_rate / med[best_file]:.2f}x")
    if "zarr-python refs" in med:
        log(f"target >= 3x zarr-python on the references: {lsio_rate / med['zarr-python refs']:.2f}x")
    log(f"first open of the references ({nchunks} chunk references) in a fresh process: {ms:.1f} ms")
    log(f"first open of the file itself (h5py reads its chunk index) in a fresh process: {ms_file:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps({"shape": shape, "cold": args.cold, "chunks": nchunks, "crops_per_s": med,
                                         "status": status,
                                         "open_ms": ms, "open_file_ms": ms_file, "threads": args.threads},
                                        indent=1))
    return 0 if all(v == "ok" or v.startswith("error") for v in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
