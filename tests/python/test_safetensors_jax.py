"""lsio.safetensors.load_jax, chunk_plan and load_chunk, on JAX's CPU backend with 8 host devices
(conftest.py sets ``XLA_FLAGS`` before jax is imported).

* Every dtype safetensors writes (through torch: bf16, the FP8 kinds, unsigned and 64-bit
  ints, complex64, bool; 0-d and empty tensors), on 1-D and 2-D meshes with first-axis, last-
  axis, both-axes, middle-axis and replicated shardings: ``load_jax`` equals the tensors read
  by the safetensors package and placed with ``jax.device_put`` and the same sharding, shard
  by shard, bit for bit; with ``jax_enable_x64`` on and off (64-bit types canonicalised as
  device_put does).
* Counts: each distinct box read once (replicas once per process), bytes read equal the
  boxes' bytes with ``max_gap=0``; groups bounded by ``group_bytes`` (and its env variable).
* ``dtype`` as one dtype (floating tensors only), a dict, a callable; sharded checkpoints by
  index; remote through moto's S3 server.
* Two processes with ``jax.distributed`` on 127.0.0.1, 4 devices each: every sharding that
  splits the tensors across both makes each process read about half of the data (exactly its
  shards with ``max_gap=0``), and every addressable shard is right (jax_shard_worker.py).
* Errors: a sharding that does not fit (ValueError naming the tensor), missing dict entries,
  wrong types, F4, no jax.
* The chunk plan: deterministic, never splits a tensor, owners ``i % process_count``,
  ``LSIO_SAFETENSORS_CHUNK_BYTES``; ``load_chunk`` equals ``load``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import lsio
import lsio.safetensors as lst

jax = pytest.importorskip("jax")
torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")
import jax.numpy as jnp  # noqa: E402
import safetensors.torch as st_torch  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.numpy import save_file as save_numpy  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
if jax.device_count() < 8 or jax.devices()[0].platform != "cpu":  # conftest.py asks for 8 CPU devices
    pytest.skip(f"needs 8 JAX CPU devices (XLA_FLAGS / JAX_PLATFORMS set before jax was imported); "
                f"this process has {jax.devices()}", allow_module_level=True)

# torch dtype -> numpy dtype of the same bytes (ml_dtypes for the float kinds numpy lacks).
_NP = {
    torch.bool: np.bool_, torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
    torch.uint16: np.uint16, torch.int32: np.int32, torch.uint32: np.uint32, torch.int64: np.int64,
    torch.uint64: np.uint64, torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16,
    torch.float32: np.float32, torch.float64: np.float64, torch.complex64: np.complex64,
    torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2,
}


def as_numpy(t) -> np.ndarray:
    """A torch tensor's bytes as numpy (safetensors' own bytes, no conversion)."""
    dt = np.dtype(_NP[t.dtype])
    raw = t.contiguous().reshape(-1).view(torch.uint8).numpy() if t.numel() else np.zeros(0, np.uint8)
    return raw.view(dt).reshape(tuple(t.shape))


def all_dtypes_checkpoint(path) -> None:
    g = torch.Generator().manual_seed(3)
    out = {}
    for k, dt in enumerate(_NP):
        shape = (16, 24) if k % 2 else (8, 8, 16)
        if dt.is_floating_point or dt.is_complex:
            t = (torch.randn(shape, generator=g) * 4).to(dt)
        elif dt == torch.bool:
            t = torch.rand(shape, generator=g) > 0.5
        else:
            t = torch.randint(0, 120, shape, generator=g).to(dt)
        out[f"t_{str(dt).split('.')[-1]}"] = t
    out["scalar"] = torch.tensor(2.5, dtype=torch.float32)
    out["empty"] = torch.zeros((0, 8), dtype=torch.bfloat16)
    out["vec"] = torch.arange(8, dtype=torch.int32)
    st_torch.save_file(out, str(path), metadata={"format": "pt"})


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("jaxckpt")
    all_dtypes_checkpoint(root / "all.safetensors")
    return root


@pytest.fixture
def x64():
    """jax_enable_x64 on for one test, then back."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def reference(path) -> dict:
    """The checkpoint read by the safetensors package (its torch loader), as numpy."""
    with safe_open(str(path), "pt") as f:
        return {k: as_numpy(f.get_tensor(k)) for k in f.keys()}


