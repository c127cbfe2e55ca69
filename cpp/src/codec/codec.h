// Codec interfaces of the Zarr v3 chunk encoding, typed by kind, and the per-thread decode
// scratch.
//
// Lifecycle (as in TensorStore's codec.h):
//   1. Parse: the registry (registry.h) builds a codec from its Zarr name and JSON
//      configuration, validating the configuration. Parsing is the only place that sees JSON.
//   2. Prepare: a CodecChain (chain.h) threads the chunk's shape and item size forwards
//      through the codecs once per array (transpose changes the shape later codecs see),
//      so every decode knows its expected sizes up front.
//   3. Run: CodecChain::Decode runs the codecs in reverse on one stored chunk.
//
// Kinds follow the spec, one interface each (as zarrs' ArrayToArray/ArrayToBytes/
// BytesToBytes traits and TensorStore's codec specs):
//   - ArrayToArrayCodec (transpose): maps a decoded chunk spec to an encoded one. Codecs that
//     only permute axes say so (AxisOrder), and the chain composes them into one strided copy.
//   - ArrayToBytesCodec (bytes): says how elements are laid out as bytes (byte order).
//   - BytesToBytesCodec (zstd, gzip, blosc, crc32c): decodes a byte string.
// Each kind class fixes kind() (final), so code holding a Codec may static_cast to the class
// its kind() names and nothing else. sharding_indexed is handled by the zarr and read layers,
// which read shards partially; it never appears inside a CodecChain.
//
// Thread-safety: codec objects are immutable after parsing and may be shared by threads.
// Per-thread mutable state lives in DecodeScratch: the chain's stage buffers, and each
// codec's own state (zstd's context in zstd.cc, zlib's stream in gzip.cc, blosc's buffers
// in blosc.cc) as a CodecScratch the codec creates on first use.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lsio/status.h"
#include "util/aligned_buffer.h"
#include "util/crc32c.h"  // Crc32c, used by the crc32c codec and shard indexes

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

/// The codecs that keep per-thread state, one DecodeScratch slot each: a fixed array, so
/// finding a codec's state on the hot path is an index, not a lookup.
enum class ScratchSlot : uint8_t { kZstd, kGzip, kBlosc, kCount };

/// A codec's own per-thread decode state (library contexts, buffers), defined beside the
/// codec and created by it on the thread's first decode that needs it, then reused by every
/// decode on that thread. A state type names its slot as `static constexpr ScratchSlot
/// kSlot`. It must hold no locks or threads: a forked child keeps using the state it
/// inherits on the forking thread (ThreadDecodeScratch).
class CodecScratch {
 public:
  virtual ~CodecScratch() = default;
  /// Frees buffers above `keep` bytes each (DecodeScratch::TrimCodecBuffers). What a codec
  /// keeps here is what its BytesToBytesCodec::DecodeScratchBytes counts.
  virtual void Trim(size_t keep) {}
};

/// Per-thread decode state: reused so the hot path does not allocate.
struct DecodeScratch {
  DecodeScratch() = default;
  DecodeScratch(const DecodeScratch&) = delete;
  DecodeScratch& operator=(const DecodeScratch&) = delete;

  AlignedBuffer buf[2];       ///< ping-pong buffers between codec stages
  AlignedBuffer chunk;        ///< a decoded chunk on the scratch path (read layer)

  /// The state of codec state type T (its T::kSlot), created on first use; null only when
  /// it cannot be allocated (the codec then fails with kResourceExhausted).
  template <typename T>
  T* Get() {
    std::unique_ptr<CodecScratch>& s = codecs_[static_cast<size_t>(T::kSlot)];
    if (s == nullptr) s.reset(new (std::nothrow) T());
    return static_cast<T*>(s.get());
  }

  /// Frees the codecs' own buffers above `keep` bytes each (the read layer, after a call):
  /// a call on large chunks should not pin them for the life of the thread.
  void TrimCodecBuffers(size_t keep) {
    for (std::unique_ptr<CodecScratch>& s : codecs_) {
      if (s != nullptr) s->Trim(keep);
    }
  }

