"""NetCDF4 / HDF5 files read directly (lsio/_hdf5.py): the file's own chunk index as a manifest.

Files written by h5py (a seeded random matrix: chunked with partial edge chunks and an
unlimited first dimension, contiguous and compact layouts; no filter, gzip, shuffle + gzip,
fletcher32 + shuffle + gzip, and hdf5plugin's zstd and blosc; little- and big-endian dtypes;
fill values with unwritten chunks; nested groups) and by netCDF4-python; every read through
lsio is compared bit for bit with h5py's on random selections and read_crops batches, and
xarray's result is identical() to h5netcdf's (files, groups, open_mfdataset). Then chunks
stored skipping a filter, checksum failures, types lsio does not read, the same over HTTP
(nginx) and S3 (moto), pickling, and malformed files (typed errors).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pickle

import numpy as np
import pytest

import lsio
from hdf5_matrix import MORE_FILTERS, assert_reads_in_worker_processes, assert_reads_like, dataset_cases, write_h5

h5py = pytest.importorskip("h5py")
pytest.importorskip("hdf5plugin")


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("hdf5")
    rng = np.random.default_rng(2027)
    cases = dataset_cases(rng, 36, MORE_FILTERS)
    h5 = root / "matrix.h5"
    write_h5(h5, cases, rng)
    return root, h5, cases


def _name(c):
    return f"{c['group']}/{c['name']}" if c["group"] else c["name"]


def test_h5py_matrix_read_directly_equals_h5py(matrix):
    _, h5, cases = matrix
    rng = np.random.default_rng(7)
    g = lsio.open_group(str(h5))
    assert {c["filters"] for c in cases} >= set(MORE_FILTERS) - {None}
    with h5py.File(h5, "r") as f:
        for c in cases:
            name = _name(c)
            want = f[name][...]
            a = lsio.open(str(h5), name)
            assert_reads_like(a, want, rng, name)
            np.testing.assert_array_equal(g[name][...], want, err_msg=name)
    # HDF5 groups are groups.
    assert "grp" in g.group_names and "sub" in g["grp"].group_names


def _era(path, rng, *, t0=0, nt=6):
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(path, "w") as d:
        d.createDimension("time", None)
        d.createDimension("lat", 33)
        d.createDimension("lon", 45)
        t = d.createVariable("time", "f8", ("time",))
        t.units = "hours since 2020-01-01"
        t.calendar = "standard"
        lat = d.createVariable("lat", "f4", ("lat",))
        lat[:] = np.linspace(-16, 16, 33)
        lat.units = "degrees_north"
        d.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 44, 45)
        v = d.createVariable("t2m", "i2", ("time", "lat", "lon"), zlib=True, shuffle=True, fletcher32=True,
                             chunksizes=(1, 16, 16), fill_value=-32767)
        v.units = "K"
        v.scale_factor = 0.01
        v.add_offset = 273.15
        v.long_name = "2 metre temperature"
        v.valid_range = np.array([-20000, 20000], "i2")
        w = d.createVariable("sst", ">f4", ("lat", "lon"), contiguous=True)  # big-endian, contiguous
        w[:] = rng.normal(290, 3, (33, 45))
        d.createVariable("level", "i4", ())[...] = 500  # a scalar variable
        t[:] = np.arange(t0, t0 + nt)
        v[:] = (rng.normal(280, 5, (nt, 33, 45)) - 273.15)
        v[min(2, nt - 1), :3, :4] = np.ma.masked
        d.title = "a test"
        d.history = np.array([1.5], "f4")
        g = d.createGroup("surface")
        g.createDimension("station", 7)
        s = g.createVariable("pressure", "f8", ("station",), zlib=True)
        s[:] = rng.normal(1000, 10, 7)
        s.units = "hPa"


def test_netcdf4_is_identical_to_h5netcdf(tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    netCDF4 = pytest.importorskip("netCDF4")
    nc = tmp_path / "era.nc"
    _era(nc, np.random.default_rng(1))
    ds = xr.open_dataset(nc, engine="lsio")
    ref = xr.open_dataset(nc, engine="h5netcdf")
    assert ds.identical(ref), (ds, ref)
    sub = xr.open_dataset(nc, engine="lsio", group="surface")
    assert sub.identical(xr.open_dataset(nc, engine="h5netcdf", group="surface"))
    # The raw values, read through lsio, equal netCDF4's without scaling or masking.
    with netCDF4.Dataset(nc) as d:
        d.set_auto_maskandscale(False)
        np.testing.assert_array_equal(lsio.open(str(nc), "t2m")[...], d["t2m"][...])
        np.testing.assert_array_equal(lsio.open(str(nc), "sst")[...], d["sst"][...])
        assert lsio.open(str(nc), "level")[()] == 500
        np.testing.assert_array_equal(lsio.open(str(nc), "surface/pressure")[...], d["surface"]["pressure"][...])
    # A NetCDF4 dimension without a coordinate variable is not an array.
    assert "lon" in lsio.open_group(str(nc)).array_names and "station" not in lsio.open_group(str(nc))["surface"]


def test_netcdf_written_by_xarray_is_identical(tmp_path):
    """xarray's own NetCDF4 files: float _FillValue NaN (its default), a NaN attribute, a
    variable named like a dimension that is not its coordinate (netCDF-C stores it as
    _nc4_non_coord_<name>), a string attribute list."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    pytest.importorskip("netCDF4")
    t = np.arange(12, dtype="f4").reshape(3, 4)
    t[0, 0] = np.nan
    ds = xr.Dataset({"t": (("x", "y"), t), "y": (("x",), np.array([5.0, 6.0, 7.0]))},
                    coords={"x": [10, 20, 30]}, attrs={"names": ["a", "b"]})
    ds["t"].attrs["valid_max"] = np.float32(np.nan)
    ds["station"] = ("x", np.array([b"AB", b"CDE", b"F"]))  # a char variable (NetCDF NC_CHAR, 'S1' + a dimension)
    nc = tmp_path / "xr.nc"
    ds.to_netcdf(nc, engine="netcdf4")
    got = xr.open_dataset(nc, engine="lsio")
    want = xr.open_dataset(nc, engine="h5netcdf")
    assert got.identical(want), (got, want)
    assert np.isnan(got["t"].encoding["_FillValue"])


