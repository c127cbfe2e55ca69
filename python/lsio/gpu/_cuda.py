"""The CUDA executor: a staged plan (lsio/gpu/_plan.py) performed on the GPU.

Per call, on one CUDA stream (the caller's, default the current torch stream):
  1. the engine stages the batch on the host (GIL released): compressed frames, or chunks the
     CPU decoded, in a pinned staging buffer that is reused and grows only when a batch needs
     more (``memory_limit`` bounds it);
  2. one host-to-device copy of the used staging bytes into the work buffer (device memory
     from torch's caching allocator, reused);
  3. nvCOMP decodes every zstd frame from the work buffer into its decode area, one batched
     call;
  4. the Triton kernel (lsio/gpu/_scatter.py) runs the scatter ops into the output tensor;
  5. nvCOMP's per-frame statuses and sizes are checked on the device, and the call waits for
     its own stream's event (never the whole device) before it returns, so the staging
     buffer can be refilled and a bad frame is reported before anyone uses the batch.
A frame nvCOMP did not decode to exactly its chunk's size makes the call redo the batch on the
CPU path (``read_crops`` into host memory, then one copy): corrupt data then raises the same
typed error (file, chunk, byte range) as a CPU read; data nvCOMP merely could not handle is
returned correctly and counted in :func:`lsio.gpu.stats` (``cpu_redos``).
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Dict, Optional, Sequence

import numpy as np
import torch

from . import _nvcomp, _plan, _scatter

_UNIT_TYPES = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

_stats_lock = threading.Lock()
_stats: Dict[str, int] = {
    "batches": 0, "frames_gpu": 0, "frames_cpu": 0, "bytes_h2d": 0, "bytes_decoded_gpu": 0, "cpu_redos": 0,
    "staging_bytes": 0,
}


def _count(**kw: int) -> None:
    with _stats_lock:
        for k, v in kw.items():
            _stats[k] += int(v)


def stats() -> Dict[str, int]:
    with _stats_lock:
        return dict(_stats)


def _unit(itemsize: int) -> int:
    u = 8
    while itemsize % u:
        u //= 2
    return u


def _check_ops(ops: np.ndarray, unit: int, work_bytes: int, out_bytes: int) -> None:
    """Every op's first and last element inside the work buffer and the output: the kernel
    trusts them (one vectorised check per batch)."""
    if ops.shape[0] == 0:
        return
    src, dst, run, n1, ss1, ds1, n2, ss2, ds2 = (ops[:, c] for c in range(9))
    last_src = src + (n2 - 1) * ss2 + (n1 - 1) * ss1 + run
    last_dst = dst + (n2 - 1) * ds2 + (n1 - 1) * ds1 + run
    if (src < 0).any() or (dst < 0).any() or (last_src * unit > work_bytes).any() or (last_dst * unit > out_bytes).any():
        raise RuntimeError("lsio: a staged scatter op leaves its buffers (an engine bug; nothing was written)")


def _round_up(n: int) -> int:
    # Grow in steps of 1/4 above 1 MiB boundaries: few regrowths, little slack.
    mib = 1 << 20
    n = max(n, mib)
    return (n + mib - 1) // mib * mib


class Staging:
    """A pinned host buffer for one batch at a time, grown on demand, bounded by ``limit``.
    ``copied``: the event after which the copy of the batch it last held has left it (set by
    whoever submitted that batch); :meth:`get` waits for it before the buffer is refilled."""

    def __init__(self, limit: int = 0, shared: str = "") -> None:
        self.limit = int(limit)
        self.shared = shared  # says who shares the array's memory_limit (error messages)
        self.buf: Optional[torch.Tensor] = None
        self.pid = os.getpid()
        self.copied: Any = None

    def get(self, n: int) -> torch.Tensor:
        if self.pid != os.getpid():  # pinned memory of a parent process is not ours
            self.buf, self.pid, self.copied = None, os.getpid(), None
        if self.copied is not None:
            self.copied.synchronize()
            self.copied = None
        if self.buf is None or self.buf.numel() < n:
            size = _round_up(max(n, 0 if self.buf is None else self.buf.numel() + self.buf.numel() // 4))
            if self.limit and size > self.limit:
                size = max(n, 0)
            if self.limit and size > self.limit:
                share = f" (its share for the {self.shared})" if self.shared else ""
                raise MemoryError(f"lsio: a GPU batch needs {n} bytes of pinned staging, more than "
                                  f"memory_limit{share} ({self.limit} bytes); read smaller batches, lower the "
                                  f"loader's depth or raise the limit")
            old = 0 if self.buf is None else self.buf.numel()
            self.buf = None
            self.buf = torch.empty(size, dtype=torch.uint8, pin_memory=True)
            _count(staging_bytes=size - old)
        return self.buf


class _HostEvent:
    def record(self, stream: Any = None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class Pending:
    """One batch submitted to the GPU (:meth:`Executor.submit`): :meth:`wait` says whether
    every frame decoded to its size (and gzip frames to their CRC-32)."""

    def __init__(self, copied: Any, done: Any, ok_flag: Any, keep: list) -> None:
        self.copied = copied    # the staging buffer may be refilled once this event has passed
        self.done = done        # the batch's last work on its stream
        self.ok_flag = ok_flag  # pinned bool (None: no compressed frames)
        self._keep = keep       # device tables the queued work reads
        self.profile: Optional[Dict[str, float]] = None
        self._marks: list = []

    def wait(self) -> bool:
        self.done.synchronize()  # this stream's work only, never the whole device
        self._keep = []
        if self.profile is not None and len(self._marks) == 4:
            m = self._marks
            self.profile["copy_ms"] = m[0].elapsed_time(m[1])
            self.profile["decode_ms"] = m[1].elapsed_time(m[2])
            self.profile["scatter_ms"] = m[2].elapsed_time(m[3])
        return self.ok_flag is None or bool(self.ok_flag.item())


class Executor:
    """Device buffers of one CUDA device, reused across batches: one batch in flight at a time
    per executor (a pipeline holds one executor per batch in flight).

    ``decoder`` is nvCOMP's (lsio/gpu/_nvcomp.py) unless a test passes a stand-in: an object
    with ``decoder(codec)`` and ``crc32()`` like :class:`_nvcomp.Nvcomp`; a CPU ``device`` runs
    the same steps on host tensors (tests: the Triton kernel interpreted, decoders that read
    the pointer tables from host memory)."""

    def __init__(self, device: torch.device, decoder: Any = None) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.decoder = decoder
        self.work: Optional[torch.Tensor] = None
        self.temp: Optional[torch.Tensor] = None

    def _stream(self, stream: Any):
        return torch.cuda.stream(stream) if self.cuda else contextlib.nullcontext()

    def _upload(self, host: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(host)
        if not self.cuda:
            return t.clone()
        return t.pin_memory().to(self.device, non_blocking=True)

    def _work(self, n: int) -> torch.Tensor:
        if self.work is None or self.work.numel() < n:
            self.work = None
            self.work = torch.empty(_round_up(n), dtype=torch.uint8, device=self.device)
        return self.work

    def _temp(self, n: int) -> Optional[torch.Tensor]:
        if n == 0:
            return None
        if self.temp is None or self.temp.numel() < n:
            self.temp = None
            self.temp = torch.empty(_round_up(n), dtype=torch.uint8, device=self.device)
        return self.temp

    def _event(self, timing: bool = False) -> Any:
        return torch.cuda.Event(enable_timing=timing) if self.cuda else _HostEvent()

    def run(self, plan: _plan.StagedPlan, out: torch.Tensor, stream: "torch.cuda.Stream",
            profile: Optional[Dict[str, float]] = None) -> bool:
        """Performs ``plan`` into the contiguous CUDA tensor ``out`` on ``stream`` and waits for
        it. Returns False when nvCOMP did not decode every frame to its size (the output is
        then incomplete: the caller redoes the batch on the CPU). ``profile`` (CUDA only)
        receives the milliseconds of the copy, the decode and the scatter (benchmarks)."""
        return self.submit(plan, out, stream, profile).wait()

    def submit(self, plan: _plan.StagedPlan, out: torch.Tensor, stream: Any,
               profile: Optional[Dict[str, float]] = None) -> Pending:
        """Queues ``plan`` into ``out`` on ``stream`` and returns at once; the staging buffer
        is free after ``Pending.copied``, the result valid after ``Pending.wait()`` is True."""
        marks: list = []

        def mark() -> None:
            if profile is not None and self.cuda:
                e = torch.cuda.Event(enable_timing=True)
                e.record(stream)
                marks.append(e)

        try:
            p = self._submit(plan, out, stream, mark)
        except BaseException:
            if self.cuda:  # work queued before the failure must not outlive this call's buffers
                stream.synchronize()
            raise
        p.profile, p._marks = profile, marks
        return p

    def _decode(self, plan: _plan.StagedPlan, gpu: np.ndarray, base: int, stream: Any, keep: list) -> Any:
        """Queues nvCOMP's decode of the compressed frames ``gpu`` (grouped by codec), then the
        CRC-32 of gzip frames; returns a device bool: every frame decoded to its size and
        checksum."""
        f = plan.frames[gpu]
        order = np.argsort(f[:, _plan.F_CODEC], kind="stable")
        f = f[order]
        n = f.shape[0]
        meta = np.empty((4, n), dtype=np.int64)
        meta[0] = base + f[:, _plan.F_STAGING]                            # compressed chunk pointers
        meta[1] = f[:, _plan.F_STORED]                                    # their sizes
        meta[2] = f[:, _plan.F_DECODED]                                   # output buffer sizes
        meta[3] = base + plan.decode_base + f[:, _plan.F_DECODED_AT]      # output pointers
        meta_d = self._upload(meta)
        actual = torch.empty(n, dtype=torch.int64, device=self.device)
        statuses = torch.empty(n, dtype=torch.int32, device=self.device)
        keep += [meta_d, actual, statuses]
        nv = self.decoder if self.decoder is not None else _nvcomp.library()
        s = stream.cuda_stream if self.cuda else 0
        codecs = f[:, _plan.F_CODEC]
        bounds = np.flatnonzero(np.diff(codecs)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
            lo, hi = int(lo), int(hi)
            dec = nv.decoder(int(codecs[lo]))
            m = hi - lo
            biggest = int(meta[2, lo:hi].max())
            tb = dec.temp_bytes(m, biggest, int(meta[2, lo:hi].sum()), s)
            temp = self._temp(tb)
            dec.decompress(meta_d[0, lo:].data_ptr(), meta_d[1, lo:].data_ptr(), meta_d[2, lo:].data_ptr(),
                           actual[lo:].data_ptr(), m, 0 if temp is None else temp.data_ptr(), tb,
                           meta_d[3, lo:].data_ptr(), statuses[lo:].data_ptr(), s)
        ok = ((statuses == 0) & (actual == meta_d[2])).all()
        check = f[:, _plan.F_CHECK]
        sel = np.flatnonzero(check >= 0)
        if sel.size:
            # gzip's CRC-32 of the decoded chunk, computed where the chunk now is.
            tab = np.empty((3, sel.size), dtype=np.int64)
            tab[0], tab[1] = meta[3, sel], meta[2, sel]
            tab[2] = check[sel].astype(np.uint32).view(np.int32).astype(np.int64)
            tab_d = self._upload(tab)
            crcs = torch.empty(sel.size, dtype=torch.int32, device=self.device)
            crc_st = torch.empty(sel.size, dtype=torch.int32, device=self.device)
            keep += [tab_d, crcs, crc_st]
            nv.crc32().compute(tab_d[0].data_ptr(), tab_d[1].data_ptr(), int(sel.size), int(tab[1].max()),
                               crcs.data_ptr(), crc_st.data_ptr(), s)
            ok = ok & ((crc_st == 0) & (crcs.to(torch.int64) == tab_d[2])).all()
        return ok

    def _submit(self, plan: _plan.StagedPlan, out: torch.Tensor, stream: Any, mark: Any) -> Pending:
        staging: torch.Tensor = plan.staging
        gpu = plan.gpu_frames()
        keep: list = []
        with self._stream(stream):
            work = self._work(plan.work_bytes)
            used = plan.staging_used
            mark()
            if used:
                work[:used].copy_(staging[:used], non_blocking=True)
            copied = self._event()
            copied.record(stream)
            mark()
            ok_flag = None
            if gpu.size:
                ok = self._decode(plan, gpu, work.data_ptr(), stream, keep)
                ok_flag = torch.empty((), dtype=torch.bool, pin_memory=self.cuda)
                ok_flag.copy_(ok, non_blocking=self.cuda)
            mark()
            unit = _unit(out.element_size())
            utype = _UNIT_TYPES[unit]
            ops = plan.op_table(unit)
            _check_ops(ops, unit, plan.work_bytes, out.numel() * out.element_size())
            if ops.shape[0]:
                ops_d = self._upload(ops)
                keep.append(ops_d)
                elems = int((ops[:, 2] * ops[:, 3] * ops[:, 6]).max())
                flat = (torch.view_as_real(out) if out.is_complex() else out).reshape(-1)
                _scatter.scatter(work.view(utype), flat.view(torch.uint8).view(utype), ops_d, elems)
            mark()
            done = self._event()
            done.record(stream)
        _count(batches=1, frames_gpu=gpu.size, frames_cpu=plan.frames.shape[0] - gpu.size,
               bytes_h2d=plan.staging_used, bytes_decoded_gpu=int(plan.frames[gpu, _plan.F_DECODED].sum()))
        return Pending(copied, done, ok_flag, keep)


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.executors: Dict[int, Executor] = {}
        self.staging: Optional[Staging] = None


_state = _ThreadState()


def executor_for(device: torch.device) -> Executor:
    """This thread's executor for a CUDA ``device``."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    ex = _state.executors.get(idx)
    if ex is None:
        ex = _state.executors[idx] = Executor(torch.device("cuda", idx))
    return ex