 private:
  std::unique_ptr<CodecScratch> codecs_[static_cast<size_t>(ScratchSlot::kCount)];
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
  /// With `grow`: the most bytes a valid decode can produce (what the codecs below can
  /// store for the chunk). A frame that claims or produces more is corrupt (kDataLoss),
  /// and the buffer never grows past it, so a forged size header cannot allocate terabytes.
  uint64_t limit = UINT64_MAX;
  /// The input's bytes may be changed while the codec runs, provided it restores them before
  /// it returns (set by the chain only when nothing else can read them meanwhile).
  bool in_writable = false;
  std::span<const uint8_t> result;  ///< set by Decode: the decoded bytes
};

// Where a bytes -> bytes decode of `n` bytes goes: the fixed destination (which must be
// exactly n bytes) or the growable buffer, never past out.limit (what the codecs below can
// store: a forged size header must not allocate gigabytes).
inline Result<uint8_t*> DecodeDestination(BytesOut& out, uint64_t n, const char* codec) {
  if (out.fixed != nullptr) {
    if (n != out.size) {
      return Status::DataLoss(std::string(codec) + ": chunk decodes to " + std::to_string(n) + " bytes, expected " +
                              std::to_string(out.size));
    }
    return out.fixed;
  }
  if (n > out.limit) {
    return Status::DataLoss(std::string(codec) + ": chunk claims " + std::to_string(n) + " bytes, more than the " +
                            std::to_string(out.limit) + " its chunk can hold");
  }
  if (!out.grow->Reserve(n)) return Status::ResourceExhausted(std::string(codec) + ": out of memory");
  return out.grow->data();
}

/// A bytes -> bytes decode whose output size only the stream knows (bz2, lzma, zlib).
/// `decode(dst, cap, &produced)` decodes the whole input into [dst, dst + cap) and sets
/// produced > cap when there is more. Into out.fixed the stream must fill it exactly; into
/// out.grow the buffer starts at `first_cap` and doubles, never past out.limit (deflate and
/// bzip2 expand 1000x: a small forged chunk must not allocate gigabytes).
template <typename Decode>
Status DecodeUnknownSize(BytesOut& out, size_t first_cap, const char* codec, Decode&& decode) {
  if (out.fixed != nullptr) {
    size_t produced = 0;
    LSIO_RETURN_IF_ERROR(decode(out.fixed, out.size, &produced));
    if (produced != out.size) {
      return Status::DataLoss(std::string(codec) + ": chunk decodes to " +
                              (produced > out.size ? "more than " + std::to_string(out.size)
                                                   : std::to_string(produced)) +
                              " bytes, expected " + std::to_string(out.size));
    }
    out.result = {out.fixed, out.size};
    return Status::Ok();
  }
  size_t cap = static_cast<size_t>(std::min<uint64_t>(first_cap, out.limit));
  for (;;) {
    if (!out.grow->Reserve(cap)) return Status::ResourceExhausted(std::string(codec) + ": out of memory");
    size_t produced = 0;
    LSIO_RETURN_IF_ERROR(decode(out.grow->data(), cap, &produced));
    if (produced <= cap) {
      out.result = {out.grow->data(), produced};
      return Status::Ok();
    }
    if (cap >= out.limit) {
      return Status::DataLoss(std::string(codec) + ": stream decodes to more than the " +
                              std::to_string(out.limit) + " bytes the codecs below it can store for the chunk");
    }
    cap = static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(static_cast<uint64_t>(cap) * 2, 4096), out.limit));
  }
}

/// Common base: what every codec can say about itself. Only the three kind classes below
/// can derive from it (private constructor), and each fixes kind(), so kind() always names
/// the class a Codec may be cast to.
class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecKind kind() const = 0;
  /// Zarr name, e.g. "zstd".
  virtual std::string name() const = 0;

 private:
  Codec() = default;
  friend class ArrayToArrayCodec;
  friend class ArrayToBytesCodec;
  friend class BytesToBytesCodec;
};

