"""lsio.safetensors: load / load_torch / info / metadata against the safetensors package.

* Checkpoints written by ``safetensors.numpy.save_file`` and ``safetensors.torch.save_file``
  (every dtype each writes: bf16, the FP8 kinds, F4, uint16/32/64, complex64, bool; 0-d, empty
  and multi-MiB tensors; NaN payloads and -0.0) load equal to the package's own loaders bit
  for bit (bytes compared), as numpy (ml_dtypes for bf16/fp8) and as torch tensors.
* Names: subsets, order, a single str, unknown names (KeyError listing some that exist);
  sharded checkpoints (an index like transformers writes) by index path and by directory;
  only the shards holding the chosen tensors are read.
* The read plan: a load costs three ``lsio.read_ranges`` calls (length prefixes, headers,
  every tensor straight into the results), one file or many; the grouped torch path (CUDA's)
  runs on CPU with small groups; the CUDA test runs only where CUDA exists.
* Corrupt files: every header problem the safetensors crate rejects is rejected here too
  (the package is asked as well), each as a typed lsio error naming the file; what the crate
  accepts (extra fields, zero-size tensors, repeated names, whitespace) loads the same.
* Remote: one file and a sharded checkpoint through moto's S3 and nginx equal the local
  load; a truncated remote file is CorruptDataError.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import lsio
import lsio.safetensors as lst

safetensors = pytest.importorskip("safetensors")
torch = pytest.importorskip("torch")
import safetensors.numpy as st_np  # noqa: E402
import safetensors.torch as st_torch  # noqa: E402
from safetensors import safe_open  # noqa: E402

OPTS = {"timeout": 5, "connect_timeout": 2, "retries": 1}


# --------------------------------------------------------------------------------------
# Helpers


def tbytes(t) -> bytes:
    """A torch tensor's raw bytes (any dtype, 0-d and empty included)."""
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def raw_file(path, header, data: bytes = b"", n=None) -> str:
    """Write a safetensors-shaped file: 8-byte length (``n`` or the header's), header, data."""
    hdr = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr) if n is None else n) + hdr + data)
    return str(path)


def st_rejects(path) -> bool:
    """Does the safetensors package itself refuse this file (open and read every tensor)?"""
    try:
        with safe_open(str(path), "pt") as f:
            for k in f.keys():
                f.get_tensor(k)
    except Exception:
        return True
    return False


class CallCounter:
    """Wraps lsio.read_ranges: records (sources, ranges, out given) per call."""

    def __init__(self, monkeypatch):
        self.calls = []
        real = lsio.read_ranges

        def counting(source, ranges, **kw):
            self.calls.append((source, np.asarray(ranges).tolist(), kw.get("out") is not None))
            return real(source, ranges, **kw)

        monkeypatch.setattr(lsio, "read_ranges", counting)


