"""lsio.grain.GrainCropSource: Grain's RandomAccessDataSource protocol, used by Grain itself."""

from __future__ import annotations

import concurrent.futures
import pickle
import subprocess
import sys

import numpy as np
import pytest

zarr = pytest.importorskip("zarr")

import lsio  # noqa: E402
from lsio.grain import GrainCropSource  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402


@pytest.fixture(autouse=True)
def _absl_flags_parsed():
    """Grain 0.2.18 reads absl flags (--grain_enable_multiprocess_worker_profiling) when it
    starts worker processes and raises UnparsedFlagAccessError where no absl app parsed them,
    which is any pytest run once jax is installed (google/grain#1355). A Grain program run
    through absl.app never sees it; scripts and notebooks mark the flags parsed, as here."""
    try:
        from absl import flags
    except ImportError:
        yield
        return
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    yield


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("grain")
    x = np.random.default_rng(5).integers(0, 60000, size=(10, 30, 33)).astype(np.uint16)
    y = np.random.default_rng(6).standard_normal((10, 30)).astype(np.float64)
    zx = zarr.create_array(store=str(root / "x.zarr"), shape=x.shape, chunks=(2, 10, 11), shards=(4, 30, 33),
                           dtype=x.dtype, compressors=ZstdCodec(level=1))
    zx[:] = x
    zy = zarr.create_array(store=str(root / "y.zarr"), shape=y.shape, chunks=(3, 7), dtype=y.dtype)
    zy[:] = y
    return {"x": (str(root / "x.zarr"), x), "y": (str(root / "y.zarr"), y)}


def make_src(store, **kw):
    kw.setdefault("length", 40)
    kw.setdefault("seed", 1)
    return GrainCropSource({"x": lsio.open(store["x"][0]), "y": lsio.open(store["y"][0])},
                           {"x": (2, 6, 5), "y": (2, 6)}, **kw)


def expected(src, store, i):
    sx, sy = (s[0] for s in src.starts([i]))
    ex = store["x"][1][sx[0] : sx[0] + 2, sx[1] : sx[1] + 6, sx[2] : sx[2] + 5]
    ey = store["y"][1][sy[0] : sy[0] + 2, sy[1] : sy[1] + 6]
    return ex, ey


def test_protocol_without_grain(store):
    # Importing lsio.grain imports neither grain nor torch.
    r = subprocess.run([sys.executable, "-c", "import lsio.grain, sys; print('grain' in sys.modules, 'torch' in sys.modules)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["False", "False"], r.stdout + r.stderr
    src = make_src(store)
    assert len(src) == 40
    for i in (0, 7, 39):
        rec = src[i]
        ex, ey = expected(src, store, i)
        np.testing.assert_array_equal(rec["x"], ex)
        np.testing.assert_array_equal(rec["y"], ey)
        assert rec["x"].dtype == np.uint16 and rec["y"].dtype == np.float64
    with pytest.raises(IndexError):
        src[40]


def test_deterministic_threadsafe_and_getitems(store):
    src = make_src(store)
    idx = list(range(40)) * 3
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        recs = list(ex.map(src.__getitem__, idx))
    batch = src._getitems(idx)
    for i, a, b in zip(idx, recs, batch):
        ex_, ey = expected(src, store, i)
        np.testing.assert_array_equal(a["x"], ex_)
        np.testing.assert_array_equal(b["x"], ex_)
        np.testing.assert_array_equal(b["y"], ey)
    stacked = src.read_batch([0, 1, 2])
    assert stacked["x"].shape == (3, 2, 6, 5)


def test_repr_stable_and_pickle(store):
    a, b = make_src(store), make_src(store)
    assert repr(a) == repr(b)
    assert "0x" not in repr(a) and store["x"][0] in repr(a)
    assert repr(a) != repr(make_src(store, seed=2))
    c = pickle.loads(pickle.dumps(a))
    assert repr(c) == repr(a)
    for i in (3, 17):
        np.testing.assert_array_equal(c[i]["x"], a[i]["x"])
    # epoch changes the crops, deterministically.
    e1 = make_src(store, epoch=1)
    assert any(not np.array_equal(e1[i]["x"], a[i]["x"]) for i in range(10))
    np.testing.assert_array_equal(e1[5]["y"], make_src(store, epoch=1)[5]["y"])


def test_grain_map_dataset_batched(store):
    grain = pytest.importorskip("grain")
    src = make_src(store)
    assert isinstance(src, grain.sources.RandomAccessDataSource)
    ds = grain.MapDataset.source(src).batch(8)
    batches = list(ds)
    assert len(batches) == 5
    for b, batch in enumerate(batches):
        for j in range(8):
            ex, ey = expected(src, store, 8 * b + j)
            np.testing.assert_array_equal(batch["x"][j], ex)
            np.testing.assert_array_equal(batch["y"][j], ey)


def test_grain_dataloader_multiprocessing(store):
    grain = pytest.importorskip("grain")
    src = make_src(store, length=16, threads=1)
    sampler = grain.samplers.IndexSampler(num_records=len(src), shuffle=False, num_epochs=1,
                                          shard_options=grain.sharding.NoSharding())
    loader = grain.DataLoader(data_source=src, sampler=sampler, worker_count=2,
                              operations=[grain.transforms.Batch(batch_size=4)])
    got = list(loader)
    assert len(got) == 4
    # Workers each batch their own share of the records: match samples to records.
    want = {expected(src, store, i)[0].tobytes(): i for i in range(16)}
    assert len(want) == 16
    seen = []
    for batch in got:
        assert batch["x"].shape == (4, 2, 6, 5)
        for j in range(4):
            i = want.get(np.asarray(batch["x"][j]).tobytes())
            assert i is not None, "a sample that is no record of the source"
            np.testing.assert_array_equal(batch["y"][j], expected(src, store, i)[1])
            seen.append(i)
    assert sorted(seen) == list(range(16))


def test_grain_mp_prefetch(store):
    grain = pytest.importorskip("grain")
    src = make_src(store, length=12, threads=1)
    ds = grain.MapDataset.source(src).to_iter_dataset().mp_prefetch(grain.MultiprocessingOptions(num_workers=2))
    want = {expected(src, store, i)[0].tobytes(): i for i in range(12)}
    seen = sorted(want[np.asarray(rec["x"]).tobytes()] for rec in ds)
    assert seen == list(range(12))


def test_keys_beyond_int64_are_index_errors_not_wrapped(store):
    # A uint64 key of 2**64 - 1 used to be cast to int64 first (-1: the last record), and a
    # Python int beyond int64 raised OverflowError.
    src = make_src(store)
    for keys in (np.array([2**64 - 1], np.uint64), np.array([0, 2**63], np.uint64), [2**64 - 1], [2**70], [-(2**63) - 1]):
        with pytest.raises(IndexError):
            src._getitems(keys)
    with pytest.raises(IndexError):
        src[2**64 - 1]
    rec = src._getitems(np.array([39], np.uint64))[0]
    np.testing.assert_array_equal(rec["x"], src[39]["x"])
