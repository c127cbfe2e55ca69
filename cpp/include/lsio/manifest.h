// lsio/manifest.h: the public C++ API for arrays and groups described by references to byte
// ranges of other objects (kerchunk references today; store/manifest.h holds the machinery).
//
// Usage:
//   1. auto refs = lsio::References::FromKerchunk(json_text, "/data/era5.json");
//   2. (*refs)->urls(): every object the references name; map each to a key of one target:
//      a local directory ("/" and absolute paths without the leading '/') or a RemoteStore
//      (its bucket and the object keys below it).
//   3. auto view = (*refs)->LocalView("t2m", "/", keys, "auto", 64, false);   // or RemoteView
//      lsio::Array::Open(view->store(), view->Location(""), options);
//      lsio::ReadNode(*view->store(), "", true);                             // groups
//
// Thread-safety: References is immutable; views are as thread-safe as any store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/status.h"

namespace lsio {

class Store;
class Manifest;
class ManifestStore;
class RemoteStore;

/// One manifest served below a key prefix, over its target store.
class ReferenceView {
 public:
  explicit ReferenceView(std::shared_ptr<ManifestStore> store);
  std::shared_ptr<Store> store() const;  ///< for Array::Open and ReadNode
  std::string Location(std::string_view key) const;
  std::shared_ptr<ReferenceView> Sub(std::string_view prefix) const;

 private:
  std::shared_ptr<ManifestStore> store_;
};

class References {
 public:
  /// kerchunk JSON references (versions 0 and 1): kInvalidFormat / kUnimplemented as
  /// store/kerchunk.h says. `location` names them in messages.
  static Result<std::shared_ptr<References>> FromKerchunk(std::string_view json, std::string location);

  /// References given as columns (readers in Python: kerchunk's parquet form): `inline_values`
  /// (key, bytes) pairs, then per reference its key, the number of its URL in `urls`, its
  /// offset and length (length < 0: the whole object). kInvalidFormat for a key given twice
  /// or a URL number out of range.
  static Result<std::shared_ptr<References>> FromEntries(std::vector<std::pair<std::string, std::string>> inline_values,
                                                         std::vector<std::string> keys, std::vector<std::string> urls,
                                                         const std::vector<int64_t>& url_ids,
                                                         const std::vector<int64_t>& offsets,
                                                         const std::vector<int64_t>& lengths, std::string location);

  /// One array of an Icechunk snapshot (lsio/icechunk.h) and the manifests it takes its
  /// chunk references from.
  struct IcechunkArray {
    std::string node_id;  ///< 8 bytes (IcechunkNode::node_id)
    std::string root;     ///< the array's key prefix in these references ("" for a root array)
    char separator = '/'; ///< its chunk_key_encoding's separator
    bool v2_keys = false; ///< chunk_key_encoding "v2" ("0.1") rather than "default" ("c/0/1")
    size_t ndim = 0;
    /// (index into `manifest_files`, the extents the snapshot takes from it: [from, to) per
    /// dimension)
    std::vector<std::pair<size_t, std::vector<std::pair<uint32_t, uint32_t>>>> manifests;
  };

  /// The chunk references of Icechunk arrays from their manifest files (whole files, header
  /// included; `manifest_locations` name them in messages), with `inline_values` (the nodes'
  /// zarr.json documents). Native chunks are ranges of the URLs "chunks/<id>" (relative to
  /// the repository), virtual ones of their own URLs, whose checks() say what the references
  /// ask of each object.
  static Result<std::shared_ptr<References>> FromIcechunk(std::vector<std::pair<std::string, std::string>> inline_values,
                                                          const std::vector<IcechunkArray>& arrays,
                                                          const std::vector<std::string>& manifest_files,
                                                          const std::vector<std::string>& manifest_locations,
                                                          std::string location);

  /// Per URL: (the ETag its references were written against, the latest modification time
  /// they allow, Unix seconds); ("", 0) when they ask nothing. Empty unless FromIcechunk.
  const std::vector<std::pair<std::string, uint32_t>>& checks() const { return checks_; }

  const std::vector<std::string>& urls() const;
  size_t size() const;
  uint64_t memory_bytes() const;
  /// The names one level below `prefix` ("" = the root).
  std::vector<std::string> Children(std::string_view prefix) const;
  const std::string& location() const { return location_; }

  /// A view whose target is the local directory `root`; target_keys[i] is urls()[i]'s path
  /// below it. io / queue_depth / direct as for local arrays (lsio/options.h).
  /// `versions` (empty, or one per URL): the version each object must be at ("" for any);
  /// reads of an object at another version fail (kIoError, ESTALE). Remote targets only: a
  /// local file's version is its own.
  Result<std::shared_ptr<ReferenceView>> LocalView(std::string_view prefix, const std::string& root,
                                                   std::vector<std::string> target_keys, const std::string& io,
                                                   unsigned queue_depth, bool direct) const;
  /// A view whose target is `target` (one bucket or host).
  Result<std::shared_ptr<ReferenceView>> RemoteView(std::string_view prefix, const RemoteStore& target,
                                                    std::vector<std::string> target_keys,
                                                    std::vector<std::string> versions = {}) const;

  /// Where some of a view's objects live: a local directory (`local_root`) or a remote store.
  struct ViewTarget {
    std::string local_root;
    std::shared_ptr<RemoteStore> remote;
  };
  /// A view whose objects live in several places: urls()[i] is target_keys[i] in
  /// targets[target_of[i]]; `versions` as for RemoteView; io / queue_depth for local targets.
  Result<std::shared_ptr<ReferenceView>> MixedView(std::string_view prefix, const std::vector<ViewTarget>& targets,
                                                   std::vector<uint32_t> target_of,
                                                   std::vector<std::string> target_keys,
                                                   std::vector<std::string> versions, const std::string& io,
                                                   unsigned queue_depth) const;

 private:
  References() = default;
  std::shared_ptr<const Manifest> manifest_;
  std::string location_;
  std::vector<std::pair<std::string, uint32_t>> checks_;
};

}  // namespace lsio