def mesh(shape, names):
    return Mesh(np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape), names)


# (mesh shape, axis names, spec for tensors of rank 2, spec for rank 3)
LAYOUTS = {
    "rows8": ((8,), ("x",), P("x"), P("x")),
    "cols8": ((8,), ("x",), P(None, "x"), P(None, None, "x")),
    "middle": ((2,), ("x",), P(None, "x"), P(None, "x")),
    "grid2x4": ((2, 4), ("a", "b"), P("a", "b"), P("a", "b")),
    "grid4x2_swapped": ((4, 2), ("a", "b"), P("b", "a"), P(None, "a", "b")),
    "partly_replicated": ((2, 4), ("a", "b"), P("a"), P(None, "a")),
    "replicated": ((8,), ("x",), P(), P()),
}


def sharding_fn(layout):
    shape, names, spec2, spec3 = LAYOUTS[layout]
    m = mesh(shape, names)

    def fn(name, shp, dtype):
        spec = spec2 if len(shp) == 2 else spec3 if len(shp) == 3 else P()
        return NamedSharding(m, spec)   # "empty" (0, 8) too: boxes of no bytes
    return fn


def assert_same(got, want):
    """Two jax.Arrays: same shape, dtype, sharding, and every shard's bytes on the same device."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    assert got.sharding == want.sharding
    gs = sorted(got.addressable_shards, key=lambda s: s.device.id)
    ws = sorted(want.addressable_shards, key=lambda s: s.device.id)
    assert [s.device for s in gs] == [s.device for s in ws]
    for a, b in zip(gs, ws):
        assert a.index == b.index
        assert np.asarray(a.data).tobytes() == np.asarray(b.data).tobytes(), a.index


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("enable_x64", [True, False], ids=["x64", "x32"])
def test_every_dtype_equals_safetensors_and_device_put(ckpt, layout, enable_x64, request):
    if enable_x64:
        request.getfixturevalue("x64")
    path = ckpt / "all.safetensors"
    ref = reference(path)
    fn = sharding_fn(layout)
    stats: dict = {}
    got = lst.load_jax(path, fn, stats=stats, max_gap=0)
    assert list(got) == list(lst.info(path))
    for name, a in ref.items():
        want = jax.device_put(a, fn(name, a.shape, a.dtype))
        assert_same(got[name], want)
        if not enable_x64 and a.dtype.itemsize == 8 and a.dtype.kind != "c":
            assert got[name].dtype.itemsize == 4, name  # canonicalised as device_put does
    data = sum(a.nbytes for a in ref.values())
    assert stats["tensors"] == len(ref)
    # One process holds every shard: every byte is read once, replicas included, no gaps.
    assert stats["bytes_read"] == data
    assert stats["bytes_needed"] == data
    assert stats["device_puts"] == sum(len(fn(n, a.shape, a.dtype).device_set) for n, a in ref.items())


def test_flax_loader_and_device_put_agree(tmp_path):
    """The literal 'safetensors + jax.device_put': safetensors' flax loader, then device_put."""
    import safetensors.flax as st_flax

    rng = np.random.default_rng(0)
    tensors = {"w": rng.standard_normal((64, 32)).astype(np.float32),
               "b": rng.standard_normal((32,)).astype(np.float32),
               "ids": rng.integers(0, 1000, (16, 8)).astype(np.int32)}
    save_numpy(tensors, str(tmp_path / "m.safetensors"))
    shardings = {"w": NamedSharding(mesh((2, 4), ("a", "b")), P("a", "b")),
                 "b": NamedSharding(mesh((8,), ("x",)), P("x")),
                 "ids": NamedSharding(mesh((8,), ("x",)), P(None, "x"))}
    got = lst.load_jax(tmp_path / "m.safetensors", shardings)
    for name, arr in st_flax.load_file(str(tmp_path / "m.safetensors")).items():
        assert_same(got[name], jax.device_put(arr, shardings[name]))


