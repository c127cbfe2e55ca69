// Zarr v3 array metadata (zarr.json), and Zarr v2's (.zarray, .zattrs; metadata_v2.cc): parsing
// and validation into the plain structures the read layer plans with. Pure: bytes in,
// structures out (no files, no threads), so it can be fuzzed.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(ArrayMetadata m, ParseArrayMetadata(zarr_json_text));
//   m.sharding      -> set when the codecs are [sharding_indexed]
//   m.chain         -> prepared codec chain of the chunks that are decoded (inner chunks
//                      of a shard, or the chunks themselves)
//
// Validation follows the spec's reader rules (docs/design/zarr-format.md, "What a reader
// must get right"): zarr_format 3, node_type "array", unknown top-level keys refused unless
// {"must_understand": false}, storage_transformers empty, regular grid, chunk key encoding
// default|v2 with "/" or ".", inner chunks dividing the shard. Malformed input fails with
// kInvalidFormat; valid but unsupported features (transpose before sharding, bytes->bytes
// after sharding, nested sharding, rectilinear grids, extension types) fail with
// kUnimplemented naming the feature. Bare NaN/Infinity tokens (written by some old tools)
// are tolerated.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "codec/chain.h"
#include "zarr/chunk_key.h"
#include "zarr/dtype.h"
#include "zarr/shard_index.h"

namespace lsio {

struct ArrayMetadata {
  std::vector<int64_t> shape;
  DataTypeInfo dtype;
  std::vector<int64_t> chunk_shape;        ///< the grid's chunk shape (the shard shape if sharded)
  std::vector<int64_t> read_chunk_shape;   ///< the decoded unit: inner chunk if sharded, else chunk
  ChunkKeyEncoding key_encoding;
  std::vector<uint8_t> fill_value;         ///< one element, native byte order
  std::optional<ShardLayout> sharding;
  /// bytes -> bytes codecs after sharding_indexed, in encoding order: each shard object is
  /// compressed whole (source/resident_store.h reads it decoded). Empty for most arrays.
  std::vector<std::shared_ptr<const Codec>> shard_codecs;
  /// Nested sharding: the outer sharding_indexed layout (its inner_shape is the inner
  /// shards' shape); `sharding` is then the inner shards' layout.
  std::optional<ShardLayout> outer_sharding;
  std::unique_ptr<CodecChain> chain;       ///< for read_chunk_shape chunks
  nlohmann::json attributes = nlohmann::json::object();
  std::string attributes_json = "{}";       ///< as JSON text; bare NaN/Infinity kept (Python reads them)
  std::optional<std::vector<std::optional<std::string>>> dimension_names;
  std::string codecs_description;          ///< e.g. "sharding_indexed[bytes, zstd]"
  int zarr_format = 3;                     ///< 2 when parsed from .zarray
};

/// Parses `zarr.json` text. Fails with kInvalidFormat or kUnimplemented.
Result<ArrayMetadata> ParseArrayMetadata(std::string_view text);

/// Parses Zarr v2 `.zarray` text and its `.zattrs` text ("" when there is none) into the same
/// structure (zarr/metadata_v2.cc): the chunks then decode through the v3 codec chain that
/// does what v2 says (transpose for order F, bytes with the dtype's byte order, the
/// compressor). Fails with kInvalidFormat or kUnimplemented (naming the dtype, compressor
/// or filter).
Result<ArrayMetadata> ParseArrayMetadataV2(std::string_view zarray, std::string_view zattrs);

// Pieces the v3 and v2 parsers share.
Result<std::vector<int64_t>> ParseArrayShape(const nlohmann::json& j, const char* what, bool allow_zero);
/// Product of the shape times itemsize must fit in int64.
Status CheckArraySize(const std::vector<int64_t>& shape, size_t itemsize, const char* what);
/// attributes.dump() with the bare NaN/Infinity markers of ParseJsonLenient turned back into tokens.
std::string RestoreNonFinite(std::string dumped);
/// The prefix ParseJsonLenient gives a bare token ("NaN" -> marker + "NaN") inside a string.
std::string_view BareNonFiniteMarker();

/// Parses JSON text, tolerating bare NaN / Infinity / -Infinity tokens.
Result<nlohmann::json> ParseJsonLenient(std::string_view text);

}  // namespace lsio