def test_open_mfdataset_over_files(tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    pytest.importorskip("dask")
    rng = np.random.default_rng(3)
    paths = []
    for k in range(3):
        p = tmp_path / f"era_{k}.nc"
        _era(p, rng, t0=4 * k, nt=4)
        paths.append(str(p))
    ds = xr.open_mfdataset(paths, engine="lsio", combine="by_coords")
    ref = xr.open_mfdataset(paths, engine="h5netcdf", combine="by_coords")
    assert ds.identical(ref)
    assert ds["t2m"].shape == (12, 33, 45)


def test_a_chunk_stored_skipping_a_filter_is_read(tmp_path):
    """HDF5 keeps a chunk that an optional filter could not shrink as it is, marking the
    skipped filter in the chunk's filter mask; lsio re-encodes such a chunk (inline)."""
    p = tmp_path / "mask.h5"
    data = np.arange(8 * 10, dtype="<i4").reshape(8, 10)
    with h5py.File(p, "w") as f:
        d = f.create_dataset("x", shape=(8, 10), dtype="<i4", chunks=(4, 10), compression="gzip", shuffle=True)
        d[:4] = data[:4]
        # The second chunk stored shuffled but not deflated (bit 1: the pipeline's 2nd filter).
        raw = np.ascontiguousarray(data[4:]).view(np.uint8).reshape(-1, 4).T.tobytes()
        d.id.write_direct_chunk((4, 0), raw, filter_mask=0b10)
    with h5py.File(p, "r") as f:  # (reopened: h5py's chunk cache would hide the mask)
        assert f["x"].id.read_direct_chunk((4, 0))[0] == 0b10
        np.testing.assert_array_equal(f["x"][...], data)
    np.testing.assert_array_equal(lsio.open(str(p), "x")[...], data)
    np.testing.assert_array_equal(lsio.open(str(p), "x")[5:7, 2:9], data[5:7, 2:9])


def _write(path, fill):
    """Writes an HDF5 file in a frame of its own: h5py objects left in a test's frame, which
    pytest.raises keeps in a reference cycle, are freed later by the garbage collector on
    whichever thread runs it, and their deallocation then waits for h5py's lock, which
    another thread may hold (kerchunk's walk of a file, blocked on zarr's IO thread: a
    deadlock)."""
    with h5py.File(path, "w") as f:
        return fill(f)


def test_fletcher32_is_verified(tmp_path):
    p = tmp_path / "sum.h5"
    data = np.arange(4000, dtype="<f4").reshape(40, 100)

    def fill(f):
        infos = []
        f.create_dataset("x", data=data, chunks=(20, 100), fletcher32=True).id.chunk_iter(infos.append)
        return infos

    infos = _write(p, fill)
    np.testing.assert_array_equal(lsio.open(str(p), "x")[...], data)
    # One byte of the second chunk changes on disk: its checksum no longer matches.
    with open(p, "r+b") as fh:
        fh.seek(infos[1].byte_offset + 100)
        b = fh.read(1)
        fh.seek(infos[1].byte_offset + 100)
        fh.write(bytes([b[0] ^ 0xFF]))
    a = lsio.open(str(p), "x")
    np.testing.assert_array_equal(a[:20], data[:20])
    with pytest.raises(lsio.CorruptDataError) as e:
        a[20:]
    assert "sum.h5" in str(e.value)


def test_what_lsio_does_not_read_raises_when_opened(tmp_path):
    import hdf5plugin

    p = tmp_path / "odd.h5"

    def fill(f):
        f.create_dataset("ok", data=np.arange(10))
        f.create_dataset("fixed", data=np.array([b"ab", b"cd"]))
        f.create_dataset("text", data=["x", "yy"], dtype=h5py.string_dtype())
        f.create_dataset("pairs", data=np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]))  # read: records
        f.create_dataset("tagged", data=np.array([(1, "x")], dtype=[("a", "<i4"), ("t", h5py.string_dtype())]))
        f.create_dataset("bs", data=np.arange(1000, dtype="f4"), chunks=(100,), **hdf5plugin.BZip2())

    _write(p, fill)
    g = lsio.open_group(str(p))
    np.testing.assert_array_equal(g["ok"][...], np.arange(10))
    # Fixed-length (NUL-padded) strings are read, as h5py gives them; variable-length ones as str.
    np.testing.assert_array_equal(g["fixed"][...], np.array([b"ab", b"cd"]))
    assert list(g["text"][...]) == ["x", "yy"]
    np.testing.assert_array_equal(g["pairs"][...], np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]))
    for name, what in (("tagged", "variable-length"), ("bs", r"HDF5 filter 307 \(bzip2\) is not supported")):
        with pytest.raises(lsio.UnsupportedError, match=what):
            lsio.open(str(p), name)
    xr = pytest.importorskip("xarray")
    with pytest.raises(lsio.UnsupportedError, match="drop_variables"):
        xr.open_dataset(p, engine="lsio")


def test_bitshuffle_alone_and_with_lz4_or_zstd(tmp_path):
    """hdf5plugin's Bitshuffle (32008): every block compression, block sizes (default, 8,
    48 elements), chunks whose element count is not a multiple of 8 (the rest stored as it
    is), 1- to 8-byte elements of either byte order; bit for bit as h5py reads them."""
    import hdf5plugin

    rng = np.random.default_rng(32008)
    p = tmp_path / "bs.h5"
    cases = []
    for cname in ("none", "lz4", "zstd"):
        for nelems in (0, 8, 48):
            for dt in ("|u1", "<i2", ">i2", "<f4", ">f8", "<u8"):
                shape = (int(rng.integers(1, 30)), int(rng.integers(1, 700)))
                chunks = (int(rng.integers(1, shape[0] + 1)), int(rng.integers(1, shape[1] + 1)))
                cases.append((f"{cname}_{nelems}_{np.dtype(dt).str.replace('<', 'l').replace('>', 'b').replace('|', 'n')}",
                              cname, nelems, dt, shape, chunks))

    def fill(f):
        for name, cname, nelems, dt, shape, chunks in cases:
            if np.dtype(dt).kind == "f":
                data = np.cumsum(rng.normal(0, 1, shape), axis=-1).astype(dt)  # smooth: compresses
            else:
                data = (np.arange(np.prod(shape)).reshape(shape) % 97).astype(dt)
            f.create_dataset(name, data=data, chunks=chunks, **hdf5plugin.Bitshuffle(nelems=nelems, cname=cname))

    _write(p, fill)
    wants = _read(p, *[c[0] for c in cases])
    for (name, *_), want in zip(cases, wants):
        a = lsio.open(str(p), name)
        assert a.codecs and "lsio.hdf5.bitshuffle" in json.dumps(a.codecs), a.codecs
        assert_reads_like(a, want, rng, name)


