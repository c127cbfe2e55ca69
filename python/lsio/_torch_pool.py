"""Shared-memory batch slots reused across batches by DataLoader workers (lsio.torch).

Without this, every batch a worker reads goes into a fresh shared-memory tensor: a new
``/dev/shm`` file, zero-filled page by page as ``read_crops`` first touches it, mapped
again by the main process. On a W1 batch (32 x 4 x 256 x 256 float32, 32 MiB) that costs
about a third of the read itself. A worker instead keeps a few *slots* (one shared storage
each, holding every array's batch tensor) and reads each batch into a free one.

A slot may be rewritten only when no process can still see its previous batch:

* In the worker, a slot's batch tensors are :class:`PoolTensor` instances (a tensor subclass
  whose results of views and ops stay PoolTensors). Pickling one whose storage is a slot,
  which is what the DataLoader's result queue does, counts a *send* of that slot and turns it
  into a plain tensor plus a release handle.
* In the main process, :func:`_arrive` (the unpickling side) records the slot's storage with
  a weak reference; once every tensor on it is gone there (after pinning, or when the user
  drops the batch), the next arrival counts a *release* in the slot's shared counter.
* The worker reuses a slot only when nothing in the worker references its storage any more
  (the storage's use count is the pool's alone) and releases == sends. Sends are counted
  while the tensor is alive, so a use count of one makes the send count final.

A batch that leaves the worker as a copy (the default collate stacks the samples) is never
sent, so its slot is free at once. A slot that is sent but whose release never comes (the
main process dropped a message unread) stays taken; past ``max_slots`` the worker falls back
to a fresh shared tensor per batch, which is always safe.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.multiprocessing.reductions import StorageWeakRef

_ALIGN = 64


def _use_count(storage: "torch.UntypedStorage") -> int:
    return int(torch._C._storage_Use_Count(storage._cdata))


class PoolTensor(torch.Tensor):
    """A batch tensor on a pooled slot, inside a DataLoader worker (see the module doc)."""

    def __reduce_ex__(self, proto: int) -> Any:
        pool = _worker_pool()
        plain = self.as_subclass(torch.Tensor)
        hit = pool.on_send(plain) if pool is not None else None
        if hit is None:  # not on a slot (a copy made from one): a plain tensor
            return plain.__reduce_ex__(proto)
        released, slot = hit
        return (_arrive, (plain, released, slot))


class _Slot:
    __slots__ = ("storage", "nbytes", "sent", "index")

    def __init__(self, nbytes: int, index: int) -> None:
        self.storage = torch.UntypedStorage._new_shared(nbytes)
        self.nbytes = nbytes
        self.sent = 0
        self.index = index


class WorkerPool:
    """The slots of one worker process (one per process; see :func:`_worker_pool`)."""

    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self.slots: List[_Slot] = []
        # released[i]: how many sends of slot i the main process has seen dropped; written
        # only by the main process, read here.
        self.released = torch.zeros(max(1, max_slots), dtype=torch.int64).share_memory_()
        self._by_ptr: Dict[int, _Slot] = {}
        self.fresh = 0  # batches that got a fresh tensor because no slot was free

    def _free(self, slot: _Slot) -> bool:
        # Use count first: once it is 1 no tensor on the slot is left to be pickled, so
        # `sent` can no longer grow under us.
        return _use_count(slot.storage) == 1 and int(self.released[slot.index]) == slot.sent

    def acquire(self, nbytes: int) -> Optional[_Slot]:
        for slot in self.slots:
            if slot.nbytes >= nbytes and self._free(slot):
                return slot
        for k, slot in enumerate(self.slots):  # a free slot too small (a bigger batch): grow it
            if self._free(slot):
                del self._by_ptr[slot.storage.data_ptr()]
                new = _Slot(nbytes, slot.index)
                new.sent = slot.sent
                self.slots[k] = new
                self._by_ptr[new.storage.data_ptr()] = new
                return new
        if len(self.slots) < self.max_slots:
            slot = _Slot(nbytes, len(self.slots))
            self.slots.append(slot)
            self._by_ptr[slot.storage.data_ptr()] = slot
            return slot
        self.fresh += 1
        return None

    def on_send(self, t: torch.Tensor) -> Optional[Tuple[torch.Tensor, int]]:
        slot = self._by_ptr.get(t.untyped_storage().data_ptr())
        if slot is None:
            return None
        slot.sent += 1
        return self.released, slot.index


_pool: Optional[WorkerPool] = None
_pool_pid = -1


def _worker_pool(create_with: Optional[int] = None) -> Optional[WorkerPool]:
    """This process's pool; created (when ``create_with`` slots are allowed) on first use
    in a process, so a forked child never shares its parent's."""
    global _pool, _pool_pid
    pid = os.getpid()
    if _pool_pid != pid:
        _pool, _pool_pid = None, pid
    if _pool is None and create_with:
        _pool = WorkerPool(create_with)
    return _pool


