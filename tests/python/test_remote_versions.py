"""Object versions on the remote path: a rewritten object is never served stale.

The version matrix of issue 24, on the fault server: {strong ETag, weak ETag, no ETag with
Last-Modified, neither} x {index cache on, off} x {disk cache on, off} x {rewrite between
calls, during a call} x {same process, a second process on the same cache directory}.

What lsio guarantees (docs/guide/remote.md, "When objects change"):

* a rewrite *between* two calls: the next call returns the new data or raises a typed
  error (``StorageError`` with errno ``ESTALE``), and the call after that returns the new
  data; never old data;
* a rewrite *during* a call: that call returns the data of one version (the one current
  when it read the shard's index), or raises a typed error; never a mix of versions; the
  next call returns the new data;
* with a disk cache, only bytes of a version the server confirmed in that call are served
  from disk (``cache_max_age`` widens that window on purpose);
* without any validator (neither ETag nor Last-Modified) nothing pins a version: rewrites
  between calls are still seen (every call reads the shard indexes again), a rewrite during
  a call is seen only if it changes the object's size, and nothing is kept on disk.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import lsio

zarr = pytest.importorskip("zarr")

OPTS = {"timeout": 5, "connect_timeout": 2, "retries": 1}
SHAPE, SHARD, CHUNK = (100, 100), (50, 50), (10, 10)
SHARDS = ["c/0/0", "c/0/1", "c/1/0", "c/1/1"]
VALIDATORS = ["strong", "weak", "last_modified", "none"]


def _write(path: Path, data: np.ndarray) -> None:
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNK, shards=SHARD, dtype="uint16",
                          compressors=zarr.codecs.ZstdCodec(level=3), fill_value=0)
    z[...] = data


@pytest.fixture(scope="module")
def versions(tmp_path_factory):
    """Two versions of one sharded array, written by zarr-python. V2's shards differ in size
    from V1's (noise against a smooth field), so a size check alone can tell them apart."""
    root = tmp_path_factory.mktemp("versions")
    yy, xx = np.mgrid[0:SHAPE[0], 0:SHAPE[1]]
    v1 = ((yy * 7 + xx * 3) % 500).astype("uint16")
    v2 = np.random.default_rng(1).integers(0, 60000, SHAPE).astype("uint16")
    _write(root / "v1.zarr", v1)
    _write(root / "v2.zarr", v2)
    for s in SHARDS:
        assert (root / "v1.zarr" / s).stat().st_size != (root / "v2.zarr" / s).stat().st_size
    return root, v1, v2


@pytest.fixture
def server(make_fault_server, tmp_path, versions):
    root, v1, v2 = versions
    fs = make_fault_server(tmp_path / "www")
    shutil.copytree(root / "v1.zarr", fs.root / "a.zarr")
    # V1 is old: a rewrite now has another Last-Modified second.
    old = time.time() - 120
    for p in (fs.root / "a.zarr").rglob("*"):
        os.utime(p, (old, old))
    fs.v1, fs.v2, fs.v2_dir = v1, v2, root / "v2.zarr"
    return fs


def _rewrite_now(fs) -> None:
    """Replace every shard by V2's (write + rename: a new inode, a new ETag)."""
    for s in SHARDS:
        dst = fs.root / "a.zarr" / s
        tmp = dst.with_name(dst.name + ".new")
        shutil.copyfile(fs.v2_dir / s, tmp)
        os.replace(tmp, dst)


def _rewrite_during_next_call(fs) -> None:
    """Each shard is replaced right after the next request for it was served: the request
    that reads its index sees V1, the requests after it V2."""
    for s in SHARDS:
        fs.add_fault("replace_object", f"/a.zarr/{s}", skip=1, times=1, data=(fs.v2_dir / s).read_bytes())


