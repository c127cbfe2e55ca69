"""Zarr v3 test stores written at test time by the reference writers.

Every store is described by a :class:`StoreSpec` registered in ``SPECS``
(supported by lsio, used by the parity and metadata tests) or in
``UNSUPPORTED_SPECS`` (features lsio must refuse with ``UnsupportedError``).
A spec's builder writes the store with zarr-python 3 (``zarr.create_array``)
or TensorStore (``"driver": "zarr3"``) into a directory and returns the array
a reader must return, bit for bit (NaN payloads and the sign of zero
included).  The recipes follow ``docs/design/zarr-format.md`` section 10.

Coverage: every core numeric dtype, ranks 0 to 4, shapes that are not
multiples of the chunk shape, sharded stores with the index at the start and
at the end (TensorStore omits ``index_location`` for the end), index codecs
with and without crc32c (and a big-endian index), the transpose codec inside
a shard and in unsharded arrays, big-endian ``bytes``, inner crc32c, zstd with
and without checksum, gzip, uncompressed chunks, missing inner chunks and
whole missing shards, NaN / Infinity / -Infinity / -0.0 / hex-NaN / extreme
integer fill values, and every chunk key encoding (default "/" and ".",
v2 "." and "/").  A few stores are zarr-python stores whose ``zarr.json`` is
edited by hand to use spellings zarr-python does not write (codec
short-hands, transpose order "F", the ``endian`` alias, no
``index_location``, short or complex hex fills, integral fills for floats);
zarr-python cannot read some of those, so they are compared with the
expected array only.  Others rewrite chunk bytes in legal but unusual ways:
zstd frames without a content size or concatenated, shards with inner chunks
in reverse order separated by garbage gaps.  Edge shapes: chunks and shards
larger than the array, 1x3 inner chunks, length-0 dimensions, and three
~2.6 MB stores.

Stores are small so that writing all of them takes a few seconds.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import warnings
import zlib
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import tensorstore as ts
import zarr
from zarr.codecs import (
    BloscCodec,
    BytesCodec,
    Crc32cCodec,
    GzipCodec,
    ShardingCodec,
    TransposeCodec,
    ZstdCodec,
)

Builder = Callable[[Path], np.ndarray]


@dataclasses.dataclass(frozen=True)
class StoreSpec:
    """How to write one store and what lsio must read back from it."""

    name: str
    writer: str  # "zarr-python", "tensorstore" or "hand-edited"
    build: Builder
    # False when zarr-python 3.1.6 cannot open the store at all.
    zarr_readable: bool = True
    # False when zarr-python reads the fill value with other NaN bits than
    # the writer stored; its reads are then compared by value only.
    zarr_bits_exact: bool = True


SPECS: dict[str, StoreSpec] = {}
UNSUPPORTED_SPECS: dict[str, StoreSpec] = {}

# Substrings of which at least one must appear (case-insensitively) in the
# UnsupportedError message of each unsupported store: the feature's name.
UNSUPPORTED_FEATURE_WORDS: dict[str, tuple[str, ...]] = {}


def _register(table, name, writer, zarr_readable=True, zarr_bits_exact=True):
    def deco(fn: Builder) -> Builder:
        assert name not in table, name
        table[name] = StoreSpec(
            name, writer, fn, zarr_readable, zarr_bits_exact
        )
        return fn

    return deco


def store(name, writer, zarr_readable=True, zarr_bits_exact=True):
    """Register a store that lsio supports."""
    return _register(SPECS, name, writer, zarr_readable, zarr_bits_exact)


def unsupported(name, writer, words, zarr_readable=True):
    """Register a store that lsio must refuse with UnsupportedError."""
    UNSUPPORTED_FEATURE_WORDS[name] = tuple(words)
    return _register(UNSUPPORTED_SPECS, name, writer, zarr_readable)


def rng_for(name: str) -> np.random.Generator:
    """A deterministic random generator per store name."""
    return np.random.default_rng(zlib.crc32(name.encode()))


# --------------------------------------------------------------------------
# Writers
# --------------------------------------------------------------------------


def zmake(path: Path, data: np.ndarray, region=..., fill=None, **kw):
    """Write ``data[region]`` with zarr-python; return the expected array.

    ``data`` must be in native byte order; elements outside ``region`` are
    expected to read as the fill value (``fill``, or the writer default).
    """
    if fill is not None:
        kw["fill_value"] = fill
    a = zarr.create_array(
        str(path), shape=data.shape, dtype=data.dtype, overwrite=True, **kw
    )
    a[region] = data[region]
    expected = np.array(data, copy=True)
    if region is not ...:
        keep = np.zeros(data.shape, bool)
        keep[region] = True
        fv = fill if fill is not None else np.zeros((), data.dtype)[()]
        expected[~keep] = np.asarray(fv, dtype=data.dtype)
    return expected


LE = {"name": "bytes", "configuration": {"endian": "little"}}
BE = {"name": "bytes", "configuration": {"endian": "big"}}
RAW = {"name": "bytes"}  # 1-byte types need no endian
CRC = {"name": "crc32c"}
ZSTD = {"name": "zstd", "configuration": {"level": 3}}
ZSTD_CK = {"name": "zstd", "configuration": {"level": 3, "checksum": True}}
GZIP = {"name": "gzip", "configuration": {"level": 6}}


def transpose(order):
    return {"name": "transpose", "configuration": {"order": list(order)}}


def shard(inner, codecs, index_codecs=(LE, CRC), location="end"):
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(inner),
            "codecs": list(codecs),
            "index_codecs": list(index_codecs),
            "index_location": location,
        },
    }


def meta(dtype, fill, chunk, codecs, shape, **extra):
    return {
        "shape": list(shape),
        "data_type": dtype,
        "fill_value": fill,
        "chunk_grid": {
            "name": "regular",
            "configuration": {"chunk_shape": list(chunk)},
        },
        "chunk_key_encoding": {"name": "default"},
        "codecs": codecs,
        **extra,
    }


def tsmake(path: Path, metadata, expected: np.ndarray, region=...):
    """Write ``expected[region]`` with TensorStore; return ``expected``.

    ``expected`` must already hold the fill value outside ``region``;
    ``region=None`` writes nothing.
    """
    t = ts.open(
        {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": str(path) + "/"},
            "metadata": metadata,
        },
        create=True,
        delete_existing=True,
    ).result()
    if region is not None:
        t[region] = expected[region]
    return expected


def fill_json(x):
    """Python / numpy fill value -> Zarr v3 ``fill_value`` JSON."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (complex, np.complexfloating)):
        return [fill_json(float(x.real)), fill_json(float(x.imag))]
    x = float(x)
    if np.isnan(x):
        return "NaN"
    if x == np.inf:
        return "Infinity"
    if x == -np.inf:
        return "-Infinity"
    return x


def edit_metadata(path: Path, fn) -> None:
    """Rewrite ``path/zarr.json`` through ``fn(dict) -> dict``."""
    p = Path(path) / "zarr.json"
    doc = json.loads(p.read_text())
    p.write_text(json.dumps(fn(doc)))


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------

