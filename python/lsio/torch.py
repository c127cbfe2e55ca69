"""PyTorch adapters: a map-style dataset of random crops, its sampler and worker set-up.

Importing this module imports torch (``import lsio`` alone never does)::

    import lsio
    from lsio.torch import CropDataset, CropSampler, collate, worker_init_fn
    from torch.utils.data import DataLoader

    ds = CropDataset({v: lsio.open("era5.zarr", v) for v in ("t2m", "tp", "z")},
                     crop_shape={"time": 4, "lat": 128, "lon": 128},   # by dimension name
                     length=10_000, seed=0)
    sampler = CropSampler(ds, seed=0)              # rank / world size from torch.distributed
    loader = DataLoader(ds, batch_size=32, sampler=sampler, collate_fn=collate,
                        num_workers=4, persistent_workers=True, pin_memory=True,
                        worker_init_fn=worker_init_fn)
    for epoch in range(10):
        sampler.set_epoch(epoch)
        for batch in loader:                      # {"x": (32, 4, 128, 128) tensor, ...}
            ...

* A sample is a crop from every array at matching coordinates: by dimension name when the
  arrays have names (a static ``z(lat, lon)`` beside ``t2m(time, lat, lon)`` crops the same
  latitudes and longitudes), else over the leading dimensions they share; its origin is a pure function of ``(seed, epoch, index)``, so batches do
  not depend on the number of workers, on ranks or on restarts.
* :class:`CropSampler` yields ``(epoch, index)`` keys, so persistent workers (which never
  see a later ``set_epoch`` on their copy of the dataset) still read the current epoch's
  crops. It shards indices across ranks like ``DistributedSampler`` and has a
  ``state_dict`` for torchdata's ``StatefulDataLoader``.
* ``__getitems__`` reads a whole batch with one ``read_crops`` call per array, straight into
  the batch tensor (in a worker, into shared memory, so the batch reaches the main process
  without a copy). With ``collate_fn=collate`` that tensor is the batch; with the default
  collate the per-sample views are stacked (one copy), with the same values.
* Each worker reuses a few shared-memory batch slots (``pool_batches``) instead of creating,
  zero-filling and mapping a new one per batch; a slot is rewritten only after the main
  process dropped every tensor of its previous batch (lsio/_torch_pool.py says how).
* :class:`CropLoader` loads in the training process itself, double-buffered (the next
  batch's read overlaps the current step); with ``device="cuda"`` chunks are decoded on the
  GPU (:mod:`lsio.gpu`). CUDA does not survive fork: GPU decoding happens there, never in
  DataLoader workers.
* In DataLoader workers the arrays are reopened with ``worker_threads`` (default 1) native
  threads: the workers are the parallelism. :func:`worker_init_fn` does the same
  explicitly, and also sets ``LSIO_THREADS`` for arrays opened later in the worker.
"""

from __future__ import annotations

import collections
import itertools
import math
import os
import sys
import warnings
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

try:
    import torch
    import torch.utils.data
except ImportError as e:  # the optional dependency: say how to get it
    raise ImportError(f"lsio.torch needs PyTorch: pip install torch (or pip install 'lsio[torch]'); "
                      f"importing it failed: {e}") from e

from . import _torch_pool
from .array import Array
from .grain import CropSource, with_options

__all__ = ["CropDataset", "CropSampler", "CropBatch", "CropLoader", "collate", "pool_stats", "worker_init_fn",
           "with_options"]


def _torch_dtype(dt: np.dtype) -> "torch.dtype":
    try:
        return torch.from_numpy(np.empty(0, dtype=dt)).dtype
    except TypeError as e:
        raise TypeError(f"torch has no dtype for lsio dtype {dt}") from e


class CropBatch(list):
    """What :meth:`CropDataset.__getitems__` returns: the list of samples (views into the
    batch tensors, so the default collate works), plus ``.batch``, the batch itself, which
    :func:`collate` returns without copying."""

    batch: Any = None


def collate(samples: Any) -> Any:
    """``collate_fn`` for :class:`CropDataset`: returns the batch ``__getitems__`` read,
    without copying; falls back to torch's ``default_collate`` for anything else."""
    if isinstance(samples, CropBatch) and samples.batch is not None:
        return samples.batch
    return torch.utils.data.default_collate(samples)


