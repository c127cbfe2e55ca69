"""lsio.records (zrecord stores): random workloads against a Python model, concurrent readers
and writers in other processes, writers killed with SIGKILL, corrupt files, S3 via moto, and
the loaders (torch DataLoader workers, Grain)."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lsio
import lsio.records as R
from page_cache import drop_page_cache

DTYPES = [bytes, np.float32, np.dtype(">i2"), np.uint8, np.complex64, np.dtype([("a", "<i4"), ("b", "<f8")])]
COMPRESSIONS = [None, "zstd", "deflate"]


def make_record(rng, dtype, n=None):
    n = int(rng.integers(0, 40)) if n is None else n
    if dtype is bytes:
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()
    dt = np.dtype(dtype)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8)
    if dt.fields is None and dt.kind in "fc":
        # Compressible floats: repeated values, still every bit pattern kind.
        return (np.round(rng.random(n) * 8) / 8).astype(dt)
    return raw.view(dt).copy()


def same(a, b):
    if isinstance(a, bytes) or isinstance(b, bytes):
        return bytes(a) == bytes(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check(r, model, rng, views):
    assert len(r) == len(model)
    n = len(model)
    if n == 0:
        assert len(r.take([])) == 0
        return
    idx = rng.integers(-n, n, int(rng.integers(1, 30)))
    batch = r.take(idx)
    assert len(batch) == len(idx)
    for got, i in zip(batch, idx):
        assert same(got, model[i]), int(i)
    if views:
        for got, i in zip(r.take(idx, copy=False), idx):
            assert same(got, model[i])
    i = int(rng.integers(0, n))
    assert same(r[i], model[i])


@pytest.mark.parametrize("compression", COMPRESSIONS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: "bytes" if d is bytes else str(np.dtype(d)))
def test_random_workload_matches_model(tmp_path, dtype, compression):
    rng = np.random.default_rng([len(str(dtype)), COMPRESSIONS.index(compression)])
    path = tmp_path / "store"
    writers = int(rng.integers(1, 4))
    r = R.create(path, dtype, compression=compression, chunk_records=int(rng.integers(1, 9)), writers=writers)
    model: list = []
    views = compression is None
    for step in range(40):
        op = rng.choice(["append", "append", "modify", "delete", "rebalance", "reopen"])
        if op == "append":
            recs = [make_record(rng, dtype) for _ in range(int(rng.integers(0, 12)))]
            ids = r.append(recs)
            assert list(ids) == list(range(len(model), len(model) + len(recs)))
            model += recs
        elif op == "modify" and model:
            ids = rng.choice(len(model), size=min(len(model), int(rng.integers(1, 4))), replace=False)
            recs = [make_record(rng, dtype) for _ in ids]
            if len(ids) == 1 and rng.random() < 0.5:
                r[int(ids[0])] = recs[0]
            else:
                r[ids] = recs
            for i, rec in zip(ids, recs):
                model[int(i)] = rec
        elif op == "delete" and model:
            ids = rng.choice(len(model), size=min(len(model), int(rng.integers(1, 3))), replace=False)
            if len(ids) == 1:
                del r[int(ids[0])]
            else:
                del r[ids]
            for i in sorted((int(x) for x in ids), reverse=True):
                last = model.pop()
                if i < len(model):
                    model[i] = last
        elif op == "rebalance":
            u = r.rebalance()
            assert u["utilization_after"] == pytest.approx(1.0)
            assert u["utilization_before"] <= 1.0
        elif op == "reopen":
            r.close()
            r = R.open(path, "a")
        check(r, model, rng, views)
        reader = R.open(path)
        check(reader, model, rng, views)
        reader.close()
    assert [bytes(x) if isinstance(x, bytes) else x.tobytes() for x in r] == \
           [bytes(x) if isinstance(x, bytes) else x.tobytes() for x in model]
    r.close()


def test_batch_forms(tmp_path):
    r = R.create(tmp_path / "s", np.int32, chunk_records=3)
    recs = [np.arange(n, dtype=np.int32) + 10 * n for n in (3, 0, 5, 1)]
    r.append(recs)
    b = r.take([2, 1, 0, 3])
    assert b.lengths.tolist() == [5, 0, 3, 1]
    assert b.offsets.tolist() == [0, 5, 5, 8, 9]
    assert b.values.tolist() == recs[2].tolist() + recs[0].tolist() + recs[3].tolist()
    padded, lengths = b.to_padded(pad_value=-1)
    assert padded.shape == (4, 5) and lengths.tolist() == [5, 0, 3, 1]
    assert padded[1].tolist() == [-1] * 5 and padded[2].tolist() == recs[0].tolist() + [-1, -1]
    cut, _ = b.to_padded(length=2)
    assert cut[0].tolist() == recs[2][:2].tolist()
    v = r.take([2, 0], copy=False)
    assert not v.arrays()[0].flags.writeable  # a view of the read-only mapping
    assert v.values.tolist() == recs[2].tolist() + recs[0].tolist()
    v.release()
    with pytest.raises(ValueError):
        v.values
    assert r.take(slice(1, 3)).lengths.tolist() == [0, 5]
    assert r.take(np.array([True, False, False, True])).lengths.tolist() == [3, 1]
    torch = pytest.importorskip("torch")
    p, ln = b.to_torch("padded")
    assert p.shape == (4, 5) and ln.tolist() == [5, 0, 3, 1]
    vals, offs = b.to_torch("flat")
    assert vals.tolist() == b.values.tolist() and offs.tolist() == b.offsets.tolist()
    nt = b.to_torch("nested")
    assert [t.tolist() for t in nt.unbind()] == [x.tolist() for x in b]
    assert isinstance(nt, torch.Tensor)


def test_bytes_store_and_empty_records(tmp_path):
    for comp in COMPRESSIONS:
        r = R.create(tmp_path / f"b{comp}", bytes, compression=comp)
        r.append([b"", b"abc", b"", bytes(range(256)) * 3])
        assert r[0] == b"" and r[1] == b"abc" and r[3] == bytes(range(256)) * 3
        assert r.take([2, 0]).tolist() == [b"", b""]
        entries = np.fromfile(tmp_path / f"b{comp}" / "offset", dtype=np.uint8)[:64].reshape(4, 16)
        chunk0 = entries[0, :4].view("<u4")[0]
        # An uncompressed empty record is the marked empty entry; a compressed one stores its frame.
        assert (chunk0 == R.EMPTY_CHUNK) == (comp is None)
        r.close()


def test_errors_for_misuse(tmp_path):
    r = R.create(tmp_path / "s", np.float32)
    r.append([np.ones(3, np.float32)])
    with pytest.raises(lsio.BoundsError):
        r[1]
    with pytest.raises(lsio.BoundsError):
        r.take([0, -2])
    with pytest.raises(TypeError, match="sequence of records"):
        r.append(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="1-D"):
        r.append([np.ones((2, 2), np.float32)])
    with pytest.raises(TypeError, match="cannot store"):
        r.append([np.array([1 + 2j])])
    with pytest.raises(BlockingIOError, match="another writer"):
        R.open(tmp_path / "s", "a")
    ro = R.open(tmp_path / "s")
    with pytest.raises(PermissionError, match="read-only"):
        ro.append([np.ones(1, np.float32)])
    with pytest.raises(BlockingIOError):   # creating over a store a writer holds
        R.create(tmp_path / "s", np.float32)
    with pytest.raises(ValueError, match="level"):
        R.create(tmp_path / "t", bytes, compression="zstd", level=99)
    with pytest.raises(ValueError, match="compression"):
        R.create(tmp_path / "t", bytes, compression="lz4")
    with pytest.raises(ValueError, match="writers"):
        R.create(tmp_path / "t", bytes, writers=5)
    with pytest.raises(TypeError, match="fixed-size"):
        R.create(tmp_path / "t", object)
    with pytest.raises(lsio.NotFoundError, match="meta.json"):
        R.open(tmp_path / "nothing")
    z = R.create(tmp_path / "z", bytes, compression="zstd")
    z.append([b"x"])
    with pytest.raises(ValueError, match="copy=False"):
        z.take([0], copy=False)
    r.close()
    with pytest.raises(ValueError, match="closed"):
        r.take([0])
    # The lock went with close: a new writer may open.
    R.open(tmp_path / "s", "a").close()
    with pytest.raises(FileExistsError):
        R.create(tmp_path / "s", np.float32)
    R.create(tmp_path / "s", np.float32, exist_ok=True).close()


def corrupt_store(tmp_path, comp, n=6):
    path = tmp_path / f"c{comp}"
    r = R.create(path, bytes, compression=comp, chunk_records=4)
    r.append([bytes([i]) * (100 + i) for i in range(n)])
    r.close()
    return path


def entry(path, i):
    raw = (path / "offset").read_bytes()[16 * i:16 * i + 16]
    return (int(np.frombuffer(raw[:4], "<u4")[0]), int(np.frombuffer(raw[4:12], "<u8")[0]),
            int(np.frombuffer(raw[12:], "<u4")[0]))


def set_entry(path, i, chunk, offset, length):
    with open(path / "offset", "r+b") as f:
        f.seek(16 * i)
        f.write(np.array([chunk], "<u4").tobytes() + np.array([offset], "<u8").tobytes()
                + np.array([length], "<u4").tobytes())


@pytest.mark.parametrize("comp", COMPRESSIONS)
def test_corrupt_files_raise_typed_errors(tmp_path, comp):
    path = corrupt_store(tmp_path, comp)
    c, o, n = entry(path, 5)
    # A flipped byte inside a compressed record's frame (or, uncompressed, data as stored).
    data = bytearray((path / "chunk" / f"{c}.zr").read_bytes())
    data[o + n - 2] ^= 0xFF
    (path / "chunk" / f"{c}.zr").write_bytes(bytes(data))
    r = R.open(path)
    if comp is None:
        assert r[5] != bytes([5]) * 105  # nothing checks raw bytes: the flip is what is stored
    else:
        with pytest.raises(lsio.CorruptDataError, match=r"record 5 \(chunk 1, bytes \[") as e:
            r.take([0, 5])
        assert e.value.path.endswith(f"{c}.zr") and e.value.byte_range == (o, o + n)
    # A hole (zeroed entry), an entry past the chunk file, a chunk that does not exist.
    set_entry(path, 1, 0, 0, 0)
    with pytest.raises(lsio.CorruptDataError, match="record 1 .*no record"):
        R.open(path).take([1])
    set_entry(path, 2, 0, 10 ** 6, 50)
    with pytest.raises(lsio.CorruptDataError, match="past the end"):
        R.open(path).take([2])
    set_entry(path, 3, 77, 0, 50)
    with pytest.raises(lsio.CorruptDataError, match="record 3 .*chunk past"):
        R.open(path).take([3])
    if comp is not None:
        # A length prefix that claims gigabytes is refused before anything is allocated.
        c, o, n = entry(path, 0)
        data = bytearray((path / "chunk" / f"{c}.zr").read_bytes())
        data[o:o + 4] = np.array([2 ** 32 - 1], "<u4").tobytes()
        (path / "chunk" / f"{c}.zr").write_bytes(bytes(data))
        with pytest.raises(lsio.CorruptDataError, match="record 0 .*prefix"):
            R.open(path).take([0])


@pytest.mark.parametrize("comp", ["zstd", "deflate"])
@pytest.mark.parametrize("io", ["auto", "pread", "uring"])
def test_compressed_takes_cold_and_hot_with_every_io(tmp_path, comp, io):
    """A compressed gather decodes a payload as soon as its read lands when the device
    delivered it (io="auto" on io_uring after a page-cache miss: its cold rounds, where the
    file system drops pages and answers RWF_NOWAIT) and straight into the result after the
    reads otherwise (page-cache hits; pread and io="uring", which cannot tell a miss): both
    give the records written, and a corrupt payload is named by its record either way."""
    if io == "uring" and not lsio.io_backend_info()["uring_available"]:
        pytest.skip("io_uring unavailable: " + lsio.io_backend_info()["reason"])
    rng = np.random.default_rng(11)
    model = [make_record(rng, np.int32, int(rng.integers(0, 1500))) for _ in range(500)]
    model[17] = np.empty(0, np.int32)
    path = tmp_path / "s"
    w = R.create(path, np.int32, compression=comp, chunk_records=64)
    w.append(model)
    w.close()
    for threads in (1, 2):
        r = R.open(path, io=io, threads=threads)
        for cold in (True, False, True):
            if cold:
                drop_page_cache(path)
            idx = np.concatenate([rng.integers(0, len(model), 300), [17, 3, 3]])
            batch = r.take(idx)
            assert batch.offsets[-1] == sum(model[i].size for i in idx)
            for got, i in zip(batch, idx):
                assert same(got, model[i]), (threads, cold, int(i))
    c, o, n = entry(path, 123)
    with open(path / "chunk" / f"{c}.zr", "r+b") as f:
        f.seek(o + n // 2)
        b = f.read(1)
        f.seek(o + n // 2)
        f.write(bytes([b[0] ^ 0x5A]))
    r = R.open(path, io=io, threads=2)
    for cold in (True, False):
        if cold:
            drop_page_cache(path)
        with pytest.raises(lsio.CorruptDataError, match=r"record 123 \(chunk ") as e:
            r.take(np.concatenate([np.arange(100, 200), [123], np.arange(300, 400)]))
        assert e.value.path.endswith(f"{c}.zr") and e.value.byte_range == (o, o + n)
        assert same(r.take([122, 124])[1], model[124])


def test_gathered_records_place_checks_its_arguments(tmp_path):
    """The binding under compressed takes: place() refuses offsets of the wrong length, places
    outside `out`, overlapping places and an `out` over the payload buffer (decoding there
    would overwrite payloads not yet decoded); the payload buffer cannot be resized while the
    gathered records hold it."""
    from lsio import _core

    path = tmp_path / "s"
    w = R.create(path, bytes, compression="zstd", chunk_records=8)
    w.append([bytes([i]) * (300 + i) for i in range(5)])
    w.close()
    offs = [entry(path, i) for i in range(5)]
    lengths = np.array([n for _, _, n in offs], np.uint64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    buf = bytearray(int(lengths.sum()))
    g, failed, msg = _core.records_gather(1, [str(path / "chunk" / "0.zr")], np.zeros(5, np.uint32),
                                          np.array([o for _, o, _ in offs], np.uint64), lengths, buf, starts)
    assert failed == -1, msg
    sizes = g.sizes()
    assert sizes.tolist() == [300 + i for i in range(5)]
    with pytest.raises(BufferError):
        buf.extend(b"x")  # still exported: the records point into it
    places = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
    out = np.zeros(int(sizes.sum()), np.uint8)
    with pytest.raises(ValueError, match="offsets has 4 entries"):
        g.place(out, places[:4])
    with pytest.raises(ValueError, match="outside out"):
        g.place(out[:-1], places)
    with pytest.raises(ValueError, match="overlap"):
        g.place(out, np.zeros(5, np.uint64))
    with pytest.raises(ValueError, match="payloads were read into"):
        g.place(np.frombuffer(buf, np.uint8), np.zeros(5, np.uint64))
    assert g.place(out, places) == (-1, "")
    assert out.tobytes() == b"".join(bytes([i]) * (300 + i) for i in range(5))
    del g
    buf.extend(b"x")  # released with the gathered records


def test_malformed_meta(tmp_path):
    path = corrupt_store(tmp_path, None)
    meta = json.loads((path / "meta.json").read_text())
    for change, match in [({"format": "zarr"}, "format"), ({"version": 9}, "version"),
                          ({"length": -1}, "length"), ({"compression": "lz4"}, "compression"),
                          ({"dtype": "object"}, "dtype"), ({"dtype": None}, "dtype"), ({"chunk_dir": "../x"}, "chunk_dir"),
                          ({"open_chunks": [{"id": 99, "write_pos": 0, "records": 0}]}, "open chunk")]:
        (path / "meta.json").write_text(json.dumps({**meta, **change}))
        with pytest.raises(lsio.FormatError, match=match):
            R.open(path)
    (path / "meta.json").write_text("{not json")
    with pytest.raises(lsio.FormatError, match="not JSON"):
        R.open(path)
    (path / "meta.json").write_text(json.dumps({**meta, "length": 2 * 10 ** 6}))
    with pytest.raises(lsio.CorruptDataError, match="offset table has"):
        R.open(path).take([1_999_999])


# ---- other processes ----------------------------------------------------------------------

def rec_for(i, version=0):
    """Record i's deterministic content (version: which modify wrote it)."""
    n = (i * 7919 + version * 13) % 300
    return (np.arange(n, dtype=np.int64) * (i + 1) + version).astype(np.int32)