def test_corrupt_bitshuffle_chunks_are_typed_errors(tmp_path):
    import hdf5plugin

    p = tmp_path / "bsc.h5"
    data = np.arange(4000, dtype="<i4")

    def fill(f):
        f.create_dataset("x", data=data, chunks=(1000,), **hdf5plugin.Bitshuffle(cname="lz4"))

    _write(p, fill)
    offsets = _chunk_offsets(p, "x")
    with open(p, "r+b") as fh:
        fh.seek(offsets[1] + 16)  # inside the first LZ4 block of chunk 1
        b = fh.read(4)
        fh.seek(offsets[1] + 16)
        fh.write(bytes(x ^ 0xFF for x in b))
        fh.seek(offsets[2] + 8)  # the block size field of chunk 2: 0xFFxxxxxx
        fh.write(b"\xff\xff\xff\xf0")
    a = lsio.open(str(p), "x")
    np.testing.assert_array_equal(a[:1000], data[:1000])
    np.testing.assert_array_equal(a[3000:], data[3000:])
    for sl in (slice(1000, 2000), slice(2000, 3000)):
        with pytest.raises(lsio.CorruptDataError, match="bitshuffle") as e:
            a[sl]
        assert "bsc.h5" in str(e.value)


def test_partial_edge_chunks_stored_unfiltered(tmp_path):
    """H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS (set here through libhdf5's H5Pset_chunk_opts:
    h5py has no wrapper; netCDF-C and some instrument writers set it): partial edge chunks
    are stored without filters and with a filter mask of 0. Read as h5py reads them, for
    deflate, shuffle alone (where the raw bytes would otherwise unshuffle into wrong values
    without any error) and fletcher32, with an unlimited dimension."""
    import ctypes

    from lsio import _hdf5

    set_opts = _hdf5._hdf5_function("H5Pset_chunk_opts")
    if set_opts is None:
        pytest.skip("libhdf5 not found in this process")
    p = tmp_path / "edges.h5"
    rng = np.random.default_rng(5)
    cases = {"deflate": dict(deflate=4), "shuffle": dict(shuffle=True), "all": dict(shuffle=True, deflate=1,
                                                                                    fletcher32=True)}
    datas = {n: rng.integers(-1000, 1000, (23, 17)).astype("<i4") for n in cases}

    def fill(f):
        for name, opts in cases.items():
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_chunk((5, 6))
            if opts.get("fletcher32"):
                dcpl.set_fletcher32()
            if opts.get("shuffle"):
                dcpl.set_shuffle()
            if opts.get("deflate"):
                dcpl.set_deflate(opts["deflate"])
            with h5py._objects.phil:
                assert set_opts(ctypes.c_int64(dcpl.id), ctypes.c_uint(2)) >= 0
            space = h5py.h5s.create_simple((23, 17), (h5py.h5s.UNLIMITED, 17))
            ds = h5py.h5d.create(f.id, name.encode(), h5py.h5t.STD_I32LE, space, dcpl=dcpl)
            ds.write(h5py.h5s.ALL, h5py.h5s.ALL, datas[name])

    _write(p, fill)
    wants = _read(p, *cases)
    for name, want in zip(cases, wants):
        np.testing.assert_array_equal(want, datas[name])
        a = lsio.open(str(p), name)
        np.testing.assert_array_equal(a[...], want, err_msg=name)
        np.testing.assert_array_equal(a[20:, 12:], want[20:, 12:], err_msg=name)


def test_partial_edge_chunks_when_the_option_cannot_be_asked(tmp_path, monkeypatch):
    """Without libhdf5's H5Pget_chunk_opts (no /proc, a static build, an unrelated copy):
    edge chunks whose stored size is exactly the raw chunk's are taken as unfiltered and
    re-encoded; other files still read, including filters numcodecs cannot re-encode."""
    import hdf5plugin

    from lsio import _hdf5

    src = tmp_path / "src"
    src.mkdir()
    test_partial_edge_chunks_stored_unfiltered(src)  # writes src/edges.h5 (and checks it)
    monkeypatch.setattr(_hdf5, "_h5_lib", False)
    assert _hdf5._hdf5_function("H5Pget_chunk_opts") is None
    p = tmp_path / "edges.h5"
    os.link(src / "edges.h5", p)  # a new path: nothing cached for it
    for name, want in zip(("deflate", "shuffle", "all"), _read(p, "deflate", "shuffle", "all")):
        np.testing.assert_array_equal(lsio.open(str(p), name)[...], want, err_msg=name)
    q = tmp_path / "plain.h5"
    data = np.arange(23 * 17, dtype="<f4").reshape(23, 17)

    def fill(f):
        f.create_dataset("bs", data=data, chunks=(5, 6), **hdf5plugin.Bitshuffle(cname="lz4"))
        f.create_dataset("z", data=data, chunks=(5, 6), compression="gzip")

    _write(q, fill)
    for name in ("bs", "z"):
        np.testing.assert_array_equal(lsio.open(str(q), name)[...], data, err_msg=name)


def _chunk_offsets(path, name):
    """Byte offsets of a dataset's chunks, in chunk order (h5py, in a frame of its own)."""
    with h5py.File(path, "r") as f:
        ds = f[name]
        return [ds.id.get_chunk_info(i).byte_offset for i in range(ds.id.get_num_chunks())]


def _read(path, *names):
    """h5py's reads of the datasets `names`, in a frame of their own (see _write)."""
    with h5py.File(path, "r") as f:
        return [f[n][...] for n in names]


def _read_strings(path, names):
    """h5py's reads, in a frame of their own (see _write)."""
    with h5py.File(path, "r") as f:
        return {k: f[k].asstr()[...] for k in names}


def _kerchunk_refs(path, out):
    """kerchunk's references to `path`; its h5py objects are freed here, on this thread (see
    _write: freed later by the garbage collector on zarr's IO thread, they deadlock)."""
    import gc

    from kerchunk.hdf import SingleHdf5ToZarr

    out.write_text(json.dumps(SingleHdf5ToZarr(str(path), inline_threshold=300).translate()))
    gc.collect()
    return out


def _identical_to_h5netcdf(path) -> bool:
    """xarray's lsio and h5netcdf engines agree; h5netcdf's h5py file is closed and collected
    here, on this thread (see _write)."""
    import gc

    import xarray as xr

    with xr.open_dataset(path, engine="lsio") as a, xr.open_dataset(path, engine="h5netcdf") as b:
        same = a.identical(b)
    gc.collect()
    return same


