// Codec interfaces of the Zarr v3 chunk encoding, and the per-thread decode scratch.
//
// Lifecycle (as in TensorStore's codec.h):
//   1. Parse: the registry (registry.h) builds a Codec from its Zarr name and JSON
//      configuration, validating the configuration.
//   2. Prepare: a CodecChain (chain.h) threads the chunk's shape and item size forwards
//      through the codecs once per array (transpose changes the shape later codecs see),
//      so every decode knows its expected sizes up front.
//   3. Run: CodecChain::Decode runs the codecs in reverse on one stored chunk.
//
// Codec kinds follow the spec: array->array (transpose), array->bytes (bytes),
// bytes->bytes (zstd, gzip, crc32c). sharding_indexed is handled by the zarr and read
// layers, which read shards partially; it never appears inside a CodecChain.
//
// Thread-safety: Codec objects are immutable after parsing and may be shared by threads.
// Per-thread mutable state (zstd and zlib contexts, buffers) lives in DecodeScratch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lsio/status.h"
#include "util/aligned_buffer.h"

namespace lsio {

/// What a codec sees: the chunk's shape (C order) and its element layout.
struct ChunkSpec {
  std::vector<int64_t> shape;
  size_t itemsize = 1;   ///< bytes per element
  size_t swap_unit = 1;  ///< bytes per endian-swapped component (complex64: 4), 1 = never swap

  uint64_t num_elements() const {
    uint64_t n = 1;
    for (int64_t s : shape) n *= static_cast<uint64_t>(s);
    return n;
  }
  uint64_t num_bytes() const { return num_elements() * itemsize; }
};

/// Per-thread decode state: reused so the hot path does not allocate.
struct DecodeScratch {
  DecodeScratch();
  ~DecodeScratch();
  DecodeScratch(const DecodeScratch&) = delete;
  DecodeScratch& operator=(const DecodeScratch&) = delete;

  void* zstd_dctx = nullptr;  ///< ZSTD_DCtx*, created on first use
  void* zstream = nullptr;    ///< z_stream*, created on first use
  AlignedBuffer buf[2];       ///< ping-pong buffers between codec stages
  AlignedBuffer chunk;        ///< a decoded chunk on the scratch path (read layer)
};

/// The calling thread's scratch (thread-local; holds no locks, so it survives fork).
DecodeScratch& ThreadDecodeScratch();

enum class CodecKind { kArrayToArray, kArrayToBytes, kBytesToBytes };

/// Where a bytes->bytes decode writes: a fixed destination of exactly `size` bytes, or a
/// growable buffer when the decoded size is not known in advance.
struct BytesOut {
  uint8_t* fixed = nullptr;
  size_t size = 0;
  AlignedBuffer* grow = nullptr;
  std::span<const uint8_t> result;  ///< set by Decode: the decoded bytes
};

class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecKind kind() const = 0;
  /// Zarr name, e.g. "zstd".
  virtual std::string name() const = 0;

  /// array->array: the encoded representation for a decoded one (transpose permutes).
  virtual Result<ChunkSpec> EncodedSpec(const ChunkSpec& decoded) const { return decoded; }

  /// bytes->bytes: the encoded size for `decoded` bytes when fixed (crc32c: +4), else nullopt.
  virtual std::optional<uint64_t> EncodedSize(uint64_t decoded) const { return std::nullopt; }

  /// bytes->bytes: the most bytes any conforming encoder can store for `decoded` bytes
  /// (worst case plus framing a writer may add). Stored data above it is corrupt: the read
  /// layer refuses it before allocating a buffer for it. The default is the fixed size.
  virtual uint64_t MaxEncodedSize(uint64_t decoded) const { return EncodedSize(decoded).value_or(decoded); }

  /// bytes->bytes decode. With out.fixed set, must produce exactly out.size bytes there or
  /// fail with kDataLoss; may instead leave out.result pointing into `in` (crc32c strips).
  virtual Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                             DecodeScratch& scratch) const {
    return Status::Internal("not a bytes->bytes codec");
  }
};

/// array->bytes `bytes` codec: only the byte order matters for decoding.
class BytesCodec final : public Codec {
 public:
  explicit BytesCodec(bool big_endian) : big_endian_(big_endian) {}
  CodecKind kind() const override { return CodecKind::kArrayToBytes; }
  std::string name() const override { return "bytes"; }
  bool big_endian() const { return big_endian_; }

 private:
  bool big_endian_;
};

/// array->array `transpose`: encoded[b] = decoded[a] with b[i] = a[order[i]].
class TransposeCodec final : public Codec {
 public:
  explicit TransposeCodec(std::vector<int> order) : order_(std::move(order)) {}
  CodecKind kind() const override { return CodecKind::kArrayToArray; }
  std::string name() const override { return "transpose"; }
  Result<ChunkSpec> EncodedSpec(const ChunkSpec& decoded) const override;
  const std::vector<int>& order() const { return order_; }

 private:
  std::vector<int> order_;
};

/// CRC-32C (Castagnoli) of data, as the crc32c codec and shard indexes use it.
uint32_t Crc32c(const uint8_t* data, size_t n);

}  // namespace lsio