def writer_loop(path, start, stop, batch, durable):
    r = R.open(path, "a", durable=durable)
    for a in range(start, stop, batch):
        r.append([rec_for(i) for i in range(a, min(stop, a + batch))])
    r.close()


def reader_loop(path, seconds, q):
    r = R.open(path)
    rng = np.random.default_rng(os.getpid())
    seen = checks = 0
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            r.refresh()
            n = len(r)
            assert n >= seen, (n, seen)  # the published length never goes back
            seen = n
            if n:
                idx = rng.integers(0, n, 64)
                for got, i in zip(r.take(idx), idx):
                    assert np.array_equal(got, rec_for(int(i))), int(i)
                checks += 64
        q.put(("ok", seen, checks))
    except BaseException as e:  # noqa: BLE001 - reported to the test
        q.put(("error", repr(e), checks))


@pytest.mark.parametrize("comp", [None, "zstd"])
def test_concurrent_writer_and_readers(tmp_path, comp):
    path = tmp_path / "s"
    R.create(path, np.int32, compression=comp, chunk_records=50, writers=2).close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    readers = [ctx.Process(target=reader_loop, args=(str(path), 4.0, q)) for _ in range(2)]
    for p in readers:
        p.start()
    w = ctx.Process(target=writer_loop, args=(str(path), 0, 3000, 37, True))
    w.start()
    w.join(60)
    assert w.exitcode == 0
    results = [q.get(timeout=60) for _ in readers]
    for p in readers:
        p.join(30)
    for status, seen, checks in results:
        assert status == "ok", seen
        assert checks > 0
    assert len(R.open(path)) == 3000


