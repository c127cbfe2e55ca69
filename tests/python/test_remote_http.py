"""lsio's plain HTTP(S) remote store, end to end, against local servers.

* nginx (fixture ``nginx_server``) serves the session's test stores
  (``stores.py``): full reads, seeded random selections and ``read_crops``
  batches over HTTP equal zarr-python's reads of the same store bit for bit
  (sharded with the index at the start and the end, unsharded, missing chunks
  and shards, every dtype), and the writer's expected array.
* HTTPS (nginx and a TLS FaultServer with the test CA): ``ca_file`` and
  ``verify_ssl=False`` work; the default CA store fails fast with a
  StorageError naming the URL and the certificate problem, unretried.
* FaultServer faults (5xx, 429, S3 SlowDown, resets, truncation, ignored and
  wrong ranges, stalls, objects replaced between the index read and the chunk
  read, 403/404): each has one exact outcome: the right data, or one
  documented exception type naming the URL, within a bounded time.
* Coalescing: many crops in one shard cost one suffix index read and merged
  chunk reads; requests run concurrently.
* Headers, bearer tokens and URL userinfo reach the server and never appear
  in messages or reprs; several Python threads share one remote Array.

Every test gives small timeouts and retry counts in storage_options, so a
regression fails in seconds instead of hanging.
"""

from __future__ import annotations

import base64
import errno
import os
import shutil
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import zarr

import lsio
import remote_servers
from selections import crop_slices, has_negative_step, random_crops, random_keys
from stores import SPECS, assert_same_bits, assert_same_values

# Bounded everywhere: a hang becomes a failure in seconds.
OPTS = {"timeout": 5, "connect_timeout": 2, "retries": 2}

SHARDED = "z_shard_zstd_end"  # 100x100 uint16, 50x50 shards of 10x10 zstd chunks, index at end
SHARDED_START = "z_shard_zstd_start"
UNSHARDED = "z_plain"  # 100x100 uint16, 32x32 chunks, zstd


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


def elapsed(t0: float) -> float:
    return time.monotonic() - t0


# ==========================================================================
# 1. Parity over nginx with zarr-python
# ==========================================================================

# Every supported store: they are small and nginx answers from the page cache.
PARITY_STORES = sorted(SPECS)


@pytest.fixture(scope="module")
def nginx(nginx_server, stores):
    """nginx serving the session's store directory (stores are built lazily
    into it, and nginx serves whatever is on disk)."""
    return nginx_server(stores.root)


def zarr_ref(store, key):
    """zarr-python's value for ``key``: numpy indexing of its full read (the
    same thing as its read of ``key``; test_parity checks that)."""
    if not store.zarr_readable:
        return None
    return store.zarr_full()[key]


def check(store, got, key, context):
    assert_same_bits(got, store.expected[key], context)
    ref = zarr_ref(store, key)
    if ref is not None:
        if store.spec.zarr_bits_exact:
            assert_same_bits(got, ref, context + " vs zarr-python")
        else:
            assert_same_values(got, ref, context + " vs zarr-python")


@pytest.mark.parametrize("name", PARITY_STORES)
def test_nginx_parity(nginx, stores, name):
    store = stores.get(name)
    url = nginx.url(f"{name}.zarr")
    arr = lsio.open(url, storage_options=OPTS, threads=2)
    assert arr.path == url
    assert arr.shape == store.expected.shape
    assert arr.dtype == store.expected.dtype

    check(store, arr[...], Ellipsis, f"{url}[...]")

    for key in random_keys(seed_of(name), store.expected.shape, 8):
        check(store, arr[key], key, f"{url}[{key!r}]")

    starts, crop = random_crops(seed_of(name) + 1, store.expected.shape, arr.chunks, count=12)
    got = arr.read_crops(starts, crop)
    assert got.shape == (len(starts),) + tuple(crop)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(got, want, f"{url} crops {crop} at {starts.tolist()}")
    if store.zarr_readable:
        ref = np.stack([store.zarr_full()[crop_slices(s, crop)] for s in starts])
        if store.spec.zarr_bits_exact:
            assert_same_bits(got, ref, f"{url} crops vs zarr-python")
        else:
            assert_same_values(got, ref, f"{url} crops vs zarr-python")

    st = arr.stats()
    assert st["errors"] == 0, st
    assert st["retries"] == 0, st
    assert st["requests"] >= 1, st


def test_nginx_zarr_python_key_reads(nginx, stores):
    """A few keys compared with zarr-python's own read of that key (not just
    indexing of its full read), on sharded stores with the index at either end."""
    for name in (SHARDED, SHARDED_START, "z_shard_sparse_start_nan", "z_plain_sparse"):
        store = stores.get(name)
        arr = lsio.open(nginx.url(f"{name}.zarr"), storage_options=OPTS)
        for key in random_keys(seed_of(name) + 2, store.expected.shape, 6):
            if has_negative_step(key):
                continue
            assert_same_bits(arr[key], store.zarr_read(key), f"{name}[{key!r}]")


# ==========================================================================
# 2. HTTPS
# ==========================================================================


