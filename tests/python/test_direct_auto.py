"""``direct="auto"`` (the default): the decision at open and the reads it makes.

An array whose stored bytes exceed the page cache room reads the ranges the page cache holds
from it and the others with O_DIRECT (``Array.stats()``'s ``page_cache_reads`` and
``direct_reads`` count them), without pulling them into the page cache; an array that fits
reads buffered. ``LSIO_PAGE_CACHE_BYTES`` sets the room, so both sides are tested on one
machine. Every read is compared with zarr-python's, for every store of ``stores.py``.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import multiprocessing
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lsio
from selections import crop_slices, random_crops, random_keys
from stores import assert_same_bits
from test_parity import seed_of

SHAPE, SHARDS, CHUNKS = (16, 256, 256), (4, 128, 128), (1, 64, 64)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("LSIO_DIRECT", "LSIO_PAGE_CACHE_BYTES"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def weather(tmp_path_factory):
    """16 shards of 16 float32 chunks each, zstd, written by zarr-python."""
    import zarr
    from zarr.codecs import ZstdCodec

    path = tmp_path_factory.mktemp("auto") / "w.zarr"
    rng = np.random.default_rng(7)
    data = (rng.standard_normal(SHAPE) * 10).round(1).astype("f4")
    z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, shards=SHARDS, dtype="f4",
                          compressors=ZstdCodec(level=3))
    z[...] = data
    return path, data


def _files(path: Path):
    return sorted(p for p in (path / "c").rglob("*") if p.is_file())


def _drop(path: Path, files=None):
    lsio.close_files()  # pages lsio's mappings touched cannot be dropped while mapped
    for f in files if files is not None else _files(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _warm(files):
    for f in files:
        Path(f).read_bytes()


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.mincore.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p)


def _resident_bytes(files) -> int:
    """Bytes of `files` in the page cache: mincore(2) over a mapping (touches no page)."""
    page = mmap.PAGESIZE
    total = 0
    for f in files:
        size = os.path.getsize(f)
        if size == 0:
            continue
        fd = os.open(f, os.O_RDONLY)
        try:
            addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
            assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
            try:
                vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
                assert _libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
                total += sum(v & 1 for v in vec) * page
            finally:
                _libc.munmap(addr, size)
        finally:
            os.close(fd)
    return total


def _direct_supported_file(files) -> bool:
    try:
        fd = os.open(files[0], os.O_RDONLY | os.O_DIRECT)
    except (OSError, IndexError):
        return False
    os.close(fd)
    return True


def _direct_supported(path: Path) -> bool:
    return _direct_supported_file(_files(path))


def test_default_is_auto_and_an_array_that_fits_reads_buffered(weather):
    path, data = weather
    arr = lsio.open(str(path))
    opts = arr.options
    assert opts["direct"] == "auto"
    d = opts["direct_decision"]
    assert d["mode"] == "auto: buffered" and not d["direct_misses"] and not d["direct_all"]
    # 16 shards: every one is sampled, so the estimate is exact.
    assert d["stored_bytes"] == sum(f.stat().st_size for f in _files(path))
    assert d["room_bytes"] > d["stored_bytes"] and d["room_source"]
    assert "fits in the page cache room" in d["reason"]
    _drop(path)
    assert_same_bits(arr[2:9, 10:200, 33:250], data[2:9, 10:200, 33:250], "auto buffered")
    st = arr.stats()
    assert st["direct_reads"] == 0 and st["page_cache_reads"] == 0
    assert _resident_bytes(_files(path)) > 0, "buffered reads fill the page cache"


def test_the_estimate_samples_large_grids(tmp_path):
    """More than 16 storage objects: 16 of them sampled, scaled by the object count."""
    import zarr

    rng = np.random.default_rng(3)
    z = zarr.create_array(str(tmp_path / "v2"), shape=(300, 400), chunks=(20, 20), dtype="f8", zarr_format=2)
    z[...] = rng.standard_normal((300, 400))  # 300 chunk files of about the same size
    actual = sum(p.stat().st_size for p in _all_files(tmp_path / "v2") if not p.name.startswith("."))
    d = lsio.open(str(tmp_path / "v2")).options["direct_decision"]
    assert abs(d["stored_bytes"] - actual) <= 0.05 * actual, (d["stored_bytes"], actual)
    empty = zarr.create_array(str(tmp_path / "empty"), shape=(1000,), chunks=(10,), dtype="i4")
    assert lsio.open(str(tmp_path / "empty")).options["direct_decision"]["stored_bytes"] == 0
    del empty


def test_bad_page_cache_bytes_is_refused(weather, monkeypatch):
    path, _ = weather
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", "8.5G")
    with pytest.raises(ValueError, match="LSIO_PAGE_CACHE_BYTES"):
        lsio.open(str(path))
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", " 8 GiB ")
    assert lsio.open(str(path)).options["direct_decision"]["room_bytes"] == 8 << 30


def test_a_closed_or_unpickled_array_keeps_its_options(weather):
    path, _ = weather
    arr = lsio.open(str(path))
    assert "direct_decision" in arr.options
    again = pickle.loads(pickle.dumps(arr))
    assert again.options["direct"] == "auto" and "direct_decision" not in again.options
    arr.close()
    assert arr.options["direct"] == "auto"


def test_environment_and_arguments(weather, monkeypatch):
    path, _ = weather
    for env, want in (("auto", "auto"), ("1", True), ("true", True), ("0", False), ("off", False)):
        monkeypatch.setenv("LSIO_DIRECT", env)
        assert lsio.open(str(path)).options["direct"] == want
    monkeypatch.setenv("LSIO_DIRECT", "sometimes")
    with pytest.raises(ValueError, match="LSIO_DIRECT"):
        lsio.open(str(path))
    monkeypatch.delenv("LSIO_DIRECT")
    assert lsio.open(str(path), direct=True).options["direct_decision"]["mode"] == "on"
    assert lsio.open(str(path), direct=False).options["direct_decision"]["mode"] == "off"
    with pytest.raises(ValueError, match="'auto'"):
        lsio.open(str(path), direct="always")
    with pytest.raises(TypeError):
        lsio.open(str(path), direct=1)
    # The room comes from the environment when set.
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", "64K")
    d = lsio.open(str(path)).options["direct_decision"]
    assert d["room_bytes"] == 64 << 10 and d["room_source"] == "LSIO_PAGE_CACHE_BYTES"
    assert d["mode"] == "auto: direct misses" and "larger than the page cache room" in d["reason"]


def test_misses_direct_hits_from_the_cache_and_mixed(weather, monkeypatch):
    path, data = weather
    if not _direct_supported(path):
        pytest.skip(f"the file system holding {path} refuses O_DIRECT (see the ramfs test)")
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", "1M")
    files = _files(path)
    key = (slice(1, 15), slice(5, 250), slice(0, 256))

    # Miss: nothing cached; every range read with O_DIRECT, and nothing left in the cache.
    arr = lsio.open(str(path))
    assert arr.options["direct_decision"]["direct_misses"]
    _drop(path)
    assert _resident_bytes(files) == 0
    assert_same_bits(arr[key], data[key], "auto direct, cold")
    st = arr.stats()
    assert st["direct_reads"] > 0 and st["page_cache_reads"] == 0
    assert _resident_bytes(files) == 0, "O_DIRECT misses must not fill the page cache"

    # Hit: everything cached by another reader; served from the cache, no O_DIRECT read.
    _warm(files)
    hot = lsio.open(str(path))
    assert_same_bits(hot[key], data[key], "auto direct, hot")
    st = hot.stats()
    assert st["page_cache_reads"] > 0 and st["direct_reads"] == 0

    # Mixed: half of the shards cached.
    _drop(path)
    _warm(files[::2])
    mixed = lsio.open(str(path))
    assert_same_bits(mixed[...], data, "auto direct, mixed")
    st = mixed.stats()
    assert st["page_cache_reads"] > 0 and st["direct_reads"] > 0
    assert _resident_bytes(files[1::2]) == 0, "the uncached half stays uncached"


def _all_files(path: Path):
    return sorted(p for p in Path(path).rglob("*") if p.is_file())


def test_every_store_reads_the_same_with_misses_direct(store, io_mode, monkeypatch):
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", "0")
    arr = lsio.open(str(store.path), io=io_mode, threads=2)
    d = arr.options["direct_decision"]
    assert d["direct_misses"] == (d["stored_bytes"] > 0)
    files = _all_files(store.path)
    _drop(store.path, files)  # just written: cached, and cached ranges would skip O_DIRECT
    assert_same_bits(arr[...], store.expected, f"{store.name}[...] auto direct")
    if d["direct_misses"] and _direct_supported_file(files):
        assert arr.stats()["direct_reads"] > 0
    for key in random_keys(seed_of(store.name) + 11, store.expected.shape, 3):
        assert_same_bits(arr[key], store.expected[key], f"{store.name}[{key!r}] auto direct")
    if store.expected.ndim:
        starts, crop = random_crops(seed_of(store.name), store.expected.shape, arr.chunks)
        want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
        assert_same_bits(arr.read_crops(starts, crop), want, f"{store.name} crops auto direct")


def _read_in_child(payload):
    arr = pickle.loads(payload)
    return arr[3:12, 0:256, 17:200], arr.options["direct_decision"]["mode"], arr.stats()["direct_reads"]


def test_forked_workers_decide_and_read_on_their_own(weather, monkeypatch):
    path, data = weather
    if not _direct_supported(path):
        pytest.skip(f"the file system holding {path} refuses O_DIRECT")
    monkeypatch.setenv("LSIO_PAGE_CACHE_BYTES", "1M")
    arr = lsio.open(str(path))
    assert_same_bits(arr[0:2], data[0:2], "parent")  # the parent has read (descriptors, ring)
    _drop(path)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.map(_read_in_child, [pickle.dumps(arr)] * 2)
    for got, mode, direct_reads in results:
        assert_same_bits(got, data[3:12, 0:256, 17:200], "forked worker")
        assert mode == "auto: direct misses" and direct_reads > 0


_RAMFS_CHILD = r"""
import os, sys, numpy as np, lsio
path = sys.argv[1]
os.environ["LSIO_PAGE_CACHE_BYTES"] = "0"
auto = lsio.open(path)
on = lsio.open(path, direct=True)
want = np.load(sys.argv[2])
assert auto.options["direct_decision"]["direct_misses"], auto.options
assert np.array_equal(auto[...], want) and np.array_equal(on[...], want)
# O_DIRECT did not take on ramfs: the files are read buffered (nothing counted as O_DIRECT).
assert auto.stats()["direct_reads"] == 0 and on.stats()["direct_reads"] == 0, (auto.stats(), on.stats())
print("ok")
"""


def test_a_file_system_without_o_direct_reads_buffered(weather, tmp_path):
    """ramfs has no O_DIRECT: mounted in a private mount namespace (needs root)."""
    path, data = weather
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting ramfs needs root and unshare(1)")
    np.save(tmp_path / "want.npy", data)
    mnt = tmp_path / "ramfs"
    mnt.mkdir()
    script = tmp_path / "child.py"
    script.write_text(_RAMFS_CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    shell = (f"mount -t ramfs ramfs {mnt} && cp -r {path} {mnt}/w.zarr && "
             f"{sys.executable} {script} {mnt}/w.zarr {tmp_path / 'want.npy'}")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", shell],
                       capture_output=True, text=True, env=env, timeout=120)
    if r.returncode != 0 and "mount" in r.stderr and "Traceback" not in r.stderr:
        pytest.skip(f"cannot mount ramfs here: {r.stderr.strip()}")
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


_CGROUP_CHILD = r"""
import json, sys, lsio
a = lsio.open(sys.argv[1])
print(json.dumps(a.options["direct_decision"]))
"""


def _own_memory_cgroup():
    """(directory for a child group, cgroup v2?) of this process's memory cgroup, or None."""
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        hid, ctrl, path = line.split(":", 2)
        if (v2 and hid == "0") or (not v2 and "memory" in ctrl.split(",")):
            base = Path("/sys/fs/cgroup") if v2 else Path("/sys/fs/cgroup/memory")
            return base / path.lstrip("/"), v2
    return None


