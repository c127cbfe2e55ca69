"""Write the libFuzzer seed corpora in tests/fuzz/corpus/<target>/ from real writer output.

Every seed is taken from a store that zarr-python 3 or TensorStore writes here, in a
temporary directory:

* ``metadata_fuzzer``: the ``zarr.json`` of a few arrays (sharded with the index at the
  start and the end, big-endian, transpose, gzip, crc32c, v2 key encoding, NaN fill,
  dimension names, TensorStore's spelling).
* ``node_fuzzer``: a mode byte (0 zarr.json, 1 .zarray, 2 .zgroup, 3 .zmetadata) then the
  text: a v3 group's zarr.json with inline consolidated metadata, an array's zarr.json with
  dimension names, v2 .zarray/.zgroup each followed by NUL and their .zattrs, a v2 .zmetadata.
* ``shard_index_fuzzer``: the header described in shard_index_fuzzer.cc (flags, rank,
  chunks per shard, data size) followed by the index bytes of a real shard.
* ``codec_chain_fuzzer``: the chain number of codec_chain_fuzzer.cc's table followed by a
  chunk file written with exactly that chain (the HDF5 filter chains: a chunk h5py wrote with
  hdf5plugin's filter, read back raw); for the blosc chains also corrupt frames
  (truncated with the header's compressed size patched to match, a c-blosc2 version byte,
  a header claiming another decoded size).

* ``kerchunk_fuzzer``: kerchunk's JSON references of an h5py file (version 1 with inline and
  base64 values, the same flat as version 0, and with templates).

* ``icechunk_fuzzer``: the files of Icechunk's own old-format repositories
  (tests/data/icechunk): repo info files, snapshots, and manifests with the node id and rank
  of each array they hold references of (read with lsio's own parser, so lsio must import).

Usage (from the repository root, in the test venv):  python tests/fuzz/make_corpus.py [TARGET ...]
(no target: all of them)
The corpora are committed; rerun only when a fuzzer's input format or chain table changes.
Writers are deterministic, so a rerun rewrites the same files.
"""

from __future__ import annotations

import json
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
import tensorstore as ts
import zarr
from numcodecs import zarr3 as numcodecs_zarr3
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, GzipCodec, TransposeCodec, ZstdCodec

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    # Compressible but not constant: small values with some structure.
    return (np.arange(n) % 7 + rng.integers(0, 3, n)).astype(dtype).reshape(shape)


def zp_array(path: Path, shape, chunks, dtype, *, shards=None, serializer=None,
             compressors=None, filters=None, fill_value=0, write=True, **kw):
    a = zarr.create_array(
        store=str(path), shape=shape, chunks=chunks, shards=shards, dtype=dtype,
        serializer=serializer or BytesCodec(endian="little"),
        compressors=compressors if compressors is not None else [],
        filters=filters if filters is not None else [],
        fill_value=fill_value, zarr_format=3, **kw)
    if write:
        a[...] = data(shape, dtype)
    return a


