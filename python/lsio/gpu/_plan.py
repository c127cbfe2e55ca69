"""The device plan of one batch (the GPU-independent half of decoding on the GPU) and its CPU
reference executor.

``stage()`` asks the engine (``_core.Array.stage_boxes``, cpp/src/read/stage.h) to read every
chunk a batch of boxes touches into a staging buffer and returns a :class:`StagedPlan`: the
frames in staging (compressed frames a GPU decoder can decode, or chunks the CPU already
decoded, plus one fill-value chunk when chunks are missing) and the scatter ops that place
each chunk's part of each box into the output. Executors lay one *work* buffer out as

    [ staging bytes (work_offset 0) | pad to 256 | decode area (decode_base) ]

copy the staging bytes in, decode every compressed frame to ``decode_base + decoded_offset``
and run the ops with :meth:`StagedPlan.op_table`'s absolute offsets. :func:`run_reference`
does exactly that on the CPU (the engine's zstd, raw deflate and LZ4 block decoders, the
gzip CRC-32 check, numpy strided copies), so tests can check the plan and the arithmetic bit
for bit without a GPU; lsio/gpu/_cuda.py does it with nvCOMP and a Triton kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from .. import _core

# Columns of the engine's tables (lsio/stage.h: FrameCol, OpCol).
# F_CHECK: for deflate frames (gzip members) the CRC-32 (zlib.crc32) the decoded chunk must
# have, checked after decoding; -1 for every other frame.
F_STAGING, F_STORED, F_DECODED_AT, F_DECODED, F_CODEC, F_FILE, F_OBJECT_OFFSET, F_TASK, F_CHECK = range(9)
O_FRAME, O_SRC, O_DST, O_RUN, O_N1, O_SS1, O_DS1, O_N2, O_SS2, O_DS2 = range(10)
# GpuCodec (cpp/src/codec/chain.h): raw = decoded by the CPU into staging; deflate frames are
# raw deflate streams (a gzip member's body), lz4 frames raw LZ4 blocks (no size header).
CODEC_RAW, CODEC_ZSTD, CODEC_DEFLATE, CODEC_LZ4 = 0, 1, 2, 3
CODEC_NAMES = {CODEC_RAW: "raw", CODEC_ZSTD: "zstd", CODEC_DEFLATE: "deflate", CODEC_LZ4: "lz4"}

DECODE_ALIGN = 256  # where the decode area starts in the work buffer


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


@dataclass
class StagedPlan:
    """What one staged call left: ``staging`` (the buffer the frames are in) and the tables."""

    staging: Any               # the staging buffer object (numpy uint8 view of it: staging_np)
    staging_np: np.ndarray
    staging_used: int
    decoded_bytes: int
    max_decoded: int
    frames: np.ndarray         # (F, 9) int64
    ops: np.ndarray            # (O, 10) int64
    coords: np.ndarray         # (F, ndim) chunk coordinates (-1: the fill frame)
    files: List[str]
    bytes_read: int
    out_bytes: int             # bytes of the output the ops address (they stay inside it)

    @property
    def decode_base(self) -> int:
        return _align(self.staging_used, DECODE_ALIGN)

    @property
    def work_bytes(self) -> int:
        return _align(self.decode_base + self.decoded_bytes, 16)

    def compressed(self, codec: int = CODEC_ZSTD) -> np.ndarray:
        """Indexes of the frames of ``codec`` (decoded into the decode area)."""
        return np.flatnonzero(self.frames[:, F_CODEC] == codec)

    def gpu_frames(self) -> np.ndarray:
        """Indexes of every compressed frame, whatever its codec (all that an executor
        decodes into the decode area)."""
        return np.flatnonzero(self.frames[:, F_CODEC] != CODEC_RAW)

    def frame_base(self) -> np.ndarray:
        """Per frame: where its decoded chunk starts in the work buffer."""
        f = self.frames
        return np.where(f[:, F_CODEC] == CODEC_RAW, f[:, F_STAGING], self.decode_base + f[:, F_DECODED_AT])

    def op_table(self, unit: int = 1) -> np.ndarray:
        """The ops as (src, dst, run, n1, ss1, ds1, n2, ss2, ds2) rows in units of ``unit``
        bytes (every offset, run and stride is a multiple of the element size), with src
        absolute in the work buffer and dst relative to the output's start."""
        ops = self.ops
        t = np.empty((ops.shape[0], 9), dtype=np.int64)
        t[:, 0] = self.frame_base()[ops[:, O_FRAME]] + ops[:, O_SRC]
        t[:, 1:] = ops[:, O_DST:]
        if unit != 1:
            byte_cols = [0, 1, 2, 4, 5, 7, 8]  # all but the counts n1, n2
            if np.any(t[:, byte_cols] % unit):
                raise AssertionError(f"a scatter op is not aligned to {unit} bytes")
            t[:, byte_cols] //= unit
        return t

    def describe_frame(self, i: int) -> str:
        """'chunk (0, 3, 1) of <file> at bytes [o, o+n)' for error messages."""
        f = self.frames[i]
        if f[F_FILE] < 0:
            return "the fill-value chunk"
        coords = ", ".join(str(int(c)) for c in self.coords[i])
        return (f"chunk ({coords}) of {self.files[int(f[F_FILE])]} at bytes "
                f"[{int(f[F_OBJECT_OFFSET])}, {int(f[F_OBJECT_OFFSET]) + int(f[F_STORED])})")


