"""Benchmark stores: realistic data, written once with zarr-python, and their shard indexes.

Used by suite.py (and rss_child.py for paths only). Each store is described by a
:class:`StoreSpec`; :func:`ensure_store` writes it with zarr-python (sharded, zstd level 3)
under the cache directory (default ``benchmarks/.cache/``) unless a complete copy is already
there (a ``.complete`` marker is written last, so an interrupted write is redone).

Data (seeded, deterministic):
  - ``weather``: float32 (t, y, x) fields: latitude gradient, drifting waves and blobs, plus
    Gaussian noise; zstd compresses it about 1.2-1.4x, like reanalysis data.
  - ``imagery``: uint16 (z, y, x) or (y, x) smooth structure (blurred blobs, gradients) times a
    brightness scale plus Poisson-like shot noise; compresses about 1.5-2.5x.

:class:`ShardLayout` reads the shard indexes (index at the end or start of each shard file:
nchunks x (uint64 offset, uint64 nbytes) little-endian + 4-byte crc32c, 2^64-1 = missing) so
the machine-limit measurements can read and decode exactly the chunk byte ranges a workload
touches.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MISSING = np.uint64(2**64 - 1)


@dataclass(frozen=True)
class StoreSpec:
    name: str                  # short id used in file names and the report
    kind: str                  # "weather" | "imagery"
    dtype: str                 # "float32" | "uint16"
    shape: tuple[int, ...]
    shards: tuple[int, ...]
    chunks: tuple[int, ...]    # inner chunks
    zstd_level: int = 3
    seed: int = 0
    codec: str = "zstd"        # the inner chunks' compressor: "zstd" (zstd_level) | "gzip" (level 5) | "lz4"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    @property
    def chunk_nbytes(self) -> int:
        return int(np.prod(self.chunks)) * np.dtype(self.dtype).itemsize

    def dirname(self) -> str:
        d = lambda s: "x".join(map(str, s))  # noqa: E731
        return (f"{self.name}_{self.kind}_{self.dtype}_{d(self.shape)}_s{d(self.shards)}"
                f"_c{d(self.chunks)}_{self.codec_tag()}_seed{self.seed}.zarr")

    def codec_tag(self) -> str:
        return f"zstd{self.zstd_level}" if self.codec == "zstd" else self.codec

    def compressor(self):
        """zarr-python's compressor object for ``codec``."""
        import zarr.codecs

        if self.codec == "zstd":
            return zarr.codecs.ZstdCodec(level=self.zstd_level)
        if self.codec == "gzip":
            return zarr.codecs.GzipCodec(level=5)
        if self.codec == "lz4":
            import warnings

            import numcodecs.zarr3
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # numcodecs.zarr3's "not part of the Zarr spec" warning
                return numcodecs.zarr3.LZ4()
        raise ValueError(f"unknown codec {self.codec!r}")

    def describe(self) -> str:
        return (f"{self.dtype} {self.shape}, shards {self.shards}, inner chunks {self.chunks} "
                f"({self.chunk_nbytes / 1024:g} KiB), "
                + (f"zstd {self.zstd_level}" if self.codec == "zstd" else "gzip 5" if self.codec == "gzip" else self.codec))


# ----------------------------------------------------------------------------- data


