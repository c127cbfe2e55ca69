"""numcodecs' bz2 and lzma compressors, its 32-bit checksum codecs (crc32, adler32,
fletcher32), its element-converting v2 filters (fixedscaleoffset, quantize, bitround: decoded
bit for bit as numpy computes them), and numcodecs' own names of codecs lsio reads (zlib, gzip, zstd, shuffle as a
compressor), as zarr-python writes them: Zarr v2 compressors and filters, and v3 arrays with
``zarr.codecs.numcodecs`` codecs. Every array is read whole and by crops and compared bit for
bit with zarr-python; a flipped byte under a checksum is ``CorruptDataError``. Raw lzma
streams (format 3) take their filter chain from the metadata: LZMA1 and LZMA2 with presets and
explicit options, delta and BCJ filters; a chain lsio refuses is a typed error naming it.
"""

from __future__ import annotations

import itertools
import json
import lzma
from pathlib import Path

import numpy as np
import pytest
import zarr
from numcodecs import BZ2, LZMA, Adler32, BitRound, CRC32, FixedScaleOffset, Fletcher32, Quantize, Shuffle, Zlib, Zstd

import lsio
from stores import assert_same_bits

zn = pytest.importorskip("zarr.codecs.numcodecs")

SHAPE, CHUNKS = (23, 17), (8, 5)  # partial edge chunks


def _data(dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 50, SHAPE)  # compressible but not constant
    return (base * 3 + np.arange(SHAPE[1])).astype(dtype)


V2_COMPRESSORS = {
    "bz2": BZ2(level=1),
    "bz2-9": BZ2(level=9),
    "lzma-xz": LZMA(),
    "lzma-alone": LZMA(format=2, preset=1),
    "lzma-xz-check-none": LZMA(check=0, preset=0),
    "lzma-raw-lzma2": LZMA(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2}]),
    "lzma-raw-delta-lzma2": LZMA(format=lzma.FORMAT_RAW,
                                 filters=[{"id": lzma.FILTER_DELTA, "dist": 4}, {"id": lzma.FILTER_LZMA2, "preset": 1}]),
    "lzma-raw-lzma1-options": LZMA(format=lzma.FORMAT_RAW,
                                   filters=[{"id": lzma.FILTER_LZMA1, "preset": 9, "dict_size": 1 << 16,
                                             "lc": 0, "lp": 2, "pb": 2, "mode": lzma.MODE_FAST, "nice_len": 32}]),
    "lzma-raw-x86-lzma2": LZMA(format=lzma.FORMAT_RAW,
                               filters=[{"id": lzma.FILTER_X86, "start_offset": 16}, {"id": lzma.FILTER_LZMA2}]),
    "crc32": CRC32(),
    "crc32-end": CRC32(location="end"),
    "adler32": Adler32(),
    "adler32-end": Adler32(location="end"),
    "fletcher32": Fletcher32(),
    "shuffle": Shuffle(elementsize=4),
}
V2_FILTERS = {
    "crc32+zstd": ([CRC32()], Zstd(level=1)),
    "adler32+zlib": ([Adler32(location="end")], Zlib(level=1)),
    "fletcher32+bz2": ([Fletcher32()], BZ2()),
    "bz2 as a filter": ([BZ2(level=1)], None),
    "shuffle+lzma": ([Shuffle(elementsize=4)], LZMA(preset=1)),
}


def _same_reads(path: Path, want: np.ndarray) -> None:
    arr = lsio.open(str(path))
    assert_same_bits(arr[...], want)
    assert_same_bits(arr[3:20, 2:11], want[3:20, 2:11])
    starts = np.array([[0, 0], [9, 4], [15, 12]])
    got = arr.read_crops(starts, (8, 5))
    for k, s in enumerate(starts):
        assert_same_bits(got[k], want[s[0]:s[0] + 8, s[1]:s[1] + 5])


@pytest.mark.parametrize("name,dtype", list(itertools.product(V2_COMPRESSORS, ["<i4", ">f4"])))
def test_v2_compressors(tmp_path, name, dtype):
    path = tmp_path / "a.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2,
                          compressors=V2_COMPRESSORS[name], fill_value=0)
    z[...] = _data(dtype, 1)
    _same_reads(path, zarr.open_array(str(path), mode="r")[...])


