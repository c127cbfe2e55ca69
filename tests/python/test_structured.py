"""Structured (record) dtypes in Zarr arrays, as zarr-python writes and reads them.

Zarr v2 keeps numpy's descr in ``.zarray`` (each field in its own byte order); zarr-python 3
writes v3 arrays with its ``"structured"`` data type (fields little-endian). lsio reads both as
opaque records: the output dtype is the stored one, field by field, as zarr-python returns it.

The v2 matrix crosses record types (mixed byte orders, strings, complex, float16, datetime64 /
timedelta64 and raw-bytes fields, a 1-byte record) x compressors and filters x order C/F x fill
(null and explicit); the v3 matrix crosses record types (nested records, datetime fields) x
codec chains (sharded, transposed, checksummed). Every array is partly written (missing chunks
read as the fill) and compared bit for bit with zarr-python's read of the same store, whole, by
random keys, by ``read_crops`` and by ``oindex``. Nested and subarray fields, which zarr-python 2
wrote and zarr-python 3 cannot read, are compared with numpy's decoding of the chunks. Then:
remote reads (nginx, moto S3), lsio as zarr-python's codec pipeline, kerchunk references to
record chunks, and malformed record metadata as typed errors.
"""

from __future__ import annotations

import base64
import itertools
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import zarr
from numcodecs import LZ4, Blosc, GZip, Shuffle, Zlib, Zstd
from zarr.codecs import BytesCodec, Crc32cCodec, GzipCodec, ShardingCodec, TransposeCodec, ZstdCodec

import lsio
from selections import crop_slices, random_crops, random_keys
from stores import assert_same_bits

SHAPE, CHUNKS = (13, 7), (4, 3)  # partial edge chunks
WRITTEN = (slice(0, 9), slice(0, 5))  # the rest is missing: reads as the fill value

V2_RECORDS = {
    "mixed-endian": [("a", "<i4"), ("b", ">f8"), ("c", "|S3"), ("d", ">U2"), ("e", "|b1"),
                     ("f", ">c8"), ("g", "<f2")],
    "times": [("m", "<M8[ns]"), ("t", ">m8[10s]"), ("i", ">i2")],
    "raw": [("v", "|V3"), ("i", "<u8")],
    "one-byte": [("x", "|u1")],
}
V3_RECORDS = {
    "core": [("t", "<i8"), ("x", "<f4"), ("flag", "?"), ("name", "S3"), ("u", "<U2"),
             ("z", "<c16"), ("h", "<f2")],
    "nested": [("a", "<i4"), ("b", [("x", "<u2"), ("y", "S2"), ("c", [("k", "<f8")])])],
    "times": [("m", "<M8[s]"), ("t", "<m8[10ms]"), ("v", "V3"), ("g", "<M8")],
}
V2_COMPRESSORS = {
    "none": ([], None),
    "zstd": ([], Zstd(level=1)),
    "blosc-shuffle": ([], Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)),
    "gzip": ([], GZip(level=1)),
    "lz4": ([], LZ4()),
    "shuffle+zlib": ([Shuffle(elementsize=0)], Zlib(level=1)),  # elementsize: the record's size
}


