// Manifest and ManifestStore: a store whose keys are byte ranges of other objects.
//
// A manifest maps keys ("t2m/.zarray", "t2m/0.1.2") to one of:
//   - inline bytes (metadata documents, small chunks a writer embedded),
//   - a byte range [offset, offset + length) of an object named by URL,
//   - a whole object named by URL;
// a key it does not hold is missing (the chunk reads as the fill value). kerchunk references
// (store/kerchunk.h) are read into one; Icechunk and HDF5 chunk maps are the next readers.
//
// ManifestStore serves a manifest as a Store (store.h) over a *target* store that holds the
// referenced objects (a LocalStore rooted at "/", a remote ObjectStore of one bucket): every
// URL of the manifest is given its key in the target when the store is made. The layers above
// read it like any other store: metadata through ReadAll, chunks by Open + Read, where Open
// returns either a resident object (inline bytes: no I/O) or a *slice* of the target object,
// whose reads go to the target at the slice's offset. So planning, io_uring / HTTP, retries,
// pinned versions, the disk cache (it wraps the target) and decoding work unchanged.
//
// Memory: entries are held as a struct of arrays sorted by key (the keys in one buffer,
// offsets, lengths, URL numbers): about 24 bytes plus the key's length per entry, so a
// million chunk references cost a few tens of MB. Inline values are kept as given.
//
// Usage:
//   Manifest::Builder b;
//   b.AddInline("t2m/.zarray", text);
//   b.AddRange("t2m/0.0", b.Url("s3://bucket/a.nc"), 4096, 1000);
//   LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const Manifest> m, std::move(b).Finish());
//   // map every m->urls()[i] to a key of `target`:
//   auto store = std::make_shared<ManifestStore>(m, "t2m", target, target_keys, "refs.json");
//   Array::Open(store, "refs.json/t2m", options);
//
// Errors: a reference to an object the target does not have is kIoError (ENOENT) naming the
// object and the reference (never "missing": a manifest that points nowhere is broken); a
// reference past the end of its object is kDataLoss.
//
// Thread-safety: a Manifest is immutable once built; ManifestStore is as thread-safe as its
// target.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lsio/status.h"
#include "store/store.h"

namespace lsio {

class Manifest {
 public:
  enum class Kind { kMissing, kInline, kRange, kWhole };
  struct Entry {
    Kind kind = Kind::kMissing;
    uint32_t url = 0;         ///< kRange, kWhole: index into urls()
    uint64_t offset = 0;      ///< kRange
    uint64_t length = 0;      ///< kRange; kInline: the bytes' size
    std::string_view bytes;   ///< kInline (valid while the Manifest lives)
  };

  class Builder {
   public:
    /// The number of `url` in urls(), added on first use.
    uint32_t Url(const std::string& url);
    void AddInline(std::string key, std::string bytes);
    void AddRange(std::string key, uint32_t url, uint64_t offset, uint64_t length);
    void AddWhole(std::string key, uint32_t url);
    size_t size() const { return keys_.size(); }
    /// Sorts the entries; kInvalidFormat when a key was given twice.
    Result<std::shared_ptr<const Manifest>> Finish() &&;

   private:
    struct Pending {
      Kind kind;
      uint32_t url;
      uint64_t offset, length;
      uint32_t inline_index;
    };
    std::vector<std::string> keys_;
    std::vector<Pending> entries_;
    std::vector<std::string> inline_;
    std::vector<std::string> urls_;
    std::unordered_map<std::string, uint32_t> url_index_;
  };

  Entry Find(std::string_view key) const;
  size_t size() const { return key_end_.size(); }
  const std::vector<std::string>& urls() const { return urls_; }
  /// The names directly below `prefix` ("" for the root; "a/b" for a/b/...), sorted, unique.
  std::vector<std::string> Children(std::string_view prefix) const;
  /// Bytes held (tables, keys, inline values, URLs).
  uint64_t memory_bytes() const;

 private:
  std::string_view KeyAt(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : key_end_[i - 1];
    return std::string_view(keys_).substr(begin, key_end_[i] - begin);
  }
  static constexpr uint32_t kInlineUrl = UINT32_MAX;
  static constexpr uint64_t kWholeLength = UINT64_MAX;

