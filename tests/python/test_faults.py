"""Faults while reading: files changing under an open Array, failed allocations, limits.

* A shard truncated in place after an ``Array`` cached its index: the next read
  sees the file changed, reads the index again and raises ``CorruptDataError``
  naming the shard file (never the stale index applied to the cut file), and an
  ``out=`` view into a larger buffer leaves every byte outside the view untouched
  (pread, auto and, where io_uring works, uring). test_file_changes.py covers
  valid rewrites.
* A chunk whose decoded size cannot be allocated (2**59 bytes, beyond any
  address space, so the outcome does not depend on overcommit settings): a
  zstd chunk raises ``MemoryError`` from the failed allocation; an uncompressed
  chunk is rejected as ``CorruptDataError`` by its size check before anything
  is allocated.  Either way the process survives and later reads work.
* ``memory_limit``: a read needing more than the limit raises ``MemoryError``
  mentioning "memory limit" before writing into ``out``; the same read under a
  large limit returns the data.
* Real allocation failures: in a subprocess with a small ``posix_memalign``
  interposer preloaded (compiled here from ``ALLOC_SHIM_C``; the engine's read
  arena and decoded-chunk buffer come from ``posix_memalign``), the 1st, 2nd, ...
  such allocation of a read fails in turn, each time on a fresh thread (so its
  per-thread buffers must be allocated): ``MemoryError`` naming the buffer,
  nothing written outside the ``out`` view, no garbage inside it, and the same
  Array then reads correctly on that thread.
* ``std::bad_alloc`` from any ``operator new`` of a read: in a subprocess with a
  small C++ ``operator new`` replacement preloaded (``NEW_SHIM_CC``), the 1st,
  2nd, ... allocation of a read (threads 1 and 2) throws in turn: the read
  raises ``MemoryError`` or returns the data, the process survives, nothing is
  written outside the ``out`` view and the Array then reads correctly.
* Thread creation failure: in a subprocess whose ``RLIMIT_AS`` is set just above
  its current address-space size (no room for an 8 MiB thread stack), a
  ``threads=2`` read returns the same data as a ``threads=1`` read (or raises
  ``MemoryError``), never an untyped ``RuntimeError``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numcodecs
import numpy as np
import pytest
import zarr

import lsio
from conftest import ZARR_WARNINGS
from stores import shard_index

SENTINEL = 7.5


def make_sharded(path: Path) -> np.ndarray:
    """(64,) float64, shards of 32, inner chunks of 8, uncompressed: known offsets."""
    data = np.arange(64, dtype="<f8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZARR_WARNINGS)
        a = zarr.create_array(str(path), shape=(64,), dtype="<f8", chunks=(8,),
                              shards=(32,), compressors=None, fill_value=-1.0)
        a[:] = data
    return data


@pytest.fixture(params=["pread", "auto", "uring"])
def io(request):
    if request.param == "uring":
        info = lsio.io_backend_info()
        if not info["uring_available"]:
            pytest.skip(f"io_uring unavailable: {info['reason']}")
    return request.param


def test_shard_truncated_after_index_was_cached(tmp_path, io):
    path = tmp_path / "a.zarr"
    data = make_sharded(path)
    shard = path / "c" / "0"
    idx = shard_index(shard, 4)  # (offset, nbytes) of the 4 inner chunks of shard 0
    assert [int(n) for n in idx[:, 1]] == [64] * 4

    arr = lsio.open(str(path), io=io, threads=2)
    np.testing.assert_array_equal(arr[0:8], data[0:8])  # caches shard 0's index (and fd)

    # Cut the shard in place (same inode) where inner chunk 2 begins: chunks 2 and 3 and
    # the index at the end are gone. The cached index belongs to the old file version, so
    # the next read must not use it (it would read past the new end): it reads the index
    # again, from what are now chunk bytes, and finds it corrupt.
    os.truncate(shard, int(idx[2][0]))

    big = np.full(40, SENTINEL)
    view = big[10:30]  # receives arr[20:40]: chunks 2, 3 of shard 0 and chunk 0 of shard 1
    with pytest.raises(lsio.CorruptDataError) as info:
        arr.read((slice(20, 40),), out=view)
    msg = str(info.value)
    assert str(shard) in msg, msg
    assert "index" in msg, msg
    # Nothing outside the requested region was touched.
    np.testing.assert_array_equal(big[:10], SENTINEL)
    np.testing.assert_array_equal(big[30:], SENTINEL)
    # Inside it, every element is either the sentinel or the true value: no garbage.
    inside = big[10:30]
    ok = (inside == SENTINEL) | (inside == data[20:40])
    assert ok.all(), inside

    # The other shard keeps reading correctly; shard 0 keeps failing the same way.
    np.testing.assert_array_equal(arr[32:64], data[32:64])
    with pytest.raises(lsio.CorruptDataError):
        arr[0:8]


HUGE_CHUNK = 2**56  # float64 -> 2**59 bytes decoded: more than any address space


def write_huge_chunk_store(tmp_path: Path, compressed: bool) -> Path:
    p = tmp_path / ("huge_zstd.zarr" if compressed else "huge_raw.zarr")
    p.mkdir()
    codecs = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if compressed:
        codecs.append({"name": "zstd", "configuration": {"level": 3}})
    (p / "zarr.json").write_text(json.dumps({
        "zarr_format": 3,
        "node_type": "array",
        "shape": [2 * HUGE_CHUNK],
        "data_type": "float64",
        "chunk_grid": {"name": "regular",
                       "configuration": {"chunk_shape": [HUGE_CHUNK]}},
        "chunk_key_encoding": {"name": "default",
                               "configuration": {"separator": "/"}},
        "fill_value": 0,
        "codecs": codecs,
        "attributes": {},
    }))
    (p / "c").mkdir()
    raw = np.arange(4, dtype="<f8").tobytes()
    (p / "c" / "0").write_bytes(numcodecs.Zstd(level=3).encode(raw) if compressed else raw)
    return p


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "uncompressed"])
def test_unallocatable_chunk(tmp_path, compressed):
    p = write_huge_chunk_store(tmp_path, compressed)
    chunk_file = p / "c" / "0"
    arr = lsio.open(str(p), io="pread")
    assert arr.shape == (2 * HUGE_CHUNK,)
    if compressed:
        # The decoded chunk buffer (2**59 bytes) cannot be allocated.
        with pytest.raises(MemoryError, match="cannot allocate a chunk buffer") as info:
            arr[0:4]
        assert not isinstance(info.value, lsio.Error)
    else:
        # The stored size is checked against the decoded size before any allocation.
        with pytest.raises(lsio.CorruptDataError,
                           match=f"uncompressed chunk has 32 bytes, expected {8 * HUGE_CHUNK}"
                           ) as info:
            arr[0:4]
    assert str(chunk_file) in str(info.value)
    assert "chunk (0)" in str(info.value)

    # The process is alive and the Array stays usable: the missing chunk 1 is fill.
    np.testing.assert_array_equal(arr[HUGE_CHUNK:HUGE_CHUNK + 3], np.zeros(3))
    small = tmp_path / "small.zarr"
    data = make_sharded(small)
    np.testing.assert_array_equal(lsio.open(str(small), io="pread")[:], data)


def make_zstd_store(path: Path) -> np.ndarray:
    """(128, 128) float64, zstd chunks of 64x64 (32 KiB decoded each)."""
    data = np.random.default_rng(3).standard_normal((128, 128))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ZARR_WARNINGS)
        a = zarr.create_array(str(path), shape=data.shape, dtype="<f8", chunks=(64, 64),
                              compressors=zarr.codecs.ZstdCodec(level=3), fill_value=0.0)
        a[:] = data
    return data


@pytest.mark.parametrize("io_mode", ["pread", "auto"])
def test_memory_limit_refuses_before_writing(tmp_path, io_mode):
    path = tmp_path / "m.zarr"
    data = make_zstd_store(path)

    tight = lsio.open(str(path), io=io_mode, memory_limit=4096)
    big = np.full((80, 80), SENTINEL)
    view = big[5:75, 5:75]  # receives arr[30:100, 30:100]: 4 chunks
    with pytest.raises(MemoryError, match="memory limit"):
        tight.read((slice(30, 100), slice(30, 100)), out=view)
    np.testing.assert_array_equal(big, SENTINEL)  # out untouched, inside and around

    roomy = lsio.open(str(path), io=io_mode, memory_limit=64 << 20)
    assert roomy.read((slice(30, 100), slice(30, 100)), out=view) is view
    np.testing.assert_array_equal(view, data[30:100, 30:100])
    outside = np.ones(big.shape, bool)
    outside[5:75, 5:75] = False
    np.testing.assert_array_equal(big[outside], SENTINEL)


# posix_memalign that fails the Nth call of at least `min` bytes once armed; everything
# else is memalign(), which keeps sanitizer runtimes (when preloaded first) in the loop.
ALLOC_SHIM_C = r"""
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
static unsigned long fail_nth, min_bytes, calls, failed;
void lsio_test_arm(unsigned long nth, unsigned long min) {
  __atomic_store_n(&fail_nth, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&calls, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&failed, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&min_bytes, min, __ATOMIC_SEQ_CST);
  __atomic_store_n(&fail_nth, nth, __ATOMIC_SEQ_CST);
}
unsigned long lsio_test_failed(void) { return __atomic_load_n(&failed, __ATOMIC_SEQ_CST); }
int posix_memalign(void **p, size_t align, size_t size) {
  if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
  unsigned long nth = __atomic_load_n(&fail_nth, __ATOMIC_SEQ_CST);
  if (nth != 0 && size >= __atomic_load_n(&min_bytes, __ATOMIC_SEQ_CST) &&
      __atomic_add_fetch(&calls, 1, __ATOMIC_SEQ_CST) == nth) {
    __atomic_add_fetch(&failed, 1, __ATOMIC_SEQ_CST);
    return ENOMEM;
  }
  void *q = memalign(align, size);
  if (q == NULL && size != 0) return ENOMEM;
  *p = q;
  return 0;
}
"""

# Runs in the subprocess: argv = store, io mode, shim path. Prints one JSON list.
ALLOC_CHILD = textwrap.dedent("""
    import ctypes, json, sys, threading
    import numpy as np
    import lsio
    store, io, shim_path = sys.argv[1:4]
    shim = ctypes.CDLL(shim_path)
    arr = lsio.open(store, io=io, threads=1)
    truth = arr[:]
    results = []
    for nth in range(1, 30):
        box = {"nth": nth}
        def work():
            big = np.full((80, 80), 7.5)
            view = big[5:75, 5:75]  # receives arr[30:100, 30:100]: 4 chunks, none whole
            shim.lsio_test_arm(nth, 4096)
            try:
                arr.read((slice(30, 100), slice(30, 100)), out=view)
                box["error"] = None
            except MemoryError as e:
                box["error"] = "MemoryError: " + str(e)
            except BaseException as e:
                box["error"] = "other: " + repr(e)
            box["failed"] = shim.lsio_test_failed()
            shim.lsio_test_arm(0, 0)
            outside = np.ones(big.shape, bool)
            outside[5:75, 5:75] = False
            box["outside_untouched"] = bool((big[outside] == 7.5).all())
            inside = big[5:75, 5:75]
            want = truth[30:100, 30:100]
            box["inside_clean"] = bool(((inside == 7.5) | (inside == want)).all())
            box["inside_exact"] = bool((inside == want).all())
            box["again_exact"] = bool(np.array_equal(arr[30:100, 30:100], want))
        t = threading.Thread(target=work)  # fresh per-thread arena and decode scratch
        t.start()
        t.join()
        results.append(box)
        if not box["failed"]:
            break
    print(json.dumps(results))