@pytest.mark.parametrize("name", list(V2_FILTERS))
def test_v2_filters(tmp_path, name):
    filters, compressor = V2_FILTERS[name]
    path = tmp_path / "f.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype="<u4", zarr_format=2,
                          filters=filters, compressors=compressor, fill_value=0)
    z[...] = _data("<u4", 2)
    _same_reads(path, zarr.open_array(str(path), mode="r")[...])


V3_CODECS = {
    "bz2": [zn.BZ2(level=2)],
    "lzma": [zn.LZMA(preset=1)],
    "lzma-raw": [zn.LZMA(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_DELTA, "dist": 2},
                                                          {"id": lzma.FILTER_LZMA2, "preset": 0}])],
    "crc32": [zn.CRC32()],
    "adler32-end": [zn.Adler32(location="end")],
    "fletcher32": [zn.Fletcher32()],
    "zlib": [zn.Zlib(level=3)],
    "gzip": [zn.GZip(level=3)],
    "zstd": [zn.Zstd(level=2)],
    "zstd+crc32": [zn.Zstd(level=1), zn.CRC32()],
    "shuffle+bz2": [zn.Shuffle(elementsize=4), zn.BZ2(level=1)],
}


@pytest.mark.parametrize("name,sharded", list(itertools.product(V3_CODECS, [False, True])))
def test_v3_numcodecs_names(tmp_path, name, sharded):
    path = tmp_path / "v3.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=(4, 5) if sharded else CHUNKS,
                          shards=(8, 10) if sharded else None, dtype="<f4", fill_value=0,
                          compressors=V3_CODECS[name], zarr_format=3)
    z[...] = _data("<f4", 3)
    _same_reads(path, zarr.open_array(str(path), mode="r")[...])


V3_ELEMENT_FILTERS = {
    # name: (array dtype, filters); zarr-python runs them as array -> array codecs
    "fixedscaleoffset": ("<f8", [zn.FixedScaleOffset(offset=50, scale=10, dtype="<f8", astype="<i2")]),
    "fixedscaleoffset to u1": ("<f4", [zn.FixedScaleOffset(offset=0, scale=2, dtype="<f4", astype="|u1")]),
    "quantize": ("<f8", [zn.Quantize(digits=2, dtype="<f8")]),
    "quantize f4": ("<f4", [zn.Quantize(digits=1, dtype="<f4")]),
    "delta": ("<i4", [zn.Delta(dtype="<i4")]),
    "delta i8": ("<i8", [zn.Delta(dtype="<i8")]),
    "bitround": ("<f4", [zn.BitRound(keepbits=6)]),
    "bitround+fixedscaleoffset": ("<f4", [zn.BitRound(keepbits=6),
                                          zn.FixedScaleOffset(offset=0, scale=100, dtype="<f4", astype="<i4")]),
    "big-endian array": (">f8", [zn.FixedScaleOffset(offset=50, scale=10, dtype="<f8", astype="<i2")]),
}


@pytest.mark.parametrize("name,sharded", list(itertools.product(V3_ELEMENT_FILTERS, [False, True])))
def test_v3_numcodecs_element_filters(tmp_path, name, sharded):
    dtype, filters = V3_ELEMENT_FILTERS[name]
    path = tmp_path / "e.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=(4, 5) if sharded else CHUNKS,
                          shards=(8, 10) if sharded else None, dtype=dtype, fill_value=0, filters=filters,
                          compressors=[zn.Zstd(level=1)], zarr_format=3)
    values = np.random.default_rng(4).random(SHAPE) * 90
    z[...] = values.astype(dtype) if dtype[1] == "f" else (values * 1000).astype(dtype)
    want = zarr.open_array(str(path), mode="r")[...]
    got = lsio.open(str(path))
    assert got[...].tobytes() == want.astype(got.dtype).tobytes()
    _same_reads(path, want.astype(got.dtype))


def test_v3_element_filters_lsio_does_not_run_are_typed_errors(tmp_path):
    path = tmp_path / "d.zarr"
    z = zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<i4", fill_value=0,
                          filters=[zn.Delta(dtype="<i4", astype="<i2")], compressors=None, zarr_format=3)
    z[...] = np.arange(8)
    with pytest.raises(lsio.UnsupportedError, match="astype"):
        lsio.open(str(path))


