// lsio/stage.h: what a staged read leaves for a device decoder (Array::StageBoxes).
//
// A staged read reads every chunk a batch of boxes touches into a caller-owned staging
// buffer, as GPU-decodable frames or chunks the CPU decoded, and describes the scatter of
// each chunk's part of each box into an output. cpp/src/read/stage.h says how it is made;
// docs/design/gpu.md how the executors (python/lsio/gpu/) run it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lsio/status.h"

namespace lsio {

/// Columns of StagedBatch::frames (one row per frame).
enum FrameCol : int {
  kFrameStagingOffset = 0,  ///< where the frame's bytes start in the staging buffer
  kFrameStoredBytes,        ///< bytes of the frame in staging
  kFrameDecodedOffset,      ///< compressed frames: offset in the decode area; -1: raw (decoded in staging)
  kFrameDecodedBytes,       ///< the decoded chunk's size
  kFrameCodec,              ///< GpuCodec: 0 raw (the staging bytes are the decoded chunk), 1 zstd,
                            ///< 2 deflate (raw stream), 3 lz4 (raw block)
  kFrameFile,               ///< index into StagedBatch::files; -1 for the fill frame
  kFrameObjectOffset,       ///< byte offset of the stored chunk in its object
  kFrameTask,               ///< the chunk's task (coords: StagedBatch::coords); -1 for fill
  kFrameCheck,              ///< deflate frames of gzip members: the CRC-32 (zlib's crc32, 0..2^32-1)
                            ///< the decoded chunk must have, checked by the executor after
                            ///< decoding; -1: nothing to check
  kFrameCols
};

/// Columns of StagedBatch::ops: copy n2 x n1 runs of run_bytes from the frame's decoded chunk
/// (src_offset + i2*src_stride2 + i1*src_stride1) to the output (dst_offset + i2*dst_stride2
/// + i1*dst_stride1). All in bytes; runs are contiguous on both sides.
enum OpCol : int {
  kOpFrame = 0,
  kOpSrcOffset,
  kOpDstOffset,
  kOpRunBytes,
  kOpN1,
  kOpSrcStride1,
  kOpDstStride1,
  kOpN2,
  kOpSrcStride2,
  kOpDstStride2,
  kOpCols
};

/// Offsets of frames in the staging buffer and the decode area are multiples of this (the
/// most any nvCOMP decoder asks for its inputs and outputs is 8).
constexpr uint64_t kStageAlign = 16;

/// What a staged call produced (Array::StageBoxes). When the staging buffer was too small,
/// `needed` > 0 says how many bytes suffice and nothing else is meaningful: call again with
/// a buffer that large (the indexes are cached by then, so the retry re-reads chunks only).
struct StagedBatch {
  uint64_t needed = 0;
  uint64_t staging_used = 0;   ///< staging bytes holding frames (a multiple of kStageAlign)
  uint64_t decoded_bytes = 0;  ///< size of the decode area the compressed frames need
  uint64_t max_decoded = 0;    ///< the decoded size of one chunk
  std::vector<int64_t> frames; ///< kFrameCols per frame
  std::vector<int64_t> ops;    ///< kOpCols per op
  std::vector<std::string> files;   ///< objects frames were read from (for error messages)
  std::vector<int64_t> coords;      ///< ndim chunk coordinates per frame (-1: the fill frame)
  int64_t bytes_read = 0;           ///< stored bytes staged as compressed frames
};

/// Decodes one frame of kFrameCodec `codec` on the CPU into exactly out.size() bytes (what
/// a GPU decoder does with it; the CPU reference executor of a staged plan), then, when
/// `check` (the frame's kFrameCheck) is >= 0, compares the CRC-32 of `out` with it. Fails
/// with kDataLoss on corrupt data, another size, bytes after a deflate stream's final block
/// or a CRC-32 mismatch; kInvalidArgument for an unknown codec.
Status DecodeStagedFrame(int64_t codec, std::span<const uint8_t> in, std::span<uint8_t> out, int64_t check = -1);

}  // namespace lsio
