"""The local disk cache of remote byte ranges: ``storage_options={"cache_dir": ..., "disk_cache_bytes": ...}``.

Served by the fault server on loopback (a request log, ETags, If-Match): a second Array (and
a second process, i.e. a restart) takes its shard indexes and every chunk from disk and
confirms each shard's version with one conditional HEAD; an object rewritten on the server
(new ETag) is read anew, never served stale; the directory stays within its bound; several processes
sharing one directory read correct data; a damaged block is a miss and is replaced;
read_ranges uses the cache too; bad options raise.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lsio
from stores import assert_same_bits

OPTS = {"timeout": 5, "connect_timeout": 2, "retries": 2}
SHARDED = "z_shard_zstd_end"  # 100x100 uint16, 50x50 shards of 10x10 zstd chunks, index at end


@pytest.fixture
def fs(fault_server, stores):
    shutil.copytree(stores.get(SHARDED).path, fault_server.root / "sh.zarr")
    fault_server.sh = stores.get(SHARDED).expected
    return fault_server


def chunk_gets(server, prefix="/sh.zarr/c/"):
    """GETs of shard files that are not index reads (index reads are suffix ranges)."""
    return [r for r in server.requests
            if r.path.startswith(prefix) and r.method == "GET" and not (r.range or "").startswith("bytes=-")]


def index_gets(server, prefix="/sh.zarr/c/"):
    return [r for r in server.requests if r.path.startswith(prefix) and (r.range or "").startswith("bytes=-")]


def blocks(d: Path):
    return [p for p in d.rglob("*.blk")]


def heads(server, prefix="/sh.zarr/c/"):
    return [r for r in server.requests if r.path.startswith(prefix) and r.method == "HEAD"]


def test_a_second_array_reads_indexes_and_chunks_from_disk_after_confirming_versions(fs, tmp_path):
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    arr = lsio.open(fs.url("sh.zarr"), storage_options=so)
    assert_same_bits(arr[...], fs.sh)
    first_chunks = len(chunk_gets(fs))
    assert first_chunks > 0 and arr.stats()["disk_cache_hits"] == 0
    assert blocks(tmp_path / "cache")
    n_index = len(index_gets(fs))
    again = lsio.open(fs.url("sh.zarr"), storage_options=so)  # new Array: no index cache
    assert_same_bits(again[...], fs.sh)
    assert len(chunk_gets(fs)) == first_chunks, "a cached chunk was fetched again"
    assert len(index_gets(fs)) == n_index, "the indexes come from the disk cache (kept with their versions)"
    confirmations = heads(fs)
    assert len(confirmations) == n_index, "every shard's version is confirmed by the server"
    assert all(r.headers.get("if-none-match") and r.status == 304 for r in confirmations)
    st = again.stats()
    assert st["disk_cache_hits"] == first_chunks + n_index and st["disk_cache_bytes"] > 0
    # crops that touch parts of the cached ranges are separate blocks: fetched, then cached
    assert_same_bits(again[3:47, 55:99], fs.sh[3:47, 55:99])


def test_blocks_serve_reads_coalesced_differently(fs, tmp_path):
    """Blocks, not request ranges, are cached: reads merged across gaps (max_gap 1 MiB) are
    served from blocks that reads of single chunks (max_gap 0) fetched, and the other way."""
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    narrow = lsio.open(fs.url("sh.zarr"), storage_options=so, max_gap=0, max_request=1 << 20)
    rng = np.random.default_rng(5)
    boxes = [tuple(slice(int(a), int(a) + 15) for a in rng.integers(0, 85, 2)) for _ in range(12)]
    for b in boxes:
        assert_same_bits(narrow[b], fs.sh[b])
    before = len(chunk_gets(fs))
    wide = lsio.open(fs.url("sh.zarr"), storage_options=so, max_gap=1 << 20, max_request=16 << 20)
    for b in boxes:
        assert_same_bits(wide[b], fs.sh[b])
    assert len(chunk_gets(fs)) == before, "merged reads of cached chunks went to the server"
    assert wide.stats()["disk_cache_hits"] > 0


def test_blocks_survive_a_restart(fs, tmp_path):
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    url = fs.url("sh.zarr")
    code = textwrap.dedent(f"""
        import lsio, numpy as np
        a = lsio.open({url!r}, storage_options={so!r})
        x = a[...]
        np.save({str(tmp_path / 'x.npy')!r}, x)
        print(a.stats()["disk_cache_hits"])
    """)
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout.split()[-1] == "0"
    assert int(runs[1].stdout.split()[-1]) > 0
    assert_same_bits(np.load(tmp_path / "x.npy"), fs.sh)


def test_a_rewritten_object_is_never_served_stale(fs, tmp_path):
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    arr = lsio.open(fs.url("sh.zarr"), storage_options=so)
    assert_same_bits(arr[...], fs.sh)
    # rewrite the whole array on the server (new bytes, new ETags)
    import zarr

    z = zarr.open_array(str(fs.root / "sh.zarr"), mode="r+")
    new = (np.asarray(fs.sh).astype(np.int64) * 3 % 60000).astype(z.dtype)
    z[...] = new
    n = len(fs.requests)
    fresh = lsio.open(fs.url("sh.zarr"), storage_options=so)
    # The kept indexes' versions fail their confirmation (HEAD 200, another ETag): the call
    # runs again on the current versions, so the rewrite is not an error here.
    np.testing.assert_array_equal(fresh[...], new)
    changed = [r for r in fs.requests[n:] if r.method == "HEAD" and r.path.startswith("/sh.zarr/c/")]
    assert changed and all(r.status == 200 for r in changed)
    assert index_gets(fs)[-1].time > changed[0].time, "the new indexes were read after the confirmations"
    np.testing.assert_array_equal(lsio.open(fs.url("sh.zarr"), storage_options=so)[...], new)


def test_the_directory_stays_within_its_bound(fs, tmp_path):
    d = tmp_path / "cache"
    bound = 14000  # two or so blocks: a block here is a whole ~5.5 KB shard file
    so = {**OPTS, "cache_dir": str(d), "disk_cache_bytes": bound}
    arr = lsio.open(fs.url("sh.zarr"), storage_options=so, max_gap=0, max_request=1000)
    for a in range(0, 100, 10):
        assert_same_bits(arr[a:a + 10, :], fs.sh[a:a + 10, :])
    total = sum(p.stat().st_size for p in blocks(d))
    assert 0 < total <= bound, total


def test_processes_sharing_a_directory(fs, tmp_path):
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    url = fs.url("sh.zarr")
    code = textwrap.dedent(f"""
        import lsio, numpy as np, sys
        a = lsio.open({url!r}, storage_options={so!r})
        rng = np.random.default_rng(int(sys.argv[1]))
        for _ in range(20):
            i, j = rng.integers(0, 80, 2)
            x = a[i:i + 20, j:j + 20]
            ref = np.load({str(tmp_path / 'ref.npy')!r})[i:i + 20, j:j + 20]
            assert np.array_equal(x, ref)
        print("ok")
    """)
    np.save(tmp_path / "ref.npy", np.asarray(fs.sh))
    procs = [subprocess.Popen([sys.executable, "-c", code, str(k)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and out.strip() == "ok", err
    leftovers = [p for p in (tmp_path / "cache").rglob(".tmp.*")]
    assert not leftovers


def test_a_damaged_block_is_a_miss_and_is_replaced(fs, tmp_path):
    d = tmp_path / "cache"
    so = {**OPTS, "cache_dir": str(d), "disk_cache_bytes": 1 << 20}
    assert_same_bits(lsio.open(fs.url("sh.zarr"), storage_options=so)[...], fs.sh)
    victims = blocks(d)
    with open(victims[0], "r+b") as f:
        f.truncate(os.path.getsize(victims[0]) - 7)
    with open(victims[1], "r+b") as f:
        f.write(b"garbage!")
    again = lsio.open(fs.url("sh.zarr"), storage_options=so)
    assert_same_bits(again[...], fs.sh)
    assert again.stats()["disk_cache_hits"] == len(victims) - 2
    third = lsio.open(fs.url("sh.zarr"), storage_options=so)
    assert_same_bits(third[...], fs.sh)
    assert third.stats()["disk_cache_hits"] == len(victims)


def test_read_ranges_uses_the_cache(fault_server, tmp_path):
    data = np.random.default_rng(3).integers(0, 256, 300_000, dtype=np.uint8).tobytes()
    (fault_server.root / "w.bin").write_bytes(data)
    so = {"cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 20}
    r = [[0, 100_000], [150_000, 100_000], [290_000, 10_000]]
    url = fault_server.url("w.bin")
    counts = []
    for _ in range(2):
        got = lsio.read_ranges(url, r, storage_options=so, max_request=1 << 16, max_gap=0)
        assert [g.tobytes() for g in got] == [data[o:o + n] for o, n in r]
        counts.append(len([q for q in fault_server.requests if q.path == "/w.bin"]))
    # first call: every 64 KiB piece (2 + 2 + 1 requests); second: only the request that sizes the
    # object (it learns the ETag), every other piece from disk
    assert counts[0] == 5
    assert counts[1] - counts[0] == 1


def test_old_name_cache_bytes_still_bounds_the_disk_cache(fs, tmp_path):
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "cache_bytes": 1 << 20}
    with pytest.warns(DeprecationWarning, match="now called 'disk_cache_bytes'"):
        arr = lsio.open(fs.url("sh.zarr"), storage_options=so)
        assert_same_bits(arr[...], fs.sh)
    assert blocks(tmp_path / "cache")
    with pytest.raises(ValueError, match="give only 'disk_cache_bytes'"):
        lsio.open(fs.url("sh.zarr"), storage_options={**so, "disk_cache_bytes": 1 << 20})


def test_bad_options(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="needs cache_dir"):
        lsio.open("https://example.invalid/x.zarr", storage_options={"disk_cache_bytes": 10})
    with pytest.raises(ValueError, match="not a directory"):
        lsio.open("https://example.invalid/x.zarr", storage_options={"cache_dir": str(f)})
    with pytest.raises(ValueError):
        lsio.open("https://example.invalid/x.zarr", storage_options={"cache_dir": str(tmp_path), "disk_cache_bytes": 0})


def test_a_missing_parent_directory_is_created_owner_only(fs, tmp_path):
    """Defect: a cache_dir whose parent did not exist disabled the cache silently (every
    write failed and was only counted)."""
    d = tmp_path / "not" / "yet" / "cache"
    old = os.umask(0)
    try:
        arr = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "cache_dir": str(d), "disk_cache_bytes": 1 << 20})
        assert_same_bits(arr[...], fs.sh)
    finally:
        os.umask(old)
    assert blocks(d), "nothing was cached"
    # Owner-only whatever the umask: the headers hold object URLs.
    assert (d.stat().st_mode & 0o777) == 0o700
    for p in blocks(d):
        assert (p.stat().st_mode & 0o777) == 0o600, p
        assert (p.parent.stat().st_mode & 0o777) == 0o700, p.parent
    again = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "cache_dir": str(d), "disk_cache_bytes": 1 << 20})
    assert_same_bits(again[...], fs.sh)
    assert again.stats()["disk_cache_hits"] > 0


def test_an_unusable_cache_directory_fails_at_open(fs, tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(lsio.StorageError) as e:
        lsio.open(fs.url("sh.zarr"),
                  storage_options={**OPTS, "cache_dir": str(f / "cache"), "disk_cache_bytes": 1 << 20})
    assert str(f) in str(e.value)


def test_a_block_whose_bytes_changed_on_disk_is_never_served(fs, tmp_path):
    """Same size, one data byte flipped (bit rot, a torn write): only the block's checksum
    tells, and the read must still return the stored array."""
    d = tmp_path / "cache"
    so = {**OPTS, "cache_dir": str(d), "disk_cache_bytes": 1 << 20}
    assert_same_bits(lsio.open(fs.url("sh.zarr"), storage_options=so)[...], fs.sh)
    # The data blocks (the small files are the shards' kept indexes, "tails").
    victims = [v for v in blocks(d) if v.stat().st_size > 1500]
    tails = len(blocks(d)) - len(victims)
    assert victims and tails == len(index_gets(fs))
    for v in victims:
        # Each block here holds a whole shard; 1000 bytes before its end is chunk data (the
        # 404-byte shard index is at the end), which the read would decode.
        assert v.stat().st_size > 1500
        with open(v, "r+b") as f:
            f.seek(-1000, os.SEEK_END)
            byte = f.read(1)
            f.seek(-1000, os.SEEK_END)
            f.write(bytes([byte[0] ^ 0xFF]))
    again = lsio.open(fs.url("sh.zarr"), storage_options=so)
    assert_same_bits(again[...], fs.sh)
    assert again.stats()["disk_cache_hits"] == tails, "only the indexes came from disk"
