// IndexCache: decoded shard indexes of one Array, LRU-bounded by bytes.
//
// Usage:
//   auto idx = cache.Find(shard_id);          // nullptr on a miss
//   cache.Insert(shard_id, decoded_entries);  // evicts least recently used beyond capacity
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

#include "zarr/shard_index.h"

namespace lsio {

using ShardIndexPtr = std::shared_ptr<const std::vector<ShardIndexEntry>>;

class IndexCache {
 public:
  explicit IndexCache(uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  ShardIndexPtr Find(uint64_t shard_id);
  void Insert(uint64_t shard_id, ShardIndexPtr index);
  uint64_t bytes();
  size_t size();

 private:
  using Lru = std::list<std::pair<uint64_t, ShardIndexPtr>>;
  const uint64_t capacity_;
  std::mutex mu_;
  Lru lru_;
  std::unordered_map<uint64_t, Lru::iterator> map_;
  uint64_t bytes_ = 0;
};

}  // namespace lsio
