"""kerchunk references read through the engine (lsio/_kerchunk.py, cpp/src/store/manifest.h).

Files are written by h5py and netCDF4-python over a seeded random matrix (chunked with partial
edge chunks, contiguous and compact layouts; no filter, gzip, shuffle + gzip; little- and
big-endian dtypes; fill values with unwritten chunks; nested groups; unlimited dimensions),
referenced by kerchunk's own SingleHdf5ToZarr (inline thresholds 0 and 300) and
MultiZarrToZarr, and every read through lsio is compared bit for bit with h5py's on random
selections and read_crops batches; xarray's result is identical() to h5netcdf's. Then the same
over HTTP (nginx on 127.0.0.1), pickling, and malformed reference files (typed errors).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import lsio

h5py = pytest.importorskip("h5py")
kerchunk_hdf = pytest.importorskip("kerchunk.hdf")

from hdf5_matrix import assert_reads_in_worker_processes, assert_reads_like
from hdf5_matrix import dataset_cases as _dataset_cases, write_h5 as _write_h5


def _refs(h5, out, inline):
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(h5), inline_threshold=inline).translate()
    out.write_text(json.dumps(refs))
    return out


def _zarr_reader(refs):
    """name -> the array zarr-python reads through fsspec's ReferenceFileSystem."""
    fsspec = pytest.importorskip("fsspec")
    import zarr

    fs = fsspec.filesystem("reference", fo=str(refs), remote_protocol="file", asynchronous=True)
    store = zarr.storage.FsspecStore(fs, read_only=True)
    return lambda name: np.asarray(zarr.open_array(store, path=name, mode="r")[...])


@pytest.fixture(scope="module")
def h5_matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("kerchunk")
    rng = np.random.default_rng(2026)
    cases = _dataset_cases(rng, 24)
    h5 = root / "matrix.h5"
    _write_h5(h5, cases, rng)
    return root, h5, cases


@pytest.mark.parametrize("inline,form", [(0, "json"), (300, "json"), (300, "parquet")])
def test_h5py_matrix_equals_h5py(h5_matrix, inline, form):
    root, h5, cases = h5_matrix
    refs = _refs(h5, root / f"refs{inline}.json", inline)
    if form == "parquet":
        # fsspec's parquet layout, as kerchunk writes it; a small record size spreads each
        # array's references over several refs.<i>.parq files.
        pytest.importorskip("pyarrow")
        df = pytest.importorskip("kerchunk.df")
        out = root / f"refs{inline}.parq"
        if not out.exists():
            df.refs_to_dataframe(json.loads(refs.read_text()), str(out), record_size=7)
        refs_json, refs = refs, out
    rng = np.random.default_rng(inline)
    g = lsio.open_group(str(refs))
    zref = _zarr_reader(refs if form == "json" else refs_json)
    with h5py.File(h5, "r") as f:
        for c in cases:
            name = f"{c['group']}/{c['name']}" if c["group"] else c["name"]
            want = f[name][...]
            # zarr-python on the same references (fsspec's ReferenceFileSystem) is the reference
            # reader of references; where kerchunk copied the dataset faithfully it equals h5py.
            # kerchunk leaves compact datasets out of its references (their keys are absent), so
            # every reader of the references sees the fill value there.
            zwant = zref(name)
            if c["layout"] != "compact":
                np.testing.assert_array_equal(zwant, want, err_msg=name)
            want = zwant
            a = lsio.open(str(refs), name)
            assert_reads_like(a, want, rng, name)
            assert np.array_equal(g[name][...], want)
    # Nested groups are groups.
    assert "grp" in g.group_names and "sub" in g["grp"].group_names


