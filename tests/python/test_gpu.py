"""Decoding on the GPU (lsio.gpu): the device plan, its CPU reference executor, the CUDA
executor's steps on the CPU, and (where CUDA, Triton and nvCOMP are present) the real thing.

Without a GPU:
* for every supported store of stores.py, ``read_crops`` through the device plan performed
  by the CPU reference executor (the same frames, decode area and scatter ops the CUDA
  executor runs) equals ``read_crops`` bit for bit, with GPU-decodable frames staged
  compressed and with every chunk staged decoded;
* the plan's invariants: frames do not overlap in staging, every op stays inside the work
  buffer and the output, and every output byte is written exactly once;
* single boxes with steps (``read(key)``'s plan), a staging buffer that must grow, and
  corrupt chunks (a typed error naming the file, chunk and byte range);
* the CUDA executor's own code (lsio/gpu/_cuda.py: work-buffer layout, pointer tables, the
  Triton scatter kernel, status checks, the CPU redo) run on host tensors in a child process
  with ``TRITON_INTERPRET=1`` and a stand-in for nvCOMP that decodes with the engine's CPU
  decoder from the pointer tables it is given.
With CUDA: the same reads into CUDA tensors through nvCOMP, ``read(key, out=cuda)``,
``CropLoader(device="cuda")`` and errors.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import lsio
import lsio.gpu
from lsio.gpu import _plan
from selections import crop_slices, random_crops
from stores import assert_same_bits

HERE = os.path.dirname(os.path.abspath(__file__))


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode()) + 7


def numeric(store) -> bool:
    e = store.expected
    return e.dtype.kind in "biufc" and e.ndim >= 1 and e.size > 0


def test_reference_matches_read_crops(store):
    if not numeric(store):
        pytest.skip("no crops of string or 0-d arrays reach a GPU")
    arr = lsio.open(str(store.path))
    starts, crop = random_crops(seed_of(store.name), store.expected.shape, arr.chunks)
    want = np.stack([store.expected[crop_slices(s, crop)] for s in starts])
    assert_same_bits(arr.read_crops(starts, crop), want, store.name)
    for gpu_codecs in (True, False):
        got = lsio.gpu.read_crops_reference(arr, starts, crop, gpu_codecs=gpu_codecs)
        assert_same_bits(got, want, f"{store.name} gpu_codecs={gpu_codecs}")


def write_zstd(path, shape=(6, 90, 70), chunks=(2, 32, 32), shards=None, dtype="float32", fill=0, region=None,
               checksum=False, crc32c=False):
    import zarr
    from zarr.codecs import Crc32cCodec, ZstdCodec

    rng = np.random.default_rng(3)
    data = (rng.standard_normal(shape) * 100).astype(dtype)
    compressors = [ZstdCodec(level=1, checksum=checksum)] + ([Crc32cCodec()] if crc32c else [])
    z = zarr.create_array(str(path), shape=shape, chunks=chunks, shards=shards, dtype=dtype,
                          compressors=compressors, fill_value=fill)
    if region is None:
        z[...] = data
        return data
    z[region] = data[region]
    expected = np.full(shape, fill, dtype=dtype)
    expected[region] = data[region]
    return expected


def plan_checks(plan: _plan.StagedPlan) -> None:
    f = plan.frames
    # Frames are disjoint, aligned and inside the used staging bytes; decode slots too.
    order = np.argsort(f[:, _plan.F_STAGING])
    starts, sizes = f[order, _plan.F_STAGING], f[order, _plan.F_STORED]
    assert np.all(starts % 16 == 0)
    assert np.all(starts[1:] >= starts[:-1] + sizes[:-1])
    assert starts[-1] + sizes[-1] <= plan.staging_used
    z = f[f[:, _plan.F_CODEC] != _plan.CODEC_RAW]
    if len(z):
        d = np.sort(z[:, _plan.F_DECODED_AT])
        assert np.all(d % 16 == 0) and np.all(np.diff(d) >= plan.max_decoded)
        assert d[-1] + plan.max_decoded <= plan.decoded_bytes
    # Every output byte is written exactly once, every op reads inside the work buffer.
    hits = np.zeros(plan.out_bytes, dtype=np.int32)
    for src, dst, run, n1, ss1, ds1, n2, ss2, ds2 in plan.op_table(1).tolist():
        assert src >= 0 and src + (n2 - 1) * ss2 + (n1 - 1) * ss1 + run <= plan.work_bytes
        for i2 in range(n2):
            for i1 in range(n1):
                at = dst + i2 * ds2 + i1 * ds1
                hits[at: at + run] += 1
    assert np.all(hits == 1)


def test_plan_invariants_sharded_with_missing_chunks(tmp_path):
    p = tmp_path / "s.zarr"
    want = write_zstd(p, shape=(6, 90, 70), chunks=(1, 16, 16), shards=(2, 32, 32), fill=-3,
                      region=(slice(0, 4), slice(0, 50), slice(10, 70)))
    arr = lsio.open(str(p))
    rng = np.random.default_rng(0)
    crop = (2, 40, 33)
    starts = rng.integers(0, np.array(want.shape) - crop + 1, size=(9, 3))
    plan = lsio.gpu.stage_crops(arr, starts, crop)
    assert (plan.frames[:, _plan.F_CODEC] == _plan.CODEC_ZSTD).any()
    assert (plan.frames[:, _plan.F_FILE] == -1).sum() == 1  # one fill frame serves every missing chunk
    plan_checks(plan)
    got = _plan.run_reference(plan, np.empty((9,) + crop, dtype=want.dtype))
    assert_same_bits(got, np.stack([want[crop_slices(s, crop)] for s in starts]))


@pytest.mark.parametrize("key", [
    (slice(1, 6, 2), slice(3, 88, 5), slice(None)),
    (4, slice(10, 70), slice(0, 70, 3)),
    (slice(None), 17, 5),
])
def test_single_box_with_steps(tmp_path, key):
    """read(key)'s plan: one box with steps, integer axes stride 0, into a C-ordered result."""
    p = tmp_path / "k.zarr"
    want = write_zstd(p)
    arr = lsio.open(str(p))
    from lsio.array import _normalize_key

    starts, counts, steps, out_shape, int_axes, flips, new_axes = _normalize_key(key, want.shape)
    expected = want[key]
    out = np.empty(out_shape, dtype=want.dtype)
    strides, j = [], 0
    for d in range(len(counts)):
        if d in int_axes:
            strides.append(0)
        else:
            strides.append(out.strides[j])
            j += 1
    plan = _plan.stage(arr._native(), np.asarray([starts], dtype=np.int64), counts, steps, 0, strides, out.nbytes,
                       lambda n: np.empty(n, np.uint8), lambda b: b)
    plan_checks(plan)
    assert_same_bits(_plan.run_reference(plan, out), expected)