def test_https_with_ca_file(nginx, stores):
    store = stores.get(SHARDED)
    url = nginx.url(f"{SHARDED}.zarr", https=True)
    assert url.startswith("https://")
    arr = lsio.open(url, storage_options={**OPTS, "ca_file": str(nginx.cert_file)})
    assert_same_bits(arr[...], store.expected, url)
    # PathLike and the ca_bundle alias work too.
    arr = lsio.open(url, storage_options={**OPTS, "ca_bundle": Path(nginx.cert_file)})
    assert_same_bits(arr[5:77, 3:99], store.expected[5:77, 3:99], url)


def test_https_verify_ssl_false(nginx, stores):
    store = stores.get(SHARDED_START)
    url = nginx.url(f"{SHARDED_START}.zarr", https=True)
    arr = lsio.open(url, storage_options={**OPTS, "verify_ssl": False})
    assert_same_bits(arr[...], store.expected, url)


def test_https_default_ca_store_refuses_test_ca(nginx, stores, monkeypatch):
    stores.get(SHARDED)
    # The default store: whatever the system has, never the session's test CA.
    for var in ("SSL_CERT_FILE", "CURL_CA_BUNDLE"):
        if os.environ.get(var) and Path(os.environ[var]).resolve() == Path(nginx.cert_file).resolve():
            monkeypatch.delenv(var)
    url = nginx.url(f"{SHARDED}.zarr", https=True)
    t0 = time.monotonic()
    with pytest.raises(lsio.StorageError) as ei:
        lsio.open(url, storage_options={"timeout": 3, "connect_timeout": 2, "retries": 5})
    assert elapsed(t0) < 3.0  # not retried (5 retries would back off for longer)
    e = ei.value
    assert "certificate" in str(e).lower(), str(e)
    assert e.path == f"{url}/zarr.json"
    assert url in str(e)


def test_https_certificate_failure_is_not_retried(tls_cert, make_fault_server, stores, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(stores.get(SHARDED).path, root / "s.zarr")
    server = make_fault_server(root, tls=tls_cert)
    url = server.url("s.zarr")
    with pytest.raises(lsio.StorageError, match="(?i)certificate") as ei:
        lsio.open(url, storage_options={"timeout": 3, "connect_timeout": 2, "retries": 5})
    assert ei.value.path == f"{url}/zarr.json"
    assert server.connections_seen == 1  # one handshake, no retry
    assert server.requests == []
    # The same server with the CA: fine, and a reset mid-body over TLS resumes.
    server.add_fault("reset_mid_body", "/s.zarr/c/0/1", skip=1, after_bytes=700)
    arr = lsio.open(url, storage_options={**OPTS, "ca_file": str(tls_cert.ca_file)})
    assert_same_bits(arr[...], stores.get(SHARDED).expected, url)
    assert arr.stats()["retries"] == 1


# ==========================================================================
# 3. Faults
# ==========================================================================


@pytest.fixture
def fs(fault_server, stores):
    """A FaultServer with the sharded store at /sh.zarr and the unsharded one
    at /un.zarr (private copies: faults may rewrite them)."""
    shutil.copytree(stores.get(SHARDED).path, fault_server.root / "sh.zarr")
    shutil.copytree(stores.get(UNSHARDED).path, fault_server.root / "un.zarr")
    fault_server.sh = stores.get(SHARDED).expected
    fault_server.un = stores.get(UNSHARDED).expected
    return fault_server


def reqs(server, path, method=None):
    return [r for r in server.requests if r.path == path and (method is None or r.method == method)]


def etag_of(server, rel):
    return remote_servers.file_etag(os.stat(server.root / rel))


def test_fault_free_baseline(fs):
    """What the fault tests build on: one GET of zarr.json, a suffix index read
    per shard, then one merged If-Match chunk read per shard; no HEAD."""
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    st = arr.stats()
    assert st == {**st, "requests": 9, "retries": 0, "errors": 0}, st
    assert st["bytes_fetched"] == st["bytes_used"]
    for shard in ("0/0", "0/1", "1/0", "1/1"):
        rs = reqs(fs, f"/sh.zarr/c/{shard}")
        assert [r.method for r in rs] == ["GET", "GET"]
        assert rs[0].range == f"bytes=-{25 * 16 + 4}" and rs[0].if_match is None
        size = (fs.root / "sh.zarr" / "c" / shard.replace("/", os.sep)).stat().st_size
        assert rs[1].range == f"bytes=0-{size - 404 - 1}"
        assert rs[1].if_match == etag_of(fs, f"sh.zarr/c/{shard}")
    assert fs.count(method="HEAD") == 0


@pytest.mark.parametrize("skip", [0, 1], ids=["index", "chunks"])
def test_503_twice_then_ok(fs, skip):
    fs.add_fault("503", "/sh.zarr/c/0/0", times=2, skip=skip)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    st = arr.stats()
    assert st["retries"] >= 2, st
    assert st["errors"] == 0, st
    assert len(reqs(fs, "/sh.zarr/c/0/0")) == 4


def test_503_on_unsharded_chunk_then_ok(fs):
    fs.add_fault("503", "/un.zarr/c/1/2", times=2)
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.un)
    assert arr.stats()["retries"] >= 2
    assert len(reqs(fs, "/un.zarr/c/1/2")) == 3