NUMERIC = [
    "bool", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
]
SPECIAL_FILL = {
    "bool": True,
    "float16": float("-inf"),
    "float32": float("nan"),
    "float64": float("inf"),
    "complex64": complex(float("nan"), 1.0),
    "complex128": complex(-0.0, float("-inf")),
}
# NaNs with a payload and a sign bit, stored as chunk data (not as fills):
# readers must copy the bits through untouched.
PAYLOAD_NAN_BITS = {
    "float16": 0xFE01,
    "float32": 0xFFC00123,
    "float64": 0x7FF800000000ABCD,
}
UINT_OF = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def special_fill(dt):
    """uint max / int min exercise exact 64-bit fill parsing."""
    k = np.dtype(dt).kind
    if k == "u":
        return np.iinfo(dt).max
    if k == "i":
        return np.iinfo(dt).min
    return SPECIAL_FILL[dt]


def payload_nan(dt) -> np.ndarray:
    """A 0-d float array holding the payload NaN of ``dt``."""
    bits = PAYLOAD_NAN_BITS[dt]
    size = np.dtype(dt).itemsize
    return np.array(bits, UINT_OF[size]).view(dt)


def sample(dt, shape, rng):
    """Random values of ``dt``, with the full range and float specials."""
    dt = np.dtype(dt)
    k = dt.kind
    if k == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if k in "iu":
        i = np.iinfo(dt)
        return rng.integers(i.min, i.max, shape, dtype=dt, endpoint=True)
    v = rng.standard_normal(shape)
    if k == "c":
        v = v + 1j * rng.standard_normal(shape)
    v = v.astype(dt)
    flat = v.reshape(-1)
    if flat.size >= 6:
        flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
        if k == "f":
            flat[4:5] = payload_nan(dt.name).reshape(1)
        else:
            part = np.float32 if dt == np.complex64 else np.float64
            flat[4:5].view(part)[0] = payload_nan(np.dtype(part).name)[()]
            flat[5] = complex(-0.0, float("nan"))
    return v


def arange(shape, dtype):
    n = int(np.prod(shape))
    return (np.arange(n) % np.iinfo(np.int32).max).astype(dtype).reshape(shape)


D100 = np.arange(100 * 100, dtype="uint16").reshape(100, 100)
SP100 = np.arange(1, 100 * 100 + 1, dtype="uint16").reshape(100, 100)

# --------------------------------------------------------------------------
# zarr-python stores
# --------------------------------------------------------------------------


@store("z_plain", "zarr-python")
def _(p):  # bytes little + zstd level 0, padded border chunks
    return zmake(p, D100, chunks=(32, 32))


@store("z_gzip_v2dot", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(30, 30), compressors=GzipCodec(level=1),
        chunk_key_encoding={"name": "v2", "separator": "."},
    )


@store("z_nocomp_v2slash", "zarr-python")
def _(p):
    d = sample("int32", (50, 70), rng_for("z_nocomp_v2slash"))
    return zmake(
        p, d, chunks=(16, 16), compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )


@store("z_crc_defaultdot", "zarr-python")
def _(p):
    d = sample("float32", (50, 70), rng_for("z_crc_defaultdot"))
    return zmake(
        p, d, chunks=(16, 32), compressors=[Crc32cCodec()],
        chunk_key_encoding={"name": "default", "separator": "."},
    )


@store("z_zstd_checksum", "zarr-python")
def _(p):
    d = sample("int64", (60, 45), rng_for("z_zstd_checksum"))
    return zmake(
        p, d, chunks=(16, 16), compressors=ZstdCodec(level=5, checksum=True),
    )


@store("z_0d", "zarr-python")
def _(p):  # chunk key "c"
    return zmake(p, np.array(42, dtype="int32"))


@store("z_0d_fill", "zarr-python")
def _(p):  # nothing written: the single chunk is missing
    return zmake(p, np.array(-3.5, dtype="float64"), region=(), fill=-3.5)


@store("z_1d", "zarr-python")
def _(p):
    d = sample("float64", (1000,), rng_for("z_1d"))
    return zmake(p, d, chunks=(64,))


@store("z_1d_shard", "zarr-python")
def _(p):
    d = sample("uint8", (1000,), rng_for("z_1d_shard"))
    return zmake(p, d, region=np.s_[:700], fill=5, chunks=(32,), shards=(256,))


@store("z_3d_shard_start", "zarr-python")
def _(p):
    d = arange((20, 30, 17), "int16")
    return zmake(
        p, d, region=np.s_[:, :20, 3:], fill=-7, chunks=(4, 8, 5),
        shards={"shape": (8, 16, 10), "index_location": "start"},
    )


@store("z_4d_shard", "zarr-python")
def _(p):
    d = sample("uint32", (5, 6, 7, 9), rng_for("z_4d_shard"))
    return zmake(
        p, d, region=np.s_[:4, :, :, :8], chunks=(2, 3, 4, 4),
        shards=(4, 6, 4, 8), dimension_names=["t", "z", "y", None],
        attributes={"a": [1, 2], "b": {"c": "d"}, "unit": "um"},
    )


@store("z_4d", "zarr-python")
def _(p):
    d = sample("float32", (5, 6, 7, 9), rng_for("z_4d"))
    return zmake(
        p, d, chunks=(2, 4, 3, 5), dimension_names=["t", "z", "y", "x"]
    )


@store("z_shard_zstd_end", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(10, 10), shards=(50, 50), fill=7,
        compressors=ZstdCodec(level=3, checksum=True),
        dimension_names=["y", "x"], attributes={"k": 1},
    )


@store("z_shard_zstd_start", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(10, 10), compressors=ZstdCodec(level=3),
        shards={"shape": (50, 50), "index_location": "start"},
    )


@store("z_be", "zarr-python")
def _(p):
    d = sample("int32", (50, 70), rng_for("z_be"))
    return zmake(p, d, chunks=(16, 16), serializer=BytesCodec(endian="big"))


@store("z_be_f64_nan_sparse", "zarr-python")
def _(p):
    d = sample("float64", (40, 33), rng_for("z_be_f64_nan_sparse"))
    return zmake(
        p, d, region=np.s_[3:17, 5:20], fill=float("nan"), chunks=(8, 8),
        serializer=BytesCodec(endian="big"),
    )


@store("z_shard_be_crc", "zarr-python")
def _(p):  # inner [bytes big, crc32c]
    return zmake(
        p, D100, chunks=(10, 10), shards=(50, 50),
        serializer=BytesCodec(endian="big"), compressors=[Crc32cCodec()],
    )


@store("z_shard_index_be_nocrc_start", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(50, 50), compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(10, 10), codecs=[BytesCodec(), ZstdCodec(level=1)],
            index_codecs=[BytesCodec(endian="big")], index_location="start",
        ),
    )


@store("z_shard_index_nocrc_end", "zarr-python")
def _(p):
    d = sample("float32", (45, 60), rng_for("z_shard_index_nocrc_end"))
    return zmake(
        p, d, region=np.s_[:30, 10:], fill=float("-inf"), chunks=(20, 20),
        compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(5, 10), codecs=[BytesCodec(), ZstdCodec(level=1)],
            index_codecs=[BytesCodec()], index_location="end",
        ),
    )


@store("z_shard_transpose_inside", "zarr-python")
def _(p):  # codecs = [sharding_indexed[transpose, bytes, zstd]]
    return zmake(
        p, arange((60, 100), "uint16"), chunks=(10, 20), shards=(30, 100),
        filters=[TransposeCodec(order=(1, 0))],
    )


