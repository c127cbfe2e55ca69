"""Zarr v2 arrays (.zarray/.zattrs), written by zarr-python 3 (``zarr_format=2``) and by
TensorStore's ``zarr`` driver, read by lsio and compared bit for bit with zarr-python.

The matrix crosses dtype x byte order x order (C/F) x dimension_separator x compressor
(none, zstd, gzip, zlib, lz4, blosc with each inner codec and shuffle) x fill value (numbers, null,
NaN/Infinity, bool, complex) with
partially written arrays (missing chunks read as the fill value); a seeded sample of it runs
(all of it with LSIO_TEST_FULL_MATRIX=1). Every store is read whole, by random numpy keys and
by read_crops batches, with both I/O paths and 1 or 2 threads. What lsio does not read yet
(the astype filter, delta with astype, raw lzma streams) raises UnsupportedError naming it
(bz2, lzma, the checksums, fixedscaleoffset, quantize and bitround are in
test_numcodecs_long_tail.py);
strings (fixed-width and vlen-utf8) are in test_strings.py.
Filters (delta, shuffle, both) are crossed with dtypes and compressors separately.
"""

from __future__ import annotations

import itertools
import json
import os
import zlib as _zlib
from pathlib import Path

import numpy as np
import pytest
import tensorstore as ts
import zarr
from numcodecs import LZ4, AsType, Blosc, Delta, GZip, Shuffle, Zlib, Zstd

import lsio
from selections import crop_slices, random_crops, random_keys
from stores import assert_same_bits, assert_same_values, sample

SHAPE = (13, 17, 6)
CHUNKS = (4, 6, 4)
WRITTEN = (slice(0, 9), slice(None), slice(0, 4))  # the rest is missing: reads as fill

DTYPES = ["|b1", "|i1", "|u1", "<i2", ">i2", "<u4", ">u4", "<i8", ">i8", "<u8",
          "<f2", ">f2", "<f4", ">f4", "<f8", ">f8", "<c8", ">c16"]
COMPRESSORS = {"none": None, "zstd": Zstd(level=3), "gzip": GZip(level=1), "zlib": Zlib(level=2),
               # zarr-python 2's default, and the other shuffles and inner codecs of c-blosc
               "blosc-lz4-byte": Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE),
               "blosc-zstd-bit": Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE),
               "blosc-blosclz-none": Blosc(cname="blosclz", clevel=9, shuffle=Blosc.NOSHUFFLE),
               "blosc-zlib-auto": Blosc(cname="zlib", clevel=1, shuffle=Blosc.AUTOSHUFFLE, blocksize=256),
               "blosc-lz4hc-byte": Blosc(cname="lz4hc", clevel=4, shuffle=Blosc.SHUFFLE),
               "lz4": LZ4(acceleration=1)}


def _fill_for(dt: np.dtype, k: int):
    """A fill value per dtype kind (k varies it): null, specials, extremes."""
    if k == 0:
        return None  # "fill_value": null -> the dtype's zero, as zarr-python 3 reads it
    if dt.kind == "b":
        return True
    if dt.kind in "iu":
        return int(np.iinfo(dt).max if k == 1 else np.iinfo(dt).min)
    if dt.kind == "f":
        return [np.nan, np.inf, -np.inf][k % 3]
    return complex(1.5, -np.inf) if k == 1 else complex(np.nan, 2.0)


def _cases():
    cases = []
    for dt, order, sep, comp in itertools.product(DTYPES, "CF", "./", COMPRESSORS):
        cases.append((dt, order, sep, comp, zlib_crc(dt + order + sep + comp) % 3))
    if os.environ.get("LSIO_TEST_FULL_MATRIX") == "1":
        return cases
    rng = np.random.default_rng(2)
    picked = sorted(rng.choice(len(cases), size=60, replace=False))
    # Every dtype, order, separator and compressor is in the sample (checked below).
    return [cases[i] for i in picked]


def zlib_crc(s: str) -> int:
    return _zlib.crc32(s.encode())


CASES = _cases()


def test_sample_covers_every_axis():
    seen = [set(c[i] for c in CASES) for i in range(5)]
    assert len(seen[1]) == 2 and len(seen[2]) == 2 and seen[3] == set(COMPRESSORS) and len(seen[4]) == 3
    kinds = {np.dtype(d).kind for d in seen[0]}
    assert kinds == {"b", "i", "u", "f", "c"}
    assert any(d.startswith(">") for d in seen[0])