def _flip_a_payload_byte(chunk: Path) -> None:
    b = bytearray(chunk.read_bytes())
    b[len(b) // 2] ^= 0x10  # inside the data, not the stored checksum
    chunk.write_bytes(bytes(b))


@pytest.mark.parametrize("codec,label", [(CRC32(), "crc32"), (Adler32(location="end"), "adler32"),
                                         (Fletcher32(), "fletcher32")])
def test_a_flipped_byte_under_a_checksum_is_corrupt_data(tmp_path, codec, label):
    path = tmp_path / "c.zarr"
    z = zarr.create_array(str(path), shape=(16,), chunks=(8,), dtype="<i4", zarr_format=2,
                          compressors=codec, fill_value=0)
    z[...] = np.arange(16, dtype="<i4")
    _flip_a_payload_byte(path / "1")
    arr = lsio.open(str(path))
    np.testing.assert_array_equal(arr[:8], np.arange(8))  # the intact chunk still reads
    with pytest.raises(lsio.CorruptDataError) as info:
        arr[...]
    msg = str(info.value)
    assert label in msg and "checksum mismatch" in msg and "1" in msg, msg
    with pytest.raises(Exception):
        zarr.open_array(str(path), mode="r")[...]  # zarr-python refuses it too


@pytest.mark.parametrize("codec,label", [(BZ2(), "bz2"), (LZMA(), "lzma")])
def test_a_truncated_compressed_chunk_is_corrupt_data(tmp_path, codec, label):
    path = tmp_path / "t.zarr"
    z = zarr.create_array(str(path), shape=(64,), chunks=(64,), dtype="<i8", zarr_format=2,
                          compressors=codec, fill_value=0)
    z[...] = np.arange(64)
    chunk = path / "0"
    chunk.write_bytes(chunk.read_bytes()[:-7])
    with pytest.raises(lsio.CorruptDataError) as info:
        lsio.open(str(path))[...]
    assert label in str(info.value), str(info.value)


def test_raw_lzma_streams_one_after_another_read_as_python_reads_them(tmp_path):
    # lzma.decompress reads raw streams back to back and drops trailing bytes that are not one.
    path = tmp_path / "r.zarr"
    codec = LZMA(format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2, "preset": 1}])
    z = zarr.create_array(str(path), shape=(64,), chunks=(64,), dtype="<u1", zarr_format=2,
                          compressors=codec, fill_value=0)
    z[...] = np.arange(64, dtype="<u1")
    raw = lzma.compress(bytes(range(32)), format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2}])
    raw2 = lzma.compress(bytes(range(32, 64)), format=lzma.FORMAT_RAW, filters=[{"id": lzma.FILTER_LZMA2}])
    for payload in (raw + raw2, raw + raw2 + b"\x05junk"):  # 0x05: no LZMA2 chunk starts so
        (path / "0").write_bytes(payload)
        want = zarr.open_array(str(path), mode="r")[...]
        np.testing.assert_array_equal(want, np.arange(64))  # what zarr-python reads
        assert_same_bits(lsio.open(str(path))[...], want)
    for cut in (raw[:-3], raw + raw2 + b"\x01junk"):  # 0x01 starts a stored chunk, cut short
        (path / "0").write_bytes(cut)
        with pytest.raises(Exception):
            zarr.open_array(str(path), mode="r")[...]
        with pytest.raises(lsio.CorruptDataError, match="lzma"):
            lsio.open(str(path))[...]


@pytest.mark.parametrize("filters,error,words", [
    ([], lsio.FormatError, "non-empty"),
    ([{"id": lzma.FILTER_LZMA2, "dict_size": 3 << 30}], lsio.UnsupportedError, "more than lsio allows"),
    ([{"id": lzma.FILTER_LZMA2, "lc": 9}], lsio.FormatError, '"lc" must be an integer in 0..4'),
    ([{"id": lzma.FILTER_LZMA2, "colour": 1}], lsio.FormatError, 'does not take "colour"'),
    ([{"id": 99}], lsio.UnsupportedError, "filter id 99"),
    ([{"id": lzma.FILTER_DELTA}] * 5, lsio.FormatError, "at most 4 filters"),
])
def test_raw_lzma_chains_lsio_refuses_are_typed_errors(tmp_path, filters, error, words):
    path = tmp_path / "r.zarr"
    z = zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<i4", zarr_format=2,
                          compressors=LZMA(format=3, filters=[{"id": 33}]), fill_value=0)
    z[...] = np.arange(8)
    meta = json.loads((path / ".zarray").read_text())
    meta["compressor"]["filters"] = filters
    (path / ".zarray").write_text(json.dumps(meta))
    with pytest.raises(error) as info:
        lsio.open(str(path))
    assert type(info.value) is error
    assert "lzma" in str(info.value) and words in str(info.value), str(info.value)