# ------------------------------------------------------------------ zarr.json seeds
def metadata_seeds(tmp: Path) -> dict[str, bytes]:
    out = {}
    zp_array(tmp / "m1", (10, 12), (2, 3), "uint16", shards=(4, 6),
             compressors=[ZstdCodec(level=0, checksum=True)])
    out["zp_shard_end.json"] = (tmp / "m1" / "zarr.json").read_bytes()
    zp_array(tmp / "m2", (7,), (4,), "float32", serializer=BytesCodec(endian="big"),
             compressors=[GzipCodec(level=1), Crc32cCodec()], fill_value=float("nan"),
             dimension_names=["x"], chunk_key_encoding={"name": "v2", "separator": "."},
             attributes={"units": "m"})
    out["zp_gzip_crc_big_v2.json"] = (tmp / "m2" / "zarr.json").read_bytes()
    zp_array(tmp / "m3", (4, 5, 6), (2, 5, 3), "int64", filters=[TransposeCodec(order=(2, 0, 1))],
             fill_value=-3)
    out["zp_transpose.json"] = (tmp / "m3" / "zarr.json").read_bytes()
    # Zarr v2 .zarray documents (the fuzzer feeds every input to the v2 parser too).
    from numcodecs import Zlib, Zstd
    zarr.create_array(str(tmp / "v2a"), shape=(5, 7, 3), chunks=(2, 7, 2), dtype=">f8", zarr_format=2,
                      order="F", compressors=Zstd(level=1), fill_value=float("nan"),
                      chunk_key_encoding={"name": "v2", "separator": "/"})
    out["v2_zstd_f_order_big.zarray"] = (tmp / "v2a" / ".zarray").read_bytes()
    zarr.create_array(str(tmp / "v2b"), shape=(9,), chunks=(4,), dtype="<c8", zarr_format=2,
                      compressors=Zlib(level=1), fill_value=None)
    out["v2_zlib_complex_null_fill.zarray"] = (tmp / "v2b" / ".zarray").read_bytes()
    zp_array(tmp / "m6", (9, 9), (3, 3), "float32", shards=(9, 9),
             compressors=[BloscCodec(cname="lz4", clevel=5, shuffle="bitshuffle"), Crc32cCodec()])
    out["zp_shard_blosc_crc.json"] = (tmp / "m6" / "zarr.json").read_bytes()
    # Index at the start: zarr-python 3.1 takes it from ShardingCodec's index_location.
    from zarr.codecs import ShardingCodec
    zarr.create_array(
        store=str(tmp / "m4"), shape=(8, 6), chunks=(4, 6), dtype="complex64", zarr_format=3,
        serializer=ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec(endian="big")],
                                 index_codecs=[BytesCodec(endian="little")], index_location="start"),
        compressors=None, filters=None, fill_value=0)
    out["zp_shard_start_complex.json"] = (tmp / "m4" / "zarr.json").read_bytes()
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp / "m5")},
            "metadata": {"shape": [16, 16], "data_type": "uint8",
                         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8, 16]}},
                         "codecs": [{"name": "sharding_indexed", "configuration": {
                             "chunk_shape": [2, 4], "codecs": [{"name": "bytes"}, {"name": "zstd"}]}}]},
            "create": True, "delete_existing": True}
    ts.open(spec).result()
    out["ts_shard.json"] = (tmp / "m5" / "zarr.json").read_bytes()
    return out


# ------------------------------------------------------------------ node seeds
def node_seeds(tmp: Path) -> dict[str, bytes]:
    out = {}
    g = zarr.open_group(str(tmp / "g3"), mode="w", zarr_format=3, attributes={"title": "t"})
    g.create_array("t2m", shape=(4, 6), chunks=(2, 3), dtype="float32", dimension_names=["lat", "lon"])
    g.create_group("sub").create_array("z", shape=(3,), chunks=(3,), dtype="int8")
    zarr.consolidate_metadata(str(tmp / "g3"))
    out["v3_group_consolidated"] = b"\0" + (tmp / "g3" / "zarr.json").read_bytes()
    out["v3_array_dims"] = b"\0" + (tmp / "g3" / "t2m" / "zarr.json").read_bytes()
    g2 = zarr.open_group(str(tmp / "g2"), mode="w", zarr_format=2, attributes={"title": "t"})
    a = g2.create_array("u10", shape=(4, 6), chunks=(2, 3), dtype="<f4", fill_value=None)
    a.attrs["_ARRAY_DIMENSIONS"] = ["lat", "lon"]
    zarr.consolidate_metadata(str(tmp / "g2"))
    out["v2_array_zattrs"] = (b"\1" + (tmp / "g2" / "u10" / ".zarray").read_bytes() + b"\0" +
                              (tmp / "g2" / "u10" / ".zattrs").read_bytes())
    out["v2_group_zattrs"] = (b"\2" + (tmp / "g2" / ".zgroup").read_bytes() + b"\0" +
                              (tmp / "g2" / ".zattrs").read_bytes())
    out["v2_zmetadata"] = b"\3" + (tmp / "g2" / ".zmetadata").read_bytes()
    return out