def modifier_loop(path, rounds):
    r = R.open(path, "a")
    for v in range(1, rounds + 1):
        ids = np.arange(0, len(r), 3)
        r[ids] = [rec_for(int(i), v % 2) for i in ids]
    r.close()


def flip_reader(path, seconds, q):
    r = R.open(path)
    end = time.monotonic() + seconds
    reads = 0
    try:
        while time.monotonic() < end:
            idx = np.arange(0, len(r), 3)
            for got, i in zip(r.take(idx), idx):
                # Every read is one version or the other, never a mix of two entries.
                assert np.array_equal(got, rec_for(int(i), 0)) or np.array_equal(got, rec_for(int(i), 1)), int(i)
            reads += len(idx)
        q.put(("ok", reads))
    except BaseException as e:  # noqa: BLE001
        q.put(("error", repr(e)))


def test_reader_sees_old_or_new_version_during_modifies(tmp_path):
    path = tmp_path / "s"
    r = R.create(path, np.int32, chunk_records=64)
    r.append([rec_for(i) for i in range(300)])
    r.close()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    rd = ctx.Process(target=flip_reader, args=(str(path), 3.0, q))
    rd.start()
    w = ctx.Process(target=modifier_loop, args=(str(path), 40))
    w.start()
    w.join(60)
    assert w.exitcode == 0
    status, *rest = q.get(timeout=60)
    rd.join(30)
    assert status == "ok", rest
    assert R.open(path).utilization < 0.2  # 40 versions of a third of the records


