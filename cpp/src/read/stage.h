// Staging a batch for a device decoder: the GPU-independent half of decoding on the GPU.
//
// A staged call reads every chunk a batch of boxes touches exactly as a read call does
// (planner, shard indexes, coalesced io_uring / remote reads, the same workers), but instead
// of decoding into the caller's output it leaves, in a caller-owned staging buffer (pinned
// host memory when a GPU consumes it):
//   - frames: the compressed stream of each chunk a GPU decoder can decode (GpuCodec: a zstd
//     frame declaring the chunk's size, the raw deflate body of a single gzip member with its
//     CRC-32 to check, the raw block of a numcodecs lz4 chunk), or the chunk already decoded
//     by the CPU for every other chain or chunk (blosc, transposes, big endian, uncompressed,
//     zlib wrappers, odd frames), and one fill-value chunk when chunks are missing;
//   - ops: the scatter that places each chunk's part of each box into the output, as
//     strided copies: (run bytes) x n1 x n2 with byte strides, offsets relative to the
//     frame's decoded chunk and to the output's start.
// An executor then copies the staging buffer to the device, decodes the compressed frames
// into a decode area (frame row: decoded_offset) and runs the ops. lsio/gpu/ (Python) holds
// the CUDA executor (nvCOMP + a Triton kernel) and a CPU reference executor that performs
// the same plan with CPU decode and the same arithmetic; docs/design/gpu.md has the layout.
//
// The plan never depends on where the output or the device buffers are: a caller sizes the
// staging buffer, stages, and places the decode area anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "codec/chain.h"
#include "lsio/stage.h"  // StagedBatch, its columns
#include "lsio/status.h"

namespace lsio {

struct CallState;
struct ChunkTask;
struct Plan;
struct ArrayLayout;

/// The staging buffer and what one staged call shares between its workers.
class StageSink {
 public:
  StageSink(std::span<uint8_t> staging, bool gpu_codecs, size_t num_tasks);

  /// Stages task `ti` from its stored bytes `in` (a worker, after the read): copied as a
  /// frame when the GPU can decode it, else decoded by the CPU into staging.
  Status StageTask(const CallState& cs, uint32_t ti, std::span<const uint8_t> in, bool in_writable);
  /// Task `ti` reads as the fill value (a missing chunk found by its read).
  void StageFill(uint32_t ti) { task_frame_[ti] = kFill; }

  /// Staging bytes the tasks [first, last) need at most (after they are resolved, before
  /// they are read), including the fill frame once; compares with what is left.
  bool Fits(const ArrayLayout& l, const Plan& plan, uint32_t first, uint32_t last, uint64_t* need) const;
  /// The bytes that suffice for the whole call when tasks before `first` are staged (their
  /// frames as staged) and the rest may take as much as their codecs allow.
  uint64_t Bound(const ArrayLayout& l, const Plan& plan, uint32_t first) const;
  /// What the tasks from `first` on may take at most (not resolved yet).
  uint64_t Rest(const ArrayLayout& l, const Plan& plan, uint32_t first) const;

  /// After the call: the fill frame (if any task needs it), frames and scatter ops into
  /// `out`. `dst_base`: the fake address box plans were built with (see ExecuteStage).
  Status Finish(const ArrayLayout& l, const Plan& plan, const uint8_t* dst_base, StagedBatch* out);

  bool overflowed() const { return overflow_.load(std::memory_order_relaxed); }

 private:
  static constexpr int32_t kNone = -1;
  static constexpr int32_t kFill = -2;
  bool Reserve(uint64_t bytes, uint64_t* offset);
  int32_t AddFrame(const int64_t* row);

  std::span<uint8_t> staging_;
  bool gpu_codecs_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> decoded_{0};
  std::atomic<int32_t> num_frames_{0};
  std::atomic<bool> overflow_{false};
  std::vector<int64_t> frames_;       // (num_tasks + 1) rows reserved up front
  std::vector<int32_t> task_frame_;   // per task: frame, kFill, or kNone
};

}  // namespace lsio
