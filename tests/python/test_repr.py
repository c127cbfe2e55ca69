"""Jupyter reprs and storage statistics (lsio._repr)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import zarr

import lsio
from lsio._repr import chunk_stats, format_bytes


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("repr")
    g = zarr.open_group(str(root / "g.zarr"), mode="w", attributes={"note": "<script>alert(1)</script>"})
    s = g.create_array("sharded", shape=(8, 40, 60), chunks=(1, 10, 10), shards=(4, 20, 30), dtype="f4",
                       dimension_names=["t", "y", "x"], attributes={"units": "K"})
    s[:4] = np.random.default_rng(0).normal(size=(4, 40, 60)).astype("f4")  # half of the chunks
    p = g.create_array("plain", shape=(30, 30), chunks=(10, 10), dtype="i4")
    p[:10, :] = 7  # 3 of 9 chunks
    from zarr.codecs import BytesCodec, ShardingCodec
    from zarr.codecs.numcodecs import Delta

    # A delta filter over whole shards, which lsio does not read.
    g.create_array("unreadable", shape=(4,), chunks=(4,), dtype="i4", filters=[Delta(dtype="<i4")],
                   serializer=ShardingCodec(chunk_shape=(2,), codecs=[BytesCodec()]), compressors=None)
    return root / "g.zarr"


def test_chunk_stats_unsharded_matches_files(root):
    a = lsio.open(root / "plain")
    st = chunk_stats(a)
    assert st["chunk_grid"] == (3, 3)
    assert (st["chunks_total"], st["chunks_present"], st["chunks_missing"]) == (9, 3, 6)
    assert st["present_fraction"] == pytest.approx(1 / 3)
    files = [os.path.join(d, f) for d, _, fs in os.walk(root / "plain" / "c") for f in fs]
    assert len(files) == 3
    assert st["stored_bytes"] == sum(os.path.getsize(f) for f in files)
    assert st["uncompressed_bytes"] == 3 * 100 * 4
    assert st["compression_ratio"] == pytest.approx(1200 / st["stored_bytes"])
    assert "shards_total" not in st


def test_chunk_stats_sharded(root):
    a = lsio.open(root / "sharded")
    st = chunk_stats(a)
    assert st["chunk_grid"] == (8, 4, 6)
    assert st["chunks_present"] == 4 * 4 * 6 and st["chunks_total"] == 8 * 4 * 6
    assert st["shard_grid"] == (2, 2, 2)
    assert (st["shards_total"], st["shards_present"]) == (8, 4)
    shard_files = [os.path.join(d, f) for d, _, fs in os.walk(root / "sharded" / "c") for f in fs]
    assert len(shard_files) == 4
    # chunk data is less than the files (which add the shard index)
    assert 0 < st["stored_bytes"] < sum(os.path.getsize(f) for f in shard_files)
    assert st["shard_bytes_min"] <= st["shard_bytes_mean"] <= st["shard_bytes_max"]
    assert st["shard_bytes_mean"] * 4 == pytest.approx(st["stored_bytes"])


def test_array_html(root):
    a = lsio.open(root / "sharded")
    h = a._repr_html_()
    for text in ("lsio.Array", "(8, 40, 60)", "float32", "(1, 10, 10)", "(4, 20, 30)", a.codecs,
                 "96 / 192 (50.0%)", "bytes on disk", "compression ratio", "t, y, x", "units", "shards present", "4 / 8"):
        assert text in h, text
    assert format_bytes(chunk_stats(a)["stored_bytes"]) in h
    h2 = lsio.open(root / "plain")._repr_html_()
    assert "3 / 9 (33.3%)" in h2 and "None" in h2  # shards None


def test_group_html_lists_arrays_and_survives_unsupported(root):
    g = lsio.open_group(root)
    h = g._repr_html_()
    for text in ("lsio.Group", "sharded", "plain", "unreadable", "not readable by lsio", "50%", "33%"):
        assert text in h, text
    assert "<script>" not in h and "&lt;script&gt;" in h


def test_html_when_stats_fail(tmp_path):
    z = zarr.create_array(str(tmp_path / "a"), shape=(10,), chunks=(5,), shards=(10,), dtype="u2")
    z[:] = 1
    shard = tmp_path / "a" / "c" / "0"
    raw = bytearray(shard.read_bytes())
    raw[-1] ^= 0xFF  # break the index checksum
    shard.write_bytes(bytes(raw))
    h = lsio.open(tmp_path / "a")._repr_html_()
    assert "unavailable" in h and "lsio.Array" in h


def test_format_bytes():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 << 30) == "3.0 GiB"
    assert format_bytes(None) == "?"


def test_html_of_a_large_array_does_not_survey_it(tmp_path, monkeypatch):
    # A notebook displays an Array on every run of the cell: above the survey limit the
    # display shows metadata and says why storage is missing, without reading an index or
    # stat-ing a chunk file (the survey of 1M chunks took 2.7 s and 200 MB).
    import lsio._repr as rp

    path = tmp_path / "big.zarr"
    zarr.create_array(str(path), shape=(40, 40), dtype="u1", chunks=(2, 2))[...] = 1  # 400 chunk files
    arr = lsio.open(str(path))
    assert rp.survey_objects(arr) == 400
    monkeypatch.setattr(rp, "_DISPLAY_SURVEY_LIMIT", 399)

    surveyed = []

    def no_survey(a, *rest, **k):
        surveyed.append(a.path)
        raise AssertionError("the display surveyed the chunks")

    monkeypatch.setattr(rp, "chunk_stats", no_survey)
    html_ = arr._repr_html_()
    assert "not surveyed for display (400 chunk files to read)" in html_ and "(40, 40)" in html_
    assert surveyed == []
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    g.create_array("a", shape=(40, 40), dtype="u1", chunks=(2, 2), shards=(4, 4))[...] = 1  # 100 shards
    g.create_array("small", shape=(4,), dtype="u1", chunks=(2,))[...] = 1
    monkeypatch.setattr(rp, "_DISPLAY_SURVEY_LIMIT", 99)
    grp = lsio.open_group(str(tmp_path / "g.zarr"))
    assert rp.survey_objects(grp["a"]) == 100
    grp._repr_html_()
    assert [p.rsplit("/", 1)[-1] for p in surveyed] == ["small"]  # "a" is over the limit
    monkeypatch.setattr(rp, "chunk_stats", chunk_stats)
    text = grp._repr_html_()
    assert "not surveyed (large)" in text and "small" in text
    monkeypatch.setattr(rp, "_DISPLAY_SURVEY_LIMIT", 100)
    assert "not surveyed" not in lsio.open_group(str(tmp_path / "g.zarr"))._repr_html_()