def test_429_then_ok(fs):
    fs.add_fault("429", "/sh.zarr/c/*", times=3, retry_after="0")
    fs.add_fault("429", "/sh.zarr/zarr.json", times=1)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    assert arr.stats()["retries"] >= 3


@pytest.mark.parametrize("status", [503, 200])
@pytest.mark.parametrize("target", ["zarr.json", "index", "chunks", "unsharded"])
def test_slowdown_xml_then_ok(fs, status, target):
    """S3's SlowDown error document, as a 503 and as a 200 body in place of
    the data: retried, never taken as data."""
    store, path, skip = {
        "zarr.json": ("sh.zarr", "/sh.zarr/zarr.json", 0),
        "index": ("sh.zarr", "/sh.zarr/c/1/0", 0),
        "chunks": ("sh.zarr", "/sh.zarr/c/1/0", 1),
        "unsharded": ("un.zarr", "/un.zarr/c/2/3", 0),
    }[target]
    fs.add_fault("slowdown_xml", path, skip=skip, status=status)
    arr = lsio.open(fs.url(store), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh if store == "sh.zarr" else fs.un)
    assert arr.stats()["retries"] >= 1
    assert [r.fault for r in reqs(fs, path)].count("slowdown_xml") == 1


def test_connection_dropped_without_answer_then_ok(fs):
    fs.add_fault("drop", "/sh.zarr/c/0/1", times=2)
    fs.add_fault("drop", "/un.zarr/zarr.json", times=1)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    assert arr.stats()["retries"] == 2
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.un)
    assert len(reqs(fs, "/un.zarr/zarr.json")) == 2


def test_reset_mid_body_resumes_chunk_read(fs):
    fs.add_fault("reset_mid_body", "/sh.zarr/c/0/0", skip=1, after_bytes=1000)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    rs = reqs(fs, "/sh.zarr/c/0/0")
    assert len(rs) == 3, [(r.range, r.fault) for r in rs]
    index, cut, resumed = rs
    assert index.range.startswith("bytes=-")
    assert cut.fault == "reset_mid_body"
    start, end = (int(x) for x in cut.range.removeprefix("bytes=").split("-"))
    assert resumed.range == f"bytes={start + 1000}-{end}"
    assert resumed.if_match == cut.if_match == etag_of(fs, "sh.zarr/c/0/0")
    st = arr.stats()
    assert st["retries"] == 1 and st["errors"] == 0, st


def test_reset_mid_body_resumes_whole_object_read(fs):
    fs.add_fault("reset_mid_body", "/un.zarr/c/0/0", after_bytes=100)
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.un)
    rs = reqs(fs, "/un.zarr/c/0/0")
    assert len(rs) == 2
    assert rs[0].range is None and rs[0].fault == "reset_mid_body"
    assert rs[1].range == "bytes=100-"
    assert rs[1].if_match == etag_of(fs, "un.zarr/c/0/0")


def test_reset_then_object_replaced_is_stale_not_mixed(fs):
    """A resumed whole-object read whose object changed in between: the
    If-Match pin fails (412) and the read errors; the two versions are never
    spliced together."""
    fs.add_fault("reset_mid_body", "/un.zarr/c/0/0", after_bytes=100)
    fs.add_fault("replace_object", "/un.zarr/c/0/0", skip=1)  # XOR 0xFF, same size
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    with pytest.raises(lsio.StorageError) as ei:
        arr[0:32, 0:32]
    e = ei.value
    assert e.errno == errno.ESTALE, str(e)
    assert e.path == fs.url("un.zarr/c/0/0")
    rs = reqs(fs, "/un.zarr/c/0/0")
    assert len(rs) == 2 and rs[1].status == 412


@pytest.mark.parametrize("skip", [0, 1], ids=["index", "chunks"])
def test_truncated_body_then_ok(fs, skip):
    fs.add_fault("truncated_body", "/sh.zarr/c/1/1", skip=skip)
    fs.add_fault("truncated_body", "/un.zarr/c/3/3")
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    assert arr.stats()["retries"] == 1
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.un)
    assert arr.stats()["retries"] == 1


def test_ignore_range_small_shard(fs):
    """A server that answers 200 with the whole (small) object to every Range
    request: the wanted bytes are cut from it."""
    fs.add_fault("ignore_range", "/sh.zarr/c/*", times=None)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    assert_same_bits(arr.read_crops(np.array([[3, 4], [60, 61]]), (30, 30)),
                     np.stack([fs.sh[3:33, 4:34], fs.sh[60:90, 61:91]]))
    assert all(r.status == 200 for r in reqs(fs, "/sh.zarr/c/0/0"))
    assert arr.stats()["errors"] == 0


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    """One uncompressed shard of 18 MB (> the 16 MiB a 200 may be taken from)."""
    root = tmp_path_factory.mktemp("big")
    data = np.random.default_rng(7).integers(0, 2**16, size=(3000, 3000), dtype=np.uint16)
    z = zarr.create_array(str(root / "big.zarr"), shape=data.shape, dtype=data.dtype,
                          chunks=(500, 500), shards=(3000, 3000), compressors=None)
    z[...] = data
    assert (root / "big.zarr" / "c" / "0" / "0").stat().st_size > 16 << 20
    return root, data


