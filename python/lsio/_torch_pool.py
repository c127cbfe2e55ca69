"""Shared-memory batch slots reused across batches by DataLoader workers (lsio.torch).

Without this, every batch a worker reads goes into a fresh shared-memory tensor: a new
``/dev/shm`` file, zero-filled page by page as ``read_crops`` first touches it, mapped
again by the main process. On a W1 batch (32 x 4 x 256 x 256 float32, 32 MiB) that costs
about a third of the read itself. A worker instead keeps a few *slots* (one shared storage
each, holding every array's batch tensor) and reads each batch into a free one.

A slot may be rewritten only when no process can still see its previous batch. How that is
known:

* Worker side. The batch tensors are :class:`PoolTensor` instances (a tensor subclass whose
  views and op results stay PoolTensors). When the DataLoader's result queue pickles one
  (``ForkingPickler``), it counts a *tracked send* of its slot and becomes a plain tensor
  plus a release handle. Independently, torch's own reductions record every storage they
  pickle in ``torch.multiprocessing.reductions.shared_cache``; the slot's entry there is
  removed when the slot is handed out, so its reappearance means "this slot's memory left
  the worker", whatever tensor type carried it (a plain view made by TorchScript, or by
  ``as_subclass``, is not tracked). A slot is free again when nothing in the worker
  references it (the storage's use count is the pool's alone) and either it never left, or
  every tracked send was released by the receiver. A slot that left untracked is retired
  (dropped from the pool, never rewritten).
* Main side. :func:`_arrive` (the unpickling of a tracked send) notes the storage with a
  weak reference. Once every tensor on it is gone, a later arrival (of any batch of any
  pooled worker) counts a *release* in the slot's shared counter, unless the main process
  passed the memory on: pickled it to another process (torch's ``shared_cache`` entry for
  it was replaced) or forked a child while it was alive. Those slots are released only
  when that cannot matter any more (never, for a pickled one; once the children
  ``multiprocessing`` started after the fork have exited, for a forked one).

A batch that leaves the worker as a copy (the default collate stacks the samples) never
pickles its slot, so the slot is free at once. When every slot is in use (the loop keeps
batches) the worker reads into a fresh shared tensor, which is always safe, and at most
``max_slots`` slots exist per worker.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.reduction
import os
import sys
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.multiprocessing
from torch.multiprocessing import reductions as _reductions
from torch.multiprocessing.reductions import StorageWeakRef

_ALIGN = 64
_FORKING_DUMPS = multiprocessing.reduction.ForkingPickler.dumps.__func__.__code__
_RETIRE_LIMIT = 8  # a worker whose slots keep leaving untracked stops pooling


def _use_count(storage: "torch.UntypedStorage") -> int:
    return int(torch._C._storage_Use_Count(storage._cdata))


def _cache_key(storage: "torch.UntypedStorage") -> Any:
    """The key torch's reductions file this (shared) storage under in ``shared_cache``."""
    if torch.multiprocessing.get_sharing_strategy() == "file_system":
        return storage._share_filename_cpu_()[1]
    fd, _ = storage._share_fd_cpu_()
    return _reductions.fd_id(fd)


def _by_forking_pickler() -> bool:
    """True when the caller's caller is ForkingPickler.dumps: a multiprocessing queue or
    connection is sending the object to another process (not pickle.dumps or torch.save)."""
    f = sys._getframe(2)
    return f is not None and f.f_code is _FORKING_DUMPS


class PoolTensor(torch.Tensor):
    """A batch tensor inside a DataLoader worker (see the module doc)."""

    def __reduce_ex__(self, proto: int) -> Any:
        plain = self.as_subclass(torch.Tensor)
        pool = _worker_pool()
        if pool is None or not _by_forking_pickler():
            return plain.__reduce_ex__(proto)  # pickle.dumps, torch.save: a copy, as for any tensor
        hit = pool.on_send(plain)
        if hit is None:  # not on a slot (fresh, or derived): arrives plain, and lets main sweep
            return (_arrive, (plain, None, -1))
        released, slot = hit
        return (_arrive, (plain, released, slot))

    def __deepcopy__(self, memo: dict) -> torch.Tensor:
        return self.as_subclass(torch.Tensor).__deepcopy__(memo)


