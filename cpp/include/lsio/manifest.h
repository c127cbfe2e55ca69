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

  const std::vector<std::string>& urls() const;
  size_t size() const;
  uint64_t memory_bytes() const;
  /// The names one level below `prefix` ("" = the root).
  std::vector<std::string> Children(std::string_view prefix) const;
  const std::string& location() const { return location_; }

  /// A view whose target is the local directory `root`; target_keys[i] is urls()[i]'s path
  /// below it. io / queue_depth / direct as for local arrays (lsio/options.h).
  Result<std::shared_ptr<ReferenceView>> LocalView(std::string_view prefix, const std::string& root,
                                                   std::vector<std::string> target_keys, const std::string& io,
                                                   unsigned queue_depth, bool direct) const;
  /// A view whose target is `target` (one bucket or host).
  Result<std::shared_ptr<ReferenceView>> RemoteView(std::string_view prefix, const RemoteStore& target,
                                                    std::vector<std::string> target_keys) const;

 private:
  References() = default;
  std::shared_ptr<const Manifest> manifest_;
  std::string location_;
};

}  // namespace lsio
