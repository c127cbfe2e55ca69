"""Ctrl-C (SIGINT) stops a long read promptly, and the Array stays usable afterwards;
signal handlers may read through lsio themselves; the interpreter exits cleanly while
daemon threads are inside reads.

The engine polls Python's signal handlers from the calling thread while the GIL is released
(about every 10 ms between chunks). A helper thread sends SIGINT to the process while the
main thread is inside a read of a store that takes a few hundred milliseconds to decode; the
KeyboardInterrupt must come out of the engine call itself (not from Python code before or
after it). A signal that happens to land outside the read is retried.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback

import numpy as np
import pytest
import zarr
from zarr.codecs import GzipCodec, ZstdCodec

import lsio
from conftest import require_uring


@pytest.fixture(autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler, whatever the test process inherited.

    A shell starts background jobs (`cmd &` without job control) with SIGINT ignored, and
    Python then keeps it ignored: these tests would see no KeyboardInterrupt at all.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("interrupt") / "slow.zarr"
    plane = (np.arange(1024)[:, None] * 3 + np.arange(1024)[None, :]).astype("uint16")
    z = zarr.create_array(str(path), shape=(64, 1024, 1024), dtype="uint16", chunks=(1, 128, 256),
                          shards=(8, 512, 1024), compressors=GzipCodec(level=1))
    for t in range(0, 64, 8):
        z[t:t + 8] = np.broadcast_to(plane + t, (8, 1024, 1024))
    return str(path), plane


def _interrupt_during(read, delay):
    """Runs read() while another thread sends SIGINT after `delay` s.

    Returns the innermost traceback frame of the KeyboardInterrupt, or None if the read
    finished and the signal was handled elsewhere.
    """
    def killer():
        time.sleep(delay)
        os.kill(os.getpid(), signal.SIGINT)

    th = threading.Thread(target=killer)
    try:
        th.start()
        read()
        th.join()
        for _ in range(10000):  # let a pending handler run inside this try block
            pass
        time.sleep(0.05)
        return None
    except KeyboardInterrupt as exc:
        th.join()
        return traceback.extract_tb(exc.__traceback__)[-1]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("io", ["pread", "auto"])
def test_ctrl_c_interrupts_a_long_read(slow_store, threads, io):
    path, plane = slow_store
    arr = lsio.open(path, threads=threads, io=io)
    out = np.empty(arr.shape, arr.dtype)
    in_engine = 0
    for attempt in range(16):
        # The read takes ~50 ms here (libdeflate inflates this store fast): signals at 5-40 ms
        # into the call, so that one lands inside the engine whatever the machine's speed.
        frame = _interrupt_during(lambda: arr.read(..., out=out), delay=0.005 + 0.005 * (attempt % 8))
        if frame is not None and "read_into" in (frame.line or ""):
            in_engine += 1
            break
    assert in_engine == 1, "SIGINT never interrupted the engine call"
    # The Array stays usable and reads correctly after the interruption.
    got = arr[5:7, 100:300, 900:1024]
    # Frames t0..t0+7 of each block of 8 hold plane + t0 (see slow_store).
    assert np.array_equal(got, np.stack([plane[100:300, 900:1024]] * 2))
    assert np.array_equal(arr[60, 0:3, 0:3], plane[0:3, 0:3] + 56)


# --- Signal handlers that read through lsio, and interpreter exit during reads ----------------
#
# Both run in child processes: the failures they guard against are crashes (a handler run
# while the engine's per-thread buffers were live; std::terminate when Python ends a daemon
# thread that is inside a read), which would take the test runner down with them.

_CHILD_PRELUDE = """
import os, signal, sys, threading, time
import numpy as np
import lsio
path, io, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
plane = np.load(path + ".plane.npy")
"""


def _run_child(code, slow_store, io, threads, timeout=120):
    import subprocess
    import sys

    path, plane = slow_store
    np.save(path + ".plane.npy", plane)
    return subprocess.run([sys.executable, "-c", _CHILD_PRELUDE + code, path, io, str(threads)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def huge_chunk_store(tmp_path_factory):
    """One 16 MiB incompressible zstd chunk: reading any of it needs a 16 MiB read buffer,
    more than a worker keeps between calls, so every such read grows and then frees the
    calling thread's read arena."""
    path = tmp_path_factory.mktemp("interrupt") / "huge.zarr"
    data = np.random.default_rng(1).integers(0, 2**16, size=(8, 1024, 1024), dtype=np.uint16)
    z = zarr.create_array(str(path), shape=data.shape, dtype="uint16", chunks=data.shape,
                          compressors=ZstdCodec(level=1))
    z[...] = data
    np.save(str(path) + ".corner.npy", data[0:1, 0:4, 0:4])
    return str(path)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("io", ["pread", "uring", "auto"])
