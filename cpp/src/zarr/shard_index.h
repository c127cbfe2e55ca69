// sharding_indexed: shard layout and shard index decoding.
//
// A shard's index is prod(chunks_per_shard) x (uint64 offset, uint64 nbytes) in C order of
// the inner chunk grid: an array of shape chunks_per_shard + [2] encoded by its own codec
// chain (`index_codecs`, e.g. [bytes, crc32c]), stored in the first or last index_size
// bytes of the shard. Offsets count from the start of the shard in both locations. An entry
// is missing (reads as fill) when nbytes is 2^64-1 (normally offset too; some early writers
// shifted the offset).
//
// Usage:
//   1. At open(): ParseShardLayout (sharding_config.h, the zarr layer's JSON side) builds the
//      ShardLayout, with the index chain prepared through the codec registry.
//   2. Read l.index_size bytes at l.IndexOffset(file_size), then
//      LSIO_ASSIGN_OR_RETURN(auto entries, DecodeShardIndex(bytes, l, file_size));
// DecodeShardIndex runs the index chain (checksum, byte order, any transpose), then
// validates every entry once (no overflow, inside the file, not overlapping the index), so
// the read path can trust them. Fails with kDataLoss on a bad checksum or entry, naming the
// entry.
//
// Thread-safety: a ShardLayout is immutable after parsing; copies share the prepared index
// chain, and DecodeShardIndex may run on any number of threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "codec/chain.h"
#include "lsio/status.h"

namespace lsio {

struct ShardIndexEntry {
  static constexpr uint64_t kMissing = ~0ull;
  uint64_t offset = kMissing;
  uint64_t nbytes = kMissing;
  /// Both at 2^64-1, as the spec and zarr-python say (DecodeShardIndex also maps an early
  /// writer's shifted empty entries to that).
  bool missing() const { return offset == kMissing && nbytes == kMissing; }
};

struct ShardLayout {
  std::vector<int64_t> inner_shape;       ///< sharding_indexed "chunk_shape"
  std::vector<int64_t> chunks_per_shard;  ///< shard shape / inner shape
  /// Empty: the index lists inner chunks in C order of the shard's grid. Else the shard was
  /// transposed before it was sharded (codecs [transpose, sharding_indexed]): the index's
  /// grid dimension i is the array's dimension index_order[i] (inner_shape and
  /// chunks_per_shard stay in the array's order).
  std::vector<int> index_order;
  bool index_at_end = true;
  uint64_t num_entries = 1;
  uint64_t index_size = 0;                ///< bytes of the encoded index (fixed by index_chain)
  /// `index_codecs` prepared for the (chunks_per_shard..., 2) uint64 index array; decodes
  /// to num_entries ShardIndexEntry values in native byte order.
  std::shared_ptr<const CodecChain> index_chain;

  /// Byte offset of the index in a shard of `shard_size` bytes (requires shard_size >= index_size).
  uint64_t IndexOffset(uint64_t shard_size) const {
    return index_at_end ? shard_size - index_size : 0;
  }
};

/// Decodes and validates an index read from a shard of `shard_size` bytes.
Result<std::vector<ShardIndexEntry>> DecodeShardIndex(std::span<const uint8_t> bytes,
                                                      const ShardLayout& layout,
                                                      uint64_t shard_size);

}  // namespace lsio