# ------------------------------------------------------------------ shard index seeds
def shard_header(flags: int, rank: int, cps, data_size: int) -> bytes:
    cps = list(cps) + [1] * (3 - len(cps))
    return bytes([flags, rank - 1] + [c - 1 for c in cps]) + struct.pack("<I", data_size)


def shard_index_seeds(tmp: Path) -> dict[str, bytes]:
    # The fuzzer's inner chunk extents are 2, 3, 4 in dimensions 0, 1, 2.
    from zarr.codecs import ShardingCodec
    out = {}
    cases = [
        # name, rank, chunks per shard, location, big endian index, crc
        ("zp_r2_end_crc", 2, (2, 2), "end", False, True),
        ("zp_r2_start_crc", 2, (2, 2), "start", False, True),
        ("zp_r2_end_be_nocrc", 2, (2, 2), "end", True, False),
        ("zp_r1_start_nocrc", 1, (4,), "start", False, False),
        ("zp_r3_end_crc", 3, (1, 2, 2), "end", False, True),
    ]
    for name, rank, cps, loc, be, crc in cases:
        inner = [2, 3, 4][:rank]
        shard_shape = [i * c for i, c in zip(inner, cps)]
        shape = [s + 1 for s in shard_shape]  # a partial second shard too
        index_codecs = [BytesCodec(endian="big" if be else "little")] + ([Crc32cCodec()] if crc else [])
        a = zarr.create_array(
            store=str(tmp / name), shape=shape, chunks=shard_shape, dtype="int16", zarr_format=3,
            serializer=ShardingCodec(chunk_shape=inner,
                                     codecs=[BytesCodec(endian="little"), ZstdCodec(level=0)],
                                     index_codecs=index_codecs, index_location=loc),
            compressors=None, filters=None, fill_value=0)
        full = data(shape, "int16")
        # Leave inner chunk 0 of the first shard empty: a missing (all-ones) entry.
        full[tuple(slice(0, i) for i in inner)] = 0
        a[...] = full
        blob = (tmp / name / "c" / "/".join(["0"] * rank)).read_bytes()
        n = int(np.prod(cps))
        index_size = 16 * n + (4 if crc else 0)
        index = blob[-index_size:] if loc == "end" else blob[:index_size]
        flags = (1 if loc == "end" else 0) | (2 if be else 0) | (4 if crc else 0)
        out[name] = shard_header(flags, rank, cps, len(blob) - index_size) + index
    # TensorStore: index at the end (no index_location written), crc32c.
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp / "ts")},
            "metadata": {"shape": [4, 6], "data_type": "int16",
                         "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 6]}},
                         "codecs": [{"name": "sharding_indexed", "configuration": {
                             "chunk_shape": [2, 3], "codecs": [{"name": "bytes"}, {"name": "zstd"}]}}]},
            "create": True, "delete_existing": True}
    t = ts.open(spec).result()
    t[...] = data((4, 6), "int16", 1)
    blob = (tmp / "ts" / "c" / "0" / "0").read_bytes()
    index_size = 16 * 4 + 4
    out["ts_r2_end_crc"] = shard_header(1 | 4, 2, (2, 2), len(blob) - index_size) + blob[-index_size:]
    return out