def weather_slab(spec: StoreSpec, t0: int, t1: int) -> np.ndarray:
    """Time steps [t0, t1) of a weather-like float32 field of shape spec.shape (t, y, x)."""
    nt, ny, nx = spec.shape
    rng = np.random.default_rng(spec.seed)
    waves = [(rng.uniform(0.5, 4), rng.uniform(0.5, 4), rng.uniform(0, 2 * np.pi),
              rng.uniform(0.05, 0.3), rng.uniform(0.5, 2.0)) for _ in range(6)]
    blobs = [(rng.uniform(0, 1, 2), rng.uniform(-0.03, 0.03, 2), rng.uniform(0.05, 0.2),
              rng.uniform(-3, 3)) for _ in range(5)]
    y = np.linspace(0.0, 1.0, ny, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, nx, dtype=np.float32)[None, :]
    base = np.broadcast_to(273.0 + 15.0 * (1.0 - y), (ny, nx)).astype(np.float32)
    out = np.empty((t1 - t0, ny, nx), dtype=np.float32)
    for t in range(t0, t1):
        noise_rng = np.random.default_rng([spec.seed, t])
        f = base.copy()
        # Separable waves: sin(a + b) = sin a cos b + cos a sin b, cheap on big planes.
        for ky, kx, phase, speed, amp in waves:
            ay = 2 * np.pi * ky * y + phase + speed * t
            bx = 2 * np.pi * kx * x
            f += (amp * (np.sin(ay) * np.cos(bx) + np.cos(ay) * np.sin(bx))).astype(np.float32)
        for centre, drift, width, amp in blobs:
            cy, cx = (centre + drift * t) % 1.0
            gy = np.exp(-((y - cy) ** 2) / (2 * width**2)).astype(np.float32)
            gx = np.exp(-((x - cx) ** 2) / (2 * width**2)).astype(np.float32)
            f += np.float32(amp) * gy * gx
        f += noise_rng.standard_normal((ny, nx), dtype=np.float32) * np.float32(0.1)
        out[t - t0] = f
    return out


def imagery_slab(spec: StoreSpec, z0: int, z1: int) -> np.ndarray:
    """Planes [z0, z1) along axis 0 of uint16 imagery (a 2-d spec yields rows [z0, z1))."""
    shape = spec.shape if len(spec.shape) == 3 else (1, *spec.shape)
    nz, ny, nx = shape
    rng = np.random.default_rng(spec.seed)
    blobs = [(rng.uniform(0, 1, 3), rng.uniform(0.03, 0.15), rng.uniform(500, 3000)) for _ in range(24)]
    z = (np.arange(nz, dtype=np.float32) / max(nz - 1, 1))
    y = np.linspace(0.0, 1.0, ny, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, nx, dtype=np.float32)[None, :]
    if len(spec.shape) == 2:  # rows of one plane
        y = y[z0:z1]
        planes = [(0, y)]
    else:
        planes = [(k, y) for k in range(z0, z1)]
    out = []
    for k, yy in planes:
        lam = np.float32(800.0) + np.float32(400.0) * (yy + x)  # background gradient
        for (cz, cy, cx), w, amp in blobs:
            gz = np.float32(np.exp(-((z[k] - cz) ** 2) / (2 * w * w)))
            if gz < 1e-3:
                continue
            gy = np.exp(-((yy - cy) ** 2) / (2 * w * w)).astype(np.float32)
            gx = np.exp(-((x - cx) ** 2) / (2 * w * w)).astype(np.float32)
            lam = lam + np.float32(amp) * gz * gy * gx
        # Poisson-like shot noise: lam + sqrt(lam) * N(0, 1) (exact Poisson is slow at this size).
        noise_rng = np.random.default_rng([spec.seed, k, z0])
        noisy = lam + np.sqrt(lam) * noise_rng.standard_normal(lam.shape, dtype=np.float32)
        out.append(np.clip(np.rint(noisy), 0, 65535).astype(np.uint16))
    return np.stack(out) if len(spec.shape) == 3 else out[0]


def generate_slab(spec: StoreSpec, a: int, b: int) -> np.ndarray:
    if spec.kind == "weather":
        return weather_slab(spec, a, b)
    if spec.kind == "imagery":
        return imagery_slab(spec, a, b)
    raise ValueError(f"unknown data kind {spec.kind!r}")


# ----------------------------------------------------------------------------- writing


def store_path(spec: StoreSpec, cache_dir: Path) -> Path:
    return Path(cache_dir) / spec.dirname()


