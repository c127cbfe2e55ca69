"""The lsio command line: info, bench, verify (lsio.cli.main and python -m lsio)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec

import lsio
from lsio.cli import main


def _write(root):
    g = zarr.open_group(str(root), mode="w", attributes={"title": "cli"})
    rng = np.random.default_rng(3)
    s = g.create_array("sharded", shape=(4, 32, 32), chunks=(1, 8, 8), shards=(2, 16, 16), dtype="f4",
                       compressors=[ZstdCodec(level=1, checksum=True)], dimension_names=["t", "y", "x"])
    s[:] = rng.normal(size=(4, 32, 32)).astype("f4")
    p = g.create_array("plain", shape=(20, 20), chunks=(5, 5), dtype="u2", compressors=[ZstdCodec(level=1, checksum=True)])
    p[:10] = np.arange(200, dtype="u2").reshape(10, 20)  # 8 of 16 chunks
    return g


@pytest.fixture()
def store(tmp_path):
    _write(tmp_path / "s.zarr")
    return tmp_path / "s.zarr"


def _run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_info_json(store, capsys):
    rc, out, _ = _run(capsys, "info", store, "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["kind"] == "group" and doc["attributes"] == {"title": "cli"}
    by = {a["name"]: a for a in doc["arrays"]}
    assert set(by) == {"sharded", "plain"}
    s, p = by["sharded"], by["plain"]
    assert s["shape"] == [4, 32, 32] and s["chunks"] == [1, 8, 8] and s["shards"] == [2, 16, 16]
    assert s["dimension_names"] == ["t", "y", "x"] and s["dtype"] == "float32"
    assert s["chunks_total"] == s["chunks_present"] == 64 and s["shards_present"] == 8
    assert p["chunks_total"] == 16 and p["chunks_present"] == 8 and p["present_fraction"] == 0.5
    assert p["shards"] is None and "shards_total" not in p
    files = [os.path.join(d, f) for d, _, fs in os.walk(store / "plain") for f in fs]
    assert p["bytes_on_disk"] == sum(os.path.getsize(f) for f in files) and p["files"] == 9
    assert p["compression_ratio"] == pytest.approx(8 * 25 * 2 / p["stored_bytes"])
    rc, out, _ = _run(capsys, "info", store, "plain", "--json")
    doc = json.loads(out)
    assert doc["kind"] == "array" and [a["name"] for a in doc["arrays"]] == ["plain"]


def test_info_text(store, capsys):
    rc, out, _ = _run(capsys, "info", store / "sharded")
    assert rc == 0
    for text in ("(4, 32, 32)", "float32", "chunks", "shards", "compression ratio", "bytes on disk", "64 of 64 stored"):
        assert text in out, text


def test_bench(store, capsys):
    rc, out, _ = _run(capsys, "bench", store, "sharded", "--crop", "2,8,8", "--batch", "4", "--rounds", "3",
                      "--threads", "1", "--io", "pread", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["crop"] == [2, 8, 8] and doc["batch"] == 4 and doc["batches"] == 3 and doc["threads"] == 1
    assert doc["io"] == "pread" and doc["crops_per_s"] > 0 and doc["mb_per_s"] > 0
    rc, out, _ = _run(capsys, "bench", store / "plain", "--batch", "2", "--seconds", "0.05")
    assert rc == 0 and "crops/s" in out
    # group without array name, bad crop: usage errors
    rc, _, err = _run(capsys, "bench", store)
    assert rc == 2 and "sharded" in err
    rc, _, err = _run(capsys, "bench", store, "plain", "--crop", "30,2")
    assert rc == 2 and "crop" in err


def test_verify_clean_and_missing(store, capsys):
    rc, out, _ = _run(capsys, "verify", store, "--json", "--no-progress")
    assert rc == 0
    doc = json.loads(out)
    assert doc["ok"] and doc["corrupt_chunks"] == 0 and doc["missing_chunks"] == 8
    by = {a["name"]: a for a in doc["arrays"]}
    assert by["plain"]["missing_count"] == 8 and by["plain"]["chunks_checked"] == 8
    assert sorted(map(tuple, by["plain"]["missing"])) == [(i, j) for i in (2, 3) for j in range(4)]
    assert by["sharded"]["chunks_checked"] == 64
    rc, out, _ = _run(capsys, "verify", store, "--fail-on-missing")
    assert rc == 1 and "FAILED" in out


def _flip(path, offset):
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 0x5A
    path.write_bytes(bytes(raw))


def _zarr_bad_chunks(path, chunks, shape):
    """The chunks zarr-python fails to read (the reference for corruption)."""
    z = zarr.open_array(str(path), mode="r")
    bad = set()
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    for idx in np.ndindex(*grid):
        key = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape))
        try:
            z[key]
        except Exception:  # noqa: BLE001
            bad.add(idx)
    return bad


def test_verify_names_corrupt_chunks(store, capsys):
    # an unsharded chunk and two inner chunks of one shard
    _flip(store / "plain" / "c" / "1" / "2", 12)
    shard = store / "sharded" / "c" / "1" / "0" / "1"
    size = shard.stat().st_size
    _flip(shard, 10)
    _flip(shard, size // 3)
    expect_plain = _zarr_bad_chunks(store / "plain", (5, 5), (20, 20))
    expect_sharded = _zarr_bad_chunks(store / "sharded", (1, 8, 8), (4, 32, 32))
    assert expect_plain == {(1, 2)} and len(expect_sharded) == 2
    rc, out, _ = _run(capsys, "verify", store, "--json")
    assert rc == 1
    doc = json.loads(out)
    assert not doc["ok"] and doc["corrupt_chunks"] == 3
    by = {a["name"]: a for a in doc["arrays"]}
    assert {tuple(c["chunk"]) for c in by["plain"]["corrupt"]} == expect_plain
    assert {tuple(c["chunk"]) for c in by["sharded"]["corrupt"]} == expect_sharded
    assert by["sharded"]["chunks_checked"] == 62
    rc, out, _ = _run(capsys, "verify", store / "plain")
    assert rc == 1 and "corrupt chunk (1, 2)" in out and "CORRUPT" in out


def test_verify_corrupt_shard_index(tmp_path, capsys):
    z = zarr.create_array(str(tmp_path / "a"), shape=(8, 8), chunks=(4, 4), shards=(8, 8), dtype="i4")
    z[:] = 5
    _flip(tmp_path / "a" / "c" / "0" / "0", -2)  # inside the index's crc32c
    rc, out, _ = _run(capsys, "verify", tmp_path / "a", "--json")
    assert rc == 1
    doc = json.loads(out)
    assert doc["corrupt_chunks"] >= 1 and "survey_error" in doc["arrays"][0]


def test_errors_exit_2(tmp_path, capsys):
    rc, _, err = _run(capsys, "info", tmp_path / "absent")
    assert rc == 2 and "NotFoundError" in err
    with pytest.raises(SystemExit) as ei:
        main(["frobnicate"])
    assert ei.value.code == 2
    capsys.readouterr()


def test_python_m_lsio(store):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(lsio.__file__)) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-m", "lsio", "info", str(store / "plain"), "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["arrays"][0]["shape"] == [20, 20]
    r = subprocess.run([sys.executable, "-m", "lsio", "verify", str(store), "--progress"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout
    assert "verify" in r.stderr  # the tqdm bar goes to stderr
    r = subprocess.run([sys.executable, "-m", "lsio", "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "verify" in r.stdout


def test_info_of_an_unreadable_array_shows_its_metadata_and_why(tmp_path, capsys):
    # A delta filter over whole shards is a codec chain lsio does not read: `info` still shows
    # what the metadata says, and why lsio cannot read it, for the array alone and in a group.
    from zarr.codecs import ShardingCodec
    from zarr.codecs.numcodecs import Delta

    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("odd", shape=(4, 6), chunks=(4, 6), dtype="i4", filters=[Delta(dtype="<i4")],
                   serializer=ShardingCodec(chunk_shape=(2, 3), codecs=[BytesCodec()]), compressors=None)
    for argv in (("info", tmp_path / "g.zarr" / "odd"), ("info", tmp_path / "g.zarr")):
        rc, out, err = _run(capsys, *argv)
        assert rc == 0, err
        assert "(4, 6)" in out and "int32" in out and "numcodecs.delta" in out and "sharding_indexed[bytes]" in out
        assert "not readable by lsio: " in out and "numcodecs.delta" in out.split("not readable by lsio: ")[1]
    rc, out, _ = _run(capsys, "info", tmp_path / "g.zarr", "--json")
    (d,) = json.loads(out)["arrays"]
    assert d["readable"] is False and d["shape"] == [4, 6] and d["chunks"] == [4, 6]
    assert d["not_readable_because"]
    assert "group" in _run(capsys, "info", tmp_path / "g.zarr")[1].splitlines()[0]
    assert ": 1 array (" in _run(capsys, "info", tmp_path / "g.zarr")[1]
    rc, _, err = _run(capsys, "bench", tmp_path / "g.zarr", "odd")  # reading it is still an error
    assert rc == 2 and "UnsupportedError" in err


def test_verify_says_when_corruption_cannot_be_detected(tmp_path, capsys):
    # zarr-python's default zstd has no checksum: a flipped bit that still decodes reads as
    # different data. verify cannot see that, and must say so instead of a bare "OK".
    path = tmp_path / "nock.zarr"
    a = zarr.create_array(str(path), shape=(64,), chunks=(64,), dtype="u1", compressors=None)
    a[:] = np.arange(64, dtype="u1")
    chunk = path / "c" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[10] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    assert lsio.open(str(path))[10] != 10  # corrupted, and readable
    rc, out, _ = _run(capsys, "verify", path, "--no-progress")
    assert rc == 0
    assert "no checksums (bytes, without a checksum)" in out and "cannot" in out
    assert "1 of 1 arrays without checksums" in out
    rc, out, _ = _run(capsys, "verify", path, "--no-progress", "--json")
    doc = json.loads(out)
    assert doc["all_checksummed"] is False and doc["arrays"][0]["checksums"] is False
    # With a crc32c codec the same kind of damage is found (test_verify_names_corrupt_chunks).
    zarr.create_array(str(tmp_path / "crc.zarr"), shape=(64,), chunks=(64,), dtype="u1", compressors=[Crc32cCodec()])[:] = 1
    rc, out, _ = _run(capsys, "verify", tmp_path / "crc.zarr", "--json", "--no-progress")
    assert json.loads(out)["arrays"][0]["checksums"] is True


def test_checksum_detection_by_codec(tmp_path):
    from lsio import _core
    from lsio.cli import _checksums

    v3 = lambda *codecs: {"zarr_format": 3, "codecs": list(codecs)}  # noqa: E731
    assert _checksums(v3("bytes", {"name": "zstd", "configuration": {"level": 1, "checksum": True}}))[0]
    assert not _checksums(v3("bytes", {"name": "zstd", "configuration": {"level": 1, "checksum": False}}))[0]
    assert _checksums(v3("bytes", {"name": "crc32c"}))[0]
    assert _checksums(v3({"name": "bytes"}, {"name": "gzip", "configuration": {"level": 5}}))[0]
    assert not _checksums(v3("bytes", {"name": "blosc", "configuration": {}}))[0]
    shard = {"name": "sharding_indexed", "configuration": {"chunk_shape": [2], "codecs": ["bytes", "zstd"],
                                                           "index_codecs": ["bytes", "crc32c"]}}
    ok, why = _checksums(v3(shard))
    assert not ok and "zstd" in why, "a checksummed index does not protect the chunks"

    def v2(compressor):  # a .zarray as the engine translates it (v3 form)
        (tmp_path / ".zarray").write_text(json.dumps({
            "zarr_format": 2, "shape": [4], "chunks": [2], "dtype": "<u2", "fill_value": 0, "order": "C",
            "filters": None, "compressor": compressor}))
        return _core.read_node(str(tmp_path))["metadata"]

    assert _checksums(v2({"id": "zlib", "level": 1}))[0]
    assert _checksums(v2({"id": "zstd", "level": 1, "checksum": True}))[0]
    assert not _checksums(v2({"id": "blosc", "cname": "lz4"}))[0]
    assert not _checksums(v2(None))[0]


def test_verify_and_info_of_0d_and_empty_arrays(tmp_path, capsys):
    zarr.create_array(str(tmp_path / "zero.zarr"), shape=(), dtype="f8", compressors=None)[()] = 2.5
    zarr.create_array(str(tmp_path / "empty.zarr"), shape=(0, 4), chunks=(2, 2), dtype="u1")
    for name, checked in (("zero.zarr", 1), ("empty.zarr", 0)):
        rc, out, err = _run(capsys, "verify", tmp_path / name, "--no-progress")
        assert rc == 0, err
        assert f"{checked:,} chunks read" in out
        rc, out, err = _run(capsys, "verify", tmp_path / name, "--no-progress", "--json")
        assert rc == 0 and json.loads(out)["arrays"][0]["chunks_checked"] == checked
        assert _run(capsys, "info", tmp_path / name)[0] == 0


def test_bugs_are_internal_errors_not_usage(store, capsys, monkeypatch):
    import lsio.cli as cli

    def broken(args):
        raise TypeError("an lsio bug")

    monkeypatch.setattr(cli, "cmd_info", broken)
    rc, _, err = _run(capsys, "info", store)
    assert rc == cli.EXIT_INTERNAL == 3
    assert "internal error" in err and "Traceback" in err and "an lsio bug" in err
    monkeypatch.undo()
    # Bad option values are still usage errors.
    rc, _, err = _run(capsys, "info", "s3://bucket/x.zarr", "--storage-option", "retries=\"many\"")
    assert rc == 2, err


def test_bench_reports_decoded_chunks_and_takes_threads_0(store, capsys):
    rc, out, _ = _run(capsys, "bench", store, "sharded", "--crop", "2,8,8", "--batch", "4", "--rounds", "3",
                      "--threads", "0", "--json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["threads"] == 0 and doc["chunks_per_s"] > 0
    # Every 2x8x8 crop touches 2 to 8 chunks of (1, 8, 8); decoded bytes are those chunks'.
    assert doc["decoded_mb_per_s"] == pytest.approx(doc["chunks_per_s"] * 8 * 8 * 4 / 1e6)
    from lsio.cli import _chunks_touched

    starts = np.array([[0, 0, 0], [0, 4, 4], [1, 8, 8]])
    assert _chunks_touched(starts, (2, 8, 8), (1, 8, 8)) == len({(0, 0, 0), (1, 0, 0), (0, 0, 1), (0, 1, 0),
                                                                  (0, 1, 1), (1, 0, 1), (1, 1, 0), (1, 1, 1),
                                                                  (2, 1, 1)})
    rc, out, _ = _run(capsys, "bench", store, "sharded", "--crop", "2,8,8", "--batch", "4", "--rounds", "2")
    assert "chunks/s decoded" in out and "overlapping crops count twice" in out


def test_storage_options_that_take_a_string_keep_the_text(fault_server, capsys):
    """--storage-option token=12345 is the bearer token "12345" (not the JSON int, which
    failed with TypeError); options of other types are still parsed as JSON."""
    _write(fault_server.root / "s.zarr")
    url = fault_server.url("s.zarr")
    rc, out, err = _run(capsys, "info", url, "plain", "--json", "--storage-option", "token=12345",
                        "--storage-option", "retries=1", "--storage-option", "verify_ssl=true")
    assert rc == 0, err
    assert json.loads(out)["arrays"][0]["shape"] == [20, 20]
    assert fault_server.requests
    assert all(r.headers.get("authorization") == "Bearer 12345" for r in fault_server.requests)
    # a JSON string is still the string; a value of the wrong type for a typed option is a usage error
    fault_server.clear_requests()
    rc, _, err = _run(capsys, "info", url, "plain", "--storage-option", 'token="abc"')
    assert rc == 0, err
    assert all(r.headers.get("authorization") == "Bearer abc" for r in fault_server.requests)
    rc, _, err = _run(capsys, "info", url, "plain", "--storage-option", "retries=many")
    assert rc == 2 and "retries must be an integer" in err


def test_option_from_text():
    from lsio._storage import option_from_text

    assert option_from_text("token", "12345") == "12345"
    assert option_from_text("region", "null") == "null"
    assert option_from_text("endpoint_url", "http://127.0.0.1:9000") == "http://127.0.0.1:9000"
    assert option_from_text("requester_pays", "true") is True
    assert option_from_text("requester_pays", "1234") == "1234"  # a project id
    assert option_from_text("retries", "3") == 3 and option_from_text("timeout", "2.5") == 2.5
    assert option_from_text("anon", "false") is False
    assert option_from_text("headers", '{"X-A": "b"}') == {"X-A": "b"}


def _write_with_strings(root, zarr_format=3):
    """A group with a numeric array and a vlen-utf8 string array (two of its three chunks
    stored), as zarr-python writes them."""
    g = zarr.open_group(str(root), mode="w", zarr_format=zarr_format)
    g.create_array("num", shape=(6,), chunks=(4,), dtype="i4")[:] = np.arange(6, dtype="i4")
    s = g.create_array("names", shape=(6,), chunks=(2,), dtype=str)
    s[:3] = np.array(["alpha", "", "γ"])  # chunk 2 keeps the fill value: not stored
    return g


@pytest.mark.parametrize("zarr_format", [3, 2])
def test_info_and_verify_read_string_arrays(tmp_path, capsys, zarr_format):
    """info and verify crashed ('internal error') on groups holding a variable-length string
    array and called such an array unreadable; they show and read it like other arrays."""
    root = tmp_path / "g.zarr"
    g = _write_with_strings(root, zarr_format)
    rc, out, err = _run(capsys, "info", root, "--json")
    assert rc == 0, err
    by = {a["name"]: a for a in json.loads(out)["arrays"]}
    s = by["names"]
    assert "readable" not in s and s["shape"] == [6] and s["chunks"] == [2] and s["shards"] is None
    assert s["dtype"] == str(lsio.open(str(root / "names")).dtype)
    assert s["chunks_total"] == 3 and s["chunks_present"] == 2 and s["stored_bytes"] > 0
    assert by["num"]["shape"] == [6] and by["num"]["chunks_present"] == 2
    for argv in (("info", root), ("info", root / "names"), ("info", root, "names")):
        rc, out, err = _run(capsys, *argv)
        assert rc == 0, err
        assert "names" in out and "(6,)" in out and "(2,)" in out and "2 of 3 stored" in out
        assert "not readable" not in out
    rc, out, err = _run(capsys, "verify", root, "--no-progress", "--json")
    assert rc == 0, err
    res = {a["name"]: a for a in json.loads(out)["arrays"]}["names"]
    assert res["chunks_checked"] == 2 and res["missing"] == [[2]] and res["corrupt_count"] == 0
    rc, out, err = _run(capsys, "verify", root / "names", "--no-progress")
    assert rc == 0 and "names: OK: 2 chunks read, 1 missing" in out, err
    np.testing.assert_array_equal(lsio.open(str(root / "names"))[...].astype(object),
                                  g["names"][...].astype(object))
    # A damaged chunk is found and named, and verify fails.
    sep = "/" if zarr_format == 3 else "."
    chunk = root / "names" / ("c" + sep + "1" if zarr_format == 3 else "1")
    chunk.write_bytes(chunk.read_bytes()[:-3])
    rc, out, err = _run(capsys, "verify", root, "--no-progress", "--json")
    assert rc == 1, err
    res = {a["name"]: a for a in json.loads(out)["arrays"]}["names"]
    assert res["corrupt_count"] == 1 and res["corrupt"][0]["chunk"] == [1] and res["chunks_checked"] == 1
    rc, _, err = _run(capsys, "bench", root, "names")
    assert rc == 2 and "variable-length string array" in err


def test_info_and_verify_read_string_arrays_over_http(fault_server, capsys):
    g = _write_with_strings(fault_server.root / "g.zarr")
    zarr.consolidate_metadata(str(fault_server.root / "g.zarr"))  # HTTP cannot list the group
    url = fault_server.url("g.zarr")
    rc, out, err = _run(capsys, "info", url, "--json")
    assert rc == 0, err
    s = {a["name"]: a for a in json.loads(out)["arrays"]}["names"]
    assert s["shape"] == [6] and s["chunks"] == [2] and s["chunks_total"] == 3 and s["files"] is None
    rc, out, err = _run(capsys, "info", url + "/names")
    assert rc == 0 and "(6,)" in out and "3 in the grid" in out, err
    fault_server.clear_requests()
    rc, out, err = _run(capsys, "verify", url, "--no-progress", "--json")
    assert rc == 0, err
    res = {a["name"]: a for a in json.loads(out)["arrays"]}["names"]
    assert res["chunks_checked"] == 2 and res["missing"] == [[2]]
    assert {r.path for r in fault_server.requests} >= {"/g.zarr/names/c/0", "/g.zarr/names/c/1"}
    np.testing.assert_array_equal(lsio.open(url + "/names")[...].astype(object), g["names"][...].astype(object))


def test_info_shows_group_attributes_and_codec_configurations(tmp_path, capsys):
    # Text output: the group's attributes (JSON had them, text did not), and each codec with its
    # configuration: a v2 blosc's cname and level, zlib's level, v3 zstd's level.
    import numcodecs

    g = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2, attributes={"title": "two", "n": 3})
    g.create_array("bl", shape=(8,), chunks=(4,), dtype="f4",
                   compressors=numcodecs.Blosc(cname="zstd", clevel=3, shuffle=2))[:] = 1
    g.create_array("zl", shape=(8,), chunks=(4,), dtype="i2", compressors=numcodecs.Zlib(level=4),
                   filters=[numcodecs.Delta(dtype="i2")])[:] = 1
    g.create_array("bz", shape=(8,), chunks=(4,), dtype="f4", compressors=numcodecs.BZ2(level=3),
                   filters=[numcodecs.AsType(encode_dtype="<f2", decode_dtype="<f4")])[:] = 1  # unreadable
    rc, out, err = _run(capsys, "info", tmp_path / "v2.zarr")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1] == '  attributes     {"n": 3, "title": "two"}'
    assert "  codecs         v2[bytes, blosc(clevel=3, cname=zstd, shuffle=bitshuffle)]" in lines
    assert "  codecs         v2[bytes, delta(astype=<i2, dtype=<i2), zlib(level=4)]" in lines
    # An array lsio cannot read still shows what its .zarray says.
    at = lines.index("bz  (" + str(tmp_path / "v2.zarr" / "bz") + ")")
    assert lines[at + 1].split() == ["shape", "(8,)", "dtype", "float32"]
    assert lines[at + 2].split() == ["chunks", "(4,)"] and "bz2(level=3)" in lines[at + 3]
    assert "astype(" in lines[at + 3]
    rc, out, _ = _run(capsys, "info", tmp_path / "v2.zarr", "--json")
    by = {a["name"]: a for a in json.loads(out)["arrays"]}
    assert by["bl"]["codecs"] == "v2[bytes, blosc]"  # the engine's description, as before
    assert by["bl"]["codec_details"] == "v2[bytes, blosc(clevel=3, cname=zstd, shuffle=bitshuffle)]"
    z = zarr.create_array(str(tmp_path / "v3.zarr"), shape=(8,), chunks=(2,), shards=(4,), dtype="f4",
                          compressors=[ZstdCodec(level=3, checksum=True)])
    z[:] = 1
    rc, out, _ = _run(capsys, "info", tmp_path / "v3.zarr")
    assert "  codecs         sharding_indexed[bytes, zstd(checksum=true, level=3)]" in out.splitlines()


def _sharded_4(path):
    """(16, 16) int32, chunks (4, 4), shards (8, 8): four shard files c/i/j of 4 chunks each."""
    z = zarr.create_array(str(path), shape=(16, 16), chunks=(4, 4), shards=(8, 8), dtype="i4")
    z[:] = np.arange(256, dtype="i4").reshape(16, 16)
    return z


def test_verify_a_deleted_shard_beside_a_corrupt_index_is_missing_not_read(tmp_path, capsys):
    # The corrupt index makes the whole-array survey fail; the deleted shard then read as fill
    # and its 4 chunks counted as read (12 read, nothing missing). zarr-python reads it as fill.
    p = tmp_path / "a.zarr"
    _sharded_4(p)
    (p / "c" / "0" / "1").unlink()
    _flip(p / "c" / "1" / "0", -2)  # inside the index's crc32c
    assert _zarr_bad_chunks(p, (4, 4), (16, 16)) == {(i, j) for i in (2, 3) for j in (0, 1)}
    np.testing.assert_array_equal(zarr.open_array(str(p), mode="r")[0:8, 8:16], 0)  # missing: fill
    rc, out, _ = _run(capsys, "verify", p, "--json", "--no-progress")
    assert rc == 1
    (r,) = json.loads(out)["arrays"]
    assert "survey_error" in r
    assert r["chunks_checked"] == 8  # shards (0, 0) and (1, 1)
    assert r["missing_count"] == 4 and sorted(map(tuple, r["missing"])) == [(i, j) for i in (0, 1) for j in (2, 3)]
    assert {tuple(c["chunk"]) for c in r["corrupt"]} == {(i, j) for i in (2, 3) for j in (0, 1)}
    rc, out, _ = _run(capsys, "verify", p, "--no-progress")
    assert "8 chunks read, 4 missing (read as fill), 4 corrupt" in out


def test_verify_groups_the_chunks_of_a_truncated_shard_into_one_line(tmp_path, capsys):
    # A truncated shard (its index at the end is gone) fails for every one of its 108 chunks
    # with the same error: one line with the count and the range, not 108 identical lines.
    p = tmp_path / "t.zarr"
    z = zarr.create_array(str(p), shape=(12, 18), chunks=(1, 1), shards=(12, 9), dtype="u1", compressors=None)
    z[:] = 7
    shard = p / "c" / "0" / "1"
    shard.write_bytes(shard.read_bytes()[:100])
    assert len(_zarr_bad_chunks(p, (1, 1), (12, 18))) == 108
    rc, out, _ = _run(capsys, "verify", p, "--no-progress")
    assert rc == 1
    problem_lines = [ln for ln in out.splitlines() if ln.startswith("  corrupt chunk")]
    assert len(problem_lines) == 1, out
    assert problem_lines[0].startswith("  corrupt chunks (0..11, 9..17): 108 chunks in ")
    rc, out, _ = _run(capsys, "verify", p, "--json", "--no-progress")
    (r,) = json.loads(out)["arrays"]
    assert r["corrupt_count"] == 108 and len(r["corrupt"]) == 108  # every chunk still listed in JSON
    (g,) = r["problems"]
    assert g["count"] == 108 and g["lo"] == [0, 9] and g["hi"] == [11, 17] and g["same_error"]
    assert r["chunks_checked"] == 108  # the other shard


def test_verify_fail_on_missing_fails_the_array_too(store, capsys):
    # The summary said FAILED while the array's own line said OK.
    rc, out, _ = _run(capsys, "verify", store, "--fail-on-missing", "--no-progress")
    assert rc == 1
    lines = out.splitlines()
    (plain,) = [ln for ln in lines if ln.startswith("plain: ")]
    assert not plain.startswith("plain: OK") and "8 missing" in plain
    assert any(ln.startswith("sharded: OK:") for ln in lines) and lines[-1].startswith("FAILED")
    rc, out, _ = _run(capsys, "verify", store, "--fail-on-missing", "--json", "--no-progress")
    by = {a["name"]: a for a in json.loads(out)["arrays"]}
    assert by["plain"]["ok"] is False and by["sharded"]["ok"] is True
    rc, out, _ = _run(capsys, "verify", store, "--no-progress")
    assert rc == 0 and any(ln.startswith("plain: OK:") for ln in out.splitlines())


def test_verify_gives_checksum_advice_once_and_for_the_format(tmp_path, capsys):
    import numcodecs

    g3 = zarr.open_group(str(tmp_path / "v3.zarr"), mode="w")
    for n in ("a", "b", "c"):
        g3.create_array(n, shape=(8,), chunks=(4,), dtype="f4")[:] = 1  # zarr-python's default zstd
    rc, out, _ = _run(capsys, "verify", tmp_path / "v3.zarr", "--no-progress")
    assert rc == 0
    assert out.count("no checksums (") == 3  # which arrays: one short line each
    assert out.count("To write chunks verify can check") == 1 and out.count("Crc32cCodec()") == 1
    g2 = zarr.open_group(str(tmp_path / "v2.zarr"), mode="w", zarr_format=2)
    for n in ("a", "b"):
        g2.create_array(n, shape=(8,), chunks=(4,), dtype="f4", compressors=numcodecs.Blosc())[:] = 1
    rc, out, _ = _run(capsys, "verify", tmp_path / "v2.zarr", "--no-progress")
    assert rc == 0 and out.count("To write chunks verify can check") == 1
    assert "crc32c" not in out.lower()  # zarr-python's v2 format has no crc32c codec
    assert "numcodecs.Zstd(checksum=True)" in out
    # What the v2 advice recommends is checked: a flipped bit in a Zstd(checksum=True) chunk.
    z = zarr.create_array(str(tmp_path / "ck.zarr"), shape=(4096,), chunks=(4096,), dtype="u1", zarr_format=2,
                          compressors=numcodecs.Zstd(level=1, checksum=True))
    z[:] = (np.arange(4096) * 7919 % 251).astype("u1")
    _flip(tmp_path / "ck.zarr" / "0", 40)
    rc, out, _ = _run(capsys, "verify", tmp_path / "ck.zarr", "--no-progress")
    assert rc == 1 and "no checksums" not in out and "To write chunks" not in out