KILL_CHILD = r"""
import sys, numpy as np
sys.path[:0] = {paths!r}
import lsio.records as R
from test_records import rec_for
r = R.open({path!r}, "a")
i = len(r)
while True:
    k = int(np.random.default_rng(i).integers(1, 40))
    if i % 5 == 3 and len(r) > 10:
        ids = np.arange(0, 10)
        r[ids] = [rec_for(int(j)) for j in ids]          # same content, new versions
    r.append([rec_for(j) for j in range(i, i + k)])
    i += k
    print(i, flush=True)
"""


def test_writer_killed_at_random_points_loses_only_unpublished(tmp_path):
    path = tmp_path / "s"
    R.create(path, np.int32, compression="zstd", chunk_records=30, writers=3).close()
    rng = np.random.default_rng(5)
    code = KILL_CHILD.format(paths=sys.path, path=str(path))
    published = 0
    for round_ in range(6):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        first = p.stdout.readline()  # running (and past its first publication)
        assert first, "writer did not start"
        time.sleep(float(rng.uniform(0.0, 0.3)))
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        p.stdout.close()
        r = R.open(path, "a")   # recovery: drops the dead writer's unpublished bytes
        n = len(r)
        assert n >= published
        published = n
        got = r.take(np.arange(n))
        for i, rec in enumerate(got):
            assert np.array_equal(rec, rec_for(i)), (round_, i)
        r.append([rec_for(j) for j in range(n, n + 3)])   # and it appends on cleanly
        published += 3
        r.close()
    assert published > 20