@store("z_shard_transpose_3d_inside_crc", "zarr-python")
def _(p):
    d = sample("float64", (12, 10, 9), rng_for("z_shard_transpose_3d"))
    return zmake(
        p, d, region=np.s_[:8], fill=float("nan"), chunks=(2, 5, 3),
        shards=(4, 10, 6), filters=[TransposeCodec(order=(1, 2, 0))],
        compressors=[Crc32cCodec()],
    )


@store("z_transpose_3d", "zarr-python")
def _(p):
    d = arange((20, 30, 17), "int16")
    return zmake(
        p, d, chunks=(8, 16, 10), filters=[TransposeCodec(order=(2, 0, 1))],
    )


@store("z_shard_sparse", "zarr-python")
def _(p):
    # rows 5-14 x cols 60-69: 2 inner chunks of shard (0,1); 3 shards absent
    return zmake(
        p, SP100, region=np.s_[5:15, 60:70], chunks=(10, 10), shards=(50, 50),
    )


@store("z_shard_sparse_start_nan", "zarr-python")
def _(p):
    return zmake(
        p, SP100.astype("float32"), region=np.s_[5:15, 60:70],
        fill=float("nan"), chunks=(10, 10),
        shards={"shape": (50, 50), "index_location": "start"},
    )


@store("z_plain_sparse", "zarr-python")
def _(p):
    return zmake(
        p, SP100.astype("int16"), region=np.s_[0:10, 0:10], fill=-1,
        chunks=(32, 32),
    )


@store("z_shard_write_empty", "zarr-python")
def _(p):
    return zmake(
        p, np.zeros((40, 40), "uint8"), chunks=(10, 10), shards=(20, 20),
        config={"write_empty_chunks": True},
    )


@store("z_shard_nocomp", "zarr-python")
def _(p):  # inner chain is [bytes] only: the direct read path
    d = sample("float32", (100, 100), rng_for("z_shard_nocomp"))
    return zmake(p, d, chunks=(10, 25), shards=(50, 50), compressors=None)


@store("z_shard_gzip_inner", "zarr-python")
def _(p):
    d = sample("int16", (33, 47), rng_for("z_shard_gzip_inner"))
    return zmake(
        p, d, chunks=(8, 8), shards=(16, 24), compressors=GzipCodec(level=4),
        chunk_key_encoding={"name": "default", "separator": "."},
    )


@store("z_shard_v2keys", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(10, 10), shards=(50, 50),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )


@store("z_example_6_9", "zarr-python")
def _(p):  # zarr-format.md section 6.9 (a): inner chunk (1,1) not stored
    x = np.arange(16, dtype="uint16").reshape(4, 4)
    x[2:, 2:] = 0
    return zmake(p, x, chunks=(2, 2), shards=(4, 4), compressors=None)


for _dt in NUMERIC:
    # 37x23 with 16x8 chunks: partial border chunks; only [:20, :16] written.
    def _dtype_builder(sharded, dt=_dt):
        def build(p):
            rng = rng_for(f"dtype-{dt}")
            v, f = sample(dt, (37, 23), rng), special_fill(dt)
            if sharded:
                kw = dict(chunks=(8, 4), shards=(16, 8))
            else:
                kw = dict(chunks=(16, 8))
            return zmake(p, v, region=np.s_[:20, :16], fill=f, **kw)

        return build

    store(f"z_dtype_{_dt}", "zarr-python")(_dtype_builder(False))
    store(f"z_dtype_{_dt}_shard", "zarr-python")(_dtype_builder(True))


# --------------------------------------------------------------------------
# v3 blosc (c-blosc 1.x frames, written by zarr-python 3 through numcodecs)
# --------------------------------------------------------------------------


@store("z_blosc", "zarr-python")
def _(p):  # zarr-python's BloscCodec() defaults: zstd, clevel 5, shuffle from the dtype
    return zmake(p, D100, chunks=(32, 32), compressors=BloscCodec())


@store("z_shard_blosc_inner", "zarr-python")
def _(p):
    return zmake(
        p, D100, chunks=(10, 20), shards=(50, 100),
        compressors=BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"),
    )


BLOSC_CNAMES = ["lz4", "lz4hc", "blosclz", "zstd", "zlib"]
BLOSC_SHUFFLES = ["noshuffle", "shuffle", "bitshuffle"]
BLOSC_DTYPES = ["uint8", "int16", "float32", "float64", "complex128",
                "uint64", "bool", "int32"]


def _blosc_data(dt, shape, rng):
    """Half random values (incompressible: c-blosc stores those blocks raw),
    half smooth ones (compressed, and shuffled when asked)."""
    v = sample(dt, shape, rng)
    smooth = arange(shape, "int64") // 7
    half = shape[0] // 2
    v[half:] = smooth[half:].astype(dt) if np.dtype(dt).kind != "b" else (smooth[half:] % 3 == 0)
    return v


# Every cname x shuffle, once each; dtype (typesize 1 to 16), sharding, a
# crc32c after blosc, an explicit typesize other than the itemsize and a
# forced small blocksize (many blocks per chunk) rotate over the 15 cases.
for _i, (_cname, _shuffle) in enumerate(
        (c, s) for c in BLOSC_CNAMES for s in BLOSC_SHUFFLES):
    def _blosc_builder(i=_i, cname=_cname, shuffle=_shuffle):
        dt = BLOSC_DTYPES[i % len(BLOSC_DTYPES)]
        sharded, crc = i % 2 == 1, i % 3 == 2
        name = f"z_blosc_{cname}_{shuffle}"

        def build(p):
            opts = dict(cname=cname, clevel=1 + i % 9, shuffle=shuffle)
            if i % 5 == 4:
                opts["typesize"] = 4  # not the itemsize: only the shuffle changes
            if i % 4 == 3:
                opts["blocksize"] = 256
            compressors = [BloscCodec(**opts)] + ([Crc32cCodec()] if crc else [])
            v = _blosc_data(dt, (37, 50), rng_for(name))
            kw = (dict(chunks=(8, 12), shards=(16, 24)) if sharded
                  else dict(chunks=(16, 24)))
            # [:30, :40] written: missing chunks (and inner chunks) read as fill.
            return zmake(p, v, region=np.s_[:30, :40], compressors=compressors, **kw)

        return name, build

    _n, _b = _blosc_builder()
    store(_n, "zarr-python")(_b)


# --------------------------------------------------------------------------
# TensorStore stores
# --------------------------------------------------------------------------


@store("ts_plain", "tensorstore")
def _(p):
    return tsmake(p, meta("uint16", 0, (32, 32), [LE, ZSTD], (100, 100)), D100)


@store("ts_gzip_dotsep_nan", "tensorstore")
def _(p):
    e = np.full((100, 100), np.nan, np.float32)
    e[:70, 10:90] = D100[:70, 10:90]
    return tsmake(
        p,
        meta(
            "float32", "NaN", (32, 32), [LE, GZIP], (100, 100),
            chunk_key_encoding={
                "name": "default", "configuration": {"separator": "."},
            },
            dimension_names=["y", "x"],
        ),
        e, np.s_[:70, 10:90],
    )


@store("ts_shard_zstd_end", "tensorstore")
def _(p):  # index_location "end" is omitted from zarr.json
    return tsmake(
        p,
        meta("uint16", 0, (50, 50), [shard((10, 10), [LE, ZSTD])], (100, 100)),
        D100,
    )


