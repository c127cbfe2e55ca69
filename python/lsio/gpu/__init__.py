"""Decoding on the GPU: crops read straight into CUDA tensors, decoded by nvCOMP.

``arr.read_crops(starts, shape, out=t)`` and ``arr.read(key, out=t)`` with ``t`` a CUDA
tensor (torch, or any object with ``__cuda_array_interface__`` / DLPack on a CUDA device) of
the array's dtype and the result's shape take this path: the engine reads the compressed
chunks of the whole batch into pinned host staging (io_uring or remote reads, coalesced, GIL
released), one copy moves them to the GPU, nvCOMP decodes every zstd chunk there in one
batched call, and a Triton kernel scatters each chunk's part of each crop into ``t``. Chunks
the GPU cannot decode (blosc, gzip, transposed or big-endian layouts, uncompressed) are
decoded by the CPU into the same staging buffer and ride along in the same copy, so any array
works. Needs ``pip install 'lsio[gpu]'`` (nvCOMP) and torch with CUDA (Triton comes with it);
nothing here is imported by ``import lsio``.

GPU reads happen in the process that owns the CUDA context (the main training process):
CUDA does not survive fork, so DataLoader workers keep reading on the CPU. For in-process
loading with the next batch's host read overlapping the current step, see
``lsio.torch.CropLoader(..., device="cuda")``.

Functions here: :func:`available` (can this process decode on the GPU, and if not why),
:func:`stats` (counters), :func:`read_crops_reference` (the CPU reference executor of the
same device plan: what the GPU path computes, bit for bit, without a GPU).
"""

from __future__ import annotations

import operator
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from . import _plan

__all__ = ["available", "stats", "read_crops_reference", "stage_crops"]


def available() -> Tuple[bool, str]:
    """(True, "") when this process can decode on the GPU, else (False, why not)."""
    try:
        import torch
    except ImportError as e:
        return False, f"torch is not installed ({e})"
    if not torch.cuda.is_available():
        return False, "torch sees no CUDA device"
    try:
        import triton  # noqa: F401
    except ImportError as e:
        return False, f"Triton is not installed ({e})"
    from . import _nvcomp

    try:
        _nvcomp.zstd()
    except ImportError as e:
        return False, str(e)
    return True, ""


_ready = False


def require() -> None:
    """Raises RuntimeError saying what is missing unless :func:`available` (checked once per
    process while it fails, then cached)."""
    global _ready
    if _ready:
        return
    ok, why = available()
    if not ok:
        raise RuntimeError(f"lsio: out= is a CUDA array, but this process cannot decode on the GPU: {why}")
    _ready = True


def stats() -> Dict[str, int]:
    """Counters of this process's GPU reads: batches, frames decoded on the GPU and staged
    decoded by the CPU, bytes copied to the device, batches redone on the CPU (``cpu_redos``)
    and pinned staging bytes held."""
    try:
        from . import _cuda
    except ImportError:
        return {}
    return _cuda.stats()


def _crop_args(arr: Any, starts: Any, shape: Sequence[int]):
    nd = len(arr.shape)
    st = np.ascontiguousarray(np.asarray(starts), dtype=np.int64)
    if st.ndim != 2 or st.shape[1] != nd:
        raise ValueError(f"starts must have shape (N, {nd}), got {st.shape}")
    crop = tuple(operator.index(s) for s in shape)
    if len(crop) != nd:
        raise ValueError(f"crop shape {crop} has {len(crop)} dimensions, the array has {nd}")
    return st, crop


def stage_crops(arr: Any, starts: Any, shape: Sequence[int], gpu_codecs: bool = True,
                staging: Optional[np.ndarray] = None) -> _plan.StagedPlan:
    """The device plan of ``arr.read_crops(starts, shape)`` staged into host memory (a numpy
    buffer, grown as needed): the frames, the scatter ops and the staging bytes."""
    st, crop = _crop_args(arr, starts, shape)
    itemsize = np.dtype(arr.dtype).itemsize
    strides = _plan.out_layout(crop, itemsize)
    box = int(np.prod(crop, dtype=np.int64)) * itemsize
    hold = {"buf": staging}

    def get(n: int) -> np.ndarray:
        if hold["buf"] is None or hold["buf"].size < n:
            hold["buf"] = np.empty(n, dtype=np.uint8)
        return hold["buf"]

    return _plan.stage(arr._native(), st, crop, None, box, strides, box * st.shape[0], get, lambda b: b,
                       gpu_codecs=gpu_codecs)


def read_crops_reference(arr: Any, starts: Any, shape: Sequence[int], gpu_codecs: bool = True) -> np.ndarray:
    """``arr.read_crops(starts, shape)`` through the device plan, performed on the CPU by the
    reference executor (lsio/gpu/_plan.py): the same frames, decode area and scatter ops the
    CUDA executor runs."""
    st, crop = _crop_args(arr, starts, shape)
    out = np.empty((st.shape[0],) + crop, dtype=arr.dtype)
    if out.size == 0:
        return out
    return _plan.run_reference(stage_crops(arr, st, crop, gpu_codecs), out)