/// array -> array codecs (transpose). Applied at prepare time to specs; decoding of codecs
/// that permute axes is done by the chain as one strided copy for all of them together.
class ArrayToArrayCodec : public Codec {
 public:
  CodecKind kind() const final { return CodecKind::kArrayToArray; }

  /// The encoded representation of a `decoded` chunk. Fails with kInvalidFormat when the
  /// codec does not fit the chunk (a transpose order of the wrong rank).
  virtual Result<ChunkSpec> EncodedSpec(const ChunkSpec& decoded) const = 0;

  /// For a codec that only permutes axes: the order for a chunk of `rank` dimensions, with
  /// encoded axis i = decoded axis order[i]. nullopt for any other kind of array -> array
  /// codec, which the chain then refuses (kUnimplemented) until it grows an element-wise
  /// decode stage: no such codec is registered yet.
  virtual std::optional<std::vector<int>> AxisOrder(size_t rank) const { return std::nullopt; }
};

/// array -> bytes codecs (bytes). The encoded bytes are the elements in C order of the
/// encoded spec; the codec decides only their byte order.
class ArrayToBytesCodec : public Codec {
 public:
  CodecKind kind() const final { return CodecKind::kArrayToBytes; }
  /// True when each element's components (swap_unit bytes) are stored big endian.
  virtual bool big_endian() const = 0;
};

/// bytes -> bytes codecs (zstd, gzip, blosc, crc32c).
class BytesToBytesCodec : public Codec {
 public:
  CodecKind kind() const final { return CodecKind::kBytesToBytes; }

  /// The encoded size for `decoded` bytes when fixed (crc32c: +4), else nullopt.
  virtual std::optional<uint64_t> EncodedSize(uint64_t decoded) const { return std::nullopt; }

  /// The most bytes any conforming encoder can store for `decoded` bytes (worst case plus
  /// framing a writer may add). Stored data above it is corrupt: the read layer refuses it
  /// before allocating a buffer for it. The default is the fixed size.
  virtual uint64_t MaxEncodedSize(uint64_t decoded) const { return EncodedSize(decoded).value_or(decoded); }

  /// Scratch memory (the codec's own CodecScratch) a decode of `decoded` bytes
  /// from at most `stored` bytes may hold, beyond the chain's stage buffers; kept by the
  /// thread between decodes (CodecChain::decode_scratch_bytes, the read layer's memory_limit).
  virtual uint64_t DecodeScratchBytes(uint64_t decoded, uint64_t stored) const { return 0; }

  /// Decodes `in`. With out.fixed set, must produce exactly out.size bytes there (writing
  /// nothing past them) or fail with kDataLoss; may instead leave out.result pointing into
  /// `in` (crc32c strips). With out.grow set, decodes into that buffer, growing it.
  virtual Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                             DecodeScratch& scratch) const = 0;
};

/// array->bytes `bytes` codec: only the byte order matters for decoding.
class BytesCodec final : public ArrayToBytesCodec {
 public:
  explicit BytesCodec(bool big_endian) : big_endian_(big_endian) {}
  std::string name() const override { return "bytes"; }
  bool big_endian() const override { return big_endian_; }

 private:
  bool big_endian_;
};

/// array->array `transpose`: encoded[b] = decoded[a] with b[i] = a[order[i]]. The order is
/// a permutation, or the pre-spec "C" / "F" resolved against the rank when prepared.
class TransposeCodec final : public ArrayToArrayCodec {
 public:
  enum class Named { kNone, kC, kF };
  explicit TransposeCodec(std::vector<int> order) : order_(std::move(order)) {}
  explicit TransposeCodec(Named named) : named_(named) {}
  std::string name() const override { return "transpose"; }
  Result<ChunkSpec> EncodedSpec(const ChunkSpec& decoded) const override;
  std::optional<std::vector<int>> AxisOrder(size_t rank) const override;

 private:
  std::vector<int> order_;
  Named named_ = Named::kNone;
};

}  // namespace lsio