def test_ignore_range_big_object_fails(big_store, make_fault_server):
    root, data = big_store
    server = make_fault_server(root)
    url = server.url("big.zarr")
    arr = lsio.open(url, storage_options=OPTS)
    assert_same_bits(arr[0:10, 2990:3000], data[0:10, 2990:3000])  # ranges work
    arr = lsio.open(url, storage_options=OPTS)
    server.clear_requests()
    server.add_fault("ignore_range", "/big.zarr/c/0/0", times=None)
    t0 = time.monotonic()
    with pytest.raises(lsio.StorageError) as ei:
        arr[0:10, 0:10]
    assert elapsed(t0) < 5
    e = ei.value
    assert e.path == server.url("big.zarr/c/0/0")
    assert "Range" in str(e), f"message lost: str(e)={str(e)!r} args={e.args!r}"
    assert server.url("big.zarr/c/0/0") in str(e)
    assert len(reqs(server, "/big.zarr/c/0/0")) == 1  # not retried


@pytest.mark.parametrize("store,path", [("sh.zarr", "/sh.zarr/c/0/1"),
                                        ("un.zarr", "/un.zarr/c/0/1")])
def test_wrong_content_range_is_corrupt_data(fs, store, path):
    fs.add_fault("wrong_content_range", path, times=None)
    arr = lsio.open(fs.url(store), storage_options=OPTS)
    with pytest.raises(lsio.CorruptDataError, match="Content-Range") as ei:
        arr[...]
    assert ei.value.path == fs.url(path.lstrip("/"))
    assert fs.url(path.lstrip("/")) in str(ei.value)
    assert len(reqs(fs, path)) == 1  # a server that lies is not asked again


def test_stall_longer_than_timeout(fs):
    fs.add_fault("stall", "/sh.zarr/c/1/1", times=None, seconds=10)
    arr = lsio.open(fs.url("sh.zarr"), storage_options={"timeout": 1, "retries": 1})
    t0 = time.monotonic()
    with pytest.raises(lsio.StorageError, match="after 2 attempts") as ei:
        arr[60:70, 60:70]
    assert elapsed(t0) < 5
    assert ei.value.errno == errno.ETIMEDOUT
    assert ei.value.path == fs.url("sh.zarr/c/1/1")
    assert len(reqs(fs, "/sh.zarr/c/1/1")) == 2


def test_503_forever_gives_up(fs):
    fs.add_fault("503", "/sh.zarr/c/*", times=None)
    arr = lsio.open(fs.url("sh.zarr"), storage_options={"timeout": 2, "retries": 2})
    t0 = time.monotonic()
    with pytest.raises(lsio.StorageError, match="after 3 attempts") as ei:
        arr[0:5, 0:5]
    assert elapsed(t0) < 5
    assert "503" in str(ei.value)
    assert ei.value.path == fs.url("sh.zarr/c/0/0")
    assert len(reqs(fs, "/sh.zarr/c/0/0")) == 3
    assert arr.stats()["errors"] >= 1


def write_other_shard(fs, tmp_path):
    """A valid shard for /sh.zarr/c/0/0 with other data (same layout)."""
    z = zarr.open_array(str(fs.root / "sh.zarr"), mode="r")
    other = zarr.create_array(
        str(tmp_path / "other.zarr"), shape=z.shape, dtype=z.dtype, chunks=z.chunks,
        shards=z.shards, compressors=z.compressors, serializer=z.serializer,
        fill_value=z.fill_value)
    new = (fs.sh[::-1, ::-1] + 1).astype(fs.sh.dtype)
    other[...] = new
    return (tmp_path / "other.zarr" / "c" / "0" / "0").read_bytes(), new


def test_object_replaced_after_index_read(fs, tmp_path):
    data, new = write_other_shard(fs, tmp_path)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[0:10, 0:10], fs.sh[0:10, 0:10])  # caches shard 0/0's index
    old_etag = etag_of(fs, "sh.zarr/c/0/0")
    fs.add_fault("replace_object", "/sh.zarr/c/0/0", data=data)
    n_before = len(reqs(fs, "/sh.zarr/c/0/0"))
    with pytest.raises(lsio.StorageError, match="changed since its index was read") as ei:
        arr[10:20, 0:10]
    e = ei.value
    assert e.errno == errno.ESTALE
    assert e.path == fs.url("sh.zarr/c/0/0")
    rs = reqs(fs, "/sh.zarr/c/0/0")[n_before:]
    assert len(rs) == 1  # 412 is not retried
    assert rs[0].if_match == old_etag and rs[0].status == 412
    # Asked again, the same Array reads the new object with its own index (the stale
    # index was dropped by the failed call); never the old index on the new bytes.
    assert_same_bits(arr[10:40, 0:50], new[10:40, 0:50])
    # A fresh open sees the new object consistently.
    again = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(again[0:50, 0:50], new[0:50, 0:50])


def test_missing_zarr_json_is_not_found(fs):
    fs.add_fault("status", "/sh.zarr/zarr.json", times=None, status=404)
    with pytest.raises(lsio.NotFoundError) as ei:
        lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert ei.value.path == fs.url("sh.zarr/zarr.json")
    with pytest.raises(FileNotFoundError) as ei:
        lsio.open(fs.url("nothing-here.zarr"), storage_options=OPTS)
    assert fs.url("nothing-here.zarr") in str(ei.value)