def test_variable_length_strings(tmp_path, moto_s3):
    """NetCDF4 string variables (HDF5 variable-length strings, kept in the file's global heap):
    read once and served as Zarr vlen-utf8 strings; equal to h5py, xarray identical() to
    h5netcdf, through kerchunk's references too, pickled, and from S3."""
    netCDF4 = pytest.importorskip("netCDF4")
    nc = tmp_path / "stations.nc"
    names = np.array(["Oslo", "Bergen", "Tromsø", ""], dtype=object)
    with netCDF4.Dataset(nc, "w") as d:
        d.createDimension("station", 4)
        d.createDimension("t", 3)
        d.createVariable("station", str, ("station",))[:] = names
        lab = d.createVariable("label", str, ("t",))
        for i, s in enumerate(["first", "second", "ünïcødé"]):
            lab[i] = s
        d.createVariable("temp", "f4", ("t", "station"))[:] = np.arange(12).reshape(3, 4)
        grid = d.createVariable("grid", str, ("t", "station"))
        for i in range(3):
            for j in range(4):
                grid[i, j] = "x" * (i + j)
    want = _read_strings(nc, ("station", "label", "grid"))
    g = lsio.open_group(str(nc))
    for k, w in want.items():
        got = g[k][...]
        assert got.shape == w.shape and [str(x) for x in got.ravel()] == [str(x) for x in w.ravel()], k
    assert [str(x) for x in g["grid"][1:3, 2]] == ["xxx", "xxxx"]
    a = lsio.open(str(nc), "label")
    assert [str(x) for x in pickle.loads(pickle.dumps(a))[...]] == ["first", "second", "ünïcødé"]
    pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    assert _identical_to_h5netcdf(nc)
    # kerchunk's references to the file inline the strings as vlen-utf8: read the same.
    pytest.importorskip("kerchunk.hdf")
    refs = _kerchunk_refs(nc, tmp_path / "stations.json")
    r = lsio.open_group(str(refs))
    assert [str(x) for x in r["station"][...]] == list(want["station"])
    # S3
    bucket = moto_s3.create_bucket("lsio-hdf5-strings")
    moto_s3.put(bucket, "s.nc", nc.read_bytes())
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id, "secret": moto_s3.secret_access_key,
          "region": moto_s3.region, "timeout": 10, "retries": 1}
    s = lsio.open(f"s3://{bucket}/s.nc", "station", storage_options=so)
    assert [str(x) for x in s[...]] == list(want["station"])


def test_remote_files_over_http_and_s3(nginx_server, moto_s3, tmp_path):
    src = tmp_path / "www"
    src.mkdir()
    nc = src / "era.nc"
    _era(nc, np.random.default_rng(9))
    want, sst = _read(nc, "t2m", "sst")  # h5py's objects out of this frame (see _write)
    server = nginx_server(src)
    a = lsio.open(f"{server.http_url}/era.nc", "t2m")
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a.read_crops([[0, 1, 2], [3, 10, 20]], (2, 8, 9)),
                                  np.stack([want[0:2, 1:9, 2:11], want[3:5, 10:18, 20:29]]))
    np.testing.assert_array_equal(lsio.open(f"{server.http_url}/era.nc", "sst")[...], sst)
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    assert xr.open_dataset(f"{server.http_url}/era.nc", engine="lsio").identical(xr.open_dataset(nc, engine="h5netcdf"))
    # S3 (moto), with the same storage_options for the file's metadata and its chunks.
    bucket = moto_s3.create_bucket("lsio-hdf5")
    moto_s3.put(bucket, "data/era.nc", nc.read_bytes())
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id, "secret": moto_s3.secret_access_key,
          "region": moto_s3.region, "timeout": 10, "retries": 1}
    b = lsio.open(f"s3://{bucket}/data/era.nc", "t2m", storage_options=so)
    np.testing.assert_array_equal(b[...], want)
    # Pickled: the file and its options travel, not the parsed index.
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(b))[2], want[2])
    # The file rewritten on the server: chunk reads are pinned to the version whose chunk index
    # was read, so the open array fails (typed, ESTALE) rather than mixing two files; a new
    # open reads the new file.
    nc2 = tmp_path / "era2.nc"
    _era(nc2, np.random.default_rng(10))
    (want2,) = _read(nc2, "t2m")
    moto_s3.put(bucket, "data/era.nc", nc2.read_bytes())
    with pytest.raises(lsio.StorageError) as e:
        b[...]
    assert e.value.errno == errno.ESTALE and "era.nc" in str(e.value)
    np.testing.assert_array_equal(lsio.open(f"s3://{bucket}/data/era.nc", "t2m", storage_options=so)[...], want2)


def test_pickled_and_read_in_worker_processes(matrix):
    _, h5, cases = matrix
    name = next(_name(c) for c in cases if c["layout"] == "chunked" and c["filters"] == "zstd")
    a = lsio.open(str(h5), name)
    assert_reads_in_worker_processes(a)


def test_malformed_files_are_typed_errors(tmp_path):
    good = tmp_path / "good.h5"
    _write(good, lambda f: f.create_dataset("x", data=np.arange(100000, dtype="f8"), chunks=(1000,),
                                            compression="gzip") and None)
    cut = tmp_path / "cut.h5"
    cut.write_bytes(good.read_bytes()[:3000])
    with pytest.raises(lsio.FormatError, match="cut.h5"):
        lsio.open(str(cut), "x")
    garbage = tmp_path / "garbage.nc"
    garbage.write_bytes(b"\x89HDF\r\n\x1a\n" + os.urandom(5000))
    with pytest.raises(lsio.FormatError, match="garbage.nc"):
        lsio.open_group(str(garbage))
    nc3 = tmp_path / "classic.nc"
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(nc3, "w", format="NETCDF3_CLASSIC") as d:
        d.createDimension("x", 3)
        d.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    with pytest.raises(lsio.UnsupportedError, match="NetCDF3"):
        lsio.open(str(nc3), "v")
    with pytest.raises(lsio.NotFoundError):
        lsio.open(str(good), "nope")
    missing = tmp_path / "absent.nc"
    with pytest.raises((FileNotFoundError, lsio.NotFoundError)) as e:
        lsio.open(str(missing), "x")
    assert getattr(e.value, "errno", errno.ENOENT) == errno.ENOENT