def test_signal_handler_that_reads_through_lsio_during_a_read(slow_store, huge_chunk_store, io, threads):
    # A SIGALRM handler reads through lsio every few milliseconds while the main thread
    # reads: the handler runs from the engine's interrupt poll, inside the outer read. Its
    # reads (one from the outer Array, one from a store whose 16 MiB chunk makes the thread's
    # read arena grow and be freed again) must neither disturb the outer read (before the
    # fix the poll ran inside the completion callback, with the outer batch still in the
    # arena and on the ring: use after free, and completions reaped by the wrong call) nor
    # return wrong data. The outer Array uses small reads so that batches hold many reads.
    if io == "uring":
        require_uring()
    code = f"""
a = lsio.open(path, io=io, threads=threads, max_request=16384, max_gap=0)
h = lsio.open({huge_chunk_store!r}, io=io, threads=threads)
corner = np.load({huge_chunk_store + ".corner.npy"!r})
runs = [0]
bad = []
busy = [False]
def handler(signum, frame):
    if busy[0]:  # the handler's own reads poll too: do not nest handlers
        return
    busy[0] = True
    runs[0] += 1
    if not np.array_equal(a[9, 10:40, 1000:1024], plane[10:40, 1000:1024] + 8):
        bad.append("a")
    if not np.array_equal(h[0:1, 0:4, 0:4], corner):
        bad.append("h")
    busy[0] = False
signal.signal(signal.SIGALRM, handler)
signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
deadline = time.monotonic() + 2
reads = 0
while time.monotonic() < deadline:
    got = a[16:18, 0:512, 0:1024]
    reads += 1
    if not np.array_equal(got, np.stack([plane[0:512]] * 2) + 16):
        bad.append("outer")
signal.setitimer(signal.ITIMER_REAL, 0, 0)
print(reads, runs[0], len(bad))
sys.exit(1 if bad else 0)
"""
    r = _run_child(code, slow_store, io, threads)
    assert r.returncode == 0, f"rc={r.returncode}\nstdout={r.stdout}\nstderr={r.stderr[-3000:]}"
    reads, runs, bad = (int(x) for x in r.stdout.split())
    assert reads > 0 and runs > 10 and bad == 0


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("io", ["pread", "auto"])
def test_interpreter_exit_while_a_daemon_thread_reads(slow_store, io, threads):
    # The main thread returns while a daemon thread is inside a long read: Python ends the
    # daemon thread when it next takes the GIL. The process must exit cleanly (rc 0), not
    # abort with "terminate called without an active exception" (rc 134).
    code = """
a = lsio.open(path, io=io, threads=threads)
started = threading.Event()
def reader():
    out = np.empty((8, 1024, 1024), np.uint16)
    while True:
        started.set()
        a.read((slice(0, 8),), out=out)
threading.Thread(target=reader, daemon=True).start()
started.wait()
time.sleep(float(os.environ.get("LSIO_TEST_DELAY", "0.05")))
print("exiting")
"""
    import os
    import subprocess
    import sys

    path, plane = slow_store
    np.save(path + ".plane.npy", plane)
    for delay in ("0.0", "0.02", "0.05", "0.11"):
        r = subprocess.run([sys.executable, "-c", _CHILD_PRELUDE + code, path, io, str(threads)],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "LSIO_TEST_DELAY": delay})
        assert r.returncode == 0 and "terminate" not in r.stderr, (
            f"delay {delay}: rc={r.returncode}\nstderr={r.stderr[-3000:]}")
        assert r.stdout.strip() == "exiting"


def test_ctrl_c_interrupts_planning_of_millions_of_crops(tmp_path):
    # Planning 4 million crops takes seconds before any byte is read: SIGINT must stop it
    # promptly (the planner polls between crops), not after the plan is built.
    path = tmp_path / "small.zarr"
    z = zarr.create_array(str(path), shape=(64, 64), dtype="uint8", chunks=(8, 8), shards=(32, 32))
    z[...] = 1
    arr = lsio.open(str(path), threads=1)
    starts = np.random.default_rng(0).integers(0, 64, size=(4_000_000, 2))
    t0 = time.perf_counter()
    arr.read_crops(starts[:400_000], (1, 1))
    per_crop = (time.perf_counter() - t0) / 400_000
    delay = 0.05
    got_at = []
    for _ in range(5):
        start = time.perf_counter()
        frame = _interrupt_during(lambda: arr.read_crops(starts, (1, 1)), delay=delay)
        if frame is not None:
            got_at.append(time.perf_counter() - start)
            break
    assert got_at, "SIGINT never interrupted read_crops"
    full = per_crop * len(starts)
    # Well before the whole call would have finished (it takes `full` seconds).
    assert got_at[0] < delay + max(0.5, full / 4), (got_at[0], full)


# --- Remote reads: Ctrl-C while the engine waits on the network ------------------------------


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("stage", ["index", "chunks"])
def test_ctrl_c_interrupts_a_remote_read_waiting_on_the_network(tmp_path, make_fault_server, threads, stage):
    """A server that stalls for 30 s (timeout 60 s): Ctrl-C must end the read within about a
    second, whether the engine waits on the shard index (resolving, on the calling thread)
    or on chunk data (workers), and the Array must read correctly afterwards."""
    path = tmp_path / "a.zarr"
    data = np.arange(64 * 64, dtype="uint16").reshape(64, 64)
    z = zarr.create_array(str(path), shape=data.shape, dtype="uint16", chunks=(8, 8), shards=(32, 32),
                          compressors=ZstdCodec())
    z[...] = data
    srv = make_fault_server(tmp_path)
    arr = lsio.open(srv.url("a.zarr"), threads=threads, storage_options={"timeout": 60, "retries": 0})
    if stage == "chunks":
        arr[0:1, 0:1]  # shard indexes of shard (0, 0) cached: the next read waits on chunks only
    srv.add_fault("stall", "*/c/0/0", seconds=30, times=1)
    t0 = time.monotonic()
    frame = _interrupt_during(lambda: arr[0:32, 0:32], delay=0.3)
    elapsed = time.monotonic() - t0
    assert frame is not None, "the read finished: the stall did not hold it"
    assert elapsed < 5, f"Ctrl-C took {elapsed:.1f} s to end a remote read"
    srv.clear_faults()
    assert np.array_equal(arr[...], data)
