"""Errors: unsupported features, malformed metadata, corrupt and odd storage.

* Unsupported features (Zarr v2 stores lsio cannot read, sharded strings,
  unknown codecs, rectilinear grid) raise ``UnsupportedError`` from ``lsio.open``, naming the
  feature and the file.
* Malformed ``zarr.json`` (missing, invalid JSON, wrong ``zarr_format`` or
  ``node_type``, unknown keys without ``"must_understand": false``, bad
  shapes, bad codec chains) raises ``FormatError``; an unknown key marked
  ``"must_understand": false`` is ignored.
* Corrupt data, made by editing bytes of stores that zarr-python or
  TensorStore wrote in the test: a flipped shard index byte (crc32c),
  truncated shards, index entries past the end of the file or overflowing,
  garbage zstd/gzip/blosc chunks, inner crc32c and zstd checksum mismatches, chunks
  that decode to the wrong size -> ``CorruptDataError`` (truncation may also
  be ``StorageError``); a shard or chunk path that is a directory ->
  ``StorageError``.  Every message must name the file involved.  Corrupt
  reads run on both I/O backends.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

import lsio
from conftest import require_uring
from stores import (
    UNSUPPORTED_FEATURE_WORDS,
    assert_same_bits,
    crc32c,
    shard_index,
)

MAX = 2**64 - 1


def assert_names_file(exc: BaseException, path: Path, key: str) -> None:
    """The message names ``path`` (absolute) or at least its store key."""
    msg = str(exc)
    assert str(path) in msg or key in msg, (
        f"message does not name {key!r} ({path}): {msg!r}"
    )


def assert_names_metadata(exc: BaseException, array_dir: Path) -> None:
    msg = str(exc)
    assert "zarr.json" in msg or str(array_dir) in msg, (
        f"message does not name {array_dir}/zarr.json: {msg!r}"
    )


@pytest.fixture(params=["pread", "uring"])
def io(request):
    if request.param == "uring":
        require_uring()
    return request.param


def flip_byte(path: Path, pos: int, mask: int = 0xFF) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


def overwrite(path: Path, pos: int, new: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[pos:pos + len(new)] = new
    path.write_bytes(bytes(data))


def garbage(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, np.uint8).tobytes()


# --------------------------------------------------------------------------
# Unsupported features
# --------------------------------------------------------------------------


def test_unsupported_store(unsupported_store):
    path = unsupported_store.path
    with pytest.raises(lsio.UnsupportedError) as info:
        lsio.open(str(path))
    exc = info.value
    assert isinstance(exc, lsio.FormatError)
    assert isinstance(exc, NotImplementedError)
    assert isinstance(exc, ValueError)
    words = UNSUPPORTED_FEATURE_WORDS[unsupported_store.name]
    msg = str(exc).lower()
    assert any(w in msg for w in words), (words, str(exc))
    msg = str(exc)
    assert "zarr.json" in msg or ".zarray" in msg or str(path) in msg, msg


def test_unknown_codec_in_sharding(stores, tmp_path):
    s = stores.fresh("z_shard_zstd_end", tmp_path)
    doc = json.loads((s.path / "zarr.json").read_text())
    inner = doc["codecs"][0]["configuration"]["codecs"]
    inner[1] = {"name": "numcodecs.pcodec", "configuration": {}}
    (s.path / "zarr.json").write_text(json.dumps(doc))
    with pytest.raises(lsio.UnsupportedError) as info:
        lsio.open(str(s.path))
    assert "numcodecs.pcodec" in str(info.value)
    assert_names_metadata(info.value, s.path)


# --------------------------------------------------------------------------
# Malformed metadata
# --------------------------------------------------------------------------


def base_metadata():
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [20, 30],
        "data_type": "uint16",
        "chunk_grid": {"name": "regular",
                       "configuration": {"chunk_shape": [8, 8]}},
        "chunk_key_encoding": {"name": "default",
                               "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }


def write_metadata(tmp_path: Path, doc, name="a.zarr") -> Path:
    p = tmp_path / name
    p.mkdir()
    text = doc if isinstance(doc, str) else json.dumps(doc)
    (p / "zarr.json").write_text(text)
    return p


def test_base_metadata_opens(tmp_path):
    """The template used below is valid: every chunk is missing -> fill."""
    p = write_metadata(tmp_path, base_metadata())
    arr = lsio.open(str(p))
    assert arr.shape == (20, 30)
    assert_same_bits(arr[...], np.zeros((20, 30), np.uint16))


def test_missing_zarr_json(tmp_path):
    """A directory without metadata holds no array: not found (a FileNotFoundError)."""
    p = tmp_path / "empty.zarr"
    p.mkdir()
    with pytest.raises(lsio.NotFoundError) as info:
        lsio.open(str(p))
    assert_names_metadata(info.value, p)


def test_nonexistent_path(tmp_path):
    p = tmp_path / "does-not-exist.zarr"
    with pytest.raises(lsio.Error) as info:
        lsio.open(str(p))
    assert isinstance(info.value, (lsio.FormatError, lsio.StorageError))
    msg = str(info.value)
    assert str(p) in msg or "does-not-exist.zarr" in msg, msg


def _with(**changes):
    doc = base_metadata()
    for k, v in changes.items():
        if v is _DELETE:
            del doc[k]
        else:
            doc[k] = v
    return doc


_DELETE = object()

MALFORMED = {
    "invalid_json": "{not json",
    "truncated_json": json.dumps(base_metadata())[:-10],
    "json_array": "[1, 2, 3]",
    "zarr_format_2": _with(zarr_format=2),
    "zarr_format_missing": _with(zarr_format=_DELETE),
    "node_type_group": _with(node_type="group"),
    "node_type_missing": _with(node_type=_DELETE),
    "shape_missing": _with(shape=_DELETE),
    "shape_negative": _with(shape=[20, -1]),
    "shape_not_ints": _with(shape=[20, "30"]),
    "chunk_rank_mismatch": _with(chunk_grid={
        "name": "regular", "configuration": {"chunk_shape": [8]}}),
    "chunk_zero": _with(chunk_grid={
        "name": "regular", "configuration": {"chunk_shape": [8, 0]}}),
    "data_type_unknown": _with(data_type="int7"),
    "fill_value_wrong_type": _with(fill_value="abc"),
    "fill_value_out_of_range": _with(fill_value=70000),
    "codecs_empty": _with(codecs=[]),
    "codecs_no_array_to_bytes": _with(codecs=[{"name": "crc32c"}]),
    "codecs_two_array_to_bytes": _with(codecs=[
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "bytes", "configuration": {"endian": "little"}}]),
    "chunk_key_encoding_unknown": _with(
        chunk_key_encoding={"name": "weird"}),
    "unknown_key": _with(foo={"x": 1}),
    "unknown_key_must_understand_true": _with(
        foo={"must_understand": True, "x": 1}),
    "unknown_key_not_object": _with(foo=3),
    "storage_transformers": _with(storage_transformers=[
        {"name": "some_transformer", "configuration": {}}]),
    "shard_not_divisible": _with(
        chunk_grid={"name": "regular",
                    "configuration": {"chunk_shape": [10, 10]}},
        codecs=[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 4],
            "codecs": [{"name": "bytes",
                        "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes",
                              "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "end"}}]),
    "index_location_bad": _with(
        codecs=[{"name": "sharding_indexed", "configuration": {
            "chunk_shape": [4, 4],
            "codecs": [{"name": "bytes",
                        "configuration": {"endian": "little"}}],
            "index_codecs": [{"name": "bytes",
                              "configuration": {"endian": "little"}},
                             {"name": "crc32c"}],
            "index_location": "middle"}}]),
    "transpose_bad_order": _with(codecs=[
        {"name": "transpose", "configuration": {"order": [0, 0]}},
        {"name": "bytes", "configuration": {"endian": "little"}}]),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_metadata(tmp_path, case):
    p = write_metadata(tmp_path, MALFORMED[case])
    with pytest.raises(lsio.FormatError) as info:
        lsio.open(str(p))
    assert isinstance(info.value, ValueError)
    assert_names_metadata(info.value, p)


@pytest.mark.parametrize(
    "case", ["unknown_key", "unknown_key_must_understand_true"]
)
def test_unknown_key_is_named(tmp_path, case):
    p = write_metadata(tmp_path, MALFORMED[case])
    with pytest.raises(lsio.FormatError) as info:
        lsio.open(str(p))
    assert "foo" in str(info.value)


def test_real_group_is_format_error(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("a", shape=(4,), dtype="int8")
    with pytest.raises(lsio.FormatError) as info:
        lsio.open(str(tmp_path / "g.zarr"))
    assert_names_metadata(info.value, tmp_path / "g.zarr")
    # the array inside the group opens fine
    assert lsio.open(str(tmp_path / "g.zarr" / "a")).shape == (4,)


def test_must_understand_false_is_ignored(tmp_path):
    doc = _with(foo={"must_understand": False, "x": 1})
    p = write_metadata(tmp_path, doc)
    arr = lsio.open(str(p))
    assert arr.shape == (20, 30)
    assert_same_bits(arr[...], np.zeros((20, 30), np.uint16))


# --------------------------------------------------------------------------
# Corrupt shards
# --------------------------------------------------------------------------

SHARD_INDEX_SIZE = 25 * 16 + 4  # 5x5 inner chunks per shard, with crc32c


def test_index_byte_flip_end(stores, tmp_path, io):
    s = stores.fresh("z_shard_zstd_end", tmp_path)
    shard = s.path / "c" / "1" / "0"
    size = shard.stat().st_size
    flip_byte(shard, size - SHARD_INDEX_SIZE + 16 * 7 + 1)  # an offset byte
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[50:, :50]
    assert_names_file(info.value, shard, "c/1/0")
    # other shards are unaffected
    assert_same_bits(arr[:50, :], s.expected[:50, :])
    assert_same_bits(arr[50:, 50:], s.expected[50:, 50:])
    with pytest.raises(lsio.CorruptDataError) as info:
        arr.read_crops(np.array([[0, 0], [60, 10]]), (5, 5))
    assert_names_file(info.value, shard, "c/1/0")


def test_index_crc_byte_flip_start(stores, tmp_path, io):
    s = stores.fresh("z_shard_zstd_start", tmp_path)
    shard = s.path / "c" / "0" / "1"
    flip_byte(shard, SHARD_INDEX_SIZE - 2)  # inside the stored crc32c
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[...]
    assert_names_file(info.value, shard, "c/0/1")


def test_index_byte_flip_tensorstore(stores, tmp_path, io):
    s = stores.fresh("ts_shard_zstd_end", tmp_path)
    shard = s.path / "c" / "1" / "1"
    size = shard.stat().st_size
    flip_byte(shard, size - SHARD_INDEX_SIZE + 5 * 16 + 9, 0x01)  # an nbytes
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[60, 60]
    assert_names_file(info.value, shard, "c/1/1")


@pytest.mark.parametrize("name,key,keep", [
    ("z_shard_zstd_end", "c/0/1", 0.5),  # index at the end: crc mismatch
    ("z_shard_zstd_start", "c/0/1", 0.5),  # index ok, entries past EOF
    ("z_shard_index_be_nocrc_start", "c/0/1", 0.5),
    ("ts_shard_zstd_start", "c/0/1", 0.7),
    ("z_shard_zstd_end", "c/0/1", 10),  # shorter than the index
    ("z_shard_zstd_start", "c/0/1", 10),
    ("z_shard_zstd_end", "c/0/1", 0),  # empty file
])
def test_truncated_shard(stores, tmp_path, io, name, key, keep):
    s = stores.fresh(name, tmp_path)
    shard = s.path / key
    data = shard.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep
    shard.write_bytes(data[:n])
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises((lsio.CorruptDataError, lsio.StorageError)) as info:
        arr[:50, 50:]
    assert_names_file(info.value, shard, key)


@pytest.mark.parametrize("offset,nbytes", [
    ("eof+10", 8),  # starts after the end of the file
    ("size-4", 100),  # runs past the end of the file
    (MAX - 1, 10),  # offset + nbytes overflows
    (0, MAX - 5),
])
def test_index_entry_out_of_file(stores, tmp_path, io, offset, nbytes):
    s = stores.fresh("z_shard_index_be_nocrc_start", tmp_path)  # BE, no crc
    shard = s.path / "c" / "1" / "1"
    size = shard.stat().st_size
    idx = shard_index(shard, 25, "start", crc=False, big_endian=True)
    assert idx[12, 1] not in (0, MAX)  # entry 12 = inner chunk (2, 2)
    if offset == "eof+10":
        offset = size + 10
    elif offset == "size-4":
        offset = size - 4
    entry = np.array([offset, nbytes], ">u8").tobytes()
    overwrite(shard, 16 * 12, entry)
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[70:80, 70:80]  # inner chunk (2, 2) of shard (1, 1)
    assert_names_file(info.value, shard, "c/1/1")


@pytest.mark.parametrize("offset,missing", [(MAX, True), (399, True), (12345, False), (0, False)])
def test_nbytes_all_ones_is_missing_only_as_zarr_reads_it(stores, tmp_path, io, offset, missing):
    """Offset and nbytes both 2**64-1 is an empty chunk, and so is an early writer's shifted
    empty entry of an index at the start (offset index_size - 1 = 399 here); nbytes alone at
    2**64-1 with another offset is corrupt: zarr-python fails on it too, never returning the
    fill value."""
    s = stores.fresh("z_shard_index_be_nocrc_start", tmp_path)
    shard = s.path / "c" / "1" / "1"
    overwrite(shard, 16 * 12, np.array([offset, MAX], ">u8").tobytes())
    arr = lsio.open(str(s.path), io=io)
    if missing:
        want = s.expected.copy()
        want[70:80, 70:80] = 0
        assert_same_bits(arr[...], want)
        return
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[70:80, 70:80]
    assert_names_file(info.value, shard, "c/1/1")
    assert_same_bits(arr[:50, :50], s.expected[:50, :50])  # the other shards read


@pytest.mark.parametrize("name,damage", [("z_whole_shard_gzip_crc", "flip"), ("z_whole_shard_zstd", "truncate"),
                                         ("z_whole_shard_zstd", "garbage")])
def test_corrupt_shard_compressed_whole(stores, tmp_path, io, name, damage):
    # [sharding_indexed, ...]: the whole shard object is one compressed stream; damage to it
    # is CorruptDataError naming the shard (a flipped byte where a checksum covers the
    # shard), and the other shards still read.
    s = stores.fresh(name, tmp_path)
    shard = s.path / "c" / "1" / "1"
    data = shard.read_bytes()
    if damage == "flip":
        flip_byte(shard, len(data) // 2)
    elif damage == "truncate":
        shard.write_bytes(data[: len(data) // 2])
    else:
        shard.write_bytes(garbage(len(data)))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[55:60, 25:30] if name.endswith("crc") else arr[45:50, 45:50]  # in shard (1, 1)
    assert_names_file(info.value, shard, "c/1/1")
    assert_same_bits(arr[:20, :20], s.expected[:20, :20])


@pytest.mark.parametrize("damage", ["outer index", "inner index", "truncate"])
def test_corrupt_nested_shard(stores, tmp_path, io, damage):
    # 40x40 shards of 20x20 inner shards (their index at the start) of 10x10 chunks; both
    # indexes end with a crc32c. Damage is CorruptDataError naming the shard; others read.
    s = stores.fresh("z_nested_shard", tmp_path)
    shard = s.path / "c" / "1" / "1"
    data = shard.read_bytes()
    if damage == "outer index":
        flip_byte(shard, len(data) - 10)  # inside the outer index, at the end
    elif damage == "inner index":
        flip_byte(shard, 3)  # the first inner shard starts the file, its index first
    else:
        shard.write_bytes(data[: len(data) // 2])
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises((lsio.CorruptDataError, lsio.StorageError)) as info:
        arr[40:80, 40:80]
    assert_names_file(info.value, shard, "c/1/1")
    assert_same_bits(arr[:40, :40], s.expected[:40, :40])


def test_shard_compressed_whole_larger_than_its_codecs_can_make_is_refused(stores, tmp_path, io):
    s = stores.fresh("z_whole_shard_zstd", tmp_path)
    shard = s.path / "c" / "0" / "0"
    shard.write_bytes(garbage(1 << 20))  # 16 inner chunks of 400 B cannot compress to 1 MiB
    with pytest.raises(lsio.CorruptDataError, match="refused before reading it") as info:
        lsio.open(str(s.path), io=io)[0, 0]
    assert_names_file(info.value, shard, "c/0/0")


def test_garbage_zstd_unsharded(stores, tmp_path, io):
    s = stores.fresh("z_plain", tmp_path)
    chunk = s.path / "c" / "1" / "2"
    chunk.write_bytes(garbage(chunk.stat().st_size))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[40, 70]
    assert_names_file(info.value, chunk, "c/1/2")
    assert_same_bits(arr[:32, :], s.expected[:32, :])
    with pytest.raises(lsio.CorruptDataError) as info:
        arr.read_crops(np.array([[0, 0], [33, 65]]), (3, 3))
    assert_names_file(info.value, chunk, "c/1/2")


def test_garbage_zstd_inner_chunk(stores, tmp_path, io):
    s = stores.fresh("z_shard_zstd_end", tmp_path)
    shard = s.path / "c" / "0" / "1"
    idx = shard_index(shard, 25, "end")
    # inner chunk (1, 2): rows 10-19, cols 70-79
    off, nb = (int(x) for x in idx[7])
    overwrite(shard, off, garbage(nb, 1))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[10:20, 70:80]
    assert_names_file(info.value, shard, "c/0/1")
    assert_same_bits(arr[20:50, 50:], s.expected[20:50, 50:])


def test_garbage_gzip_chunk(stores, tmp_path, io):
    s = stores.fresh("z_gzip_v2dot", tmp_path)
    chunk = s.path / "1.1"
    chunk.write_bytes(b"\x1f\x8b\x08\x00" + garbage(60, 2))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[30:60, 30:60]
    assert_names_file(info.value, chunk, "1.1")


def test_garbage_blosc_unsharded(stores, tmp_path, io):
    s = stores.fresh("z_blosc", tmp_path)
    chunk = s.path / "c" / "1" / "2"
    chunk.write_bytes(garbage(chunk.stat().st_size, 4))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError, match="blosc") as info:
        arr[40, 70]
    assert_names_file(info.value, chunk, "c/1/2")
    assert_same_bits(arr[:32, :], s.expected[:32, :])


@pytest.mark.parametrize("cut", [1, 17, "half"])
def test_truncated_blosc_unsharded(stores, tmp_path, io, cut):
    """A blosc frame missing its tail, with or without the header's compressed size
    patched to match (then only the decompressor can notice), is corrupt."""
    s = stores.fresh("z_blosc", tmp_path)
    chunk = s.path / "c" / "0" / "1"
    frame = bytearray(chunk.read_bytes())
    n = len(frame) // 2 if cut == "half" else len(frame) - cut
    for patch in (False, True):
        t = bytearray(frame[:n])
        if patch:
            t[12:16] = n.to_bytes(4, "little")
        chunk.write_bytes(bytes(t))
        arr = lsio.open(str(s.path), io=io)
        with pytest.raises(lsio.CorruptDataError, match="blosc") as info:
            arr[0:32, 32:64]
        assert_names_file(info.value, chunk, "c/0/1")


def test_inner_crc32c_mismatch_sharded(stores, tmp_path, io):
    s = stores.fresh("z_shard_be_crc", tmp_path)  # inner [bytes big, crc32c]
    shard = s.path / "c" / "1" / "1"
    idx = shard_index(shard, 25, "end")
    off, nb = (int(x) for x in idx[0])  # inner chunk (0, 0)
    assert nb == 10 * 10 * 2 + 4
    flip_byte(shard, off + 17, 0x10)
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[50:60, 50:60]
    assert_names_file(info.value, shard, "c/1/1")
    assert_same_bits(arr[60:, 60:], s.expected[60:, 60:])


def test_inner_crc32c_mismatch_unsharded(stores, tmp_path, io):
    s = stores.fresh("z_crc_defaultdot", tmp_path)  # [bytes, crc32c], "." keys
    chunk = s.path / "c.1.1"
    flip_byte(chunk, chunk.stat().st_size - 1)  # inside the stored checksum
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[16:32, 32:64]
    assert_names_file(info.value, chunk, "c.1.1")


def test_zstd_checksum_mismatch_unsharded(stores, tmp_path, io):
    s = stores.fresh("z_zstd_checksum", tmp_path)
    chunk = s.path / "c" / "1" / "1"
    flip_byte(chunk, chunk.stat().st_size - 1)  # last byte of the checksum
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[20, 20]
    assert_names_file(info.value, chunk, "c/1/1")


def test_zstd_checksum_mismatch_sharded(stores, tmp_path, io):
    s = stores.fresh("z_shard_zstd_end", tmp_path)  # inner zstd checksum=true
    shard = s.path / "c" / "1" / "0"
    idx = shard_index(shard, 25, "end")
    off, nb = (int(x) for x in idx[24])  # inner chunk (4, 4)
    flip_byte(shard, off + nb - 2)
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[90:, 40:50]
    assert_names_file(info.value, shard, "c/1/0")


def test_chunk_decodes_to_wrong_size(stores, tmp_path, io):
    s = stores.fresh("z_plain", tmp_path)
    chunk = s.path / "c" / "0" / "0"
    # a valid zstd frame, but of 100 bytes instead of 32*32*2
    chunk.write_bytes(numcodecs.Zstd(level=1).encode(bytes(100)))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[:5, :5]
    assert_names_file(info.value, chunk, "c/0/0")

    s2 = stores.fresh("z_nocomp_v2slash", tmp_path / "b")
    chunk = s2.path / "1" / "1"
    chunk.write_bytes(chunk.read_bytes()[:-4])  # uncompressed, 4 bytes short
    arr = lsio.open(str(s2.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[16:32, 16:32]
    assert_names_file(info.value, chunk, "1/1")


def test_uncompressed_inner_chunk_wrong_size(stores, tmp_path, io):
    s = stores.fresh("z_shard_nocomp", tmp_path)  # inner [bytes] only
    shard = s.path / "c" / "0" / "0"
    idx = shard_index(shard, 10, "end")
    off, nb = (int(x) for x in idx[3])
    assert nb == 10 * 25 * 4
    entry = np.array([off, nb - 4], "<u8").tobytes()
    data = bytearray(shard.read_bytes())
    pos = len(data) - (10 * 16 + 4) + 16 * 3
    data[pos:pos + 16] = entry
    # recompute the index crc32c so that only the size is wrong
    index = bytes(data[len(data) - (10 * 16 + 4): len(data) - 4])
    data[-4:] = crc32c(index).to_bytes(4, "little")
    shard.write_bytes(bytes(data))
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[...]
    assert_names_file(info.value, shard, "c/0/0")


def test_shard_path_is_directory(stores, tmp_path, io):
    s = stores.fresh("z_shard_zstd_end", tmp_path)
    shard = s.path / "c" / "1" / "1"
    shard.unlink()
    shard.mkdir()
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.StorageError) as info:
        arr[50:, 50:]
    assert isinstance(info.value, OSError)
    assert_names_file(info.value, shard, "c/1/1")
    assert_same_bits(arr[:50, :], s.expected[:50, :])


def test_chunk_path_is_directory(stores, tmp_path, io):
    s = stores.fresh("z_plain", tmp_path)
    chunk = s.path / "c" / "2" / "2"
    chunk.unlink()
    chunk.mkdir()
    arr = lsio.open(str(s.path), io=io)
    with pytest.raises(lsio.StorageError) as info:
        arr.read_crops(np.array([[64, 64]]), (4, 4))
    assert_names_file(info.value, chunk, "c/2/2")


def test_error_does_not_poison_later_reads(stores, tmp_path, io):
    """After a CorruptDataError, repairing the file makes reads succeed."""
    s = stores.fresh("z_plain", tmp_path)
    chunk = s.path / "c" / "0" / "0"
    good = chunk.read_bytes()
    chunk.write_bytes(garbage(len(good), 3))
    arr = lsio.open(str(s.path), io=io, threads=2)
    for _ in range(3):
        with pytest.raises(lsio.CorruptDataError):
            arr[...]
    chunk.write_bytes(good)
    fresh = lsio.open(str(s.path), io=io, threads=2)
    assert_same_bits(fresh[...], s.expected)


def test_missing_paths_are_file_not_found_errors(tmp_path):
    """Python's conventions: a missing array is a FileNotFoundError (as zarr-python and xarray
    raise) as well as an lsio.StorageError, named once in the message, and a typo in an array
    name lists the group's arrays."""
    import zarr

    missing = tmp_path / "nope.zarr"
    with pytest.raises(FileNotFoundError) as e:
        lsio.open(str(missing))
    assert isinstance(e.value, lsio.StorageError) and isinstance(e.value, lsio.NotFoundError)
    assert e.value.errno == errno.ENOENT
    assert str(e.value).count(str(missing)) == 1, str(e.value)
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("t2m", shape=(4,), dtype="f4")
    g.create_array("u10", shape=(4,), dtype="f4")
    with pytest.raises(FileNotFoundError, match=r"no array 't2'.*'t2m', 'u10'.*did you mean 't2m'"):
        lsio.open(str(tmp_path / "g.zarr"), "t2")
    with pytest.raises(FileNotFoundError):
        lsio.open_group(str(tmp_path / "nothing.zarr"))


def test_a_broken_member_is_not_reported_missing(tmp_path):
    import zarr

    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("t", shape=(4,), dtype="f4")
    g.create_array("u", shape=(4,), dtype="f4")
    (tmp_path / "g.zarr" / "t" / "zarr.json").write_text("{not json")
    with pytest.raises(lsio.FormatError):
        lsio.open(str(tmp_path / "g.zarr"), "t")
