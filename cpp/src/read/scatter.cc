// Scatter and fill of chunk pieces into the output; see scatter.h.
#include "read/scatter.h"

#include <cstring>

#include "read/call.h"
#include "util/strided_copy.h"

namespace lsio {
namespace {

// Outer plans: walks the product of a piece's per-axis segment groups and calls
// run(dst, dst_stride, src, src_stride, n) once per innermost segment (n elements along the
// last axis). `src` is the chunk (null for fills: src offsets are then meaningless). The
// segments of the axes before the last are walked element by element; the last axis's
// segments each become one strided run, which for slice-like selections is a whole row.
template <typename Run>
void WalkOuter(const Plan& plan, const Piece& pc, const int64_t* cstride, const uint8_t* src, Run&& run) {
  const OuterSelection& sel = *plan.outer;
  const int nd = plan.ndim;
  if (nd == 0) {
    run(sel.dst, 0, src, 0, 1);
    return;
  }
  const uint32_t* groups = plan.piece_groups.data() + pc.box;
  const int64_t* ostride = sel.byte_strides.data();
  const int last = nd - 1;
  const SegmentGroup& lg = plan.groups[groups[last]];
  const Segment* lsegs = plan.segments.data() + lg.first;
  auto row = [&](uint8_t* dst, const uint8_t* from) {
    for (uint32_t i = 0; i < lg.count; ++i) {
      const Segment& s = lsegs[i];
      run(dst + s.dst_first * ostride[last], s.dst_step * ostride[last],
          src != nullptr ? from + s.src_start * cstride[last] : nullptr, s.step * cstride[last], s.count);
    }
  };
  // Recursion over the axes before the last (depth <= 63).
  auto walk = [&](auto&& self, int d, uint8_t* dst, const uint8_t* from) -> void {
    if (d == last) {
      row(dst, from);
      return;
    }
    const SegmentGroup& grp = plan.groups[groups[d]];
    for (uint32_t i = 0; i < grp.count; ++i) {
      const Segment& s = plan.segments[grp.first + i];
      uint8_t* o = dst + s.dst_first * ostride[d];
      const uint8_t* f = src != nullptr ? from + s.src_start * cstride[d] : nullptr;
      for (int64_t k = 0; k < s.count; ++k) {
        self(self, d + 1, o, f);
        o += s.dst_step * ostride[d];
        if (f != nullptr) f += s.step * cstride[d];
      }
    }
  };
  walk(walk, 0, sel.dst, src);
}

// Chunk-internal C-order byte strides.
void ChunkStrides(const ArrayLayout& l, int64_t* cstride) {
  int64_t s = static_cast<int64_t>(l.itemsize);
  for (int d = l.ndim() - 1; d >= 0; --d) {
    cstride[d] = s;
    s *= l.chunk[static_cast<size_t>(d)];
  }
}

// Copies one innermost run of n elements (outer plans).
inline void CopyOneRun(const CallState& cs, uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n) {
  const int64_t shape[1] = {n};
  if (cs.ctx->convert != nullptr) {
    cs.ctx->convert(dst, ds, src, ss, n, cs.ctx->scale, cs.ctx->offset);
    return;
  }
  const size_t isz = cs.ctx->layout->itemsize;
  if (n == 1) {  // scattered gathers: one element per segment
    switch (isz) {
      case 1: *dst = *src; return;
      case 2: std::memcpy(dst, src, 2); return;
      case 4: std::memcpy(dst, src, 4); return;
      case 8: std::memcpy(dst, src, 8); return;
      default: std::memcpy(dst, src, isz); return;
    }
  }
  CopyStrided(dst, &ds, src, &ss, shape, 1, isz, 1);
}

}  // namespace

void Scatter(const CallState& cs, const ChunkTask& t, const uint8_t* src) {
  const ArrayLayout& l = *cs.ctx->layout;
  const Plan& plan = *cs.plan;
  const int nd = l.ndim();
  int64_t cstride[64];
  int64_t sstride[64];
  int64_t count[64];
  int64_t dims[3 * 64];
  ChunkStrides(l, cstride);
  for (uint32_t p = t.first_piece; p < t.first_piece + t.num_pieces; ++p) {
    const Piece& pc = plan.pieces[p];
    if (t.direct != nullptr && pc.dst == t.direct) continue;  // decoded in place
    if (plan.outer != nullptr) {
      WalkOuter(plan, pc, cstride, src, [&](uint8_t* d, int64_t ds, const uint8_t* f, int64_t ss, int64_t n) {
        CopyOneRun(cs, d, ds, f, ss, n);
      });
      continue;
    }
    PieceBoxDims(l, plan, pc, dims);
    const uint8_t* from = src;
    for (int d = 0; d < nd; ++d) {
      from += dims[3 * d] * cstride[d];
      count[d] = dims[3 * d + 1];
      sstride[d] = dims[3 * d + 2] * cstride[d];
    }
    const int64_t* dst_strides = plan.boxes->DstStrides(pc.box);
    if (cs.ctx->convert != nullptr) {
      ConvertStrided(cs.ctx->convert, pc.dst, dst_strides, from, sstride, count, nd,
                     cs.ctx->scale, cs.ctx->offset);
    } else if (cs.stream) {
      CopyStridedStreaming(pc.dst, dst_strides, from, sstride, count, nd, l.itemsize);
    } else {
      CopyStrided(pc.dst, dst_strides, from, sstride, count, nd, l.itemsize, 1);
    }
  }
}

void Fill(const CallState& cs, const ChunkTask& t) {
  const ArrayLayout& l = *cs.ctx->layout;
  const Plan& plan = *cs.plan;
  const int nd = l.ndim();
  int64_t count[64];
  int64_t dims[3 * 64];
  int64_t cstride[64];
  ChunkStrides(l, cstride);
  for (uint32_t p = t.first_piece; p < t.first_piece + t.num_pieces; ++p) {
    const Piece& pc = plan.pieces[p];
    if (plan.outer != nullptr) {
      WalkOuter(plan, pc, cstride, nullptr, [&](uint8_t* d, int64_t ds, const uint8_t*, int64_t, int64_t n) {
        const int64_t shape[1] = {n};
        FillStrided(d, &ds, shape, 1, cs.fill->data(), cs.fill->size());
      });
      continue;
    }
    PieceBoxDims(l, plan, pc, dims);
    for (int d = 0; d < nd; ++d) count[d] = dims[3 * d + 1];
    FillStrided(pc.dst, plan.boxes->DstStrides(pc.box), count, nd, cs.fill->data(), cs.fill->size());
  }
}

}  // namespace lsio
