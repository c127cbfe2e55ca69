"""lsio demo: random crops from a sharded zstd Zarr v3 store, lsio vs zarr-python.

1. Writes (once, cached under benchmarks/.cache/) a weather-like float32 store with
   zarr-python: smooth fields (a latitude gradient, slowly drifting waves and blobs) plus
   noise, which zstd compresses about 1.3x, like real reanalysis data. Sharded, zstd level 3.
2. Draws seeded random crops in batches, reads each batch with
   `lsio.open(path).read_crops(starts, shape, out=...)` and with zarr-python
   (`z[t0:t1, y0:y1, x0:x1]` per crop), and checks the results are bit-identical.
3. After one warm-up batch, times a few batches per reader (interleaved, so both see the
   same machine state) and prints medians: crops/s and MB/s of output.

The store is small and was just written or read, so this measures page-cache-hot reads.
Run `python benchmarks/demo.py --help` for the knobs; `bash scripts/demo.sh` installs
everything first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    if not shape or any(n <= 0 for n in shape):
        raise argparse.ArgumentTypeError(f"expected positive sizes, got {text!r}")
    return shape


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--shape", type=parse_shape, default=(8, 1024, 1024), help="array shape (t,y,x)")
    p.add_argument("--shards", type=parse_shape, default=(1, 512, 512), help="shard shape")
    p.add_argument("--chunks", type=parse_shape, default=(1, 128, 128), help="inner chunk shape")
    p.add_argument("--crop", type=parse_shape, default=(2, 256, 256), help="crop shape")
    p.add_argument("--batch", type=int, default=16, help="crops per batch (one read_crops call)")
    p.add_argument("--rounds", type=int, default=10, help="timed batches per reader")
    p.add_argument("--threads", type=int, default=None,
                   help="lsio worker threads; None: LSIO_THREADS or all cores")
    p.add_argument("--io", default=None, choices=["auto", "uring", "pread"],
                   help="lsio io backend; None: LSIO_IO or auto")
    p.add_argument("--seed", type=int, default=0, help="seed for the data and the crops")
    p.add_argument("--zstd-level", type=int, default=3)
    p.add_argument("--cache-dir", type=Path, default=HERE / ".cache", help="where the store lives")
    p.add_argument("--rebuild", action="store_true", help="rewrite the store even if cached")
    args = p.parse_args(argv)
    ndim = len(args.shape)
    for name in ("shards", "chunks", "crop"):
        if len(getattr(args, name)) != ndim:
            p.error(f"--{name} needs {ndim} dims like --shape")
    if any(c > s for c, s in zip(args.crop, args.shape)):
        p.error("--crop must fit inside --shape")
    if any(s % c for s, c in zip(args.shards, args.chunks)):
        p.error("--chunks must divide --shards")
    if args.batch < 1 or args.rounds < 1:
        p.error("--batch and --rounds must be >= 1")
    return args


# ----------------------------------------------------------------------------- data

def weather_like(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Smooth, slowly evolving float32 fields plus noise (temperature-like, in kelvin).

    The last two dims are (y, x); any leading dims are flattened into a "time" axis.
    """
    *lead, ny, nx = shape
    nt = int(np.prod(lead)) if lead else 1
    rng = np.random.default_rng(seed)
    y = np.linspace(0.0, 1.0, ny, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, nx, dtype=np.float32)[None, :]
    # (wave numbers ky, kx; phase; phase speed per step; amplitude)
    waves = [(rng.uniform(0.5, 4), rng.uniform(0.5, 4), rng.uniform(0, 2 * np.pi),
              rng.uniform(0.05, 0.3), rng.uniform(0.5, 2.0)) for _ in range(6)]
    # (centre, drift per step, width, amplitude)
    blobs = [(rng.uniform(0, 1, 2), rng.uniform(-0.03, 0.03, 2), rng.uniform(0.05, 0.2),
              rng.uniform(-3, 3)) for _ in range(5)]
    out = np.empty((nt, ny, nx), dtype=np.float32)
    base = np.broadcast_to(273.0 + 15.0 * (1.0 - y), (ny, nx)).astype(np.float32)
    for t in range(nt):
        f = base.copy()
        for ky, kx, phase, speed, amp in waves:
            f += (amp * np.sin(2 * np.pi * (ky * y + kx * x) + phase + speed * t)).astype(np.float32)
        for centre, drift, width, amp in blobs:
            cy, cx = (centre + drift * t) % 1.0
            f += (amp * np.exp(-((y - cy) ** 2 + (x - cx) ** 2) / (2 * width**2))).astype(np.float32)
        f += rng.normal(0.0, 0.1, (ny, nx)).astype(np.float32)
        out[t] = f
    return out.reshape(shape)


