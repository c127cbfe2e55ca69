// IndexCache: decoded shard indexes of one Array, LRU-bounded by bytes.
//
// Usage:
//   auto idx = cache.Find(shard_id, obj->version);             // nullptr on a miss
//   cache.Insert(shard_id, decoded_entries, obj->version, obj->size);  // evicts LRU
//   auto hit = cache.FindAny(shard_id);   // remote stores: adopt hit->version and size
// Every index is tied to the version of the object it was decoded from (local files:
// device, inode, size, mtime, ctime; remote objects: the ETag). Find() with another version
// is a miss and drops the stale entry, so an index is never applied to a shard file that
// was rewritten, replaced or re-created since (the cause of silent wrong data when a
// descriptor was evicted and the path reopened onto a new file). Remote stores cannot
// learn a version without a request, so the executor offers a cached entry (FindAny) to
// the store, which decides whether to adopt its version (Store::AdoptVersion): chunk reads
// are then pinned to it and what is served without a request is confirmed before the call
// succeeds (Store::ConfirmServed): a changed object fails, never mixes, and the call drops
// every index it used.
// Missing shards are not cached (a shard may be written later).
//
// Thread-safety: all methods take an internal lock; values are immutable shared_ptrs, so a
// reader keeps using an index even if it is evicted meanwhile. Fork: Array keeps its cache
// in a ProcessLocal slot, so a child never takes a lock held by a parent thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <optional>
#include <string>

#include "zarr/shard_index.h"

namespace lsio {

using ShardIndexPtr = std::shared_ptr<const std::vector<ShardIndexEntry>>;

class IndexCache {
 public:
  explicit IndexCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  struct Hit {
    ShardIndexPtr index;
    std::string version;
    uint64_t object_size = 0;
  };
  /// The index of `shard_id` if it was decoded from version `version`, else nullptr.
  ShardIndexPtr Find(uint64_t shard_id, const std::string& version);
  /// The cached index of `shard_id` whatever its version, with that version.
  std::optional<Hit> FindAny(uint64_t shard_id);
  void Insert(uint64_t shard_id, ShardIndexPtr index, const std::string& version, uint64_t object_size);
  /// Drops the entry of `shard_id` (its object changed: the next call reads the new index).
  void Erase(uint64_t shard_id);
  /// Drops every entry (Array::Close).
  void Clear();
  uint64_t bytes();
  size_t size();

 private:
  struct Entry {
    uint64_t shard_id;
    ShardIndexPtr index;
    std::string version;
    uint64_t object_size;
  };
  using Lru = std::list<Entry>;
  void EraseLocked(std::unordered_map<uint64_t, Lru::iterator>::iterator it);
  const uint64_t capacity_;
  std::mutex mu_;
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> map_;
  uint64_t bytes_ = 0;
};

}  // namespace lsio
