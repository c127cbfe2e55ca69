// sharding_indexed configuration parsing: JSON in, ShardLayout (shard_index.h) out.
//
// Kept apart from shard_index.h so that the read layer, which decodes indexes with a
// prepared layout, never includes JSON parsing of codec configurations.
//
// Usage (zarr/metadata.cc, tests, fuzzers):
//   LSIO_ASSIGN_OR_RETURN(ShardLayout l, ParseShardLayout(config, shard_shape));
// `config` is the sharding_indexed "configuration" object; `shard_shape` the outer chunk
// shape. The index codecs go through the same registry as chunk codecs (codec/registry.h)
// and are prepared for the index array (chunks_per_shard..., 2) of uint64; they must be
// fixed-size, since the index is found by its size.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsio/status.h"
#include "zarr/shard_index.h"

namespace lsio {

/// Parses the index part of a sharding_indexed configuration ("index_codecs",
/// "index_location") and the inner chunk shape, for a shard of `shard_shape`.
/// Fails with kInvalidFormat (malformed, or index codecs that are not fixed-size) or
/// kUnimplemented (an index codec lsio does not support).
Result<ShardLayout> ParseShardLayout(const nlohmann::json& config,
                                     const std::vector<int64_t>& shard_shape);

}  // namespace lsio