@store("ts_shard_zstd_start", "tensorstore")
def _(p):
    return tsmake(
        p,
        meta(
            "uint16", 0, (50, 50),
            [shard((10, 10), [LE, ZSTD], location="start")], (100, 100),
        ),
        D100,
    )


@store("ts_shard_be_crc", "tensorstore")
def _(p):
    return tsmake(
        p,
        meta("uint16", 0, (50, 50), [shard((10, 10), [BE, CRC])], (100, 100)),
        D100,
    )


@store("ts_shard_nocrc_start", "tensorstore")
def _(p):
    d = sample("int32", (70, 90), rng_for("ts_shard_nocrc_start"))
    return tsmake(
        p,
        meta(
            "int32", 0, (32, 32),
            [shard((8, 16), [LE, ZSTD], index_codecs=[LE], location="start")],
            (70, 90),
        ),
        d,
    )


@store("ts_shard_index_be_crc_start", "tensorstore")
def _(p):  # big-endian index with crc32c, at the start
    d = sample("float32", (30, 40), rng_for("ts_shard_index_be_crc_start"))
    e = np.full(d.shape, np.float32(0.5))
    e[5:, :33] = d[5:, :33]
    return tsmake(
        p,
        meta(
            "float32", 0.5, (10, 20),
            [shard((5, 5), [LE, ZSTD], index_codecs=[BE, CRC],
                   location="start")],
            (30, 40),
        ),
        e, np.s_[5:, :33],
    )


@store("ts_shard_transpose_inside", "tensorstore")
def _(p):  # inner [transpose, bytes big, crc32c]; index without crc32c
    return tsmake(
        p,
        meta(
            "uint16", 0, (50, 50),
            [shard((10, 10), [transpose((1, 0)), BE, CRC], index_codecs=[LE])],
            (100, 100),
        ),
        D100,
    )


@store("ts_transpose_zstd_checksum", "tensorstore")
def _(p):
    d = sample("float64", (30, 41), rng_for("ts_transpose_zstd_checksum"))
    return tsmake(
        p,
        meta(
            "float64", 0.0, (8, 16), [transpose((1, 0)), LE, ZSTD_CK], (30, 41)
        ),
        d,
    )


@store("ts_shard_sparse", "tensorstore")
def _(p):
    e = np.zeros((100, 100), np.uint16)
    e[5:15, 60:70] = SP100[5:15, 60:70]
    return tsmake(
        p,
        meta("uint16", 0, (50, 50), [shard((10, 10), [LE, ZSTD])], (100, 100)),
        e, np.s_[5:15, 60:70],
    )


@store("ts_fill_hex_nan", "tensorstore")
def _(p):  # negative float32 NaN with a payload; bits kept in the expectation
    e = np.full((64, 64), np.array(0xFFC00001, np.uint32).view(np.float32))
    e[:16, :16] = 1.5
    return tsmake(
        p, meta("float32", "0xffc00001", (16, 16), [LE], (64, 64)),
        e, np.s_[:16, :16],
    )


@store("ts_fill_hex_nan_f64_shard", "tensorstore")
def _(p):
    e = np.full(
        (30, 20), np.array(0xFFF8000000000123, np.uint64).view(np.float64)
    )
    e[:10, :7] = np.arange(70).reshape(10, 7)
    return tsmake(
        p,
        meta(
            "float64", "0xfff8000000000123", (10, 10),
            [shard((5, 5), [LE, ZSTD])], (30, 20),
        ),
        e, np.s_[:10, :7],
    )


@store("ts_fill_hex_f16", "tensorstore", zarr_bits_exact=False)
def _(p):  # zarr-python 3.1.6 reads the fill 0x7e01 as the canonical NaN
    e = np.full((20, 20), np.array(0x7E01, np.uint16).view(np.float16))
    e[3:9, 2:5] = -2.0
    return tsmake(
        p, meta("float16", "0x7e01", (8, 8), [LE, ZSTD], (20, 20)),
        e, np.s_[3:9, 2:5],
    )


@store("ts_fill_neg_zero", "tensorstore")
def _(p):
    e = np.full((20, 30), -0.0, np.float32)
    e[:5, :5] = 3.0
    return tsmake(
        p, meta("float32", -0.0, (8, 8), [LE], (20, 30)), e, np.s_[:5, :5]
    )


@store("ts_auto_shard", "tensorstore")
def _(p):  # sharding chosen by TensorStore from the chunk layout
    t = ts.open(
        {
            "driver": "zarr3",
            "kvstore": {"driver": "file", "path": str(p) + "/"},
        },
        create=True, delete_existing=True, dtype=ts.uint16, shape=[100, 100],
        chunk_layout=ts.ChunkLayout(
            read_chunk_shape=[10, 10], write_chunk_shape=[50, 50]
        ),
    ).result()
    t[...] = D100
    return D100.copy()


@store("ts_0d", "tensorstore")
def _(p):
    return tsmake(p, meta("int32", 5, (), [LE], ()), np.array(9, "int32"))


@store("ts_0d_shard", "tensorstore")
def _(p):
    return tsmake(
        p, meta("int32", 5, (), [shard((), [LE])], ()), np.array(-9, "int32")
    )


@store("ts_0d_missing", "tensorstore")
def _(p):  # nothing written: the single chunk is missing, reads as fill
    tsmake(p, meta("uint64", 2**64 - 2, (), [LE], ()), None, region=None)
    return np.array(2**64 - 2, "uint64")


@store("ts_v2keys_dot", "tensorstore")
def _(p):
    return tsmake(
        p,
        meta(
            "uint16", 0, (32, 32), [LE, ZSTD], (100, 100),
            chunk_key_encoding={"name": "v2"},
        ),
        D100,
    )


@store("ts_v2keys_slash_shard", "tensorstore")
def _(p):
    return tsmake(
        p,
        meta(
            "uint16", 0, (50, 50), [shard((10, 10), [LE, ZSTD])], (100, 100),
            chunk_key_encoding={
                "name": "v2", "configuration": {"separator": "/"},
            },
        ),
        D100,
    )


@store("ts_1d_shard", "tensorstore")
def _(p):
    d = sample("int64", (777,), rng_for("ts_1d_shard"))
    e = np.full(d.shape, -1, np.int64)
    e[100:500] = d[100:500]
    return tsmake(
        p, meta("int64", -1, (128,), [shard((16,), [LE, ZSTD])], (777,)),
        e, np.s_[100:500],
    )


@store("ts_3d", "tensorstore")
def _(p):
    d = sample("float32", (9, 20, 31), rng_for("ts_3d"))
    return tsmake(
        p, meta("float32", 0.0, (4, 8, 8), [LE, GZIP], (9, 20, 31)), d
    )


@store("ts_4d_shard", "tensorstore")
def _(p):
    d = sample("uint16", (4, 7, 10, 13), rng_for("ts_4d_shard"))
    e = np.full(d.shape, 65535, np.uint16)
    e[1:, :5] = d[1:, :5]
    return tsmake(
        p,
        meta(
            "uint16", 65535, (2, 4, 6, 8),
            [shard((1, 2, 3, 4), [LE, ZSTD], location="start")],
            (4, 7, 10, 13),
            dimension_names=["c", "z", "y", "x"],
        ),
        e, np.s_[1:, :5],
    )