def test_netcdf4_through_references_is_identical_to_h5netcdf(tmp_path):
    netCDF4 = pytest.importorskip("netCDF4")
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    nc = tmp_path / "era.nc"
    rng = np.random.default_rng(1)
    with netCDF4.Dataset(nc, "w") as d:
        d.createDimension("time", None)
        d.createDimension("lat", 33)
        d.createDimension("lon", 45)
        t = d.createVariable("time", "f8", ("time",))
        t.units = "hours since 2020-01-01"
        t.calendar = "standard"
        d.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-16, 16, 33)
        d.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 44, 45)
        v = d.createVariable("t2m", "i2", ("time", "lat", "lon"), zlib=True, shuffle=True, chunksizes=(1, 16, 16),
                             fill_value=-32767)
        v.units = "K"
        v.scale_factor = 0.01
        v.add_offset = 273.15
        v.long_name = "2 metre temperature"
        t[:] = np.arange(6)
        v[:] = (rng.normal(280, 5, (6, 33, 45)) - 273.15)
        v[2, :3, :4] = np.ma.masked
        d.title = "a test"
    refs = _refs(nc, tmp_path / "era.json", 100)
    ds = xr.open_dataset(str(refs), engine="lsio")
    ref = xr.open_dataset(nc, engine="h5netcdf")
    assert ds.identical(ref)
    # The raw values, read through lsio, equal netCDF4's without scaling or masking.
    with netCDF4.Dataset(nc) as d:
        d.set_auto_maskandscale(False)
        np.testing.assert_array_equal(lsio.open(str(refs), "t2m")[...], d["t2m"][...])


def test_multizarr_combined_along_time(tmp_path):
    combine = pytest.importorskip("kerchunk.combine")
    parts, want = [], []
    rng = np.random.default_rng(5)
    for k in range(3):
        p = tmp_path / f"part{k}.h5"
        data = rng.normal(size=(4, 20, 24)).astype("<f4")
        with h5py.File(p, "w") as f:
            f.create_dataset("x", data=data, chunks=(1, 10, 12), compression="gzip", shuffle=True)
            f.create_dataset("time", data=np.arange(4 * k, 4 * k + 4, dtype="<f8"))
            f["time"].make_scale("time")
            f["x"].dims[0].attach_scale(f["time"])
        want.append(data)
        parts.append(kerchunk_hdf.SingleHdf5ToZarr(str(p), inline_threshold=0).translate())
    mzz = combine.MultiZarrToZarr(parts, concat_dims=["time"])
    out = tmp_path / "combined.json"
    out.write_text(json.dumps(mzz.translate()))
    a = lsio.open(str(out), "x")
    full = np.concatenate(want)
    assert a.shape == full.shape
    np.testing.assert_array_equal(a[...], full)
    np.testing.assert_array_equal(a[3:9, 5:17, ::3], full[3:9, 5:17, ::3])
    np.testing.assert_array_equal(lsio.open(str(out), "time")[...], np.arange(12))