def thread_staging(limit: int) -> Staging:
    if _state.staging is None:
        _state.staging = Staging(limit)
    _state.staging.limit = int(limit)
    return _state.staging


def as_cuda_tensor(out: Any) -> Optional[torch.Tensor]:
    """``out`` as a torch CUDA tensor sharing its memory, or None when it is no CUDA array."""
    if isinstance(out, torch.Tensor):
        return out if out.is_cuda else None
    if hasattr(out, "__cuda_array_interface__"):
        # No device argument: torch.as_tensor(..., device=) copies an array of another GPU,
        # and the copy would be filled instead of `out`.
        t = torch.as_tensor(out)
        if t.data_ptr() != int(out.__cuda_array_interface__["data"][0]):
            raise ValueError("out: torch cannot view this CUDA array without a copy")
        return t
    dev = getattr(out, "__dlpack_device__", None)
    if dev is not None:
        try:
            kind = int(dev()[0])
        except Exception:
            return None
        if kind in (2, 3, 13):  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
            return torch.from_dlpack(out)
    return None


def stage_for(arr: Any, starts: np.ndarray, counts: Sequence[int], steps: Optional[Sequence[int]],
              box_stride: int, strides: Sequence[int], out_bytes: int, staging: Staging,
              gpu_codecs: bool = True) -> _plan.StagedPlan:
    """The host half of a GPU read into ``staging`` (the engine reads with the GIL released)."""
    hint = 0 if staging.buf is None else staging.buf.numel()
    return _plan.stage(arr._native(), starts, counts, steps, box_stride, strides, out_bytes,
                       staging.get, lambda t: t.numpy(), gpu_codecs=gpu_codecs, capacity_hint=hint)