CONVERT_CASES = {
    # name: (array dtype, filters, compressor, values)
    "fso f8->i2": ("<f8", [FixedScaleOffset(offset=1000, scale=10, dtype="<f8", astype="<i2")], Zstd(level=1), "temps"),
    "fso f8->u1": ("<f8", [FixedScaleOffset(offset=0, scale=2.5, dtype="<f8", astype="u1")], None, "unit"),
    "fso f4->i4 big": (">f4", [FixedScaleOffset(offset=-3.25, scale=1000, dtype=">f4", astype=">i4")], BZ2(), "temps"),
    "fso f4->f4": ("<f4", [FixedScaleOffset(offset=0.1, scale=3, dtype="<f4", astype="<f4")], None, "temps"),
    "fso f8->f4": ("<f8", [FixedScaleOffset(offset=7, scale=0.3, dtype="<f8", astype="<f4")], None, "temps"),
    "fso i4->u2": ("<i4", [FixedScaleOffset(offset=100, scale=1, dtype="<i4", astype="<u2")], None, "ints"),
    "quantize f8->f4": ("<f8", [Quantize(digits=3, dtype="<f8", astype="<f4")], Zlib(level=1), "temps"),
    "quantize f4": ("<f4", [Quantize(digits=1, dtype="<f4")], None, "temps"),
    # float16 on either side: loaded exactly, stored in one rounding (these decoded to zeros)
    "quantize f4->f2": ("<f4", [Quantize(digits=2, dtype="<f4", astype="<f2")], None, "temps"),
    "quantize f8->f2 big": ("<f8", [Quantize(digits=2, dtype="<f8", astype=">f2")], Zstd(level=1), "unit"),
    "quantize f2->f4": ("<f2", [Quantize(digits=2, dtype="<f2", astype="<f4")], None, "unit"),
    "fso f2->i2": ("<f2", [FixedScaleOffset(offset=1, scale=100, dtype="<f2", astype="<i2")], None, "unit"),
    "fso f2->u1": ("<f2", [FixedScaleOffset(offset=1, scale=2, dtype="<f2", astype="u1")], None, "unit"),
    "fso >f2->i4": (">f2", [FixedScaleOffset(offset=-3, scale=1000, dtype=">f2", astype="<i4")], None, "unit"),
    "bitround f4": ("<f4", [BitRound(keepbits=6)], Zstd(level=1), "temps"),
    "bitround f8 + crc32": ("<f8", [BitRound(keepbits=10), CRC32()], None, "temps"),
}


def _values(kind: str, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(5)
    if kind == "temps":
        v = 250 + 40 * rng.random(SHAPE)
        if np.dtype(dtype).kind == "f" and "fso f4->i4" not in kind:
            v[0, :3] = [-1.05, 0.05, 3.999]  # values that round differently if done wrong
    elif kind == "unit":
        v = rng.random(SHAPE) * 100
    else:
        v = rng.integers(0, 60000, SHAPE) - 100
    return v.astype(dtype)


@pytest.mark.parametrize("name", list(CONVERT_CASES))
def test_v2_element_converting_filters(tmp_path, name):
    dtype, filters, compressor, kind = CONVERT_CASES[name]
    path = tmp_path / "cv.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2,
                          filters=filters, compressors=compressor, fill_value=0)
    z[...] = _values(kind, dtype)
    z[20:, 15:] = 0  # a chunk that is all fill is not written
    _same_reads(path, zarr.open_array(str(path), mode="r")[...])


def test_float16_fixedscaleoffset_is_refused_naming_it(tmp_path):
    path = tmp_path / "h.zarr"
    z = zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<f2", zarr_format=2, compressors=None,
                          filters=[FixedScaleOffset(offset=0, scale=2, dtype="<f2", astype="<f2")], fill_value=0)
    z[...] = np.arange(8)
    with pytest.raises(lsio.UnsupportedError) as info:
        lsio.open(str(path))
    assert "fixedscaleoffset" in str(info.value) and "float16" in str(info.value)