def _write_zarr_python(path: Path, dt: str, order: str, sep: str, comp: str, fill_kind: int) -> np.ndarray:
    dtype = np.dtype(dt)
    fill = _fill_for(dtype, fill_kind)
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dtype, zarr_format=2, order=order,
                          compressors=COMPRESSORS[comp], fill_value=fill,
                          chunk_key_encoding={"name": "v2", "separator": sep})
    data = sample(dtype.newbyteorder("="), SHAPE, np.random.default_rng(zlib_crc(str(path))))
    z[WRITTEN] = data[WRITTEN]
    return data


@pytest.fixture(scope="module")
def v2_root(tmp_path_factory):
    return tmp_path_factory.mktemp("v2")


def _case_id(c):
    return f"{c[0]}-{c[1]}-{'dot' if c[2] == '.' else 'slash'}-{c[3]}-fill{c[4]}"


@pytest.fixture(scope="module", params=CASES, ids=_case_id)
def v2_store(request, v2_root):
    dt, order, sep, comp, fill_kind = request.param
    path = v2_root / (_case_id(request.param).replace("|", "p").replace("<", "le").replace(">", "be") + ".zarr")
    if not path.exists():
        _write_zarr_python(path, dt, order, sep, comp, fill_kind)
    return path


def _same(got, want, context):
    """Bits where the dtypes agree; zarr-python keeps the stored byte order, lsio returns native."""
    assert got.dtype == want.dtype.newbyteorder("="), (context, got.dtype, want.dtype)
    assert_same_bits(got, np.asarray(want).astype(got.dtype), context)


@pytest.mark.parametrize("io,threads", [("pread", 1), ("auto", 2)])
def test_v2_matches_zarr_python(v2_store, io, threads):
    z = zarr.open_array(str(v2_store), mode="r")
    arr = lsio.open(str(v2_store), io=io, threads=threads)
    full = z[...]
    _same(arr[...], full, f"{v2_store.name}[...]")
    for key in random_keys(zlib_crc(v2_store.name), SHAPE, 12):
        _same(arr[key], full[key], f"{v2_store.name}[{key!r}]")
    starts, crop = random_crops(zlib_crc(v2_store.name) + 1, SHAPE, arr.chunks)
    got = arr.read_crops(starts, crop)
    want = np.stack([full[crop_slices(s, crop)] for s in starts])
    _same(got, want, f"{v2_store.name} crops {crop}")


def test_v2_chunk_files_through_every_io_backend(tmp_path, io_mode):
    """Chunk files are opened by their read and left O_NONBLOCK for inline page-cache hits;
    forced io_uring reads every one through the ring, which needs the flag cleared."""
    data = np.arange(3 * 200 * 300, dtype="<f4").reshape(3, 200, 300) * 0.5
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=data.shape, chunks=(1, 64, 64), dtype="<f4",
                          zarr_format=2, fill_value=0, compressors=Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE))
    z[:] = data
    (tmp_path / "a.zarr" / "1.1.1").unlink()  # a missing chunk reads as fill
    want = z[...]
    for threads in (1, 2):
        arr = lsio.open(str(tmp_path / "a.zarr"), io=io_mode, threads=threads)
        assert_same_bits(arr[...], want, io_mode)
        assert_same_bits(arr[1:3, 17:190, 5:299], want[1:3, 17:190, 5:299], io_mode)
        starts = np.array([[0, 0, 0], [1, 60, 70], [2, 136, 236]])
        assert_same_bits(arr.read_crops(starts, (1, 64, 64)),
                         np.stack([want[a:a + 1, b:b + 64, c:c + 64] for a, b, c in starts]), io_mode)


def test_v2_metadata(v2_store):
    z = zarr.open_array(str(v2_store), mode="r")
    arr = lsio.open(str(v2_store))
    assert arr.shape == SHAPE and arr.chunks == CHUNKS and arr.shards is None
    assert arr.dtype == z.dtype.newbyteorder("=") and arr.dtype.isnative
    meta = json.loads((v2_store / ".zarray").read_text())
    assert arr.zarr_format == 2
    fill = z.fill_value if z.fill_value is not None else np.zeros((), arr.dtype)[()]
    assert_same_bits(np.asarray(arr.fill_value), np.asarray(fill).astype(arr.dtype), v2_store.name)
    assert ("transpose" in arr.codecs) == (meta["order"] == "F")


# --------------------------------------------------------------------------------------
# Edge cases, attributes, TensorStore's writer, remote
# --------------------------------------------------------------------------------------