def test_staging_grows_to_what_the_engine_asks(tmp_path):
    p = tmp_path / "g.zarr"
    want = write_zstd(p)
    arr = lsio.open(str(p))
    sizes = []

    def get(n):
        sizes.append(n)
        return np.empty(n, np.uint8)

    crop = (2, 40, 40)
    starts = np.array([[0, 0, 0], [4, 50, 30]])
    plan = _plan.stage(arr._native(), starts, crop, None, 4 * 3200, _plan.out_layout(crop, 4), 2 * 4 * 3200,
                       get, lambda b: b, capacity_hint=64)
    assert sizes[0] == 64 and len(sizes) == 2 and sizes[1] >= plan.staging_used
    got = _plan.run_reference(plan, np.empty((2,) + crop, np.float32))
    assert_same_bits(got, np.stack([want[crop_slices(s, crop)] for s in starts]))


def corrupt_first_chunk(path, how):
    chunk = os.path.join(path, "c", "0", "0", "0")
    with open(chunk, "r+b") as f:
        b = bytearray(f.read())
        if how == "payload":  # bytes inside the frame's blocks (a checksum catches it)
            for i in range(len(b) // 2, len(b) // 2 + 16):
                b[i] ^= 0x5A
        elif how == "garbage":  # the frame and block headers kept, the block's content garbage
            b[12:-8] = b"\xff" * len(b[12:-8])
        elif how == "garbage+crc":  # the same under a crc32c that still matches the old bytes
            b[12:-12] = b"\xff" * len(b[12:-12])
        else:  # a frame header declaring another content size: staged by the CPU, which refuses it
            b[:] = __import__("numcodecs").Zstd(level=1).encode(np.zeros(100, np.uint8).tobytes())
        f.seek(0)
        f.truncate()
        f.write(bytes(b))
    return chunk


@pytest.mark.parametrize("how", ["payload", "header"])
def test_corrupt_chunk_is_a_typed_error(tmp_path, how):
    """A frame with a checksum, or declaring another size, is staged decoded by the CPU, whose
    error names the chunk."""
    p = tmp_path / "c.zarr"
    write_zstd(p, checksum=how == "payload")
    chunk = corrupt_first_chunk(str(p), how)
    arr = lsio.open(str(p))
    with pytest.raises(lsio.CorruptDataError) as e:
        lsio.gpu.stage_crops(arr, [[0, 0, 0]], (2, 10, 10))
    assert "(0, 0, 0)" in str(e.value) and chunk in str(e.value)


def test_checksummed_frames_are_decoded_by_the_cpu(tmp_path):
    p = tmp_path / "k.zarr"
    want = write_zstd(p, checksum=True)
    arr = lsio.open(str(p))
    plan = lsio.gpu.stage_crops(arr, [[0, 0, 0]], (2, 40, 40))
    assert (plan.frames[:, _plan.F_CODEC] == _plan.CODEC_RAW).all()
    assert_same_bits(_plan.run_reference(plan, np.empty((1, 2, 40, 40), np.float32)), want[None, :2, :40, :40])


def test_crc32c_is_verified_before_a_gpu_decoder_sees_the_frame(tmp_path):
    """[bytes, zstd, crc32c] chunks are GPU frames (the crc stripped) once the CPU has checked
    the checksum; a frame that fails it never reaches the device."""
    p = tmp_path / "crc.zarr"
    want = write_zstd(p, crc32c=True)
    arr = lsio.open(str(p))
    plan = lsio.gpu.stage_crops(arr, [[0, 0, 0], [3, 40, 30]], (2, 40, 40))
    assert (plan.frames[:, _plan.F_CODEC] == _plan.CODEC_ZSTD).all()
    got = _plan.run_reference(plan, np.empty((2, 2, 40, 40), np.float32))
    assert_same_bits(got, np.stack([want[:2, :40, :40], want[3:5, 40:80, 30:70]]))
    chunk = corrupt_first_chunk(str(p), "garbage+crc")
    with pytest.raises(lsio.CorruptDataError, match="crc32c") as e:
        lsio.gpu.stage_crops(arr, [[0, 0, 0]], (2, 10, 10))
    assert chunk in str(e.value)


def test_reference_reports_a_frame_its_decoder_refuses(tmp_path):
    """Garbage inside a frame whose headers look fine reaches the frame decoder (as it would
    reach nvCOMP), and the error names the chunk."""
    p = tmp_path / "g.zarr"
    write_zstd(p)
    chunk = corrupt_first_chunk(str(p), "garbage")
    arr = lsio.open(str(p))
    with pytest.raises(lsio.CorruptDataError) as e:
        lsio.gpu.read_crops_reference(arr, [[0, 0, 0]], (2, 10, 10))
    assert "(0, 0, 0)" in str(e.value) and chunk in str(e.value)


# Compressors whose chunks a GPU decoder gets (nvCOMP deflate / LZ4) or that stay on the CPU:
# name -> (writer, the frame codec every chunk must be staged as).
def _write_compressed(path, kind, data, chunks):
    import warnings

    import numcodecs
    import zarr
    from zarr.codecs import GzipCodec

    kw = dict(shape=data.shape, chunks=chunks, dtype=data.dtype, fill_value=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numcodecs.zarr3 is deprecated in favour of zarr.codecs.numcodecs
        if kind == "gzip":
            z = zarr.create_array(str(path), compressors=GzipCodec(level=1), **kw)
        elif kind == "gzip0":  # stored blocks: payload bytes are the data, so a flipped byte still inflates
            z = zarr.create_array(str(path), compressors=GzipCodec(level=0), **kw)
        elif kind == "lz4-v2":
            z = zarr.create_array(str(path), zarr_format=2, compressors=numcodecs.LZ4(acceleration=1), **kw)
        elif kind == "lz4-v3":
            from numcodecs import zarr3

            z = zarr.create_array(str(path), compressors=zarr3.LZ4(acceleration=2), **kw)
        elif kind == "zlib-v2":
            z = zarr.create_array(str(path), zarr_format=2, compressors=numcodecs.Zlib(level=1), **kw)
        else:
            raise ValueError(kind)
        z[...] = data
    return data


def _chunk_files(path):
    """Every stored chunk file of an unsharded array under ``path`` (v2 or v3 keys)."""
    out = []
    for root, _, names in os.walk(path):
        out += [os.path.join(root, n) for n in names if not n.startswith((".z", "zarr.json"))]
    return out


@pytest.mark.parametrize("kind, codec", [("gzip", _plan.CODEC_DEFLATE), ("lz4-v2", _plan.CODEC_LZ4),
                                         ("lz4-v3", _plan.CODEC_LZ4), ("zlib-v2", _plan.CODEC_RAW)])
def test_gzip_and_lz4_chunks_are_frames_of_their_gpu_decoders(tmp_path, kind, codec):
    """zarr-python's gzip chunks are staged as raw deflate streams with the gzip trailer's
    CRC-32 to check, numcodecs' lz4 chunks as raw LZ4 blocks; zlib-wrapped chunks (an adler32
    no GPU decoder checks) are decoded by the CPU. The reference executor then equals
    read_crops bit for bit."""
    import gzip

    p = tmp_path / f"{kind}.zarr"
    rng = np.random.default_rng(11)
    want = _write_compressed(p, kind, (rng.integers(0, 50, size=(5, 60, 70)) * 7).astype("int16"), (2, 16, 32))
    arr = lsio.open(str(p))
    starts = np.array([[0, 0, 0], [3, 30, 20], [1, 44, 38]])
    crop = (2, 16, 32)
    plan = lsio.gpu.stage_crops(arr, starts, crop)
    plan_checks(plan)
    f = plan.frames
    assert (f[:, _plan.F_FILE] >= 0).all()  # no missing chunks here
    assert (f[:, _plan.F_CODEC] == codec).all(), f[:, _plan.F_CODEC]
    if codec == _plan.CODEC_RAW:
        assert (f[:, _plan.F_CHECK] == -1).all() and plan.gpu_frames().size == 0
    else:
        assert plan.gpu_frames().tolist() == plan.compressed(codec).tolist() == list(range(len(f)))
    for row in f:
        stored = open(plan.files[int(row[_plan.F_FILE])], "rb").read()
        frame = plan.staging_np[row[_plan.F_STAGING]: row[_plan.F_STAGING] + row[_plan.F_STORED]].tobytes()
        if codec == _plan.CODEC_DEFLATE:
            decoded = gzip.decompress(stored)
            assert row[_plan.F_CHECK] == zlib.crc32(decoded)
            assert frame == stored[len(stored) - 8 - len(frame): len(stored) - 8]  # the member's body
            assert zlib.decompressobj(-15).decompress(frame) == decoded
        elif codec == _plan.CODEC_LZ4:
            assert row[_plan.F_CHECK] == -1
            assert frame == stored[4:] and int.from_bytes(stored[:4], "little") == row[_plan.F_DECODED]
    expected = np.stack([want[crop_slices(s, crop)] for s in starts])
    assert_same_bits(arr.read_crops(starts, crop), expected)
    for gpu_codecs in (True, False):
        assert_same_bits(lsio.gpu.read_crops_reference(arr, starts, crop, gpu_codecs=gpu_codecs), expected)


@pytest.mark.parametrize("name", ["z_gzip_v2dot", "z_shard_gzip_inner", "ts_gzip_dotsep_nan", "ts_3d"])
def test_gzip_stores_of_the_matrix_reach_the_deflate_decoder(stores, name):
    """test_reference_matches_read_crops covers these stores; this says their chunks took the
    GPU path (deflate frames, each with a CRC-32 to check) and not the CPU one."""
    store = stores.get(name)
    arr = lsio.open(str(store.path))
    starts, crop = random_crops(seed_of(store.name), store.expected.shape, arr.chunks)
    plan = lsio.gpu.stage_crops(arr, starts, crop)
    deflate = plan.compressed(_plan.CODEC_DEFLATE)
    assert deflate.size > 0 and (plan.frames[deflate, _plan.F_CHECK] >= 0).all()
    assert (plan.frames[plan.frames[:, _plan.F_CODEC] != _plan.CODEC_DEFLATE, _plan.F_FILE] == -1).all()


def test_gzip_crc_mismatch_after_a_clean_inflate_is_a_typed_error(tmp_path):
    """A flipped byte in a stored deflate block still inflates; the gzip trailer's CRC-32,
    checked after decoding, catches it, and the error names the chunk."""
    p = tmp_path / "g0.zarr"
    _write_compressed(p, "gzip0", np.arange(4 * 32 * 32, dtype="int32").reshape(4, 32, 32), (2, 16, 16))
    chunk = os.path.join(str(p), "c", "0", "0", "0")
    with open(chunk, "r+b") as fh:
        b = bytearray(fh.read())
        b[len(b) // 2] ^= 0x5A
        fh.seek(0)
        fh.write(bytes(b))
    arr = lsio.open(str(p))
    plan = lsio.gpu.stage_crops(arr, [[0, 0, 0]], (2, 10, 10))
    assert (plan.frames[:, _plan.F_CODEC] == _plan.CODEC_DEFLATE).all()  # the headers pass
    with pytest.raises(lsio.CorruptDataError, match="CRC-32") as e:
        lsio.gpu.read_crops_reference(arr, [[0, 0, 0]], (2, 10, 10))
    assert "(0, 0, 0)" in str(e.value) and chunk in str(e.value)
    with pytest.raises(lsio.CorruptDataError):  # the CPU read agrees
        arr.read_crops([[0, 0, 0]], (2, 10, 10))


EMULATED = textwrap.dedent(r"""
    import ctypes, os, sys, zlib
    import numpy as np, torch
    sys.path.insert(0, sys.argv[1])
    import lsio, lsio.gpu
    from lsio import _core
    from lsio.gpu import _cuda, _plan
    from selections import crop_slices

    def ints(addr, n, ty=ctypes.c_int64):
        return np.ctypeslib.as_array((ty * n).from_address(addr))

    class HostDecoder:
        # One of nvCOMP's batched decoders, on host memory: reads the pointer tables it is given.
        def __init__(self, nv, codec):
            self.nv, self.codec = nv, codec
        def temp_bytes(self, n, max_chunk, total, stream):
            return 0
        def decompress(self, comp_ptrs, comp_bytes, buf_bytes, actual, n, temp, tb, out_ptrs, statuses, stream):
            self.nv.calls[self.codec] = self.nv.calls.get(self.codec, 0) + 1
            src, srcn, cap = ints(comp_ptrs, n), ints(comp_bytes, n), ints(buf_bytes, n)
            dst, act, st = ints(out_ptrs, n), ints(actual, n), ints(statuses, n, ctypes.c_int32)
            for i in range(n):
                a = np.ctypeslib.as_array((ctypes.c_uint8 * int(srcn[i])).from_address(int(src[i])))
                b = np.ctypeslib.as_array((ctypes.c_uint8 * int(cap[i])).from_address(int(dst[i])))
                _core.decode_staged_frame(self.codec, a, b)
                k = self.nv.seen
                self.nv.seen += 1
                act[i], st[i] = (0, 12) if k in self.nv.fail else (cap[i], 0)

    class HostCrc32:
        def __init__(self, nv):
            self.nv = nv
        def compute(self, ptrs, sizes, n, max_bytes, crcs, statuses, stream):
            self.nv.calls["crc32"] = self.nv.calls.get("crc32", 0) + 1
            p, m = ints(ptrs, n), ints(sizes, n)
            out, st = ints(crcs, n, ctypes.c_uint32), ints(statuses, n, ctypes.c_int32)
            for i in range(n):
                out[i] = zlib.crc32(ctypes.string_at(int(p[i]), int(m[i])))
                st[i] = 0

    class HostNvcomp:
        # lsio/gpu/_nvcomp.py's Nvcomp on the host; `fail`: frames (in decode order) it fails.
        def __init__(self, fail=()):
            self.fail, self.calls, self.seen = set(fail), {}, 0
        def decoder(self, codec):
            return HostDecoder(self, codec)
        def crc32(self):
            return HostCrc32(self)

    def run(path, crop, starts, fail=()):
        arr = lsio.open(path)
        isz = np.dtype(arr.dtype).itemsize
        box = int(np.prod(crop)) * isz
        staging = lambda n: torch.empty(n, dtype=torch.uint8)
        plan = _plan.stage(arr._native(), np.asarray(starts, np.int64), crop, None, box, _plan.out_layout(crop, isz),
                           box * len(starts), staging, lambda t: t.numpy())
        dec = HostNvcomp(fail)
        ex = _cuda.Executor(torch.device("cpu"), decoder=dec)
        out = torch.zeros((len(starts),) + tuple(crop), dtype=torch.from_numpy(np.empty(0, arr.dtype)).dtype)
        ok = ex.run(plan, out, None)
        return arr, plan, ok, out.numpy(), dec

    for path in sys.argv[2:]:
        arr = lsio.open(path)
        rng = np.random.default_rng(5)
        crop = tuple(max(1, min(n, c + 3)) for n, c in zip(arr.shape, arr.chunks))
        starts = rng.integers(0, np.array(arr.shape) - crop + 1, size=(6, len(crop)))
        arr, plan, ok, got, dec = run(path, crop, starts)
        want = arr.read_crops(starts, crop)
        assert ok and np.array_equal(got.view(np.uint8), want.view(np.uint8)), path
        codecs = sorted({int(c) for c in plan.frames[:, _plan.F_CODEC] if c != 0})
        assert sorted(c for c in dec.calls if c != "crc32") == codecs, (dec.calls, codecs)
        assert all(dec.calls[c] == 1 for c in codecs)  # one batched call per codec
        checked = int((plan.frames[:, _plan.F_CHECK] >= 0).sum())
        assert dec.calls.get("crc32", 0) == (1 if checked else 0)
        print("ok", os.path.basename(path), "frames", len(plan.frames), "codecs", codecs, "crc", checked,
              "ops", len(plan.ops))

    # A frame the decoder could not decode: run() says so, execute() redoes the batch on the CPU.
    path = sys.argv[2]
    starts, crop = [[0, 0, 0], [1, 5, 5]], (2, 20, 20)
    arr, plan, ok, got, dec = run(path, crop, starts, fail={0})
    assert not ok
    ex = _cuda.Executor(torch.device("cpu"), decoder=HostNvcomp({0}))
    _cuda.executor_for = lambda device: ex
    redo = []
    out = torch.zeros((2,) + crop, dtype=torch.float32)
    _cuda.execute(arr, plan, out, lambda: (redo.append(1), arr.read_crops(starts, crop))[1])
    assert redo == [1] and _cuda.stats()["cpu_redos"] == 1
    assert np.array_equal(out.numpy(), arr.read_crops(starts, crop))
    print("redo ok")

    # A gzip chunk whose deflate data decodes but whose CRC-32 trailer is wrong: the executor's
    # CRC check fails the batch, and the CPU redo raises lsio's typed error.
    bad = os.environ.get("LSIO_TEST_BAD_CRC")
    if bad:
        starts, crop = [[0, 0, 0]], (1, 4, 4)
        arr, plan, ok, got, dec = run(bad, crop, starts)
        assert not ok and dec.calls.get("crc32") == 1, dec.calls
        ex = _cuda.Executor(torch.device("cpu"), decoder=HostNvcomp())
        _cuda.executor_for = lambda device: ex
        try:
            _cuda.execute(arr, plan, torch.zeros((1,) + crop, dtype=torch.int32), lambda: arr.read_crops(starts, crop))
        except lsio.CorruptDataError as e:
            print("crc ok", e)
        else:
            raise AssertionError("a wrong gzip CRC-32 was not reported")
""")


def test_cuda_executor_steps_on_the_cpu(tmp_path):
    """lsio/gpu/_cuda.py's Executor on host tensors: the Triton kernel interpreted, nvCOMP
    replaced by a host decoder that follows the pointer tables the executor built."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import numcodecs
    import zarr
    from zarr.codecs import BloscCodec, GzipCodec

    paths = []
    p = tmp_path / "z.zarr"
    write_zstd(p, shape=(4, 60, 50), chunks=(2, 16, 16))
    paths.append(str(p))
    p = tmp_path / "sh.zarr"
    write_zstd(p, shape=(4, 60, 50), chunks=(1, 16, 16), shards=(2, 32, 32), fill=7,
               region=(slice(0, 3), slice(0, 40), slice(None)))
    paths.append(str(p))
    p = tmp_path / "u8.zarr"
    write_zstd(p, shape=(3, 40, 41), chunks=(1, 8, 8), dtype="uint8")
    paths.append(str(p))
    p = tmp_path / "c128.zarr"
    z = zarr.create_array(str(p), shape=(3, 20, 20), chunks=(2, 8, 8), dtype="complex128")
    z[...] = np.arange(1200).reshape(3, 20, 20) * (1 + 2j)
    paths.append(str(p))
    p = tmp_path / "blosc.zarr"
    z = zarr.create_array(str(p), shape=(3, 30, 30), chunks=(2, 8, 8), dtype="int16", compressors=[BloscCodec()])
    z[...] = np.arange(2700, dtype=np.int16).reshape(3, 30, 30)
    paths.append(str(p))
    p = tmp_path / "gzip.zarr"
    z = zarr.create_array(str(p), shape=(3, 30, 30), chunks=(2, 8, 8), dtype="int32", compressors=[GzipCodec()])
    z[...] = np.arange(2700, dtype=np.int32).reshape(3, 30, 30) % 97
    paths.append(str(p))
    p = tmp_path / "lz4.zarr"
    z = zarr.create_array(str(p), shape=(3, 30, 30), chunks=(2, 8, 8), dtype="float64", zarr_format=2,
                          compressors=numcodecs.LZ4())
    z[...] = np.arange(2700, dtype=np.float64).reshape(3, 30, 30) / 7
    paths.append(str(p))
    bad = tmp_path / "badcrc.zarr"
    z = zarr.create_array(str(bad), shape=(2, 8, 8), chunks=(2, 8, 8), dtype="int32", compressors=[GzipCodec()])
    z[...] = np.arange(128, dtype=np.int32).reshape(2, 8, 8)
    chunk = bad / "c" / "0" / "0" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[-8] ^= 0xFF  # the trailer's CRC-32
    chunk.write_bytes(bytes(raw))
    env = dict(os.environ, TRITON_INTERPRET="1", LSIO_TEST_BAD_CRC=str(bad))
    r = subprocess.run([sys.executable, "-c", EMULATED, HERE, *paths], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok ") == len(paths) + 1 and "redo ok" in r.stdout and "crc ok" in r.stdout, r.stdout
    assert "codecs [2] crc" in r.stdout and "codecs [3] crc" in r.stdout, r.stdout  # gzip, lz4 on the "GPU"


def test_import_lsio_does_not_touch_the_gpu_stack():
    code = "import sys, lsio; a = sys.modules; print('torch' in a, 'triton' in a, 'lsio.gpu' in a)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["False", "False", "False"], r.stdout + r.stderr


# -- with a GPU -------------------------------------------------------------------------------

GPU_OK, GPU_WHY = lsio.gpu.available()
needs_gpu = pytest.mark.skipif(not GPU_OK, reason=f"no GPU decoding here: {GPU_WHY}")


@pytest.mark.skipif(GPU_OK, reason="checks the message of a process that cannot decode on the GPU")
def test_a_cuda_out_without_gpu_support_says_why(tmp_path):
    class CudaLike:  # what cupy / numba arrays expose
        __cuda_array_interface__ = {"shape": (1, 2, 10, 10), "typestr": "<f4", "data": (0, False), "version": 3}

    p = tmp_path / "z.zarr"
    write_zstd(p)
    arr = lsio.open(str(p))
    with pytest.raises(RuntimeError, match="cannot decode on the GPU: " + re.escape(GPU_WHY[:20])):
        arr.read_crops([[0, 0, 0]], (2, 10, 10), out=CudaLike())
    with pytest.raises(RuntimeError, match="cannot decode on the GPU"):
        arr.read((slice(0, 2), slice(0, 10), slice(0, 10)), out=CudaLike())


@needs_gpu
def test_cuda_read_crops_matches_cpu(store):
    import torch

    if not numeric(store):
        pytest.skip("no crops of string or 0-d arrays reach a GPU")
    arr = lsio.open(str(store.path))
    starts, crop = random_crops(seed_of(store.name), store.expected.shape, arr.chunks)
    want = arr.read_crops(starts, crop)
    try:
        dt = torch.from_numpy(np.empty(0, want.dtype)).dtype
    except TypeError:
        pytest.skip(f"torch has no {want.dtype}")
    out = torch.full(want.shape, 0, dtype=dt, device="cuda")
    arr.read_crops(starts, crop, out=out)
    assert_same_bits(out.cpu().numpy(), want, store.name)


@needs_gpu
def test_cuda_read_key_and_stream(tmp_path):
    import torch

    p = tmp_path / "k.zarr"
    want = write_zstd(p, shape=(6, 90, 70), chunks=(1, 16, 16), shards=(2, 32, 32))
    arr = lsio.open(str(p))
    s = torch.cuda.Stream()
    for key in [(slice(1, 6, 2), slice(3, 88, 5), slice(None)), (4, slice(10, 70), slice(0, 70, 3)), (slice(None),) * 3]:
        exp = want[key]
        out = torch.empty(exp.shape, dtype=torch.float32, device="cuda")
        arr.read(key, out=out, stream=s)
        assert_same_bits(out.cpu().numpy(), exp, str(key))
    starts = np.zeros((2, 3), np.int64)
    with pytest.raises(TypeError):  # float64 out for a float32 array
        arr.read_crops(starts, (1, 5, 5), out=torch.empty((2, 1, 5, 5), dtype=torch.float64, device="cuda"))
    with pytest.raises(ValueError):  # wrong shape
        arr.read_crops(starts, (1, 5, 5), out=torch.empty((2, 1, 5, 6), dtype=torch.float32, device="cuda"))
    with pytest.raises(ValueError):  # not contiguous
        out = torch.empty((2, 1, 5, 5, 2), dtype=torch.float32, device="cuda")[..., 0]
        arr.read_crops(starts, (1, 5, 5), out=out)


@needs_gpu
def test_cuda_corrupt_chunk_raises_typed_error(tmp_path):
    import torch

    p = tmp_path / "c.zarr"
    write_zstd(p, crc32c=True)
    arr = lsio.open(str(p))
    assert (lsio.gpu.stage_crops(arr, [[0, 0, 0]], (2, 10, 10)).frames[:, _plan.F_CODEC] == _plan.CODEC_ZSTD).all()
    chunk = corrupt_first_chunk(str(p), "garbage+crc")
    out = torch.empty((1, 2, 10, 10), dtype=torch.float32, device="cuda")
    with pytest.raises(lsio.CorruptDataError) as e:
        arr.read_crops([[0, 0, 0]], (2, 10, 10), out=out)
    assert chunk in str(e.value)


@needs_gpu
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_cuda_crop_loader_matches_dataset(tmp_path, depth):
    import torch

    from lsio.torch import CropDataset, CropLoader, CropSampler

    p = tmp_path / "l.zarr"
    write_zstd(p, shape=(8, 128, 128), chunks=(1, 32, 32), shards=(2, 64, 64))
    ds = CropDataset(lsio.open(str(p)), (4, 48, 48), length=50, seed=1)
    sampler = CropSampler(ds, seed=1, num_replicas=1, rank=0)
    loader = CropLoader(ds, batch_size=8, sampler=sampler, device="cuda", depth=depth)
    cpu = CropLoader(ds, batch_size=8, sampler=sampler, device="cpu")
    n = 0
    for g, c in zip(loader, cpu):
        assert g.is_cuda and torch.equal(g.cpu(), c)
        n += 1
    assert n == len(loader) == 7
    # Stopping early leaves no queued work behind, and the next epoch starts cleanly.
    it = iter(loader)
    next(it)
    it.close()
    assert sum(1 for _ in loader) == 7


def _gzip_lz4_stores(tmp_path):
    import numcodecs
    import zarr
    from zarr.codecs import GzipCodec

    rng = np.random.default_rng(3)
    out = []
    p = tmp_path / "gz.zarr"
    z = zarr.create_array(str(p), shape=(4, 96, 80), chunks=(1, 32, 32), shards=(2, 64, 64), dtype="float32",
                          compressors=[GzipCodec(level=5)])
    z[...] = np.round(rng.normal(size=(4, 96, 80)), 2).astype(np.float32)
    out.append((p, _plan.CODEC_DEFLATE))
    p = tmp_path / "lz4.zarr"
    z = zarr.create_array(str(p), shape=(4, 96, 80), chunks=(2, 24, 24), dtype="int16", zarr_format=2,
                          compressors=numcodecs.LZ4())
    z[...] = rng.integers(0, 50, size=(4, 96, 80)).astype(np.int16)
    out.append((p, _plan.CODEC_LZ4))
    return out


@needs_gpu
def test_cuda_gzip_and_lz4_decode_on_the_gpu(tmp_path):
    import torch

    for p, codec in _gzip_lz4_stores(tmp_path):
        arr = lsio.open(str(p))
        starts, crop = random_crops(7, arr.shape, arr.chunks)
        plan = lsio.gpu.stage_crops(arr, starts, crop)
        assert (plan.frames[plan.frames[:, _plan.F_FILE] >= 0, _plan.F_CODEC] == codec).all()
        before = lsio.gpu.stats()
        out = torch.empty((len(starts),) + tuple(crop), dtype=torch.from_numpy(np.empty(0, arr.dtype)).dtype,
                          device="cuda")
        arr.read_crops(starts, crop, out=out)
        after = lsio.gpu.stats()
        assert after["cpu_redos"] == before["cpu_redos"], str(p)
        assert after["frames_gpu"] > before["frames_gpu"], str(p)
        assert_same_bits(out.cpu().numpy(), arr.read_crops(starts, crop), str(p))


@needs_gpu
def test_cuda_gzip_crc_mismatch_is_a_typed_error(tmp_path):
    """Deflate data that decodes, under a wrong CRC-32: nvCOMP's CRC on the device catches it,
    the CPU redo raises (the same error as a CPU read), in read_crops and in CropLoader."""
    import torch
    import zarr
    from zarr.codecs import GzipCodec

    from lsio.torch import CropDataset, CropLoader

    p = tmp_path / "bad.zarr"
    z = zarr.create_array(str(p), shape=(4, 16, 16), chunks=(1, 16, 16), dtype="int32", compressors=[GzipCodec()])
    z[...] = np.arange(1024, dtype=np.int32).reshape(4, 16, 16)
    chunk = p / "c" / "2" / "0" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[-8] ^= 0x5A
    chunk.write_bytes(bytes(raw))
    arr = lsio.open(str(p))
    with pytest.raises(lsio.CorruptDataError):
        arr.read_crops([[2, 0, 0]], (1, 16, 16))
    out = torch.empty((1, 1, 16, 16), dtype=torch.int32, device="cuda")
    redos = lsio.gpu.stats()["cpu_redos"]
    with pytest.raises(lsio.CorruptDataError):
        arr.read_crops([[2, 0, 0]], (1, 16, 16), out=out)
    assert lsio.gpu.stats()["cpu_redos"] == redos + 1
    out = torch.empty((2, 1, 16, 16), dtype=torch.int32, device="cuda")
    arr.read_crops([[0, 0, 0], [3, 0, 0]], (1, 16, 16), out=out)  # the good chunks still read
    assert torch.equal(out.cpu(), torch.from_numpy(np.asarray(z[[0, 3]]).reshape(2, 1, 16, 16)))
    # In a pipelined loader the bad batch raises when it is handed out; earlier ones arrive.
    ds = CropDataset(arr, (1, 16, 16), origins=[[t, 0, 0] for t in range(4)])
    got = []
    with pytest.raises(lsio.CorruptDataError):
        for b in CropLoader(ds, batch_size=1, device="cuda", depth=2):
            got.append(b)
    assert len(got) == 2  # records 0 and 1; record 2 is the bad chunk
    assert torch.equal(got[1].cpu(), torch.from_numpy(np.asarray(z[1:2])).reshape(1, 1, 16, 16))


def test_staging_refuses_more_than_its_share_of_memory_limit():
    """A staging buffer never grows past its limit; CropLoader gives each of an array's
    depth + 1 slots limit / (depth + 1), and the error says so. No allocation happens before
    the refusal, so this runs without CUDA."""
    pytest.importorskip("torch")
    from lsio.gpu import _cuda

    s = _cuda.Staging(4 << 20, "depth + 1 = 4 staging slots of CropLoader")
    with pytest.raises(MemoryError, match=r"its share for the depth \+ 1 = 4 staging slots.*4194304 bytes"):
        s.get(5 << 20)
    assert s.buf is None
    with pytest.raises(MemoryError, match=r"memory_limit \(1000 bytes\)"):
        _cuda.Staging(1000).get(2000)