def out_layout(shape: Sequence[int], itemsize: int, strides_bytes: Optional[Sequence[int]] = None):
    """(box stride, per-dimension strides) in bytes of a C-contiguous (N, *shape) output,
    or of the given strides."""
    if strides_bytes is None:
        strides_bytes = []
        s = itemsize
        for n in reversed(tuple(shape)):
            strides_bytes.append(s)
            s *= int(n)
        strides_bytes = strides_bytes[::-1]
    return list(strides_bytes)


def stage(native: Any, starts: np.ndarray, counts: Sequence[int], steps: Optional[Sequence[int]],
          box_stride: int, strides: Sequence[int], out_bytes: int,
          staging_for: Callable[[int], Any], as_numpy: Callable[[Any], np.ndarray],
          gpu_codecs: bool = True, capacity_hint: int = 0) -> StagedPlan:
    """Stages the boxes ``starts`` (N, ndim) of ``counts`` (and ``steps``) for an output laid
    out with ``box_stride`` / ``strides`` (bytes). ``staging_for(n)`` returns a buffer of at
    least n bytes (``as_numpy`` views it as uint8); a buffer that proves too small is asked
    for again, larger, once the engine says how much suffices."""
    need = max(int(capacity_hint), 1)
    for _ in range(4):
        buf = staging_for(need)
        view = as_numpy(buf)
        r = native.stage_boxes(starts, list(counts), None if steps is None else list(steps),
                               int(box_stride), list(strides), view, gpu_codecs)
        if r["needed"] == 0:
            return StagedPlan(staging=buf, staging_np=view, staging_used=int(r["staging_used"]),
                              decoded_bytes=int(r["decoded_bytes"]), max_decoded=int(r["max_decoded"]),
                              frames=r["frames"], ops=r["ops"], coords=r["coords"], files=list(r["files"]),
                              bytes_read=int(r["bytes_read"]), out_bytes=int(out_bytes))
        need = max(int(r["needed"]), view.size + 1)
    raise RuntimeError("lsio: the staging buffer kept growing while staging one batch")


def decode_frames_cpu(plan: StagedPlan, work: np.ndarray, frames: Optional[np.ndarray] = None) -> None:
    """Decodes compressed frames (all, of every codec, or the indexes ``frames``) from the
    staging copy at the start of ``work`` into its decode area, with the engine's CPU
    decoders, checking each deflate frame's CRC-32 (F_CHECK)."""
    idx = plan.gpu_frames() if frames is None else frames
    base = plan.decode_base
    for i in idx:
        f = plan.frames[i]
        src = work[f[F_STAGING]: f[F_STAGING] + f[F_STORED]]
        at = base + f[F_DECODED_AT]
        try:
            _core.decode_staged_frame(int(f[F_CODEC]), src, work[at: at + f[F_DECODED]], int(f[F_CHECK]))
        except Exception as e:
            raise type(e)(f"{e} ({plan.describe_frame(int(i))})") from None


def scatter_cpu(plan: StagedPlan, work: np.ndarray, out_bytes: np.ndarray) -> None:
    """Runs the ops: the same arithmetic as the GPU kernel, one strided numpy copy per op."""
    from numpy.lib.stride_tricks import as_strided

    for src, dst, run, n1, ss1, ds1, n2, ss2, ds2 in plan.op_table(1).tolist():
        # Both ends of every op must lie inside the buffers: the kernel trusts them.
        last_src = src + (n2 - 1) * ss2 + (n1 - 1) * ss1 + run
        last_dst = dst + (n2 - 1) * ds2 + (n1 - 1) * ds1 + run
        if src < 0 or dst < 0 or last_src > work.size or last_dst > out_bytes.size:
            raise AssertionError("a scatter op leaves its buffers")
        s = as_strided(work[src:], shape=(n2, n1, run), strides=(ss2, ss1, 1), writeable=False)
        d = as_strided(out_bytes[dst:], shape=(n2, n1, run), strides=(ds2, ds1, 1))
        d[...] = s


def run_reference(plan: StagedPlan, out: np.ndarray) -> np.ndarray:
    """The CPU reference executor: performs ``plan`` into the C-contiguous numpy ``out``
    exactly as the CUDA executor does on the device (same work-buffer layout, same ops)."""
    if not out.flags.c_contiguous:
        raise ValueError("the reference executor writes C-contiguous outputs")
    work = np.zeros(plan.work_bytes, dtype=np.uint8)
    work[: plan.staging_used] = plan.staging_np[: plan.staging_used]
    decode_frames_cpu(plan, work)
    scatter_cpu(plan, work, out.reshape(-1).view(np.uint8))
    return out
