"""W11 over HTTP: W1's crops from the NetCDF4 file of kerchunk_refs.py, served with latency.

    python benchmarks/python/w11_http.py                      # 20 ms to first byte, 2 threads
    python benchmarks/python/w11_http.py --latency-ms 20 --batches 2 --json /tmp/w11h.json

The file (float32 (32, 2048, 2048), chunks (1, 128, 128), deflate 1 + shuffle, written by
netCDF4-python; kerchunk_refs.py makes it in --cache-dir) is served by W7's object_server.py
(keep-alive, ranges, ETags, a first-byte delay per request). Readers, each on the same
batches of 16 crops (4, 256, 256):
- ``lsio file``: ``lsio.open(url, "t2m", threads=2).read_crops`` (h5py reads the chunk
  index through lsio's range requests once; the crops' chunks are coalesced range requests
  in flight together);
- ``h5netcdf (xarray, fsspec)``: ``xr.open_dataset(fsspec HTTP file, engine="h5netcdf")``
  ``.isel(...).values`` per crop (CF decoding off);
- ``h5py (fsspec)``: ``h5py.File(fsspec HTTP file)["t2m"][box]`` per crop.
Every result is compared with lsio's bit for bit. Printed: crops/s per reader, lsio's ratios,
requests per batch (server counters), and the time to open the file in a fresh process
(lsio: h5py's metadata reads through 64 KiB range requests).
"""

from __future__ import annotations

import argparse
import json
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--cache-dir", type=Path, default=HERE.parent / ".cache")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    import fsspec
    import h5py
    import xarray as xr

    import lsio
    from kerchunk_refs import write_file
    from w7 import Server

    shape = (32, 2048, 2048)
    nc = args.cache_dir / f"w11_{'x'.join(map(str, shape))}_deflate1_shuffle.nc"
    if not nc.exists():
        args.cache_dir.mkdir(parents=True, exist_ok=True)
        write_file(nc, shape)
    server = Server(nc.parent, args.latency_ms)
    url = f"{server.base}/{nc.name}"
    rng = np.random.default_rng(11)
    high = np.asarray(shape) - np.asarray(CROP) + 1
    batches = [(rng.random((args.batch, 3)) * high).astype(np.int64) for _ in range(args.batches)]

    def boxes(starts):
        return [tuple(slice(int(o), int(o) + k) for o, k in zip(s, CROP)) for s in starts]

    results = {}
    try:
        code = ("import time, lsio; t = time.perf_counter(); a = lsio.open(%r, 't2m'); "
                "print((time.perf_counter() - t) * 1e3)") % url
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        open_ms = float(r.stdout.strip().splitlines()[-1])
        a = lsio.open(url, "t2m", threads=args.threads)
        fs = fsspec.filesystem("http")
        ds = xr.open_dataset(fs.open(url, block_size=1 << 20), engine="h5netcdf", mask_and_scale=False)
        hf = h5py.File(fs.open(url, block_size=1 << 20), "r")
        readers = {
            "lsio file": lambda st: a.read_crops(st, CROP),
            "h5netcdf (xarray, fsspec)": lambda st: np.stack([ds.t2m.isel(time=b[0], y=b[1], x=b[2]).values
                                                               for b in boxes(st)]),
            "h5py (fsspec)": lambda st: np.stack([hf["t2m"][b] for b in boxes(st)]),
        }
        want = None
        for name, fn in readers.items():
            fn(batches[0][:1])  # opened and warmed (metadata), not timed
            server.reset()
            t = time.perf_counter()
            got = [fn(b) for b in batches]
            dt = time.perf_counter() - t
            st = server.stats()
            if want is None:
                want = got
            same = all(g.tobytes() == w.tobytes() for g, w in zip(got, want))
            results[name] = {"crops_s": args.batch * len(batches) / dt,
                             "requests_per_batch": st["requests"] / len(batches), "same_as_lsio": same}
            log(f"  {name:28}: {results[name]['crops_s']:7.1f} crops/s, "
                f"{results[name]['requests_per_batch']:.0f} requests per batch, {'ok' if same else 'DIFFERS'}")
    finally:
        server.close()
    lsio_rate = results["lsio file"]["crops_s"]
    log(f"W11 over HTTP ({args.latency_ms:g} ms to first byte), threads {args.threads}: float32 {shape}, chunks "
        f"(1, 128, 128) deflate 1 + shuffle; {args.batches} batches of {args.batch} crops {CROP}")
    log("| reader | crops/s | lsio's ratio | requests/batch |")
    log("|---|---|---|---|")
    for name, r in results.items():
        ratio = "" if name == "lsio file" else f"{lsio_rate / r['crops_s']:.1f}x"
        log(f"| {name} | {r['crops_s']:.1f} | {ratio} | {r['requests_per_batch']:.0f} |")
    log(f"first open of the file over HTTP in a fresh process (lsio): {open_ms:.0f} ms")
    if args.json:
        args.json.write_text(json.dumps({"latency_ms": args.latency_ms, "results": results, "open_ms": open_ms},
                                        indent=1))
    return 0 if all(r["same_as_lsio"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