def test_fork_and_pickle(tmp_path):
    path = tmp_path / "s"
    r = R.create(path, np.float64, compression="deflate", chunk_records=10)
    r.append([np.full(i % 5, i, np.float64) for i in range(50)])
    ro = pickle.loads(pickle.dumps(r))  # a writer pickles as a read-only handle
    assert ro._mode == "r" and len(ro) == 50
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            assert np.array_equal(r[7], np.full(2, 7.0))
            try:
                r.append([np.ones(1)])
                code = 3
            except RuntimeError:
                pass
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    r.close()


def dataset_check(path, method):
    torch = pytest.importorskip("torch")
    ds = R.open(path)
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2, collate_fn=R.collate,
                                     multiprocessing_context=method, shuffle=False)
    seen = 0
    for padded, lengths in dl:
        for row, ln in zip(padded, lengths):
            want = rec_for(seen)
            assert int(ln) == len(want) and row[:int(ln)].numpy().tolist() == want.tolist()
            seen += 1
    assert seen == len(ds)


@pytest.mark.parametrize("method", ["fork", "forkserver", "spawn"])
def test_torch_dataloader_workers(tmp_path, method):
    path = tmp_path / "s"
    r = R.create(path, np.int32, compression="zstd", chunk_records=16)
    r.append([rec_for(i) for i in range(40)])
    r.take(np.arange(40))  # the parent has read (and decoded) before the workers fork
    dataset_check(path, method)


def test_grain_random_access_source(tmp_path):
    grain = pytest.importorskip("grain")
    path = tmp_path / "s"
    r = R.create(path, bytes)
    r.append([f"record {i}".encode() for i in range(20)])
    ds = grain.MapDataset.source(R.open(path)).shuffle(seed=3).batch(4, batch_fn=lambda xs: sorted(xs))
    got = sorted(x for b in ds for x in b)
    assert got == sorted(f"record {i}".encode() for i in range(20))


def test_s3_read_only(moto_s3, tmp_path, monkeypatch):
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    options = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
               "secret": moto_s3.secret_access_key, "region": moto_s3.region,
               "timeout": 5, "connect_timeout": 2, "retries": 1}
    rng = np.random.default_rng(0)
    for comp in COMPRESSIONS:
        local = tmp_path / f"s{comp}"
        r = R.create(local, np.uint16, compression=comp, chunk_records=7)
        recs = [make_record(rng, np.uint16) for _ in range(60)]
        r.append(recs)
        del r[3]
        recs[3] = recs.pop()
        r.close()
        moto_s3.upload_dir(local, "lsio-records", f"s{comp}")
        s = R.open(f"s3://lsio-records/s{comp}", storage_options=options)
        assert len(s) == 59
        idx = rng.integers(0, 59, 40)
        for got, i in zip(s.take(idx), idx):
            assert same(got, recs[i])
        assert same(s[-1], recs[-1])
        with pytest.raises(ValueError, match="read-only"):
            R.open(f"s3://lsio-records/s{comp}", "a", storage_options=options)
        with pytest.raises(ValueError, match="copy=False"):
            s.take([0], copy=False)
    moto_s3.delete("lsio-records", "sNone/chunk/2.zr")
    with pytest.raises(lsio.NotFoundError):
        R.open("s3://lsio-records/sNone", storage_options=options).take(np.arange(59))


def test_random_corruption_raises_or_reads_never_crashes(tmp_path):
    """Random byte flips, truncations and extensions of meta.json, the offset table and the
    chunk files: every open and take either succeeds or raises an lsio error (or, for
    meta.json that stops being JSON, FormatError); nothing crashes or hangs."""
    rng = np.random.default_rng(99)
    for comp in COMPRESSIONS:
        src = tmp_path / f"src{comp}"
        r = R.create(src, np.int16, compression=comp, chunk_records=5)
        r.append([make_record(rng, np.int16) for _ in range(23)])
        r.close()
        files = [p for p in src.rglob("*") if p.is_file() and p.name != ".lock"]
        originals = {p: p.read_bytes() for p in files}
        for trial in range(60):
            for p, data in originals.items():
                p.write_bytes(data)
            victim = files[int(rng.integers(len(files)))]
            data = bytearray(originals[victim])
            how = rng.choice(["flip", "truncate", "extend"])
            if how == "flip" and data:
                for _ in range(int(rng.integers(1, 4))):
                    data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
            elif how == "truncate":
                data = data[:int(rng.integers(0, len(data) + 1))]
            else:
                data += bytes(rng.integers(0, 256, int(rng.integers(1, 64)), dtype=np.uint8))
            victim.write_bytes(bytes(data))
            try:
                s = R.open(src)
                s.take(np.arange(len(s)))
                if comp is None:
                    s.take(np.arange(len(s)), copy=False)
            except (lsio.Error, OverflowError, MemoryError):
                pass


def test_http_read_only(nginx_server, tmp_path):
    """The same store served by nginx (ranges, ETags): read-only over http://."""
    rng = np.random.default_rng(4)
    local = tmp_path / "srv" / "tok.zr"
    r = R.create(local, np.int32, compression="deflate", chunk_records=9)
    recs = [make_record(rng, np.int32) for _ in range(50)]
    r.append(recs)
    r.close()
    server = nginx_server(tmp_path / "srv")
    s = R.open(server.url("tok.zr"), storage_options={"timeout": 5, "retries": 1})
    idx = rng.integers(0, 50, 30)
    for got, i in zip(s.take(idx), idx):
        assert same(got, recs[i])
    with pytest.raises(lsio.NotFoundError, match="meta.json"):
        R.open(server.url("missing.zr"), storage_options={"timeout": 5, "retries": 1})