def test_v2_zero_d_and_empty(tmp_path):
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(), dtype="<f8", zarr_format=2, fill_value=np.nan)
    a = lsio.open(str(tmp_path / "s.zarr"))
    assert np.isnan(a[...])  # never written: the fill
    z[...] = 2.5
    assert lsio.open(str(tmp_path / "s.zarr"))[...] == 2.5
    zarr.create_array(str(tmp_path / "e.zarr"), shape=(0, 4), chunks=(2, 2), dtype="<i4", zarr_format=2)
    e = lsio.open(str(tmp_path / "e.zarr"))
    assert e[...].shape == (0, 4)


def test_v2_attributes_and_dimension_names(tmp_path):
    z = zarr.create_array(str(tmp_path / "a.zarr"), shape=(4, 5), chunks=(2, 2), dtype="<i4", zarr_format=2,
                          attributes={"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K", "scale": 0.5})
    z[...] = np.arange(20).reshape(4, 5)
    a = lsio.open(str(tmp_path / "a.zarr"))
    assert a.attrs == {"_ARRAY_DIMENSIONS": ["y", "x"], "units": "K", "scale": 0.5} == z.attrs.asdict()
    assert a.dimension_names == ("y", "x")
    np.testing.assert_array_equal(a[...], np.arange(20).reshape(4, 5))