def test_missing_chunk_and_shard_read_as_fill(fs):
    fs.add_fault("status", "/un.zarr/c/1/2", times=None, status=404)
    arr = lsio.open(fs.url("un.zarr"), storage_options=OPTS)
    want = fs.un.copy()
    want[32:64, 64:96] = arr.fill_value
    assert_same_bits(arr[...], want)
    assert arr.stats()["errors"] == 0

    (fs.root / "sh.zarr" / "c" / "1" / "0").unlink()
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert arr.fill_value == 7
    want = fs.sh.copy()
    want[50:, :50] = 7
    assert_same_bits(arr[...], want)
    assert_same_bits(arr.read_crops(np.array([[45, 45], [60, 10]]), (10, 10)),
                     np.stack([want[45:55, 45:55], want[60:70, 10:20]]))


@pytest.mark.parametrize("status", [401, 403])
def test_forbidden_is_eacces(fs, status):
    fs.add_fault("status", "/sh.zarr/c/1/1", times=None, status=status)
    arr = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert_same_bits(arr[0:50, 0:50], fs.sh[0:50, 0:50])
    with pytest.raises(lsio.StorageError) as ei:
        arr[99, 99]
    assert ei.value.errno == errno.EACCES
    assert ei.value.path == fs.url("sh.zarr/c/1/1")
    assert str(status) in str(ei.value)
    assert len(reqs(fs, "/sh.zarr/c/1/1")) == 1  # never retried


def test_latency_concurrent_and_coalesced(make_fault_server, stores, tmp_path):
    """With 100 ms first-byte latency, a 32-crop batch over all four shards
    takes one round of index reads and one round of merged chunk reads."""
    root = tmp_path / "root"
    shutil.copytree(stores.get(SHARDED).path, root / "sh.zarr")
    expected = stores.get(SHARDED).expected
    server = make_fault_server(root, latency_ms=100)
    arr = lsio.open(server.url("sh.zarr"), storage_options={**OPTS, "request_concurrency": 32})
    server.clear_requests()
    starts, crop = random_crops(11, expected.shape, arr.chunks, count=32)
    t0 = time.monotonic()
    got = arr.read_crops(starts, crop)
    wall = elapsed(t0)
    assert_same_bits(got, np.stack([expected[crop_slices(s, crop)] for s in starts]))
    rs = server.requests
    shards = {r.path for r in rs}
    n = len(rs)
    assert n == 2 * len(shards) and n <= 8, [(r.path, r.range) for r in rs]
    assert arr.stats()["requests"] == n + 1  # + zarr.json
    index = [r for r in rs if r.range.startswith("bytes=-")]
    chunks = [r for r in rs if not r.range.startswith("bytes=-")]
    assert len(index) == len(chunks) == len(shards)
    # Concurrency: every index read was sent before the first was answered.
    assert max(r.time for r in index) - min(r.time for r in index) < 0.1
    assert max(r.time for r in chunks) - min(r.time for r in chunks) < 0.1
    assert wall < 4 * 0.1 + 1.0  # two rounds, not eight (with slack for 2 busy cores)


# ==========================================================================
# 4. Coalescing
# ==========================================================================


@pytest.mark.parametrize("name,location", [(SHARDED, "end"), (SHARDED_START, "start")])
def test_many_crops_in_one_shard_few_gets(make_fault_server, stores, tmp_path, name, location):
    root = tmp_path / "root"
    store = stores.get(name)
    shutil.copytree(store.path, root / "s.zarr")
    server = make_fault_server(root)
    arr = lsio.open(server.url("s.zarr"), storage_options=OPTS)
    rng = np.random.default_rng(3)
    starts = rng.integers(0, 45, size=(40, 2))  # 40 crops of 5x5 inside shard (0, 0)
    got = arr.read_crops(starts, (5, 5))
    assert_same_bits(got, np.stack([store.expected[crop_slices(s, (5, 5))] for s in starts]))
    rs = reqs(server, "/s.zarr/c/0/0")
    assert len(rs) == 2, [(r.method, r.range) for r in rs]
    index_bytes = 25 * 16 + 4
    if location == "end":
        assert rs[0].range == f"bytes=-{index_bytes}"
    else:
        assert rs[0].range == f"bytes=0-{index_bytes - 1}"
    assert rs[0].if_match is None
    assert rs[1].if_match == etag_of(server, "s.zarr/c/0/0")
    assert server.count(method="HEAD") == 0
    assert server.count("/s.zarr/c/*") == 2  # no other shard touched
    st = arr.stats()
    assert st["requests"] == 3 and st["retries"] == 0, st
    # A second batch in the same shard reuses the cached index: one GET.
    arr.read_crops(starts[:5] + 1, (5, 5))
    assert len(reqs(server, "/s.zarr/c/0/0")) == 3


