// lsio/strings.h: variable-length string arrays (Zarr v3 `string` with the `vlen-utf8` codec,
// Zarr v2 object arrays with the `vlen-utf8` filter, as lsio/node.h translates them).
//
// Such chunks have no fixed element size, so they do not go through the engine's crop path:
// lsio::StringArray reads whole chunks through the store, one per call, and decodes them
// (bytes -> bytes codecs, then the vlen-utf8 layout). python/lsio/_strings.py picks the
// chunks a selection touches and copies their items out.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(auto node, lsio::ReadNode(*store, "", false));     // lsio/node.h
//   LSIO_ASSIGN_OR_RETURN(auto arr, lsio::StringArray::Open(store, node->metadata, node->files[0].location));
//   arr->ChunkKey({0, 1})                  // "c/0/1" (or "0.1" for v2 keys)
//   LSIO_ASSIGN_OR_RETURN(auto items, arr->ReadChunk({0, 1}));  // nullopt: not stored
//   auto raw = lsio::DecodeVlenUtf8Chunk(R"([{"name": "zstd"}])", stored_bytes, 6);
//
// Thread-safety: all functions may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

class Store;

/// Decodes `stored` with `codecs` (a JSON list of Zarr v3 bytes -> bytes codecs, e.g.
/// `[{"name": "zstd", ...}]` or `[]`, applied in reverse), then parses the vlen-utf8 layout:
/// a little-endian uint32 item count, then per item a uint32 byte length and that many UTF-8
/// bytes. Returns the items in storage order. Fails with kDataLoss when the count is not
/// `items`, a length runs past the end, bytes are left over, the text is not valid UTF-8 or
/// a stage would decode to more than 1 GiB; kUnimplemented / kInvalidFormat for codecs lsio
/// cannot run or that are malformed.
Result<std::vector<std::string>> DecodeVlenUtf8Chunk(const std::string& codecs_json, std::string_view stored,
                                                     uint64_t items);

class StringArray {
 public:
  /// The array whose node metadata (v3 form, lsio/node.h) is `metadata`, its chunks read
  /// through `store` (rooted at the array). `metadata_location` names the metadata file in
  /// errors. No I/O. kUnimplemented for sharded strings, other grids and codec chains other
  /// than [transpose?, vlen-utf8, bytes -> bytes*]; kInvalidFormat for malformed metadata.
  static Result<std::unique_ptr<StringArray>> Open(std::shared_ptr<Store> store, const nlohmann::json& metadata,
                                                   const std::string& metadata_location);
  /// The same for a local directory.
  static Result<std::unique_ptr<StringArray>> Open(const std::string& dir, const nlohmann::json& metadata,
                                                   const std::string& metadata_location);

  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& chunks() const { return chunks_; }
  const std::string& fill_value() const { return fill_; }  ///< "" for a null fill_value
  std::string codecs_description() const;                  ///< "vlen-utf8[zstd]"

  /// The key of chunk `coords` (relative to the array), from the chunk key encoding.
  std::string ChunkKey(const std::vector<int64_t>& coords) const;
  /// What messages call that key (path or URL).
  std::string Location(const std::string& key) const;
  /// Chunk `coords` decoded, its items in C order; nullopt when it is not stored. Errors
  /// name the chunk and its file.
  Result<std::optional<std::vector<std::string>>> ReadChunk(const std::vector<int64_t>& coords) const;

  ~StringArray();

 private:
  StringArray() = default;
  std::shared_ptr<Store> store_;
  std::vector<int64_t> shape_, chunks_;
  std::vector<size_t> order_;  ///< a transpose before vlen-utf8 (v2 order "F"), else empty
  bool v2_keys_ = false;
  char separator_ = '/';
  std::string fill_;
  std::string codecs_json_;  ///< the bytes -> bytes codecs after vlen-utf8
  std::vector<std::string> codec_names_;
};

}  // namespace lsio