def _fill_leaf(sub: np.ndarray, seed: int) -> None:
    """Random values into every leaf field of ``sub`` (records recursed into)."""
    rng = np.random.default_rng(seed)
    dt = sub.dtype
    if dt.fields is not None:
        for k, name in enumerate(dt.names):
            _fill_leaf(sub[name], seed * 31 + k)
        return
    base, shape = dt.base, sub.shape
    if base.kind == "b":
        sub[...] = rng.integers(0, 2, shape).astype(bool)
    elif base.kind in "iu":
        info = np.iinfo(base)
        sub[...] = rng.integers(max(info.min, -2**40), min(info.max, 2**40), shape, endpoint=True).astype(base)
    elif base.kind == "f":
        sub[...] = rng.standard_normal(shape).astype(base)
    elif base.kind == "c":
        sub[...] = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(base)
    elif base.kind == "S":
        sub[...] = rng.choice(np.array([b"", b"a", b"bc", b"def"[:base.itemsize]]), shape)
    elif base.kind == "U":
        sub[...] = rng.choice(np.array(["", "\u00e9", "\U0001f600x"[:base.itemsize // 4]]), shape)
    elif base.kind in "Mm":
        sub[...] = rng.integers(-10**9, 10**9, shape).astype(base.newbyteorder("=").str[:3]).astype(base)
    elif base.kind == "V":
        sub[...] = rng.integers(0, 256, shape + (base.itemsize,), dtype=np.uint8).view(base).reshape(shape)
    else:  # pragma: no cover - a record type the matrix does not have
        raise AssertionError(base)


def _records(dtype, shape, seed) -> np.ndarray:
    a = np.zeros(shape, np.dtype(dtype))
    _fill_leaf(a, seed)
    return a


def _reference(path: Path) -> np.ndarray:
    return zarr.open_array(str(path), mode="r")[...]


def _same_reads(arr, want: np.ndarray, seed: int, context: str) -> None:
    """lsio's reads of ``arr`` equal ``want`` (the reference's whole-array read), bit for bit:
    whole, random numpy keys, read_crops and oindex."""
    assert arr.dtype == want.dtype, (context, arr.dtype, want.dtype)
    assert_same_bits(arr[...], want, context)
    for key in random_keys(seed, want.shape, 8):
        assert_same_bits(arr[key], want[key], f"{context} {key}")
    starts, crop = random_crops(seed, want.shape, arr.chunks)
    crops = np.empty((len(starts),) + tuple(crop), want.dtype)  # np.stack would make fields native
    for k, s in enumerate(starts):
        crops[k] = want[crop_slices(s, crop)]
    assert_same_bits(arr.read_crops(starts, crop), crops, f"{context} crops")
    rows, cols = [0, 12, 3, 3], [6, 1]
    assert_same_bits(arr.oindex[rows, cols], want[np.ix_(rows, cols)], f"{context} oindex")


def _write_v2(path: Path, dtype, comp: str, order: str, fill: str, seed: int) -> np.ndarray:
    dt = np.dtype(dtype)
    filters, compressor = V2_COMPRESSORS[comp]
    filters = [Shuffle(elementsize=dt.itemsize) if isinstance(f, Shuffle) else f for f in filters]
    data = _records(dt, SHAPE, seed)
    kw = {"fill_value": None} if fill == "null" else {"fill_value": _records(dt, (1,), seed + 1).tobytes()}
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dt, zarr_format=2, order=order,
                          compressors=compressor, filters=filters or None, overwrite=True, **kw)
    z[WRITTEN] = data[WRITTEN]
    return data


# zarr-python 3.1.6 cannot compress datetime64 records (numcodecs takes no 'M' buffers): those
# are uncompressed here and compressed in the hand-written tests below.
# Nor write a record with raw bytes fields and a null fill (numpy cannot cast 0 to raw bytes):
# lsio's zeros there are tested with the hand-written arrays.
V2_CASES = [c for c in itertools.product(V2_RECORDS, V2_COMPRESSORS, "CF", ["null", "explicit"])
            if (c[0] != "times" or c[1] == "none") and (c[0] != "raw" or c[3] == "explicit")]


@pytest.mark.parametrize("name,comp,order,fill", V2_CASES)
def test_v2_records_match_zarr_python(tmp_path, name, comp, order, fill):
    path = tmp_path / "r.zarr"
    seed = zlib.crc32(f"{name} {comp} {order} {fill}".encode()) % 10**6
    data = _write_v2(path, V2_RECORDS[name], comp, order, fill, seed)
    want = _reference(path)
    assert want.dtype == np.dtype(V2_RECORDS[name])  # zarr-python keeps each field's byte order
    assert_same_bits(want[WRITTEN], data[WRITTEN])  # the reference read what was written
    arr = lsio.open(str(path))
    assert arr.zarr_format == 2 and arr.dtype == want.dtype
    _same_reads(arr, want, seed, f"v2 {name} {comp} {order} {fill}")
    # The fill value: what zarr-python fills missing chunks with (for null, numpy's cast of 0,
    # so "0" in string fields).
    assert_same_bits(np.asarray(arr.fill_value), want[-1, -1], "fill")


V3_CODECS = {
    "bytes": dict(compressors=None),
    "zstd": dict(compressors=[ZstdCodec(level=1)]),
    "gzip+crc32c": dict(compressors=[GzipCodec(level=1), Crc32cCodec()]),
    "transpose": dict(filters=[TransposeCodec(order=(1, 0))], compressors=[ZstdCodec(level=1)]),
}


# The default fill of a record with raw bytes fields: zarr-python 3.1.6 cannot make it (numpy
# cannot cast 0 to raw bytes), so "times" has an explicit one only.
V3_CASES = [c for c in itertools.product(V3_RECORDS, V3_CODECS, ["default", "explicit"])
            if c[0] != "times" or c[2] == "explicit"]


@pytest.mark.parametrize("name,codecs,fill", V3_CASES)
def test_v3_records_match_zarr_python(tmp_path, name, codecs, fill):
    path = tmp_path / "r.zarr"
    dt = np.dtype(V3_RECORDS[name])
    seed = zlib.crc32(f"{name} {codecs} {fill}".encode()) % 10**6
    data = _records(dt, SHAPE, seed)
    kw = {} if fill == "default" else {"fill_value": _records(dt, (1,), seed + 1).tobytes()}
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dt, overwrite=True, **V3_CODECS[codecs], **kw)
    z[WRITTEN] = data[WRITTEN]
    meta = json.loads((path / "zarr.json").read_text())
    assert meta["data_type"]["name"] == "structured"
    want = _reference(path)
    assert_same_bits(want[WRITTEN], data[WRITTEN])
    arr = lsio.open(str(path))
    _same_reads(arr, want, seed, f"v3 {name} {codecs} {fill}")
    assert_same_bits(np.asarray(arr.fill_value), np.frombuffer(base64.b64decode(meta["fill_value"]), dt)[0])


def test_v3_sharded_records_with_missing_inner_chunks(tmp_path):
    # zarr-python 3.1.6 writes shards of records (given the fill value as bytes: its sharding
    # hashes the fill value) but cannot read them back, so the written data is the reference.
    dt = np.dtype(V3_RECORDS["nested"])
    data = _records(dt, (16, 12), 5)
    fill = _records(dt, (1,), 6)[0]
    data[4:8, :] = fill  # inner chunks equal to the fill: not stored
    data[12:16, 6:9] = fill
    path = tmp_path / "s.zarr"
    z = zarr.create_array(str(path), shape=data.shape, dtype=dt, chunks=(4, 3), shards=(8, 12),
                          serializer=ShardingCodec(chunk_shape=(4, 3), codecs=[BytesCodec(), ZstdCodec(level=1)]),
                          compressors=None, fill_value=fill.tobytes(), overwrite=True)
    z[...] = data
    stored = sorted(p.name for p in (path / "c").rglob("*") if p.is_file())
    assert stored, "zarr-python wrote no shard"
    arr = lsio.open(str(path))
    assert arr.shards == (8, 12) and arr.chunks == (4, 3)
    _same_reads(arr, data, 5, "sharded records")


# --------------------------------------------------------------------------------------
# What zarr-python 2 wrote and zarr-python 3 cannot read: nested and subarray fields
# --------------------------------------------------------------------------------------

HAND_RECORDS = {
    "nested": [["a", "<i4"], ["b", [["x", ">u2"], ["y", "|b1"]]]],
    "subarray": [["p", "<f4", [3]], ["q", "|S2", [2, 2]], ["r", ">i8"]],
    "nested-subarray": [["n", [["k", "<i2"], ["s", "<U1", [2]]], [2]], ["w", "<f8"]],
    "padding": [["", "|V4"], ["a", "<i4"]],  # numpy's padding field: named "f0", as numpy does
    "times": [["m", ">M8[us]"], ["t", "<m8"], ["i", "|i1"]],
}


def _descr(fields):
    """The .zarray's JSON lists as numpy's descr (tuples)."""
    return [(e[0], e[1] if isinstance(e[1], str) else _descr(e[1])) + ((tuple(e[2]),) if len(e) > 2 else ())
            for e in fields]


def _cast_zero(dt: np.dtype) -> np.void:
    """numpy's cast of 0 to a record type (np.array([0], dt)): zeros, "0" in string fields;
    zeros in raw bytes fields, to which numpy cannot cast 0."""
    z = np.zeros((), dt)

    def put(sub: np.ndarray) -> None:
        if sub.dtype.fields is not None:
            for n in sub.dtype.names:
                put(sub[n])
        elif sub.dtype.kind in "SU":
            sub[...] = "0" if sub.dtype.kind == "U" else b"0"

    put(z)
    if "V" not in set(_leaf_kinds(dt)):
        assert z.tobytes() == np.array([0], dt).tobytes()  # numpy agrees where it can cast
    return z[()]


def _leaf_kinds(dt: np.dtype):
    if dt.fields is None:
        yield dt.base.kind
        return
    for n in dt.names:
        yield from _leaf_kinds(dt.fields[n][0].base)


def _write_by_hand(path: Path, fields, order: str, compressor, fill_bytes) -> np.ndarray:
    """A v2 array as zarr-python 2 wrote it: chunks are the C/F-order bytes of numpy records,
    then compressed. Returns the whole array as numpy decodes it (missing chunks: the fill)."""
    dt = np.dtype(_descr(fields))
    data = _records(dt, SHAPE, 11)
    path.mkdir()
    meta = {"zarr_format": 2, "shape": list(SHAPE), "chunks": list(CHUNKS), "dtype": fields,
            "compressor": None if compressor is None else compressor.get_config(),
            "fill_value": None if fill_bytes is None else base64.b64encode(fill_bytes).decode(),
            "order": order, "filters": None}
    (path / ".zarray").write_text(json.dumps(meta))
    # A null fill: numpy's cast of 0 (zeros, "0" in string fields), as zarr-python 3 fills.
    fill = _cast_zero(dt) if fill_bytes is None else np.frombuffer(fill_bytes, dt)[0]
    want = np.empty(SHAPE, dt)
    want[...] = fill
    for i, j in itertools.product(range(-(-SHAPE[0] // CHUNKS[0])), range(-(-SHAPE[1] // CHUNKS[1]))):
        if (i + j) % 3 == 2:
            continue  # not written
        block = np.full(CHUNKS, fill)
        sl = (slice(i * CHUNKS[0], (i + 1) * CHUNKS[0]), slice(j * CHUNKS[1], (j + 1) * CHUNKS[1]))
        part = data[sl]
        block[:part.shape[0], :part.shape[1]] = part
        want[sl] = part
        raw = np.asarray(block, order=order).tobytes(order=order)
        (path / f"{i}.{j}").write_bytes(raw if compressor is None else compressor.encode(raw))
    return want


@pytest.mark.parametrize("name", list(HAND_RECORDS))
@pytest.mark.parametrize("order,compressor", [("C", Zstd(level=1)), ("F", None), ("C", Blosc(shuffle=Blosc.SHUFFLE))],
                         ids=["C-zstd", "F-raw", "C-blosc"])
def test_v2_nested_and_subarray_fields_as_numpy_decodes_them(tmp_path, name, order, compressor):
    fields = HAND_RECORDS[name]
    dt = np.dtype(_descr(fields))
    fill = _records(dt, (1,), 3).tobytes() if order == "C" else None
    want = _write_by_hand(tmp_path / "h.zarr", fields, order, compressor, fill)
    arr = lsio.open(str(tmp_path / "h.zarr"))
    assert arr.dtype == dt and arr.dtype.itemsize == dt.itemsize
    _same_reads(arr, want, 17, f"{name} {order}")


def test_v2_fill_value_zero_on_records_reads_as_zeros(tmp_path):
    # A bare 0 (zarr-python 2.0/2.1, hand-written .zarray files): zeros, as zarr-python 2 read
    # it (np.zeros of the dtype); null is numpy's cast of 0 ("0" strings), as zarr-python 3 fills.
    fields = [["a", ">i4"], ["s", "|S2"], ["u", "<U1", [2]]]
    dt = np.dtype(_descr(fields))
    for fill, want in ((0, np.zeros((), dt)[()]), (None, np.array([0], dt)[0])):
        path = tmp_path / f"z{fill}.zarr"
        path.mkdir()
        (path / ".zarray").write_text(json.dumps({
            "zarr_format": 2, "shape": [3], "chunks": [2], "dtype": fields, "compressor": None,
            "fill_value": fill, "order": "C", "filters": None}))
        arr = lsio.open(str(path))
        assert_same_bits(arr[...], np.full(3, want), f"fill {fill}")
    assert lsio.open(str(tmp_path / "zNone.zarr"))[...]["s"].tolist() == [b"0"] * 3


# --------------------------------------------------------------------------------------
# Remote, the zarr codec pipeline, kerchunk
# --------------------------------------------------------------------------------------


def test_records_over_http_and_s3(nginx_server, moto_s3, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    _write_v2(root / "v2.zarr", V2_RECORDS["mixed-endian"], "zstd", "F", "explicit", 21)
    dt = np.dtype(V3_RECORDS["nested"])
    z = zarr.create_array(str(root / "v3.zarr"), shape=SHAPE, chunks=CHUNKS, dtype=dt)
    z[WRITTEN] = _records(dt, SHAPE, 22)[WRITTEN]
    server = nginx_server(root)
    bucket = moto_s3.create_bucket("lsio-records")
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
          "secret": moto_s3.secret_access_key, "region": moto_s3.region}
    for name in ("v2.zarr", "v3.zarr"):
        want = _reference(root / name)
        moto_s3.upload_dir(root / name, bucket, name)
        for url, opts in ((server.url(name), None), (f"s3://{bucket}/{name}", so)):
            arr = lsio.open(url, storage_options=opts)
            _same_reads(arr, want, 23, url)


def test_lsio_as_zarr_codec_pipeline_reads_records(tmp_path):
    import lsio.zarr as lz

    _write_v2(tmp_path / "v2.zarr", V2_RECORDS["mixed-endian"], "blosc-shuffle", "C", "null", 31)
    dt = np.dtype(V3_RECORDS["core"])
    z = zarr.create_array(str(tmp_path / "v3.zarr"), shape=SHAPE, chunks=CHUNKS, dtype=dt)
    z[WRITTEN] = _records(dt, SHAPE, 32)[WRITTEN]
    want = {n: _reference(tmp_path / n) for n in ("v2.zarr", "v3.zarr")}
    before = lz.stats()
    with zarr.config.set({"codec_pipeline.path": "lsio.zarr.LsioCodecPipeline", "codec_pipeline.strict": True}):
        for n, w in want.items():
            a = zarr.open_array(str(tmp_path / n), mode="r")
            assert_same_bits(a[...], w, n)
            assert_same_bits(a[2:11, 1:6], w[2:11, 1:6], n)
            assert_same_bits(a.oindex[[0, 12], [6, 0, 2]], w[np.ix_([0, 12], [6, 0, 2])], n)
    after = lz.stats()
    assert after["reads"] > before["reads"]
    assert after["fallback_reads"] == before["fallback_reads"]
    # zarr-python keeps big-endian record fields big-endian in the session that writes them
    # (its zarr.json then says little): lsio, which copies records as stored, hands that
    # array back to zarr's own pipeline rather than read other bytes.
    dt = np.dtype([("a", ">i4"), ("b", "<i2")])
    data = np.array([(1, 2), (-3, 4), (5, -6)], dt)
    with zarr.config.set({"codec_pipeline.path": "lsio.zarr.LsioCodecPipeline"}):
        a = zarr.create_array(str(tmp_path / "be.zarr"), shape=(3,), chunks=(2,), dtype=dt)
        a[...] = data
        assert_same_bits(a[...], data, "big-endian fields, same session")


def test_kerchunk_references_to_record_chunks(tmp_path):
    # kerchunk (with zarr-python 3) skips HDF5 compound datasets, so the references are
    # written here as kerchunk writes them: the .zarray inline, chunks as [url, offset, length]
    # into one blob.
    src = tmp_path / "src.zarr"
    _write_v2(src, V2_RECORDS["mixed-endian"], "zstd", "C", "explicit", 61)
    want = _reference(src)
    blob, refs = bytearray(), {".zgroup": json.dumps({"zarr_format": 2}),
                               "rec/.zarray": (src / ".zarray").read_text(), "rec/.zattrs": "{}"}
    for chunk in sorted(p for p in src.iterdir() if not p.name.startswith(".")):
        raw = chunk.read_bytes()
        refs[f"rec/{chunk.name}"] = [str(tmp_path / "blob.bin"), len(blob) + 5, len(raw)]
        blob += b"junk!" + raw
    (tmp_path / "blob.bin").write_bytes(bytes(blob))
    (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": refs}))
    arr = lsio.open(str(tmp_path / "refs.json"), "rec")
    _same_reads(arr, want, 61, "kerchunk records")


def test_xarray_backend_reads_record_variables(tmp_path):
    xr = pytest.importorskip("xarray")
    dt2 = np.dtype(V2_RECORDS["mixed-endian"])
    dt3 = np.dtype(V3_RECORDS["core"])
    want = {}
    for fmt, dt in ((2, dt2), (3, dt3)):
        path = tmp_path / f"g{fmt}.zarr"
        g = zarr.open_group(str(path), mode="w", zarr_format=fmt)
        kw = {"dimension_names": ["y", "x"]} if fmt == 3 else {}
        a = g.create_array("rec", shape=SHAPE, chunks=CHUNKS, dtype=dt, fill_value=_records(dt, (1,), 7).tobytes(), **kw)
        if fmt == 2:
            a.attrs["_ARRAY_DIMENSIONS"] = ["y", "x"]
        a[WRITTEN] = _records(dt, SHAPE, 70 + fmt)[WRITTEN]
        want[fmt] = _reference(path / "rec")
        ds = xr.open_dataset(str(path), engine="lsio")
        assert ds["rec"].dims == ("y", "x")
        assert "_FillValue" not in ds["rec"].attrs  # no CF masking of records
        native = want[fmt].astype(dt.newbyteorder("="))  # xarray's variables are native-endian
        assert ds["rec"].dtype == native.dtype
        assert_same_bits(ds["rec"].values, native, f"xarray v{fmt}")
        assert_same_bits(ds["rec"].isel(y=slice(2, 9), x=[4, 0]).values, native[2:9][:, [4, 0]], f"isel v{fmt}")
        if fmt == 3:  # xarray's zarr backend reads v3 records (not v2: it fails on their fill value)
            assert ds.identical(xr.open_dataset(str(path), engine="zarr"))
    # A big-endian subarray field (numpy's isnative does not look into subarrays), v2 as
    # zarr-python 2 wrote it (zarr-python 3 cannot read subarray fields).
    g = tmp_path / "sub"
    g.mkdir()
    (g / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    fields = [["p", ">f4", [3]], ["i", "<i2"]]
    stored = _write_by_hand(g / "rec", fields, "C", Zstd(level=1), None)
    (g / "rec" / ".zattrs").write_text(json.dumps({"_ARRAY_DIMENSIONS": ["y", "x"]}))
    ds = xr.open_dataset(str(g), engine="lsio")
    native = stored.astype(stored.dtype.newbyteorder("="))
    assert ds["rec"].dtype == native.dtype and ds["rec"].dtype.fields["p"][0].base.isnative
    assert_same_bits(ds["rec"].values, native, "big-endian subarray field")


def test_dask_and_the_cli_on_records(tmp_path, capsys):
    from lsio.cli import main
    from lsio.dask import to_dask

    path = tmp_path / "r.zarr"
    _write_v2(path, V2_RECORDS["mixed-endian"], "zstd", "C", "explicit", 81)
    want = _reference(path)
    d = to_dask(lsio.open(str(path)))
    assert d.dtype == want.dtype
    assert_same_bits(d.compute(), want, "dask")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "('b', '>f8')" in out and "6 of 12 stored" in out, out
    assert main(["verify", str(path)]) == 0
    capsys.readouterr()
    assert main(["info", "--json", str(path)]) == 0  # complex fields in the fill value included
    doc = json.loads(capsys.readouterr().out)["arrays"][0]
    fill = np.frombuffer(base64.b64decode(json.loads((path / ".zarray").read_text())["fill_value"]), want.dtype)[0]
    assert doc["fill_value"][5] == [float(fill["f"].real), float(fill["f"].imag)]


# --------------------------------------------------------------------------------------
# HDF5 compound datasets (NetCDF4/HDF5 files read directly): records equal to h5py's
# --------------------------------------------------------------------------------------


def _compound_types():
    import h5py

    enum = h5py.enum_dtype({"LOW": 0, "MID": 5, "HIGH": 9}, basetype="<i2")
    return {
        "packed": np.dtype([("t", "<i8"), ("x", ">f4"), ("s", "S5"), ("z", "<c16"), ("ok", "?")]),
        "padded": np.dtype({"names": ["a", "b", "c"], "formats": ["<u2", ">f8", "S3"],
                            "offsets": [2, 8, 20], "itemsize": 32}),
        "aligned": np.dtype([("a", "u1"), ("b", "<f8"), ("c", "<i2")], align=True),
        "nested-array": np.dtype([("p", "<f4", (3,)), ("n", [("k", ">i2"), ("m", "<u8")]),
                                  ("q", "<i4", (2, 2))]),
        "enum": np.dtype([("level", enum), ("v", "<f4")]),
    }


def _same_fields(actual: np.ndarray, expected: np.ndarray, context: str) -> None:
    """Same dtype and the same bits in every field (not in the padding between them, which
    h5py does not read: HDF5 converts member by member)."""
    actual, expected = np.asarray(actual), np.asarray(expected)  # a record scalar's fields are native
    assert actual.dtype == expected.dtype, (context, actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (context, actual.shape, expected.shape)

    def leaves(a, path=()):
        if a.dtype.names is None:
            yield path, a
            return
        for n in a.dtype.names:
            yield from leaves(a[n], path + (n,))

    for (path, x), (_, y) in zip(leaves(actual), leaves(expected)):
        x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8), err_msg=f"{context} {path}")


H5_LAYOUTS = {
    "gzip+shuffle": dict(chunks=(5, 4), compression="gzip", compression_opts=1, shuffle=True),
    "fletcher32+gzip": dict(chunks=(6, 7), compression="gzip", fletcher32=True),
    "chunked-raw": dict(chunks=(4, 3)),
    "contiguous": dict(),
    "compact": dict(),
}


@pytest.mark.parametrize("layout", list(H5_LAYOUTS))
@pytest.mark.parametrize("name", ["packed", "padded", "aligned", "nested-array", "enum"])
def test_hdf5_compound_datasets_match_h5py(tmp_path, name, layout):
    h5py = pytest.importorskip("h5py")
    dt = _compound_types()[name]
    data = _records(dt, SHAPE, zlib.crc32(f"{name} {layout}".encode()))
    fill = _records(dt, (1,), 5)[0]
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        if layout == "compact":
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            sp = h5py.h5s.create_simple(SHAPE)
            ds = h5py.Dataset(h5py.h5d.create(f.id, b"rec", h5py.h5t.py_create(dt, logical=True), sp, dcpl=dcpl))
            ds[...] = data
        else:
            ds = f.create_dataset("rec", shape=SHAPE, dtype=dt, fillvalue=fill, **H5_LAYOUTS[layout])
            ds[WRITTEN] = data[WRITTEN]  # chunked: the rest of the chunks never written (the fill)
    with h5py.File(path, "r") as f:
        want = f["rec"][...]
        assert f["rec"].dtype == dt
    arr = lsio.open(str(path), "rec")
    assert arr.dtype == dt
    _same_fields(arr[...], want, f"{name} {layout}")
    for key in random_keys(7, SHAPE, 6):
        _same_fields(arr[key], want[key], f"{name} {layout} {key}")
    starts, crop = random_crops(7, SHAPE, arr.chunks)
    got = arr.read_crops(starts, crop)
    for k, st in enumerate(starts):
        _same_fields(got[k], want[crop_slices(st, crop)], f"{name} {layout} crop {k}")
    if layout != "compact":
        _same_fields(np.asarray(arr.fill_value), np.asarray(fill), "fill")


def test_netcdf4_compound_variable_matches_netcdf4_python(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    xr = pytest.importorskip("xarray")
    dt = np.dtype([("lat", "<f4"), ("lon", "<f4"), ("q", "<i2")])  # netCDF-C aligns it: 12 bytes
    data = _records(dt, (6, 3), 13)
    path = tmp_path / "obs.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ct = ds.createCompoundType(dt, "obs_t")
        ds.createDimension("time", 6)
        ds.createDimension("station", 3)
        ds.createVariable("obs", ct, ("time", "station"), zlib=True, chunksizes=(4, 3))[:] = data
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(6.0)
    with netCDF4.Dataset(path) as ds:
        want = np.asarray(ds["obs"][...])
    assert want.dtype.itemsize == 12
    arr = lsio.open(str(path), "obs")
    assert arr.dimension_names == ("time", "station")
    _same_fields(arr[...], want, "netCDF4 compound")
    # xarray through lsio (h5netcdf 1.x itself fails on this variable: it views the records
    # as a smaller dtype)
    ds = xr.open_dataset(str(path), engine="lsio")
    assert ds["obs"].dims == ("time", "station")
    _same_fields(ds["obs"].values, want, "xarray lsio")
    np.testing.assert_array_equal(ds["time"].values, np.arange(6.0))


def test_netcdf4_compound_with_char_members_and_a_compound_fill_value(tmp_path):
    # netCDF-C stores a compound's string member as NUL-terminated 1-byte chars (NC_CHAR):
    # HDF5 converts such a byte to itself, so lsio reads them as stored. A compound variable's
    # _FillValue attribute is a compound value: typed as h5py gives it, and through xarray in
    # encoding (records are not masked).
    netCDF4 = pytest.importorskip("netCDF4")
    h5py = pytest.importorskip("h5py")
    xr = pytest.importorskip("xarray")
    dt = np.dtype([("id", "<i4"), ("name", "S5")])
    path = tmp_path / "st.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ct = ds.createCompoundType(dt, "st_t")
        ds.createDimension("x", None)
        ds.createVariable("st", ct, ("x",))[0:3] = np.array([(1, b"abc"), (2, b"de"), (3, b"fghij")], dt)
        ds.createVariable("t", "f8", ("x",))[0:5] = np.arange(5.0)  # st is shorter: padded with its fill
    with h5py.File(path, "r") as f:
        want = f["st"][...]
        want_fill = np.asarray(f["st"].fillvalue)
        assert want.dtype.fields["name"][0].shape == (5,)  # char arrays, as netCDF-C stores them
    with netCDF4.Dataset(path) as ds:
        assert np.asarray(ds["st"][0:3])["id"].tolist() == [1, 2, 3]
    arr = lsio.open(str(path), "st")
    assert arr.shape == (5,)
    _same_fields(arr[0:3], want, "netCDF4 char members")
    _same_fields(arr[3:5], np.full(2, want_fill[()]), "padded with the fill")

    dt = np.dtype({"names": ["lat", "q"], "formats": ["<f4", "<i2"], "offsets": [0, 4], "itemsize": 8})
    fill = np.array([(-999.0, -1)], dt)
    path = tmp_path / "fv.h5"
    with h5py.File(path, "w") as f:
        t = f.create_dataset("t", data=np.arange(4.0))
        t.make_scale("t")
        o = f.create_dataset("obs", shape=(4,), chunks=(2,), dtype=dt, fillvalue=fill[0])
        o[0:2] = np.array([(1.0, 4), (2.0, 5)], dt)
        o.dims[0].attach_scale(t)
        o.attrs["_FillValue"] = fill
    with h5py.File(path, "r") as f:
        want = f["obs"][...]
        want_attr = f["obs"].attrs["_FillValue"]
    arr = lsio.open(str(path), "obs")
    _same_fields(arr[...], want, "compound with a fill value")
    _same_fields(np.asarray(arr.attrs["_FillValue"]), np.asarray(want_attr).reshape(-1)[0], "typed _FillValue")
    ds = xr.open_dataset(str(path), engine="lsio")
    assert ds["obs"].dtype == dt and "_FillValue" not in ds["obs"].attrs
    _same_fields(ds["obs"].values, want, "xarray")
    _same_fields(np.asarray(ds["obs"].encoding["_FillValue"]), fill[0], "encoding")


def test_hdf5_compounds_lsio_does_not_read_are_refused_by_name(tmp_path):
    h5py = pytest.importorskip("h5py")
    xr = pytest.importorskip("xarray")
    deep = np.dtype([("x", "<i4")])
    for _ in range(17):
        deep = np.dtype([("n", deep)])
    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("deep", data=np.zeros(2, deep))
        f.create_dataset("opaque", data=np.zeros(2, [("a", "<i4"), ("o", "V3")]))
        f["ok"] = np.arange(3)
    for name, words in (("deep", "nested deeper than 16 levels"), ("opaque", "opaque members")):
        with pytest.raises(lsio.UnsupportedError, match=words):
            lsio.open(str(path), name)
    with pytest.raises(lsio.UnsupportedError, match="drop_variables"):
        xr.open_dataset(str(path), engine="lsio")
    assert xr.open_dataset(str(path), engine="lsio", drop_variables=["deep", "opaque"])["ok"].size == 3


def test_hdf5_compounds_with_variable_length_members_are_refused_by_name(tmp_path):
    h5py = pytest.importorskip("h5py")
    dt = np.dtype([("id", "<i4"), ("label", h5py.string_dtype())])
    path = tmp_path / "v.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("vl", data=np.array([(1, "a"), (2, "bc")], dt))
        f["ok"] = np.arange(3)
    with pytest.raises(lsio.UnsupportedError, match="compound with variable-length"):
        lsio.open(str(path), "vl")
    np.testing.assert_array_equal(lsio.open(str(path), "ok")[...], np.arange(3))  # the rest reads


def test_hdf5_compound_over_http(nginx_server, tmp_path):
    h5py = pytest.importorskip("h5py")
    root = tmp_path / "www"
    root.mkdir()
    dt = _compound_types()["padded"]
    data = _records(dt, SHAPE, 9)
    with h5py.File(root / "c.h5", "w") as f:
        f.create_dataset("rec", data=data, chunks=(5, 4), compression="gzip", shuffle=True)
    with h5py.File(root / "c.h5", "r") as f:
        want = f["rec"][...]
    arr = lsio.open(nginx_server(root).url("c.h5"), "rec")
    _same_fields(arr[...], want, "http")
    starts, crop = random_crops(9, SHAPE, arr.chunks)
    got = arr.read_crops(starts, crop)
    for k, st in enumerate(starts):
        _same_fields(got[k], want[crop_slices(st, crop)], f"http crop {k}")


def _read_all(arr):
    return arr[...]


def test_record_arrays_pickle_into_a_forked_worker(tmp_path):
    # (spawn and forkserver DataLoader workers are test_fork_safety.py's: records pickle as
    # any array, their dtype coming back from the engine's metadata in the worker)
    import multiprocessing as mp
    import pickle

    path = tmp_path / "r.zarr"
    _write_v2(path, V2_RECORDS["mixed-endian"], "zstd", "C", "explicit", 91)
    arr = lsio.open(str(path))
    want = arr[...]  # the parent reads first (fork-safety)
    assert_same_bits(pickle.loads(pickle.dumps(arr))[...], want, "pickled")
    with mp.get_context("fork").Pool(1) as pool:
        assert_same_bits(pool.apply_async(_read_all, (arr,)).get(timeout=120), want, "fork")


# --------------------------------------------------------------------------------------
# Refusals: typed errors naming what is wrong
# --------------------------------------------------------------------------------------


def _nested(depth):
    return [["x", "<i4"]] if depth == 0 else [["n", _nested(depth - 1)]]


@pytest.mark.parametrize("dtype,fill,error,words", [
    ([], None, lsio.FormatError, "non-empty list of fields"),
    ([["a"]], None, lsio.FormatError, "[name, type]"),
    ([["a", "<i4"], ["a", "<f4"]], None, lsio.FormatError, "'a' occurs more than once"),
    ([["f1", "<i4"], ["", "<i4"]], None, lsio.FormatError, "'f1' occurs more than once"),  # numpy names it f1
    ([["a", "|i4"]], None, lsio.FormatError, "byte order"),
    ([["a", "<U0"]], None, lsio.FormatError, "positive length"),
    ([["a", "<M8[fortnight]"]], None, lsio.FormatError, "datetime64"),
    ([["a", "<i4", [-1]]], None, lsio.FormatError, "shape"),
    ([["a", "<i8", [1 << 20, 1 << 20]]], None, lsio.FormatError, "larger than 16 MiB"),
    ([["a", "|S16777217"]], None, lsio.FormatError, "at most 16 MiB"),
    ([["a", "<M8[2147483648s]"]], None, lsio.FormatError, "datetime64"),  # numpy's bound: 2^31 - 1
    ([["a", "<i4", [0]]], None, lsio.FormatError, "no bytes"),
    ([[7, "<i4"]], None, lsio.FormatError, "name must be a string"),
    (_nested(17), None, lsio.FormatError, "deeper than 16"),
    ([["a", "<i4"]], "AAAA", lsio.FormatError, "holds 3 bytes, an element has 4"),
    ([["a", "<i4"]], 1, lsio.FormatError, "base64"),
    ([["a", "|O"]], None, lsio.UnsupportedError, "(objects)"),
    ([["a", "<q4"]], None, lsio.UnsupportedError, "'<q4'"),
    ([[["title", "a"], "<i4"]], None, lsio.UnsupportedError, "titles"),
])
def test_malformed_v2_record_metadata(tmp_path, dtype, fill, error, words):
    path = tmp_path / "m.zarr"
    path.mkdir()
    (path / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": dtype, "compressor": None,
        "fill_value": fill, "order": "C", "filters": None}))
    with pytest.raises(error) as info:
        lsio.open(str(path))
    assert words in str(info.value), str(info.value)
    assert ".zarray" in str(info.value) or "fill_value" in str(info.value)


@pytest.mark.parametrize("where", [".zarray dtype", ".zattrs", "zarr.json attributes"])
def test_metadata_nested_100000_levels_deep_is_a_format_error(tmp_path, where):
    # nlohmann's dump() recurses: such a file crashed the process before it was refused.
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "d.zarr"
    path.mkdir()
    if where == "zarr.json attributes":
        z = zarr.create_array(str(path), shape=(4,), chunks=(2,), dtype="<i4", overwrite=True)
        text = (path / "zarr.json").read_text().replace('"attributes": {}', '"attributes": {"a": ' + deep + "}")
        assert deep in text
        (path / "zarr.json").write_text(text)
    else:
        meta = {"zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<i4", "compressor": None,
                "fill_value": None, "order": "C", "filters": None}
        text = json.dumps(meta)
        if where == ".zarray dtype":
            text = text.replace('"<i4"', deep)
        else:
            (path / ".zattrs").write_text('{"a": ' + deep + "}")
        (path / ".zarray").write_text(text)
    with pytest.raises(lsio.FormatError, match="not valid JSON|nested deeper than 256 levels"):
        lsio.open(str(path))
    zarr.open_group(str(tmp_path), mode="a", zarr_format=3 if where == "zarr.json attributes" else 2)
    with pytest.warns(UserWarning, match="left out of its group's members"):
        g = lsio.open_group(str(tmp_path))
        assert "d.zarr" not in g.array_names  # listed without crashing, said
    with pytest.raises(lsio.FormatError, match="not valid JSON|nested deeper than 256 levels"):
        g["d.zarr"]


@pytest.mark.parametrize("data_type,words", [
    ({"name": "structured"}, "\"fields\""),
    ({"name": "structured", "configuration": {"fields": [["a"]]}}, "[name, data_type]"),
    ({"name": "structured", "configuration": {"fields": [["a", "int32"], ["a", "int8"]]}}, "occurs more than once"),
    ({"name": "structured", "configuration": {"fields": [["a", {"name": "numpy.datetime64",
                                                                 "configuration": {"unit": "fortnight", "scale_factor": 1}}]]}},
     "unit"),
    ({"name": "structured", "configuration": {"fields": [["a", {"name": "raw_bytes", "configuration": {}}]]}},
     "length_bytes"),
])
def test_malformed_v3_record_metadata(tmp_path, data_type, words):
    path = tmp_path / "m.zarr"
    z = zarr.create_array(str(path), shape=(4,), chunks=(2,), dtype=np.dtype([("a", "<i4")]))
    z[...] = np.zeros(4, z.dtype)
    meta = json.loads((path / "zarr.json").read_text())
    meta["data_type"] = data_type
    (path / "zarr.json").write_text(json.dumps(meta))
    with pytest.raises(lsio.FormatError) as info:
        lsio.open(str(path))
    assert words in str(info.value), str(info.value)


def test_records_refuse_numeric_conversion_and_other_out_dtypes(tmp_path):
    path = tmp_path / "r.zarr"
    _write_v2(path, V2_RECORDS["mixed-endian"], "zstd", "C", "null", 51)
    arr = lsio.open(str(path))
    with pytest.raises(TypeError):
        arr.read(np.s_[0:2], dtype=np.float32)
    with pytest.raises(TypeError):
        arr.read_crops(np.array([[0, 0]]), (2, 2), dtype=np.float64)
    native = arr.dtype.newbyteorder("=")  # the same fields in native order: another dtype
    out = np.zeros((2, 2), native)
    with pytest.raises((TypeError, ValueError)):
        arr.read(np.s_[0:2, 0:2], out=out)
    assert out.tobytes() == bytes(out.nbytes)  # nothing written into the refused buffer
    out = np.zeros((2, 2), arr.dtype)
    arr.read(np.s_[0:2, 0:2], out=out)
    assert_same_bits(out, _reference(path)[0:2, 0:2])
