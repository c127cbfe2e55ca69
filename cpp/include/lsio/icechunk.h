// lsio/icechunk.h: Icechunk's repo info and snapshot files as plain values (the read path's
// first two steps), for python/lsio/_icechunk.py; manifests become References
// (lsio/manifest.h, References::FromIcechunk). Parsing lives in cpp/src/store/icechunk.cc.
//
// Errors: kInvalidFormat for a file that is not the Icechunk file it should be (header,
// FlatBuffers verification, missing fields), kUnimplemented for spec versions other than 1
// and 2. Callers add the file's location.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/status.h"

namespace lsio {

/// Object ids as they name files: Crockford base 32, upper case, no padding (12 bytes: 20
/// characters).
std::string CrockfordBase32(const uint8_t* bytes, size_t n);

struct IcechunkRepoInfo {
  int spec_version = 0;
  std::vector<std::pair<std::string, std::string>> branches;  ///< (name, snapshot id)
  std::vector<std::pair<std::string, std::string>> tags;
  std::vector<std::string> deleted_tags;
  std::vector<std::string> snapshots;  ///< every snapshot id the repository has
  std::string config_json;  ///< the repository configuration (a FlexBuffer) as JSON; "" if none
};

/// The repo info file (`repo`, spec version 2).
Result<IcechunkRepoInfo> ParseIcechunkRepo(std::string_view file);

struct IcechunkManifestRef {
  std::string id;                                     ///< manifests/<id>
  std::vector<std::pair<uint32_t, uint32_t>> extents;  ///< per dimension: [from, to)
};

struct IcechunkNode {
  std::string path;       ///< absolute: "/", "/a/b"
  std::string node_id;    ///< 8 bytes
  bool is_array = false;
  std::string user_data;  ///< its zarr.json
  std::vector<IcechunkManifestRef> manifests;
};

struct IcechunkSnapshot {
  int spec_version = 0;
  std::string id;
  std::string parent_id;  ///< version 1 only; "" for the first snapshot
  uint64_t flushed_at_us = 0;
  std::string message;
  std::vector<IcechunkNode> nodes;
};

/// A snapshot file (`snapshots/<id>`).
Result<IcechunkSnapshot> ParseIcechunkSnapshot(std::string_view file);

}  // namespace lsio