for _dt in NUMERIC:
    def _ts_dtype_builder(sharded, dt=_dt):
        def build(p):
            rng = rng_for(f"dtype-{dt}")
            v, f = sample(dt, (37, 23), rng), special_fill(dt)
            e = np.full(v.shape, f, dt)
            region = np.s_[:20, :16]
            e[region] = v[region]
            one = RAW if np.dtype(dt).itemsize == 1 else LE
            if sharded:
                codecs = [shard((8, 4), [one, ZSTD])]
                chunk = (16, 8)
            else:
                codecs = [one, ZSTD]
                chunk = (16, 8)
            return tsmake(
                p, meta(dt, fill_json(f), chunk, codecs, v.shape), e, region
            )

        return build

    store(f"ts_dtype_{_dt}", "tensorstore")(_ts_dtype_builder(False))
    store(f"ts_dtype_{_dt}_shard", "tensorstore")(_ts_dtype_builder(True))


# --------------------------------------------------------------------------
# Hand-edited zarr.json spellings that a v3 reader must accept
# --------------------------------------------------------------------------


@store("hand_shorthand_crc32c", "hand-edited", zarr_readable=False)
def _(p):  # spec 3.1 short-hand: "crc32c" as a bare string
    d = sample("uint16", (40, 50), rng_for("hand_shorthand_crc32c"))
    e = tsmake(p, meta("uint16", 0, (16, 16), [LE, CRC], (40, 50)), d)
    edit_metadata(p, lambda m: {**m, "codecs": [LE, "crc32c"]})
    return e


@store("hand_transpose_order_F", "hand-edited", zarr_readable=False)
def _(p):  # transpose order "F" = reversed axes
    d = arange((6, 8, 5), "int16")
    e = zmake(
        p, d, chunks=(4, 4, 4), filters=[TransposeCodec(order=(2, 1, 0))]
    )

    def fix(m):
        m["codecs"][0]["configuration"]["order"] = "F"
        return m

    edit_metadata(p, fix)
    return e


@store("hand_endian_alias", "hand-edited", zarr_readable=False)
def _(p):  # ZEP1-draft name "endian" for the bytes codec
    d = sample("int32", (20, 30), rng_for("hand_endian_alias"))
    e = zmake(p, d, chunks=(8, 8), serializer=BytesCodec(endian="big"))

    def fix(m):
        m["codecs"][0]["name"] = "endian"
        return m

    edit_metadata(p, fix)
    return e


@store("hand_no_index_location", "hand-edited")
def _(p):  # absent index_location means "end"
    e = zmake(p, D100, chunks=(10, 10), shards=(50, 50))

    def fix(m):
        del m["codecs"][0]["configuration"]["index_location"]
        return m

    edit_metadata(p, fix)
    return e


@store("hand_must_understand_false", "hand-edited")
def _(p):  # unknown extension key that may be ignored
    e = zmake(p, D100[:40, :30].copy(), chunks=(16, 16))
    edit_metadata(
        p, lambda m: {**m, "my_extension": {"must_understand": False, "x": 1}}
    )
    return e


@store("hand_integral_float_fill", "hand-edited")
def _(p):  # fill_value 7.0 for an integer dtype (zarr-python >= 3.1.3 too)
    d = arange((20, 30), "int32")
    e = zmake(p, d, region=np.s_[:8, :8], fill=7, chunks=(8, 8))
    edit_metadata(p, lambda m: {**m, "fill_value": 7.0})
    return e


# zstd frame variants (zarr-format.md section 5.2): frames without a content
# size (older TensorStore streamed them) and several concatenated frames.


def zstd_frame_without_content_size(data: bytes) -> bytes:
    """A valid zstd frame of raw blocks whose header has no content size."""
    out = bytearray(b"\x28\xb5\x2f\xfd")
    out += bytes([0x00, 0x38])  # no FCS, not single-segment; window 2**17
    block = 1 << 17
    pieces = [data[i:i + block] for i in range(0, len(data), block)] or [b""]
    for i, piece in enumerate(pieces):
        last = 1 if i == len(pieces) - 1 else 0
        out += ((len(piece) << 3) | last).to_bytes(3, "little")  # raw block
        out += piece
    return bytes(out)


def zstd_concatenated_frames(data: bytes) -> bytes:
    """Three ordinary zstd frames, each holding a third of ``data``."""
    import numcodecs

    z = numcodecs.Zstd(level=1)
    k = len(data) // 3
    return b"".join(
        bytes(z.encode(part))
        for part in (data[:k], data[k:2 * k], data[2 * k:])
    )


def _frame_variant(i: int, raw: bytes) -> bytes:
    import numcodecs

    kind = i % 3
    if kind == 0:
        return zstd_frame_without_content_size(raw)
    if kind == 1:
        return zstd_concatenated_frames(raw)
    return bytes(numcodecs.Zstd(level=3).encode(raw))


@store("hand_zstd_frame_variants", "hand-edited")
def _(p):
    import numcodecs

    d = sample("float32", (40, 50), rng_for("hand_zstd_frame_variants"))
    e = zmake(p, d, chunks=(16, 16))
    files = sorted(f for f in (p / "c").rglob("*") if f.is_file())
    for i, f in enumerate(files):
        raw = bytes(numcodecs.Zstd().decode(f.read_bytes()))
        f.write_bytes(_frame_variant(i, raw))
    return e