CRASH_AFTER_WRITE = r"""
import os, sys, numpy as np
sys.path[:0] = {paths!r}
import lsio.records as R
w = R.open({path!r}, "a")
del w[9]                                     # published: 9 records
R._write_meta = lambda *a, **k: os._exit(9)  # die before the next publication
w.append([np.full(16384, 171, np.int32)])     # data and entry 9 written, never published
"""


def test_stale_reader_never_sees_an_unpublished_record(tmp_path):
    """A reader opened at 10 records; the writer deletes one (9 published), appends at id 9
    and dies before publishing. The reader must not return that record, and after the next
    writer's recovery truncated the chunk, its views must not touch the cut pages."""
    path = tmp_path / "s"
    r = R.create(path, np.int32, chunk_records=100)
    r.append([np.full(10, i, np.int32) for i in range(10)])
    r.close()
    reader = R.open(path)
    assert len(reader._ids([9])) == 1   # the reader's state says 10 records
    p = subprocess.run([sys.executable, "-c", CRASH_AFTER_WRITE.format(paths=sys.path, path=str(path))])
    assert p.returncode == 9
    with pytest.raises(lsio.BoundsError):
        reader.take([9], copy=False)
    with pytest.raises(lsio.BoundsError):
        reader[9]
    views = reader.take(np.arange(9), copy=False)
    R.open(path, "a").close()            # recovery truncates the dead writer's bytes
    assert [int(v[0]) for v in views] == [0, 1, 2, 3, 4, 5, 6, 7, 8]   # no SIGBUS
    assert [int(v[0]) for v in reader.take(np.arange(9))] == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_reader_opened_before_a_rebalance(tmp_path):
    path = tmp_path / "s"
    w = R.create(path, np.int32, chunk_records=3)
    w.append([np.full(i % 4, i, np.int32) for i in range(20)])
    w[5] = np.array([7, 7], np.int32)
    reader = R.open(path)                 # has not read anything yet
    w.rebalance()                         # removes the generation the reader's meta names
    got = reader.take([4, 5])
    assert got[1].tolist() == [7, 7] and got[0].tolist() == []
    assert reader._meta["generation"] == 1
    w.close()


def test_corrupt_sizes_raise_before_allocating(tmp_path):
    raw = tmp_path / "raw"
    w = R.create(raw, bytes)
    w.append([b"x" * 100])
    w.close()
    set_entry(raw, 0, 0, 0, 0xFFFFFFF0)
    with pytest.raises(lsio.CorruptDataError, match="past the end"):
        R.open(raw).take([0] * 4)
    z = tmp_path / "z"
    w = R.create(z, bytes, compression="zstd")
    w.append([bytes(range(256)) * 2])
    w.close()
    claim = 0xFFFFFFFF   # a frame header declaring 4 GiB in a few bytes
    bomb = (np.array([claim], "<u4").tobytes() + np.array([0xFD2FB528], "<u4").tobytes() + bytes([0xA0])
            + np.array([claim], "<u4").tobytes())
    data = bytearray((z / "chunk" / "0.zr").read_bytes())
    data[:len(bomb)] = bomb
    (z / "chunk" / "0.zr").write_bytes(bytes(data))
    with pytest.raises(lsio.CorruptDataError, match="can hold"):
        R.open(z).take([0] * 4)


def test_fork_while_another_thread_holds_the_handle(tmp_path):
    import threading
    path = tmp_path / "s"
    w = R.create(path, np.int32)
    w.append([np.arange(5, dtype=np.int32)])
    w.close()
    r = R.open(path)
    held, release = threading.Event(), threading.Event()

    def hold():
        with r._guard():
            held.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(10)
    pid = os.fork()
    if pid == 0:
        signal.alarm(10)   # a hang fails the test instead of stalling it
        os._exit(0 if r[0].tolist() == [0, 1, 2, 3, 4] else 3)
    release.set()
    t.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_meta_bounds_and_small_forms(tmp_path):
    path = corrupt_store(tmp_path, None)
    meta = json.loads((path / "meta.json").read_text())
    for change, match in [({"length": 2 ** 70}, "length"), ({"chunk_records": 2 ** 40}, "chunk_records"),
                          ({"level": 5}, "level"),
                          ({"open_chunks": [{"id": 1, "write_pos": 0, "records": 0}] * 2}, "twice")]:
        (path / "meta.json").write_text(json.dumps({**meta, **change}))
        with pytest.raises(lsio.FormatError, match=match):
            R.open(path)
    s = R.create(tmp_path / "be", np.dtype(">i2"))
    s.append([np.array([1, -2, 300], ">i2")])
    assert s.take([], copy=False).values.dtype == np.dtype(">i2")
    torch = pytest.importorskip("torch")
    p, _ = s.take([0]).to_torch("padded")
    assert p.tolist() == [[1, -2, 300]] and p.dtype == torch.int16


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_views_and_large_appends_hold_no_descriptor_per_chunk(tmp_path):
    """Views map chunks without keeping descriptors (Python's mmap keeps one per mapping
    before 3.13), and an append filling many chunks closes each as it is filled."""
    path = tmp_path / "s"
    before = open_fds()
    w = R.create(path, np.int32, chunk_records=2)
    w.append([np.full(3, i, np.int32) for i in range(3000)])   # 1,500 chunks in one call
    assert open_fds() <= before + 4
    r = R.open(path)
    views = r.take(np.arange(0, 3000, 2), copy=False)           # one view in each chunk
    assert [int(v[0]) for v in views] == list(range(0, 3000, 2))
    assert open_fds() <= before + 6
    assert len(r._maps) <= R._MAX_MAPS
    w.close()