def test_references_over_http(nginx_server, tmp_path):
    src = tmp_path / "www"
    src.mkdir()
    data = np.arange(5 * 30 * 40, dtype="<i4").reshape(5, 30, 40)
    with h5py.File(src / "d.h5", "w") as f:
        f.create_dataset("v", data=data, chunks=(2, 16, 16), compression="gzip")
    server = nginx_server(src)
    url = f"{server.http_url}/d.h5"
    refs = kerchunk_hdf.SingleHdf5ToZarr(str(src / "d.h5"), inline_threshold=0).translate()
    # The same references naming the file by its URL (kerchunk records the path it opened).
    refs["refs"] = {k: [url, *v[1:]] if isinstance(v, list) else v for k, v in refs["refs"].items()}
    (src / "d.json").write_text(json.dumps(refs))
    # The reference file at a URL, naming objects on the same host.
    a = lsio.open(f"{server.http_url}/d.json", "v")
    np.testing.assert_array_equal(a[...], data)
    # The 18 chunks lie back to back in the file: neighbouring references merge into a few
    # range requests (the planner sees ranges of one object, Store::Locate).
    assert 0 < a.stats()["requests"] <= 3, a.stats()
    np.testing.assert_array_equal(a.read_crops([[1, 2, 3], [3, 10, 20]], (2, 8, 9)),
                                  np.stack([data[1:3, 2:10, 3:12], data[3:5, 10:18, 20:29]]))
    # A local reference file naming remote objects.
    local = tmp_path / "local.json"
    local.write_text(json.dumps(refs))
    np.testing.assert_array_equal(lsio.open(str(local), "v")[2], data[2])
    # Whole-object references to remote objects (kerchunk's form of a Zarr store's chunks):
    # sized by reading them whole.
    import zarr

    z = zarr.create_array(str(src / "z.zarr"), shape=(6, 10), chunks=(3, 4), dtype="<i2", zarr_format=2,
                          compressors=None)
    z[...] = np.arange(60, dtype="<i2").reshape(6, 10)
    whole = {"version": 1, "refs": {".zarray": (src / "z.zarr" / ".zarray").read_text()}}
    for f in sorted((src / "z.zarr").iterdir()):
        if not f.name.startswith("."):
            whole["refs"][f.name] = [f"{server.http_url}/z.zarr/{f.name}"]
    (src / "whole.json").write_text(json.dumps(whole))
    np.testing.assert_array_equal(lsio.open(f"{server.http_url}/whole.json")[...], z[...])
    # A reference file at a URL naming this machine's files: refused unless asked for.
    (src / "sneaky.json").write_text(json.dumps({"version": 1, "refs": {
        ".zarray": json.dumps({"zarr_format": 2, "shape": [8], "chunks": [8], "dtype": "|u1", "compressor": None,
                               "fill_value": 0, "order": "C", "filters": None}),
        "0": [str(src / "d.h5"), 0, 8]}}))
    with pytest.raises(lsio.UnsupportedError, match="remote_protocol='file'"):
        lsio.open(f"{server.http_url}/sneaky.json")[...]
    got = lsio.open(f"{server.http_url}/sneaky.json", remote_protocol="file")[...]
    assert got.tobytes() == (src / "d.h5").read_bytes()[:8]


def test_pickled_and_dataloader_workers(h5_matrix, tmp_path):
    root, h5, cases = h5_matrix
    refs = _refs(h5, root / "refs_pickle.json", 0)
    name = next(c["name"] for c in cases if c["layout"] == "chunked" and not c["group"])
    a = lsio.open(str(refs), name)
    assert_reads_in_worker_processes(a)


def test_generated_references_are_rendered_as_fsspec_renders_them(tmp_path):
    """Version 1's "gen": keys, URLs, offsets and lengths rendered with jinja2 over the
    product of the dimensions (a list or start/stop/step), with the templates; generated keys
    win over explicit ones (as in fsspec). Compared with the data and with fsspec's
    ReferenceFileSystem (simple_templates=False, which renders "gen") chunk by chunk."""
    data = np.arange(6 * 4 * 3, dtype="<i4").reshape(6, 12)
    (tmp_path / "raw.bin").write_bytes(data.tobytes())  # chunks (1, 4): 18 chunks of 16 bytes
    other = np.full((1, 4), -7, dtype="<i4")
    (tmp_path / "other.bin").write_bytes(other.tobytes())
    refs = {"version": 1, "templates": {"u": str(tmp_path)},
            "gen": [{"key": "x/{{i}}.{{j}}", "url": "{{u}}/raw.bin", "offset": "{{(i * 3 + j) * 16}}", "length": "16",
                     "dimensions": {"i": {"stop": 5}, "j": [0, 1, 2]}}],
            "refs": {".zgroup": json.dumps({"zarr_format": 2}),
                     "x/.zarray": json.dumps({"zarr_format": 2, "shape": [6, 12], "chunks": [1, 4], "dtype": "<i4",
                                              "compressor": None, "fill_value": 0, "order": "C", "filters": None}),
                     **{f"x/5.{j}": ["{{u}}/other.bin", 0, 16] for j in range(3)},
                     "x/0.0": ["{{u}}/other.bin", 0, 16]}}  # generated too: the generated one wins
    r = tmp_path / "gen.json"
    r.write_text(json.dumps(refs))
    want = data.copy()
    want[5, :] = -7
    a = lsio.open(str(r), "x")
    np.testing.assert_array_equal(a[...], want)
    np.testing.assert_array_equal(a.read_crops([[0, 1], [4, 7]], (2, 5)), np.stack([want[0:2, 1:6], want[4:6, 7:12]]))
    # fsspec's own rendering: every chunk key serves the bytes lsio read for it.
    fsspec = pytest.importorskip("fsspec")
    fs = fsspec.filesystem("reference", fo=str(r), simple_templates=False)
    for i in range(6):
        for j in range(3):
            assert fs.cat(f"x/{i}.{j}") == np.ascontiguousarray(want[i, 4 * j:4 * j + 4]).tobytes(), (i, j)