def test_remote_netcdf3_says_so(nginx_server, tmp_path):
    src = tmp_path / "www"
    src.mkdir()
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(src / "classic.nc", "w", format="NETCDF3_64BIT_OFFSET") as d:
        d.createDimension("x", 3)
        d.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]
    with pytest.raises(lsio.UnsupportedError, match="NetCDF3"):
        lsio.open(f"{nginx_server(src).http_url}/classic.nc", "v")


class _FileStore:
    """A local file behind _core.RemoteStore's read_range and read_ranges (the file object's
    only calls), counting the requests."""

    def __init__(self, path):
        self.path, self.calls = path, 0

    def read_range(self, key, offset, length, version="", size=0):
        self.calls += 1
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def read_ranges(self, key, ranges, version="", size=0):
        return [self.read_range(key, o, n, version, size) for o, n in ranges]


def _many_chunks(path, userblock=0):
    """Datasets whose chunk indexes are B-trees of 2 and 3 levels (1-d, 3-d and 4-d)."""
    rng = np.random.default_rng(3)
    with h5py.File(path, "w", userblock_size=userblock) as f:
        # 8,192 chunks of 1 KiB: index nodes 64 KiB and more apart, as in a NetCDF4 file
        f.create_dataset("v3", data=rng.random((64, 128, 128)), chunks=(1, 8, 16))
        f.create_dataset("v1", data=rng.random(6000), chunks=(2,))
        f.create_dataset("v4", data=rng.random((3, 5, 32, 32), dtype="f4"), chunks=(1, 1, 4, 4), shuffle=True)
        f.create_dataset("small", data=np.arange(10), chunks=(5,))


def _entries(b, name):
    """A translation's entries, to compare (in place of _hdf5._Builder.build)."""
    return (b.url, dict(b.inline), sorted(zip(b.keys, b.offsets, b.lengths)))


def _translate(path, prefetch=True):
    """(entries, reads h5py waited for, requests) of `path` read through _RangeFile."""
    from lsio import _hdf5

    store = _FileStore(path)
    rf = _hdf5._RangeFile(store, "k", os.path.getsize(path), "")
    if not prefetch:
        rf._prefetch_below = lambda at, node: None
    try:
        with h5py.File(rf, "r") as f:
            refs = _hdf5.build(f, str(path), str(path), rf)
    finally:
        rf.close()
    del f
    __import__("gc").collect()  # h5py's objects freed on this thread (see _write)
    return refs, rf.misses, store.calls


@pytest.mark.parametrize("userblock", [0, 1024])
def test_remote_chunk_index_is_fetched_a_level_at_a_time(tmp_path, monkeypatch, userblock):
    # h5py walks a chunk index node by node; over a network each node is a round trip. The
    # file object fetches the nodes below each index node it sees in parallel, so h5py waits
    # for a handful of reads instead of one per node (here ~300 leaves), and the references
    # are the same.
    from lsio import _hdf5

    monkeypatch.setattr(_hdf5._Builder, "build", _entries)
    p = tmp_path / "many.h5"
    _many_chunks(p, userblock)
    with h5py.File(p, "r") as f:
        assert f.userblock_size == userblock
        leaves = -(-f["v3"].id.get_num_chunks() // 64)
    assert leaves >= 128
    refs, misses, requests = _translate(p)
    base_refs, base_misses, _ = _translate(p, prefetch=False)
    assert base_misses > leaves  # without the prefetch, a wait per leaf
    assert misses < 30, (misses, base_misses)
    assert requests < base_misses + 2 * leaves
    with h5py.File(p, "r") as f:
        local = _hdf5.build(f, str(p), str(p))
    assert len(local[2]) > 12000
    assert refs == local and base_refs == local


def test_remote_chunk_index_prefetch_reads_like_h5py(nginx_server, tmp_path):
    src = tmp_path / "www"
    src.mkdir()
    p = src / "many.h5"
    _many_chunks(p, 512)
    want = _read(p, "v1", "v3", "v4", "small")
    server = nginx_server(src)
    for name, w in zip(("v1", "v3", "v4", "small"), want):
        np.testing.assert_array_equal(lsio.open(f"{server.http_url}/many.h5", name)[...], w)


def test_remote_chunk_index_prefetch_ignores_what_is_not_an_index(tmp_path):
    # Bytes that start like an index node but are not one (a wrong rank, children outside the
    # file) prefetch nothing; reads still return the file's bytes.
    from lsio import _hdf5

    p = tmp_path / "fake.bin"
    node = bytearray(b"TREE\x01\x01\x02\x00" + b"\xff" * 16)
    node += (b"\x00" * 40 + (10 ** 12).to_bytes(8, "little")) * 2 + b"\x00" * 40
    node += b"\x00" * (3136 - len(node))
    p.write_bytes(bytes(node) + os.urandom(100000))
    store = _FileStore(p)
    rf = _hdf5._RangeFile(store, "k", os.path.getsize(p), "")
    buf = bytearray(3136)
    assert rf.readinto(buf) == 3136 and bytes(buf) == bytes(node)
    assert store.calls == 1 and not rf._nodes
    rf.close()


@pytest.mark.parametrize("dtype", ["f8", "i8", "u8", "f4", "i2"])
def test_netcdf_fletcher32_before_shuffle(tmp_path, dtype):
    # netCDF-C runs fletcher32 before shuffle: an 8-byte type's shuffled chunk ends in the
    # 4 checksum bytes, which HDF5's shuffle leaves in place (numcodecs' shuffle refuses them).
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "f.nc"
    data = (np.arange(7 * 10 * 3) - 50).reshape(7, 10, 3).astype(dtype)
    with netCDF4.Dataset(p, "w") as d:
        for n, k in zip(("t", "y", "x"), data.shape):
            d.createDimension(n, k)
        d.createVariable("v", dtype, ("t", "y", "x"), zlib=True, shuffle=True, fletcher32=True,
                         chunksizes=(2, 4, 3))[:] = data
    (want,) = _read(p, "v")
    a = lsio.open(str(p), "v")
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a.read_crops([[0, 1, 0], [5, 6, 1]], (2, 4, 2)),
                                  np.stack([want[0:2, 1:5, 0:2], want[5:7, 6:10, 1:3]]))


@contextlib.contextmanager
def _xr_pair(path, **kw):
    """The file through engine="lsio" and engine="h5netcdf", closed (and h5py's objects freed
    on this thread, see _write) on leaving."""
    import gc

    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    with xr.open_dataset(path, engine="lsio", **kw) as mine, xr.open_dataset(path, engine="h5netcdf", **kw) as ref:
        yield mine, ref
    gc.collect()


