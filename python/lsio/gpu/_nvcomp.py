"""nvCOMP's batched decoders (zstd, deflate, LZ4) and CRC-32 through ctypes, loaded at first
GPU use only.

lsio's wheel carries no CUDA code: the extra ``lsio[gpu]`` installs NVIDIA's
``nvidia-libnvcomp-cu13`` (or ``-cu12``) wheel, whose ``libnvcomp.so`` (CUDA runtime linked in
statically) is loaded here with ``RTLD_LOCAL``. ``LSIO_NVCOMP_LIBRARY`` names another copy.
The C API used is nvCOMP 6's: every ``nvcompBatched<Codec>Decompress*`` function takes an
options struct of 64 bytes by value, whose all-zero form is the default (backend chosen by
nvCOMP, LZ4 as plain bytes, no bitshuffle); signatures as in the wheel's headers
(nvcomp/zstd.h, deflate.h, lz4.h, crc32.h of nvidia-libnvcomp-cu13 6.0.0.12). Every pointer
argument is a device address held in a torch tensor.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Dict, Optional

_lock = threading.Lock()
_lib: Optional["Nvcomp"] = None
_error: Optional[str] = None

STATUS_NAMES = {
    0: "success", 10: "invalid value", 11: "not supported", 12: "cannot decompress", 13: "bad checksum",
    14: "cannot verify checksums", 15: "output buffer too small", 16: "wrong header length", 17: "alignment",
    18: "chunk size too large", 20: "wrong input length", 21: "batch size too large", 1000: "CUDA error",
    10000: "internal error",
}

# Frame codecs of a staged plan (lsio/gpu/_plan.py CODEC_*) -> nvCOMP's name for the decoder.
CODEC_FUNCTIONS = {1: "Zstd", 2: "Deflate", 3: "LZ4"}


class _DecompressOpts(ctypes.Structure):
    # nvcompBatched{Zstd,Deflate,LZ4}DecompressOpts_t: 64 bytes, the backend enum first; zero
    # everywhere is each codec's default.
    _fields_ = [("backend", ctypes.c_int), ("reserved", ctypes.c_char * 60)]


class _Alignments(ctypes.Structure):
    _fields_ = [("input", ctypes.c_size_t), ("output", ctypes.c_size_t), ("temp", ctypes.c_size_t)]


class _Crc32Spec(ctypes.Structure):
    _fields_ = [("poly", ctypes.c_uint32), ("init", ctypes.c_uint32), ("ref_in", ctypes.c_bool),
                ("ref_out", ctypes.c_bool), ("xorout", ctypes.c_uint32), ("reserved", ctypes.c_char * 16)]


class _Crc32KernelConf(ctypes.Structure):
    _fields_ = [("kernel_kind", ctypes.c_int), ("bytes_per_read", ctypes.c_int32), ("blocks_per_msg", ctypes.c_int32),
                ("reserved", ctypes.c_char * 20)]


class _Crc32Opts(ctypes.Structure):
    _fields_ = [("spec", _Crc32Spec), ("kernel_conf", _Crc32KernelConf), ("reserved", ctypes.c_char * 64)]


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


class Decoder:
    """One batched decoder of a loaded libnvcomp (``name``: Zstd, Deflate or LZ4)."""

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        self.name = name
        self.opts = _DecompressOpts()
        p = f"nvcompBatched{name}Decompress"
        f = getattr(lib, p + "GetTempSize")
        f.argtypes = [ctypes.c_size_t, ctypes.c_size_t, _DecompressOpts, ctypes.POINTER(ctypes.c_size_t),
                      ctypes.c_size_t, ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._temp_size = f
        f = getattr(lib, p + "Async")
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _DecompressOpts, ctypes.c_void_p,
                      ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._decompress = f
        f = getattr(lib, p + "GetRequiredAlignments")
        f.argtypes = [_DecompressOpts, ctypes.POINTER(_Alignments)]
        f.restype = ctypes.c_int
        a = _Alignments()
        _check(f(self.opts, ctypes.byref(a)), p + "GetRequiredAlignments")
        self.alignments = (int(a.input), int(a.output), int(a.temp))
        # Staged frames and decode slots sit at multiples of 16 (lsio/stage.h kStageAlign),
        # temp buffers at torch's 512.
        if a.input > 16 or a.output > 16 or a.temp > 512:
            raise NvcompError(f"nvCOMP {name} asks for alignments {self.alignments}, more than lsio's staging gives")

    def temp_bytes(self, num_chunks: int, max_chunk: int, total: int, stream: int) -> int:
        n = ctypes.c_size_t(0)
        _check(self._temp_size(num_chunks, max_chunk, self.opts, ctypes.byref(n), total, ctypes.c_void_p(stream)),
               f"nvcompBatched{self.name}DecompressGetTempSize")
        return int(n.value)

    def decompress(self, comp_ptrs: int, comp_bytes: int, buf_bytes: int, actual_bytes: int, num_chunks: int,
                   temp: int, temp_bytes: int, out_ptrs: int, statuses: int, stream: int) -> None:
        """Arguments are device addresses of the per-chunk arrays (nvCOMP's headers)."""
        _check(self._decompress(ctypes.c_void_p(comp_ptrs), ctypes.c_void_p(comp_bytes), ctypes.c_void_p(buf_bytes),
                                ctypes.c_void_p(actual_bytes), num_chunks, ctypes.c_void_p(temp or None), temp_bytes,
                                ctypes.c_void_p(out_ptrs), self.opts, ctypes.c_void_p(statuses),
                                ctypes.c_void_p(stream)),
               f"nvcompBatched{self.name}DecompressAsync")


class Crc32:
    """nvCOMP's batched CRC-32 (gzip's: polynomial 0x04C11DB7 reflected, init and xorout
    0xFFFFFFFF, what zlib's crc32 computes): verifies gzip chunks after a GPU decode."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        f = lib.nvcompBatchedCRC32Async
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, _Crc32Opts, ctypes.c_int,
                      ctypes.c_void_p, ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._crc = f
        f = lib.nvcompBatchedCRC32GetHeuristicConf
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(_Crc32KernelConf), ctypes.c_size_t,
                      ctypes.c_void_p]
        f.restype = ctypes.c_int
        self._conf = f
        self._confs: Dict[tuple, _Crc32KernelConf] = {}

    def compute(self, ptrs: int, sizes: int, num_chunks: int, max_bytes: int, crcs: int, statuses: int,
                stream: int) -> None:
        """CRC-32 of each chunk (device pointer and size tables) into ``crcs`` (uint32 each)."""
        key = (max(1, num_chunks).bit_length(), int(max_bytes))
        conf = self._confs.get(key)
        if conf is None:
            conf = _Crc32KernelConf()
            # max_input_chunk_bytes given: host-side only, no device synchronisation.
            _check(self._conf(None, num_chunks, ctypes.byref(conf), int(max_bytes), None),
                   "nvcompBatchedCRC32GetHeuristicConf")
            self._confs[key] = conf
        opts = _Crc32Opts()
        opts.spec = _Crc32Spec(0x04C11DB7, 0xFFFFFFFF, True, True, 0xFFFFFFFF)
        opts.kernel_conf = conf
        _check(self._crc(ctypes.c_void_p(ptrs), ctypes.c_void_p(sizes), num_chunks, ctypes.c_void_p(crcs), opts, 0,
                         ctypes.c_void_p(statuses), ctypes.c_void_p(stream)),
               "nvcompBatchedCRC32Async")


class Nvcomp:
    """One loaded libnvcomp: its decoders (made at first use) and CRC-32."""

    def __init__(self, lib: ctypes.CDLL, path: str) -> None:
        self.lib, self.path = lib, path
        self._decoders: Dict[int, Decoder] = {}
        self._crc: Optional[Crc32] = None
        self._dlock = threading.Lock()
        self.decoder(1)  # zstd: what available() promises

    def decoder(self, codec: int) -> Decoder:
        """The decoder of a staged frame codec; raises NvcompError when this nvCOMP lacks it."""
        with self._dlock:
            d = self._decoders.get(codec)
            if d is None:
                name = CODEC_FUNCTIONS.get(codec)
                if name is None:
                    raise NvcompError(f"no nvCOMP decoder for frame codec {codec}")
                try:
                    d = Decoder(self.lib, name)
                except AttributeError as e:
                    raise NvcompError(f"{self.path} has no batched {name} decoder ({e})") from None
                self._decoders[codec] = d
            return d

    def crc32(self) -> Crc32:
        with self._dlock:
            if self._crc is None:
                try:
                    self._crc = Crc32(self.lib)
                except AttributeError as e:
                    raise NvcompError(f"{self.path} has no batched CRC-32 ({e})") from None
            return self._crc


class NvcompError(RuntimeError):
    pass


def _check(status: int, what: str) -> None:
    if status != 0:
        raise NvcompError(f"{what} failed: nvCOMP status {status} ({STATUS_NAMES.get(status, 'unknown')})")


def library() -> Nvcomp:
    """The process's nvCOMP; raises ImportError saying what to install."""
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
                _lib = Nvcomp(lib, path)
                return _lib
            except (OSError, AttributeError, NvcompError) as e:
                tried.append(f"{path}: {e}")
        _error = ("lsio: GPU decoding needs NVIDIA's nvCOMP library: pip install 'lsio[gpu]' (or "
                  "nvidia-libnvcomp-cu13 / -cu12 matching your CUDA); tried " + "; ".join(tried))
        raise ImportError(_error)


def zstd() -> Decoder:
    """The process's nvCOMP zstd decoder; raises ImportError saying what to install."""
    return library().decoder(1)
