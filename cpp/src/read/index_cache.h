// IndexCache: decoded shard indexes of one Array, LRU-bounded by bytes.
//
// Usage:
//   auto idx = cache.Find(shard_id, file->id);          // nullptr on a miss
//   cache.Insert(shard_id, decoded_entries, file->id);  // evicts LRU beyond capacity
// Every index is tied to the identity of the file it was decoded from (device, inode,
// size, mtime, ctime: io/file_cache.h). Find() with another identity is a miss and drops
// the stale entry, so an index is never applied to a shard file that was rewritten,
// replaced or re-created since (the cause of silent wrong data when a descriptor was
// evicted and the path reopened onto a new file).
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

#include "io/file_cache.h"
#include "zarr/shard_index.h"

namespace lsio {

using ShardIndexPtr = std::shared_ptr<const std::vector<ShardIndexEntry>>;

class IndexCache {
 public:
  explicit IndexCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  /// The index of `shard_id` if it was decoded from the file `file` identifies, else nullptr.
  ShardIndexPtr Find(uint64_t shard_id, const FileIdentity& file);
  void Insert(uint64_t shard_id, ShardIndexPtr index, const FileIdentity& file);
  /// Drops every entry (Array::Close).
  void Clear();
  uint64_t bytes();
  size_t size();

 private:
  struct Entry {
    uint64_t shard_id;
    ShardIndexPtr index;
    FileIdentity file;
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
