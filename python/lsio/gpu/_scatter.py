"""The scatter kernel of the CUDA executor (Triton): runs a staged plan's ops on the device.

One program per (op, slice): op rows are (src, dst, run, n1, ss1, ds1, n2, ss2, ds2) in units
of ``unit`` bytes (lsio/gpu/_plan.py: StagedPlan.op_table); program (i, j) copies elements
j*BLOCK, j*BLOCK + G*BLOCK, ... of op i's n2 x n1 x run elements, so the grid's second axis
(G) spreads a large op over many SMs while small ops finish in one step. Elements move as
integers of ``unit`` bytes (bit-exact for every dtype, NaN payloads included).

Under ``TRITON_INTERPRET=1`` the same kernel runs on CPU tensors (tests/python/test_gpu.py).
"""

from __future__ import annotations

import triton
import triton.language as tl

_BLOCK = 1024
_MAX_SLICES = 256


@triton.jit
def _scatter_kernel(src_ptr, dst_ptr, ops_ptr, BLOCK: tl.constexpr):
    op = tl.program_id(0).to(tl.int64)
    part = tl.program_id(1).to(tl.int64)
    parts = tl.num_programs(1).to(tl.int64)
    row = ops_ptr + op * 9
    src0 = tl.load(row + 0)
    dst0 = tl.load(row + 1)
    run = tl.load(row + 2)
    n1 = tl.load(row + 3)
    ss1 = tl.load(row + 4)
    ds1 = tl.load(row + 5)
    n2 = tl.load(row + 6)
    ss2 = tl.load(row + 7)
    ds2 = tl.load(row + 8)
    total = run * n1 * n2
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    start = part * BLOCK
    while start < total:
        e = start + lanes
        m = e < total
        e = tl.where(m, e, 0)  # lanes past the end address element 0 (never touched)
        k = e % run
        r = e // run
        i1 = r % n1
        i2 = r // n1
        v = tl.load(src_ptr + (src0 + i2 * ss2 + i1 * ss1 + k), mask=m)
        tl.store(dst_ptr + (dst0 + i2 * ds2 + i1 * ds1 + k), v, mask=m)
        start += parts * BLOCK


def scatter(work_units, out_units, ops, max_elems: int) -> None:
    """Launches the kernel on the current stream. ``work_units`` / ``out_units``: 1-d tensors
    of the unit integer type over the work buffer and the output; ``ops``: (O, 9) int64
    tensor on the same device; ``max_elems``: the largest op's element count."""
    n = int(ops.shape[0])
    if n == 0:
        return
    slices = max(1, min(_MAX_SLICES, triton.cdiv(int(max_elems), _BLOCK)))
    _scatter_kernel[(n, slices)](work_units, out_units, ops, BLOCK=_BLOCK)