@store("hand_shard_zstd_frame_variants", "hand-edited")
def _(p):
    """Shards rebuilt with unusual zstd frames, index at the end + crc32c."""
    import numcodecs

    d = sample("int16", (40, 60), rng_for("hand_shard_zstd_frame_variants"))
    e = zmake(p, d, region=np.s_[:35, :], fill=-5, chunks=(8, 10),
              shards=(16, 30))
    n = (16 // 8) * (30 // 10)
    files = sorted(f for f in (p / "c").rglob("*") if f.is_file())
    k = 0
    for f in files:
        idx = shard_index(f, n, "end")
        blob = f.read_bytes()
        body = bytearray()
        entries = np.full((n, 2), 2**64 - 1, "<u8")
        for j in range(n):
            off, nb = (int(x) for x in idx[j])
            if nb == 2**64 - 1:
                continue
            raw = bytes(numcodecs.Zstd().decode(blob[off:off + nb]))
            enc = _frame_variant(k, raw)
            k += 1
            entries[j] = (len(body), len(enc))
            body += enc
        index = entries.tobytes()
        crc = crc32c(index).to_bytes(4, "little")
        f.write_bytes(bytes(body) + index + crc)
    return e


def relayout_shards(path: Path, n: int, location: str, crc: bool,
                    seed: int) -> None:
    """Rewrite every shard of a zarr-python store (index at the end with
    crc32c) with its inner chunks in reverse index order, separated by
    random garbage gaps, and the index at ``location`` (with or without
    crc32c).  The spec allows any order and gaps: readers must use the
    index only."""
    rng = np.random.default_rng(seed)
    index_size = 16 * n + (4 if crc else 0)
    for f in sorted(x for x in (Path(path) / "c").rglob("*") if x.is_file()):
        idx = shard_index(f, n, "end")
        blob = f.read_bytes()
        base = index_size if location == "start" else 0
        body = bytearray(rng.integers(0, 256, 7, np.uint8).tobytes())
        entries = np.full((n, 2), 2**64 - 1, "<u8")
        for j in reversed(range(n)):
            off, nb = (int(x) for x in idx[j])
            if nb == 2**64 - 1:
                continue
            entries[j] = (base + len(body), nb)
            body += blob[off:off + nb]
            gap = int(rng.integers(0, 40))
            body += rng.integers(0, 256, gap, np.uint8).tobytes()
        index = entries.tobytes()
        if crc:
            index += crc32c(index).to_bytes(4, "little")
        if location == "start":
            f.write_bytes(index + bytes(body))
        else:
            f.write_bytes(bytes(body) + index)


def _relayout_meta(location: str, crc: bool):
    def fix(m):
        cfg = m["codecs"][0]["configuration"]
        cfg["index_location"] = location
        if not crc:
            cfg["index_codecs"] = [LE]
        return m

    return fix


@store("hand_shard_reversed_gaps_end", "hand-edited")
def _(p):
    d = sample("uint32", (50, 44), rng_for("hand_shard_reversed_gaps_end"))
    e = zmake(p, d, region=np.s_[:, :40], fill=9, chunks=(5, 4),
              shards=(25, 16))
    relayout_shards(p, 5 * 4, "end", True, 1)
    return e


@store("hand_shard_reversed_gaps_start_nocomp", "hand-edited")
def _(p):  # uncompressed inner chunks: candidates for reads straight into out
    d = sample("float64", (40, 40), rng_for("hand_shard_reversed_gaps_start"))
    e = zmake(p, d, chunks=(10, 10), shards=(20, 40), compressors=None)
    relayout_shards(p, 2 * 4, "start", False, 2)
    edit_metadata(p, _relayout_meta("start", False))
    return e


@store("z_shard_be_complex64_transpose", "zarr-python")
def _(p):  # byte swapping complex64 swaps each float32 half
    d = sample("complex64", (18, 20), rng_for("z_shard_be_complex64"))
    return zmake(
        p, d, region=np.s_[2:, :15], fill=complex(1.5, -2.0), chunks=(3, 5),
        shards=(6, 10), filters=[TransposeCodec(order=(1, 0))],
        serializer=BytesCodec(endian="big"),
    )


@store("z_be_complex128_crc", "zarr-python")
def _(p):
    d = sample("complex128", (14, 9), rng_for("z_be_complex128"))
    return zmake(p, d, chunks=(4, 4), serializer=BytesCodec(endian="big"),
                 compressors=[Crc32cCodec()])


@store("z_be_float16_shard", "zarr-python")
def _(p):
    d = sample("float16", (33, 17), rng_for("z_be_float16_shard"))
    return zmake(p, d, region=np.s_[:30], fill=float("-inf"), chunks=(4, 4),
                 shards=(8, 8), serializer=BytesCodec(endian="big"))


@store("z_attrs_special", "zarr-python")
def _(p):  # zarr-python writes bare NaN / Infinity tokens in attributes
    return zmake(
        p, arange((6, 5), "float32"), chunks=(4, 4),
        attributes={
            "nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"),
            "text": "h\u00e9llo \u2713", "none": None, "big": 2**63 + 5,
            "neg": -(2**63), "float": 0.1, "int_like_float": 2.0,
            "nested": {"list": [1, "two", 3.5, [None, True]], "empty": {}},
            "NaN_string": "NaN",
        },
        dimension_names=["row", None],
    )


def _hand_fill_store(p, dtype, fill_json_value, fill_scalar, sharded=False):
    """Whole chunks written, the rest missing; then the fill is re-spelled.

    Only chunks that are entirely missing take the fill value, so the
    re-spelled fill is the only source of those elements' bits.
    """
    d = sample(dtype, (20, 20), rng_for(f"hand-fill-{dtype}"))
    kw = dict(chunks=(5, 5))
    if sharded:
        kw["shards"] = (10, 10)
    region = np.s_[:10, :5]
    zmake(p, d, region=region, fill=0, **kw)
    edit_metadata(p, lambda m: {**m, "fill_value": fill_json_value})
    e = np.empty(d.shape, d.dtype)
    e[...] = fill_scalar
    e[region] = d[region]
    return e


@store("hand_fill_hex_short", "hand-edited", zarr_readable=False)
def _(p):  # "0x1": fewer hex digits than the type width (a float32 denormal)
    return _hand_fill_store(
        p, "float32", "0x1", np.array(1, np.uint32).view(np.float32)[()]
    )


@store("hand_fill_hex_complex_shard", "hand-edited")
def _(p):  # hex NaN with payload inside a complex fill, sharded
    re = np.array(0x7FC00001, np.uint32).view(np.float32)[()]
    fill = np.zeros((), np.complex64)
    fill.reshape(1).view(np.float32)[:] = [re, -0.0]
    return _hand_fill_store(
        p, "complex64", ["0x7fc00001", -0.0], fill[()], sharded=True
    )


@store("hand_fill_int_for_float", "hand-edited")
def _(p):  # an integer JSON number is a valid float fill
    return _hand_fill_store(p, "float64", 3, 3.0)


def _large(name, dtype="uint16"):
    """~2.6 MB of moderately compressible data (larger than a raw block,
    many inner chunks per shard, several shards, border shards)."""
    rng = rng_for(name)
    base = np.add.outer(np.arange(1200) * 7, np.arange(1100) * 3)
    noise = rng.integers(0, 64, base.shape)
    return (base + noise).astype(dtype)


@store("z_large_shard", "zarr-python")
def _(p):
    return zmake(p, _large("z_large_shard"), chunks=(64, 64),
                 shards=(512, 512), compressors=ZstdCodec(level=1))


@store("z_large_shard_raw_start", "zarr-python")
def _(p):  # uncompressed, index at the start: large direct reads
    d = _large("z_large_shard_raw_start", "int32")
    return zmake(p, d, region=np.s_[:, :1000], fill=-1, chunks=(100, 50),
                 shards={"shape": (400, 550), "index_location": "start"},
                 compressors=None)


@store("ts_large_shard", "tensorstore")
def _(p):
    d = _large("ts_large_shard")
    return tsmake(
        p,
        meta("uint16", 0, (256, 512), [shard((64, 128), [LE, ZSTD])],
             d.shape),
        d,
    )


@store("z_tiny_chunks_shard", "zarr-python")
def _(p):  # many 1x3 inner chunks; 2x6 shards; border shards padded
    d = sample("uint8", (13, 11), rng_for("z_tiny_chunks_shard"))
    return zmake(p, d, region=np.s_[1:12, 2:], fill=3, chunks=(1, 3),
                 shards=(2, 6))


@store("z_chunk_bigger_than_array", "zarr-python")
def _(p):
    d = sample("float64", (10, 7), rng_for("z_chunk_bigger_than_array"))
    return zmake(p, d, chunks=(64, 64))


@store("ts_shard_bigger_than_array", "tensorstore")
def _(p):
    d = sample("int16", (9, 13), rng_for("ts_shard_bigger_than_array"))
    return tsmake(
        p, meta("int16", 0, (16, 32), [shard((8, 8), [LE, ZSTD])], (9, 13)), d
    )


@store("z_empty_dim", "zarr-python")
def _(p):  # a length-0 dimension: no chunks at all
    return zmake(p, np.zeros((0, 10), "int32"), chunks=(4, 4))


@store("ts_empty_dim_shard", "tensorstore")
def _(p):
    return tsmake(
        p,
        meta("float32", 1.0, (4, 4), [shard((2, 2), [LE, ZSTD])], (6, 0)),
        np.ones((6, 0), "float32"), region=None,
    )


