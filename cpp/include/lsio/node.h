// lsio/node.h: reading a Zarr node's metadata (array or group, v3 or v2) through a store, once.
// The one place metadata files are read for Python's groups, listings and string arrays
// (python/lsio/_nodes.py); lsio::Array::Open reads an array's the same way, or takes a Node
// read already (so `lsio.open` reads zarr.json once even when it turns out to hold strings).
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(std::optional<lsio::Node> node, lsio::ReadNode(*store, "forecast", true));
//   if (!node) ...                          // no zarr.json, .zarray or .zgroup there
//   node->metadata                          // v3 form (zarr/node.h says how v2 is translated)
//   node->consolidated                      // {relative path: v3-form node}, or null
//
// Errors name the file: kInvalidFormat (malformed JSON, wrong zarr_format or node_type),
// kUnimplemented (zarr_format other than 2 and 3), the store's errors (kIoError, ...).
// Thread-safety: may be called from any thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

class Store;

/// One metadata file read for a node.
struct NodeFile {
  std::string key;       ///< relative to the store's root ("zarr.json", "forecast/.zarray")
  std::string location;  ///< what messages call it (path or URL)
  std::string text;      ///< its content
};

struct Node {
  std::string node_type;  ///< "array" or "group"
  int zarr_format = 3;
  nlohmann::json metadata;  ///< the node's zarr.json, or its v2 files translated to that form
  /// Members from consolidated metadata (v3 inline, or v2 .zmetadata when asked for): null
  /// when there is none.
  nlohmann::json consolidated;
  std::vector<NodeFile> files;  ///< what was read, in order (zarr.json; or .zarray/.zgroup, .zattrs, .zmetadata)
};

/// The metadata files of the node at `prefix`, read and not parsed: [zarr.json], or
/// [.zarray or .zgroup, .zattrs if present, .zmetadata if asked for and present]; empty
/// when none of zarr.json, .zarray and .zgroup exists. Array::Open parses these itself.
Result<std::vector<NodeFile>> ReadNodeFiles(Store& store, const std::string& prefix, bool v2_consolidated);

/// Those files parsed into a Node (`files` must not be empty).
Result<Node> NodeFromFiles(std::vector<NodeFile> files);

/// The node at `prefix` ("" = the store's root) of `store`: zarr.json, else .zarray, else
/// .zgroup (with .zattrs when present). A v2 group's .zmetadata is read only when
/// `v2_consolidated` (one request less on remote stores when the caller will not use it).
/// nullopt when none of zarr.json, .zarray and .zgroup exists.
Result<std::optional<Node>> ReadNode(Store& store, const std::string& prefix, bool v2_consolidated);

/// `j` as JSON text, with the bare NaN / Infinity tokens the lenient parser kept turned back
/// into tokens (json.loads reads them) and invalid UTF-8 in strings replaced.
std::string NodeJsonText(const nlohmann::json& j);

/// The same for a local directory (read through a local store rooted at `dir`).
Result<std::optional<Node>> ReadNode(const std::string& dir, const std::string& prefix, bool v2_consolidated);

}  // namespace lsio