  std::string keys_;                 // every key, sorted, back to back
  std::vector<uint64_t> key_end_;    // where key i ends in keys_
  std::vector<uint32_t> url_;        // URL number; kInlineUrl: offset_ indexes inline_
  std::vector<uint64_t> offset_;
  std::vector<uint64_t> length_;     // kWholeLength: the whole object
  std::vector<std::string> inline_;
  std::vector<std::string> urls_;
};

class ManifestStore final : public Store {
 public:
  /// Serves the keys of `manifest` below `prefix` ("" for all; "t2m" for t2m/...).
  /// `target_keys[i]` is the key in `target` of manifest->urls()[i]; `location` names the
  /// manifest in messages (its path or URL, no secrets).
  /// `versions` (empty, or one per URL): the version an object must be at, "" for any (an
  /// Icechunk virtual reference's ETag). An object opened without a version yet takes it, and
  /// every read of it is pinned to it: a remote object at another version fails the read
  /// (kIoError, ESTALE; If-Match).
  ManifestStore(std::shared_ptr<const Manifest> manifest, std::string prefix, std::shared_ptr<Store> target,
                std::vector<std::string> target_keys, std::string location, std::vector<std::string> versions = {});
  /// Several targets (an Icechunk array with chunks in the repository and in other objects):
  /// URL i lives in targets[target_of[i]] under target_keys[i]. A call's reads go to each
  /// target in turn (a stream is read in batches); the traits are the remote target's.
  ManifestStore(std::shared_ptr<const Manifest> manifest, std::string prefix,
                std::vector<std::shared_ptr<Store>> targets, std::vector<uint32_t> target_of,
                std::vector<std::string> target_keys, std::string location, std::vector<std::string> versions);

  /// The same manifest and target below `prefix` (relative to this store's prefix).
  std::shared_ptr<ManifestStore> Sub(std::string_view prefix) const;
  const Manifest& manifest() const { return *manifest_; }
  const std::string& prefix() const { return prefix_; }

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override;
  Result<ObjectRef> Open(std::string_view key) override;
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  void ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                  const std::function<bool()>& cancelled = {}, std::span<const ObjectRef> confirm = {}) override;
  StoreTraits traits() override;
  /// The target's mapping of the referenced range (a slice's range inside its target).
  MappedRange Mapped(StoreObject& obj, uint64_t offset, uint64_t length) override;
  bool LocatesKeys() const override { return true; }
  int64_t ObjectNumber(std::string_view key) const override;
  /// Ranges resolve to the target's objects (each opened once per call), inline values to
  /// resident objects: neighbouring chunks of one file then coalesce into one read.
  Status Locate(std::span<const std::string> keys, std::vector<KeyRange>* out) override;
  Result<std::string> TransportName() override;
  void Close() override;
  StoreStats& stats() override;
  /// Several targets: every target's counters summed (bytes_used is counted into stats()).
  StoreCounters Counters() override;

 private:
  std::string Full(std::string_view key) const;
  std::string RefLocation(const Manifest::Entry& e, std::string_view key) const;
  /// Gives a freshly opened target object the version URL `url` must be at; true if it has one.
  bool Expect(StoreObject& obj, uint32_t url) const;
  uint32_t TargetIndex(uint32_t url) const { return target_of_->empty() ? 0 : (*target_of_)[url]; }
  Store& TargetOf(uint32_t url) const { return *targets_[TargetIndex(url)]; }
  /// The store whose counters and transport the array reports: the first remote target.
  Store& Primary() const;

  std::shared_ptr<const Manifest> manifest_;
  std::string prefix_;  // "" or "a/b/" (with the slash)
  std::vector<std::shared_ptr<Store>> targets_;
  std::shared_ptr<const std::vector<uint32_t>> target_of_;  // empty: every URL in targets_[0]
  std::shared_ptr<const std::vector<std::string>> target_keys_;
  std::string location_;
  std::shared_ptr<const std::vector<std::string>> versions_;
};

}  // namespace lsio
