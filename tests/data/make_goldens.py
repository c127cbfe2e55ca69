"""Golden corrupt stores: valid zarr-python stores, each broken in one precise way.

Generated at test time (tests/python/test_goldens.py calls ``build_all``), or by hand:

    python tests/data/make_goldens.py OUT_DIR     # writes OUT_DIR/<case>/ and lists the cases

Each case directory holds the store (``store/``) and ``golden.json``:
    {"case": ..., "key": store key of the damaged file, "select": [[start, stop], ...] to read,
     "error": "CorruptDataError" | "StorageError" | "FormatError" | "UnsupportedError" |
              null (the store must read back as expected_data()),
     "at": "open" | "read", "chunk": inner chunk coordinates to name (or null),
     "byte_range": [offset, nbytes] the message must name (or null), "words": [...]}
A FIFO cannot be committed nor copied, so every store is rebuilt from the writers.

Cases (complementing tests/python/test_errors.py, which covers flipped index bytes, entries
past EOF, plain truncation, garbage chunks and directories without checking chunk names):
  index level   trailing bytes after an end index; entry overflowing offset+nbytes behind a
                valid crc; entry overlapping the index (end and start); empty shard with the
                index at the start; shard that is a FIFO (must not block); unsharded chunk
                that is a FIFO
  chunk level   (message names file, chunk and byte range) bad inner crc32c, garbage zstd,
                zstd content-checksum mismatch, inner chunk decoding to the wrong size,
                garbage blosc frame, truncated blosc frame (header patched to match),
                blosc frame of another size,
                empty unsharded chunk file, a stored chunk larger than its codecs can
                produce (1 TiB sparse chunk file; a 1 TiB index entry in a sparse shard)
  metadata      unknown keys that must be understood (a top-level key whose must_understand
                is not the boolean false, a codec marked must_understand), unsupported
                codecs (in index_codecs, as the serializer), a variable-size (blosc) index
                codec; an unknown key inside a codec
                configuration is tolerated (the store reads back unchanged)
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec, ShardingCodec, ZstdCodec

SHAPE = (8, 12)
SHARD = (4, 6)
INNER = (2, 3)
N_INNER = (SHARD[0] // INNER[0]) * (SHARD[1] // INNER[1])  # 4 inner chunks per shard
MAX = 2**64 - 1


def expected_data() -> np.ndarray:
    return (np.arange(np.prod(SHAPE)) * 7 % 1000).astype("uint16").reshape(SHAPE)


def write_base(path: Path, kind: str) -> None:
    """A valid store written by zarr-python.

    kind: zstd_end | zstd_start | crc_end | nocrc_end | blosc_end | plain."""
    if kind == "plain":
        a = zarr.create_array(store=str(path), shape=SHAPE, chunks=SHARD, dtype="uint16",
                              compressors=[ZstdCodec(level=0, checksum=False)], fill_value=0,
                              zarr_format=3)
    else:
        inner = {"zstd_end": [BytesCodec(), ZstdCodec(level=0, checksum=True)],
                 "zstd_start": [BytesCodec(), ZstdCodec(level=0, checksum=True)],
                 "crc_end": [BytesCodec(), Crc32cCodec()],
                 "nocrc_end": [BytesCodec(), ZstdCodec(level=0, checksum=False)],
                 "blosc_end": [BytesCodec(), BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]}[kind]
        index_codecs = [BytesCodec()] + ([] if kind == "nocrc_end" else [Crc32cCodec()])
        a = zarr.create_array(
            store=str(path), shape=SHAPE, chunks=SHARD, dtype="uint16", zarr_format=3,
            serializer=ShardingCodec(chunk_shape=INNER, codecs=inner, index_codecs=index_codecs,
                                     index_location="start" if kind == "zstd_start" else "end"),
            compressors=None, filters=None, fill_value=0)
    a[...] = expected_data()


# ------------------------------------------------------------------ byte surgery helpers
def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


class Shard:
    """A shard file with a little-endian index of N_INNER entries (+ crc32c if `crc`)."""

    def __init__(self, path: Path, location: str = "end", crc: bool = True):
        self.path, self.location, self.crc = path, location, crc
        self.blob = bytearray(path.read_bytes())
        self.index_size = 16 * N_INNER + (4 if crc else 0)

    @property
    def index_pos(self) -> int:
        return len(self.blob) - self.index_size if self.location == "end" else 0

    def entry(self, i: int) -> tuple[int, int]:
        return struct.unpack_from("<QQ", self.blob, self.index_pos + 16 * i)

    def set_entry(self, i: int, offset: int, nbytes: int) -> None:
        struct.pack_into("<QQ", self.blob, self.index_pos + 16 * i, offset, nbytes)
        self.fix_crc()

    def fix_crc(self) -> None:
        if self.crc:
            p = self.index_pos
            body = bytes(self.blob[p:p + 16 * N_INNER])
            struct.pack_into("<I", self.blob, p + 16 * N_INNER, crc32c(body))

    def save(self) -> None:
        self.path.write_bytes(bytes(self.blob))


def inner_box(shard: tuple[int, int], inner: tuple[int, int]) -> list[list[int]]:
    """The array region [[start, stop], ...] of one inner chunk of one shard."""
    return [[shard[d] * SHARD[d] + inner[d] * INNER[d], shard[d] * SHARD[d] + (inner[d] + 1) * INNER[d]]
            for d in range(2)]


def global_inner(shard: tuple[int, int], inner: tuple[int, int]) -> list[int]:
    """Coordinates of an inner chunk in the array's grid of inner chunks (as errors name them)."""
    return [shard[d] * (SHARD[d] // INNER[d]) + inner[d] for d in range(2)]


def edit_metadata(store: Path, fn: Callable[[dict], None]) -> None:
    doc = json.loads((store / "zarr.json").read_text())
    fn(doc)
    (store / "zarr.json").write_text(json.dumps(doc, indent=2))


# ------------------------------------------------------------------ the cases
# Each builder gets the store directory (already holding the base store) and returns the
# golden's fields other than "case".
CASES: dict[str, tuple[str, Callable[[Path], dict]]] = {}


def case(name: str, base: str):
    def deco(fn):
        CASES[name] = (base, fn)
        return fn
    return deco


def read_case(key, select, error, chunk=None, byte_range=None, words=()):
    return {"key": key, "select": select, "error": error, "at": "read", "chunk": chunk,
            "byte_range": byte_range, "words": list(words)}


def open_case(error, words):
    return {"key": "zarr.json", "select": None, "error": error, "at": "open", "chunk": None,
            "byte_range": None, "words": list(words)}


@case("index_trailing_bytes", "zstd_end")
def _(p):
    # Bytes appended after an end index: the last index_size bytes are no longer the index.
    f = p / "c/0/1"
    f.write_bytes(f.read_bytes() + b"\0" * 8)
    return read_case("c/0/1", [[0, 4], [6, 12]], "CorruptDataError")


@case("index_entry_overflow_valid_crc", "zstd_end")
def _(p):
    s = Shard(p / "c/1/0")
    s.set_entry(3, MAX - 8, 16)  # offset + nbytes wraps around; the crc32c still matches
    s.save()
    return read_case("c/1/0", inner_box((1, 0), (1, 1)), "CorruptDataError")


@case("index_entry_overlaps_index_end", "zstd_end")
def _(p):
    s = Shard(p / "c/1/1")
    off, nb = s.entry(3)
    s.set_entry(3, s.index_pos - nb + 4, nb)  # its last 4 bytes are index bytes
    s.save()
    return read_case("c/1/1", inner_box((1, 1), (1, 1)), "CorruptDataError")


@case("index_entry_overlaps_index_start", "zstd_start")
def _(p):
    s = Shard(p / "c/0/0", location="start")
    off, nb = s.entry(0)
    s.set_entry(0, 0, nb)  # starts at the index itself
    s.save()
    return read_case("c/0/0", inner_box((0, 0), (0, 0)), "CorruptDataError")


@case("empty_shard_index_start", "zstd_start")
def _(p):
    (p / "c/1/1").write_bytes(b"")
    return read_case("c/1/1", [[4, 8], [6, 12]], "CorruptDataError")


@case("shard_is_fifo", "zstd_end")
def _(p):
    f = p / "c/0/0"
    f.unlink()
    os.mkfifo(f)
    return read_case("c/0/0", [[0, 4], [0, 6]], "StorageError")


@case("chunk_is_fifo", "plain")
def _(p):
    f = p / "c/1/1"
    f.unlink()
    os.mkfifo(f)
    return read_case("c/1/1", [[4, 8], [6, 12]], "StorageError")


@case("inner_crc32c_mismatch", "crc_end")
def _(p):
    s = Shard(p / "c/0/1")
    off, nb = s.entry(2)  # inner chunk (1, 0)
    s.blob[off + 3] ^= 0x40
    s.save()
    return read_case("c/0/1", inner_box((0, 1), (1, 0)), "CorruptDataError",
                     chunk=global_inner((0, 1), (1, 0)), byte_range=[off, nb])


@case("inner_garbage_zstd", "zstd_end")
def _(p):
    s = Shard(p / "c/1/1")
    off, nb = s.entry(1)  # inner chunk (0, 1)
    s.blob[off:off + nb] = np.random.default_rng(5).integers(0, 256, nb, np.uint8).tobytes()
    s.save()
    return read_case("c/1/1", inner_box((1, 1), (0, 1)), "CorruptDataError",
                     chunk=global_inner((1, 1), (0, 1)), byte_range=[off, nb])


@case("inner_zstd_checksum_mismatch", "zstd_end")
def _(p):
    s = Shard(p / "c/0/0")
    off, nb = s.entry(3)  # inner chunk (1, 1); the frame ends with its 4-byte checksum
    s.blob[off + nb - 1] ^= 0x01
    s.save()
    return read_case("c/0/0", inner_box((0, 0), (1, 1)), "CorruptDataError",
                     chunk=global_inner((0, 0), (1, 1)), byte_range=[off, nb])


@case("inner_chunk_wrong_size", "nocrc_end")
def _(p):
    import numcodecs
    s = Shard(p / "c/1/0", crc=False)
    off, nb = s.entry(0)
    frame = numcodecs.Zstd(level=1).encode(bytes(INNER[0] * INNER[1] * 2 + 2))  # 2 bytes too many
    s.blob[len(s.blob) - s.index_size:len(s.blob) - s.index_size] = frame  # append before the index
    s.set_entry(0, len(s.blob) - s.index_size - len(frame), len(frame))
    s.save()
    new_off, new_nb = s.entry(0)
    return read_case("c/1/0", inner_box((1, 0), (0, 0)), "CorruptDataError",
                     chunk=global_inner((1, 0), (0, 0)), byte_range=[new_off, new_nb])


@case("inner_garbage_blosc", "blosc_end")
def _(p):
    s = Shard(p / "c/1/0")
    off, nb = s.entry(2)  # inner chunk (1, 0)
    s.blob[off:off + nb] = np.random.default_rng(6).integers(0, 256, nb, np.uint8).tobytes()
    s.save()
    return read_case("c/1/0", inner_box((1, 0), (1, 0)), "CorruptDataError",
                     chunk=global_inner((1, 0), (1, 0)), byte_range=[off, nb], words=["blosc"])


@case("inner_blosc_truncated_header_patched", "blosc_end")
def _(p):
    # The frame loses its last 4 bytes and the header's compressed size (bytes 12-15) is
    # patched to match, so only the decoder itself can tell the data is missing.
    s = Shard(p / "c/0/1")
    off, nb = s.entry(1)  # inner chunk (0, 1)
    struct.pack_into("<I", s.blob, off + 12, nb - 4)
    s.set_entry(1, off, nb - 4)
    s.save()
    return read_case("c/0/1", inner_box((0, 1), (0, 1)), "CorruptDataError",
                     chunk=global_inner((0, 1), (0, 1)), byte_range=[off, nb - 4], words=["blosc"])


@case("inner_blosc_wrong_size", "blosc_end")
def _(p):
    import numcodecs
    s = Shard(p / "c/1/1")
    # 2 bytes too few (2 too many would exceed what blosc can store for the chunk, a check
    # made before decoding).
    frame = numcodecs.Blosc(cname="lz4").encode(bytes(INNER[0] * INNER[1] * 2 - 2))
    end = len(s.blob) - s.index_size
    s.blob[end:end] = frame  # append before the index
    s.set_entry(3, end, len(frame))
    s.save()
    return read_case("c/1/1", inner_box((1, 1), (1, 1)), "CorruptDataError",
                     chunk=global_inner((1, 1), (1, 1)), byte_range=[end, len(frame)],
                     words=["blosc", "decodes to 10 bytes, expected 12"])


@case("empty_chunk_unsharded", "plain")
def _(p):
    (p / "c/0/1").write_bytes(b"")
    return read_case("c/0/1", [[0, 4], [6, 12]], "CorruptDataError", chunk=[0, 1], byte_range=[0, 0])


def _inner_codecs(doc):
    return doc["codecs"][0]["configuration"]["codecs"]


@case("unknown_key_must_understand_not_bool", "plain")
def _(p):
    # "must_understand" must be the boolean false to waive the key; the string does not.
    edit_metadata(p, lambda d: d.update(frobnicate={"must_understand": "false"}))
    return open_case("FormatError", ["frobnicate"])


@case("unknown_key_in_codec_configuration_tolerated", "zstd_end")
def _(p):
    # Tolerated on purpose (zarr-format.md: writers add keys such as zstd "checksum" that
    # older readers do not know); the store must read back unchanged.
    edit_metadata(p, lambda d: _inner_codecs(d)[1]["configuration"].update(future_option=1))
    return {"key": "zarr.json", "select": [[0, SHAPE[0]], [0, SHAPE[1]]], "error": None,
            "at": "read", "chunk": None, "byte_range": None, "words": []}


@case("unknown_codec_must_understand", "plain")
def _(p):
    edit_metadata(p, lambda d: d["codecs"].append({"name": "frobnicate", "must_understand": True}))
    return open_case("UnsupportedError", ["frobnicate"])


@case("unsupported_index_codec", "zstd_end")
def _(p):
    edit_metadata(p, lambda d: d["codecs"][0]["configuration"]["index_codecs"].insert(
        1, {"name": "numcodecs.pcodec", "configuration": {"level": 8}}))
    return open_case("UnsupportedError", ["numcodecs.pcodec"])


@case("variable_size_index_codec", "zstd_end")
def _(p):
    # blosc is supported, but a compressed index has no fixed size, so it cannot be found.
    edit_metadata(p, lambda d: d["codecs"][0]["configuration"]["index_codecs"].insert(
        1, {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 1, "shuffle": "noshuffle",
                                               "typesize": 8, "blocksize": 0}}))
    return open_case("FormatError", ["index_codecs", "not fixed-size"])


@case("unsupported_serializer", "plain")
def _(p):
    edit_metadata(p, lambda d: d["codecs"].__setitem__(0, {"name": "vlen-bytes"}))
    return open_case("UnsupportedError", ["vlen-bytes"])


TIB = 1 << 40


@case("unsharded_chunk_sparse_1tib", "plain")
def _(p):
    # A 1 TiB sparse chunk file (a few KB on disk): more than zstd can produce for a
    # 12-byte chunk, so it is corrupt, and must not become a 1 TiB read buffer.
    with open(p / "c/0/1", "r+b") as f:
        f.truncate(TIB)
    return read_case("c/0/1", [[0, 4], [6, 12]], "CorruptDataError", chunk=[0, 1], byte_range=[0, TIB],
                     words=["more than its codecs"])


@case("index_entry_1tib_in_sparse_shard", "zstd_end")
def _(p):
    # A shard whose index (valid crc) points inner chunk (1, 1) at a 1 TiB range that does
    # lie inside the (sparse) file: only the codec bound can tell it is corrupt.
    s = Shard(p / "c/0/0")
    index = bytearray(s.blob[s.index_pos:])
    body = bytes(s.blob[:s.index_pos])
    s.blob = bytearray(body) + index  # index rewritten below, after the hole
    struct.pack_into("<QQ", index, 16 * 3, 0, TIB)
    struct.pack_into("<I", index, 16 * N_INNER, crc32c(bytes(index[:16 * N_INNER])))
    with open(s.path, "wb") as f:
        f.write(body)
        f.seek(TIB)
        f.write(bytes(index))
    return read_case("c/0/0", inner_box((0, 0), (1, 1)), "CorruptDataError",
                     chunk=global_inner((0, 0), (1, 1)), byte_range=[0, TIB], words=["more than its codecs"])


def build_all(out: Path) -> list[str]:
    """Writes every case under out/<case>/ (store/ + golden.json); returns the case names."""
    out.mkdir(parents=True, exist_ok=True)
    for name, (base, fn) in CASES.items():
        d = out / name
        store = d / "store"
        write_base(store, base)
        golden = fn(store)
        golden["case"] = name
        (d / "golden.json").write_text(json.dumps(golden, indent=1))
    return list(CASES)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for n in build_all(Path(sys.argv[1])):
        print(n)