""")


def _build_shim(tmp_path_factory, compilers, source, name, what):
    """Compiles `source` into a shared object to LD_PRELOAD; skips without a compiler."""
    cc = next((c for c in map(shutil.which, compilers) if c), None)
    if cc is None:
        pytest.skip(f"no compiler to build the {what}")
    d = tmp_path_factory.mktemp(name.replace(".", "_"))
    (d / name).write_text(source)
    so = d / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(d / name)], check=True)
    return so


@pytest.fixture(scope="module")
def alloc_shim(tmp_path_factory):
    return _build_shim(tmp_path_factory, ("cc", "gcc"), ALLOC_SHIM_C, "shim.c", "posix_memalign interposer")


@pytest.mark.parametrize("io_mode", ["pread", "uring"])
def test_failed_buffer_allocation_is_memory_error(tmp_path, alloc_shim, io_mode):
    if io_mode == "uring" and not lsio.io_backend_info()["uring_available"]:
        pytest.skip(f"io_uring unavailable: {lsio.io_backend_info()['reason']}")
    path = tmp_path / "m.zarr"
    make_zstd_store(path)
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(x for x in (env.get("LD_PRELOAD", ""), str(alloc_shim)) if x)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", ALLOC_CHILD, str(path), io_mode, str(alloc_shim)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    failures = [r for r in results if r["failed"]]
    assert failures, results
    assert not results[-1]["failed"], "the sweep must end with a read that allocated fewer buffers"
    for r in results:
        assert r["outside_untouched"], r
        assert r["inside_clean"], r
        assert r["again_exact"], r
        if r["failed"]:
            assert r["error"] is not None and r["error"].startswith("MemoryError: cannot allocate"), r
        else:
            assert r["error"] is None and r["inside_exact"], r
    messages = " | ".join(r["error"] for r in failures)
    assert "bytes for reads" in messages, messages  # the read arena
    assert "cannot allocate a chunk buffer" in messages, messages  # the decoded chunk


# Runs in the subprocess: argv = store, io mode. Prints one JSON object.
RLIMIT_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import lsio
    store, io = sys.argv[1:3]
    one = lsio.open(store, io=io, threads=1)
    two = lsio.open(store, io=io, threads=2)
    truth = one[:]  # the calling thread's buffers exist from here on
    # Address space in use now, plus 2 MiB: no 8 MiB thread stack fits any more.
    with open("/proc/self/statm") as f:
        size = int(f.read().split()[0]) * resource.getpagesize()
    limit = size + (2 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    out = {"limit": limit}
    try:
        got = two[:]
        out["result"] = "data"
        out["equal"] = bool(np.array_equal(got, truth))
    except MemoryError as e:
        out["result"] = "MemoryError: " + str(e)
    except BaseException as e:
        out["result"] = "other: " + type(e).__name__ + ": " + str(e)
    print(json.dumps(out))
""")


