"""lsio.read_ranges: byte ranges of files and objects into buffers in one call.

Every read is compared with the file's bytes (Python's own read of the same range). Covers
the three forms of ``out``, sources (one, one per range, pathlib, ``~``, ``file://``),
identical / overlapping / long / empty ranges, both local backends and 1 or several
threads, errors before anything is written, a forked child, and remote objects on the
loopback servers (moto S3, nginx, the fault server: no HEAD, If-Match on later requests).
"""

from __future__ import annotations

import errno
import os
import pathlib
import threading

import numpy as np
import pytest

import lsio
from conftest import require_uring


def make_file(path, size, seed):
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    pathlib.Path(path).write_bytes(data)
    return data


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ranges")
    out = {}
    for i, size in enumerate([0, 1, 4097, 300_000, 3_000_000]):
        p = d / f"f{i}.bin"
        out[str(p)] = make_file(p, size, i)
    return out


def random_ranges(rng, data, n):
    size = len(data)
    lens = np.where(rng.random(n) < 0.2, rng.integers(0, size // 2 + 1, n), rng.integers(0, 5000, n))
    lens = np.minimum(lens, size)
    offs = rng.integers(0, size - lens + 1)
    r = np.stack([offs, lens], axis=1)
    r[::7] = r[0]  # identical ranges
    return r


def expected(data, r):
    return [data[int(o):int(o) + int(n)] for o, n in r]


@pytest.mark.parametrize("io", ["pread", "uring"])
@pytest.mark.parametrize("threads", [1, 3])
def test_random_ranges_equal_the_file(files, io, threads):
    if io == "uring":
        require_uring()
    path = max(files, key=lambda p: len(files[p]))
    data = files[path]
    rng = np.random.default_rng(threads)
    r = random_ranges(rng, data, 300)
    got = lsio.read_ranges(path, r, threads=threads, io=io)
    assert len(got) == len(r)
    for g, want in zip(got, expected(data, r)):
        assert g.dtype == np.uint8 and g.ndim == 1
        assert g.tobytes() == want
    # small max_request: long ranges split across threads, still the same bytes
    got = lsio.read_ranges(path, r, threads=threads, io=io, max_request=4096, max_gap=0)
    assert [g.tobytes() for g in got] == expected(data, r)


def test_result_views_one_buffer(files):
    path = max(files, key=lambda p: len(files[p]))
    got = lsio.read_ranges(path, [[0, 10], [100, 20]])
    assert got[0].base is not None and np.shares_memory(got[0].base, got[1].base)


def test_one_source_per_range_and_path_spellings(files, tmp_path, monkeypatch):
    paths = sorted(files)
    srcs, ranges, want = [], [], []
    for i, p in enumerate(paths * 3):
        data = files[p]
        o = (i * 7919) % (len(data) + 1)
        n = min(len(data) - o, 1000)
        srcs.append(pathlib.Path(p) if i % 3 == 0 else ("file://" + p if i % 3 == 1 else p))
        ranges.append((o, n))
        want.append(data[o:o + n])
    got = lsio.read_ranges(srcs, ranges)
    assert [g.tobytes() for g in got] == want
    # ~ is expanded
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "h.bin").write_bytes(b"home!")
    assert lsio.read_ranges("~/h.bin", [[1, 3]])[0].tobytes() == b"ome"


def test_out_one_array_is_filled_in_order(files):
    path = max(files, key=lambda p: len(files[p]))
    data = files[path]
    r = np.array([[5, 10], [0, 3], [5, 10], [200_000, 0], [1000, 7]])
    out = np.full(30, 0xEE, dtype=np.uint8)
    got = lsio.read_ranges(path, r, out=out)
    assert out.tobytes() == b"".join(expected(data, r))
    assert all(np.shares_memory(g, out) for g in got if g.size)


def test_out_list_of_buffers_of_any_kind(files):
    path = max(files, key=lambda p: len(files[p]))
    data = files[path]
    f32 = np.zeros(4, dtype=np.float32)
    ba = bytearray(6)
    mv = memoryview(ba)
    i64 = np.zeros((2, 2), dtype=np.int64)
    r = [[0, 16], [16, 6], [100, 32]]
    got = lsio.read_ranges(path, r, out=[f32, mv, i64])
    assert f32.tobytes() == data[0:16]
    assert bytes(ba) == data[16:22]
    assert i64.tobytes() == data[100:132]
    assert np.shares_memory(got[0], f32) and np.shares_memory(got[2], i64)
    assert got[1].tobytes() == data[16:22]


def test_out_torch_tensor_numpy(files):
    torch = pytest.importorskip("torch")
    path = max(files, key=lambda p: len(files[p]))
    t = torch.empty(3, 5, dtype=torch.bfloat16)
    lsio.read_ranges(path, [[64, 30]], out=[t.view(torch.uint8).numpy()])
    assert t.view(torch.uint8).numpy().tobytes() == files[path][64:94]


def test_empty_inputs(files):
    path = max(files, key=lambda p: len(files[p]))
    assert lsio.read_ranges(path, np.zeros((0, 2), dtype=np.int64)) == []
    assert lsio.read_ranges(path, []) == []
    empty = [p for p in files if not files[p]][0]
    got = lsio.read_ranges(empty, [[0, 0]])
    assert got[0].size == 0


def test_a_range_past_the_end_fails_before_anything_is_written(files):
    path = [p for p in files if len(files[p]) == 4097][0]
    big = max(files, key=lambda p: len(files[p]))
    out = np.full(110, 0xEE, dtype=np.uint8)
    with pytest.raises(lsio.StorageError) as e:
        lsio.read_ranges([big, path], [[0, 100], [4090, 10]], out=out)
    msg = str(e.value)
    assert path in msg and "past the end" in msg and "4090" in msg
    assert isinstance(e.value, OSError)
    assert (out == 0xEE).all()
    # exactly to the end is fine
    assert lsio.read_ranges(path, [[4087, 10]])[0].tobytes() == files[path][4087:]


def test_missing_file_and_directory(files, tmp_path):
    path = max(files, key=lambda p: len(files[p]))
    out = np.full(20, 0xEE, dtype=np.uint8)
    with pytest.raises(lsio.StorageError) as e:
        lsio.read_ranges([path, str(tmp_path / "nope.bin")], [[0, 10], [0, 10]], out=out)
    assert "nope.bin" in str(e.value) and e.value.errno == errno.ENOENT
    assert (out == 0xEE).all()
    with pytest.raises(lsio.StorageError, match="found a directory"):
        lsio.read_ranges(str(tmp_path), [[0, 1]])


@pytest.mark.parametrize(
    "ranges, exc, match",
    [
        ([[0, -1]], ValueError, "negative"),
        ([[-5, 1]], ValueError, "negative"),
        ([[0, 1, 2]], ValueError, r"shape \(N, 2\)"),
        ([0, 1], ValueError, r"shape \(N, 2\)"),
        ([[0.5, 1]], TypeError, "integers"),
        ([[np.True_, np.False_]], TypeError, "integers"),
    ],
)
def test_bad_ranges(files, ranges, exc, match):
    path = max(files, key=lambda p: len(files[p]))
    with pytest.raises(exc, match=match):
        lsio.read_ranges(path, ranges)


def test_bad_out(files):
    path = max(files, key=lambda p: len(files[p]))
    r = [[0, 8], [8, 8]]
    with pytest.raises(ValueError, match="16"):
        lsio.read_ranges(path, r, out=np.zeros(15, np.uint8))
    with pytest.raises(TypeError, match="uint8"):
        lsio.read_ranges(path, r, out=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="2 buffers for 2|buffers"):
        lsio.read_ranges(path, r, out=[np.zeros(8, np.uint8)])
    with pytest.raises(ValueError, match="has 4 bytes, range 1 has 8"):
        lsio.read_ranges(path, r, out=[np.zeros(8, np.uint8), np.zeros(4, np.uint8)])
    ro = np.zeros(8, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        lsio.read_ranges(path, r, out=[np.zeros(8, np.uint8), ro])
    with pytest.raises(ValueError, match="read-only"):
        lsio.read_ranges(path, r, out=[np.zeros(8, np.uint8), b"12345678"])
    with pytest.raises(ValueError, match="C-contiguous"):
        lsio.read_ranges(path, r, out=[np.zeros(8, np.uint8), np.zeros(16, np.uint8)[::2]])
    shared = np.zeros(8, np.uint8)
    with pytest.raises(ValueError, match="overlap"):
        lsio.read_ranges(path, r, out=[shared, shared])
    with pytest.raises(ValueError, match="overlap"):
        base = np.zeros(12, np.uint8)
        lsio.read_ranges(path, r, out=[base[:8], base[4:]])
    with pytest.raises(TypeError, match="out must be"):
        lsio.read_ranges(path, r, out="nope")


def test_bad_sources_and_options(files):
    path = max(files, key=lambda p: len(files[p]))
    with pytest.raises(ValueError, match="3 sources for 2 ranges"):
        lsio.read_ranges([path] * 3, [[0, 1], [1, 1]])
    with pytest.raises(TypeError, match="path or URL"):
        lsio.read_ranges([path, 5], [[0, 1], [1, 1]])
    with pytest.raises(ValueError, match="storage_options"):
        lsio.read_ranges(path, [[0, 1]], storage_options={"anon": True})
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        lsio.read_ranges("ftp://x/y", [[0, 1]])
    with pytest.raises(ValueError, match="threads"):
        lsio.read_ranges(path, [[0, 1]], threads=-1)
    with pytest.raises(ValueError, match="io must be"):
        lsio.read_ranges(path, [[0, 1]], io="mmap")


def test_many_small_ranges_of_many_files(tmp_path):
    # More files than one call may hold open is covered in C++ (waves); here: a record-file
    # style read of 2,000 ranges over 50 files, with the destinations in one array.
    datas = [make_file(tmp_path / f"r{i}", 20_000, 100 + i) for i in range(50)]
    rng = np.random.default_rng(7)
    srcs, r = [], []
    for _ in range(2000):
        i = int(rng.integers(50))
        o = int(rng.integers(0, 19_000))
        srcs.append(str(tmp_path / f"r{i}"))
        r.append((o, int(rng.integers(0, 1000))))
    got = lsio.read_ranges(srcs, r, threads=2)
    for g, s, (o, n) in zip(got, srcs, r):
        assert g.tobytes() == datas[int(s.rsplit("r", 1)[1])][o:o + n]


def test_stats_and_max_gap(files, monkeypatch):
    """stats counts what the engine read; max_gap=0 merges only touching ranges, None is the
    store's 16 KiB (or LSIO_MERGE_GAP)."""
    path = [p for p, d in files.items() if len(d) == 3_000_000][0]
    data = files[path]
    r = [(i * 4096, 1024) for i in range(100)] + [(900_000, 10), (900_010, 10), (0, 1024)]
    cases = {0: (101, 100 * 1024 + 20), None: (2, 99 * 4096 + 1024 + 20), 3072: (2, 99 * 4096 + 1024 + 20),
             3071: (101, 100 * 1024 + 20)}
    for gap, (requests, nbytes) in cases.items():
        stats = {"requests": 5}
        got = lsio.read_ranges(path, r, max_gap=gap, max_request=1 << 20, stats=stats)
        assert stats == {"requests": 5 + requests, "bytes_read": nbytes, "ranges": len(r)}, gap
        assert [g.tobytes() for g in got] == expected(data, r)
    monkeypatch.setenv("LSIO_MERGE_GAP", "0")
    stats = {}
    lsio.read_ranges(path, r, max_request=1 << 20, stats=stats)
    assert stats["requests"] == 101


def test_threads_1_starts_no_thread_and_a_forked_child_reads(files):
    path = max(files, key=lambda p: len(files[p]))
    data = files[path]
    before = len(os.listdir("/proc/self/task"))
    assert lsio.read_ranges(path, [[0, 100]], threads=1)[0].tobytes() == data[:100]
    if before == 1:
        assert len(os.listdir("/proc/self/task")) == 1
    lsio.read_ranges(path, [[0, len(data)]], threads=3, max_request=65536)  # the pool exists now
    pid = os.fork()
    if pid == 0:  # the child reads with its own pool, descriptors and rings
        ok = lsio.read_ranges(path, [[0, len(data)]], threads=3, max_request=65536)[0].tobytes() == data
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def test_concurrent_calls_from_python_threads(files):
    path = max(files, key=lambda p: len(files[p]))
    data = files[path]
    errors = []

    def work(seed):
        try:
            r = random_ranges(np.random.default_rng(seed), data, 100)
            got = lsio.read_ranges(path, r, threads=2)
            assert [g.tobytes() for g in got] == expected(data, r)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# --------------------------------------------------------------------------------------
# Remote objects


def test_s3_ranges_and_errors(moto_s3, tmp_path):
    bucket = moto_s3.create_bucket("lsio-ranges")
    a = np.random.default_rng(1).integers(0, 256, 200_000, dtype=np.uint8).tobytes()
    b = np.random.default_rng(2).integers(0, 256, 5_000, dtype=np.uint8).tobytes()
    moto_s3.put(bucket, "ckpt/a.bin", a)
    moto_s3.put(bucket, "ckpt/b.bin", b)
    so = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
          "secret": moto_s3.secret_access_key, "region": moto_s3.region}
    ua, ub = f"s3://{bucket}/ckpt/a.bin", f"s3://{bucket}/ckpt/b.bin"
    r = [[0, 200_000], [10, 100], [4990, 10], [150_000, 3]]
    got = lsio.read_ranges([ua, ub, ub, ua], r, storage_options=so, max_request=65536)
    assert [g.tobytes() for g in got] == [a, b[10:110], b[4990:], a[150_000:150_003]]
    out = np.full(20, 0xEE, dtype=np.uint8)
    with pytest.raises(lsio.StorageError) as e:
        lsio.read_ranges([ua, ub], [[0, 10], [4995, 10]], out=out, storage_options=so)
    assert "b.bin" in str(e.value) and "past the end" in str(e.value)
    assert (out == 0xEE).all()
    with pytest.raises(lsio.StorageError) as e:
        lsio.read_ranges([ua, f"s3://{bucket}/ckpt/nope.bin"], [[0, 10], [0, 10]], out=out, storage_options=so)
    assert "nope.bin" in str(e.value)
    assert (out == 0xEE).all()
    with pytest.raises(ValueError, match="names no object"):
        lsio.read_ranges(f"s3://{bucket}", [[0, 1]], storage_options=so)


def test_http_ranges_no_head_and_later_requests_pinned(fault_server):
    data = make_file(pathlib.Path(fault_server.root) / "w.bin", 1_000_000, 5)
    url = fault_server.url("w.bin")
    r = [[0, 1_000_000], [17, 5]]
    got = lsio.read_ranges(url, r, max_request=1 << 18)
    assert [g.tobytes() for g in got] == expected(data, r)
    seen = [q for q in fault_server.requests if q.path.endswith("/w.bin")]
    assert seen and all(q.method == "GET" for q in seen)
    # the first request sizes the object; the others carry If-Match with its ETag
    assert sum(1 for q in seen if q.headers.get("if-match")) == len(seen) - 1


def test_a_call_over_a_remote_and_a_local_store_checks_both_before_writing(fault_server, tmp_path):
    # The remote object is sized by reading its first range; those bytes must wait until the
    # local file's ranges are checked too, or a failing call would have written the buffer.
    data = make_file(pathlib.Path(fault_server.root) / "m.bin", 1000, 6)
    local = make_file(tmp_path / "short.bin", 10, 7)
    out = np.full(8, 0xAA, np.uint8)
    for second, rng in ((tmp_path / "missing.bin", [0, 4]), (tmp_path / "short.bin", [8, 4])):  # past the end
        with pytest.raises(lsio.StorageError):
            lsio.read_ranges([fault_server.url("m.bin"), str(second)], [[0, 4], rng], out=out)
        assert (out == 0xAA).all(), out
    got = lsio.read_ranges([fault_server.url("m.bin"), str(tmp_path / "short.bin")], [[0, 4], [6, 4]])
    assert [g.tobytes() for g in got] == [data[:4], local[6:]]


def test_nginx_ranges(nginx_server, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    data = make_file(root / "m.bin", 123_457, 9)
    server = nginx_server(root)
    r = random_ranges(np.random.default_rng(3), data, 50)
    got = lsio.read_ranges(server.url("m.bin"), r)
    assert [g.tobytes() for g in got] == expected(data, r)


@pytest.mark.parametrize("suffix", ["?versionId=OLD", "?x=a/b", "#frag"])
def test_query_strings_and_fragments_are_refused_as_lsio_open_refuses_them(fault_server, suffix):
    """A query string was cut off before: ``?versionId=OLD`` read the current object. It is
    refused with lsio.open's words, before any request."""
    make_file(pathlib.Path(fault_server.root) / "obj.bin", 1000, 2)
    for url in (fault_server.url("obj.bin") + suffix, "s3://bucket/dir/obj.bin" + suffix,
                "gs://bucket/obj.bin" + suffix):
        with pytest.raises(ValueError) as opened:
            lsio.open(url)
        with pytest.raises(ValueError) as ranged:
            lsio.read_ranges(url, [[0, 10]])
        assert str(ranged.value) == str(opened.value)
        assert ("query string" if "?" in suffix else "fragment") in str(ranged.value)
        with pytest.raises(ValueError):
            lsio.read_ranges([fault_server.url("obj.bin"), url], [[0, 10], [0, 10]])
    assert fault_server.requests == []


def test_a_max_request_that_would_split_into_millions_of_requests_is_refused(tmp_path):
    # max_request=1 over 8 MiB was 8 million planned requests (a billion for 1 GiB): refused
    # before planning; a split into fewer still reads.
    data = make_file(tmp_path / "big.bin", 8 << 20, 3)
    with pytest.raises(ValueError, match="use a larger max_request"):
        lsio.read_ranges(str(tmp_path / "big.bin"), [[0, 8 << 20]], max_request=1)
    got = lsio.read_ranges(str(tmp_path / "big.bin"), [[5, 1 << 20]], max_request=1 << 10)
    assert got[0].tobytes() == data[5:5 + (1 << 20)]
