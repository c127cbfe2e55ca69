// DiskCacheStore: the local disk cache (store/disk_cache.h) as a store that wraps another
// (a remote one): reads pinned to a version that names its bytes (Store::
// VersionIdentifiesBytes: a strong ETag) are served from cached 64 KiB blocks when every
// block holding needed bytes is on disk; otherwise the missing span is fetched as whole
// blocks through the wrapped store and kept. Everything else goes to the wrapped store.
//
// Versions stay the wrapped store's: blocks are keyed by (Identity(obj), version, offset,
// length); a version adopted from memory (Store::AdoptVersion) is served only because the
// wrapped store confirms it before the call ends (traits().confirm_early: the executor hands
// the call's objects to ReadStream, whose HEADs overlap the disk reads; ConfirmServed checks
// at the end of each wave). So a rewritten object's old blocks are never returned as
// current, and a warm call still fetches no chunk byte.
//
// Usage (src/remote.cc):
//   auto inner = std::make_shared<ObjectStore>(config);
//   auto store = std::make_shared<DiskCacheStore>(inner, SharedDiskCache(dir, bytes).value());
//   Array::Open(store, ...);   // counters: inner->stats() (hits counted there too)
//
// Tails: a read of an object's end (ReadKind::kSuffix) whose caller confirms the version
// before trusting the bytes (RangeRead::confirmed_later: a shard index read) is served from
// the tail a read of that object kept earlier (RangeRead::keep_tail; DiskCache::Tail, any
// process), adopting the
// tail's version in the wrapped store; so a new process's warm call reads no shard index
// from the network, and its confirmations go out with its chunk reads (one round trip,
// overlapping the disk reads). When a version taken from a tail turns out stale (the
// confirmation, or a pinned read, fails with ESTALE), every tail this process adopted and
// has not seen confirmed is erased (a writer rewrites many shards at once). RememberedServed()
// counts the reads served from tails: the executor runs a call that failed after any of them
// once more, without tails (read/executor.cc), so neither a rewrite made before a process
// started nor a tail of an array since re-created with another layout (an index that no
// longer decodes) is an error in it. Tails are written for strong ETags only, like blocks.
//
// Writes: a read call's fetched blocks are written after its requests finish (at the end of
// Read/ReadStream, or when they pass 256 MiB), on the calling thread: a write inside a
// completion callback would hold up every request in flight (cold W7: 0.68x of no cache).
// Thread-safety: as the wrapped store; the block files are shared by processes (see
// disk_cache.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "store/disk_cache.h"
#include "store/store.h"

namespace lsio {

class DiskCacheStore final : public Store {
 public:
  DiskCacheStore(std::shared_ptr<Store> inner, std::shared_ptr<DiskCache> cache)
      : inner_(std::move(inner)), cache_(std::move(cache)) {}

  Result<ObjectInfo> Stat(std::string_view key) override { return inner_->Stat(key); }
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override {
    return inner_->ReadAll(key, max_bytes);
  }
  std::string Location(std::string_view key) const override { return inner_->Location(key); }
  Result<ObjectRef> Open(std::string_view key) override { return inner_->Open(key); }
  Result<ObjectRef> OpenForOneRead(std::string_view key) override { return inner_->OpenForOneRead(key); }
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  void ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                  const std::function<bool()>& cancelled = {}, std::span<const ObjectRef> confirm = {}) override;
  StoreTraits traits() override {
    StoreTraits t = inner_->traits();
    t.confirm_early = true;
    return t;
  }
  void Close() override { inner_->Close(); }
  Result<std::string> TransportName() override { return inner_->TransportName(); }
  bool AdoptVersion(StoreObject& obj, const std::string& version, uint64_t size) override {
    return inner_->AdoptVersion(obj, version, size);
  }
  Status ConfirmServed(std::span<const ObjectRef> objects, const std::function<bool()>& cancelled = {}) override;
  uint64_t RememberedServed() override { return remembered_served_.load(std::memory_order_acquire); }
  void ForgetRemembered() override;
  std::string Identity(const StoreObject& obj) const override { return inner_->Identity(obj); }
  bool VersionIdentifiesBytes(const StoreObject& obj) const override { return inner_->VersionIdentifiesBytes(obj); }
  StoreStats& stats() override { return inner_->stats(); }

  Store& inner() { return *inner_; }
  DiskCache& cache() { return *cache_; }

 private:
  // A read widened to whole blocks for its request: what the caller asked for, and the
  // buffer the blocks go to (dst == nullptr: not widened).
  struct Widening {
    uint64_t offset = 0;
    uint64_t length = 0;
    uint8_t* dst = nullptr;
    std::unique_ptr<uint8_t[]> buffer;
  };
  // Fetched spans waiting to be written (WritePending).
  struct Pending {
    struct Span {
      std::string id, version;
      uint64_t offset = 0, length = 0;
      std::unique_ptr<uint8_t[]> bytes;
    };
    std::vector<Span> spans;
    std::vector<std::pair<std::string, DiskCache::Tail>> tails;
    uint64_t bytes = 0;
  };
  // Serves a kSuffix read whose caller confirms later from the object's kept tail, adopting
  // the tail's version; false when there is none (or the wrapped store does not adopt it).
  bool ServeTail(RangeRead& r);
  // After the wrapped store finished r: queues its tail (a kSuffix read that learned a strong
  // version), or erases the object's tail when r found its version stale.
  void AfterInner(const RangeRead& r, Pending* pending);
  void Stale(const StoreObject& obj);
  // True when the cache holds every block of r that holds needed bytes (r is then
  // finished); else r is narrowed and widened to the whole blocks from the first missing one
  // to the last, into w's buffer, for its request (blocks found are already in dst).
  bool ServeFromDisk(RangeRead& r, Widening* w);
  // After the wrapped store finished a widened read: queues its blocks and restores the
  // read as the caller asked for it.
  void Keep(RangeRead& r, Widening* w, Pending* pending);
  void WritePending(Pending* pending);

  std::shared_ptr<Store> inner_;
  std::shared_ptr<DiskCache> cache_;
  std::atomic<uint64_t> remembered_served_{0};
  std::mutex adopted_mu_;
  std::unordered_set<std::string> adopted_;  // URLs whose tail was adopted, not yet confirmed
};

}  // namespace lsio