def execute(arr: Any, plan: _plan.StagedPlan, out: torch.Tensor, redo, stream=None) -> None:
    """The device half: runs ``plan`` into ``out``; ``redo()`` returns the batch read on the
    CPU (a host tensor) when nvCOMP could not decode a frame."""
    ex = executor_for(out.device)
    if stream is None and ex.cuda:
        stream = torch.cuda.current_stream(out.device)
    finish(ex, ex.submit(plan, out, stream), out, redo, stream)


def finish(ex: Executor, pending: Pending, out: torch.Tensor, redo, stream: Any) -> None:
    """Waits for a submitted batch; when nvCOMP did not decode a frame to its size and
    checksum, redoes the batch on the CPU (``redo()``: the batch read into host memory, which
    raises lsio's typed error when the data is corrupt) and copies it into ``out``."""
    if pending.wait():
        return
    _count(cpu_redos=1)
    host = redo()
    with ex._stream(stream):
        out.copy_(torch.from_numpy(np.ascontiguousarray(host)).reshape(out.shape))
    if ex.cuda:
        stream.synchronize()


def _torch_dtype(dt: np.dtype) -> torch.dtype:
    try:
        return torch.from_numpy(np.empty(0, dtype=dt)).dtype
    except TypeError as e:
        raise TypeError(f"torch has no dtype for lsio dtype {dt}") from e


