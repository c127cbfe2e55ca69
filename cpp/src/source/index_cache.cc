// IndexCache implementation.
#include "source/index_cache.h"

#include <utility>

namespace lsio {
namespace {
uint64_t Cost(const ShardIndexPtr& p) { return 64 + p->size() * sizeof(ShardIndexEntry); }
}  // namespace

void IndexCache::EraseLocked(std::unordered_map<uint64_t, Lru::iterator>::iterator it) {
  bytes_ -= Cost(it->second->index);
  lru_.erase(it->second);
  map_.erase(it);
}

std::optional<IndexCache::Hit> IndexCache::FindAny(uint64_t shard_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it == map_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  const Entry& e = *it->second;
  return Hit{e.index, e.version, e.object_size};
}

ShardIndexPtr IndexCache::Find(uint64_t shard_id, const std::string& version) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it == map_.end()) return nullptr;
  if (it->second->version != version) {  // decoded from another version of the shard
    EraseLocked(it);
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->index;
}

void IndexCache::Insert(uint64_t shard_id, ShardIndexPtr index, const std::string& version, uint64_t object_size) {
  const uint64_t cost = Cost(index);
  if (cost > capacity_) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it != map_.end()) EraseLocked(it);
  lru_.push_front(Entry{shard_id, std::move(index), version, object_size});
  try {  // list and map change together or not at all
    map_[shard_id] = lru_.begin();
  } catch (...) {
    lru_.pop_front();
    throw;
  }
  bytes_ += cost;
  while (bytes_ > capacity_ && !lru_.empty()) EraseLocked(map_.find(lru_.back().shard_id));
}

void IndexCache::Erase(uint64_t shard_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(shard_id);
  if (it != map_.end()) EraseLocked(it);
}

void IndexCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  lru_.clear();
  map_.clear();
  bytes_ = 0;
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