def test_replicas_are_read_once(ckpt):
    path = ckpt / "all.safetensors"
    info = lst.info(path)
    stats: dict = {}
    lst.load_jax(path, NamedSharding(mesh((8,), ("x",)), P()), stats=stats)
    assert stats["shards_read"] == len(info)                     # one box per tensor
    assert stats["device_puts"] == 8 * len(info)                 # put on all 8 devices
    assert stats["bytes_read"] == sum(t.nbytes for t in info.values())
    # Partly replicated: 2 distinct row blocks, each on 4 devices.
    stats = {}
    m = mesh((2, 4), ("a", "b"))
    lst.load_jax(path, NamedSharding(m, P("a")), names=["t_float32", "t_int64"], stats=stats, max_gap=0)
    assert stats["shards_read"] == 4 and stats["device_puts"] == 16
    assert stats["bytes_read"] == info["t_float32"].nbytes + info["t_int64"].nbytes


def test_box_runs_are_the_boxes_bytes():
    """A box's runs, concatenated, are its bytes in C order, and no two runs touch (each is
    as long as it can be)."""
    from lsio._safetensors_shards import box_runs

    rng = np.random.default_rng(11)
    for _ in range(300):
        shape = tuple(int(x) for x in rng.integers(1, 7, rng.integers(0, 5)))
        a = rng.integers(0, 1 << 30, shape).astype(np.int32)
        box = tuple((int(lo), int(lo + rng.integers(0, n - lo + 1)))
                    for n in shape for lo in [rng.integers(0, n + 1)])
        offs, run = box_runs(shape, 4, box)
        raw = a.tobytes()
        got = b"".join(raw[o:o + run] for o in offs.tolist())
        assert got == np.ascontiguousarray(a[tuple(slice(*b) for b in box)]).tobytes(), (shape, box)
        assert all(y - x > run for x, y in zip(offs.tolist(), offs.tolist()[1:])), (shape, box)


def test_strided_boxes_coalesce_within_max_gap(tmp_path):
    """One column shard of a row-major tensor is 512 strided runs: the engine merges them with
    the default gap (reading the other columns too), and reads exactly them with max_gap=0."""
    from lsio._safetensors_shards import box_runs

    a = np.arange(512 * 256, dtype=np.float32).reshape(512, 256)   # 1 KiB rows
    save_numpy({"a": a}, str(tmp_path / "a.safetensors"))
    t = lst.info(tmp_path / "a.safetensors")["a"]
    offs, run = box_runs(a.shape, 4, ((0, 512), (64, 96)))          # 128-byte runs
    ranges = [(t.offset + int(o), run) for o in offs]
    exact: dict = {}
    got = lsio.read_ranges(tmp_path / "a.safetensors", ranges, max_gap=0, stats=exact)
    assert b"".join(g.tobytes() for g in got) == a[:, 64:96].tobytes()
    assert exact["requests"] == 512 and exact["bytes_read"] == 512 * 128
    merged: dict = {}
    lsio.read_ranges(tmp_path / "a.safetensors", ranges, stats=merged)
    assert merged["requests"] == 1 and merged["bytes_read"] == 511 * 1024 + 128


def test_groups_bound_what_is_read_at_once(ckpt, monkeypatch):
    """Groups of whole tensors of about group_bytes; at most two groups' host buffers alive;
    a strided tensor read whole in one call (its gaps are its other boxes: read once)."""
    path = ckpt / "all.safetensors"
    ref = reference(path)
    fn = sharding_fn("grid4x2_swapped")   # rank 3: the last two axes split, strided boxes
    from lsio import _safetensors_shards as shards

    real = shards._read_group
    real_landed = shards._landed
    seen, unwaited = [], []
    waited = [0]

    def spy(ck, tensors, group, *a, **k):
        unwaited.append(len(seen) - waited[0])   # groups read whose transfers were not awaited
        buf, starts = real(ck, tensors, group, *a, **k)
        seen.append((buf.nbytes, {tensors[p.tensor].info.name for p in group}))
        assert buf.ctypes.data % 64 == 0
        return buf, starts

    def landed(arrays):
        waited[0] += 1
        real_landed(arrays)
    monkeypatch.setattr(shards, "_read_group", spy)
    monkeypatch.setattr(shards, "_landed", landed)
    stats: dict = {}
    got = lst.load_jax(path, fn, group_bytes=1024, stats=stats)
    largest = max(a.nbytes for a in ref.values())
    assert stats["groups"] == len(seen) > 10
    names = [n for _, group in seen for n in group]
    assert sorted(names) == sorted(ref)                 # each tensor in exactly one group
    for nbytes, group in seen:
        assert nbytes <= 1024 + 64 * 8 or len(group) == 1, group  # several only while they fit
        assert nbytes <= largest + 64 * 8
    assert max(unwaited) <= 1, unwaited                  # + the one being read: two groups
    assert stats["bytes_read"] == stats["bytes_needed"]  # default gap: nothing read twice
    for name, a in ref.items():
        assert_same(got[name], jax.device_put(a, fn(name, a.shape, a.dtype)))
    seen.clear()
    monkeypatch.setenv("LSIO_JAX_GROUP_BYTES", "8K")
    stats = {}
    lst.load_jax(path, fn, stats=stats)
    assert 1 < stats["groups"] < len(ref) and max(n for n, _ in seen) <= max(8192, largest) + 64 * 8
    monkeypatch.setenv("LSIO_JAX_GROUP_BYTES", "lots")
    with pytest.raises(ValueError, match="LSIO_JAX_GROUP_BYTES"):
        lst.load_jax(path, fn)