def test_the_room_comes_from_a_real_memory_cgroup(weather, tmp_path):
    """A child process inside a memory cgroup (v1 memory.limit_in_bytes or v2 memory.max;
    needs root): the room is the group's limit minus what the process holds, and says so."""
    path, _ = weather
    own = _own_memory_cgroup()
    if os.geteuid() != 0 or own is None:
        pytest.skip("creating a memory cgroup needs root and a memory controller")
    parent, v2 = own
    if v2 and (parent / "cgroup.procs").read_text().strip():
        parent = parent.parent  # v2: no controllers below a group that holds processes
    group = parent / f"lsio-test-{os.getpid()}"
    limit = 256 << 20
    try:
        group.mkdir()
        (group / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(limit))
    except OSError as e:
        pytest.skip(f"cannot create a memory cgroup here: {e}")
    try:
        script = tmp_path / "child.py"
        script.write_text(_CGROUP_CHILD)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        env.pop("LSIO_PAGE_CACHE_BYTES", None)
        shell = f"echo $$ > {group / 'cgroup.procs'} && exec {sys.executable} {script} {path}"
        r = subprocess.run(["sh", "-c", shell], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
    finally:
        try:
            group.rmdir()
        except OSError:
            pass
    d = json.loads(r.stdout.strip().splitlines()[-1])
    assert d["room_source"] == f"cgroup {group}", d
    assert 0 < d["room_bytes"] < limit, d  # the limit minus the child's own memory
    assert d["direct_misses"] == (d["stored_bytes"] > d["room_bytes"])
