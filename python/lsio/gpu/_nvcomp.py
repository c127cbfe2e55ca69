"""nvCOMP's batched zstd decoder through ctypes, loaded at first GPU use only.

lsio's wheel carries no CUDA code: the extra ``lsio[gpu]`` installs NVIDIA's
``nvidia-libnvcomp-cu13`` (or ``-cu12``) wheel, whose ``libnvcomp.so`` (CUDA runtime linked in
statically) is loaded here with ``RTLD_LOCAL``. ``LSIO_NVCOMP_LIBRARY`` names another copy.
The C API used is nvCOMP 6's (``nvcompBatchedZstdDecompress*`` taking an options struct by
value; checked on an H200 with nvidia-libnvcomp-cu13 6.0.0.12); every pointer argument is a
device address held in a torch tensor.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Optional

_lock = threading.Lock()
_lib: Optional["Zstd"] = None
_error: Optional[str] = None

STATUS_NAMES = {
    0: "success", 10: "invalid value", 11: "not supported", 12: "cannot decompress", 13: "bad checksum",
    14: "cannot verify checksums", 15: "output buffer too small", 16: "wrong header length", 17: "alignment",
    18: "chunk size too large", 20: "wrong input length", 21: "batch size too large", 1000: "CUDA error",
    10000: "internal error",
}


class _DecompressOpts(ctypes.Structure):
    # nvcompBatchedZstdDecompressOpts_t: the backend enum, then 60 reserved (zero) bytes.
    _fields_ = [("backend", ctypes.c_int), ("reserved", ctypes.c_char * 60)]


class _Alignments(ctypes.Structure):
    _fields_ = [("input", ctypes.c_size_t), ("output", ctypes.c_size_t), ("temp", ctypes.c_size_t)]


def _candidates():
    env = os.environ.get("LSIO_NVCOMP_LIBRARY")
    if env:
        yield env
        return
    for pkg in ("nvidia.libnvcomp", "nvidia.nvcomp"):
        try:
            mod = __import__(pkg, fromlist=["__file__"])
        except ImportError:
            continue
        base = os.path.dirname(getattr(mod, "__file__", "") or "")
        for sub in ("lib64", "lib", "bin", ""):
            for name in ("libnvcomp.so.6",):
                p = os.path.join(base, sub, name)
                if os.path.isfile(p):
                    yield p
    yield "libnvcomp.so.6"


class Zstd:
    """The batched zstd decoder of one loaded libnvcomp."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.path = path
        self.opts = _DecompressOpts()  # backend 0: nvCOMP picks (hardware engine or CUDA)
        f = lib.nvcompBatchedZstdDecompressGetTempSize
        f.argtypes = [ctypes.c_size_t, ctypes.c_size_t, _DecompressOpts, ctypes.POINTER(ctypes.c_size_t),
                      ctypes.c_size_t, ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._temp_size = f
        f = lib.nvcompBatchedZstdDecompressAsync
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _DecompressOpts, ctypes.c_void_p,
                      ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._decompress = f
        f = lib.nvcompBatchedZstdDecompressGetRequiredAlignments
        f.argtypes = [_DecompressOpts, ctypes.POINTER(_Alignments)]
        f.restype = ctypes.c_int
        a = _Alignments()
        _check(f(self.opts, ctypes.byref(a)), "nvcompBatchedZstdDecompressGetRequiredAlignments")
        self.alignments = (int(a.input), int(a.output), int(a.temp))
        # Staged frames and decode slots sit at multiples of 16 (lsio/stage.h kStageAlign),
        # temp buffers at torch's 512.
        if a.input > 16 or a.output > 16 or a.temp > 512:
            raise NvcompError(f"nvCOMP asks for alignments {self.alignments}, more than lsio's staging gives")

    def temp_bytes(self, num_chunks: int, max_chunk: int, total: int, stream: int) -> int:
        n = ctypes.c_size_t(0)
        _check(self._temp_size(num_chunks, max_chunk, self.opts, ctypes.byref(n), total, ctypes.c_void_p(stream)),
               "nvcompBatchedZstdDecompressGetTempSize")
        return int(n.value)

    def decompress(self, comp_ptrs: int, comp_bytes: int, buf_bytes: int, actual_bytes: int, num_chunks: int,
                   temp: int, temp_bytes: int, out_ptrs: int, statuses: int, stream: int) -> None:
        """Arguments are device addresses of the per-chunk arrays (nvCOMP's zstd.h)."""
        _check(self._decompress(ctypes.c_void_p(comp_ptrs), ctypes.c_void_p(comp_bytes), ctypes.c_void_p(buf_bytes),
                                ctypes.c_void_p(actual_bytes), num_chunks, ctypes.c_void_p(temp or None), temp_bytes,
                                ctypes.c_void_p(out_ptrs), self.opts, ctypes.c_void_p(statuses),
                                ctypes.c_void_p(stream)),
               "nvcompBatchedZstdDecompressAsync")


class NvcompError(RuntimeError):
    pass


def _check(status: int, what: str) -> None:
    if status != 0:
        raise NvcompError(f"{what} failed: nvCOMP status {status} ({STATUS_NAMES.get(status, 'unknown')})")


def zstd() -> Zstd:
    """The process's nvCOMP zstd decoder; raises ImportError saying what to install."""
    global _lib, _error
    with _lock:
        if _lib is not None:
            return _lib
        if _error is not None:
            raise ImportError(_error)
        tried = []
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
                _lib = Zstd(lib, path)
                return _lib
            except (OSError, AttributeError, NvcompError) as e:
                tried.append(f"{path}: {e}")
        _error = ("lsio: GPU decoding needs NVIDIA's nvCOMP library: pip install 'lsio[gpu]' (or "
                  "nvidia-libnvcomp-cu13 / -cu12 matching your CUDA); tried " + "; ".join(tried))
        raise ImportError(_error)