@pytest.mark.parametrize("compressor", [None, {"id": "zlib", "level": 3}, {"id": "zstd", "level": 1},
                                        {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": -1}])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_written_by_tensorstore(tmp_path, compressor, order):
    path = tmp_path / "t.zarr"
    t = ts.open({"driver": "zarr", "kvstore": {"driver": "file", "path": str(path)},
                 "metadata": {"shape": [30, 20], "chunks": [8, 6], "dtype": ">i4", "order": order,
                              "compressor": compressor, "fill_value": None}},
                create=True).result()
    data = (np.arange(600, dtype=np.int32).reshape(30, 20) * 7919) - 100000
    t[:17, 3:] = data[:17, 3:]
    want = zarr.open_array(str(path), mode="r")[...]
    got = lsio.open(str(path))[...]
    _same(got, want, "tensorstore v2")
    expected = np.zeros_like(data)
    expected[:17, 3:] = data[:17, 3:]
    np.testing.assert_array_equal(got, expected)


def test_v2_over_http(nginx_server, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = _write_zarr_python(root / "v.zarr", ">f4", "F", "/", "zstd", 2)
    server = nginx_server(root)
    url = server.url("v.zarr")
    want = zarr.open_array(str(root / "v.zarr"), mode="r")[...]
    arr = lsio.open(url)
    assert arr.zarr_format == 2
    _same(arr[...], want, url)
    assert np.array_equal(want[WRITTEN], data[WRITTEN].astype(want.dtype), equal_nan=True)
    starts, crop = random_crops(5, SHAPE, arr.chunks)
    _same(arr.read_crops(starts, crop), np.stack([want[crop_slices(s, crop)] for s in starts]), url + " crops")


# --------------------------------------------------------------------------------------
# What lsio does not read yet: a typed error naming it
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kw,words", [
    ({"filters": [AsType(encode_dtype="<i2", decode_dtype="<i4")], "compressors": None}, "astype"),
    ({"filters": [Delta(dtype="<i4", astype="<i2")], "compressors": None}, "astype"),
])
def test_v2_unsupported_names_the_codec(tmp_path, kw, words):
    path = tmp_path / "u.zarr"
    z = zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<i4", zarr_format=2, **kw)
    z[...] = np.arange(8)
    with pytest.raises(lsio.UnsupportedError) as info:
        lsio.open(str(path))
    assert words in str(info.value).lower()
    assert ".zarray" in str(info.value)


FILTER_CASES = [
    ("<i4", [Delta(dtype="<i4")], Zstd(level=1)),
    (">i8", [Delta(dtype=">i8")], None),
    ("|u1", [Delta(dtype="|u1")], LZ4()),  # wraps around
    ("<u2", [Delta(dtype="<u2"), Shuffle(elementsize=2)], Blosc(cname="lz4", shuffle=Blosc.NOSHUFFLE)),
    ("<f8", [Delta(dtype="<f8")], Zlib(level=1)),  # a running sum in float64, as np.cumsum
    (">f4", [Shuffle(elementsize=4)], GZip(level=1)),
    ("<c16", [Shuffle(elementsize=16)], None),
    ("<i2", [Shuffle(elementsize=2), Delta(dtype="<i2")], Zstd(level=1)),
]


@pytest.mark.parametrize("dt,filters,compressor", FILTER_CASES,
                         ids=[f"{c[0]}-{'+'.join(f.codec_id for f in c[1])}" for c in FILTER_CASES])
@pytest.mark.parametrize("order", ["C", "F"])
def test_v2_filters(tmp_path, dt, filters, compressor, order):
    path = tmp_path / "f.zarr"
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=np.dtype(dt), zarr_format=2, order=order,
                          filters=filters, compressors=compressor, fill_value=3)
    z[WRITTEN] = sample(np.dtype(dt).newbyteorder("="), SHAPE, np.random.default_rng(5))[WRITTEN]
    arr = lsio.open(str(path), threads=2)
    want = zarr.open_array(str(path), mode="r")[...]
    _same(arr[...], want, f"{dt} {filters}")
    starts, crop = random_crops(11, SHAPE, arr.chunks)
    _same(arr.read_crops(starts, crop), np.stack([want[crop_slices(s, crop)] for s in starts]), "crops")


# Shuffle as the last decode stage (NetCDF's deflate + shuffle shape) over every selection
# kind (steps, negative steps, integer keys, partial chunks), with and without a chunk cache
# and a dtype conversion, equal to zarr-python; an elementsize other than the itemsize and a
# big-endian dtype too. (Unshuffling straight into the output instead of into the chunk
# buffer was tried: 4-7% slower on W11, its stores not streaming into the 16 MB output.)
UNSHUFFLE_CASES = [("<f4", 4, Zlib(level=1)), ("<i2", 2, Zstd(level=1)), ("<f8", 8, GZip(level=1)),
                   ("<u4", 4, LZ4()), ("<f4", 2, Zlib(level=1)), (">i4", 4, Zlib(level=1))]


@pytest.mark.parametrize("dt,es,compressor", UNSHUFFLE_CASES,
                         ids=[f"{c[0]}-es{c[1]}-{c[2].codec_id}" for c in UNSHUFFLE_CASES])
def test_shuffle_last_every_selection_kind(tmp_path, dt, es, compressor):
    path = tmp_path / "s.zarr"
    shape, chunks = (13, 70, 45), (4, 32, 16)
    z = zarr.create_array(str(path), shape=shape, chunks=chunks, dtype=np.dtype(dt), zarr_format=2,
                          filters=[Shuffle(elementsize=es)], compressors=compressor, fill_value=3)
    z[:, :60] = sample(np.dtype(dt).newbyteorder("="), shape, np.random.default_rng(7))[:, :60]
    want = zarr.open_array(str(path), mode="r")[...]
    for kw in ({}, {"chunk_cache_bytes": 1 << 20}):
        arr = lsio.open(str(path), threads=2, **kw)
        for key in random_keys(21, shape, 40):
            _same(arr[key], want[key], f"{dt} es={es} {kw} {key}")
        starts, crop = random_crops(12, shape, arr.chunks)
        _same(arr.read_crops(starts, crop), np.stack([want[crop_slices(s, crop)] for s in starts]), "crops")
        if np.dtype(dt).kind == "f":
            np.testing.assert_array_equal(arr.read(np.s_[1:9, 3:50, 2:40], dtype=np.float64),
                                          want[1:9, 3:50, 2:40].astype(np.float64))


def test_v3_numcodecs_lz4_and_shuffle(tmp_path):
    # zarr-python's numcodecs.zarr3 codecs of the same formats (bytes -> bytes there too).
    import warnings

    from numcodecs import zarr3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(str(tmp_path / "n.zarr"), shape=(40, 30), chunks=(16, 16), dtype="<i4",
                              compressors=[zarr3.Shuffle(elementsize=4), zarr3.LZ4(acceleration=2)])
        z[...] = np.arange(1200, dtype="<i4").reshape(40, 30) * 1001
        want = z[...]
    arr = lsio.open(str(tmp_path / "n.zarr"))
    assert "numcodecs.lz4" in arr.codecs
    np.testing.assert_array_equal(arr[...], want)


# lsio unshuffles byte-shuffled blosc frames of 2-, 4- and 8-byte items itself (AVX2, block
# by block; codec/blosc.cc), in place in the read buffer of an unsharded chunk file and on a
# copy of the frame for sharded chunks; 1- and 16-byte items stay with c-blosc. Forced block
# sizes give chunks of several blosc blocks and a short last block (c-blosc raises lz4's to
# 64 KiB and splits each block into byte streams; zstd keeps it as given); values whose byte
# planes compress differently; crops that cut chunks; all compared with zarr-python.
BLOSC_SHUFFLE_CASES = [("<u2", "lz4", 0), ("<i4", "lz4", 8192), ("<f4", "blosclz", 0), ("<f4", "zstd", 3000),
                       ("<f8", "lz4", 4096), ("<i8", "zstd", 5000), ("|u1", "lz4", 0), ("<c16", "lz4", 0),
                       ("<f2", "zstd", 1000)]


def _blosc_values(dt: np.dtype, shape) -> np.ndarray:
    rng = np.random.default_rng(7)
    smooth = np.cumsum(rng.normal(size=shape), axis=-1)  # low planes noisy, high planes smooth
    if dt.kind == "c":
        return (smooth + 1j * smooth[::-1]).astype(dt)
    if dt.kind in "iu":
        return (np.abs(smooth) * 97).astype(dt)
    return smooth.astype(dt)


@pytest.mark.parametrize("dt,cname,blocksize", BLOSC_SHUFFLE_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("layout", ["v2", "v3", "v3-sharded"])
def test_blosc_byte_shuffle_blocks_and_item_sizes(tmp_path, dt, cname, blocksize, layout):
    dt = np.dtype(dt)
    shape, chunks = (5, 301, 203), (2, 150, 200)  # 240 KB float32 chunks: several blosc blocks
    values = _blosc_values(dt, shape)
    path = str(tmp_path / "b.zarr")
    if layout == "v2":
        z = zarr.create_array(path, shape=shape, chunks=chunks, dtype=dt, zarr_format=2, fill_value=0,
                              compressors=Blosc(cname=cname, clevel=5, shuffle=Blosc.SHUFFLE, blocksize=blocksize))
    else:
        from zarr.codecs import BloscCodec

        z = zarr.create_array(path, shape=shape, chunks=chunks if layout == "v3" else (1, 150, 100),
                              shards=None if layout == "v3" else chunks, dtype=dt, fill_value=0,
                              compressors=BloscCodec(cname=cname, clevel=5, shuffle="shuffle",
                                                     typesize=dt.itemsize, blocksize=blocksize))
    z[...] = values
    want = zarr.open_array(path, mode="r")[...]
    for threads in (1, 2):
        arr = lsio.open(path, threads=threads)
        assert_same_bits(arr[...], want, f"{layout} {dt} {cname} whole")
        assert_same_bits(arr[1:4, 7:290, 3:201], want[1:4, 7:290, 3:201], f"{layout} {dt} {cname} box")
        starts, crop = random_crops(5, shape, chunks)
        assert_same_bits(arr.read_crops(starts, crop), np.stack([want[crop_slices(s, crop)] for s in starts]),
                         f"{layout} {dt} {cname} crops")
        # The same chunks again on the same threads (their scratch buffers reused).
        assert_same_bits(arr[...], want, f"{layout} {dt} {cname} again")


def test_corrupt_lz4_and_shuffle_chunks_are_typed_errors(tmp_path):
    path = tmp_path / "c.zarr"
    z = zarr.create_array(str(path), shape=(64,), chunks=(32,), dtype="<i4", zarr_format=2,
                          filters=[Shuffle(elementsize=4)], compressors=LZ4())
    z[...] = np.arange(64)
    good = (path / "0").read_bytes()
    a = lsio.open(str(path))
    for bad in (good[:3], good[:-5], b"\xff\xff\xff\x7f" + good[4:], good[:4] + b"\x00" * 8):
        (path / "0").write_bytes(bad)
        with pytest.raises(lsio.CorruptDataError, match="lz4") as info:
            a[:32]
        assert "0" in str(info.value)
        np.testing.assert_array_equal(a[32:], np.arange(32, 64))


@pytest.mark.parametrize("edit,words", [
    (lambda m: {**m, "order": "K"}, "order"),
    (lambda m: {**m, "dtype": "f4"}, "dtype"),
    (lambda m: {**m, "chunks": [4, 4]}, "rank"),
    (lambda m: {**m, "chunks": [0]}, "chunks"),
    (lambda m: {**m, "dimension_separator": "-"}, "dimension_separator"),
    (lambda m: {k: v for k, v in m.items() if k != "shape"}, "shape"),
    (lambda m: {**m, "zarr_format": 3}, "zarr_format"),
    (lambda m: {**m, "compressor": {"level": 1}}, "id"),
    (lambda m: {**m, "fill_value": "abc"}, "fill"),
])
def test_v2_malformed_metadata(tmp_path, edit, words):
    path = tmp_path / "m.zarr"
    zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<f4", zarr_format=2)
    meta = json.loads((path / ".zarray").read_text())
    (path / ".zarray").write_text(json.dumps(edit(meta)))
    with pytest.raises(lsio.FormatError) as info:
        lsio.open(str(path))
    assert words in str(info.value).lower(), str(info.value)
    assert ".zarray" in str(info.value)
    (path / ".zarray").write_text("{not json")
    with pytest.raises(lsio.FormatError, match="not valid JSON"):
        lsio.open(str(path))


def test_corrupt_v2_chunk_is_a_typed_error(tmp_path):
    path = tmp_path / "c.zarr"
    z = zarr.create_array(str(path), shape=(8,), chunks=(4,), dtype="<f4", zarr_format=2, compressors=Zlib())
    z[...] = np.arange(8)
    (path / "1").write_bytes(b"\x78\x9c garbage")
    a = lsio.open(str(path))
    np.testing.assert_array_equal(a[:4], np.arange(4))
    with pytest.raises(lsio.CorruptDataError) as info:
        a[...]
    assert "1" in str(info.value)


def _v2_group(path: Path, consolidated: bool) -> dict:
    """A zarr-python v2 group: arrays at two levels, attributes, a nested group; returns
    {relative path: numpy data}."""
    g = zarr.open_group(str(path), mode="w", zarr_format=2, attributes={"title": "v2 test", "n": 3})
    data = {"t2m": np.arange(48, dtype="<f4").reshape(6, 8), "sub/u10": np.arange(20, dtype=">i2").reshape(4, 5)}
    a = g.create_array("t2m", shape=(6, 8), chunks=(3, 4), dtype="<f4", compressors=Zstd(level=1),
                       attributes={"_ARRAY_DIMENSIONS": ["lat", "lon"], "units": "K"})
    a[...] = data["t2m"]
    sub = g.create_group("sub", attributes={"level": 1})
    b = sub.create_array("u10", shape=(4, 5), chunks=(2, 5), dtype=">i2", compressors=Zlib(level=1), order="F")
    b[...] = data["sub/u10"]
    if consolidated:
        zarr.consolidate_metadata(str(path), zarr_format=2)
    return data


@pytest.mark.parametrize("consolidated", [False, True])
def test_v2_group(tmp_path, consolidated):
    path = tmp_path / "g.zarr"
    data = _v2_group(path, consolidated)
    g = lsio.open_group(path)
    assert g.consolidated == consolidated
    assert g.array_names == ("t2m",) and g.group_names == ("sub",)
    assert g.attrs == {"title": "v2 test", "n": 3}
    assert dict(g.walk_arrays()).keys() == {"t2m", "sub/u10"}
    for rel, want in data.items():
        arr = g[rel]
        assert arr.zarr_format == 2
        np.testing.assert_array_equal(arr[...], want)
    assert g["sub"].attrs == {"level": 1}
    assert g["t2m"].dimension_names == ("lat", "lon")
    assert "t2m (6, 8) float32" in g.tree() and "u10 (4, 5) int16" in g.tree()
    if consolidated:
        # Listed from .zmetadata: the children's .zarray are not read.
        (path / "t2m" / ".zarray").write_text("garbage")
        assert lsio.open_group(path).array_names == ("t2m",)
        # Listing the directory reads it: a malformed node is not a member (as for v3), said
        # by a warning, and opening it by name raises its error.
        with pytest.warns(UserWarning, match="t2m.*left out of its group's members"):
            g = lsio.open_group(path, consolidated=False)
            assert g.array_names == ()
        with pytest.raises(lsio.FormatError, match="not valid JSON"):
            g["t2m"]
        with pytest.raises(KeyError, match="not a member"):
            g["absent"]
    else:
        with pytest.raises(lsio.FormatError, match="consolidated"):
            lsio.open_group(path, consolidated=True)


def test_v2_group_over_http_and_s3(nginx_server, moto_s3, tmp_path):
    root = tmp_path / "www"
    data = _v2_group(root / "g.zarr", consolidated=True)
    server = nginx_server(root)
    g = lsio.open_group(server.url("g.zarr"))  # HTTP cannot list: .zmetadata lists
    assert g.consolidated and g.array_names == ("t2m",)
    np.testing.assert_array_equal(g["sub/u10"][...], data["sub/u10"])

    (root / "g.zarr" / ".zmetadata").unlink()  # S3 lists the prefixes instead
    bucket = moto_s3.create_bucket("lsio-v2group")
    moto_s3.upload_dir(root / "g.zarr", bucket, "g.zarr")
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
          "secret": moto_s3.secret_access_key, "region": moto_s3.region}
    g = lsio.open_group(f"s3://{bucket}/g.zarr", storage_options=so)
    assert not g.consolidated and g.array_names == ("t2m",) and g.group_names == ("sub",)
    np.testing.assert_array_equal(g["t2m"][...], data["t2m"])


def test_v2_group_members_open_by_path_and_the_cli_reads_v2(tmp_path):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=2)
    a = g.create_array("t2m", shape=(6, 8), chunks=(3, 4), dtype="<f4", compressors=Zstd(level=1))
    a[...] = np.arange(48, dtype="<f4").reshape(6, 8)
    arr = lsio.open(str(tmp_path / "g.zarr"), "t2m")
    np.testing.assert_array_equal(arr[...], a[...])

    import subprocess
    import sys
    for target in (str(tmp_path / "g.zarr" / "t2m"), str(tmp_path / "g.zarr")):
        r = subprocess.run([sys.executable, "-m", "lsio", "info", target], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "(6, 8)" in r.stdout and "zstd" in r.stdout, r.stdout


@pytest.mark.parametrize("consolidated", [True, False])
def test_v2_xarray_dataset_is_identical_to_open_zarr(tmp_path, consolidated):
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(7)
    t2m = rng.standard_normal((4, 5, 6)).astype("f4")
    t2m[0, 0, :3] = np.nan
    q = np.arange(20, dtype="i2").reshape(4, 5)
    q[1, 1] = -1  # the _FillValue: CF-masked to NaN by both readers
    ds = xr.Dataset({"t2m": (("time", "lat", "lon"), t2m, {"units": "K"}), "q": (("time", "lat"), q)},
                    coords={"time": np.arange(4), "lat": np.linspace(0, 1, 5), "lon": np.linspace(0, 2, 6)},
                    attrs={"title": "v2 dataset"})
    path = tmp_path / "ds.zarr"
    encoding = {v: {"compressors": [Zstd(level=1)]} for v in ds.variables}
    encoding["q"]["_FillValue"] = -1
    ds.to_zarr(path, zarr_format=2, consolidated=consolidated, encoding=encoding)
    assert (path / ".zgroup").exists() and (path / ".zmetadata").exists() == consolidated
    ref = xr.open_zarr(path, consolidated=consolidated).load()
    got = xr.open_dataset(path, engine="lsio", consolidated=consolidated).load()
    assert got.identical(ref), (got, ref)
    assert list(got.dims) == list(ref.dims)
    assert np.isnan(got["q"].values[1, 1]) and got["q"].dtype == ref["q"].dtype
    assert got["q"].encoding.get("_FillValue") == ref["q"].encoding.get("_FillValue") == -1


# -- issue 24: valid data refused or misread -------------------------------------------------

Z5PY_STORE = Path(__file__).resolve().parent.parent / "data" / "z5py_blosc.zr"


def test_z5py_blosc_chunks_with_bytes_past_the_frame():
    """Chunks z5py wrote (zarr_implementations' z5py.zr/blosc, provenance in
    tests/data/z5py_blosc.zr/README.md) hold their c-blosc frame and 16 bytes after it; the
    memcpyed chunk 0.0.0 is 10032 bytes for a 10000-byte chunk. c-blosc and numcodecs decode
    the frame its header describes, and so must lsio."""
    path = Z5PY_STORE / "blosc"
    for name in ("0.0.0", "0.0.1", "0.5.0"):
        raw = (path / name).read_bytes()
        cbytes = int.from_bytes(raw[12:16], "little")
        assert len(raw) == cbytes + 16, name  # the fixture is what the issue reported
    assert (path / "0.0.0").stat().st_size == 10032
    want = zarr.open_array(str(path), mode="r")[...]
    for io, threads in (("pread", 1), ("auto", 2)):
        arr = lsio.open(str(path), io=io, threads=threads)
        assert_same_bits(arr[...], want, f"z5py blosc, io={io}")
        assert_same_bits(arr[0:100, 0:100, 0], want[0:100, 0:100, 0], "memcpyed chunk 0.0.0")
        assert_same_bits(arr[0:100, 500:512, 0], want[0:100, 500:512, 0], "edge chunk 0.5.0")
    assert want[0:100, 0:100, :2].any() and want[0:100, 500:512, 0].any()  # real data, not fill


def test_blosc_frame_beyond_its_stored_bytes_is_corrupt(tmp_path):
    """The other side of reading frames with trailing bytes: a header claiming more bytes
    than the chunk holds is a CorruptDataError naming blosc, the chunk and its size."""
    path = tmp_path / "b.zarr"
    z = zarr.create_array(str(path), shape=(2000,), chunks=(1000,), dtype="|u1", zarr_format=2,
                          compressors=Blosc(cname="lz4", clevel=5, shuffle=Blosc.NOSHUFFLE))
    z[...] = np.arange(2000) % 7
    good = (path / "1").read_bytes()
    (path / "1").write_bytes(good[:-3])
    a = lsio.open(str(path))
    np.testing.assert_array_equal(a[:1000], np.arange(1000) % 7)
    with pytest.raises(lsio.CorruptDataError, match="blosc") as info:
        a[...]
    msg = str(info.value)
    assert f"{len(good)} compressed bytes" in msg and f"{len(good) - 3} stored" in msg, msg


def _f16_delta_values() -> np.ndarray:
    """float16 values whose differences and running sums round at most steps: mixed
    magnitudes, subnormals, values near the largest float16 (differences overflow to inf),
    infinities and a NaN."""
    rng = np.random.default_rng(24)
    v = np.concatenate([
        rng.normal(0, 1, 340), rng.normal(0, 300, 300) * rng.choice([1e-3, 1, 50], 300),
        rng.uniform(-6e-5, 6e-5, 100),  # subnormals (below 2**-14)
        rng.uniform(6e4, 65504, 50) * rng.choice([-1, 1], 50),
        [np.inf, 1.0, -np.inf, 2.0, np.nan, 3.0, 65504, -65504, 0.0, -0.0],
    ]).astype(np.float16)
    rng.shuffle(v)
    return v


@pytest.mark.parametrize("dt", ["<f2", ">f2"])
@pytest.mark.parametrize("compressor", [None, Zstd(level=1)], ids=["none", "zstd"])
def test_v2_delta_float16_matches_numcodecs(tmp_path, dt, compressor):
    """numcodecs' Delta on float16 decodes by np.cumsum in float16, which rounds every
    partial sum to float16 (numpy adds two halves in float32 and rounds the result): lsio
    must give the same bits."""
    values = _f16_delta_values()
    path = tmp_path / "d.zarr"
    z = zarr.create_array(str(path), shape=values.shape, chunks=(400,), dtype=dt, zarr_format=2,
                          filters=[Delta(dtype=dt)], compressors=compressor, fill_value=0)
    z[...] = values
    want = zarr.open_array(str(path), mode="r")[...]
    # The data is worth testing: a sum without float16 rounding at each step differs.
    enc = Delta(dtype="<f2").encode(values.astype("<f2")).view("<f2").reshape(-1, 400)
    exact = np.cumsum(enc.astype(np.float64), axis=1).astype(np.float16).reshape(-1)
    assert not np.array_equal(exact.view(np.uint16), np.asarray(want).astype("<f2").view(np.uint16))
    arr = lsio.open(str(path), threads=2)
    _same(arr[...], want, f"delta {dt}")
    _same(arr[123:777], want[123:777], f"delta {dt} crop")


# Each field of a numcodecs compressor's configuration set to null, as a hand-edited or
# foreign .zarray may have it. numcodecs constructs the codec with None, and decoding needs
# none of these fields, so zarr-python reads the arrays.
NULL_FIELD_CASES = [
    (Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE), "clevel"),
    (Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE), "cname"),
    (Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE), "shuffle"),
    (Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE), "blocksize"),
    (GZip(level=1), "level"),
    (Zlib(level=1), "level"),
    (Zstd(level=1), "level"),
    (LZ4(acceleration=1), "acceleration"),
]


