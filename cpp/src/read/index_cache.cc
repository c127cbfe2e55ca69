// IndexCache implementation.
#include "read/index_cache.h"

namespace lsio {
namespace {
uint64_t Cost(const ShardIndexPtr& p) { return 64 + p->size() * sizeof(ShardIndexEntry); }
}  // namespace

ShardIndexPtr IndexCache::Find(uint64_t shard_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void IndexCache::Insert(uint64_t shard_id, ShardIndexPtr index) {
  const uint64_t cost = Cost(index);
  if (cost > capacity_) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it != map_.end()) {
    bytes_ -= Cost(it->second->second);
    lru_.erase(it->second);
    map_.erase(it);
  }
  lru_.emplace_front(shard_id, std::move(index));
  map_[shard_id] = lru_.begin();
  bytes_ += cost;
  while (bytes_ > capacity_ && !lru_.empty()) {
    bytes_ -= Cost(lru_.back().second);
    map_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

uint64_t IndexCache::bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t IndexCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace lsio