def batch_tensors(
    n: int, crop_shapes: Sequence[Tuple[int, ...]], dtypes: Sequence["torch.dtype"], max_slots: int
) -> List[torch.Tensor]:
    """Batch tensors ``(n, *crop)`` for each array, on a free slot of this worker's pool
    (PoolTensors), or fresh shared tensors when none is free or pooling is off."""
    shapes = [(n, *c) for c in crop_shapes]
    sizes = [int(np.prod(s, dtype=np.int64)) * torch.empty(0, dtype=d).element_size() for s, d in zip(shapes, dtypes)]
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _ALIGN) * _ALIGN
    pool = _worker_pool(max_slots) if max_slots > 0 else None
    slot = pool.acquire(max(total, 1)) if pool is not None else None
    if slot is None:
        return [_fresh_shared(s, d) for s, d in zip(shapes, dtypes)]
    out = []
    for shape, dt, off in zip(shapes, dtypes, offsets):
        t = torch.empty(0, dtype=dt)
        t.set_(slot.storage, off // t.element_size(), shape, _contiguous_strides(shape))
        out.append(t.as_subclass(PoolTensor))
    return out


def _contiguous_strides(shape: Sequence[int]) -> Tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(strides))


def _fresh_shared(shape: Tuple[int, ...], dt: "torch.dtype") -> torch.Tensor:
    elem = torch.empty(0, dtype=dt)
    numel = int(np.prod(shape, dtype=np.int64))
    try:
        storage = elem._typed_storage()._new_shared(numel, device=elem.device)
        return elem.new(storage).resize_(shape)
    except Exception:  # pragma: no cover - private API changed: plain memory (copied when sent)
        return torch.empty(shape, dtype=dt)


# -- main process ------------------------------------------------------------------------------

_lock = threading.Lock()
_held: List[Tuple[StorageWeakRef, torch.Tensor, int]] = []
_stats = {"pooled_batches": 0, "released": 0}


def _sweep() -> None:
    keep = []
    for ref, released, slot in _held:
        if ref.expired():
            released[slot] += 1
            _stats["released"] += 1
        else:
            keep.append((ref, released, slot))
    _held[:] = keep


def _arrive(plain: torch.Tensor, released: torch.Tensor, slot: int) -> torch.Tensor:
    """Unpickling a pooled batch tensor in the receiving process: note the slot's storage so
    its release is counted once every tensor on it is gone, and return the plain tensor."""
    with _lock:
        _sweep()
        _held.append((StorageWeakRef(plain.untyped_storage()), released, slot))
        _stats["pooled_batches"] += 1
    return plain


def release_dropped() -> None:
    """Count the releases of pooled batches dropped since the last arrival (arrivals do this
    themselves; call it when no further batch may arrive for a while)."""
    with _lock:
        _sweep()


def main_stats() -> Dict[str, int]:
    """This process's receiving side: pooled tensors received, slot releases counted, and
    those still held."""
    with _lock:
        _sweep()
        return {**_stats, "held": len(_held)}


def worker_stats() -> Dict[str, int]:
    """This worker's pool: slots allocated, and batches that got a fresh tensor instead."""
    pool = _worker_pool()
    if pool is None:
        return {"slots": 0, "fresh": 0}
    return {"slots": len(pool.slots), "fresh": pool.fresh}