@pytest.mark.parametrize("tchunk", [1, 4])
def test_variables_shorter_than_their_unlimited_dimension(tmp_path, tchunk):
    # A file being appended to: `time` has 6 records, `a` only 4 (3 with a (4, 3) chunk across
    # its end). netCDF4-python and h5netcdf show `a` as long as the dimension, padded with its
    # fill value; so does lsio (a chunk across the end holds no data past it).
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "u.nc"
    with netCDF4.Dataset(p, "w") as d:
        d.createDimension("time", None)
        d.createDimension("x", 3)
        d.createVariable("time", "i4", ("time",))[:6] = np.arange(6)
        a = d.createVariable("a", "f4", ("time", "x"), chunksizes=(tchunk, 3), zlib=True, fill_value=-1.5)
        a[:3] = np.arange(9, dtype="f4").reshape(3, 3)
    with netCDF4.Dataset(p) as d:
        want = np.ma.filled(d["a"][:], -1.5)
    got = lsio.open(str(p), "a")
    assert got.shape == (6, 3)
    np.testing.assert_array_equal(got[...], want)
    np.testing.assert_array_equal(got.read_crops([[2, 0], [4, 1]], (2, 2)), np.stack([want[2:4, 0:2], want[4:6, 1:3]]))
    with _xr_pair(p) as (mine, ref):
        assert mine.identical(ref)
        assert mine.a.dtype == ref.a.dtype
    # Strings too (padded with ""), as netCDF4-python reads them (h5netcdf 1.8 fails on this).
    with netCDF4.Dataset(p, "a") as d:
        d.createVariable("s", str, ("time",))[:2] = np.array(["p", "qr"], dtype=object)
    with netCDF4.Dataset(p) as d:
        want_s = list(d["s"][:])
    assert list(lsio.open(str(p), "s")[...]) == want_s == ["p", "qr", "", "", "", ""]