@pytest.mark.parametrize("kind", ["numbers", "strings"])
@pytest.mark.parametrize("comp,field", NULL_FIELD_CASES, ids=[f"{c.codec_id}-{f}" for c, f in NULL_FIELD_CASES])
def test_v2_null_compressor_field_reads_as_zarr_python(tmp_path, comp, field, kind):
    """A null is carried as "not given" (numcodecs keeps None), never replaced by a default
    that the codec then validates; numbers (with a delta filter whose astype is null too) and
    vlen-utf8 strings (lsio.StringArray, which builds its own codec list) alike."""
    path = tmp_path / "n.zarr"
    if kind == "numbers":
        z = zarr.create_array(str(path), shape=(40, 6), chunks=(16, 4), dtype="<i4", zarr_format=2,
                              compressors=comp, filters=[Delta(dtype="<i4")])
        z[:30] = np.arange(180, dtype="<i4").reshape(30, 6) ** 2
    else:
        z = zarr.create_array(str(path), shape=(9,), chunks=(4,), dtype=str, zarr_format=2, compressors=comp)
        z[...] = np.array(["a", "bb", "", "dddd", "é", "f", "gg", "h", "iii"])
    meta = json.loads((path / ".zarray").read_text())
    meta["compressor"][field] = None
    if kind == "numbers":
        meta["filters"][0]["astype"] = None
    (path / ".zarray").write_text(json.dumps(meta))
    want = zarr.open_array(str(path), mode="r")[...]
    arr = lsio.open(str(path))
    if kind == "numbers":
        _same(arr[...], want, f"{comp.codec_id} {field}: null")
    else:
        assert arr[...].tolist() == np.asarray(want).tolist()