# --------------------------------------------------------------------------
# Unsupported stores (lsio must raise UnsupportedError naming the feature)
# --------------------------------------------------------------------------


@store("z_nested_shard", "zarr-python")
def _(p):  # 40x40 shards of 20x20 sub-shards of 10x10 chunks
    return zmake(
        p, D100, chunks=(40, 40), compressors=None,
        serializer=ShardingCodec(
            chunk_shape=(20, 20),
            codecs=[
                ShardingCodec(chunk_shape=(10, 10), index_location="start")
            ],
        ),
    )


@store("z_whole_shard_zstd", "zarr-python")
def _(p):  # codecs = [sharding_indexed, zstd]: each shard compressed whole; some shards missing
    return zmake(
        p, D100, region=(slice(0, 80), slice(10, 100)), fill=7, chunks=(40, 40),
        compressors=[ZstdCodec(level=1)],
        serializer=ShardingCodec(
            chunk_shape=(10, 10), codecs=[BytesCodec(), ZstdCodec(level=1)]
        ),
    )


@store("z_whole_shard_gzip_crc", "zarr-python")
def _(p):  # [sharding_indexed (index at the start), gzip, crc32c]
    return zmake(
        p, D100, chunks=(50, 20),
        compressors=[GzipCodec(level=1), Crc32cCodec()],
        serializer=ShardingCodec(
            chunk_shape=(25, 10), codecs=[BytesCodec()], index_location="start"
        ),
    )


@store("z_nested_shard_compressed", "zarr-python")
def _(p):  # nested (inner index at the end, outer at the start), shards compressed whole, a hole
    return zmake(
        p, D100, region=(slice(0, 100), slice(0, 60)), fill=3, chunks=(40, 40),
        compressors=[ZstdCodec(level=1)],
        serializer=ShardingCodec(
            chunk_shape=(20, 20), index_location="start",
            codecs=[ShardingCodec(chunk_shape=(10, 5), codecs=[BytesCodec(), ZstdCodec(level=1)])],
        ),
    )


@store("z_transpose_then_shard", "zarr-python")
def _(p):  # codecs = [transpose, sharding_indexed]
    return zmake(
        p, D100, chunks=(50, 50), compressors=None,
        filters=[TransposeCodec(order=(1, 0))],
        serializer=ShardingCodec(
            chunk_shape=(10, 10), codecs=[BytesCodec(), ZstdCodec(level=1)]
        ),
    )


@store("ts_transpose_then_shard", "tensorstore", zarr_readable=False)
def _(p):  # inner [25,10] divides only the transposed outer chunk [50,20]
    return tsmake(
        p,
        meta(
            "uint16", 0, (20, 50), [transpose((1, 0)), shard((25, 10), [LE])],
            (100, 100),
        ),
        D100,
    )


# Record (structured) types: zarr-python 3's "structured" data type, fields little-endian.
RECORD = np.dtype([("t", "<i8"), ("x", "<f4"), ("flag", "?"), ("name", "S3"),
                   ("u", "<U2"), ("z", "<c8"), ("h", "<f2")])


def records(shape, seed) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = np.zeros(shape, RECORD)
    a["t"] = rng.integers(-2**40, 2**40, shape)
    a["x"] = rng.standard_normal(shape).astype("<f4")
    a["flag"] = rng.integers(0, 2, shape).astype(bool)
    a["name"] = rng.choice(np.array([b"", b"a", b"bc", b"def"]), shape)
    a["u"] = rng.choice(np.array(["", "\u00e9", "\U0001f600x"]), shape)
    a["z"] = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype("<c8")
    a["h"] = rng.standard_normal(shape).astype("<f2")
    return a


@store("z_struct", "zarr-python")
def _(p):  # partial edge chunks, a written region (the rest reads as the record fill value)
    fill = np.array((7, 1.5, True, b"xy", "q", 2 - 1j, -0.5), RECORD)[()]
    return zmake(p, records((23, 19), 1), region=(slice(0, 17), slice(4, 19)), fill=fill,
                 chunks=(8, 6), compressors=[ZstdCodec(level=1)])


@store("z_struct_sharded", "zarr-python", zarr_readable=False)
def _(p):  # sharded, inner chunks missing; the default fill (numpy's cast of 0: "0" strings).
    # zarr-python 3.1.6 writes it but cannot read it back (reading a shard of records hashes
    # the fill value, which it made a writeable, unhashable record scalar): compared with the
    # data written.
    data = records((30, 20), 2)
    fill = np.array([0], RECORD)[0]  # numpy's cast of 0, zarr-python's default fill
    data[10:15, :] = fill  # a row of inner chunks equal to the fill: not stored
    data[25:30, 5:10] = fill
    # The fill value given as bytes: zarr-python 3.1.6's sharding caches chunk specs by a hash
    # of the fill value, and only read-only record scalars (made from bytes) are hashable.
    a = zarr.create_array(str(p), shape=data.shape, dtype=RECORD, chunks=(5, 5), shards=(10, 20),
                          compressors=[ZstdCodec(level=1)], fill_value=fill.tobytes(), overwrite=True)
    a[...] = data
    return data


@unsupported("z_string_sharded", "zarr-python", ["sharded variable-length strings"])
def _(p):  # variable-length strings are read (test_strings.py), but not from shards yet
    a = zarr.create_array(str(p), shape=(4,), dtype=str, chunks=(2,), shards=(4,))
    a[...] = ["a", "bb", "", "dddd"]
    return np.asarray(a[...])


@unsupported("hand_unknown_codec", "hand-edited", ["frobnicate"],
             zarr_readable=False)
def _(p):
    e = zmake(p, D100[:20, :20].copy(), chunks=(8, 8))
    edit_metadata(
        p,
        lambda m: {
            **m,
            "codecs": [LE, {"name": "frobnicate", "configuration": {"x": 1}}],
        },
    )
    return e


@unsupported("hand_rectilinear_grid", "hand-edited", ["rectilinear"],
             zarr_readable=False)
def _(p):
    e = zmake(p, D100[:20, :20].copy(), chunks=(10, 10))
    edit_metadata(
        p,
        lambda m: {
            **m,
            "chunk_grid": {
                "name": "rectilinear",
                "configuration": {
                    "kind": "inline", "chunk_shapes": [[10, 10], [5, 15]],
                },
            },
        },
    )
    return e


# --------------------------------------------------------------------------
# Store cache and reference helpers
# --------------------------------------------------------------------------


@dataclasses.dataclass
class BuiltStore:
    """A store on disk with its expected content."""

    spec: StoreSpec
    path: Path
    expected: np.ndarray
    _zarr_full: Optional[np.ndarray] = None
    _zarr_array: object = None
    _zarr_cache: dict = dataclasses.field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def zarr_readable(self) -> bool:
        return self.spec.zarr_readable

    def metadata(self) -> dict:
        return json.loads((self.path / "zarr.json").read_text())

    def zarr_array(self):
        if self._zarr_array is None:
            self._zarr_array = zarr.open_array(str(self.path), mode="r")
        return self._zarr_array

    def zarr_full(self) -> np.ndarray:
        """zarr-python's read of the whole array (native byte order)."""
        if self._zarr_full is None:
            self._zarr_full = native(np.asarray(self.zarr_array()[...]))
        return self._zarr_full

    def zarr_read(self, key) -> np.ndarray:
        """zarr-python's read of ``key`` (cached; non-negative steps only)."""
        ck = repr(key)
        if ck not in self._zarr_cache:
            self._zarr_cache[ck] = native(np.asarray(self.zarr_array()[key]))
        return self._zarr_cache[ck]