def test_attribute_types_read_as_h5netcdf_gives_them(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "t.nc"
    with netCDF4.Dataset(p, "w") as d:
        d.createDimension("x", 4)
        v = d.createVariable("v", "i2", ("x",), fill_value=np.int16(-999))
        v.scale_factor = np.float32(0.5)
        v.add_offset = np.float32(10)
        v.valid_range = np.array([0, 100], "i2")
        v.none = np.array([], "f4")
        v.cplx_free = np.float64(2.5)
        v[:] = np.array([1, 2, -999, 4]) * 0.5 + 10
        c = d.createVariable("c", "S1", ("x",), fill_value=b"z")
        c[:2] = [b"a", b"b"]
        d.empty_global = np.array([], "i4")
        d.title = "t"
    a = lsio.open(str(p), "v")
    assert type(a.attrs["scale_factor"]) is np.float32 and a.attrs["scale_factor"] == 0.5
    assert a.attrs["valid_range"].dtype == np.int16 and a.attrs["valid_range"].tolist() == [0, 100]
    assert a.attrs["none"].dtype == np.float32 and a.attrs["none"].size == 0
    assert "_lsio_hdf5_types" not in a.attrs and "_lsio_hdf5_types" not in lsio.open_group(str(p)).attrs
    assert lsio.open_group(str(p)).attrs["empty_global"].dtype == np.int32
    for kw in ({}, {"mask_and_scale": False}, {"concat_characters": False}):
        with _xr_pair(p, **kw) as (mine, ref):
            assert mine.identical(ref), kw
            for name in ("v", "c"):
                assert mine[name].dtype == ref[name].dtype, (kw, name)
                for k, val in ref[name].attrs.items():
                    assert type(mine[name].attrs[k]) is type(val), (kw, name, k)
                if "_FillValue" in ref[name].encoding:
                    assert type(mine[name].encoding["_FillValue"]) is type(ref[name].encoding["_FillValue"]), kw


def test_null_dataspace_dataset_leaves_the_rest_of_the_file(tmp_path):
    p = tmp_path / "e.h5"
    _write(p, lambda f: (f.create_dataset("good", data=np.arange(5)),
                         f.create_dataset("placeholder", data=h5py.Empty("f4"))) and None)
    np.testing.assert_array_equal(lsio.open(str(p), "good")[...], np.arange(5))
    assert set(lsio.open_group(str(p)).array_names) == {"good", "placeholder"}
    with pytest.raises(lsio.UnsupportedError, match="null dataspace"):
        lsio.open(str(p), "placeholder")


def test_coordinate_variable_of_two_dimensions(tmp_path):
    # netCDF-C writes no dimension list on `station(station, strlen)`, only its dimension ids.
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "c.nc"
    with netCDF4.Dataset(p, "w") as d:
        d.createDimension("station", 3)
        d.createDimension("strlen", 4)
        d.createVariable("station", "S1", ("station", "strlen"))[:] = netCDF4.stringtochar(
            np.array(["AB", "CDE", "F"], "S4"))
        d.createVariable("temp", "f4", ("station",))[:] = [1, 2, 3]
    assert lsio.open(str(p), "station").dimension_names == ("station", "strlen")
    with _xr_pair(p) as (mine, ref):
        assert mine.identical(ref)


def test_hard_and_soft_links_are_arrays_too(tmp_path):
    p = tmp_path / "l.h5"

    def fill(f):
        f["x"] = np.arange(3.0)
        f["a"] = np.arange(3.0) * 2
        f["b_hard"] = f["a"]
        f["c_soft"] = h5py.SoftLink("/a")
        f["dangling"] = h5py.SoftLink("/nowhere")
        g = f.create_group("g")
        g["up"] = h5py.SoftLink("/")  # a group inside itself: not entered again
        g["v"] = np.arange(4)

    _write(p, fill)
    grp = lsio.open_group(str(p))
    assert set(grp.array_names) == {"x", "a", "b_hard", "c_soft"}
    np.testing.assert_array_equal(lsio.open(str(p), "c_soft")[...], np.arange(3.0) * 2)
    np.testing.assert_array_equal(lsio.open(str(p), "b_hard")[...], np.arange(3.0) * 2)
    np.testing.assert_array_equal(lsio.open(str(p), "g/v")[...], np.arange(4))


def test_remote_store_read_ranges_is_pinned_like_read_range(nginx_server, tmp_path):
    # The batch the chunk-index prefetch uses: the bytes of each range, all in one call, pinned
    # to the version the file had (a rewritten file fails, never mixing two versions).
    from lsio._kerchunk import _open_object

    src = tmp_path / "www"
    src.mkdir()
    blob = os.urandom(300_000)
    (src / "f.bin").write_bytes(blob)
    url = f"{nginx_server(src).http_url}/f.bin"
    store, key, size, version = _open_object(url, {})
    ranges = [(0, 10), (70_000, 5000), (299_990, 10), (123, 0), (5, 200_000)]
    got = store.read_ranges(key, ranges, version, size)
    assert [bytes(g) for g in got] == [blob[o:o + n] for o, n in ranges]
    assert store.read_ranges(key, []) == []
    with pytest.raises(lsio.Error, match=r"f\.bin.*299995"):  # past the end: typed, naming the range
        store.read_ranges(key, [(0, 10), (299_995, 10)], version, size)
    (src / "f.bin").write_bytes(os.urandom(300_000))
    os.utime(src / "f.bin", (1, 1))  # another Last-Modified (nginx's ETag is mtime and size)
    with pytest.raises(lsio.StorageError) as e:
        store.read_ranges(key, [(0, 10), (1000, 10)], version, size)
    assert e.value.errno == errno.ESTALE


def test_padding_touches_only_the_padded_axis(tmp_path):
    # `w` is shorter than `time` and has a partial edge chunk along the fixed axis `x` (7 by
    # 3): only chunks across its end along `time` are read through h5py; those along `x` are
    # references as before, so a filter lsio cannot re-encode (LZ4) still reads.
    netCDF4 = pytest.importorskip("netCDF4")
    hdf5plugin = pytest.importorskip("hdf5plugin")
    p = tmp_path / "s.h5"

    def fill(f):
        f.create_dataset("t", data=np.arange(8), maxshape=(None,), chunks=(4,))
        f["t"].make_scale("t")
        f.create_dataset("x", data=np.arange(7))
        f["x"].make_scale("x")
        w = f.create_dataset("w", data=np.ones((8, 7), "f4"), maxshape=(None, 7), chunks=(4, 3),
                             **hdf5plugin.LZ4())
        w.resize((4, 7))
        w.dims[0].attach_scale(f["t"])
        w.dims[1].attach_scale(f["x"])

    del netCDF4
    _write(p, fill)
    a = lsio.open(str(p), "w")
    assert a.shape == (8, 7)
    got = a[...]
    np.testing.assert_array_equal(got[:4], np.ones((4, 7), "f4"))
    assert (got[4:] == a.fill_value).all()


def test_odd_attributes_keep_their_types(tmp_path):
    p = tmp_path / "a.h5"

    def fill(f):
        d = f.create_dataset("v", data=np.arange(3))
        d.attrs["e_s1"] = h5py.Empty("S1")
        d.attrs["c2"] = np.array([[1 + 2j, 3 - 4j], [5j, 6]], "c8")
        d.attrs["c0"] = np.complex128(1 - 1j)

    _write(p, fill)
    at = lsio.open(str(p), "v").attrs
    assert at["e_s1"] == b"" and isinstance(at["e_s1"], np.bytes_)
    assert at["c2"].dtype == np.complex64 and at["c2"].shape == (2, 2) and at["c2"][1, 0] == 5j
    assert type(at["c0"]) is np.complex128 and at["c0"] == 1 - 1j


def test_netcdf_encoding_names_the_filters(tmp_path):
    # shuffle first in the pipeline (netCDF4's default zlib + shuffle) is numcodecs' shuffle,
    # which zarr-python knows: xarray's encoding carries the compressors.
    netCDF4 = pytest.importorskip("netCDF4")
    p = tmp_path / "e.nc"
    with netCDF4.Dataset(p, "w") as d:
        d.createDimension("x", 8)
        d.createVariable("v", "f4", ("x",), zlib=True, complevel=4)[:] = np.arange(8)
    with _xr_pair(p) as (mine, _):
        names = [getattr(c, "codec_name", type(c).__name__) for c in mine.v.encoding.get("compressors", ())]
        assert names == ["numcodecs.shuffle", "numcodecs.zlib"]


def _stored_types_file(path):
    import h5py

    sp = h5py.h5s.create_simple((4,))
    with h5py.File(path, "w") as f:
        f["good"] = np.arange(4.0)
        f["bool8"] = np.array([False, True, True, False])  # h5py's own enum: read as stored
        t = h5py.h5t.create(h5py.h5t.COMPOUND, 16)  # complex with padding between its parts
        t.insert(b"r", 0, h5py.h5t.IEEE_F32LE)
        t.insert(b"i", 8, h5py.h5t.IEEE_F32LE)
        buf = np.zeros(4, dtype={"names": ["r", "i"], "formats": ["<f4", "<f4"], "offsets": [0, 8], "itemsize": 16})
        buf["r"], buf["i"] = [1, 2, 3, 4], [10, 20, 30, 40]
        h5py.h5d.create(f.id, b"complex_padded", t, sp).write(h5py.h5s.ALL, h5py.h5s.ALL, buf)
        t = h5py.h5t.enum_create(h5py.h5t.STD_I32LE)  # bool over int32
        t.enum_insert(b"FALSE", 0)
        t.enum_insert(b"TRUE", 1)
        h5py.h5d.create(f.id, b"bool32", t, sp).write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([0, 1, 1, 0], "<i4"),
                                                       mtype=t)
        t = h5py.h5t.STD_I16LE.copy()  # 12 bits at bit 4
        t.set_precision(12)
        t.set_offset(4)
        h5py.h5d.create(f.id, b"int12", t, sp).write(h5py.h5s.ALL, h5py.h5s.ALL, np.array([1, 2, -3, 100], "<i2"))
        t = h5py.h5t.IEEE_F32LE.copy()  # not IEEE: a 7-bit exponent
        t.set_fields(31, 24, 7, 0, 24)
        t.set_ebias(63)
        h5py.h5d.create(f.id, b"float_custom", t, sp).write(h5py.h5s.ALL, h5py.h5s.ALL,
                                                           np.array([1.5, 2, -3, 100], "<f4"))
        t = h5py.h5t.STD_I32LE.copy()  # 3-byte integers: h5py has no dtype for them
        t.set_size(3)
        t.set_precision(24)
        h5py.h5d.create(f.id, b"int24", t, sp)