def test_no_coalescing_with_max_gap_zero(make_fault_server, stores, tmp_path):
    """max_gap=0 keeps chunks that are not adjacent in the shard apart: more
    chunk GETs than with the default, each an If-Match range."""
    root = tmp_path / "root"
    store = stores.get(SHARDED)
    shutil.copytree(store.path, root / "s.zarr")
    server = make_fault_server(root)
    arr = lsio.open(server.url("s.zarr"), storage_options=OPTS, max_gap=0)
    starts = np.array([[0, 0], [20, 20], [40, 40]])
    got = arr.read_crops(starts, (5, 5))
    assert_same_bits(got, np.stack([store.expected[crop_slices(s, (5, 5))] for s in starts]))
    chunk_reads = reqs(server, "/s.zarr/c/0/0")[1:]
    assert len(chunk_reads) == 3
    assert all(r.if_match == etag_of(server, "s.zarr/c/0/0") for r in chunk_reads)


# ==========================================================================
# 5. Headers and bearer tokens
# ==========================================================================


def test_custom_header_on_every_request(fs):
    arr = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "headers": {"X-Test": "1"}})
    assert_same_bits(arr[...], fs.sh)
    arr2 = lsio.open(fs.url("un.zarr"), storage_options={**OPTS, "headers": [("X-Test", "1")]})
    assert_same_bits(arr2[...], fs.un)
    rs = fs.requests
    assert len(rs) == 9 + 17
    assert all(r.headers.get("x-test") == "1" for r in rs)
    assert all("authorization" not in r.headers for r in rs)


def test_bearer_token(fs):
    arr = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "token": "abc"})
    assert_same_bits(arr[...], fs.sh)
    assert fs.requests and all(r.headers.get("authorization") == "Bearer abc" for r in fs.requests)
    assert "abc" not in repr(arr) and "abc" not in str(arr) and "abc" not in arr.path
    fs.add_fault("status", "/sh.zarr/c/*", times=None, status=403)
    arr = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "token": "abc"})
    with pytest.raises(lsio.StorageError) as ei:
        arr[...]
    e = ei.value
    assert e.errno == errno.EACCES
    for text in (str(e), repr(e), repr(e.args), str(e.path), str(e.filename)):
        assert "abc" not in text and "Bearer" not in text, text


def test_headers_with_token_are_refused_as_authorization(fs):
    with pytest.raises(ValueError) as ei:
        lsio.open(fs.url("sh.zarr"), storage_options={
            **OPTS, "token": "sekrit-token-0123456789", "headers": {"Authorization": "Bearer x"}})
    assert "sekrit-token-0123456789" not in str(ei.value)
    assert fs.requests == []


# ==========================================================================
# 6. Threads
# ==========================================================================


@pytest.mark.parametrize("name", [SHARDED, UNSHARDED, "z_4d_shard"])
def test_threads_share_one_remote_array(fs, stores, name):
    store = stores.get(name)
    if name not in (SHARDED, UNSHARDED):
        shutil.copytree(store.path, fs.root / f"{name}.zarr")
    rel = {SHARDED: "sh.zarr", UNSHARDED: "un.zarr"}.get(name, f"{name}.zarr")
    arr = lsio.open(fs.url(rel), storage_options=OPTS, threads=2)
    expected = store.expected
    keys = random_keys(seed_of(name) + 5, expected.shape, 24)
    batches = [random_crops(seed_of(name) + 6 + i, expected.shape, arr.chunks, 9)
               for i in range(8)]
    start = threading.Barrier(4)

    def work(i):
        start.wait(timeout=10)
        out = []
        for j, key in enumerate(keys):
            if j % 4 == i:
                out.append(("key", key, arr[key]))
        for j, (starts, crop) in enumerate(batches):
            if j % 4 == i:
                out.append(("crops", (starts, crop), arr.read_crops(starts, crop)))
        return out

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = [r for part in pool.map(work, range(4)) for r in part]
    assert len(results) == len(keys) + len(batches)
    for kind, what, got in results:
        if kind == "key":
            assert_same_bits(got, expected[what], f"{name}[{what!r}]")
        else:
            starts, crop = what
            want = np.stack([expected[crop_slices(s, crop)] for s in starts])
            assert_same_bits(got, want, f"{name} crops")
    assert arr.stats()["errors"] == 0


# ==========================================================================
# 7. Redaction
# ==========================================================================

TOKEN = "tok-SECRET-0123456789abcdef"
USER, PASSWORD = "alice", "pa55w0rd-SECRET-42"


def secrets_absent(texts, secrets):
    for text in texts:
        for s in secrets:
            assert s not in text, (s, text)


def exception_texts(e):
    return [str(e), repr(e), repr(e.args), str(getattr(e, "path", "")),
            str(getattr(e, "filename", ""))]


@pytest.mark.parametrize("fault", [
    ("status", {"status": 403}),
    ("503", {}),
    ("stall", {"seconds": 5}),
    ("wrong_content_range", {}),
])
def test_errors_never_show_bearer_token(fs, fault):
    kind, params = fault
    fs.add_fault(kind, "/sh.zarr/c/*", times=None, **params)
    arr = lsio.open(fs.url("sh.zarr"), storage_options={"token": TOKEN, "timeout": 1, "retries": 0})
    secrets_absent([repr(arr), arr.path], [TOKEN])
    with pytest.raises(lsio.Error) as ei:
        arr[...]
    secrets_absent(exception_texts(ei.value), [TOKEN, "Bearer"])
    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fs.requests)


