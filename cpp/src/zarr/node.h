// Zarr node metadata (an array or a group, Zarr v3 or v2) in the v3 form, and the members
// listed by consolidated metadata: what groups, listings and variable-length string arrays
// are built from (the facade's lsio/node.h reads the files through a store and calls these).
// Pure: text in, JSON out, so it can be fuzzed like metadata.h.
//
// The v3 form of a node is its zarr.json object. A Zarr v2 node is translated: `zarr_format`
// stays 2 (it says where the node came from), `node_type` and `attributes` (.zattrs) are
// added, and a .zarray becomes v3's keys: `shape`, `data_type`, `chunk_grid`,
// `chunk_key_encoding` (name "v2"), `fill_value` (a null one stays null: "no fill value",
// which xarray reads differently from 0), `codecs` (the v3 chain that decodes the chunks) and
// `dimension_names` (from .zattrs' `_ARRAY_DIMENSIONS`). The translation describes, it does
// not validate: a dtype or compressor lsio cannot read is kept under its v2 name (the
// compressor as "numcodecs.<id>") so that a group still lists the array; opening it fails
// (metadata.h's parsers are the strict ones).
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

/// zarr.json text -> the node's metadata. kInvalidFormat for invalid JSON, a non-object,
/// `zarr_format` 2 (a v2 node keeps its metadata in .zarray / .zgroup) or a `node_type` other
/// than "array" / "group"; kUnimplemented for another zarr_format.
Result<nlohmann::json> ParseNodeV3(std::string_view zarr_json);

/// The members of a v3 group's inline consolidated metadata ("consolidated_metadata" in its
/// zarr.json, as zarr-python writes it): {relative path: node}; null when there is none.
nlohmann::json ConsolidatedMembersV3(const nlohmann::json& group);

/// A Zarr v2 node from its .zarray (array) or .zgroup (group) text and its .zattrs text
/// (nullopt when it has none), in the v3 form. kInvalidFormat for invalid JSON, non-objects
/// and a zarr_format other than 2 (the message names which of the two files is wrong).
Result<nlohmann::json> ParseNodeV2(bool array, std::string_view meta, std::optional<std::string_view> zattrs);

/// The members of a v2 group's .zmetadata ({"metadata": {"a/.zarray": ..., "a/.zattrs": ...}}):
/// {relative path: node in the v3 form}. kInvalidFormat when it is not JSON or lacks the
/// "metadata" object.
Result<nlohmann::json> ParseZmetadata(std::string_view text);

/// A parsed .zarray and .zattrs (an object) as a v3-form array node (zarr/metadata_v2.cc,
/// beside the strict parser, sharing its dtype and codec translation).
nlohmann::json V2ArrayAsV3(const nlohmann::json& zarray, const nlohmann::json& attributes);

}  // namespace lsio
