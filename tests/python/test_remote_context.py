"""One remote context per process and configuration (``lsio._remote``), end to end over a
FaultServer with bearer tokens from a ``credentials`` callable whose expiry is driven by a
fake clock (``lsio._storage.clock``).

* Threads racing the first use of an unpickled remote array build one native store, and a
  refresh reaches the store the engine reads through (every later request carries the new
  token).
* A Group's member reads and a remote StringArray's chunk reads, after the credentials
  expired, carry refreshed credentials (they never refreshed before).
* Arrays, groups and string arrays of one URL + storage_options share the context: one
  credentials call, one refresh; pickles carry URL + storage_options only; a forked child
  builds its own context.
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading

import numpy as np
import pytest
import zarr

import lsio
import lsio._core
import lsio._storage
from stores import assert_same_bits

OPTS = {"timeout": 5, "connect_timeout": 2, "retries": 1}
SHARDED = "z_shard_zstd_end"  # 100x100 uint16, 50x50 shards of 10x10 chunks

# The credentials callable is module-level so arrays using it pickle (as workers do).
_issued: list = []


def bearer_provider():
    """A new token per call, valid for an hour of the (patched) clock."""
    token = f"tok-{len(_issued) + 1}"
    _issued.append(token)
    return {"token": token, "expiry": lsio._storage.clock() + 3600}


@pytest.fixture
def clock(monkeypatch):
    now = [1_900_000_000.0]
    monkeypatch.setattr(lsio._storage, "clock", lambda: now[0])
    _issued.clear()
    return now


def expire(now):
    """Moves the clock to within REFRESH_MARGIN of the last token's expiry."""
    now[0] += 3600 - lsio._storage.REFRESH_MARGIN + 1


def tokens_seen(server, since=0):
    return [r.headers.get("authorization") for r in server.requests[since:]]


@pytest.fixture
def count_stores(monkeypatch):
    """Counts native RemoteStore constructions from here on (without keeping the stores
    alive: whether lsio keeps them is part of what is tested)."""
    made = []
    real = lsio._core.RemoteStore

    def counting(options):
        made.append(None)
        return real(options)

    monkeypatch.setattr(lsio._core, "RemoteStore", counting)
    return made