WRITER_APPENDS = r"""
import sys, time, numpy as np
sys.path[:0] = {paths!r}
import lsio.records as R
w = R.open({path!r}, "a", durable=False)
end = time.monotonic() + {seconds}
while time.monotonic() < end:
    w.append([np.arange(3, dtype=np.int32)])
"""


def test_large_takes_beside_a_busy_appender(tmp_path):
    """Publications that only append never make a reader load its entries again (a reader
    used to give up after 64 tries beside a writer appending one record per call)."""
    path = tmp_path / "s"
    w = R.create(path, np.int32, chunk_records=4096)
    for _ in range(10):
        w.append([np.arange(3, dtype=np.int32)] * 20000)
    w.close()
    p = subprocess.Popen([sys.executable, "-c", WRITER_APPENDS.format(paths=sys.path, path=str(path), seconds=3)])
    r = R.open(path)
    ids = np.arange(200000)
    done = 0
    while p.poll() is None:
        assert len(r.take(ids)) == ids.size
        done += 1
    assert p.wait() == 0 and done >= 1
    assert len(r) > 200000


def test_store_recreated_at_the_same_path(tmp_path):
    path = tmp_path / "s"
    w = R.create(path, np.int32, chunk_records=3)
    w.append([np.full(3, 1, np.int32)] * 8)
    w.close()
    r = R.open(path)
    assert r[5].tolist() == [1, 1, 1]
    import shutil
    shutil.rmtree(path)
    w = R.create(path, np.int32, chunk_records=3)
    w.append([np.full(6, 100 + i, np.int32) for i in range(8)])
    w.close()
    assert r[5].tolist() == [105] * 6            # a new store (uuid): nothing cached from the old
    assert r.take([2]).tolist()[0].tolist() == [102] * 6


def test_index_edge_cases(tmp_path):
    w = R.create(tmp_path / "s", np.int32)
    w[[]] = []
    del w[[]]
    w.append([np.arange(3, dtype=np.int32)])
    with pytest.raises(lsio.BoundsError):
        w.take(np.array([2 ** 64 - 1], np.uint64))
    assert w.take(np.array([0], np.uint64))[0].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="2 records for 1 ids"):
        w[[0]] = [np.ones(1, np.int32), np.ones(1, np.int32)]
    assert w[0].tolist() == [0, 1, 2]


def test_a_failure_after_publication_never_lets_the_writer_overwrite_published_records(tmp_path, monkeypatch):
    # meta.json renamed over, then its directory's fsync fails: the append raises, yet its
    # records are published. The writer must go on from the published state.
    path = tmp_path / "s"
    w = R.create(path, np.uint8, chunk_records=100)
    w.append([np.frombuffer(b"AAAA", np.uint8)])
    real = R._fsync_dir

    def failing(p):
        if os.path.samefile(p, path):
            raise OSError(5, "injected EIO")
        real(p)

    monkeypatch.setattr(R, "_fsync_dir", failing)
    with pytest.raises(OSError, match="injected"):
        w.append([np.frombuffer(b"BBBB", np.uint8)])
    monkeypatch.setattr(R, "_fsync_dir", real)
    rd = R.open(path)
    assert len(rd) == 2 and len(w) == 2
    view = rd.take([1], copy=False)[0]
    assert bytes(view) == b"BBBB"
    assert w.append([np.frombuffer(b"CCCC", np.uint8)]) == range(2, 3)
    assert bytes(view) == b"BBBB"  # the published bytes under the reader's view did not change
    assert [bytes(x) for x in R.open(path).take([0, 1, 2])] == [b"AAAA", b"BBBB", b"CCCC"]
    # The same after a delete and a rebalance whose publication failed late.
    monkeypatch.setattr(R, "_fsync_dir", failing)
    with pytest.raises(OSError, match="injected"):
        del w[0]
    calls = []

    def second_fails(p):  # rebalance syncs the root before and after its publication
        if os.path.samefile(p, path):
            calls.append(p)
            if len(calls) == 2:
                raise OSError(5, "injected EIO")
        real(p)

    monkeypatch.setattr(R, "_fsync_dir", second_fails)
    with pytest.raises(OSError, match="injected"):
        w.rebalance()
    monkeypatch.setattr(R, "_fsync_dir", real)
    assert w._meta["generation"] == 1
    w.append([np.frombuffer(b"DDDD", np.uint8)])
    assert [bytes(x) for x in R.open(path).take([0, 1, 2])] == [b"CCCC", b"BBBB", b"DDDD"]
    assert sorted(os.listdir(path)) == sorted([".lock", "meta.json", f"offset.{w._meta['generation']}",
                                               f"chunk.{w._meta['generation']}"])
    w.close()


def test_a_failed_write_before_publication_is_dropped(tmp_path, monkeypatch):
    path = tmp_path / "s"
    w = R.create(path, bytes, chunk_records=4, writers=2)
    w.append([b"a", b"b"])
    real = R._write_meta
    monkeypatch.setattr(R, "_write_meta", lambda *a: (_ for _ in ()).throw(OSError(28, "injected ENOSPC")))
    with pytest.raises(OSError, match="injected"):
        w.append([b"x" * 100] * 9)
    monkeypatch.setattr(R, "_write_meta", real)
    assert len(w) == 2 and len(R.open(path)) == 2
    # the unpublished chunk files are gone, the open chunks hold only published bytes
    meta = json.loads((path / "meta.json").read_text())
    assert sorted(os.listdir(path / "chunk")) == [f"{c}.zr" for c in range(meta["num_chunks"])]
    for oc in meta["open_chunks"]:
        assert os.path.getsize(path / "chunk" / f"{oc['id']}.zr") == oc["write_pos"]
    w.append([b"c"])
    assert R.open(path).take([0, 1, 2]).tolist() == [b"a", b"b", b"c"]