def _outcome(arr, v1, v2) -> str:
    try:
        x = arr[...]
    except lsio.StorageError as e:
        assert e.errno == errno.ESTALE, repr(e)
        return "stale-error"
    except lsio.CorruptDataError:
        return "corrupt-error"
    if np.array_equal(x, v2):
        return "new"
    if np.array_equal(x, v1):
        return "old"
    return "mixed"


SECOND_PROCESS = textwrap.dedent("""
    import json, sys, numpy as np, lsio, errno
    url, so, kw, v1, v2, calls = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), \\
        np.load(sys.argv[4]), np.load(sys.argv[5]), int(sys.argv[6])
    arr = lsio.open(url, storage_options=so, **kw)
    out = []
    for _ in range(calls):
        try:
            x = arr[...]
        except lsio.StorageError as e:
            out.append("stale-error" if e.errno == errno.ESTALE else "other-error:" + str(e))
            continue
        except lsio.CorruptDataError:
            out.append("corrupt-error")
            continue
        out.append("new" if np.array_equal(x, v2) else "old" if np.array_equal(x, v1) else "mixed")
    print(json.dumps({"outcomes": out, "stats": arr.stats()}))
""")


def _second_process(fs, url, so, kw, tmp_path, calls):
    np.save(tmp_path / "v1.npy", fs.v1)
    np.save(tmp_path / "v2.npy", fs.v2)
    r = subprocess.run([sys.executable, "-c", SECOND_PROCESS, url, json.dumps(so), json.dumps(kw),
                        str(tmp_path / "v1.npy"), str(tmp_path / "v2.npy"), str(calls)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("process", ["same", "second"])
@pytest.mark.parametrize("when", ["between", "during"])
@pytest.mark.parametrize("disk", ["disk-cache", "no-disk-cache"])
@pytest.mark.parametrize("index_cache", ["index-cache", "no-index-cache"])
@pytest.mark.parametrize("validators", VALIDATORS)
def test_version_matrix(server, tmp_path, validators, index_cache, disk, when, process):
    fs = server
    fs.validators = validators
    so = dict(OPTS)
    if disk == "disk-cache":
        so.update(cache_dir=str(tmp_path / "cache"), disk_cache_bytes=1 << 24)
    kw = {} if index_cache == "index-cache" else {"index_cache_bytes": 0}
    url = fs.url("a.zarr")
    arr = lsio.open(url, storage_options=so, **kw)
    # Twice: the first call fills the index cache and the disk cache, the second uses them.
    assert _outcome(arr, fs.v1, fs.v2) == "old"
    assert _outcome(arr, fs.v1, fs.v2) == "old"
    if disk == "disk-cache" and validators == "strong":
        assert arr.stats()["disk_cache_hits"] > 0, "the disk cache was not used at all"

    if when == "between":
        _rewrite_now(fs)
    else:
        _rewrite_during_next_call(fs)

    if process == "same":
        outcomes = [_outcome(arr, fs.v1, fs.v2) for _ in range(3)]
        stats = arr.stats()
    else:
        got = _second_process(fs, url, so, kw, tmp_path, 3)
        outcomes, stats = got["outcomes"], got["stats"]

    # The accepted histories: [old] (during: the call ran before the replacement reached the
    # server, or read V1's index), then at most one call that noticed the rewrite with an
    # error, then the new data on every later call.
    assert "mixed" not in outcomes, outcomes
    rest = list(outcomes)
    if when == "during" and rest[0] == "old":
        rest.pop(0)
    errors = {"stale-error"}
    if validators == "none" and when == "during":
        # No validator: only the size change tells V2 from V1 under the call (it does here);
        # a chunk of the new object may fail to decode before the size check runs.
        errors.add("corrupt-error")
    if rest and rest[0] in errors:
        rest.pop(0)
    assert rest and all(o == "new" for o in rest), outcomes
    if disk == "disk-cache" and validators != "strong":
        # Weak ETags and dates do not identify bytes: nothing is kept on or served from disk.
        assert stats["disk_cache_hits"] == 0
        assert not list((tmp_path / "cache").rglob("*.blk"))


def test_weak_etags_are_never_sent_in_if_match(server):
    """If-Match compares strongly: a weak tag there fails on every conforming server (the
    defect: a sharded array behind such a server could never be read)."""
    fs = server
    fs.validators = "weak"
    arr = lsio.open(fs.url("a.zarr"), storage_options=OPTS)
    for _ in range(3):
        np.testing.assert_array_equal(arr[...], fs.v1)
    assert all(r.if_match is None for r in fs.requests), [r.if_match for r in fs.requests if r.if_match]
    assert all(r.status in (200, 206) for r in fs.requests if r.path.startswith("/a.zarr/c/"))


def test_disk_cache_hits_are_confirmed_each_call(server, tmp_path):
    """The defect: with cache_dir, a cached index and its ETag were reused with no request and
    the blocks served from disk, so a rewritten shard's old bytes came back forever. Now
    every call confirms the versions it served from disk (one conditional HEAD per shard,
    sent while the blocks are read), and a call whose versions turn out stale fails."""
    fs = server
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 24}
    arr = lsio.open(fs.url("a.zarr"), storage_options=so)
    np.testing.assert_array_equal(arr[...], fs.v1)
    n = len(fs.requests)
    np.testing.assert_array_equal(arr[...], fs.v1)
    again = fs.requests[n:]
    assert sorted(r.path for r in again) == sorted(f"/a.zarr/{s}" for s in SHARDS)
    assert all(r.method == "HEAD" and r.headers.get("if-none-match") and r.status == 304 for r in again)
    _rewrite_now(fs)
    with pytest.raises(lsio.StorageError) as e:
        arr[...]
    assert e.value.errno == errno.ESTALE and "changed" in str(e.value)
    np.testing.assert_array_equal(arr[...], fs.v2)
    np.testing.assert_array_equal(arr[...], fs.v2)


def test_a_new_process_takes_shard_indexes_from_the_disk_cache(server, tmp_path):
    """A warm process reads no shard index from the server: the disk cache keeps each shard's
    index with the version it came from (a tail), and the new process only confirms those
    versions (one conditional HEAD per shard, sent with the chunk reads). A rewrite made
    before a process starts is not an error in it: the stale tails fail their confirmation,
    are erased, and the call runs once more on the current versions."""
    fs = server
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 24}
    url = fs.url("a.zarr")
    np.testing.assert_array_equal(lsio.open(url, storage_options=so)[...], fs.v1)  # cold
    n = len(fs.requests)
    got = _second_process(fs, url, so, {}, tmp_path, 1)
    assert got["outcomes"] == ["old"]
    assert got["stats"]["disk_cache_hits"] > 0
    shard_requests = [r for r in fs.requests[n:] if r.path.startswith("/a.zarr/c/")]
    assert sorted(r.path for r in shard_requests) == sorted(f"/a.zarr/{s}" for s in SHARDS)
    assert all(r.method == "HEAD" and r.status == 304 for r in shard_requests), \
        [(r.method, r.path, r.status) for r in shard_requests]

    _rewrite_now(fs)
    n = len(fs.requests)
    got = _second_process(fs, url, so, {}, tmp_path, 2)
    assert got["outcomes"] == ["new", "new"]
    # The first call confirmed the kept versions (all stale), then read the new indexes.
    first = [r for r in fs.requests[n:] if r.path.startswith("/a.zarr/c/")]
    assert sum(r.method == "HEAD" and r.status == 200 for r in first) == len(SHARDS)
    # The new versions' tails serve the process after that.
    n = len(fs.requests)
    assert _second_process(fs, url, so, {}, tmp_path, 1)["outcomes"] == ["new"]
    assert all(r.method == "HEAD" for r in fs.requests[n:] if r.path.startswith("/a.zarr/c/"))


