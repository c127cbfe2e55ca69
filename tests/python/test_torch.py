"""lsio.torch: CropDataset, CropSampler, collate, worker_init_fn (in-process and 2 fork workers)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
zarr = pytest.importorskip("zarr")

import lsio  # noqa: E402
from lsio.torch import CropBatch, CropDataset, CropSampler, collate, worker_init_fn  # noqa: E402
from zarr.codecs import ZstdCodec  # noqa: E402

from torch.utils.data import DataLoader  # noqa: E402


@pytest.fixture(scope="module")
def arrays(tmp_path_factory):
    """Two arrays sharing (T, H) = (12, 40): x float32 (12, 40, 36) sharded, y int16 (12, 40)."""
    root = tmp_path_factory.mktemp("torch_stores")
    rng = np.random.default_rng(42)
    x = rng.standard_normal((12, 40, 36)).astype(np.float32)
    y = (np.arange(12 * 40).reshape(12, 40) % 30000).astype(np.int16)
    zx = zarr.create_array(
        store=str(root / "x.zarr"), shape=x.shape, chunks=(2, 8, 12), shards=(4, 16, 36), dtype=x.dtype,
        compressors=ZstdCodec(level=1),
    )
    zx[:] = x
    zy = zarr.create_array(store=str(root / "y.zarr"), shape=y.shape, chunks=(5, 7), dtype=y.dtype)
    zy[:] = y
    return {"x": (str(root / "x.zarr"), x), "y": (str(root / "y.zarr"), y)}


def crop_of(data, start, shape):
    return data[tuple(slice(int(s), int(s) + c) for s, c in zip(start, shape))]


def make_ds(arrays, **kw):
    kw.setdefault("length", 24)
    kw.setdefault("seed", 7)
    return CropDataset(
        {"x": lsio.open(arrays["x"][0]), "y": lsio.open(arrays["y"][0])},
        {"x": (3, 8, 10), "y": (1, 6)},
        **kw,
    )


def test_single_array_matches_reference(arrays):
    path, data = arrays["x"]
    ds = CropDataset(lsio.open(path), (2, 5, 7), length=10, seed=1)
    assert len(ds) == 10
    for i in range(10):
        t = ds[i]
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.shape == (2, 5, 7)
        (st,) = ds.source.starts([i])
        np.testing.assert_array_equal(t.numpy(), crop_of(data, st[0], (2, 5, 7)))


def test_origins_deterministic_and_depend_on_seed_epoch(arrays):
    a, b = make_ds(arrays), make_ds(arrays)
    keys = [(e, i) for e in range(3) for i in range(24)]
    sa = a.source.starts(keys)[0]
    np.testing.assert_array_equal(sa, b.source.starts(keys)[0])
    # Unpickled copies (what spawn workers get) agree too.
    c = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(sa, c.source.starts(keys)[0])
    # Different epochs / seeds give different crops (overwhelmingly likely, fixed seeds).
    assert not np.array_equal(a.source.starts([(0, i) for i in range(24)])[0], a.source.starts([(1, i) for i in range(24)])[0])
    d = make_ds(arrays, seed=8)
    assert not np.array_equal(sa, d.source.starts(keys)[0])
    # Integer keys use the dataset's epoch.
    a.set_epoch(2)
    np.testing.assert_array_equal(a.source.starts(list(range(24)))[0], a.source.starts([(2, i) for i in range(24)])[0])
    # Origins cover the valid range and stay inside it.
    big = CropDataset(lsio.open(arrays["x"][0]), (12, 40, 1), length=5000, seed=0)
    st = big.source.starts(list(range(5000)))[0]
    assert (st[:, :2] == 0).all() and st[:, 2].min() == 0 and st[:, 2].max() == 35


def test_multi_array_matching_coordinates(arrays):
    ds = make_ds(arrays)
    assert ds.source.shared_dims == 2
    for key in [(0, 0), (0, 5), (3, 23), 11]:
        s = ds[key]
        sx, sy = (st[0] for st in ds.source.starts([key]))
        np.testing.assert_array_equal(sx[:2], sy[:2])  # matching (T, H) origin
        assert s["x"].shape == (3, 8, 10) and s["y"].shape == (1, 6) and s["y"].dtype == torch.int16
        np.testing.assert_array_equal(s["x"].numpy(), crop_of(arrays["x"][1], sx, (3, 8, 10)))
        np.testing.assert_array_equal(s["y"].numpy(), crop_of(arrays["y"][1], sy, (1, 6)))
        # y's (T, H) window is contained in x's at the same origin.
        assert sy[0] == sx[0] and sy[1] == sx[1]


def test_tuple_structure_and_full_extent(arrays):
    ds = CropDataset(
        (lsio.open(arrays["x"][0]), lsio.open(arrays["y"][0])), ((4, 4, None), (4, None)), length=3, seed=0
    )
    x, y = ds[0]
    assert x.shape == (4, 4, 36) and y.shape == (4, 40)
    assert ds.source.shared_dims == 2


def test_crop_shape_with_fewer_dimensions_than_the_array_is_an_error(arrays):
    # (32, 32) on a (T, H, W) array used to become (32, 32, W) silently; numpy users expect
    # (T?, 32, 32). Neither is guessed: the error shows both explicit spellings.
    x = lsio.open(arrays["x"][0])
    assert x.ndim == 3
    with pytest.raises(ValueError, match=r"crop shape \(4, 4\) has 2 dimensions, the array 3 .*"
                                         r"e\.g\. \(1, 4, 4\) or \(None, 4, 4\)"):
        CropDataset(x, (4, 4), length=3)
    with pytest.raises(ValueError, match="has 4 dimensions, the array 3"):
        CropDataset(x, (1, 1, 4, 4), length=3)
    assert CropDataset(x, (None, 4, 4), length=3)[0].shape == (x.shape[0], 4, 4)


def test_getitems_equals_getitem(arrays):
    ds = make_ds(arrays)
    keys = [(0, 3), (1, 3), (0, 0), (2, 23), (0, 3)]
    batch = ds.__getitems__(keys)
    assert isinstance(batch, CropBatch) and len(batch) == len(keys)
    for j, k in enumerate(keys):
        one = ds[k]
        for name in ("x", "y"):
            torch.testing.assert_close(batch[j][name], one[name], rtol=0, atol=0)
            torch.testing.assert_close(batch.batch[name][j], one[name], rtol=0, atol=0)
    assert collate(batch) is batch.batch
    stacked = torch.utils.data.default_collate(batch)
    for name in ("x", "y"):
        torch.testing.assert_close(stacked[name], batch.batch[name], rtol=0, atol=0)


def test_getitems_one_read_crops_per_array(arrays, monkeypatch):
    ds = make_ds(arrays)
    calls = []
    for arr in ds.source.arrays:
        orig = arr.read_crops

        def spy(starts, shape, out=None, _orig=orig):
            calls.append(len(starts))
            return _orig(starts, shape, out)

        monkeypatch.setattr(arr, "read_crops", spy)
    ds.__getitems__([(0, i) for i in range(9)])
    assert calls == [9, 9]


def test_index_errors(arrays):
    ds = make_ds(arrays)
    with pytest.raises(IndexError):
        ds[24]
    with pytest.raises(IndexError):
        ds.__getitems__([(0, 1), (0, 99)])
    assert torch.equal(ds[-1]["x"], ds[23]["x"])
    with pytest.raises(ValueError):
        CropDataset(lsio.open(arrays["x"][0]), (13, 1, 1), length=1)


def test_fixed_origins(arrays):
    origins = np.array([[0, 0], [9, 32], [4, 4]])
    ds = CropDataset({"x": lsio.open(arrays["x"][0])}, {"x": (3, 8, 10)}, origins=origins, shared_dims=2)
    assert len(ds) == 3
    np.testing.assert_array_equal(ds[1]["x"].numpy(), arrays["x"][1][9:12, 32:40, 0:10])


def sampler_keys(sampler, epoch):
    sampler.set_epoch(epoch)
    return list(sampler)


@pytest.mark.parametrize("n,replicas,drop_last", [(24, 3, False), (25, 4, False), (25, 4, True), (7, 1, False)])
def test_sampler_sharding(n, replicas, drop_last):
    samplers = [CropSampler(n, num_replicas=replicas, rank=r, seed=5, drop_last=drop_last) for r in range(replicas)]
    for epoch in (0, 1):
        per_rank = [sampler_keys(s, epoch) for s in samplers]
        assert all(len(k) == len(s) for k, s in zip(per_rank, samplers))
        assert len({len(k) for k in per_rank}) == 1
        assert all(e == epoch for k in per_rank for e, _ in k)
        idx = [i for k in per_rank for _, i in k]
        if n % replicas == 0:
            assert sorted(idx) == list(range(n))  # each index exactly once
        elif drop_last:
            assert len(idx) == len(set(idx)) == (n // replicas) * replicas
        else:
            assert set(idx) == set(range(n)) and len(idx) == -(-n // replicas) * replicas
    # Shuffled order changes with the epoch, and is the same for a fresh sampler.
    s = CropSampler(100, num_replicas=1, rank=0, seed=5)
    assert [i for _, i in sampler_keys(s, 0)] != [i for _, i in sampler_keys(s, 1)]
    assert sampler_keys(s, 1) == sampler_keys(CropSampler(100, num_replicas=1, rank=0, seed=5), 1)
    assert [i for _, i in sampler_keys(CropSampler(10, shuffle=False, num_replicas=1, rank=0), 3)] == list(range(10))
    with pytest.raises(ValueError):
        CropSampler(10, num_replicas=2, rank=2)


def run_loader(ds, sampler, epochs, **kw):
    kw.setdefault("batch_size", 5)
    loader = DataLoader(ds, sampler=sampler, collate_fn=collate, **kw)
    out = []
    for e in epochs:
        sampler.set_epoch(e)
        out.extend([{k: v.clone() for k, v in b.items()} for b in loader])
    return out


def assert_batches_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            torch.testing.assert_close(x[k], y[k], rtol=0, atol=0)


def test_dataloader_workers_persistent_epochs_and_pin_memory(arrays):
    ref = run_loader(make_ds(arrays), CropSampler(24, num_replicas=1, rank=0, seed=1), [0, 1, 2])
    assert len(ref) == 15  # 5 batches per epoch; epochs give other crops
    assert not torch.equal(ref[0]["x"], ref[5]["x"]) and not torch.equal(ref[5]["x"], ref[10]["x"])
    # Persistent fork workers: the dataset's epoch is never updated, the sampler's keys carry it.
    got = run_loader(
        make_ds(arrays), CropSampler(24, num_replicas=1, rank=0, seed=1), [0, 1, 2],
        num_workers=2, persistent_workers=True, multiprocessing_context="fork",
        worker_init_fn=worker_init_fn, pin_memory=True,
    )
    assert_batches_equal(ref, got)
    # The default collate (stacking the per-sample views) gives the same batches.
    ds = make_ds(arrays)
    sampler = CropSampler(24, num_replicas=1, rank=0, seed=1)
    plain = []
    for e in [0, 1, 2]:
        sampler.set_epoch(e)
        plain.extend(DataLoader(ds, sampler=sampler, batch_size=5))
    assert_batches_equal(ref, plain)
    # Each batch is what the source reads for its keys.
    sampler.set_epoch(0)
    keys = list(sampler)[:5]
    st = ds.source.starts(keys)
    for j in range(5):
        np.testing.assert_array_equal(ref[0]["x"][j].numpy(), crop_of(arrays["x"][1], st[0][j], (3, 8, 10)))


def test_ranks_partition_the_epoch(arrays):
    ds = make_ds(arrays)
    seen = []
    for rank in range(2):
        sampler = CropSampler(ds, num_replicas=2, rank=rank, seed=3)
        sampler.set_epoch(4)
        seen.extend(list(sampler))
    assert sorted(i for _, i in seen) == list(range(24))
    # A sample depends only on its key, not on which rank reads it.
    e, i = seen[0]
    torch.testing.assert_close(make_ds(arrays)[(e, i)]["x"], ds[(e, i)]["x"], rtol=0, atol=0)


def test_sampler_state_dict_resume(arrays):
    full = run_loader(make_ds(arrays), CropSampler(24, num_replicas=1, rank=0, seed=2), [3])
    sampler = CropSampler(24, num_replicas=1, rank=0, seed=2)
    sampler.set_epoch(3)
    it = iter(sampler)
    [next(it) for _ in range(10)]
    state = sampler.state_dict()
    assert state["epoch"] == 3 and state["yielded"] == 10
    resumed = CropSampler(24, num_replicas=1, rank=0, seed=2)
    resumed.load_state_dict(pickle.loads(pickle.dumps(state)))
    rest = list(resumed)
    sampler.set_epoch(3)
    assert rest == list(sampler)[10:]
    with pytest.raises(ValueError):
        CropSampler(24, seed=99, num_replicas=1, rank=0).load_state_dict(state)
    assert len(full) == 5


@pytest.mark.parametrize("num_workers", [0, 2])
def test_stateful_dataloader_resume(arrays, num_workers):
    sdl = pytest.importorskip("torchdata.stateful_dataloader")
    kw = dict(batch_size=4, collate_fn=collate, num_workers=num_workers)
    if num_workers:
        kw.update(multiprocessing_context="fork", worker_init_fn=worker_init_fn)

    def make():
        ds = make_ds(arrays)
        sampler = CropSampler(ds, num_replicas=1, rank=0, seed=11)
        sampler.set_epoch(1)
        return sdl.StatefulDataLoader(ds, sampler=sampler, **kw)

    ref = [b for b in make()]
    loader = make()
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    state = loader.state_dict()
    del it
    loader2 = make()
    loader2.load_state_dict(state)
    rest = list(loader2)
    assert_batches_equal(ref, first + rest)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_plain_dataloader_resume_with_consumed(arrays, num_workers):
    """A plain DataLoader draws keys ahead of the loop; state_dict(consumed=...) resumes at the
    first sample the loop did not use, and without it (mid-epoch) a warning says so."""
    kw = dict(batch_size=4, collate_fn=collate, num_workers=num_workers)
    if num_workers:
        kw.update(multiprocessing_context="fork", worker_init_fn=worker_init_fn, prefetch_factor=3)

    def make():
        ds = make_ds(arrays)
        sampler = CropSampler(ds, num_replicas=1, rank=0, seed=11)
        sampler.set_epoch(1)
        return sampler, DataLoader(ds, sampler=sampler, **kw)

    ref = list(make()[1])
    sampler, loader = make()
    it = iter(loader)
    steps = 3
    first = [next(it) for _ in range(steps)]
    assert sampler.yielded >= steps * 4 + (4 if num_workers else 0)  # workers fetch ahead of the loop
    with pytest.warns(UserWarning, match="consumed="):
        sampler.state_dict()
    state = sampler.state_dict(consumed=steps * 4)
    del it
    sampler2, loader2 = make()
    sampler2.load_state_dict(state)
    rest = list(loader2)
    assert len(first + rest) == len(ref)
    assert_batches_equal(ref, first + rest)
    with pytest.raises(ValueError, match="consumed"):
        sampler.state_dict(consumed=10**9)


def _threads_in_worker(samples):
    info = torch.utils.data.get_worker_info()
    return [a.__getstate__()["config"]["threads"] for a in info.dataset.source.arrays]


@pytest.mark.parametrize("init", [None, worker_init_fn])
def test_workers_use_one_native_thread(arrays, init):
    ds = make_ds(arrays)
    assert [a.__getstate__()["config"]["threads"] for a in ds.source.arrays] == [0, 0]
    loader = DataLoader(ds, batch_size=4, num_workers=1, collate_fn=_threads_in_worker,
                        multiprocessing_context="fork", worker_init_fn=init)
    assert list(loader)[0] == [1, 1]
    # The main process's dataset is unchanged.
    assert [a.__getstate__()["config"]["threads"] for a in ds.source.arrays] == [0, 0]


# -- shared-memory batch slots reused by workers (lsio/_torch_pool.py) ------------------------


def expected_batches(ds, keys, batch_size):
    """What each batch must hold, read in this process (no workers, no pool)."""
    out = []
    for i in range(0, len(keys), batch_size):
        arrays = ds.source.read_batch_arrays(keys[i : i + batch_size])
        out.append(dict(zip(["x", "y"], [torch.from_numpy(a.copy()) for a in arrays])))
    return out


def with_worker_stats(inner):
    def collate_fn(samples):
        batch = inner(samples)
        return batch, lsio.torch.pool_stats()

    return collate_fn


def pooled_loader(arrays, collate_fn, *, n=60, batch_size=2, **kw):
    ds = make_ds(arrays, length=n)
    sampler = CropSampler(ds, num_replicas=1, rank=0, seed=4, shuffle=False)
    keys = list(sampler)
    kw.setdefault("num_workers", 1)
    kw.setdefault("multiprocessing_context", "fork")
    loader = DataLoader(ds, sampler=sampler, batch_size=batch_size, collate_fn=collate_fn,
                        worker_init_fn=worker_init_fn, **kw)
    return loader, expected_batches(ds, keys, batch_size)


def test_worker_reuses_slots_once_batches_are_dropped(arrays):
    before = lsio.torch.pool_stats()
    loader, want = pooled_loader(arrays, with_worker_stats(collate))
    last = None
    for k, (batch, stats) in enumerate(loader):
        # The main process receives plain tensors, equal to a direct read.
        assert type(batch["x"]) is torch.Tensor and type(batch["y"]) is torch.Tensor
        assert_batches_equal([want[k]], [batch])
        last = stats
        del batch
    assert k + 1 == len(want) == 30
    # 30 batches through at most 4 slots, and never a fresh tensor: slots were reused.
    assert 1 <= last["slots"] <= 4 and last["fresh"] == 0
    after = lsio.torch.pool_stats()
    assert after["pooled_batches"] - before["pooled_batches"] == 2 * 30  # x and y of each batch
    assert after["released"] - before["released"] >= 2 * 25


def test_batches_the_loop_keeps_are_never_overwritten(arrays):
    # The loop holds every batch, so no slot is ever released: the worker must fill its 4
    # slots, then fall back to fresh tensors, and every kept batch keeps its values.
    loader, want = pooled_loader(arrays, with_worker_stats(collate), num_workers=2)
    kept = [b for b, _ in loader]
    assert_batches_equal(want, kept)
    stats = [s for _, s in pooled_loader(arrays, with_worker_stats(collate), num_workers=2)[0]]
    assert all(s["slots"] <= 4 for s in stats)


def test_views_of_a_slot_sent_by_a_custom_collate_stay_intact(arrays):
    def views(samples):
        b = collate(samples)
        return {"x": b["x"][:, 1:], "y": b["y"][:, :, 2:]}  # views of the slot, not copies

    loader, want = pooled_loader(arrays, with_worker_stats(views))
    kept, stats = zip(*loader)
    for w, b in zip(want, kept):
        torch.testing.assert_close(b["x"], w["x"][:, 1:], rtol=0, atol=0)
        torch.testing.assert_close(b["y"], w["y"][:, :, 2:], rtol=0, atol=0)
    assert stats[-1]["slots"] <= 4


@pytest.mark.parametrize("inner", ["default", "copy"])
def test_batches_copied_in_the_worker_free_their_slot_at_once(arrays, inner):
    # torch's default collate stacks the per-sample views into a new tensor, and a collate
    # that transforms the batch sends the result: the slot itself never leaves the worker.
    if inner == "default":
        fn = torch.utils.data.default_collate
    else:
        def fn(samples):
            b = collate(samples)
            return {"x": b["x"] * 2, "y": b["y"] + 1}
    loader, want = pooled_loader(arrays, with_worker_stats(fn))
    kept, stats = zip(*loader)
    for w, b in zip(want, kept):
        scale = (2, 1) if inner == "copy" else (1, 0)
        torch.testing.assert_close(b["x"], w["x"] * scale[0], rtol=0, atol=0)
        torch.testing.assert_close(b["y"], w["y"] + scale[1], rtol=0, atol=0)
    assert stats[-1]["slots"] == 1 and stats[-1]["fresh"] == 0


def test_pool_batches_zero_allocates_per_batch(arrays):
    ds = make_ds(arrays, length=20, pool_batches=0)
    sampler = CropSampler(ds, num_replicas=1, rank=0, seed=4, shuffle=False)
    want = expected_batches(ds, list(sampler), 4)
    loader = DataLoader(ds, sampler=sampler, batch_size=4, collate_fn=with_worker_stats(collate),
                        num_workers=1, multiprocessing_context="fork")
    kept, stats = zip(*loader)
    assert_batches_equal(want, kept)
    assert stats[-1]["slots"] == 0
    with pytest.raises(ValueError, match="pool_batches"):
        make_ds(arrays, pool_batches=-1)


def test_slot_grows_for_a_bigger_batch(arrays):
    # A batch sampler with growing batch sizes: a free slot too small is replaced.
    ds = make_ds(arrays, length=30)
    sizes = [1, 2, 3, 4, 5, 6, 2, 7]
    groups, at = [], 0
    for s in sizes:
        groups.append([(0, i) for i in range(at, at + s)])
        at += s
    want = [{"x": torch.from_numpy(a), "y": torch.from_numpy(b)}
            for a, b in (ds.source.read_batch_arrays(g) for g in groups)]
    loader = DataLoader(ds, batch_sampler=groups, collate_fn=with_worker_stats(collate), num_workers=1,
                        multiprocessing_context="fork")
    got = []
    for b, s in loader:
        got.append({k: v.clone() for k, v in b.items()})
        del b
    assert_batches_equal(want, got)
    assert s["slots"] <= 4 and s["fresh"] == 0


def collate_with_stats(samples):  # module level: spawn workers unpickle it
    return collate(samples), lsio.torch.pool_stats()


def test_pooled_batches_under_spawn(arrays):
    loader, want = pooled_loader(arrays, collate_with_stats, n=12, multiprocessing_context="spawn")
    got = []
    for b, s in loader:
        got.append({k: v.clone() for k, v in b.items()})
        del b
    assert_batches_equal(want, got)
    assert 1 <= s["slots"] <= 4 and s["fresh"] == 0


def _as_plain_views(samples):  # module level (fork workers): a plain view of the slot leaves
    b = collate(samples)
    return {k: v.as_subclass(torch.Tensor)[:, :] for k, v in b.items()}, lsio.torch.pool_stats()


def test_plain_views_leaving_untracked_retire_their_slot(arrays):
    # TorchScript, or an explicit as_subclass, hands back a plain tensor on the slot's memory:
    # not tracked, so the slot must never be rewritten while the main process holds it.
    loader, want = pooled_loader(arrays, _as_plain_views)
    kept, stats = zip(*loader)
    assert_batches_equal(want, kept)
    assert stats[-1]["retired"] >= 4


def _forward_consumer(q, out):
    got = []
    while True:
        b = q.get()
        if b is None:
            break
        got.append(b)
    out.put([{k: v.numpy().copy() for k, v in g.items()} for g in got])


def test_batches_passed_on_to_another_process_are_never_rewritten(arrays):
    import time

    import torch.multiprocessing as mp

    loader, want = pooled_loader(arrays, collate)
    ctx = mp.get_context("fork")
    q, out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_forward_consumer, args=(q, out))
    p.start()
    before = lsio.torch.pool_stats()["kept"]
    for b in loader:
        q.put(b)  # the main process passes each batch on and drops it
        time.sleep(0.005)
        del b
    q.put(None)
    got = out.get(timeout=60)
    p.join(timeout=60)
    assert_batches_equal(want, [{k: torch.from_numpy(v) for k, v in g.items()} for g in got])
    assert lsio.torch.pool_stats()["kept"] > before


def _child_reads(b, out):
    import time

    time.sleep(0.5)  # the parent drops its batch and reads on meanwhile
    out.put({k: v.numpy().copy() for k, v in b.items()})


def test_a_child_forked_while_a_batch_is_held_keeps_it(arrays):
    import multiprocessing as mp

    loader, want = pooled_loader(arrays, collate, n=40)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    it = iter(loader)
    first = next(it)
    child = ctx.Process(target=_child_reads, args=(first, out))
    child.start()  # inherits `first` by fork
    del first
    rest = [{k: v.clone() for k, v in b.items()} for b in it]
    got = out.get(timeout=60)
    child.join(timeout=60)
    assert_batches_equal(want[:1], [{k: torch.from_numpy(v) for k, v in got.items()}])
    assert_batches_equal(want[1:], rest)


def _stats_collate(samples):
    lsio.torch.pool_stats()  # sweeps in a worker forked from a main process holding receipts
    return collate(samples)


def test_workers_forked_later_never_release_the_main_process_slots(arrays):
    # A second loader forked while the first one's batches are held: its worker inherits
    # the main process's receipts and must not count their releases a second time.
    ds = make_ds(arrays, length=200)
    sampler = CropSampler(ds, num_replicas=1, rank=0, seed=4, shuffle=False)
    want = expected_batches(ds, list(sampler), 2)
    a = DataLoader(ds, sampler=sampler, batch_size=2, collate_fn=collate, num_workers=1,
                   multiprocessing_context="fork", persistent_workers=True)
    b = DataLoader(make_ds(arrays, length=4, seed=1, pool_batches=0), batch_size=2, collate_fn=_stats_collate,
                   num_workers=1, multiprocessing_context="fork")
    window, checked = [], 0
    for k, batch in enumerate(a):
        window.append((k, batch))
        del batch
        if len(window) > 2:
            j, old = window.pop(0)
            assert_batches_equal([want[j]], [old])
            checked += 1
        if k % 5 == 0:
            list(b)
    assert checked == len(want) - 2


def _copies_and_saves(samples):
    import copy
    import io

    b = collate(samples)
    torch.save(b["x"], io.BytesIO())  # a copy: no send to count
    d = copy.deepcopy(b)
    assert type(d["x"]) is torch.Tensor and torch.equal(d["x"], b["x"])
    return b, lsio.torch.pool_stats()


def test_deepcopy_and_torch_save_in_a_worker(arrays):
    loader, want = pooled_loader(arrays, _copies_and_saves)
    got = []
    for b, s in loader:
        got.append({k: v.clone() for k, v in b.items()})
        del b
    assert_batches_equal(want, got)
    assert s["fresh"] == 0 and s["slots"] <= 4


def test_pool_recovers_after_every_slot_was_held(arrays):
    loader, want = pooled_loader(arrays, with_worker_stats(collate), n=120)
    it = iter(loader)
    held = [next(it) for _ in range(6)]  # more than the 4 slots: fresh tensors meanwhile
    del held
    got = [s for _, s in it]
    assert got[-1]["fresh"] <= 6 and got[-1]["slots"] <= 4


def test_state_at_an_epochs_end_resumes_at_the_next_epoch():
    s = CropSampler(12, num_replicas=1, rank=0, seed=3)
    s.set_epoch(4)
    keys = list(s)
    state = s.state_dict(consumed=len(s))
    assert state["epoch"] == 5 and state["yielded"] == 0
    r = CropSampler(12, num_replicas=1, rank=0, seed=3)
    r.load_state_dict(state)
    r.set_epoch(5)
    assert len(list(r)) == 12
    # A mid-epoch position applies to its own epoch only: set_epoch elsewhere starts afresh.
    r.load_state_dict({"epoch": 4, "yielded": 5, "seed": 3})
    r.set_epoch(6)
    assert len(list(r)) == 12
    r.load_state_dict({"epoch": 4, "yielded": 5, "seed": 3})
    assert list(r) == keys[5:]


def test_crop_loader_state_resumes_where_it_stopped(arrays):
    from lsio.torch import CropLoader

    def make():
        ds = make_ds(arrays)
        sampler = CropSampler(ds, num_replicas=1, rank=0, seed=7)
        sampler.set_epoch(2)
        return CropLoader(ds, batch_size=4, sampler=sampler, device="cpu")

    ref = list(make())
    loader = make()
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    assert loader.sampler.yielded <= 3 * 4  # keys drawn one batch ahead, not the whole epoch
    state = loader.state_dict()
    assert state["yielded"] == 8
    del it
    loader2 = make()
    loader2.load_state_dict(state)
    assert_batches_equal(ref, first + list(loader2))