@pytest.mark.parametrize("io_mode", ["pread", "auto"])
def test_thread_creation_failure_reads_with_fewer_threads(tmp_path, io_mode):
    path = tmp_path / "t.zarr"
    make_zstd_store(path)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.pop("LSIO_THREADS", None)
    proc = subprocess.run([sys.executable, "-c", RLIMIT_CHILD, str(path), io_mode],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["result"] == "data" or out["result"].startswith("MemoryError"), out
    if out["result"] == "data":
        assert out["equal"], out


# operator new that throws std::bad_alloc on the Nth call once armed (malloc otherwise);
# operator delete stays libstdc++'s, which frees with free().
NEW_SHIM_CC = r"""
#include <atomic>
#include <cstdlib>
#include <new>
static std::atomic<unsigned long> fail_nth{0}, calls{0}, failed{0};
extern "C" void lsio_test_arm_new(unsigned long nth) {
  fail_nth = 0;
  calls = 0;
  failed = 0;
  fail_nth = nth;
}
extern "C" unsigned long lsio_test_new_failed() { return failed.load(); }
static void* counted(std::size_t n) {
  const unsigned long nth = fail_nth.load(std::memory_order_relaxed);
  if (nth != 0 && calls.fetch_add(1) + 1 == nth) {
    failed.fetch_add(1);
    throw std::bad_alloc();
  }
  void* p = std::malloc(n ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
"""

# Runs in the subprocess: argv = store, io mode, shim path, threads. Prints one JSON list.
NEW_CHILD = textwrap.dedent("""
    import ctypes, json, sys
    import numpy as np
    import lsio
    store, io, shim_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    shim = ctypes.CDLL(shim_path)
    truth = lsio.open(store, io=io, threads=1)[:]
    want = truth[30:100, 30:100]
    results = []
    for nth in range(1, 3000):
        arr = lsio.open(store, io=io, threads=threads)  # cold: index reads allocate too
        big = np.full((80, 80), 7.5)
        view = big[5:75, 5:75]
        shim.lsio_test_arm_new(nth)
        try:
            arr.read((slice(30, 100), slice(30, 100)), out=view)
            error = None
        except MemoryError as e:
            error = "MemoryError"
        except BaseException as e:
            error = "other: " + repr(e)
        failed = shim.lsio_test_new_failed()
        shim.lsio_test_arm_new(0)
        outside = np.ones(big.shape, bool)
        outside[5:75, 5:75] = False
        inside = big[5:75, 5:75]
        results.append({
            "nth": nth, "failed": failed, "error": error,
            "outside_untouched": bool((big[outside] == 7.5).all()),
            "inside_clean": bool(((inside == 7.5) | (inside == want)).all()),
            "inside_exact": bool((inside == want).all()),
            "again_exact": bool(np.array_equal(arr[30:100, 30:100], want)),
        })
        if not failed:
            break
    print(json.dumps(results))
""")


@pytest.fixture(scope="module")
def new_shim(tmp_path_factory):
    return _build_shim(tmp_path_factory, ("c++", "g++"), NEW_SHIM_CC, "shim.cc", "operator new replacement")


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("io_mode", ["pread", "auto"])
def test_bad_alloc_from_any_allocation_is_memory_error(tmp_path, new_shim, io_mode, threads):
    path = tmp_path / "n.zarr"
    make_zstd_store(path)
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(x for x in (env.get("LD_PRELOAD", ""), str(new_shim)) if x)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run([sys.executable, "-c", NEW_CHILD, str(path), io_mode, str(new_shim), str(threads)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not results[-1]["failed"], "the sweep must end with a read that allocated less"
    assert any(r["error"] == "MemoryError" for r in results), results
    for r in results:
        assert r["outside_untouched"], r
        assert r["inside_clean"], r
        assert r["again_exact"], r
        if r["error"] is None:
            assert r["inside_exact"], r
        else:
            assert r["error"] == "MemoryError" and r["failed"], r