# ------------------------------------------------------------------ codec chain seeds
# Must match the table in codec_chain_fuzzer.cc, entry for entry.
def chain_table():
    return [
        ((4, 8), "uint16", [], BytesCodec(endian="little"), [ZstdCodec(level=0, checksum=False)]),
        ((4, 8), "float32", [], BytesCodec(endian="little"), [ZstdCodec(level=0, checksum=True), Crc32cCodec()]),
        ((16,), "int32", [], BytesCodec(endian="little"), [GzipCodec(level=1)]),
        ((3, 5), "int16", [], BytesCodec(endian="little"), [Crc32cCodec()]),
        ((2, 3), "float64", [], BytesCodec(endian="big"), []),
        ((6,), "complex64", [], BytesCodec(endian="big"), []),
        ((3, 4), "uint32", [TransposeCodec(order=(1, 0))], BytesCodec(endian="little"), []),
        ((2, 3, 4), "int64", [TransposeCodec(order=(2, 0, 1))], BytesCodec(endian="big"),
         [ZstdCodec(level=0, checksum=False), Crc32cCodec()]),
        ((8, 8), "uint8", [], BytesCodec(endian="little"), [ZstdCodec(level=0, checksum=False), GzipCodec(level=1)]),
        ((5, 7), "uint16", [], BytesCodec(endian="little"), [Crc32cCodec(), ZstdCodec(level=0, checksum=False)]),
        ((16, 16), "uint16", [], BytesCodec(endian="little"),
         [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle", typesize=2)]),
        ((8, 8), "float64", [], BytesCodec(endian="little"),
         [BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle", typesize=8), Crc32cCodec()]),
        ((64,), "int32", [], BytesCodec(endian="little"),
         [BloscCodec(cname="blosclz", clevel=5, shuffle="noshuffle", typesize=4), ZstdCodec(level=0, checksum=False)]),
        ((4, 6), "int32", [TransposeCodec(order=(1, 0))], BytesCodec(endian="big"),
         [BloscCodec(cname="zlib", clevel=5, shuffle="shuffle", typesize=4)]),
        ((16, 16), "float32", [], BytesCodec(endian="little"),
         [numcodecs_zarr3.Shuffle(elementsize=4), numcodecs_zarr3.LZ4(acceleration=1)]),
    ]


# The table's HDF5 entries, after chain_table()'s: (shape, dtype, hdf5plugin filter keywords);
# their seeds are chunks h5py writes with hdf5plugin's filters (read back raw).
def hdf5_chain_table():
    import hdf5plugin

    return [
        ((16, 16), "<u2", hdf5plugin.LZ4(nbytes=64)),
        ((16, 16), "<f4", hdf5plugin.Bitshuffle(nelems=0, cname="lz4")),
        ((100,), "<i2", hdf5plugin.Bitshuffle(nelems=24, cname="zstd")),
        ((37,), "<u4", hdf5plugin.Bitshuffle(nelems=8, cname="none")),
    ]


BLOSC_DIRECT_CHAINS = (10, 13)  # chains whose stored chunk is the blosc frame itself


def codec_chain_seeds(tmp: Path) -> dict[str, bytes]:
    out = {}
    for k, (shape, dtype, filters, serializer, compressors) in enumerate(chain_table()):
        path = tmp / f"chain{k}"
        zp_array(path, shape, shape, dtype, serializer=serializer, compressors=compressors,
                 filters=filters, write=False)
        arr = zarr.open_array(str(path), mode="r+")
        arr[...] = data(shape, dtype, k)
        chunk = (path / "c" / "/".join(["0"] * len(shape))).read_bytes()
        out[f"chain{k:02d}_zp"] = bytes([k]) + chunk
        if k in BLOSC_DIRECT_CHAINS:
            # Corrupt frames: what the decoder must refuse without writing past the chunk.
            cut = bytearray(chunk[:len(chunk) * 2 // 3])
            cut[12:16] = struct.pack("<I", len(cut))  # passes c-blosc's header validation
            out[f"chain{k:02d}_blosc_truncated_patched"] = bytes([k]) + bytes(cut)
            v3 = bytearray(chunk)
            v3[0] = 3  # a c-blosc2 frame version
            out[f"chain{k:02d}_blosc_version3"] = bytes([k]) + bytes(v3)
            big = bytearray(chunk)
            big[4:8] = struct.pack("<I", struct.unpack_from("<I", chunk, 4)[0] * 2)  # claims 2x the data
            out[f"chain{k:02d}_blosc_nbytes_doubled"] = bytes([k]) + bytes(big)
    import h5py

    first = len(chain_table())
    for k, (shape, dtype, filt) in enumerate(hdf5_chain_table(), start=first):
        with h5py.File(tmp / f"chain{k}.h5", "w") as f:
            ds = f.create_dataset("x", data=data(shape, dtype, k), chunks=shape, **filt)
            _, chunk = ds.id.read_direct_chunk((0,) * len(shape))
        out[f"chain{k:02d}_h5py"] = bytes([k]) + bytes(chunk)
    return out


def kerchunk_seeds(tmp: Path) -> dict:
    """kerchunk's own references of an HDF5 file written by h5py (JSON version 1, inline and
    base64 values, ranges), the same as version 0, and one with templates."""
    import h5py
    import numpy as np
    from kerchunk.hdf import SingleHdf5ToZarr

    path = tmp / "seed.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(200, dtype="<f4").reshape(10, 20), chunks=(5, 10), compression="gzip",
                         shuffle=True)
        f.create_dataset("s", data=np.arange(6, dtype="<i2"))
        f.require_group("g").create_dataset("b", data=np.ones((4, 4), ">f8"), chunks=(2, 2))
    v1 = SingleHdf5ToZarr(str(path), inline_threshold=50).translate()
    v1["refs"] = {k: (["/data/seed.h5", *v[1:]] if isinstance(v, list) else v) for k, v in v1["refs"].items()}
    out = {"v1_h5py_inline": json.dumps(v1).encode(), "v0_flat": json.dumps(v1["refs"]).encode()}
    tpl = {"version": 1, "templates": {"u": "s3://bucket/data"},
           "refs": {k: (["{{u}}/seed.h5", *v[1:]] if isinstance(v, list) else v) for k, v in v1["refs"].items()}}
    out["v1_templates"] = json.dumps(tpl).encode()
    return out


def icechunk_seeds(tmp: Path) -> dict:
    """Mode byte + file for repo info files and snapshots; mode 2 + node id + rank + file for
    the manifests each array of each snapshot takes references from."""
    from lsio import _core

    out = {}
    root = HERE.parent / "data" / "icechunk"
    for repo in sorted(p for p in root.iterdir() if p.is_dir()):
        if (repo / "repo").is_file():
            out[f"{repo.name}_repo"] = b"\x00" + (repo / "repo").read_bytes()
        for snap in sorted((repo / "snapshots").iterdir()):
            blob = snap.read_bytes()
            out[f"{repo.name}_snapshot_{snap.name}"] = b"\x01" + blob
            for node in _core.icechunk_snapshot(blob, str(snap))["nodes"]:
                rank = len(json.loads(node["zarr_json"]).get("shape", []))
                for mid, _ in node["manifests"]:
                    out[f"{repo.name}_manifest_{mid}_{node['node_id'].hex()}"] = (
                        b"\x02" + node["node_id"] + bytes([rank]) + (repo / "manifests" / mid).read_bytes())
    return out


def main(argv=None) -> int:
    makers = {"metadata_fuzzer": metadata_seeds, "shard_index_fuzzer": shard_index_seeds,
              "codec_chain_fuzzer": codec_chain_seeds, "node_fuzzer": node_seeds,
              "kerchunk_fuzzer": kerchunk_seeds, "icechunk_fuzzer": icechunk_seeds}
    wanted = (argv if argv is not None else sys.argv[1:]) or list(makers)
    unknown = [t for t in wanted if t not in makers]
    if unknown:
        print(f"unknown targets {unknown}; known: {sorted(makers)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for target in wanted:
            (tmp / target).mkdir()
            seeds = makers[target](tmp / target)
            out_dir = CORPUS / target
            # Keep committed regression inputs (crash-*, regress-*): only the seeds are rewritten.
            if out_dir.exists():
                for f in out_dir.iterdir():
                    if not f.name.startswith(("crash-", "regress-")):
                        f.unlink()
            out_dir.mkdir(parents=True, exist_ok=True)
            for name, blob in sorted(seeds.items()):
                (out_dir / name).write_bytes(blob)
            print(f"{target}: {len(seeds)} seeds, {sum(map(len, seeds.values()))} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