@pytest.mark.parametrize("fault", [
    ("status", {"status": 401}),
    ("503", {}),
    ("wrong_content_range", {}),
])
def test_errors_never_show_url_userinfo(fs, fault):
    kind, params = fault
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    fs.add_fault(kind, "/sh.zarr/c/*", times=None, **params)
    url = fs.url("sh.zarr").replace("http://", f"http://{USER}:{PASSWORD}@")
    arr = lsio.open(url, storage_options={"timeout": 1, "retries": 0})
    assert arr.path == fs.url("sh.zarr")
    secrets_absent([repr(arr), arr.path, repr(arr.options)], [PASSWORD, basic])
    with pytest.raises(lsio.Error) as ei:
        arr[...]
    secrets_absent(exception_texts(ei.value), [PASSWORD, basic, f"{USER}:"])
    assert all(r.headers.get("authorization") == f"Basic {basic}" for r in fs.requests)


def test_open_errors_never_show_userinfo(fs):
    url = fs.url("missing.zarr").replace("http://", f"http://{USER}:{PASSWORD}@")
    with pytest.raises(lsio.NotFoundError) as ei:
        lsio.open(url, storage_options=OPTS)
    secrets_absent(exception_texts(ei.value), [PASSWORD, f"{USER}:"])
    assert fs.url("missing.zarr") in str(ei.value)


def test_server_echoing_the_token_is_redacted(fs):
    """A server (or proxy) whose error message repeats the credential it was
    sent must not get it into lsio's exception: the store knows its token."""
    body = (b"<Error><Code>AccessDenied</Code><Message>Bearer " + TOKEN.encode()
            + b" is not valid for this object</Message></Error>")
    fs.add_fault("status", "/sh.zarr/c/*", times=None, status=403, body=body,
                 headers={"Content-Type": "application/xml"})
    arr = lsio.open(fs.url("sh.zarr"), storage_options={**OPTS, "token": TOKEN})
    with pytest.raises(lsio.StorageError) as ei:
        arr[...]
    assert "AccessDenied" in str(ei.value)
    secrets_absent(exception_texts(ei.value), [TOKEN])


# ==========================================================================
# URL encoding
# ==========================================================================


def test_paths_needing_percent_encoding(fs, stores):
    rel = "dir with space/ü+x.zarr"
    shutil.copytree(stores.get(SHARDED).path, fs.root / rel)
    arr = lsio.open(fs.url(rel), storage_options=OPTS)
    assert_same_bits(arr[...], fs.sh)
    assert {r.path for r in fs.requests} >= {f"/{rel}/zarr.json", f"/{rel}/c/0/0"}
    assert all(" " not in r.raw_path and "ü" not in r.raw_path for r in fs.requests)


def test_coalescing_is_adaptive_unless_given(fs):
    """Remote arrays measure their coalescing (stats() shows what the next read uses, within
    the 1 MiB / 16 MiB bounds); an explicit max_gap or max_request fixes it."""
    auto = lsio.open(fs.url("sh.zarr"), storage_options=OPTS)
    assert auto.options["adaptive_coalescing"] is True
    auto[...]
    st = auto.stats()
    assert 16 << 10 <= st["max_gap"] <= 1 << 20
    assert 1 << 20 <= st["max_request"] <= 16 << 20
    fixed = lsio.open(fs.url("sh.zarr"), max_gap=4096, storage_options=OPTS)
    assert fixed.options["adaptive_coalescing"] is False
    fixed[...]
    assert fixed.stats()["max_gap"] == 4096
    assert fixed.stats()["max_request"] == 16 << 20


def test_http_groups_cannot_be_listed_but_open_members_by_name(tmp_path, make_fault_server):
    """Plain HTTP has no listing: a group without consolidated metadata still opens its
    members by path, and listing says why it cannot."""
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="w")
    a = root.create_array("a", shape=(6,), chunks=(3,), dtype="i4")
    a[:] = np.arange(6, dtype="i4")
    srv = make_fault_server(tmp_path)
    g = lsio.open_group(srv.url("g.zarr"), storage_options=OPTS)
    assert not g.consolidated
    assert_same_bits(g["a"][...], np.arange(6, dtype="i4"))
    with pytest.raises(lsio.UnsupportedError, match="HTTP cannot list"):
        g.array_names