def test_a_failing_writer_thread_lets_the_others_finish_before_the_append_raises(tmp_path, monkeypatch):
    path = tmp_path / "s"
    w = R.create(path, bytes, chunk_records=4, writers=2)  # two new chunks, both left open
    real = os.pwrite

    def pwrite(fd, data, pos):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith("/0.zr"):
            raise OSError(28, "injected ENOSPC")
        if name.endswith("/1.zr"):
            time.sleep(0.5)
        return real(fd, data, pos)

    monkeypatch.setattr(R.os, "pwrite", pwrite)
    with pytest.raises(OSError, match="injected"):
        w.append([b"x" * 10, b"SECRET-RECORD-BYTES"])
    monkeypatch.setattr(R.os, "pwrite", real)
    # Files opened now reuse freed descriptor numbers: no late write may land in them.
    victims = [tmp_path / f"victim{i}" for i in range(4)]
    fds = [os.open(v, os.O_RDWR | os.O_CREAT) for v in victims]
    time.sleep(0.7)
    for fd in fds:
        os.close(fd)
    assert all(v.read_bytes() == b"" for v in victims)
    assert len(w) == 0
    w.append([b"ok"])
    assert R.open(path)[0] == b"ok"


@pytest.mark.parametrize("dtype", [
    np.dtype([("a", "u1"), ("b", "<f8")], align=True),
    np.dtype({"names": ["a", "b"], "formats": ["u1", "<i4"], "offsets": [0, 8], "itemsize": 16}),
    np.dtype([("a", "u1"), ("inner", [("x", "<i2"), ("y", ">f4", (2,))])]),
    np.dtype([("m", "<f4", (2, 3))]),
], ids=["aligned", "padded", "nested", "subarray"])
def test_structured_dtypes_round_trip_through_meta(tmp_path, dtype):
    path = tmp_path / "s"
    w = R.create(path, dtype, compression="zstd")
    recs = [np.zeros(3, dtype), np.ones(2, dtype)]
    recs[0].view(np.uint8)[:] = np.arange(recs[0].nbytes) % 251
    w.append(recs)
    assert w.dtype == dtype
    r = R.open(path)
    assert r.dtype == dtype
    assert all(same(a, b) for a, b in zip(r.take([0, 1]), recs))


def test_descr_dtypes_of_earlier_stores_still_read(tmp_path):
    path = tmp_path / "s"
    dt = np.dtype([("a", "<i4"), ("b", "<f8")])
    w = R.create(path, dt)
    w.append([np.ones(2, dt)])
    w.close()
    meta = json.loads((path / "meta.json").read_text())
    meta["dtype"] = dt.descr  # what earlier versions wrote
    (path / "meta.json").write_text(json.dumps(meta))
    assert R.open(path).dtype == dt and same(R.open(path)[0], np.ones(2, dt))


def test_batches_are_cast_only_as_lists_are(tmp_path):
    w = R.create(tmp_path / "s", np.int32)
    with pytest.raises(TypeError):
        w.append([np.array([1.5, 2.7])])
    with pytest.raises(TypeError):
        w.append(R.RecordBatch(np.array([1.5, 2.7, 1e10]), np.array([0, 3])))
    w.append(R.RecordBatch(np.array([1, 2, 3], np.int16), np.array([0, 3])))
    assert same(w[0], np.array([1, 2, 3], np.int32)) and len(w) == 1


def test_create_exist_ok_checks_what_the_records_are(tmp_path):
    path = tmp_path / "s"
    R.create(path, np.float32, compression="zstd", level=5).close()
    R.create(path, np.float32, compression="zstd", exist_ok=True, chunk_records=7).close()  # layout: fine
    R.create(path, np.float32, compression="zstd", level=5, exist_ok=True).close()
    for kw, word in [(dict(dtype=np.int32, compression="zstd"), "dtype"),
                     (dict(dtype=np.float32), "compression"),
                     (dict(dtype=np.float32, compression="zstd", level=3), "level")]:
        with pytest.raises(FileExistsError, match=word):
            R.create(path, exist_ok=True, **kw)


def test_a_forked_child_neither_keeps_the_writer_lock_nor_reads_a_frozen_state(tmp_path):
    path = tmp_path / "s"
    w = R.create(path, bytes, chunk_records=4)
    w.append([b"a", b"b"])
    go_r, go_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(go_w)
            os.write(done_w, b"r")  # running: the fork handler has closed the child's descriptors
            os.read(go_r, 1)  # the parent closed its writer, reopened, deleted and appended
            code = 0 if (len(w) == 2 and w.take([0, 1]).tolist() == [b"b", b"c"]) else 4
            os.write(done_w, b"x")
            time.sleep(1)
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    os.read(done_r, 1)
    w.close()
    w2 = R.open(path, "a")  # the child is alive: its copy of the lock must not hold the store
    del w2[0]
    w2.append([b"c"])
    os.write(go_w, b"x")
    os.read(done_r, 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    w2.close()