def test_a_kept_index_of_an_array_recreated_with_another_layout_is_not_an_error(server, tmp_path):
    """The disk cache keeps shard indexes by URL: an array re-created at the same path with
    other inner chunks leaves kept indexes that no longer decode (a smaller index: the kept
    bytes are served, fail their checksum). The call runs again without them: new data."""
    fs = server
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 24}
    url = fs.url("a.zarr")
    np.testing.assert_array_equal(lsio.open(url, storage_options=so)[...], fs.v1)
    shutil.rmtree(fs.root / "a.zarr")
    z = zarr.create_array(str(fs.root / "a.zarr"), shape=SHAPE, chunks=(25, 25), shards=SHARD, dtype="uint16",
                          compressors=zarr.codecs.ZstdCodec(level=3), fill_value=0)
    z[...] = fs.v2
    got = _second_process(fs, url, so, {}, tmp_path, 2)
    assert got["outcomes"] == ["new", "new"], got
    # The process after it takes the new layout's indexes from disk.
    n = len(fs.requests)
    assert _second_process(fs, url, so, {}, tmp_path, 1)["outcomes"] == ["new"]
    assert all(r.method == "HEAD" for r in fs.requests[n:] if r.path.startswith("/a.zarr/c/"))


def test_cache_max_age_trusts_a_confirmed_version_for_that_long(server, tmp_path):
    fs = server
    so = {**OPTS, "cache_dir": str(tmp_path / "cache"), "disk_cache_bytes": 1 << 24, "cache_max_age": 2.0}
    arr = lsio.open(fs.url("a.zarr"), storage_options=so)
    np.testing.assert_array_equal(arr[...], fs.v1)
    n = len(fs.requests)
    np.testing.assert_array_equal(arr[...], fs.v1)
    assert len(fs.requests) == n, "within cache_max_age no request is needed"
    _rewrite_now(fs)
    # Within the window the confirmed (now old) version may still be served: documented.
    assert _outcome(arr, fs.v1, fs.v2) in ("old", "new")
    time.sleep(2.2)
    assert _outcome(arr, fs.v1, fs.v2) in ("new", "stale-error")
    np.testing.assert_array_equal(arr[...], fs.v2)