def store_path(args: argparse.Namespace) -> Path:
    dims = lambda s: "x".join(map(str, s))  # noqa: E731
    name = (f"weather_{dims(args.shape)}_s{dims(args.shards)}_c{dims(args.chunks)}"
            f"_zstd{args.zstd_level}_seed{args.seed}.zarr")
    return args.cache_dir / name


def ensure_store(args: argparse.Namespace) -> Path:
    """Write the store unless a complete copy is cached (written to a temp dir, then renamed)."""
    import zarr
    import zarr.codecs

    path = store_path(args)
    if path.exists() and not args.rebuild and (path / "zarr.json").exists():
        print(f"store: {path} (cached; --rebuild to rewrite)")
        return path
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    data = weather_like(args.shape, args.seed)
    z = zarr.create_array(
        store=str(tmp), shape=args.shape, dtype="float32",
        shards=args.shards, chunks=args.chunks,
        compressors=zarr.codecs.ZstdCodec(level=args.zstd_level),
        fill_value=0.0, zarr_format=3,
        dimension_names=("time", "y", "x") if len(args.shape) == 3 else None,
    )
    z[...] = data
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    print(f"store: {path} (written by zarr-python {zarr.__version__} in "
          f"{time.perf_counter() - t0:.1f} s)")
    return path


def stored_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and f.name != "zarr.json")


# ----------------------------------------------------------------------------- reading

def random_starts(rng: np.random.Generator, shape, crop, n: int) -> np.ndarray:
    high = np.asarray(shape, dtype=np.int64) - np.asarray(crop, dtype=np.int64) + 1
    return (rng.random((n, len(shape))) * high).astype(np.int64)


def read_zarr_python(z, starts: np.ndarray, crop) -> np.ndarray:
    out = np.empty((len(starts), *crop), dtype=z.dtype)
    for i, start in enumerate(starts):
        out[i] = z[tuple(slice(int(s), int(s) + c) for s, c in zip(start, crop))]
    return out


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(np.array_equal(a.view(np.uint8), b.view(np.uint8)))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import zarr

    import lsio

    path = ensure_store(args)
    raw = int(np.prod(args.shape)) * 4
    packed = stored_bytes(path)
    print(f"array: float32 {args.shape}, shards {args.shards}, inner chunks {args.chunks}, "
          f"zstd level {args.zstd_level}: {raw / 2**20:.1f} MiB raw, {packed / 2**20:.1f} MiB "
          f"stored (ratio {raw / packed:.2f})")

    arr = lsio.open(str(path), threads=args.threads, io=args.io)
    z = zarr.open_array(str(path), mode="r")
    info = lsio.io_backend_info()
    print(f"lsio {getattr(lsio, '__version__', '?')}: io={args.io or 'default'}, threads="
          f"{args.threads if args.threads is not None else 'default'}; "
          f"io_backend_info() = {json.dumps(info, default=str)}")
    print(f"zarr-python {zarr.__version__}, numpy {np.__version__}, Python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(f"workload: batches of {args.batch} random crops of {args.crop} "
          f"({args.batch * int(np.prod(args.crop)) * 4 / 2**20:.1f} MiB per batch), "
          f"1 warm-up + {args.rounds} timed batches per reader, page cache hot")

    rng = np.random.default_rng(args.seed + 1)
    out = np.empty((args.batch, *args.crop), dtype=np.float32)
    batch_bytes = out.nbytes
    times: dict[str, list[float]] = {"lsio": [], "zarr-python": []}
    for round_ in range(args.rounds + 1):  # round 0 is the warm-up
        starts = random_starts(rng, args.shape, args.crop, args.batch)

        t0 = time.perf_counter()
        got = arr.read_crops(starts, args.crop, out=out)
        t_lsio = time.perf_counter() - t0

        t0 = time.perf_counter()
        want = read_zarr_python(z, starts, args.crop)
        t_zarr = time.perf_counter() - t0

        if got is not out:
            print("error: read_crops(..., out=out) did not return out", file=sys.stderr)
            return 1
        if not same_bits(got, want):
            bad = [i for i in range(args.batch) if not same_bits(got[i], want[i])]
            print(f"error: lsio and zarr-python differ in batch {round_}, crops {bad} "
                  f"(starts {starts[bad].tolist()})", file=sys.stderr)
            return 1
        if round_ > 0:
            times["lsio"].append(t_lsio)
            times["zarr-python"].append(t_zarr)
    print(f"check: all {(args.rounds + 1) * args.batch} crops bit-identical between lsio and zarr-python")

    print()
    print(f"{'reader':<12} {'crops/s':>10} {'MB/s':>10} {'ms/batch':>10}   (medians of {args.rounds})")
    rates = {}
    for name, ts in times.items():
        t = statistics.median(ts)
        rates[name] = args.batch / t
        print(f"{name:<12} {args.batch / t:>10.1f} {batch_bytes / t / 1e6:>10.1f} {t * 1e3:>10.2f}")
    print(f"lsio / zarr-python: {rates['lsio'] / rates['zarr-python']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