class CropDataset(torch.utils.data.Dataset):
    """Map-style dataset of random crops from one or more lsio arrays.

    Parameters are those of :class:`lsio.grain.CropSource` (``arrays``, ``crop_shape``,
    ``length``, ``seed``, ``epoch``, ``shared_dims``, ``origins``, and the conversions
    ``dtype``/``scale``/``offset`` and ``stack`` into channels), plus:

    worker_threads:
        Native threads per read inside DataLoader workers (default 1; ``None`` keeps the
        arrays' own setting). The main process keeps the arrays' setting.
    pool_batches:
        Shared-memory batch slots each DataLoader worker keeps and reuses (default 4; 0
        allocates a fresh shared tensor per batch, as torch's own collate does). A slot is
        reused only once the main process has dropped every tensor of its previous batch,
        so batches a training loop keeps stay intact; see :func:`pool_stats`.

    Keys are ints (record of :attr:`epoch`, see :meth:`set_epoch`) or ``(epoch, index)``
    pairs (what :class:`CropSampler` yields). A sample is a tensor, a tuple of tensors or a
    dict of tensors, following ``arrays``.
    """

    def __init__(
        self,
        arrays: Any,
        crop_shape: Any,
        *,
        length: Optional[int] = None,
        seed: int = 0,
        epoch: int = 0,
        shared_dims: Optional[int] = None,
        origins: Any = None,
        worker_threads: Optional[int] = 1,
        pool_batches: int = 4,
        dtype: Any = None,
        scale: Any = None,
        offset: Any = None,
        stack: bool = False,
        variables: Optional[Sequence[str]] = None,
    ) -> None:
        self.source = CropSource(
            arrays, crop_shape, length=length, seed=seed, epoch=epoch, shared_dims=shared_dims, origins=origins,
            dtype=dtype, scale=scale, offset=offset, stack=stack, variables=variables,
        )
        self.worker_threads = worker_threads
        if int(pool_batches) < 0:
            raise ValueError(f"pool_batches must be >= 0, got {pool_batches}")
        self.pool_batches = int(pool_batches)
        self._tdtypes = [_torch_dtype(d) for _, d in self.source.batch_shapes(0)]
        self._pid = os.getpid()

    # -- configuration ----------------------------------------------------------------------

    @property
    def seed(self) -> int:
        return self.source.seed

    @property
    def epoch(self) -> int:
        return self.source.epoch

    def set_epoch(self, epoch: int) -> None:
        """Epoch for integer keys. Persistent workers never see this: use CropSampler."""
        self.source.set_epoch(epoch)

    def set_threads(self, threads: Optional[int]) -> None:
        """Reopen the arrays (lazily) with ``threads`` native threads per read."""
        src = self.source
        src._arrays = [with_options(a, threads=threads) for a in src._arrays]

    def __len__(self) -> int:
        return len(self.source)

    def __repr__(self) -> str:
        return repr(self.source).replace("CropSource(", "CropDataset(", 1)

    def _check_process(self) -> None:
        pid = os.getpid()
        if pid != self._pid:
            self._pid = pid
            if self.worker_threads is not None and torch.utils.data.get_worker_info() is not None:
                self.set_threads(self.worker_threads)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_pid"] = -1  # a new process: apply worker_threads there
        return state

    # -- reading ----------------------------------------------------------------------------

    def read_batch(self, keys: Sequence[Any]) -> Any:
        """The samples ``keys`` stacked into batch tensors (one ``read_crops`` per array)."""
        self._check_process()
        keys = list(keys)
        if torch.utils.data.get_worker_info() is not None:
            # In a worker: shared memory, so the batch reaches the main process without a
            # copy, on one of the worker's reused slots when one is free.
            shapes = [shape[1:] for shape, _ in self.source.batch_shapes(len(keys))]
            tensors = _torch_pool.batch_tensors(len(keys), shapes, self._tdtypes, self.pool_batches)
        else:
            tensors = self._new_batch(len(keys))
        self.source.read_batch_arrays(keys, outs=[t.numpy() for t in tensors])
        return self.source._structure(tensors)

    def _new_batch(self, n: int, **kw: Any) -> List["torch.Tensor"]:
        return [torch.empty(shape, dtype=d, **kw) for (shape, _), d in zip(self.source.batch_shapes(n), self._tdtypes)]

    def __getitems__(self, keys: Sequence[Any]) -> CropBatch:
        """The samples ``keys`` as a :class:`CropBatch` (one ``read_crops`` per array)."""
        batch = self.read_batch(keys)
        # Per-sample views as plain tensors (indexing a PoolTensor costs a __torch_function__
        # dispatch per view); one that leaves the worker is still seen (_torch_pool).
        tensors = [t.as_subclass(torch.Tensor) for t in self.source._flatten(batch)]
        out = CropBatch(self.source._structure([t[i] for t in tensors]) for i in range(len(tensors[0])))
        out.batch = batch
        return out

    def __getitem__(self, key: Any) -> Any:
        self._check_process()
        arrays = self.source.read_batch_arrays([key])
        return self.source._structure([torch.from_numpy(a[0]) for a in arrays])