def test_groups_follow_the_file_not_the_names(tmp_path):
    """Names in another order than the file: groups still take neighbours in the file, so no
    merged request of one group covers a tensor that another group reads again."""
    a = {f"t{i}": np.full((8, 256), i, np.float32) for i in range(6)}      # 8 KiB each, in order
    save_numpy(a, str(tmp_path / "m.safetensors"))
    names = ["t0", "t5", "t2", "t1", "t4", "t3"]
    stats: dict = {}
    got = lst.load_jax(tmp_path / "m.safetensors", NamedSharding(mesh((8,), ("x",)), P("x")), names=names,
                       group_bytes=16 << 10, max_gap=64 << 10, stats=stats)
    assert list(got) == names
    for n in names:
        assert np.array_equal(np.asarray(got[n]), a[n])
    assert stats["groups"] == 3 and stats["bytes_read"] == stats["bytes_needed"] == 6 * 8192


def test_strided_tensor_larger_than_a_group_is_read_once(tmp_path):
    """A column-sharded tensor far larger than group_bytes: one engine call, each byte once
    (before: one call per box, each merging across the others' columns, 8x the bytes)."""
    a = np.random.default_rng(2).standard_normal((256, 512)).astype(np.float32)  # 512 KiB
    save_numpy({"a": a}, str(tmp_path / "a.safetensors"))
    sh = NamedSharding(mesh((8,), ("x",)), P(None, "x"))
    stats: dict = {}
    got = lst.load_jax(tmp_path / "a.safetensors", sh, group_bytes=16 << 10, stats=stats)
    assert_same(got["a"], jax.device_put(a, sh))
    assert stats["groups"] == 1 and stats["bytes_read"] == a.nbytes


def test_dtype_conversion(ckpt):
    path = ckpt / "all.safetensors"
    ref = reference(path)
    sh = NamedSharding(mesh((8,), ("x",)), P())
    got = lst.load_jax(path, sh, dtype=jnp.bfloat16, names=["t_float32", "t_float16", "t_int32", "t_bool"])
    assert got["t_float32"].dtype == jnp.bfloat16 and got["t_float16"].dtype == jnp.bfloat16
    assert np.asarray(got["t_float32"]).tobytes() == ref["t_float32"].astype(ml_dtypes.bfloat16).tobytes()
    assert got["t_int32"].dtype == jnp.int32 and got["t_bool"].dtype == jnp.bool_  # not floating: kept
    got = lst.load_jax(path, sh, dtype={"t_int32": np.float32}, names=["t_int32", "t_float16"])
    assert got["t_int32"].dtype == jnp.float32 and got["t_float16"].dtype == jnp.float16
    assert np.array_equal(np.asarray(got["t_int32"]), ref["t_int32"].astype(np.float32))
    calls = []

    def choose(name, shape, stored):
        calls.append((name, shape, stored))
        return np.float32 if stored == ml_dtypes.bfloat16 else None
    got = lst.load_jax(path, sh, dtype=choose, names=["t_bfloat16", "t_uint8"])
    assert got["t_bfloat16"].dtype == jnp.float32 and got["t_uint8"].dtype == jnp.uint8
    shapes = {n: a.shape for n, a in ref.items()}
    assert calls == [("t_bfloat16", shapes["t_bfloat16"], np.dtype(ml_dtypes.bfloat16)),
                     ("t_uint8", shapes["t_uint8"], np.dtype(np.uint8))]


