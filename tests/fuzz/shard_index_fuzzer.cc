// libFuzzer target: shard index decoding (lsio::ParseShardLayout + lsio::DecodeShardIndex).
//
// Input layout (so that one input describes both the layout and the index bytes):
//   byte 0      flags: bit0 index at end, bit1 big-endian index, bit2 crc32c,
//               bit3 fix up the crc32c (so entry validation is reached past the checksum),
//               bit4 a transpose (axes reversed) before bytes in index_codecs
//   byte 1      rank - 1 (mod 3)
//   bytes 2..4  chunks per shard in each dimension - 1 (mod 4)
//   bytes 5..8  shard size in bytes minus index_size, little endian (mod 2^20)
//   rest        the index bytes as read from the shard
// Invariant checked on success: every present entry lies inside the shard's data region
// and ends before the index (the read path trusts these entries unchecked).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/codec.h"
#include "zarr/shard_index.h"
#include "zarr/sharding_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 9) return 0;
  const uint8_t flags = data[0];
  const size_t rank = data[1] % 3 + 1;
  std::vector<int64_t> shard_shape;
  nlohmann::json inner = nlohmann::json::array();
  for (size_t d = 0; d < rank; ++d) {
    const int64_t inner_extent = 2 + static_cast<int64_t>(d);
    inner.push_back(inner_extent);
    shard_shape.push_back(inner_extent * (data[2 + d] % 4 + 1));
  }
  nlohmann::json index_codecs = nlohmann::json::array();
  if (flags & 16) index_codecs.push_back({{"name", "transpose"}, {"configuration", {{"order", "F"}}}});
  index_codecs.push_back({{"name", "bytes"}, {"configuration", {{"endian", (flags & 2) ? "big" : "little"}}}});
  if (flags & 4) index_codecs.push_back({{"name", "crc32c"}});
  const nlohmann::json config = {{"chunk_shape", inner},
                                 {"index_location", (flags & 1) ? "end" : "start"},
                                 {"index_codecs", index_codecs},
                                 {"codecs", nlohmann::json::array({{{"name", "bytes"}}})}};
  auto layout = lsio::ParseShardLayout(config, shard_shape);
  if (!layout.ok()) __builtin_trap();  // the configuration above is always valid
  const lsio::ShardLayout& l = *layout;

  uint32_t extra;
  std::memcpy(&extra, data + 5, 4);
  const uint64_t shard_size = l.index_size + (extra % (1u << 20));
  std::vector<uint8_t> index(data + 9, data + size);
  if ((flags & 12) == 12 && index.size() == l.index_size) {
    const uint32_t crc = lsio::Crc32c(index.data(), index.size() - 4);
    std::memcpy(index.data() + index.size() - 4, &crc, 4);
  }
  auto entries = lsio::DecodeShardIndex(std::span<const uint8_t>(index.data(), index.size()), l, shard_size);
  if (!entries.ok()) return 0;
  if (entries->size() != l.num_entries) __builtin_trap();
  const uint64_t data_begin = l.index_at_end ? 0 : l.index_size;
  const uint64_t data_end = l.index_at_end ? shard_size - l.index_size : shard_size;
  for (const lsio::ShardIndexEntry& e : *entries) {
    if (e.missing()) continue;
    if (e.nbytes == 0 || e.offset < data_begin || e.offset > data_end || e.nbytes > data_end - e.offset) {
      __builtin_trap();
    }
  }
  return 0;
}
