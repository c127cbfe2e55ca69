// sharding_indexed: shard layout and shard index decoding.
//
// A shard's index is prod(chunks_per_shard) x (uint64 offset, uint64 nbytes) in C order of
// the inner chunk grid, encoded by `index_codecs` (bytes little/big, optionally crc32c), and
// stored in the first or last index_size bytes of the shard. Offsets count from the start
// of the shard in both locations. An entry is missing (reads as fill) when nbytes is 2^64-1
// (normally offset too; some early writers shifted the offset).
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(ShardLayout l, ParseShardingCodec(config, shard_shape, itemsize...));
//   read l.index_size bytes at l.IndexOffset(file_size), then
//   LSIO_ASSIGN_OR_RETURN(auto entries, DecodeShardIndex(bytes, l, file_size));
// DecodeShardIndex validates every entry once (no overflow, inside the file, not overlapping
// the index), so the read path can trust them. Fails with kDataLoss on a bad checksum or
// entry, naming the entry.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

struct ShardIndexEntry {
  static constexpr uint64_t kMissing = ~0ull;
  uint64_t offset = kMissing;
  uint64_t nbytes = kMissing;
  bool missing() const { return nbytes == kMissing; }
};

struct ShardLayout {
  std::vector<int64_t> inner_shape;       ///< sharding_indexed "chunk_shape"
  std::vector<int64_t> chunks_per_shard;  ///< shard shape / inner shape
  bool index_at_end = true;
  bool index_big_endian = false;
  bool index_has_crc = false;
  uint64_t num_entries = 1;
  uint64_t index_size = 0;                ///< bytes of the encoded index

  /// Byte offset of the index in a shard of `shard_size` bytes (requires shard_size >= index_size).
  uint64_t IndexOffset(uint64_t shard_size) const {
    return index_at_end ? shard_size - index_size : 0;
  }
};

/// Parses the index part of a sharding_indexed configuration ("index_codecs",
/// "index_location") and the inner chunk shape, for a shard of `shard_shape`.
/// Fails with kInvalidFormat / kUnimplemented.
Result<ShardLayout> ParseShardLayout(const nlohmann::json& config,
                                     const std::vector<int64_t>& shard_shape);

/// Decodes and validates an index read from a shard of `shard_size` bytes.
Result<std::vector<ShardIndexEntry>> DecodeShardIndex(std::span<const uint8_t> bytes,
                                                      const ShardLayout& layout,
                                                      uint64_t shard_size);

}  // namespace lsio