class _Slot:
    __slots__ = ("storage", "nbytes", "index", "sent", "sent_at_handout")

    def __init__(self, nbytes: int, index: int, sent: int = 0) -> None:
        self.storage = torch.UntypedStorage._new_shared(nbytes)
        self.nbytes = nbytes
        self.index = index
        self.sent = sent  # tracked sends so far (the main process counts their releases)
        self.sent_at_handout = sent


class WorkerPool:
    """The slots of one worker process (one per process; see :func:`_worker_pool`)."""

    def __init__(self, max_slots: int) -> None:
        self.max_slots = max_slots
        self.slots: List[_Slot] = []
        # released[i]: tracked sends of slot index i the receiver has seen dropped; written
        # only by the receiving (main) process.
        self.released = torch.zeros(max(1, max_slots), dtype=torch.int64).share_memory_()
        self._by_ptr: Dict[int, _Slot] = {}
        self.fresh = 0  # batches that got a fresh tensor because no slot was free
        self.retired = 0  # slots whose memory left the worker untracked

    def _free(self, slot: _Slot) -> Optional[bool]:
        """True: free; False: still in use; None: left untracked, must be retired."""
        # Use count first: once it is 1 nothing in this process can still pickle the slot,
        # so `sent` and torch's shared_cache entry are final.
        if _use_count(slot.storage) != 1:
            return False
        left = _reductions.shared_cache.get(_cache_key(slot.storage)) is not None
        tracked = slot.sent - slot.sent_at_handout
        if not left:
            slot.sent = slot.sent_at_handout  # a tracked send that never reached the wire
            return True
        if tracked == 0:
            return None
        return int(self.released[slot.index]) >= slot.sent

    def _handout(self, slot: _Slot) -> _Slot:
        slot.sent_at_handout = slot.sent
        _reductions.shared_cache.pop(_cache_key(slot.storage), None)
        return slot

    def _replace(self, k: int, nbytes: int) -> _Slot:
        old = self.slots[k]
        self._by_ptr.pop(old.storage.data_ptr(), None)
        new = _Slot(nbytes, old.index, sent=old.sent)
        self.slots[k] = new
        self._by_ptr[new.storage.data_ptr()] = new
        return new

    def acquire(self, nbytes: int) -> Optional[_Slot]:
        if self.retired >= _RETIRE_LIMIT:
            self.fresh += 1
            return None
        free_small = None
        for k, slot in enumerate(self.slots):
            state = self._free(slot)
            if state is None:  # its memory is out there: never rewrite it
                self.retired += 1
                self._replace(k, slot.nbytes)
                state = True
                slot = self.slots[k]
            if state and slot.nbytes >= nbytes:
                return self._handout(slot)
            if state and free_small is None:
                free_small = k
        if free_small is not None:  # a free slot too small for this batch: grow it
            return self._handout(self._replace(free_small, nbytes))
        if len(self.slots) < self.max_slots:
            slot = _Slot(nbytes, len(self.slots))
            self.slots.append(slot)
            self._by_ptr[slot.storage.data_ptr()] = slot
            return self._handout(slot)
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
    """Batch tensors ``(n, *crop)`` for each array (PoolTensors), on a free slot of this
    worker's pool, or fresh shared tensors when none is free or pooling is off."""
    shapes = [(n, *c) for c in crop_shapes]
    sizes = [int(np.prod(s, dtype=np.int64)) * torch.empty(0, dtype=d).element_size() for s, d in zip(shapes, dtypes)]
    offsets, total = [], 0
    for size in sizes:
        offsets.append(total)
        total += -(-size // _ALIGN) * _ALIGN
    pool = _worker_pool(max_slots) if max_slots > 0 else None
    slot = pool.acquire(max(total, 1)) if pool is not None else None
    if slot is None:
        fresh = [_fresh_shared(s, d) for s, d in zip(shapes, dtypes)]
        # Still PoolTensors when pooling is on: their arrival lets the main process sweep.
        return [t.as_subclass(PoolTensor) for t in fresh] if pool is not None else fresh
    out = []
    for shape, dt, off in zip(shapes, dtypes, offsets):
        t = torch.empty(0, dtype=dt)
        t.set_(slot.storage, off // t.element_size(), shape)  # C-contiguous
        out.append(t.as_subclass(PoolTensor))
    return out


def _fresh_shared(shape: Tuple[int, ...], dt: "torch.dtype") -> torch.Tensor:
    elem = torch.empty(0, dtype=dt)
    numel = int(np.prod(shape, dtype=np.int64))
    try:
        storage = elem._typed_storage()._new_shared(numel, device=elem.device)
        return elem.new(storage).resize_(shape)
    except Exception:  # pragma: no cover - private API changed: plain memory (copied when sent)
        return torch.empty(shape, dtype=dt)


# -- main process ------------------------------------------------------------------------------


class _Held:
    __slots__ = ("ref", "released", "slot", "key", "cache_ref", "children")

    def __init__(self, ref, released, slot, key, cache_ref) -> None:
        self.ref, self.released, self.slot, self.key, self.cache_ref = ref, released, slot, key, cache_ref
        self.children: Optional[set] = None  # multiprocessing children alive when a fork pinned it


_lock = threading.Lock()
_held: List[_Held] = []
_stats = {"pooled_batches": 0, "released": 0, "kept": 0}


def _children() -> set:
    return {p.pid for p in multiprocessing.active_children()}


def _sweep() -> None:
    keep = []
    now = None
    for h in _held:
        if not h.ref.expired():
            keep.append(h)
            continue
        if h.children is not None:
            now = _children() if now is None else now
            if now - h.children:  # a child forked while it was alive is still running
                keep.append(h)
                continue
        if _reductions.shared_cache.get(h.key) is not h.cache_ref:
            # Pickled on to another process (torch replaced the entry), or the entry is gone
            # and that cannot be told apart: never hand the slot back.
            _stats["kept"] += 1
            continue
        h.released[h.slot] += 1
        _stats["released"] += 1
    _held[:] = keep


def _arrive(plain: torch.Tensor, released: Optional[torch.Tensor], slot: int) -> torch.Tensor:
    """Unpickling a batch tensor from a pooled worker: note a slot's storage so its release
    is counted once every tensor on it is gone, sweep earlier ones, return the plain tensor."""
    with _lock:
        _sweep()
        if released is not None:
            storage = plain.untyped_storage()
            key = _cache_key(storage)
            _held.append(_Held(StorageWeakRef(storage), released, slot, key, _reductions.shared_cache.get(key)))
            _stats["pooled_batches"] += 1
    return plain


def _before_fork() -> None:
    _lock.acquire()
    try:
        _sweep()
        if _held:
            kids = _children()
            for h in _held:  # the child inherits these mappings: pin them while it may run
                h.children = kids if h.children is None else h.children & kids
    except BaseException:
        _lock.release()
        raise


def _after_fork_parent() -> None:
    _lock.release()


def _after_fork_child() -> None:
    global _lock, _held
    _lock = threading.Lock()
    _held = []  # the parent's receipts: the parent releases them, never the child
    for k in _stats:
        _stats[k] = 0


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child)


def main_stats() -> Dict[str, int]:
    """This process's receiving side: pooled tensors received, slot releases counted,
    slots kept because their memory was passed on, and receipts still held."""
    with _lock:
        _sweep()
        return {**_stats, "held": len(_held)}


def worker_stats() -> Dict[str, int]:
    """This worker's pool: slots, fresh tensors handed out, slots retired."""
    pool = _worker_pool()
    if pool is None:
        return {"slots": 0, "fresh": 0, "retired": 0}
    return {"slots": len(pool.slots), "fresh": pool.fresh, "retired": pool.retired}