def _check_out(t: torch.Tensor, shape: Sequence[int], dtype: np.dtype) -> None:
    want = _torch_dtype(dtype)
    if t.dtype != want:
        raise TypeError(f"out has dtype {t.dtype}, the read gives {want}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"out has shape {tuple(t.shape)}, the read gives {tuple(shape)}")
    if not t.is_contiguous():
        raise ValueError("a CUDA out must be contiguous")


def _host_then_copy(t: torch.Tensor, host: np.ndarray, stream) -> None:
    stream = stream if stream is not None else torch.cuda.current_stream(t.device)
    with torch.cuda.stream(stream):
        t.copy_(torch.from_numpy(np.ascontiguousarray(host)).reshape(t.shape))
    stream.synchronize()


def read_crops_into(arr: Any, starts: np.ndarray, crop: Sequence[int], out_obj: Any, dtype: Any, scale: Any,
                    offset: Any, stream=None) -> Any:
    """Array.read_crops with a CUDA ``out`` (lsio/gpu/__init__.py)."""
    t = as_cuda_tensor(out_obj)
    full = (starts.shape[0],) + tuple(crop)
    transform, out_dtype = arr._transform(dtype, scale, offset)
    _check_out(t, full, np.dtype(out_dtype))
    if t.numel() == 0:
        return out_obj
    if transform is not None:  # conversions run on the CPU path, then one copy
        _host_then_copy(t, arr.read_crops(starts, crop, dtype=dtype, scale=scale, offset=offset), stream)
        return out_obj
    itemsize = t.element_size()
    strides = _plan.out_layout(crop, itemsize)
    box = int(np.prod(crop, dtype=np.int64)) * itemsize
    staging = thread_staging(arr.options.get("memory_limit") or 0)
    plan = stage_for(arr, starts, crop, None, box, strides, box * starts.shape[0], staging)
    execute(arr, plan, t, lambda: arr.read_crops(starts, crop), _ordered(stream, t))
    return out_obj


def _ordered(stream: Any, t: torch.Tensor) -> Any:
    """A caller's stream made to wait for the work queued on the current one (which may still
    read or write ``t``) before lsio writes ``t`` there."""
    if stream is not None:
        current = torch.cuda.current_stream(t.device)
        if stream != current:
            stream.wait_stream(current)
    return stream


def read_into(arr: Any, key: Any, selection: Any, out_obj: Any, dtype: Any, scale: Any, offset: Any,
              stream=None) -> Any:
    """Array.read with a CUDA ``out``: basic indexing with positive steps runs on the GPU.
    ``selection``: the key normalised by lsio/array.py (_normalize_key)."""
    t = as_cuda_tensor(out_obj)
    starts, counts, steps, out_shape, int_axes, flips, new_axes = selection
    transform, out_dtype = arr._transform(dtype, scale, offset)
    _check_out(t, out_shape, np.dtype(out_dtype))
    if t.numel() == 0:
        return out_obj
    if transform is not None or flips or new_axes:
        _host_then_copy(t, arr.read(key, dtype=dtype, scale=scale, offset=offset), stream)
        return out_obj
    itemsize = t.element_size()
    strides, j = [], 0
    for d in range(len(counts)):
        if d in int_axes:
            strides.append(0)
        else:
            strides.append(t.stride(j) * itemsize)
            j += 1
    staging = thread_staging(arr.options.get("memory_limit") or 0)
    st = np.asarray([starts], dtype=np.int64)
    plan = stage_for(arr, st, counts, steps, 0, strides, t.numel() * itemsize, staging)
    execute(arr, plan, t, lambda: arr.read(key), _ordered(stream, t))
    return out_obj
