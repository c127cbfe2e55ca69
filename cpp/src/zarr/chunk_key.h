// Chunk key encodings (Zarr v3 "chunk_key_encoding"): grid coordinates -> storage key.
//
//   default: "c" + (sep + index)*   ("c" for 0-d), separator "/" unless configured
//   v2:      index (sep index)*     ("0" for 0-d), separator "." unless configured
// In a sharded array keys name shards; inner chunks have no keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

struct ChunkKeyEncoding {
  bool v2 = false;
  char separator = '/';
};

/// Parses the "chunk_key_encoding" object. Fails with kInvalidFormat / kUnimplemented.
Result<ChunkKeyEncoding> ParseChunkKeyEncoding(const nlohmann::json& j);

/// Key of the chunk at `coords` (ndim entries).
std::string ChunkKey(const ChunkKeyEncoding& enc, const int64_t* coords, int ndim);

/// The inverse of ChunkKey: the coordinates of `key`, or false when it is not a key of this
/// encoding and rank.
bool ParseChunkKey(const ChunkKeyEncoding& enc, std::string_view key, int ndim, int64_t* coords);

}  // namespace lsio