def torch_tensors(seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(64, generator=g) * 8
    f[:4] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf")])
    t = {
        "f64": f.double().reshape(8, 8),
        "f32": f.reshape(4, 4, 4),
        "f16": f.half(),
        "bf16": f.bfloat16().reshape(2, 32),
        "i64": torch.randint(-2**62, 2**62, (5,), generator=g),
        "i32": torch.randint(-2**31, 2**31 - 1, (3, 3), dtype=torch.int32, generator=g),
        "i16": torch.randint(-2**15, 2**15 - 1, (7,), dtype=torch.int16, generator=g),
        "i8": torch.randint(-128, 127, (9,), dtype=torch.int8, generator=g),
        "u8": torch.randint(0, 255, (11,), dtype=torch.uint8, generator=g),
        "u16": torch.randint(0, 2**15, (6,), dtype=torch.int32, generator=g).to(torch.uint16),
        "u32": torch.randint(0, 2**31 - 1, (6,), dtype=torch.int64, generator=g).to(torch.uint32),
        "u64": torch.tensor([0, 1, 2**63 + 12345, 2**64 - 1], dtype=torch.uint64),
        "bool": torch.rand(10, generator=g) > 0.5,
        "c64": torch.randn(3, 2, dtype=torch.complex64, generator=g),
        "f8_e4m3": f.to(torch.float8_e4m3fn),
        "f8_e5m2": f.to(torch.float8_e5m2),
        "f8_e4m3fnuz": f.to(torch.float8_e4m3fnuz),
        "f8_e5m2fnuz": f.to(torch.float8_e5m2fnuz),
        "scalar": torch.tensor(2.5),
        "scalar_bf16": torch.tensor(-1.5, dtype=torch.bfloat16),
        "empty": torch.empty(0, 3),
        "empty_bf16": torch.empty(4, 0, dtype=torch.bfloat16),
        "big": torch.randn(1024, 1024, generator=g),  # 4 MiB
    }
    for i in range(40):  # many small tensors: neighbours the engine may merge
        t[f"layers.{i}.bias"] = torch.full((i + 1,), float(i), dtype=torch.float16)
    # Newer dtypes, where this torch and this safetensors have them (F8_E8M0, F4).
    if hasattr(torch, "float8_e8m0fnu"):
        t["f8_e8m0"] = f.abs().clamp(min=1e-3).to(torch.float8_e8m0fnu)
    if hasattr(torch, "float4_e2m1fn_x2"):
        t["f4"] = torch.randint(0, 255, (3, 4), dtype=torch.uint8, generator=g).view(torch.float4_e2m1fn_x2)
    return {k: v for k, v in t.items() if writable(v)}


def writable(t) -> bool:
    """Can the installed safetensors write (and read back) this tensor's dtype?"""
    with tempfile.TemporaryDirectory() as d:
        try:
            st_torch.save_file({"x": t}, os.path.join(d, "x.safetensors"))
            st_torch.load_file(os.path.join(d, "x.safetensors"))
        except Exception:
            return False
    return True


def need(tensors: dict, *names: str) -> None:
    missing = [n for n in names if n not in tensors]
    if missing:
        pytest.skip(f"this torch/safetensors cannot write {missing}")


def numpy_tensors(seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    f = rng.standard_normal(64) * 8
    f[:4] = [np.nan, -0.0, np.inf, -np.inf]
    nan_payload = np.array([0x7FF8_0000_DEAD_BEEF], np.uint64).view(np.float64)
    return {
        "f64": np.concatenate([f, nan_payload]),
        "f32": f.astype(np.float32).reshape(4, 16),
        "f16": f.astype(np.float16).reshape(2, 2, 16),
        "i64": rng.integers(-2**62, 2**62, 5),
        "u64": np.array([2**64 - 1, 0], np.uint64),
        "i32": rng.integers(-2**31, 2**31 - 1, (3, 3), dtype=np.int32),
        "u32": rng.integers(0, 2**32 - 1, 4, dtype=np.uint32),
        "i16": rng.integers(-2**15, 2**15 - 1, 7, dtype=np.int16),
        "u16": rng.integers(0, 2**16 - 1, 7, dtype=np.uint16),
        "i8": rng.integers(-128, 127, 9, dtype=np.int8),
        "u8": rng.integers(0, 255, 9, dtype=np.uint8),
        "bool": rng.random(13) > 0.5,
        "c64": (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(np.complex64),
        "scalar": np.array(7, np.int32),
        "empty": np.zeros((0, 5), np.float32),
        "big": rng.standard_normal((512, 1024)).astype(np.float32),  # 2 MiB
    }


@pytest.fixture(scope="module")
def ckpt_dir(tmp_path_factory):
    """Checkpoints under one directory (served by nginx / uploaded to moto as is):
    np.safetensors, pt.safetensors, sharded/ (3 shards + index), single/ (model.safetensors)."""
    root = tmp_path_factory.mktemp("safetensors")
    st_np.save_file(numpy_tensors(), str(root / "np.safetensors"), metadata={"source": "numpy"})
    pt = torch_tensors()
    st_torch.save_file(pt, str(root / "pt.safetensors"), metadata={"format": "pt", "x": "y"})

    shard_dir = root / "sharded"
    shard_dir.mkdir()
    names = sorted(pt)
    shards = [names[0::3], names[1::3], names[2::3]]
    weight_map, total = {}, 0
    for k, part in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        st_torch.save_file({n: pt[n] for n in part}, str(shard_dir / fname), metadata={"format": "pt"})
        for n in part:
            weight_map[n] = fname
            total += len(tbytes(pt[n]))
    (shard_dir / lst.INDEX_NAME).write_text(json.dumps(
        {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, indent=2))

    single = root / "single"
    single.mkdir()
    st_torch.save_file({"w": pt["f32"], "b": pt["bf16"]}, str(single / "model.safetensors"))
    return root


# --------------------------------------------------------------------------------------
# Equal to safetensors' own loaders


def test_numpy_checkpoint_equals_safetensors_numpy(ckpt_dir):
    path = ckpt_dir / "np.safetensors"
    want = st_np.load_file(str(path))
    got = lsio.safetensors.load(path)
    assert set(got) == set(want)
    for k, w in want.items():
        a = got[k]
        assert isinstance(a, np.ndarray), k
        assert a.dtype == w.dtype and a.shape == w.shape, (k, a.dtype, w.dtype, a.shape, w.shape)
        assert a.tobytes() == w.tobytes(), k
        assert a.flags.writeable and a.flags.c_contiguous, k
    assert got["scalar"].shape == () and got["empty"].shape == (0, 5)


def test_torch_checkpoint_load_torch_equals_safetensors_torch(ckpt_dir):
    path = ckpt_dir / "pt.safetensors"
    want = st_torch.load_file(str(path))
    got = lsio.safetensors.load_torch(str(path))
    assert set(got) == set(want)
    for k, w in want.items():
        t = got[k]
        assert isinstance(t, torch.Tensor) and t.device.type == "cpu", k
        assert t.dtype == w.dtype and t.shape == w.shape, (k, t.dtype, w.dtype, t.shape, w.shape)
        assert tbytes(t) == tbytes(w), k
    if "f4" in want:
        assert got["f4"].dtype == torch.float4_e2m1fn_x2 and got["f4"].shape == (3, 4)


def test_torch_checkpoint_as_numpy_through_ml_dtypes(ckpt_dir):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    path = ckpt_dir / "pt.safetensors"
    want = st_torch.load_file(str(path))
    names = [k for k in want if k != "f4"]
    got = lsio.safetensors.load(path, names)
    assert list(got) == names
    for k in names:
        assert got[k].shape == tuple(want[k].shape), k
        assert got[k].tobytes() == tbytes(want[k]), k
    assert got["bf16"].dtype == ml_dtypes.bfloat16
    assert got["scalar_bf16"].dtype == ml_dtypes.bfloat16 and got["scalar_bf16"].shape == ()
    assert got["f8_e4m3"].dtype == ml_dtypes.float8_e4m3fn
    assert got["f8_e5m2"].dtype == ml_dtypes.float8_e5m2
    if "f8_e8m0" in got:
        assert got["f8_e8m0"].dtype == ml_dtypes.float8_e8m0fnu
    assert got["f8_e4m3fnuz"].dtype == ml_dtypes.float8_e4m3fnuz
    assert got["f8_e5m2fnuz"].dtype == ml_dtypes.float8_e5m2fnuz
    assert got["u64"].dtype == np.uint64 and got["bool"].dtype == np.bool_
    assert got["c64"].dtype == np.complex64
    np.testing.assert_array_equal(got["bf16"].astype(np.float32), want["bf16"].float().numpy())


def test_numpy_refuses_f4_before_reading_data(ckpt_dir, monkeypatch):
    need(lsio.safetensors.info(ckpt_dir / "pt.safetensors"), "f4")
    counter = CallCounter(monkeypatch)
    with pytest.raises(lsio.UnsupportedError, match="load_torch") as e:
        lsio.safetensors.load(ckpt_dir / "pt.safetensors")
    assert "F4" in str(e.value) and "'f4'" in str(e.value)
    assert len(counter.calls) == 2  # the length prefix and the header; no tensor read


def test_without_ml_dtypes_bf16_points_to_load_torch(ckpt_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes -> ImportError
    path = ckpt_dir / "pt.safetensors"
    for name in ("bf16", "f8_e4m3", "f8_e5m2"):
        with pytest.raises(lsio.UnsupportedError) as e:
            lsio.safetensors.load(path, [name])
        msg = str(e.value)
        assert "pip install ml_dtypes" in msg and "load_torch" in msg and str(path) in msg
        assert isinstance(e.value, lsio.FormatError) and isinstance(e.value, NotImplementedError)
    got = lsio.safetensors.load(path, ["f32", "u8"])  # numpy-native dtypes need no ml_dtypes
    assert got["f32"].dtype == np.float32


def test_load_torch_without_torch(ckpt_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(ImportError, match="pip install torch"):
        lsio.safetensors.load_torch(ckpt_dir / "pt.safetensors")


def test_import_loads_neither_torch_nor_safetensors():
    code = ("import sys, lsio.safetensors; "
            "bad = [m for m in ('torch', 'safetensors', 'ml_dtypes') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------------------
# Names, metadata, info


def test_subsets_order_and_single_name(ckpt_dir):
    path = ckpt_dir / "pt.safetensors"
    want = st_torch.load_file(str(path))
    got = lsio.safetensors.load_torch(path, ["u8", "big", "scalar", "empty", "u8"])
    assert list(got) == ["u8", "big", "scalar", "empty"]
    for k, t in got.items():
        assert tbytes(t) == tbytes(want[k]) and t.shape == want[k].shape
    one = lsio.safetensors.load(path, "i16")
    assert list(one) == ["i16"] and one["i16"].tobytes() == tbytes(want["i16"])
    assert lsio.safetensors.load(path, []) == {}
    with pytest.raises(TypeError):
        lsio.safetensors.load(path, [3])


def test_default_order_is_the_header_order(ckpt_dir):
    path = ckpt_dir / "pt.safetensors"
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__")
    assert list(lsio.safetensors.info(path)) == list(header)
    assert list(lsio.safetensors.load_torch(path)) == list(header)


def test_unknown_names_raise_key_error(ckpt_dir):
    path = ckpt_dir / "pt.safetensors"
    with pytest.raises(KeyError) as e:
        lsio.safetensors.load(path, ["f32", "layers.1.bais"])
    msg = str(e.value)
    assert "layers.1.bais" in msg and "layers.1.bias" in msg and str(path) in msg
    with pytest.raises(KeyError, match="nope"):
        lsio.safetensors.load_torch(ckpt_dir / "sharded", ["nope"])


def test_metadata_and_info(ckpt_dir):
    assert lsio.safetensors.metadata(ckpt_dir / "pt.safetensors") == {"format": "pt", "x": "y"}
    assert lsio.safetensors.metadata(ckpt_dir / "np.safetensors") == {"source": "numpy"}
    assert lsio.safetensors.metadata(ckpt_dir / "single") == {}
    idx = lsio.safetensors.metadata(ckpt_dir / "sharded")
    assert idx["total_size"] > 4 << 20

    infos = lsio.safetensors.info(ckpt_dir / "pt.safetensors")
    big = infos["big"]
    assert big.dtype == "F32" and big.shape == (1024, 1024) and big.nbytes == 4 << 20
    assert big.file == str(ckpt_dir / "pt.safetensors")
    with open(ckpt_dir / "pt.safetensors", "rb") as f:
        f.seek(big.offset)
        assert f.read(16) == tbytes(torch_tensors()["big"])[:16]
    if "f4" in infos:
        assert infos["f4"].shape == (3, 8) and infos["f4"].nbytes == 12  # logical shape
    sharded = lsio.safetensors.info(ckpt_dir / "sharded")
    assert set(sharded) == set(infos)
    assert {os.path.basename(i.file) for i in sharded.values()} == {
        f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)}


def test_results_are_separate_writeable_buffers(ckpt_dir):
    got = lsio.safetensors.load(ckpt_dir / "np.safetensors", ["f32", "i8"])
    got["f32"][...] = 0
    again = lsio.safetensors.load(ckpt_dir / "np.safetensors", ["f32", "i8"])
    assert not np.shares_memory(got["f32"], got["i8"])
    assert again["f32"].tobytes() == st_np.load_file(str(ckpt_dir / "np.safetensors"))["f32"].tobytes()


def test_pin_memory_false_and_other_args(ckpt_dir):
    got = lsio.safetensors.load_torch(ckpt_dir / "pt.safetensors", ["f32"], device=torch.device("cpu"),
                                      pin_memory=False, threads=2)
    assert not got["f32"].is_pinned()


# --------------------------------------------------------------------------------------
# The read plan


def test_one_call_for_all_tensors_of_a_file(ckpt_dir, monkeypatch):
    counter = CallCounter(monkeypatch)
    path = ckpt_dir / "pt.safetensors"
    got = lsio.safetensors.load_torch(path)
    assert [c[1] for c in counter.calls[:1]] == [[[0, 8]]]
    assert len(counter.calls) == 3
    _, ranges, has_out = counter.calls[2]
    nonempty = [k for k, i in lsio.safetensors.info(path).items() if i.nbytes]
    assert has_out and len(ranges) == len(nonempty)
    assert len(got) > len(nonempty)  # the empty tensors need no read

    counter.calls.clear()
    lsio.safetensors.load(ckpt_dir / "np.safetensors")
    assert len(counter.calls) == 3 and counter.calls[2][2]


def test_sharded_three_calls_and_only_needed_shards(ckpt_dir, monkeypatch):
    counter = CallCounter(monkeypatch)
    index = ckpt_dir / "sharded" / lst.INDEX_NAME
    weight_map = json.loads(index.read_text())["weight_map"]
    lsio.safetensors.load_torch(index)
    assert len(counter.calls) == 3
    assert len(counter.calls[0][1]) == 3 and len(counter.calls[1][1]) == 3  # 3 shards, batched

    counter.calls.clear()
    names = ["big", "u8"]
    lsio.safetensors.load(index, names)
    shards = {weight_map[n] for n in names}
    assert len(counter.calls) == 3 and len(counter.calls[0][1]) == len(shards)
    sources = counter.calls[0][0]
    sources = [sources] if isinstance(sources, str) else sources
    assert {os.path.basename(s) for s in sources} == shards


def test_sharded_equals_safetensors(ckpt_dir):
    shard_dir = ckpt_dir / "sharded"
    want = {}
    for f in sorted(shard_dir.glob("*.safetensors")):
        want.update(st_torch.load_file(str(f)))
    weight_map = json.loads((shard_dir / lst.INDEX_NAME).read_text())["weight_map"]
    for where in (shard_dir, shard_dir / lst.INDEX_NAME, f"file://{shard_dir}", str(shard_dir) + "/"):
        got = lsio.safetensors.load_torch(where)
        assert list(got) == list(weight_map)
        for k, w in want.items():
            assert got[k].dtype == w.dtype and got[k].shape == w.shape and tbytes(got[k]) == tbytes(w), k
    names = ["layers.7.bias", "big", "scalar_bf16", "empty"]
    sub = lsio.safetensors.load(shard_dir, names)
    assert list(sub) == names
    for k in names:
        assert sub[k].tobytes() == tbytes(want[k]) and sub[k].shape == tuple(want[k].shape)


def test_directory_with_single_model_file(ckpt_dir):
    got = lsio.safetensors.load_torch(ckpt_dir / "single")
    want = st_torch.load_file(str(ckpt_dir / "single" / "model.safetensors"))
    assert {k: tbytes(v) for k, v in got.items()} == {k: tbytes(v) for k, v in want.items()}
    with pytest.raises(lsio.StorageError, match="neither"):
        lsio.safetensors.load(ckpt_dir)  # holds checkpoints, but no model.safetensors[.index.json]


@pytest.mark.parametrize("group_bytes, which", [(8, "small"), (100, "small"), (64 << 10, "all"),
                                                (64 << 20, "all"), (8, "empty")])
def test_grouped_torch_path_on_cpu(ckpt_dir, monkeypatch, group_bytes, which):
    """The CUDA path's grouping (tensors split across groups, groups packing several tensors,
    two staging buffers taking turns), run on CPU."""
    path = ckpt_dir / "pt.safetensors"
    want = st_torch.load_file(str(path))
    names = {"small": [k for k in want if k != "big"], "all": None,
             "empty": ["empty", "empty_bf16"]}[which]
    counter = CallCounter(monkeypatch)
    ck = lst._open(path, names, None, None)
    layouts = [lst._torch_layout(torch, t) for _, t in ck.chosen]
    got = lst._load_torch_grouped(torch, ck, layouts, torch.device("cpu"), False, None, None,
                                  group_bytes=group_bytes)
    total = sum(t.nbytes for _, t in ck.chosen)
    assert len(counter.calls) - 2 >= -(-total // group_bytes)  # 2 header calls, then groups
    assert list(got) == [t.name for _, t in ck.chosen]
    for k, g in got.items():
        w = want[k]
        assert g.dtype == w.dtype and g.shape == w.shape and tbytes(g) == tbytes(w), k


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_load_torch_cuda(ckpt_dir, monkeypatch):
    path = ckpt_dir / "sharded"
    want = {}
    for f in sorted(path.glob("*.safetensors")):
        want.update(st_torch.load_file(str(f)))
    for group in (64 << 20, 4096):
        monkeypatch.setattr(lst, "_GROUP_BYTES", group)
        got = lsio.safetensors.load_torch(path, device="cuda")
        for k, w in want.items():
            assert got[k].device.type == "cuda" and got[k].dtype == w.dtype and got[k].shape == w.shape, k
            assert tbytes(got[k]) == tbytes(w), k
    pinned = lsio.safetensors.load_torch(path, ["big"], pin_memory=True)
    assert pinned["big"].is_pinned() and pinned["big"].device.type == "cpu"


# --------------------------------------------------------------------------------------
# Corrupt and odd files

F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
DATA8 = bytes(range(8))

# (id, header (dict or raw bytes), data, forced header length, expected class)
CORRUPT = [
    ("empty file", None, b"", None, lsio.FormatError),
    ("five bytes", None, b"\x05\0\0\0\0", None, lsio.FormatError),
    ("header length over the limit", {}, b"", lst.MAX_HEADER_SIZE + 1, lsio.FormatError),
    ("header length 2**64-1", {}, b"", 2**64 - 1, lsio.FormatError),
    ("header length past the end", {"a": F32_2}, DATA8, 5000, lsio.CorruptDataError),
    ("header length zero", b"", b"", None, lsio.FormatError),
    ("not utf-8", b'{"\xff": 1}', b"", None, lsio.FormatError),
    ("invalid json", b'{"a": {"dtype": "F32",', b"", None, lsio.FormatError),
    ("trailing garbage in header", b'{}\0', b"", None, lsio.FormatError),
    ("json array", b"[]", b"", None, lsio.FormatError),
    ("json string", b'"hello"', b"", None, lsio.FormatError),
    ("tensor not an object", {"a": 5}, b"", None, lsio.FormatError),
    ("missing shape", {"a": {"dtype": "F32", "data_offsets": [0, 8]}}, DATA8, None, lsio.FormatError),
    ("missing data_offsets", {"a": {"dtype": "F32", "shape": [2]}}, DATA8, None, lsio.FormatError),
    ("negative dim", {"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, DATA8, None,
     lsio.FormatError),
    ("float dim", {"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, DATA8, None,
     lsio.FormatError),
    ("bool dim", {"a": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, b"x", None,
     lsio.FormatError),
    ("three offsets", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8, 8]}}, DATA8, None,
     lsio.FormatError),
    ("offset over u64", {"a": {"dtype": "U8", "shape": [0], "data_offsets": [2**64, 2**64]}}, b"",
     None, lsio.FormatError),
    ("dtype not a string", {"a": {"dtype": 3, "shape": [2], "data_offsets": [0, 8]}}, DATA8, None,
     lsio.FormatError),
    ("metadata not str->str", {"__metadata__": {"a": 1}}, b"", None, lsio.FormatError),
    ("metadata a list", {"__metadata__": []}, b"", None, lsio.FormatError),
    ("duplicate __metadata__", b'{"__metadata__": {}, "__metadata__": {}}', b"", None, lsio.FormatError),
    ("duplicate field", b'{"a": {"dtype": "U8", "dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}',
     b"x", None, lsio.FormatError),
    ("NaN in header", b'{"__metadata__": {"a": NaN}}', b"", None, lsio.FormatError),
    ("deeply nested", b'{"__metadata__": ' + b"[" * 100000 + b"]" * 100000 + b"}", b"", None,
     lsio.FormatError),
    ("unknown dtype", {"a": {"dtype": "F128", "shape": [1], "data_offsets": [0, 16]}}, bytes(16), None,
     lsio.UnsupportedError),
    ("lowercase dtype", {"a": {"dtype": "f32", "shape": [2], "data_offsets": [0, 8]}}, DATA8, None,
     lsio.UnsupportedError),
    ("overlapping offsets", {"a": F32_2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
     bytes(12), None, lsio.CorruptDataError),
    ("hole between tensors", {"a": F32_2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}},
     bytes(20), None, lsio.CorruptDataError),
    ("hole at the start", {"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12), None,
     lsio.CorruptDataError),
    ("end before begin", {"a": {"dtype": "U8", "shape": [0], "data_offsets": [8, 0]}}, DATA8, None,
     lsio.CorruptDataError),
    ("nbytes not shape*dtype", {"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, DATA8, None,
     lsio.CorruptDataError),
    ("shape overflows", {"a": {"dtype": "U8", "shape": [2**32, 2**32], "data_offsets": [0, 8]}}, DATA8,
     None, lsio.CorruptDataError),
    ("bits overflow", {"a": {"dtype": "F64", "shape": [2**62], "data_offsets": [0, 8]}}, DATA8,
     None, lsio.CorruptDataError),
    ("sub-byte misaligned", {"a": {"dtype": "F6_E2M3", "shape": [3], "data_offsets": [0, 2]}}, b"xy",
     None, lsio.CorruptDataError),
    ("offsets past the end", {"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, DATA8, None,
     lsio.CorruptDataError),
    ("trailing bytes", {"a": F32_2}, DATA8 + b"extra", None, lsio.CorruptDataError),
]


@pytest.mark.parametrize("case", CORRUPT, ids=[c[0] for c in CORRUPT])
def test_corrupt_files_raise_typed_errors(tmp_path, case):
    name, header, data, n, cls = case
    path = tmp_path / "bad.safetensors"
    if header is None:
        path.write_bytes(data)
    else:
        raw_file(path, header, data, n)
    assert st_rejects(path), f"safetensors accepts {name!r}: the case is wrong"
    for call in (lsio.safetensors.load, lsio.safetensors.load_torch, lsio.safetensors.info):
        with pytest.raises(cls) as e:
            call(path)
        assert isinstance(e.value, lsio.Error)
        assert str(path) in str(e.value) and e.value.path == str(path), (call, str(e.value))


def test_truncated_real_checkpoint(ckpt_dir, tmp_path):
    raw = (ckpt_dir / "pt.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    for cut, cls in ((len(raw) - 1, lsio.CorruptDataError), (8 + n // 2, lsio.CorruptDataError),
                     (4, lsio.FormatError)):
        path = tmp_path / f"cut{cut}.safetensors"
        path.write_bytes(raw[:cut])
        with pytest.raises(cls, match=str(path)):
            lsio.safetensors.load_torch(path, ["u8"])  # a tensor far from the cut: still refused


# (id, header, data): files the safetensors crate accepts; lsio loads them the same.
ODD_BUT_VALID = [
    ("empty header", {}, b""),
    ("extra fields", {"a": {**F32_2, "extra": [1, 2]}}, DATA8),
    ("repeated name: last wins", b'{"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}, '
     b'"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}', DATA8),
    ("whitespace around", b'  \n{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}\t  ', DATA8),
    ("metadata null", {"__metadata__": None, "a": F32_2}, DATA8),
    ("zero-size tensors share offsets", {"z": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]},
                                         "a": F32_2, "y": {"dtype": "I64", "shape": [3, 0], "data_offsets": [8, 8]}},
     DATA8),
    ("empty name", {"": F32_2}, DATA8),
    ("unaligned offsets", {"b": {"dtype": "U8", "shape": [3], "data_offsets": [0, 3]},
                           "a": {"dtype": "F32", "shape": [2], "data_offsets": [3, 11]}}, bytes(range(11))),
    ("0-d bool", {"t": {"dtype": "BOOL", "shape": [], "data_offsets": [0, 1]}}, b"\x01"),
]


@pytest.mark.parametrize("case", ODD_BUT_VALID, ids=[c[0] for c in ODD_BUT_VALID])
def test_odd_but_valid_files(tmp_path, case):
    name, header, data = case
    path = raw_file(tmp_path / "odd.safetensors", header, data)
    want = st_torch.load_file(path)
    got = lsio.safetensors.load_torch(path)
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].dtype == w.dtype and got[k].shape == w.shape and tbytes(got[k]) == tbytes(w), k
    npgot = lsio.safetensors.load(path)
    for k, w in want.items():
        assert npgot[k].shape == tuple(w.shape) and npgot[k].tobytes() == tbytes(w), k


def test_f6_is_unsupported_in_both(tmp_path):
    path = raw_file(tmp_path / "f6.safetensors",
                    {"a": {"dtype": "F6_E3M2", "shape": [4], "data_offsets": [0, 3]}}, b"abc")
    with pytest.raises(lsio.UnsupportedError, match="F6_E3M2"):
        lsio.safetensors.load(path)
    with pytest.raises(lsio.UnsupportedError, match="F6_E3M2"):
        lsio.safetensors.load_torch(path)
    assert lsio.safetensors.info(path)["a"].nbytes == 3


def test_sharded_errors(ckpt_dir, tmp_path):
    src = ckpt_dir / "sharded"
    index = json.loads((src / lst.INDEX_NAME).read_text())
    shard = sorted(set(index["weight_map"].values()))[1]

    missing = tmp_path / "missing"
    missing.mkdir()
    for f in src.iterdir():
        if f.name != shard:
            (missing / f.name).write_bytes(f.read_bytes())
    with pytest.raises(lsio.StorageError) as e:
        lsio.safetensors.load(missing)
    assert shard in str(e.value) and lst.INDEX_NAME in str(e.value)
    ok = [n for n, s in index["weight_map"].items() if s != shard]
    assert set(lsio.safetensors.load_torch(missing, ok)) == set(ok)  # other shards still load

    lying = tmp_path / "lying"
    lying.mkdir()
    for f in src.iterdir():
        (lying / f.name).write_bytes(f.read_bytes())
    bad = dict(index, weight_map={**index["weight_map"], "ghost": shard})
    (lying / lst.INDEX_NAME).write_text(json.dumps(bad))
    with pytest.raises(lsio.CorruptDataError, match="ghost") as e:
        lsio.safetensors.load(lying)
    assert shard in str(e.value)

    for text in ("{not json", "[]", '{"weight_map": []}', '{"weight_map": {"a": 3}}',
                 '{"weight_map": {"a": "../x.safetensors"}}', '{"weight_map": {"a": "/etc/x"}}'):
        p = tmp_path / "bad.index.json"
        p.write_text(text)
        with pytest.raises(lsio.FormatError, match="bad.index.json"):
            lsio.safetensors.load(p)

    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for f in src.iterdir():
        (corrupt / f.name).write_bytes(f.read_bytes()[:-3] if f.name == shard else f.read_bytes())
    with pytest.raises(lsio.CorruptDataError, match=shard):
        lsio.safetensors.load(corrupt)


def test_missing_file(tmp_path):
    with pytest.raises(lsio.StorageError, match="nope.safetensors") as e:
        lsio.safetensors.load(tmp_path / "nope.safetensors")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(lsio.StorageError):
        lsio.safetensors.load(tmp_path / "nope.index.json")


# --------------------------------------------------------------------------------------
# Remote: moto S3 and nginx


@pytest.fixture
def _no_ambient_aws(monkeypatch, tmp_path):
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def check_remote(url_of, options, ckpt_dir):
    local = lsio.safetensors.load_torch(ckpt_dir / "pt.safetensors")
    got = lsio.safetensors.load_torch(url_of("pt.safetensors"), storage_options=options)
    assert list(got) == list(local)
    for k, t in local.items():
        assert got[k].dtype == t.dtype and got[k].shape == t.shape and tbytes(got[k]) == tbytes(t), k
    np_local = lsio.safetensors.load(ckpt_dir / "np.safetensors")
    np_got = lsio.safetensors.load(url_of("np.safetensors"), storage_options=options, threads=2)
    for k, a in np_local.items():
        assert np_got[k].dtype == a.dtype and np_got[k].tobytes() == a.tobytes(), k

    sharded_local = lsio.safetensors.load_torch(ckpt_dir / "sharded")
    for where in (url_of("sharded"), url_of(f"sharded/{lst.INDEX_NAME}")):
        got = lsio.safetensors.load_torch(where, storage_options=options)
        assert list(got) == list(sharded_local)
        for k, t in sharded_local.items():
            assert tbytes(got[k]) == tbytes(t), (where, k)
    sub = lsio.safetensors.load(url_of("sharded"), ["big", "u8"], storage_options=options)
    assert sub["big"].tobytes() == tbytes(sharded_local["big"])
    assert lsio.safetensors.metadata(url_of("pt.safetensors"), storage_options=options) == {
        "format": "pt", "x": "y"}
    assert lsio.safetensors.metadata(url_of("sharded"), storage_options=options)["total_size"] > 0
    single = lsio.safetensors.load_torch(url_of("single"), storage_options=options)
    assert set(single) == {"w", "b"}

    with pytest.raises(lsio.StorageError):
        lsio.safetensors.load(url_of("nope.safetensors"), storage_options=options)
    # Truncated: the chosen tensor is intact, the file is not: refused all the same.
    with pytest.raises(lsio.CorruptDataError, match="cut.safetensors"):
        lsio.safetensors.load(url_of("cut.safetensors"), ["u8"], storage_options=options)
    with pytest.raises(lsio.CorruptDataError, match="cut.safetensors"):
        lsio.safetensors.load_torch(url_of("cut.safetensors"), ["empty"], storage_options=options)
    with pytest.raises(lsio.CorruptDataError, match="cuthdr.safetensors"):
        lsio.safetensors.load(url_of("cuthdr.safetensors"), storage_options=options)
    with pytest.raises(lsio.FormatError, match="tiny.safetensors"):
        lsio.safetensors.load(url_of("tiny.safetensors"), storage_options=options)
    with pytest.raises(lsio.CorruptDataError, match="model-00002-of-00003.safetensors") as e:
        lsio.safetensors.load_torch(url_of("sharded_cut"), storage_options=options)
    assert "model-00001" not in str(e.value) and "model-00003" not in str(e.value)


@pytest.fixture(scope="module")
def remote_dir(ckpt_dir, tmp_path_factory):
    """ckpt_dir plus truncated files for the remote tests (remote sizes are not known up front)."""
    raw = (ckpt_dir / "pt.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    (ckpt_dir / "cut.safetensors").write_bytes(raw[:-2])
    (ckpt_dir / "cuthdr.safetensors").write_bytes(raw[:8 + n // 2])
    (ckpt_dir / "tiny.safetensors").write_bytes(raw[:5])
    cut = ckpt_dir / "sharded_cut"  # the second shard lost its last byte
    cut.mkdir(exist_ok=True)
    for f in sorted((ckpt_dir / "sharded").iterdir()):
        data = f.read_bytes()
        (cut / f.name).write_bytes(data[:-1] if f.name.startswith("model-00002") else data)
    return ckpt_dir


def test_remote_s3(moto_s3, remote_dir, _no_ambient_aws):
    moto_s3.upload_dir(remote_dir, "lsio-safetensors", "ckpt")
    options = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
               "secret": moto_s3.secret_access_key, "region": moto_s3.region, **OPTS}
    check_remote(lambda p: f"s3://lsio-safetensors/ckpt/{p}", options, remote_dir)


def test_remote_http(nginx_server, remote_dir):
    server = nginx_server(remote_dir)
    check_remote(lambda p: server.url(p), OPTS, remote_dir)