def test_malformed_references_are_typed_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1, "refs": {".zgroup": "{\\"zarr_format\\": 2}", "x/0": "base64:@@"}}')
    with pytest.raises(lsio.FormatError) as e:
        lsio.open_group(str(bad))
    assert "x/0" in str(e.value) and "bad.json" in str(e.value)
    gen = tmp_path / "gen.json"
    gen.write_text('{"version": 1, "refs": {}, "gen": [{"key": "a/{{i}}", "url": "u", "dimensions": {"i": 3}}]}')
    with pytest.raises(lsio.FormatError, match="gen.json.*malformed \"gen\""):
        lsio.open_group(str(gen))
    gen.write_text('{"version": 1, "refs": {}, "gen": [{"key": "a/{{j}}", "url": "u", "dimensions": {"i": [1]}}]}')
    with pytest.raises(lsio.FormatError, match="gen"):  # an undefined name in a template
        lsio.open_group(str(gen))
    # Templates run in jinja2's sandbox: no reaching into Python from a reference file.
    gen.write_text(json.dumps({"version": 1, "refs": {}, "gen": [{
        "key": "a/{{ i.__class__.__mro__[1].__subclasses__() }}", "url": "u", "dimensions": {"i": [1]}}]}))
    with pytest.raises(lsio.FormatError, match="gen"):
        lsio.open_group(str(gen))
    # A reference to a file that is not there: the read names the file and the reference.
    data = tmp_path / "real.bin"
    data.write_bytes(np.arange(8, dtype="<i4").tobytes())
    refs = {"version": 1, "refs": {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "x/.zarray": json.dumps({"zarr_format": 2, "shape": [16], "chunks": [8], "dtype": "<i4", "compressor": None,
                                 "fill_value": 0, "order": "C", "filters": None}),
        "x/0": [str(data), 0, 32], "x/1": [str(tmp_path / "gone.bin"), 0, 32]}}
    r = tmp_path / "r.json"
    r.write_text(json.dumps(refs))
    a = lsio.open(str(r), "x")
    np.testing.assert_array_equal(a[:8], np.arange(8))
    with pytest.raises(lsio.NotFoundError) as e:
        a[...]
    assert "gone.bin" in str(e.value) and 'reference "x/1"' in str(e.value)
    # A range past the end of its file.
    refs["refs"]["x/1"] = [str(data), 16, 32]
    r.write_text(json.dumps(refs))
    with pytest.raises(lsio.CorruptDataError) as e:
        lsio.open(str(r), "x")[...]
    assert "bytes [16, 48)" in str(e.value)
    with pytest.raises(ValueError, match="remote_options"):
        lsio.open(str(tmp_path), "x", remote_options={})
    refs["refs"]["x/1"] = [str(data), 0, 32]
    r.write_text(json.dumps(refs))
    with pytest.raises(lsio.UnsupportedError, match="direct"):
        lsio.open(str(r), "x", direct=True)
    # The reference file changed on disk: the next open reads the new one.
    np.testing.assert_array_equal(lsio.open(str(r), "x")[...], np.concatenate([np.arange(8)] * 2))