def _stored_sizes(path: Path) -> list[int]:
    """Stored bytes of every inner chunk of a local shard directory, read by lsio locally."""
    return np.asarray(lsio.open(str(path))._native().stored_chunk_nbytes()).ravel().tolist()


@pytest.mark.parametrize("disk", ["no_disk_cache", "disk_cache"])
def test_chunk_size_survey_confirms_remembered_indexes(server, tmp_path, disk):
    """`lsio info`'s chunk sizes come from shard indexes alone (no chunk is read). A remembered
    index of a rewritten shard must not give the old sizes as current: the survey confirms
    the versions it used, like a read does (an ESTALE error, then the new sizes)."""
    fs = server
    so = dict(OPTS)
    if disk == "disk_cache":
        so.update(cache_dir=str(tmp_path / "cache"), disk_cache_bytes=1 << 24)
    arr = lsio.open(fs.url("a.zarr"), storage_options=so)
    v1_sizes = _stored_sizes(fs.root / "a.zarr")
    v2_sizes = _stored_sizes(fs.v2_dir)
    assert v1_sizes != v2_sizes
    np.testing.assert_array_equal(arr[...], fs.v1)  # the indexes are now remembered
    assert np.asarray(arr._native().stored_chunk_nbytes()).ravel().tolist() == v1_sizes
    _rewrite_now(fs)
    try:
        got = np.asarray(arr._native().stored_chunk_nbytes()).ravel().tolist()
    except lsio.StorageError as e:
        assert e.errno == errno.ESTALE, e
        got = np.asarray(arr._native().stored_chunk_nbytes()).ravel().tolist()
    assert got == v2_sizes