def test_sharded_checkpoint_by_index(tmp_path):
    rng = np.random.default_rng(1)
    tensors = {f"layer{i}.w": rng.standard_normal((32, 16)).astype(np.float32) for i in range(5)}
    weight_map = {}
    for k, name in enumerate(tensors):
        shard = f"model-{k % 2 + 1:05d}-of-00002.safetensors"
        weight_map[name] = shard
    for shard in set(weight_map.values()):
        save_numpy({n: tensors[n] for n, s in weight_map.items() if s == shard}, str(tmp_path / shard))
    (tmp_path / lst.INDEX_NAME).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    sh = NamedSharding(mesh((2, 4), ("a", "b")), P("b", "a"))
    got = lst.load_jax(tmp_path, sh)
    assert list(got) == list(weight_map)
    for name, a in tensors.items():
        assert_same(got[name], jax.device_put(a, sh))
    sub = lst.load_jax(tmp_path / lst.INDEX_NAME, sh, names=["layer3.w"])
    assert list(sub) == ["layer3.w"]


def test_errors(ckpt, tmp_path, monkeypatch):
    path = ckpt / "all.safetensors"
    m8 = mesh((8,), ("x",))
    with pytest.raises(ValueError, match=r"tensor 'scalar'.*does not fit"):
        lst.load_jax(path, NamedSharding(m8, P("x")), names=["scalar"])
    save_numpy({"odd": np.zeros((6, 5), np.float32)}, str(tmp_path / "odd.safetensors"))
    with pytest.raises(ValueError, match=r"odd.safetensors: tensor 'odd' of shape \[6, 5\].*does not fit"):
        lst.load_jax(tmp_path / "odd.safetensors", NamedSharding(m8, P("x")))
    with pytest.raises(ValueError, match=r"tensor 'vec'.*does not fit"):        # rank 1, spec of 2
        lst.load_jax(path, NamedSharding(m8, P(None, "x")), names=["vec"])
    with pytest.raises(KeyError, match="t_uint8"):
        lst.load_jax(path, {"t_float32": NamedSharding(m8, P())}, names=["t_float32", "t_uint8"])
    with pytest.raises(TypeError, match="shardings must be"):
        lst.load_jax(path, "replicated")
    with pytest.raises(TypeError, match="tensor 't_uint8'.*Sharding"):
        lst.load_jax(path, lambda *a: None, names=["t_uint8"])
    with pytest.raises(KeyError, match="no tensor named"):
        lst.load_jax(path, NamedSharding(m8, P()), names=["nope"])
    with pytest.raises(TypeError, match=r"all.safetensors: tensor 't_float32': 'bf17' is not a dtype"):
        lst.load_jax(path, NamedSharding(m8, P()), names=["t_float32"], dtype={"t_float32": "bf17"})
    with pytest.raises(TypeError, match=r"tensor 't_float32'.*not one jax can hold"):
        lst.load_jax(path, NamedSharding(m8, P()), names=["t_float32"], dtype=np.dtype("U3"))
    with pytest.raises(ValueError, match="must be below 2"):
        lst.load_jax(path, NamedSharding(m8, P()), max_gap=1 << 64)
    f4 = torch.zeros((4, 8), dtype=torch.float4_e2m1fn_x2) if hasattr(torch, "float4_e2m1fn_x2") else None
    if f4 is not None:
        st_torch.save_file({"f4": f4}, str(tmp_path / "f4.safetensors"))
        with pytest.raises(lsio.UnsupportedError, match="f4"):
            lst.load_jax(tmp_path / "f4.safetensors", NamedSharding(m8, P()))
    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(ImportError, match="pip install jax"):
        lst.load_jax(path, None)


