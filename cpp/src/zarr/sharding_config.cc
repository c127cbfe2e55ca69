// sharding_indexed configuration parsing; the index chain is built by the codec registry.
#include "zarr/sharding_config.h"

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
  // The index is an array of shape chunks_per_shard + [2] of uint64 (spec, "Binary shard format").
  ChunkSpec spec;
  spec.shape = l.chunks_per_shard;
  spec.shape.push_back(2);
  spec.itemsize = 8;
  spec.swap_unit = 8;
  auto chain = ParseCodecChain(*ic, spec);
  if (!chain.ok()) {
    return Status(chain.status().code(), "sharding_indexed: index_codecs: " + chain.status().message());
  }
  const std::optional<uint64_t> size = (*chain)->FixedEncodedSize();
  if (!size) {
    return Status::InvalidFormat("sharding_indexed: index_codecs (" + (*chain)->description() +
                                 ") are not fixed-size, so the index cannot be located");
  }
  l.index_size = *size;
  l.index_chain = std::shared_ptr<const CodecChain>(std::move(chain).value());
  return l;
}

}  // namespace lsio