def test_metadata_is_fetched_once(tmp_path, make_fault_server, capsys):
    """Each zarr.json is fetched once: a consolidated group's by the xarray backend and the
    CLI (which read it to tell a group from an array, then opened the group and read it
    again), its members' only by the engine opening them (verify read them once more), a
    string member never (the consolidated metadata holds it)."""
    xr = pytest.importorskip("xarray")
    import lsio.cli

    ds = xr.Dataset({"t": (("station",), np.arange(3.0)), "u": (("station",), np.arange(3, dtype="i4"))},
                    coords={"station": np.array(["AAA", "BB", "ü😀"], dtype=object)})
    ds.to_zarr(tmp_path / "ds.zarr", zarr_format=3, consolidated=True)
    srv = make_fault_server(tmp_path)

    def gets():
        counts = {}
        for r in srv.requests:
            if r.path.endswith("zarr.json"):
                counts[r.path] = counts.get(r.path, 0) + 1
        srv.clear_requests()
        return counts

    once = {"/ds.zarr/zarr.json": 1, "/ds.zarr/t/zarr.json": 1, "/ds.zarr/u/zarr.json": 1}
    got = xr.open_dataset(srv.url("ds.zarr"), engine="lsio", storage_options=OPTS).load()
    assert list(got["station"].values) == ["AAA", "BB", "ü😀"]
    assert gets() == once
    g = lsio.open_group(srv.url("ds.zarr"), storage_options=OPTS)
    assert list(g["station"][...]) == ["AAA", "BB", "ü😀"]
    g["t"], g["u"]
    assert gets() == once
    # The CLI (on numbers only: it does not show string arrays yet).
    ds.drop_vars("station").to_zarr(tmp_path / "num.zarr", zarr_format=3, consolidated=True)
    for command in ("info", "verify"):
        rc = lsio.cli.main([command, srv.url("num.zarr"), "--json"])
        assert rc == 0, capsys.readouterr().err
        capsys.readouterr()
        assert gets() == {k.replace("ds.zarr", "num.zarr"): v for k, v in once.items()}, command
        rc = lsio.cli.main([command, srv.url("num.zarr"), "t", "--json"])
        assert rc == 0, capsys.readouterr().err
        capsys.readouterr()
        # read once to tell an array from a group; the engine opens it from those bytes
        assert gets() == {"/num.zarr/t/zarr.json": 1}, command


@pytest.mark.parametrize("fmt", [3, 2])
def test_a_string_array_opens_with_one_metadata_get(tmp_path, make_fault_server, fmt):
    """lsio.open reads a variable-length string array's metadata once (it read zarr.json in
    the engine, failed on the string dtype, then read it again in Python); its chunks are
    then read by their keys, one GET each, and nothing else."""
    z = zarr.create_array(str(tmp_path / "s.zarr"), shape=(5,), chunks=(2,), dtype=str, zarr_format=fmt)
    z[...] = ["a", "bb", "", "ü😀", "e"]
    srv = make_fault_server(tmp_path)
    arr = lsio.open(srv.url("s.zarr"), storage_options=OPTS)
    assert isinstance(arr, lsio.StringArray)
    meta = ["/s.zarr/zarr.json"] if fmt == 3 else ["/s.zarr/zarr.json", "/s.zarr/.zarray", "/s.zarr/.zattrs"]
    assert sorted(r.path for r in srv.requests) == sorted(meta)
    srv.clear_requests()
    assert list(arr[1:4]) == ["bb", "", "ü😀"]
    keys = ["c/0", "c/1"] if fmt == 3 else ["0", "1"]
    assert sorted(r.path for r in srv.requests) == [f"/s.zarr/{k}" for k in keys]


def test_a_refused_connection_fails_fast():
    """Nothing listening at the endpoint: a few quick attempts, then a StorageError that says
    the connection was refused (the full retry schedule took 17 s to get there)."""
    import socket
    import time

    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(lsio.StorageError, match="connection refused") as ei:
        lsio.open(f"http://127.0.0.1:{port}/a.zarr", storage_options={"retries": 9})
    assert ei.value.errno == errno.ECONNREFUSED
    assert time.monotonic() - t0 < 5


@pytest.mark.parametrize("validators", ["none", "last_modified", "strong"])
@pytest.mark.parametrize("layout", ["whole-shard zstd", "nested", "nested in whole-shard zstd"])
def test_shards_made_in_memory_never_mix_versions(fault_server, validators, layout):
    # Shards compressed whole and nested shards are made in memory from the objects read
    # (source/resident_store.h). Rewritten on a server that names no version, the next read
    # through the same handle must read the new bytes (an index cached under an empty
    # version was applied to them); with versions, new bytes or a typed error, never a mix.
    import shutil

    from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

    fault_server.validators = validators
    path = fault_server.root / "a.zarr"

    def write(seed):
        shutil.rmtree(path, ignore_errors=True)
        inner = [BytesCodec(), ZstdCodec(level=1)]
        if layout == "whole-shard zstd":
            serializer, compressors = ShardingCodec(chunk_shape=(8, 8), codecs=inner), [ZstdCodec(level=1)]
        else:
            serializer = ShardingCodec(chunk_shape=(16, 16), codecs=[ShardingCodec(chunk_shape=(8, 4), codecs=inner)])
            compressors = [ZstdCodec(level=1)] if layout.endswith("zstd") else None
        # Another seed makes other sizes: an index of the old shard cannot fit the new one.
        data = np.random.default_rng(seed).integers(0, 10 * seed, (48, 48)).astype("<i4")
        z = zarr.create_array(str(path), shape=data.shape, dtype=data.dtype, chunks=(32, 32),
                              serializer=serializer, compressors=compressors, fill_value=0)
        z[...] = data
        return data

    first = write(3)
    arr = lsio.open(fault_server.url("a.zarr"), storage_options={"timeout": 10, "retries": 1})
    np.testing.assert_array_equal(arr[...], first)
    second = write(1000)
    try:
        got = arr[...]
    except (lsio.CorruptDataError, lsio.StorageError):
        assert validators != "none"  # without versions nothing tells a rewrite: the new bytes are read
        return
    np.testing.assert_array_equal(got, second)
