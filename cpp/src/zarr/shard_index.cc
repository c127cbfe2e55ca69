// Shard index decoding (through the index's codec chain) and validation.
#include "zarr/shard_index.h"

static_assert(sizeof(lsio::ShardIndexEntry) == 16, "an index entry is two packed uint64 values");

namespace lsio {

Result<std::vector<ShardIndexEntry>> DecodeShardIndex(std::span<const uint8_t> bytes,
                                                      const ShardLayout& layout,
                                                      uint64_t shard_size) {
  if (shard_size < layout.index_size) {
    return Status::DataLoss("shard is " + std::to_string(shard_size) + " bytes, shorter than its " +
                            std::to_string(layout.index_size) + "-byte index");
  }
  if (bytes.size() != layout.index_size) {
    return Status::DataLoss("shard index has " + std::to_string(bytes.size()) + " bytes, expected " +
                            std::to_string(layout.index_size));
  }
  if (layout.index_chain == nullptr || layout.index_chain->decoded_size() != 16 * layout.num_entries) {
    return Status::Internal("shard layout without a prepared index chain");
  }
  // The chain checks any crc32c, swaps a big-endian index and undoes transposes, writing
  // the entries straight into the vector (ShardIndexEntry is two native uint64 values).
  std::vector<ShardIndexEntry> entries(layout.num_entries);
  Status st = layout.index_chain->Decode(bytes, reinterpret_cast<uint8_t*>(entries.data()), ThreadDecodeScratch());
  if (!st.ok()) return Status(st.code(), "shard index: " + st.message());

  // Data may lie anywhere outside the index.
  const uint64_t data_begin = layout.index_at_end ? 0 : layout.index_size;
  const uint64_t data_end = layout.index_at_end ? shard_size - layout.index_size : shard_size;

  for (uint64_t i = 0; i < layout.num_entries; ++i) {
    // Early writers of index_location "start" added the index size to every offset, empty
    // entries' 2^64-1 too (wrapping to index_size - 1): that pair is an empty entry. Any
    // other entry with one field at 2^64-1 is corrupt (it overflows below), as zarr-python
    // reads it (an error, not the fill value).
    if (!layout.index_at_end && entries[i].nbytes == ShardIndexEntry::kMissing &&
        entries[i].offset == layout.index_size - 1) {
      entries[i].offset = ShardIndexEntry::kMissing;
    }
    const uint64_t off = entries[i].offset;
    const uint64_t nb = entries[i].nbytes;
    const ShardIndexEntry& e = entries[i];
    // The message is built only on failure: this loop runs for every entry of every shard
    // index read, and formatting it each time cost 60x the index's crc32c.
    if (!e.missing() && (nb == 0 || off > ~0ull - nb || off < data_begin || off + nb > data_end)) {
      const std::string which = "shard index entry " + std::to_string(i) + " (offset " +
                                std::to_string(off) + ", nbytes " + std::to_string(nb) + ")";
      if (nb == 0) return Status::DataLoss(which + " has zero length");
      if (off > ~0ull - nb) return Status::DataLoss(which + " overflows");
      return Status::DataLoss(which + " lies outside the shard's data [" + std::to_string(data_begin) +
                              ", " + std::to_string(data_end) + ")");
    }
  }
  return entries;
}

}  // namespace lsio
