// Staging a batch for a device decoder: frames into the staging buffer, then the scatter
// ops; see stage.h.
#include "read/stage.h"

#include <algorithm>
#include <cstring>

#include "codec/gzip.h"
#include "codec/numcodecs.h"
#include "codec/zstd.h"
#include "read/call.h"

namespace lsio {
namespace {

// The frame a GPU decoder of `codec` gets from `frame` (stored bytes, any crc32c stripped) of
// a chunk of `decoded` bytes, and the CRC-32 the executor checks after decoding (-1: none);
// false when the chunk must be decoded by the CPU. Header checks only: nothing is decoded.
bool GpuDecodable(GpuCodec codec, uint64_t decoded, std::span<const uint8_t>* frame, int64_t* check) {
  *check = -1;
  switch (codec) {
    case GpuCodec::kZstd:
      return ZstdGpuDecodable(*frame, decoded);
    case GpuCodec::kDeflate: {
      uint32_t crc = 0;
      if (!GzipGpuFrame(*frame, decoded, frame, &crc)) return false;
      *check = crc;
      return true;
    }
    case GpuCodec::kLz4:
      return Lz4GpuFrame(*frame, decoded, frame);
    case GpuCodec::kNone:
      break;
  }
  return false;
}

constexpr uint64_t Aligned(uint64_t n) { return (n + kStageAlign - 1) & ~(kStageAlign - 1); }

// More ops than this is a selection no GPU executor should be asked to scatter (2 GiB of
// op rows); such a call fails instead of allocating them.
constexpr size_t kMaxOps = size_t{1} << 25;

struct OpDim {
  int64_t n, src, dst;  // count, byte strides
};

// One piece as ops: the innermost dimensions contiguous on both sides become the run, the
// next two (after merging neighbours that are contiguous with each other) the strided
// levels, and any further ones are enumerated here, one op each.
Status EmitPiece(int64_t frame, int64_t src0, int64_t dst0, std::vector<OpDim>& dims, int64_t itemsize,
                 std::vector<int64_t>& ops) {
  std::vector<OpDim> r;
  for (const OpDim& d : dims) {
    if (d.n == 0) return Status::Ok();
    if (d.n != 1) r.push_back(d);
  }
  int64_t run = itemsize;
  while (!r.empty() && r.back().src == run && r.back().dst == run) {
    run *= r.back().n;
    r.pop_back();
  }
  std::vector<OpDim> m;
  for (const OpDim& x : r) {
    if (!m.empty() && m.back().src == x.n * x.src && m.back().dst == x.n * x.dst) {
      m.back() = {m.back().n * x.n, x.src, x.dst};
    } else {
      m.push_back(x);
    }
  }
  OpDim l1{1, 0, 0}, l2{1, 0, 0};
  if (!m.empty()) {
    l1 = m.back();
    m.pop_back();
  }
  if (!m.empty()) {
    l2 = m.back();
    m.pop_back();
  }
  size_t count = 1;
  for (const OpDim& d : m) {
    count *= static_cast<size_t>(d.n);
    if (count > kMaxOps) break;
  }
  if (count > kMaxOps || ops.size() / kOpCols + count > kMaxOps) {
    return Status::ResourceExhausted("the selection needs more than 2^25 scatter operations on the device");
  }
  std::vector<int64_t> idx(m.size(), 0);
  for (;;) {
    int64_t s = src0, t = dst0;
    for (size_t k = 0; k < m.size(); ++k) {
      s += idx[k] * m[k].src;
      t += idx[k] * m[k].dst;
    }
    const int64_t row[kOpCols] = {frame, s, t, run, l1.n, l1.src, l1.dst, l2.n, l2.src, l2.dst};
    ops.insert(ops.end(), row, row + kOpCols);
    size_t k = m.size();
    while (k > 0) {
      --k;
      if (++idx[k] < m[k].n) break;
      idx[k] = 0;
      if (k == 0) return Status::Ok();
    }
    if (m.empty()) return Status::Ok();
  }
}

}  // namespace

StageSink::StageSink(std::span<uint8_t> staging, bool gpu_codecs, size_t num_tasks)
    : staging_(staging),
      gpu_codecs_(gpu_codecs),
      frames_((num_tasks + 1) * kFrameCols, 0),
      task_frame_(num_tasks, kNone) {}

bool StageSink::Reserve(uint64_t bytes, uint64_t* offset) {
  const uint64_t n = Aligned(bytes);
  const uint64_t at = used_.fetch_add(n, std::memory_order_relaxed);
  if (at > staging_.size() || n > staging_.size() - at) {
    overflow_.store(true, std::memory_order_relaxed);
    return false;
  }
  *offset = at;
  return true;
}

int32_t StageSink::AddFrame(const int64_t* row) {
  const int32_t f = num_frames_.fetch_add(1, std::memory_order_relaxed);
  std::memcpy(&frames_[static_cast<size_t>(f) * kFrameCols], row, sizeof(int64_t) * kFrameCols);
  return f;
}

Status StageSink::StageTask(const CallState& cs, uint32_t ti, std::span<const uint8_t> in, bool in_writable) {
  const ArrayLayout& l = *cs.ctx->layout;
  const ChunkTask& t = cs.plan->tasks[ti];
  const uint64_t n = l.chain->decoded_size();
  std::span<const uint8_t> frame;
  int64_t check = -1;
  const GpuCodec codec = gpu_codecs_ ? l.chain->gpu_codec() : GpuCodec::kNone;
  bool gpu = codec != GpuCodec::kNone;
  if (gpu) {
    LSIO_RETURN_IF_ERROR(l.chain->GpuFrame(in, &frame));
    gpu = GpuDecodable(codec, n, &frame, &check);
  }
  uint64_t at = 0;
  if (!Reserve(gpu ? frame.size() : n, &at)) {
    return Status::ResourceExhausted("staging buffer too small");  // the call retries larger
  }
  int64_t decoded_at = -1;
  if (gpu) {
    std::memcpy(staging_.data() + at, frame.data(), frame.size());
    decoded_at = static_cast<int64_t>(decoded_.fetch_add(Aligned(n), std::memory_order_relaxed));
  } else {
    LSIO_RETURN_IF_ERROR(l.chain->Decode(in, staging_.data() + at, ThreadDecodeScratch(), in_writable));
  }
  const int64_t row[kFrameCols] = {static_cast<int64_t>(at),
                                   static_cast<int64_t>(gpu ? frame.size() : n),
                                   decoded_at,
                                   static_cast<int64_t>(n),
                                   static_cast<int64_t>(gpu ? codec : GpuCodec::kNone),
                                   t.file,
                                   static_cast<int64_t>(t.offset),
                                   static_cast<int64_t>(ti),
                                   gpu ? check : -1};
  task_frame_[ti] = AddFrame(row);
  return Status::Ok();
}

namespace {
// Staging bytes task `t` takes at most: its stored size when the GPU may decode it (a frame
// the CPU decodes instead takes the decoded size: Bound covers that), else the decoded size.
uint64_t TaskBytes(const ArrayLayout& l, const ChunkTask& t, bool gpu) {
  const uint64_t n = l.chain->decoded_size();
  return Aligned(gpu ? t.nbytes : n);
}
}  // namespace

bool StageSink::Fits(const ArrayLayout& l, const Plan& plan, uint32_t first, uint32_t last, uint64_t* need) const {
  const bool gpu = gpu_codecs_ && l.chain->gpu_codec() != GpuCodec::kNone;
  uint64_t total = used_.load(std::memory_order_relaxed) + Aligned(l.chain->decoded_size());  // + the fill frame
  for (uint32_t i = first; i < last; ++i) {
    const ChunkTask& t = plan.tasks[i];
    if (!t.missing) total += TaskBytes(l, t, gpu);
  }
  *need = total;
  return total <= staging_.size();
}

uint64_t StageSink::Rest(const ArrayLayout& l, const Plan& plan, uint32_t first) const {
  const uint64_t n = l.chain->decoded_size();
  const bool gpu = gpu_codecs_ && l.chain->gpu_codec() != GpuCodec::kNone;
  // A task not resolved yet may be as large as its codecs allow; one staged by the CPU
  // instead of the GPU takes the decoded size.
  const uint64_t per_task = Aligned(gpu ? std::max(n, l.chain->max_stored_size()) : n);
  return static_cast<uint64_t>(plan.tasks.size() - first) * per_task;
}

uint64_t StageSink::Bound(const ArrayLayout& l, const Plan& plan, uint32_t first) const {
  const uint64_t n = l.chain->decoded_size();
  uint64_t committed = 0;
  for (uint32_t i = 0; i < first; ++i) {
    const int32_t f = task_frame_[i];
    if (f >= 0) committed += Aligned(static_cast<uint64_t>(frames_[static_cast<size_t>(f) * kFrameCols + kFrameStoredBytes]));
  }
  return committed + Aligned(n) + Rest(l, plan, first);
}

Status DecodeStagedFrame(int64_t codec, std::span<const uint8_t> in, std::span<uint8_t> out, int64_t check) {
  // Only deflate frames carry a check (the gzip trailer's CRC-32); the others have none.
  switch (static_cast<GpuCodec>(codec)) {
    case GpuCodec::kZstd:
      return ZstdDecodeFrame(in, out);
    case GpuCodec::kDeflate:
      return InflateRawFrame(in, out, check);
    case GpuCodec::kLz4:
      return Lz4DecodeBlock(in, out);
    case GpuCodec::kNone:
      if (in.size() != out.size()) return Status::DataLoss("raw frame of " + std::to_string(in.size()) + " bytes, expected " + std::to_string(out.size()));
      std::memcpy(out.data(), in.data(), in.size());
      return Status::Ok();
  }
  return Status::InvalidArgument("unknown frame codec " + std::to_string(codec));
}

Status StageSink::Finish(const ArrayLayout& l, const Plan& plan, const uint8_t* dst_base, StagedBatch* out) {
  const uint64_t n = l.chain->decoded_size();
  const int nd = plan.ndim;
  int32_t fill = kNone;
  for (size_t i = 0; i < plan.tasks.size() && fill == kNone; ++i) {
    if (plan.tasks[i].missing || task_frame_[i] == kFill) {
      uint64_t at = 0;
      if (!Reserve(n, &at)) return Status::ResourceExhausted("staging buffer too small");
      const size_t isz = l.fill.size();
      uint8_t* p = staging_.data() + at;
      if (isz > 0) {
        for (uint64_t k = 0; k < n; k += isz) std::memcpy(p + k, l.fill.data(), std::min<uint64_t>(isz, n - k));
      }
      const int64_t row[kFrameCols] = {static_cast<int64_t>(at), static_cast<int64_t>(n), -1, static_cast<int64_t>(n),
                                       0, -1, 0, -1, -1};
      fill = AddFrame(row);
    }
  }
  // Chunk-internal C-order byte strides.
  std::vector<int64_t> cstride(static_cast<size_t>(nd));
  int64_t s = static_cast<int64_t>(l.itemsize);
  for (int d = nd - 1; d >= 0; --d) {
    cstride[static_cast<size_t>(d)] = s;
    s *= l.chunk[static_cast<size_t>(d)];
  }
  std::vector<int64_t> pdims(static_cast<size_t>(3 * std::max(nd, 1)));
  std::vector<OpDim> dims(static_cast<size_t>(nd));
  out->ops.clear();
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const ChunkTask& t = plan.tasks[i];
    const int32_t f = (t.missing || task_frame_[i] == kFill) ? fill : task_frame_[i];
    if (f < 0) return Status::Internal("a staged chunk has no frame").WithChunk(TaskCoords(plan, t));
    for (uint32_t k = 0; k < t.num_pieces; ++k) {
      const Piece& pc = plan.pieces[t.first_piece + k];
      PieceBoxDims(l, plan, pc, pdims.data());
      const int64_t* ostride = plan.boxes->DstStrides(pc.box);
      int64_t src0 = 0;
      for (int d = 0; d < nd; ++d) {
        const size_t du = static_cast<size_t>(d);
        src0 += pdims[3 * du] * cstride[du];
        dims[du] = {pdims[3 * du + 1], pdims[3 * du + 2] * cstride[du], ostride[du]};
      }
      LSIO_RETURN_IF_ERROR(EmitPiece(f, src0, static_cast<int64_t>(pc.dst - dst_base), dims,
                                     static_cast<int64_t>(l.itemsize), out->ops));
    }
  }
  const int32_t nf = num_frames_.load();
  out->frames.assign(frames_.begin(), frames_.begin() + static_cast<ptrdiff_t>(nf) * kFrameCols);
  out->staging_used = used_.load();
  out->decoded_bytes = decoded_.load();
  out->max_decoded = n;
  out->files = plan.files;
  out->coords.assign(static_cast<size_t>(nf) * static_cast<size_t>(nd), -1);
  for (int32_t f = 0; f < nf; ++f) {
    const int64_t ti = out->frames[static_cast<size_t>(f) * kFrameCols + kFrameTask];
    if (ti < 0) continue;
    const ChunkTask& t = plan.tasks[static_cast<size_t>(ti)];
    for (int d = 0; d < nd; ++d) {
      out->coords[static_cast<size_t>(f) * static_cast<size_t>(nd) + static_cast<size_t>(d)] =
          plan.coords[t.coords + static_cast<size_t>(d)];
    }
  }
  int64_t stored = 0;
  for (int32_t f = 0; f < nf; ++f) {
    if (out->frames[static_cast<size_t>(f) * kFrameCols + kFrameCodec] != 0) {
      stored += out->frames[static_cast<size_t>(f) * kFrameCols + kFrameStoredBytes];
    }
  }
  out->bytes_read = stored;
  return Status::Ok();
}

}  // namespace lsio