def test_threads_racing_first_use_of_an_unpickled_array_build_one_store(make_fault_server, stores, tmp_path,
                                                                         clock, count_stores):
    """dask's threaded scheduler first uses an unpickled array from all its threads: one
    native store must come of it, and a refresh must reach the one the engine reads
    through (it reached a store the engine did not use in 13 of 40 trials)."""
    store = stores.get(SHARDED)
    shutil.copytree(store.path, tmp_path / "www" / "sh.zarr")
    server = make_fault_server(tmp_path / "www", latency_ms=20)  # a wide window for the race
    so = {"credentials": bearer_provider, **OPTS}
    parent = lsio.open(server.url("sh.zarr"), storage_options=so)
    for trial in range(8):
        clone = pickle.loads(pickle.dumps(parent))
        before = len(count_stores)
        barrier = threading.Barrier(8)
        results = [None] * 8

        def first_use(i):
            barrier.wait(timeout=10)
            results[i] = clone[10 * i:10 * i + 10, 5:17]

        threads = [threading.Thread(target=first_use, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        for i, got in enumerate(results):
            assert_same_bits(got, store.expected[10 * i:10 * i + 10, 5:17])
        assert len(count_stores) - before == 1, f"trial {trial}: {len(count_stores) - before} native stores"

        # The refresh must reach the store this clone's engine reads through: every request
        # of the next read (its chunk reads) carries the new token.
        expire(clock)
        since = len(server.requests)
        assert_same_bits(clone[...], store.expected)
        seen = tokens_seen(server, since)
        assert seen and set(seen) == {f"Bearer {_issued[-1]}"}, (trial, set(seen))


def _group_with_strings(root):
    g = zarr.open_group(str(root), mode="w")
    a = g.create_array("a", shape=(6,), chunks=(3,), dtype="i4")
    a[:] = np.arange(6, dtype="i4")
    s = g.create_array("s", shape=(5,), chunks=(2,), dtype=str)
    s[:] = ["x", "yy", "ü", "", "zzz"]
    sub = g.create_group("sub")
    b = sub.create_array("b", shape=(4,), chunks=(2,), dtype="u1")
    b[:] = [1, 2, 3, 4]
    return g


@pytest.mark.parametrize("consolidated", [False, True])
def test_group_members_opened_after_expiry_get_refreshed_credentials(make_fault_server, tmp_path, clock,
                                                                     consolidated):
    g = _group_with_strings(tmp_path / "www" / "g.zarr")
    if consolidated:
        zarr.consolidate_metadata(g.store)
    server = make_fault_server(tmp_path / "www")
    grp = lsio.open_group(server.url("g.zarr"), storage_options={"credentials": bearer_provider, **OPTS})
    assert grp.consolidated is consolidated
    first = _issued[-1]
    expire(clock)
    since = len(server.requests)
    assert list(grp["a"][...]) == list(range(6))
    assert list(grp["s"][...]) == ["x", "yy", "ü", "", "zzz"]
    assert list(grp["sub/b"][...]) == [1, 2, 3, 4]
    seen = tokens_seen(server, since)
    assert seen and f"Bearer {first}" not in seen, seen
    assert set(seen) <= {f"Bearer {t}" for t in _issued[1:]}


def test_string_array_read_after_expiry_gets_refreshed_credentials(make_fault_server, tmp_path, clock):
    _group_with_strings(tmp_path / "www" / "g.zarr")
    server = make_fault_server(tmp_path / "www")
    so = {"credentials": bearer_provider, **OPTS}
    arr = lsio.open(server.url("g.zarr/s"), storage_options=so)
    assert isinstance(arr, lsio.StringArray)
    assert list(arr[:2]) == ["x", "yy"]
    issued = len(_issued)
    expire(clock)
    since = len(server.requests)
    assert list(arr[2:]) == ["ü", "", "zzz"]
    assert len(_issued) == issued + 1, "the credentials were not refreshed"
    seen = tokens_seen(server, since)
    assert seen and set(seen) == {f"Bearer {_issued[-1]}"}, seen


def test_one_context_per_configuration(make_fault_server, stores, tmp_path, clock, count_stores):
    """Arrays of one URL + storage_options share the context: the callable is called once,
    and one refresh serves them all; another configuration gets a context of its own."""
    store = stores.get(SHARDED)
    shutil.copytree(store.path, tmp_path / "www" / "sh.zarr")
    server = make_fault_server(tmp_path / "www")
    so = {"credentials": bearer_provider, **OPTS}
    a = lsio.open(server.url("sh.zarr"), storage_options=so)
    b = lsio.open(server.url("sh.zarr"), storage_options=dict(so), threads=1)
    assert a._handle.get() is b._handle.get()
    assert len(_issued) == 1
    a[0:3, 0:3]
    a_requests = a.stats()["requests"]
    b[...]
    assert a.stats()["requests"] == a_requests, "Array.stats() stays per array"
    assert b.stats()["requests"] > 0
    expire(clock)
    a[...], b[...]
    assert len(_issued) == 2
    other = lsio.open(server.url("sh.zarr"), storage_options={**so, "retries": 2})
    assert other._handle.get() is not a._handle.get()
    assert len(_issued) == 3


def test_pickles_carry_url_and_options_only(make_fault_server, tmp_path, clock):
    _group_with_strings(tmp_path / "www" / "g.zarr")
    server = make_fault_server(tmp_path / "www")
    so = {"credentials": bearer_provider, **OPTS}
    grp = lsio.open_group(server.url("g.zarr"), storage_options=so)
    arr = grp["a"]
    arr[...]
    strings = grp["s"]
    assert arr.__getstate__().keys() == {"config", "url"}
    for obj in (arr, grp, strings):
        data = pickle.dumps(obj)
        for name in (b"RemoteContext", b"RemoteStore", b"_thread", b"tok-"):
            assert name not in data, (obj, name)
    again = pickle.loads(pickle.dumps(grp))
    assert list(again["a"][...]) == list(range(6))
    assert list(pickle.loads(pickle.dumps(strings))[...]) == ["x", "yy", "ü", "", "zzz"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_builds_its_own_context(make_fault_server, stores, tmp_path, clock):
    """The child resolves again (its own credentials call) and reads through a store of its
    own, even while a parent thread held the context's lock at fork time."""
    import lsio._remote

    store = stores.get(SHARDED)
    shutil.copytree(store.path, tmp_path / "www" / "sh.zarr")
    server = make_fault_server(tmp_path / "www")
    arr = lsio.open(server.url("sh.zarr"), storage_options={"credentials": bearer_provider, **OPTS})
    arr[0:2, 0:2]
    parent_ctx = arr._handle.get()
    calls_before = len(_issued)
    with parent_ctx._lock, lsio._remote._registry_lock:  # held by "another thread" at fork time
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child reports through its exit status
            code = 1
            try:
                ok = np.array_equal(arr[...], store.expected)
                ctx = arr._handle.get()
                code = 0 if ok and ctx.pid == os.getpid() and len(_issued) == calls_before + 1 else 2
            finally:
                os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert arr._handle.get() is parent_ctx


def test_opening_a_remote_string_array_resolves_once(make_fault_server, tmp_path, clock):
    """lsio.open reads the string array's metadata and its chunks through one context (it
    once resolved three times, calling the credentials callable each)."""
    _group_with_strings(tmp_path / "www" / "g.zarr")
    server = make_fault_server(tmp_path / "www")
    arr = lsio.open(server.url("g.zarr/s"), storage_options={"credentials": bearer_provider, **OPTS})
    assert list(arr[...]) == ["x", "yy", "ü", "", "zzz"]
    assert _issued == ["tok-1"]
    # Read once by _core.read_node; the engine's open is not tried (it used to read it too).
    assert server.count("/g.zarr/s/zarr.json") == 1