class StoreCache:
    """Builds stores on first use under one session directory."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._built: dict[str, BuiltStore] = {}

    def get(self, name: str) -> BuiltStore:
        if name not in self._built:
            spec = SPECS.get(name) or UNSUPPORTED_SPECS[name]
            path = self.root / f"{name}.zarr"
            self._built[name] = BuiltStore(spec, path, _build(spec, path))
        return self._built[name]

    def fresh(self, name: str, dest: Path) -> BuiltStore:
        """Write a private copy of store ``name`` under ``dest``."""
        spec = SPECS.get(name) or UNSUPPORTED_SPECS[name]
        path = Path(dest) / f"{name}.zarr"
        return BuiltStore(spec, path, _build(spec, path))


def _build(spec: StoreSpec, path: Path) -> np.ndarray:
    with warnings.catch_warnings():
        # zarr-python warns about e.g. sharding after a transpose; harmless.
        warnings.simplefilter("ignore")
        return native(np.asarray(spec.build(path)))


def native(a: np.ndarray) -> np.ndarray:
    """``a`` converted to native byte order (values unchanged)."""
    a = np.asarray(a)
    # Record types keep each field's stored byte order (as zarr-python and lsio read them).
    if a.dtype.byteorder not in ("=", "|") and not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    return a


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bit patterns of ``a`` as an unsigned-integer array.

    Floats are compared through this view so that NaN payloads, the sign of
    NaN and of zero all count.  Complex values become (re, im) pairs.
    """
    a = np.array(native(a), order="C", copy=True)  # keeps 0-d arrays 0-d
    dt = a.dtype
    if dt.kind == "c":
        part = dt.itemsize // 2
        return a.reshape(-1).view(UINT_OF[part]).reshape(a.shape + (2,))
    if dt.kind == "V":  # records: every byte
        return a.reshape(-1).view(np.uint8).reshape(a.shape + (dt.itemsize,))
    return a.reshape(-1).view(UINT_OF[dt.itemsize]).reshape(a.shape)


def assert_same_bits(actual, expected, context="") -> None:
    """``actual`` is an ndarray bit-identical to ``expected``."""
    assert isinstance(actual, np.ndarray), (context, type(actual))
    expected = native(np.asarray(expected))
    assert actual.dtype.isnative or actual.dtype.fields is not None, (context, actual.dtype)
    assert actual.dtype == expected.dtype, (
        context, actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (
        context, actual.shape, expected.shape)
    np.testing.assert_array_equal(
        bits(actual), bits(expected), err_msg=context)


def assert_same_values(actual, expected, context="") -> None:
    """Equal values, any NaN equal to any NaN (for zarr-python fill reads)."""
    assert actual.shape == expected.shape, (
        context, actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected, err_msg=context)


# --------------------------------------------------------------------------
# Independent parsing of zarr.json (for metadata checks)
# --------------------------------------------------------------------------


def canonical_json(value) -> str:
    """A canonical JSON text of ``value``; NaN-safe equality of attributes.

    Distinguishes 1 from 1.0 and True from 1, and float NaN from "NaN".
    """
    return json.dumps(value, sort_keys=True, allow_nan=True)


def dtype_of(data_type) -> np.dtype:
    """zarr.json's data_type -> numpy dtype, read here independently of lsio: core names,
    zarr-python 3's fixed-width strings and its "structured" records (fields little-endian)."""
    if isinstance(data_type, str):
        return np.dtype(data_type)
    name, config = data_type["name"], data_type.get("configuration", {})
    if name == "fixed_length_utf32":
        return np.dtype(f"<U{config['length_bytes'] // 4}")
    if name == "null_terminated_bytes":
        return np.dtype(f"S{config['length_bytes']}")
    if name == "structured":
        return np.dtype([(f, dtype_of(t)) for f, t in config["fields"]])
    raise ValueError(f"no numpy dtype for {data_type!r}")


def parse_fill(value, dtype) -> np.generic:
    """Zarr v3 fill_value JSON -> numpy scalar of ``dtype`` (bit exact)."""
    dtype = np.dtype(dtype)
    if dtype.fields is not None:  # records: the base64 of one element
        return np.frombuffer(base64.b64decode(value), dtype)[0]
    if dtype.kind == "c":
        part = np.dtype(f"f{dtype.itemsize // 2}")
        re, im = (parse_fill(x, part) for x in value)
        out = np.zeros((), dtype)
        out.reshape(1).view(part)[0] = re
        out.reshape(1).view(part)[1] = im
        return out[()]
    if dtype.kind == "f":
        if isinstance(value, str):
            if value.startswith("0x"):
                u = np.array(int(value, 16), UINT_OF[dtype.itemsize])
                return u.view(dtype)[()]
            value = {"NaN": np.nan, "Infinity": np.inf,
                     "-Infinity": -np.inf}[value]
        return np.array(value, dtype)[()]
    if dtype.kind == "b":
        return np.bool_(value)
    return np.array(int(value), dtype)[()]


def expected_chunks_and_shards(metadata: dict):
    """(inner chunk shape, shard shape or None) from zarr.json."""
    grid = tuple(metadata["chunk_grid"]["configuration"]["chunk_shape"])
    codecs = metadata["codecs"]
    names = [c if isinstance(c, str) else c["name"] for c in codecs]
    if "sharding_indexed" in names:
        at = names.index("sharding_indexed")
        inner = list(codecs[at]["configuration"]["chunk_shape"])
        deeper = codecs[at]["configuration"]["codecs"]
        while deeper and not isinstance(deeper[0], str) and deeper[0]["name"] == "sharding_indexed":
            # Nested sharding: the chunks read are the innermost ones.
            inner = list(deeper[0]["configuration"]["chunk_shape"])
            deeper = deeper[0]["configuration"]["codecs"]
        # Transposes before it: the inner shape is given in the transposed shard's order;
        # lsio reports the block of the array each inner chunk covers.
        for c in reversed(codecs[:at]):
            order = c["configuration"]["order"]
            logical = [0] * len(inner)
            for i, d in enumerate(order):
                logical[d] = inner[i]
            inner = logical
        return tuple(inner), grid
    return grid, None


def shard_index(path: Path, n_chunks: int, location: str = "end",
                crc: bool = True, big_endian: bool = False) -> np.ndarray:
    """Decode the (offset, nbytes) index of one shard file written to disk."""
    blob = Path(path).read_bytes()
    size = 16 * n_chunks + (4 if crc else 0)
    raw = blob[-size:] if location == "end" else blob[:size]
    dt = ">u8" if big_endian else "<u8"
    return np.frombuffer(raw[: 16 * n_chunks], dt).reshape(n_chunks, 2)


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as the Zarr ``crc32c`` codec computes it."""
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C_TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def all_store_names() -> list[str]:
    return list(SPECS)


def unsupported_store_names() -> list[str]:
    return list(UNSUPPORTED_SPECS)


if __name__ == "__main__":  # pragma: no cover - manual fixture check
    import sys
    import tempfile

    root = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
    cache = StoreCache(root)
    for n in list(SPECS) + list(UNSUPPORTED_SPECS):
        b = cache.get(n)
        print(n, b.expected.dtype, b.expected.shape, os.fspath(b.path))