def ensure_store(spec: StoreSpec, cache_dir: Path, log=print) -> Path:
    """Writes the store (slab by slab of whole shards along axis 0) unless cached."""
    import zarr
    import zarr.codecs

    path = store_path(spec, cache_dir)
    if (path / ".complete").exists():
        return path
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.perf_counter()
    z = zarr.create_array(
        store=str(tmp), shape=spec.shape, dtype=spec.dtype, shards=spec.shards,
        chunks=spec.chunks, compressors=spec.compressor(),
        fill_value=0, zarr_format=3,
    )
    step = spec.shards[0]
    for a in range(0, spec.shape[0], step):
        b = min(a + step, spec.shape[0])
        z[a:b] = generate_slab(spec, a, b)
    (tmp / ".complete").write_text(json.dumps({"zarr": zarr.__version__, "spec": spec.__dict__}))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)
    log(f"  wrote {path.name} with zarr-python {zarr.__version__} in {time.perf_counter() - t0:.1f} s")
    return path


def data_files(path: Path) -> list[Path]:
    """Every shard file of the store (not zarr.json or the marker)."""
    return sorted(p for p in Path(path).rglob("*") if p.is_file() and p.name not in ("zarr.json", ".complete"))


def stored_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in data_files(path))


# ----------------------------------------------------------------------------- shard indexes