def test_empty_dataset_with_zero_chunks(tmp_path):
    # kerchunk writes "chunks": [0] for an empty dataset; zarr-python reads an empty array.
    h5 = tmp_path / "zero.h5"
    with h5py.File(h5, "w") as f:
        f["empty"] = np.zeros((0,), "f4")
        f["full"] = np.arange(3.0)
    refs = _refs(h5, tmp_path / "zero.json", 0)
    assert json.loads(json.loads(refs.read_text())["refs"]["empty/.zarray"])["chunks"] == [0]
    assert set(lsio.open_group(str(refs)).array_names) == {"empty", "full"}
    got = lsio.open(str(refs), "empty")[...]
    assert got.shape == (0,) and got.dtype == np.float32
    np.testing.assert_array_equal(lsio.open(str(refs), "full")[...], np.arange(3.0))


def test_a_path_with_dotdot_to_a_symlinked_reference_file(tmp_path):
    # "sub/.." is resolved as the OS walks it, but the reference file stays where its name is
    # (a symlink to a cached blob): its relative targets are beside the link.
    (tmp_path / "proj" / "sub").mkdir(parents=True)
    (tmp_path / "blobs").mkdir()
    np.arange(4, dtype="<i4").tofile(tmp_path / "proj" / "data.bin")
    refs = {"version": 1, "refs": {
        ".zgroup": '{"zarr_format":2}',
        "a/.zarray": json.dumps({"zarr_format": 2, "shape": [4], "chunks": [4], "dtype": "<i4", "compressor": None,
                                 "fill_value": 0, "filters": None, "order": "C"}),
        "a/0": ["data.bin", 0, 16]}}
    (tmp_path / "blobs" / "abc").write_text(json.dumps(refs))
    os.symlink("../blobs/abc", tmp_path / "proj" / "refs.json")
    for p in (tmp_path / "proj" / "refs.json", f"{tmp_path}/proj/sub/../refs.json"):
        np.testing.assert_array_equal(lsio.open(str(p), "a")[...], np.arange(4))


def test_malformed_parquet_references_are_typed_errors(tmp_path):
    # A negative size or offset, or a record file with more rows than the record size, is
    # malformed (a negative size used to read the whole target file as the chunk).
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    df = pytest.importorskip("kerchunk.df")
    data = tmp_path / "data.bin"
    data.write_bytes(np.arange(16, dtype="<i4").tobytes())
    refs = {"version": 1, "refs": {
        ".zgroup": json.dumps({"zarr_format": 2}),
        "x/.zarray": json.dumps({"zarr_format": 2, "shape": [16], "chunks": [8], "dtype": "<i4", "compressor": None,
                                 "fill_value": 0, "order": "C", "filters": None}),
        "x/0": [str(data), 0, 32], "x/1": [str(data), 32, 32]}}
    out = tmp_path / "refs.parq"
    df.refs_to_dataframe(refs, str(out), record_size=2)
    np.testing.assert_array_equal(lsio.open(str(out), "x")[...], np.arange(16))
    part = out / "x" / "refs.0.parq"
    table = pq.read_table(part)
    for column, value, words in (("size", -7, "neither may be negative"), ("offset", -1, "neither may be negative")):
        cols = {n: table.column(n).to_pylist() for n in table.column_names}
        cols[column][1] = value
        pq.write_table(pa.table(cols, schema=table.schema), part)
        with pytest.raises(lsio.FormatError, match=words) as e:
            lsio.open(str(out), "x")
        assert "refs.0.parq" in str(e.value)
    cols = {n: table.column(n).to_pylist() * 2 for n in table.column_names}  # 4 rows, record size 2
    pq.write_table(pa.table(cols, schema=table.schema), part)
    with pytest.raises(lsio.FormatError, match="more than the record size 2"):
        lsio.open(str(out), "x")


@pytest.mark.parametrize("text", ["base64:AQIDB", "base64:AQ=", "base64:AQIDBA="])
def test_cut_or_mispadded_base64_inline_data_is_malformed(tmp_path, text):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "refs": {".zgroup": json.dumps({"zarr_format": 2}), "x/0": text}}))
    with pytest.raises(lsio.FormatError, match="x/0"):
        lsio.open_group(str(bad))