def pool_stats() -> Dict[str, int]:
    """Counters of the shared-memory batch slots (see ``CropDataset(pool_batches=...)``).

    In the main process: ``pooled_batches``, batch tensors received on a worker's slot;
    ``released``, slots handed back because every tensor of their batch was dropped;
    ``kept``, slots never handed back because this process passed their memory on to
    another process; ``held``, received ones still alive. In a worker (e.g. from a
    ``collate_fn``): ``slots``, slots this worker allocated; ``fresh``, batches that got a
    new shared tensor because every slot was still in use; ``retired``, slots whose memory
    left the worker untracked (a plain view, e.g. from TorchScript) and were replaced.
    """
    return {**_torch_pool.main_stats(), **_torch_pool.worker_stats()}


def _dist_defaults(num_replicas: Optional[int], rank: Optional[int]) -> Tuple[int, int]:
    dist = getattr(torch, "distributed", None)
    initialised = dist is not None and dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if initialised else 1
    if rank is None:
        rank = dist.get_rank() if initialised else 0
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be >= 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, {num_replicas}), got {rank}")
    return int(num_replicas), int(rank)


class CropSampler(torch.utils.data.Sampler):
    """Yields ``(epoch, index)`` keys of this rank's share of an epoch.

    Like ``DistributedSampler``: the epoch's indices (a permutation from ``(seed, epoch)``
    when ``shuffle``) are padded by repetition to a multiple of ``num_replicas`` (or
    truncated, with ``drop_last``), and rank ``r`` takes every ``num_replicas``-th from
    ``r``. ``num_replicas`` and ``rank`` default to torch.distributed's when it is
    initialised, else 1 and 0. Call :meth:`set_epoch` before each epoch.

    ``state_dict()`` / ``load_state_dict()`` record the epoch and how many keys this epoch
    has yielded, so torchdata's ``StatefulDataLoader`` resumes mid-epoch; with a plain
    ``DataLoader`` pass ``state_dict(consumed=...)`` (the samples the loop used), since it
    draws keys ahead of the loop.
    """

    def __init__(
        self,
        data_source: Union[int, "torch.utils.data.Dataset"],
        *,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.length = int(data_source) if isinstance(data_source, (int, np.integer)) else len(data_source)
        self.num_replicas, self.rank = _dist_defaults(num_replicas, rank)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self.yielded = 0
        self._resume_at: Optional[int] = None
        self._resume_epoch = 0
        self._plain_loader = False  # the keys are drawn by a plain DataLoader (state_dict warns)
        if self.drop_last:
            self.num_samples = self.length // self.num_replicas
        else:
            self.num_samples = math.ceil(self.length / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def indices(self, epoch: Optional[int] = None) -> np.ndarray:
        """This rank's indices of ``epoch`` (default: the current one), in order."""
        epoch = self.epoch if epoch is None else int(epoch)
        if self.shuffle:
            idx = np.random.default_rng([self.seed & ((1 << 63) - 1), epoch]).permutation(self.length)
        else:
            idx = np.arange(self.length)
        if self.total_size > self.length and self.length:
            reps = math.ceil((self.total_size - self.length) / self.length)
            idx = np.concatenate([idx] + [idx] * reps)[: self.total_size]
        else:
            idx = idx[: self.total_size]
        return idx[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        start = 0
        if self._resume_at is not None:
            if self._resume_epoch == self.epoch:
                start = self._resume_at
            self._resume_at = None
        self.yielded = start
        self._plain_loader = _drawn_by_plain_loader()
        epoch = self.epoch
        idx = self.indices(epoch)
        for i in idx[start:].tolist():
            self.yielded += 1
            yield (epoch, i)

    def __len__(self) -> int:
        return self.num_samples

    def state_dict(self, consumed: Optional[int] = None) -> Dict[str, Any]:
        """The epoch and where in it to resume.

        With torchdata's ``StatefulDataLoader`` call it without arguments (the loader asks at
        the right moment). A plain ``DataLoader`` draws keys ahead of the loop (prefetching,
        workers), so the keys handed out are more than the loop has used: pass
        ``consumed``, the samples of this epoch the loop has used, counted from the epoch's
        start (a resumed epoch included; at its end ``len(sampler)``, which saves the next
        epoch's start), or a resume skips the prefetched ones. Without ``consumed``, once a plain DataLoader has drawn keys, a UserWarning says so.
        """
        if consumed is not None:
            consumed = int(consumed)
            if not 0 <= consumed <= self.num_samples:
                raise ValueError(f"consumed must be in [0, {self.num_samples}] (this rank's samples per epoch), "
                                 f"got {consumed}")
            if consumed == self.num_samples:  # the epoch is done: resume at the next one's start
                return {"epoch": self.epoch + 1, "yielded": 0, "seed": self.seed}
            return {"epoch": self.epoch, "yielded": consumed, "seed": self.seed}
        if self.yielded > 0 and self._plain_loader:  # all drawn may still be mid-epoch for the loop
            warnings.warn(
                f"CropSampler.state_dict() records the {self.yielded} keys handed out this epoch; a plain "
                f"DataLoader fetches keys ahead of the training loop, so resuming from this state skips samples "
                f"the loop never used: pass consumed=<samples the loop used this epoch>, or use torchdata's "
                f"StatefulDataLoader", UserWarning, stacklevel=2)
        return {"epoch": self.epoch, "yielded": self.yielded, "seed": self.seed}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        if "yielded" not in state or int(state["yielded"]) < 0:
            raise ValueError("invalid CropSampler state_dict")
        if "seed" in state and int(state["seed"]) != self.seed:
            raise ValueError(f"state_dict was saved with seed {state['seed']}, this sampler has {self.seed}")
        self.epoch = int(state.get("epoch", self.epoch))
        self.yielded = int(state["yielded"])
        self._resume_at = self.yielded
        self._resume_epoch = self.epoch  # a set_epoch to another epoch drops the position


def _drawn_by_plain_loader() -> bool:
    """True when the calling code is torch's own DataLoader machinery and not torchdata's
    StatefulDataLoader (which records sampler states at the right moment itself)."""
    try:
        f = sys._getframe(2)
    except ValueError:  # a shallow stack: no loader above
        return False
    torch_data = False
    for _ in range(16):
        if f is None:
            break
        mod = str(f.f_globals.get("__name__", ""))
        if mod.startswith("torchdata"):
            return False
        torch_data = torch_data or mod.startswith("torch.utils.data")
        f = f.f_back
    return torch_data


def _unwrap(ds: Any) -> List[Any]:
    """The CropDatasets inside ``ds`` (through Subset and ConcatDataset)."""
    if isinstance(ds, CropDataset):
        return [ds]
    if isinstance(ds, torch.utils.data.Subset):
        return _unwrap(ds.dataset)
    if isinstance(ds, torch.utils.data.ConcatDataset):
        return [c for d in ds.datasets for c in _unwrap(d)]
    return []


def worker_init_fn(worker_id: int) -> None:
    """DataLoader ``worker_init_fn``: one native lsio thread per worker.

    Reopens the arrays of the worker's CropDataset(s) with ``threads=1`` and sets
    ``LSIO_THREADS=1`` for arrays opened later in the worker.
    """
    os.environ["LSIO_THREADS"] = "1"
    info = torch.utils.data.get_worker_info()
    if info is None:
        return
    for ds in _unwrap(info.dataset):
        ds.set_threads(1)
        ds._pid = os.getpid()


class CropLoader:
    """In-process batches of a :class:`CropDataset`, double-buffered, on ``device``.

    ::

        loader = CropLoader(ds, batch_size=32, sampler=CropSampler(ds, seed=0), device="cuda")
        for epoch in range(10):
            loader.sampler.set_epoch(epoch)
            for batch in loader:          # CUDA tensors, decoded on the GPU
                ...

    A background thread reads batch k+1 while batch k is handed out. With ``device="cuda"``
    that read is the host half of a GPU read (lsio/gpu: the compressed chunks of the whole
    batch into a pinned staging buffer, one per array and slot, reused); the main thread then
    queues the copy to the device, nvCOMP's decode and the scatter into new batch tensors on
    ``stream`` and goes on: up to ``depth`` batches (default 3) are on the GPU at once, each on
    a side stream of the loader's own (default; so decoding overlaps the work queued on the
    current stream and the previous batch's decode). A batch is handed out once its own
    stream has finished it and nvCOMP's statuses say every chunk decoded (a chunk it could not
    decode is read again on the CPU, so corrupt data raises lsio's typed error there). Batches are the
    dataset's structure (tensor, tuple or dict). ``device="cpu"`` reads into host tensors on
    the same schedule. A dataset that converts (``dtype``/``scale``/``offset``) or stacks
    channels is read on the host (pinned) and copied, since those happen in the engine's CPU
    copy. GPU decoding needs the main process: use DataLoader workers for CPU
    decoding instead (docs/guide/training.md compares the two).

    sampler: yields keys (e.g. :class:`CropSampler`); default: the dataset's records in order.
    """

    def __init__(self, dataset: CropDataset, batch_size: int, *, sampler: Any = None, device: Any = "cuda",
                 drop_last: bool = False, stream: Any = None, depth: int = 3) -> None:
        if int(batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.sampler = sampler
        self.device = torch.device(device)
        self.drop_last = bool(drop_last)
        self.stream = stream
        if int(depth) < 1:
            raise ValueError(f"depth must be >= 1, got {depth}")
        self.depth = int(depth)
        self._consumed = 0  # samples of the current epoch handed out (state_dict)
        if self.device.type == "cuda":
            from . import gpu

            ok, why = gpu.available()
            if not ok:
                raise RuntimeError(f"lsio: CropLoader(device='cuda') cannot decode on the GPU: {why}")

    def _batches(self) -> Iterator[List[Any]]:
        """Batches of keys, drawn from the sampler one batch at a time (its position then
        stays one batch ahead of the loop at most)."""
        it = iter(self.sampler) if self.sampler is not None else iter(range(len(self.dataset)))
        while True:
            keys = list(itertools.islice(it, self.batch_size))
            if not keys or (self.drop_last and len(keys) < self.batch_size):
                return
            yield keys

    def state_dict(self) -> Dict[str, Any]:
        """The sampler's state at the first sample this loader has not handed out yet (resume
        with :meth:`load_state_dict`; needs a sampler with ``state_dict(consumed=)``, e.g.
        :class:`CropSampler`)."""
        if self.sampler is None or not hasattr(self.sampler, "state_dict"):
            raise TypeError("CropLoader.state_dict needs a sampler with state_dict (e.g. CropSampler)")
        return self.sampler.state_dict(consumed=self._consumed)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.sampler.load_state_dict(state)

    def __len__(self) -> int:
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[Any]:
        from concurrent.futures import ThreadPoolExecutor

        start = getattr(self.sampler, "_resume_at", None) or 0  # a resumed epoch counts from there
        self._consumed = start
        batches = self._batches()
        first = next(batches, None)
        if first is None:
            return
        src = self.dataset.source
        cuda = self.device.type == "cuda"
        # Conversions and channel stacking happen in the engine's CPU copy: such batches are
        # read on the host (pinned) and copied, not decoded on the GPU.
        gpu_decode = cuda and not src.stacked and all(all(v is None for v in t) for t in src._transforms)
        if not gpu_decode:
            def host(keys: List[Any], slot: int) -> Any:
                tensors = self.dataset._new_batch(len(keys), pin_memory=cuda)
                src.read_batch_arrays(keys, outs=[t.numpy() for t in tensors])
                return tensors
        else:
            from .gpu import _cuda, _plan

            depth = self.depth
            # Staging slot k % (depth + 1) holds batch k: the host thread fills the next batch's
            # slot while `depth` batches may still be on the GPU (Staging.get also waits for the
            # copy that last read a slot).
            # An array's memory_limit bounds all its slots together: each gets its share.
            slots = [[_cuda.Staging(-(-(a.options.get("memory_limit") or 0) // (depth + 1)),
                                    f"depth + 1 = {depth + 1} staging slots of CropLoader") for a in src.arrays]
                     for _ in range(depth + 1)]

            def host(keys: List[Any], slot: int) -> Any:
                plans = []
                for j, (arr, st, crop) in enumerate(zip(src.arrays, src.starts(keys), src.crop_shapes)):
                    st = np.ascontiguousarray(st, dtype=np.int64)
                    isz = np.dtype(arr.dtype).itemsize
                    box = int(np.prod(crop, dtype=np.int64)) * isz
                    plans.append((st, _cuda.stage_for(arr, st, crop, None, box, _plan.out_layout(crop, isz),
                                                      box * len(st), slots[slot][j])))
                return plans

            # One executor (device work buffers) and one stream per batch in flight: batch k
            # decodes on stream k % depth while earlier batches' kernels may still run on theirs.
            executors = [_cuda.Executor(self.device) for _ in range(depth)]
            streams = [self.stream if self.stream is not None else torch.cuda.Stream(self.device)
                       for _ in range(depth)]
        with ThreadPoolExecutor(1, thread_name_prefix="lsio-loader") as pool:
            keys = first
            fut = pool.submit(host, keys, 0)
            k = 0
            inflight: "collections.deque" = collections.deque()
            try:
                while fut is not None or inflight:
                    if fut is not None:
                        got = fut.result()
                        n = len(keys)
                        keys = next(batches, None)
                        slot = (k + 1) % (depth + 1) if gpu_decode else (k + 1) % 2
                        fut = None if keys is None else pool.submit(host, keys, slot)
                        if not gpu_decode:
                            k += 1
                            self._consumed += n
                            yield src._structure([t.to(self.device, non_blocking=True) for t in got] if cuda else got)
                            continue
                        stream, ex = streams[k % depth], executors[k % depth]
                        batch = []
                        for j, ((st, plan), arr, crop, dt) in enumerate(
                                zip(got, src.arrays, src.crop_shapes, self.dataset._tdtypes)):
                            # Allocated on the stream that writes them: a block the caching
                            # allocator hands out there is free of the consumer's queued work,
                            # since record_stream below keeps every handed-out batch's block
                            # until the consumer's stream has finished with it.
                            with torch.cuda.stream(stream):
                                t = torch.empty((len(st), *crop), dtype=dt, device=self.device)
                            pending = ex.submit(plan, t, stream)
                            slots[k % (depth + 1)][j].copied = pending.copied
                            batch.append((t, pending, arr, st, crop))
                        inflight.append((batch, stream, ex, n))
                        k += 1
                        if len(inflight) < depth and fut is not None:
                            continue  # fill the pipeline before handing out the first batch
                    batch, stream, ex, n = inflight.popleft()
                    # nvCOMP's statuses are checked before a batch is handed out: a frame it
                    # could not decode makes that array's part be read again on the CPU.
                    for t, pending, arr, st, crop in batch:
                        _cuda.finish(ex, pending, t, lambda arr=arr, st=st, crop=crop: arr.read_crops(st, crop), stream)
                    current = torch.cuda.current_stream(self.device)
                    current.wait_stream(stream)
                    for t, *_ in batch:
                        t.record_stream(current)
                    self._consumed += n
                    yield src._structure([t for t, *_ in batch])
            finally:
                for batch, stream, *_ in inflight:  # an abandoned loop: no queued work outlives its buffers
                    stream.synchronize()