@dataclass
class ShardLayout:
    """Shard geometry and (lazily loaded) shard indexes of a sharded zstd store."""

    path: Path
    shape: tuple[int, ...]
    shards: tuple[int, ...]
    chunks: tuple[int, ...]
    itemsize: int
    index_at_end: bool
    separator: str
    _index: dict = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> "ShardLayout":
        meta = json.loads((Path(path) / "zarr.json").read_text())
        shards = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
        codec = meta["codecs"][0]
        if codec["name"] != "sharding_indexed":
            raise ValueError(f"{path}: not a sharded array")
        cfg = codec["configuration"]
        names = [c["name"] for c in cfg.get("index_codecs", [])]
        if names != ["bytes", "crc32c"]:
            raise ValueError(f"{path}: unexpected index codecs {names}")
        enc = meta.get("chunk_key_encoding", {"name": "default"})
        if enc["name"] != "default":
            raise ValueError(f"{path}: chunk key encoding {enc['name']} not handled here")
        sep = enc.get("configuration", {}).get("separator", "/")
        return cls(Path(path), tuple(meta["shape"]), shards, tuple(cfg["chunk_shape"]),
                   np.dtype(meta["data_type"]).itemsize, cfg.get("index_location", "end") == "end", sep)

    @property
    def per_shard(self) -> tuple[int, ...]:
        return tuple(s // c for s, c in zip(self.shards, self.chunks))

    @property
    def index_nbytes(self) -> int:
        return 16 * int(np.prod(self.per_shard)) + 4

    def shard_file(self, shard: tuple[int, ...]) -> Path:
        return self.path / ("c" + self.separator + self.separator.join(map(str, shard)))

    def index_range(self, shard: tuple[int, ...]) -> tuple[Path, int, int] | None:
        f = self.shard_file(shard)
        if not f.exists():
            return None
        off = f.stat().st_size - self.index_nbytes if self.index_at_end else 0
        return f, off, self.index_nbytes

    def index(self, shard: tuple[int, ...]) -> np.ndarray | None:
        """(n_inner_chunks, 2) uint64 (offset, nbytes), C order; None if the shard is missing."""
        if shard not in self._index:
            r = self.index_range(shard)
            if r is None:
                self._index[shard] = None
            else:
                f, off, n = r
                with open(f, "rb") as fh:
                    fh.seek(off)
                    raw = fh.read(n)
                self._index[shard] = np.frombuffer(raw[:-4], dtype="<u8").reshape(-1, 2)
        return self._index[shard]

    def chunks_in_box(self, start, shape) -> list[tuple[int, ...]]:
        """Grid coordinates of the inner chunks a box [start, start+shape) touches."""
        rngs = [range(s // c, (s + n - 1) // c + 1) for s, n, c in zip(start, shape, self.chunks)]
        return list(itertools.product(*rngs))

    def chunk_range(self, chunk: tuple[int, ...]) -> tuple[Path, int, int] | None:
        """(shard file, offset, nbytes) of an inner chunk, None if missing."""
        ps = self.per_shard
        shard = tuple(c // p for c, p in zip(chunk, ps))
        idx = self.index(shard)
        if idx is None:
            return None
        local = int(np.ravel_multi_index(tuple(c % p for c, p in zip(chunk, ps)), ps))
        off, nb = idx[local]
        if off == MISSING and nb == MISSING:
            return None
        return self.shard_file(shard), int(off), int(nb)

    def shard_of(self, chunk: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(c // p for c, p in zip(chunk, self.per_shard))

    def all_chunks(self) -> list[tuple[int, ...]]:
        grid = [-(-s // c) for s, c in zip(self.shape, self.chunks)]
        return list(itertools.product(*map(range, grid)))


@dataclass
class ByteRanges:
    """Byte ranges a workload touches: parallel lists over (file, offset, nbytes)."""

    paths: list[str]
    files: np.ndarray    # int64 index into paths
    offsets: np.ndarray  # uint64
    lengths: np.ndarray  # uint64

    @property
    def nbytes(self) -> int:
        return int(self.lengths.sum())

    def __len__(self) -> int:
        return len(self.lengths)

    def merged(self, max_gap: int = 64 << 10, max_request: int = 16 << 20) -> "ByteRanges":
        """Ranges sorted by (file, offset), neighbours merged when the gap between them is at
        most max_gap and the merged read at most max_request bytes (suite.py passes lsio's):
        the read pattern of a reader that coalesces, bytes in the gaps included."""
        order = np.lexsort((self.offsets, self.files))
        files, offs, lens = [], [], []
        for i in order:
            f, o, n = int(self.files[i]), int(self.offsets[i]), int(self.lengths[i])
            if files and files[-1] == f:
                end = offs[-1] + lens[-1]
                new_end = max(end, o + n)
                if o - end <= max_gap and new_end - offs[-1] <= max_request:
                    lens[-1] = new_end - offs[-1]
                    continue
            files.append(f)
            offs.append(o)
            lens.append(n)
        return ByteRanges(self.paths, np.asarray(files, dtype=np.int64), np.asarray(offs, dtype=np.uint64),
                          np.asarray(lens, dtype=np.uint64))

    def read_frames(self) -> list[bytes]:
        """The bytes of every range (Python reads: for decode limits, not timed)."""
        fds = [os.open(p, os.O_RDONLY) for p in self.paths]
        try:
            return [os.pread(fds[f], int(n), int(o)) for f, o, n in zip(self.files, self.offsets, self.lengths)]
        finally:
            for fd in fds:
                os.close(fd)


def byte_ranges(layout: ShardLayout, chunk_list, include_indexes: bool = False) -> ByteRanges:
    """Chunk byte ranges of `chunk_list` (repeats kept), plus, with include_indexes, the index
    range of every shard they touch (what a reader with no cached index also reads)."""
    paths: dict[str, int] = {}
    files, offs, lens = [], [], []

    def add(f: Path, o: int, n: int) -> None:
        files.append(paths.setdefault(str(f), len(paths)))
        offs.append(o)
        lens.append(n)

    shards = set()
    for c in chunk_list:
        r = layout.chunk_range(c)
        if r is not None:
            add(*r)
        shards.add(layout.shard_of(c))
    if include_indexes:
        for s in sorted(shards):
            r = layout.index_range(s)
            if r is not None:
                add(*r)
    return ByteRanges(list(paths), np.asarray(files, dtype=np.int64), np.asarray(offs, dtype=np.uint64),
                      np.asarray(lens, dtype=np.uint64))
