// Shard layout parsing and shard index validation.
#include "zarr/shard_index.h"

#include <cstdio>
#include <cstring>

#include "codec/codec.h"
#include "codec/registry.h"

namespace lsio {

Result<ShardLayout> ParseShardLayout(const nlohmann::json& config,
                                     const std::vector<int64_t>& shard_shape) {
  ShardLayout l;
  auto cs = config.find("chunk_shape");
  if (cs == config.end() || !cs->is_array()) {
    return Status::InvalidFormat("sharding_indexed: missing \"chunk_shape\" list");
  }
  if (cs->size() != shard_shape.size()) {
    return Status::InvalidFormat("sharding_indexed: chunk_shape has rank " + std::to_string(cs->size()) +
                                 ", the array has rank " + std::to_string(shard_shape.size()));
  }
  l.num_entries = 1;
  for (size_t d = 0; d < shard_shape.size(); ++d) {
    const auto& v = (*cs)[d];
    if (!v.is_number_integer() || v.get<int64_t>() < 1) {
      return Status::InvalidFormat("sharding_indexed: chunk_shape entries must be integers >= 1");
    }
    const int64_t c = v.get<int64_t>();
    if (shard_shape[d] % c != 0) {
      return Status::InvalidFormat("sharding_indexed: inner chunk shape does not divide the shard shape (dimension " +
                                   std::to_string(d) + ": " + std::to_string(shard_shape[d]) + " % " +
                                   std::to_string(c) + " != 0)");
    }
    l.inner_shape.push_back(c);
    l.chunks_per_shard.push_back(shard_shape[d] / c);
    l.num_entries *= static_cast<uint64_t>(shard_shape[d] / c);
    if (l.num_entries > (1ull << 32)) {
      return Status::InvalidFormat("sharding_indexed: more than 2^32 inner chunks per shard");
    }
  }

  auto loc = config.find("index_location");
  if (loc != config.end()) {
    if (!loc->is_string()) return Status::InvalidFormat("sharding_indexed: index_location must be a string");
    const std::string s = loc->get<std::string>();
    if (s == "start") l.index_at_end = false;
    else if (s == "end") l.index_at_end = true;
    else return Status::InvalidFormat("sharding_indexed: index_location must be \"start\" or \"end\", got '" + s + "'");
  }

  auto ic = config.find("index_codecs");
  if (ic == config.end() || !ic->is_array() || ic->empty()) {
    return Status::InvalidFormat("sharding_indexed: missing \"index_codecs\" list");
  }
  bool have_bytes = false;
  for (const auto& element : *ic) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(element));
    const std::string name = c->name();
    if (name == "bytes" && !have_bytes) {
      have_bytes = true;
      l.index_big_endian = static_cast<BytesCodec*>(c.get())->big_endian();
    } else if (name == "crc32c" && have_bytes && !l.index_has_crc) {
      l.index_has_crc = true;
    } else if (c->kind() == CodecKind::kBytesToBytes && !c->EncodedSize(0)) {
      return Status::InvalidFormat("sharding_indexed: index codec '" + name + "' is not fixed-size");
    } else {
      return Status::Unimplemented("sharding_indexed: index codecs other than [bytes, crc32c?] (found '" + name + "')");
    }
  }
  if (!have_bytes) return Status::InvalidFormat("sharding_indexed: index_codecs lack \"bytes\"");
  l.index_size = 16 * l.num_entries + (l.index_has_crc ? 4 : 0);
  return l;
}

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
  const size_t body = 16 * layout.num_entries;
  if (layout.index_has_crc) {
    uint32_t stored;
    std::memcpy(&stored, bytes.data() + body, 4);
    const uint32_t computed = Crc32c(bytes.data(), body);
    if (stored != computed) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "shard index crc32c mismatch (stored 0x%08x, computed 0x%08x)",
                    stored, computed);
      return Status::DataLoss(buf);
    }
  }
  // Data may lie anywhere outside the index.
  const uint64_t data_begin = layout.index_at_end ? 0 : layout.index_size;
  const uint64_t data_end = layout.index_at_end ? shard_size - layout.index_size : shard_size;

  std::vector<ShardIndexEntry> entries(layout.num_entries);
  for (uint64_t i = 0; i < layout.num_entries; ++i) {
    uint64_t off, nb;
    std::memcpy(&off, bytes.data() + 16 * i, 8);
    std::memcpy(&nb, bytes.data() + 16 * i + 8, 8);
    if (layout.index_big_endian) {
      off = __builtin_bswap64(off);
      nb = __builtin_bswap64(nb);
    }
    ShardIndexEntry e{off, nb};
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
    entries[i] = e;
  }
  return entries;
}

}  // namespace lsio