def test_import_does_not_load_jax(ckpt):
    code = ("import sys, lsio, lsio.safetensors as s; "
            f"plan = s.chunk_plan({str(ckpt / 'all.safetensors')!r}); s.load_chunk(plan[0]); s.Chunk; "
            "assert 'jax' not in sys.modules, 'jax imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert r.returncode == 0, r.stderr


def test_remote_s3(moto_s3, ckpt, tmp_path, monkeypatch):
    for var in list(os.environ):
        if var.startswith("AWS_"):
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    moto_s3.upload_dir(ckpt, "lsio-jax", "ckpt")
    options = {"endpoint_url": moto_s3.endpoint_url, "key": moto_s3.access_key_id,
               "secret": moto_s3.secret_access_key, "region": moto_s3.region,
               "timeout": 5, "connect_timeout": 2, "retries": 1}
    fn = sharding_fn("cols8")
    local = lst.load_jax(ckpt / "all.safetensors", fn)
    stats: dict = {}
    got = lst.load_jax("s3://lsio-jax/ckpt/all.safetensors", fn, storage_options=options, stats=stats,
                       max_gap=0)
    for name in local:
        assert_same(got[name], local[name])
    assert stats["bytes_read"] == stats["bytes_needed"]   # every box: the data end is read, no probe
    # Only some tensors: the data end is not among them, so one probe byte checks the file.
    stats = {}
    lst.load_jax("s3://lsio-jax/ckpt/all.safetensors", fn, names=["t_uint8"], storage_options=options,
                 stats=stats, max_gap=0)
    assert stats["bytes_read"] == stats["bytes_needed"] + 1
    plan = lst.chunk_plan("s3://lsio-jax/ckpt/all.safetensors", chunk_bytes=4096, storage_options=options)
    whole = lst.load(ckpt / "all.safetensors")
    for c in plan:
        for name, a in lst.load_chunk(c, storage_options=options).items():
            assert a.tobytes() == whole[name].tobytes()


# --------------------------------------------------------------------------------------
# Two processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_process_ckpt(tmp_path_factory):
    root = tmp_path_factory.mktemp("jax2p")
    rng = np.random.default_rng(7)
    tensors = {"embed": rng.standard_normal((256, 128)).astype(np.float32),
               "w1": rng.standard_normal((128, 64)).astype(np.float16),
               "ids": rng.integers(0, 1 << 30, (64, 32)).astype(np.int32),
               "norm": rng.standard_normal((64,)).astype(np.float32)}   # on process 1 only
    save_numpy(tensors, str(root / "m.safetensors"))
    return root / "m.safetensors", tensors


@pytest.mark.parametrize("case", ["rows", "columns", "mesh2d", "columns2d"])
def test_two_processes_each_read_their_half(two_process_ckpt, tmp_path, case):
    path, tensors = two_process_ckpt
    port = str(free_port())
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(os.path.abspath(p) for p in sys.path if p))
    env.pop("XLA_FLAGS", None)
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "jax_shard_worker.py"), str(i), port,
                               str(path), case, str(tmp_path / f"{i}.json")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in (0, 1)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    results = [json.loads((tmp_path / f"{i}.json").read_text()) for i in (0, 1)]
    split = sum(a.nbytes for a in tensors.values() if a.ndim == 2)
    replicated = sum(a.nbytes for a in tensors.values() if a.ndim != 2)
    for pid, r in enumerate(results):
        assert r["process_count"] == 2 and r["devices"] == 8
        assert r["checked"] == 4 * (len(tensors) - 1 + pid)   # "norm": process 1's devices only
        st = r["stats"]
        assert st["bytes_needed"] == split // 2 + replicated * pid
        if case.startswith("columns"):
            assert st["bytes_read"] == st["bytes_needed"]   # max_gap=0: exactly its shards
        else:
            assert st["bytes_read"] <= st["bytes_needed"] + 3 * (16 << 10)


# --------------------------------------------------------------------------------------
# The chunk plan