def test_datasets_h5py_converts_are_refused_not_misread(tmp_path):
    # h5py shows the type HDF5 converts to; lsio reads stored bytes, so a stored type other
    # than that dtype must be refused (it read padded complex, bool-over-int32, 12-bit ints
    # and non-IEEE floats as garbage before), and one dataset h5py cannot map at all leaves
    # the rest of the file readable.
    import h5py

    path = str(tmp_path / "types.h5")
    _stored_types_file(path)
    with h5py.File(path, "r") as f:
        for name in ("good", "bool8"):
            got, want = lsio.open(path, name)[...], f[name][()]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), name
    for name in ("complex_padded", "bool32", "int12", "float_custom", "int24"):
        with pytest.raises(lsio.UnsupportedError, match="HDF5 dataset"):
            lsio.open(path, name)


def test_fill_values_read_bit_for_bit_and_fill_time_never_reads_zeros(tmp_path):
    import h5py

    path = str(tmp_path / "fills.h5")
    neg_nan = np.array([0xFFF8000000000001], "<u8").view("<f8")[0]
    with h5py.File(path, "w") as f:
        x = f.create_dataset("nan", shape=(4,), chunks=(2,), dtype="f8", fillvalue=neg_nan)
        x[:2] = 1
        y = f.create_dataset("nan32", shape=(4,), chunks=(2,), dtype=">f4",
                             fillvalue=np.array([0x7FA00001], ">u4").view(">f4")[0])
        y[:2] = 1
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((2,))
        dcpl.set_fill_value(np.array(5, "i4"))
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
        h5py.h5d.create(f.id, b"never", h5py.h5t.STD_I32LE, h5py.h5s.create_simple((6,)), dcpl=dcpl)
        f["never"][0:2] = [1, 2]
    with h5py.File(path, "r") as f:
        for name in ("nan", "nan32", "never"):
            want = f[name][()]
            want = want.astype(want.dtype.newbyteorder("="))  # lsio returns native byte order
            got = lsio.open(path, name)[...]
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (name, got, want)


def test_huge_unwritten_datasets_cost_nothing_to_open(tmp_path):
    # A 2 KB file naming 2**62 unwritten bytes of a contiguous dataset, or five million
    # never-written strings, opens at once and in little memory (the strings were all read
    # into Python objects, 1.2 GB, and the divisor search took minutes); 20 million are
    # refused without reading them.
    import resource
    import time

    import h5py

    path = str(tmp_path / "big.h5")
    with h5py.File(path, "w") as f:
        f["good"] = np.arange(4.0)
        f.create_dataset("huge", shape=(2 ** 62 - 1,), dtype="u1")
        f.create_dataset("names", shape=(5_000_000,), chunks=(1_000_000,), dtype=h5py.string_dtype())
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    np.testing.assert_array_equal(lsio.open(path, "good")[...], np.arange(4.0))
    assert time.monotonic() - t0 < 20  # not a speed check: the divisor search took minutes
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0 < 200 << 10  # KiB: under 200 MiB
    np.testing.assert_array_equal(lsio.open(path, "huge")[12345:12349], np.zeros(4, "u1"))
    assert list(lsio.open(path, "names")[4_999_998:]) == ["", ""]  # 20 MB encoded: read, in blocks
    with h5py.File(path, "a") as f:
        f.create_dataset("more", shape=(20_000_000,), chunks=(1_000_000,), dtype=h5py.string_dtype())
    with pytest.raises(lsio.UnsupportedError, match="variable-length strings of at least"):
        lsio.open(path, "more")


@pytest.mark.parametrize("validators", ["strong", "last_modified"])
def test_remote_file_rewritten_between_block_reads_is_never_mixed(fault_server, tmp_path, validators):
    # h5py reads a remote file through lsio's range reads, pinned to the version stat gave:
    # a server that sends only Last-Modified (no ETag) must pin too (the version was its ETag,
    # "" there, and reads were not pinned at all).
    import time

    from lsio import _kerchunk

    fault_server.validators = validators
    path = os.path.join(fault_server.root, "f.bin")
    with open(path, "wb") as f:
        f.write(b"A" * 100)
    store, name, size, version = _kerchunk._open_object(fault_server.url("f.bin"), {"retries": 0})
    assert size == 100 and version
    assert bytes(store.read_range(name, 0, 10, version, size)) == b"A" * 10
    time.sleep(1.1)  # Last-Modified has one-second resolution
    with open(path, "wb") as f:
        f.write(b"B" * 100)
    with pytest.raises(lsio.StorageError) as e:
        store.read_range(name, 10, 10, version, size)
    assert e.value.errno == errno.ESTALE


def test_translations_kept_are_bounded(tmp_path, monkeypatch):
    # One translation per file is kept, least recently used first, at most _CACHED of them:
    # open_mfdataset over thousands of files must not keep them all.
    import h5py

    from lsio import _hdf5

    monkeypatch.setattr(_hdf5, "_CACHED", 3)
    paths = []
    for i in range(5):
        p = tmp_path / f"f{i}.h5"
        with h5py.File(p, "w") as f:
            f["x"] = np.full(4, i, "f4")
        paths.append(str(p))
    for i, p in enumerate(paths):
        np.testing.assert_array_equal(lsio.open(p, "x")[...], np.full(4, i, "f4"))
    kept = [p for p in paths if p in _hdf5._cache]
    assert len(_hdf5._cache) <= 3 and kept == paths[2:], kept
    np.testing.assert_array_equal(lsio.open(paths[0], "x")[...], np.zeros(4, "f4"))  # translated again
    assert paths[0] in _hdf5._cache and paths[2] not in _hdf5._cache


def test_fletcher32_of_old_hdf5_with_swapped_halves_reads_as_h5py_reads_it(tmp_path):
    # HDF5 before 1.6.3 stored Fletcher-32 with the bytes of each 16-bit half swapped; HDF5
    # (and so h5py) accepts that form too. Any other change is still a mismatch.
    import h5py

    p = str(tmp_path / "f32.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(8, dtype="<i4"), chunks=(8,), fletcher32=True)
    with h5py.File(p) as f:
        info = f["x"].id.get_chunk_info(0)
    at = info.byte_offset + info.size - 4
    with open(p, "r+b") as fh:
        fh.seek(at)
        c = bytearray(fh.read(4))
        fh.seek(at)
        fh.write(bytes([c[1], c[0], c[3], c[2]]))
    with h5py.File(p) as f:
        want = f["x"][()]
    np.testing.assert_array_equal(lsio.open(p, "x")[...], want)
    with open(p, "r+b") as fh:
        fh.seek(at)
        fh.write(bytes([c[1], c[0], c[2], c[3]]))  # only one half swapped: a mismatch
    with pytest.raises(lsio.CorruptDataError, match="fletcher32"):
        lsio.open(p, "x")[...]
