"""Tunables of ``lsio.open``: arguments, environment variables, storage-kind defaults,
``tune=True`` and ``direct=True`` (O_DIRECT).

Every store of ``stores.py`` is read with ``direct=True`` on every backend and compared with
the expected array (chunks sit at unaligned offsets, so each read is widened to aligned
blocks); the environment variables are checked for precedence and for clear errors.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import lsio
from lsio import _options
from selections import crop_slices, random_crops, random_keys
from stores import assert_same_bits
from test_parity import seed_of

ENV_VARS = ("LSIO_THREADS", "LSIO_IO", "LSIO_QUEUE_DEPTH", "LSIO_MERGE_GAP", "LSIO_MAX_READ",
            "LSIO_MEMORY_LIMIT", "LSIO_DIRECT", "LSIO_CACHE_BYTES")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def path(stores):
    return str(stores.get(SHARDED).path)


SHARDED = "z_shard_zstd_end"


def test_defaults_follow_the_storage_kind(path):
    opts = lsio.open(path).options
    kind = opts["storage"]["kind"]
    assert kind in _options.COALESCING
    assert (opts["max_gap"], opts["max_request"]) == _options.COALESCING[kind]
    assert opts["queue_depth"] == 64 and opts["io"] == "auto" and opts["threads"] == 0
    assert opts["direct"] == "auto" and opts["memory_limit"] == 0 and opts["chunk_cache_bytes"] == 0
    assert "tuning" not in opts


def test_threads_zero_means_all_cpus_as_options_reports_it(path, monkeypatch):
    # options["threads"] says 0 for "every available CPU": passing that back (argument,
    # LSIO_THREADS, the CLI's --threads) must mean the same, not be refused.
    default = lsio.open(path)
    assert default.options["threads"] == 0
    again = lsio.open(path, threads=default.options["threads"])
    assert again.options["threads"] == 0
    key = (slice(0, 3),) * default.ndim
    assert_same_bits(again[key], default[key])
    monkeypatch.setenv("LSIO_THREADS", "0")
    assert lsio.open(path).options["threads"] == 0
    monkeypatch.setenv("LSIO_THREADS", "3")
    assert lsio.open(path).options["threads"] == 3
    assert lsio.open(path, threads=0).options["threads"] == 0  # the argument wins
    with pytest.raises(ValueError, match=r"threads must be >= 0 \(0 or None: all available CPUs\), got -1"):
        lsio.open(path, threads=-1)


def test_storage_kind_of_memory_file_systems(tmp_path):
    assert _options.storage_kind("/dev/shm")[0] in ("memory", "local")
    assert _options.storage_kind(str(tmp_path))[0] in _options.COALESCING
    assert _options.storage_kind("/proc")[1] == "proc"


def test_environment_variables_set_every_tunable(path, monkeypatch):
    monkeypatch.setenv("LSIO_THREADS", "3")
    monkeypatch.setenv("LSIO_IO", "pread")
    monkeypatch.setenv("LSIO_QUEUE_DEPTH", "8")
    monkeypatch.setenv("LSIO_MERGE_GAP", "4K")
    monkeypatch.setenv("LSIO_MAX_READ", "1MiB")
    monkeypatch.setenv("LSIO_MEMORY_LIMIT", "256M")
    monkeypatch.setenv("LSIO_DIRECT", "1")
    monkeypatch.setenv("LSIO_CACHE_BYTES", "64M")
    arr = lsio.open(path)
    opts = arr.options
    assert opts["chunk_cache_bytes"] == 64 << 20
    assert opts["threads"] == 3 and opts["io"] == "pread" and opts["queue_depth"] == 8
    assert opts["max_gap"] == 4096 and opts["max_request"] == 1 << 20
    assert opts["memory_limit"] == 256 << 20 and opts["direct"] is True
    # ...and the array reads correctly with all of them in force.
    np.testing.assert_array_equal(arr[...], lsio.open(path, io="pread", direct=False)[...])


def test_arguments_override_the_environment(path, monkeypatch):
    monkeypatch.setenv("LSIO_MERGE_GAP", "4K")
    monkeypatch.setenv("LSIO_QUEUE_DEPTH", "8")
    monkeypatch.setenv("LSIO_DIRECT", "true")
    opts = lsio.open(path, max_gap=0, queue_depth=16, direct=False).options
    assert opts["max_gap"] == 0 and opts["queue_depth"] == 16 and opts["direct"] is False


@pytest.mark.parametrize("name,value,words", [
    ("LSIO_MERGE_GAP", "lots", "LSIO_MERGE_GAP"),
    ("LSIO_MAX_READ", "0", "LSIO_MAX_READ"),
    ("LSIO_MAX_READ", "-4K", "LSIO_MAX_READ"),
    ("LSIO_QUEUE_DEPTH", "0", "LSIO_QUEUE_DEPTH"),
    ("LSIO_QUEUE_DEPTH", "5000", "LSIO_QUEUE_DEPTH"),
    ("LSIO_QUEUE_DEPTH", "deep", "LSIO_QUEUE_DEPTH"),
    ("LSIO_DIRECT", "maybe", "LSIO_DIRECT"),
    ("LSIO_THREADS", "-1", "LSIO_THREADS"),
    ("LSIO_THREADS", "two", "LSIO_THREADS"),
    ("LSIO_IO", "mmap", "io must be one of"),
    ("LSIO_MEMORY_LIMIT", "1Q", "LSIO_MEMORY_LIMIT"),
])
def test_bad_environment_values_name_the_variable(path, monkeypatch, name, value, words):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=words):
        lsio.open(path)


@pytest.mark.parametrize("kw,exc", [
    ({"queue_depth": 0}, ValueError), ({"queue_depth": 4097}, ValueError),
    ({"max_request": 0}, ValueError), ({"max_gap": -1}, ValueError),
    ({"max_gap": 1.5}, TypeError), ({"direct": "yes"}, ValueError), ({"direct": 1}, TypeError),
    ({"index_cache_bytes": -1}, ValueError), ({"bogus": 1}, TypeError),
])
def test_bad_arguments(path, kw, exc):
    with pytest.raises(exc):
        lsio.open(path, **kw)


def test_parse_size():
    assert _options.parse_size("123", "x") == 123
    assert _options.parse_size("64k", "x") == 64 << 10
    assert _options.parse_size("4 MiB", "x") == 4 << 20
    assert _options.parse_size("1G", "x") == 1 << 30
    assert _options.parse_size("2TB", "x") == 2 << 40
    with pytest.raises(ValueError):
        _options.parse_size("4.5M", "x")


def test_options_survive_pickling(path, monkeypatch):
    arr = lsio.open(path, max_gap=12345, direct=True, queue_depth=4)
    monkeypatch.setenv("LSIO_MERGE_GAP", "1")  # the receiver keeps the sender's options
    again = pickle.loads(pickle.dumps(arr))
    # direct_decision is made when the array opens in a process: after the first read there.
    settled = {k: v for k, v in arr.options.items() if k != "direct_decision"}
    assert again.options == settled
    np.testing.assert_array_equal(again[...], arr[...])
    assert again.options == arr.options


@pytest.fixture(scope="module")
def big_path(tmp_path_factory):
    """Shards of 4 MiB, so that tune=True can measure bandwidth."""
    import zarr
    from zarr.codecs import ZstdCodec
    p = tmp_path_factory.mktemp("tune") / "big"
    z = zarr.create_array(str(p), shape=(4, 1024, 1024), shards=(1, 1024, 1024), chunks=(1, 256, 256),
                          dtype="f4", compressors=ZstdCodec(level=1))
    z[...] = np.random.default_rng(0).normal(size=z.shape).astype("f4")
    return str(p)


def test_tune_measures_and_sets_coalescing(big_path):
    path = big_path
    arr = lsio.open(path, tune=True)
    opts = arr.options
    t = opts["tuning"]
    assert t["files_sampled"] >= 1
    assert t["iops"] > 0 and t["bandwidth_MBps"] > 0
    assert opts["max_gap"] == t["chosen"]["max_gap"]
    assert 4096 <= opts["max_gap"] <= 4 << 20 and opts["max_gap"] & (opts["max_gap"] - 1) == 0
    # The rule: the largest power of two <= bandwidth / IOPS, and 64x that (1..64 MiB).
    ratio = t["bandwidth_MBps"] * 1e6 / t["iops"]
    assert opts["max_gap"] <= max(ratio, 4096) and (opts["max_gap"] * 2 > ratio or opts["max_gap"] == 4 << 20)
    assert opts["max_request"] == min(64 << 20, max(1 << 20, 64 * opts["max_gap"]))
    np.testing.assert_array_equal(arr[...], lsio.open(path)[...])


def test_tune_keeps_explicit_options(big_path, monkeypatch):
    monkeypatch.setenv("LSIO_MAX_READ", "3M")
    opts = lsio.open(big_path, tune=True, max_gap=777).options
    assert opts["max_gap"] == 777 and opts["max_request"] == 3 << 20
    assert "chosen" in opts["tuning"]


def test_tune_on_a_store_without_data_keeps_defaults(tmp_path):
    import zarr
    zarr.create_array(str(tmp_path / "empty"), shape=(10,), chunks=(5,), dtype="i2")
    arr = lsio.open(str(tmp_path / "empty"), tune=True)
    assert arr.options["tuning"]["files_sampled"] == 0
    assert "note" in arr.options["tuning"]
    np.testing.assert_array_equal(arr[...], np.zeros(10, "i2"))


def test_direct_reads_equal_the_reference(store, io_mode):
    arr = lsio.open(str(store.path), io=io_mode, threads=2, direct=True)
    assert_same_bits(arr[...], store.expected, f"{store.name}[...] direct")
    for key in random_keys(seed_of(store.name) + 7, store.expected.shape, 4):
        assert_same_bits(arr[key], store.expected[key], f"{store.name}[{key!r}] direct")
    if store.expected.ndim:
        starts, crop = random_crops(seed_of(store.name), store.expected.shape, arr.chunks)
        want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
        assert_same_bits(arr.read_crops(starts, crop), want, f"{store.name} crops direct")


def test_chunk_cache_bytes_and_its_old_name(path):
    """The decoded-chunk cache is ``chunk_cache_bytes`` (``cache_bytes`` also named the disk
    cache's bound in storage_options); the old name works with a DeprecationWarning that
    names the new one and points at the caller; both names at once are a ValueError."""
    assert lsio.open(path, chunk_cache_bytes=1 << 20).options["chunk_cache_bytes"] == 1 << 20
    with pytest.warns(DeprecationWarning,
                      match="'cache_bytes' is deprecated: it is now called 'chunk_cache_bytes'") as rec:
        arr = lsio.open(path, cache_bytes=2 << 20)
    assert arr.options["chunk_cache_bytes"] == 2 << 20 and "cache_bytes" not in arr.options
    assert [w.filename for w in rec] == [__file__], "attributed to the caller, not to lsio"
    with pytest.warns(DeprecationWarning, match="chunk_cache_bytes"):
        assert lsio.Array(path, cache_bytes=1 << 20).options["chunk_cache_bytes"] == 1 << 20
    for old in (1 << 20, 2 << 20):  # equal values too: one of them would be read silently
        with pytest.raises(ValueError, match="give only 'chunk_cache_bytes'"):
            lsio.open(path, cache_bytes=old, chunk_cache_bytes=1 << 20)
    with pytest.raises(ValueError, match="local files only.*disk_cache_bytes"):
        lsio.open("s3://bucket/x.zarr", chunk_cache_bytes=1 << 20)
