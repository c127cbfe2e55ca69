// CodecChain: a Zarr v3 codec list prepared for one chunk shape and element type.
//
// Usage:
//   1. At open(): the zarr layer parses the JSON list through the registry
//      (ParseCodecChain in registry.h), which calls CodecChain::Build with the parsed codecs.
//      Build validates the order (array->array*, exactly one array->bytes, bytes->bytes*),
//      threads the shape forwards and records the expected size after every stage.
//   2. Per chunk: chain->Decode(stored_bytes, out, ThreadDecodeScratch());
//      `out` receives decoded_size() bytes: the chunk in native byte order, C order.
// This header holds no JSON: the read layer includes it to run prepared chains only.
//
// What the read layer asks of a chain:
//   - stored_is_decoded(): the stored bytes *are* the decoded chunk (bytes codec in host
//     order, no transpose, no bytes->bytes codec), so a chunk can be read straight into
//     the caller's array;
//   - FixedEncodedSize(): the stored size when every codec is fixed-size (shard indexes).
//
// Decoding writes the last stage straight into `out` whenever no transpose follows, so a
// zstd or blosc chunk is decompressed once, into its final place. Big-endian data is
// swapped in place afterwards; transposes are composed into one permutation applied by a
// strided copy.
//
// Thread-safety: a prepared chain is immutable; Decode may run on many threads at once,
// each with its own DecodeScratch.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "codec/codec.h"

namespace lsio {

/// The stored form of a chunk a GPU decoder can turn into the decoded chunk alone (read/stage.h),
/// set when the chain is exactly `bytes` in host order (no transpose) + one compressor,
/// optionally followed by `crc32c` (verified on the CPU, see CodecChain::GpuFrame):
///   kZstd:    `zstd`; the frame is the zstd frame (codec/zstd.h: ZstdGpuDecodable);
///   kDeflate: `gzip` (also numcodecs' zlib and gzip); the frame is the raw deflate body of a
///             single gzip member, whose CRC-32 the executor checks (codec/gzip.h);
///   kLz4:     `numcodecs.lz4`; the frame is the raw LZ4 block after the size header
///             (codec/numcodecs.h).
/// Each chunk is still checked on its own (a zlib-wrapped or odd chunk goes to the CPU).
/// The values are the kFrameCodec column of a staged plan (lsio/stage.h).
enum class GpuCodec : int64_t { kNone = 0, kZstd = 1, kDeflate = 2, kLz4 = 3 };

class CodecChain {
 public:
  /// Prepares `codecs` (in metadata order, i.e. encode order) for chunks described by
  /// `decoded`. Fails with kInvalidFormat (empty list, wrong kind order, a codec that does
  /// not fit the shape) or kUnimplemented (an array -> array codec that is not a permutation).
  static Result<std::unique_ptr<CodecChain>> Build(std::vector<std::unique_ptr<Codec>> codecs,
                                                   const ChunkSpec& decoded);

  const ChunkSpec& decoded_spec() const { return decoded_; }
  uint64_t decoded_size() const { return decoded_.num_bytes(); }
  bool stored_is_decoded() const { return stored_is_decoded_; }
  std::optional<uint64_t> FixedEncodedSize() const { return sizes_.back(); }
  /// The largest stored chunk a conforming writer can produce (each codec's worst case
  /// plus framing); a stored chunk above it is corrupt (a sparse 1 TiB chunk file must not
  /// make the reader allocate 1 TiB).
  uint64_t max_stored_size() const { return max_stored_; }
  /// Decode scratch one thread may hold for a chunk of this chain: the decoded chunk and two
  /// stage buffers (stored_is_decoded(): none), plus what the codecs keep of their own
  /// (BytesToBytesCodec::DecodeScratchBytes).
  uint64_t decode_scratch_bytes() const { return decode_scratch_; }
  /// What a GPU decoder can decode of this chain's stored chunks without the CPU (kNone: the
  /// CPU decodes them; read/stage.h).
  GpuCodec gpu_codec() const { return gpu_codec_; }
  /// For a gpu_codec() chain: the frame a GPU decoder gets from stored bytes `in`. A trailing
  /// crc32c is verified here (kDataLoss on a mismatch) and dropped: checksummed data is never
  /// handed to a GPU decoder unverified.
  Status GpuFrame(std::span<const uint8_t> in, std::span<const uint8_t>* frame) const;
  /// "transpose, bytes(big), zstd" style summary for reprs and errors.
  const std::string& description() const { return description_; }

  /// Decodes one stored chunk into `out` (decoded_size() bytes). `in` may alias `out`
  /// only when stored_is_decoded(). Fails with kDataLoss on corrupt data.
  ///
  /// in_writable: `in` is the caller's own buffer that nothing else reads while Decode runs
  /// (a chunk file read for this chunk alone), so a codec may change it temporarily; every
  /// change is undone before Decode returns. blosc uses it to skip a copy of the frame.
  Status Decode(std::span<const uint8_t> in, uint8_t* out, DecodeScratch& scratch, bool in_writable = false) const;

 private:
  CodecChain() = default;

  ChunkSpec decoded_;
  ChunkSpec encoded_;                                   // after all array->array codecs
  std::vector<int> perm_;                               // composed transpose order; empty = identity
  bool swap_ = false;                                   // bytes codec is big endian
  std::vector<std::unique_ptr<BytesToBytesCodec>> bb_;  // bytes->bytes codecs, encode order
  // sizes_[k] = size of the input of bb_[k] (sizes_[0] = raw bytes; sizes_.back() = stored)
  std::vector<std::optional<uint64_t>> sizes_;
  // max_sizes_[k] = the most bytes the input of bb_[k] can hold (worst cases of the codecs
  // below it); bounds the growable buffers of stages whose output size is not fixed.
  std::vector<uint64_t> max_sizes_;
  uint64_t max_stored_ = 0;
  uint64_t decode_scratch_ = 0;
  bool stored_is_decoded_ = false;
  GpuCodec gpu_codec_ = GpuCodec::kNone;
  std::string description_;
};

}  // namespace lsio