def test_chunk_plan_is_the_designs(ckpt, monkeypatch):
    path = ckpt / "all.safetensors"
    info = lst.info(path)
    order = sorted(info.values(), key=lambda t: t.offset)
    plan = lst.chunk_plan(path, chunk_bytes=2048, process_count=3)
    assert plan == lst.chunk_plan(path, chunk_bytes=2048, process_count=3)   # deterministic
    assert [n for c in plan for n in c.tensors] == [t.name for t in order]      # each tensor once, in order
    for c in plan:
        ts = [info[n] for n in c.tensors]
        assert c.owner == c.index % 3
        assert c.offset == ts[0].offset and c.offset + c.nbytes == ts[-1].offset + ts[-1].nbytes
        assert c.nbytes <= 2048 or len(ts) == 1                                  # big tensors alone
    for a, b in zip(plan, plan[1:]):  # a chunk ends only where the next tensor would overflow it
        nxt = info[b.tensors[0]]
        assert nxt.offset + nxt.nbytes - a.offset > 2048
    whole = lst.load(path)
    for c in plan:
        got = lst.load_chunk(c)
        assert list(got) == list(c.tensors)
        for name, a in got.items():
            assert a.dtype == whole[name].dtype and a.tobytes() == whole[name].tobytes(), name
    conv = lst.load_chunk(plan[0], dtype=np.float32)
    for name, a in conv.items():
        assert a.dtype == (np.float32 if whole[name].dtype.kind == "f" or whole[name].dtype == ml_dtypes.bfloat16
                           or "float8" in str(whole[name].dtype) else whole[name].dtype)
    assert len(lst.chunk_plan(path)) == 1                                       # 2 GiB default
    monkeypatch.setenv("LSIO_SAFETENSORS_CHUNK_BYTES", "1K")
    assert lst.chunk_plan(path, process_count=2) == lst.chunk_plan(path, chunk_bytes=1024, process_count=2)
    with pytest.raises(ValueError, match="process_count"):
        lst.chunk_plan(path, process_count=0)
    with pytest.raises(TypeError, match="chunk_plan"):
        lst.load_chunk("chunk 0")
    # process_count=None: jax.process_count() once jax.distributed is initialized, else 1
    # (asked earlier, jax would start its backends).
    monkeypatch.setattr(jax, "process_count", lambda: 3)
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    assert {c.owner for c in lst.chunk_plan(path, chunk_bytes=1024)} == {0}
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    assert [c.owner for c in lst.chunk_plan(path, chunk_bytes=1024)] == [
        c.index % 3 for c in lst.chunk_plan(path, chunk_bytes=1024, process_count=3)]


def test_load_chunk_refuses_a_replaced_file(tmp_path):
    a = np.arange(1000, dtype=np.float32)
    save_numpy({"a": a, "b": a * 2}, str(tmp_path / "m.safetensors"))
    plan = lst.chunk_plan(tmp_path / "m.safetensors", chunk_bytes=4000)
    assert [c.tensors for c in plan] == [("a",), ("b",)]
    save_numpy({"a": np.arange(2000, dtype=np.float16), "b": a * 3}, str(tmp_path / "m.safetensors"))
    assert (tmp_path / "m.safetensors").stat().st_size > 8000  # same offsets, another header
    with pytest.raises(lsio.StorageError, match="changed since chunk_plan") as e:
        lst.load_chunk(plan[0])
    assert e.value.errno == __import__("errno").ESTALE
    save_numpy({"a": a}, str(tmp_path / "m.safetensors"))                     # shorter
    with pytest.raises((lsio.StorageError, lsio.CorruptDataError), match="m.safetensors"):
        lst.load_chunk(plan[1])


def test_the_guides_examples_run(tmp_path, monkeypatch):
    """docs/guide/safetensors.md's JAX examples, as written, on a small checkpoint in ckpt/."""
    import re

    text = open(os.path.join(HERE, "..", "..", "docs", "guide", "safetensors.md")).read()
    section = text[text.index("## JAX: each process reads only its shards"):text.index("## dtypes")]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2
    rng = np.random.default_rng(4)
    tensors = {"lm_head.weight": rng.standard_normal((64, 16)).astype(np.float32),
               "norm": rng.standard_normal((16,)).astype(np.float32),
               "step": np.array([7], np.int64)}
    (tmp_path / "ckpt").mkdir()
    save_numpy(tensors, str(tmp_path / "ckpt" / "model.safetensors"))
    monkeypatch.chdir(tmp_path)
    env: dict = {}
    exec(compile(blocks[0], "safetensors.md:load_jax", "exec"), env)  # noqa: S102 - the guide's code
    params = env["params"]
    assert params["lm_head.weight"].dtype == jnp.bfloat16 and params["step"].dtype == jnp.int32
    assert np.asarray(params["lm_head.weight"]).tobytes() == tensors["lm_head.weight"].astype(
        ml_dtypes.bfloat16).tobytes()
    assert env["stats"]["bytes_read"] >= env["stats"]["bytes_needed"] > 0
    exec(compile(blocks[1], "safetensors.md:chunk_plan", "exec"), env)  # noqa: S102
    assert set(env["tensors"]) <= set(tensors) and env["tensors"]
