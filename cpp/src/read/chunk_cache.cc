// ChunkCache (see chunk_cache.h).
#include "read/chunk_cache.h"

#include <cstring>

#include "util/process_local.h"

namespace lsio {

ChunkCache::Chunk ChunkCache::Find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->chunk;
}

bool ChunkCache::Fits(const std::string& key, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  return Cost(key, n) <= capacity_;
}

void ChunkCache::Insert(const std::string& key, const uint8_t* data, size_t n) {
  if (!Fits(key, n)) return;
  // Copied outside the lock: workers insert concurrently.
  auto chunk = std::make_shared<CachedChunk>(n);
  std::memcpy(chunk->bytes.get(), data, n);
  Insert(key, Chunk(std::move(chunk)));
}

void ChunkCache::Insert(const std::string& key, Chunk chunk) {
  const uint64_t cost = Cost(key, chunk->size);
  std::lock_guard<std::mutex> lock(mu_);
  if (cost > capacity_) return;
  auto it = map_.find(key);
  if (it != map_.end()) {  // another worker (or call) got there first: keep the newer copy
    bytes_ -= it->second->cost;
    lru_.erase(it->second);
    map_.erase(it);
  }
  lru_.push_front(Entry{key, std::move(chunk), cost});
  map_.emplace(std::string_view(lru_.front().key), lru_.begin());
  bytes_ += cost;
  ++inserts_;
  EvictLocked();
}

void ChunkCache::EvictLocked() {
  while (bytes_ > capacity_ && !lru_.empty()) {
    Entry& e = lru_.back();
    map_.erase(std::string_view(e.key));
    bytes_ -= e.cost;
    lru_.pop_back();
    ++evictions_;
  }
}

void ChunkCache::Reserve(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (bytes > capacity_) capacity_ = bytes;
}

void ChunkCache::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
  lru_.clear();
  bytes_ = 0;
  capacity_ = 0;  // the next read with cache_bytes sets it again
}

ChunkCache::Stats ChunkCache::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.capacity = capacity_;
  s.bytes = bytes_;
  s.entries = lru_.size();
  s.hits = hits_;
  s.misses = misses_;
  s.inserts = inserts_;
  s.evictions = evictions_;
  return s;
}

std::string ChunkCacheKey(std::string_view cache_namespace, std::string_view location, std::string_view version,
                          uint64_t offset, uint64_t nbytes) {
  std::string k;
  k.reserve(cache_namespace.size() + location.size() + version.size() + 48);
  k.append(cache_namespace);
  k.push_back('\n');
  k.append(location);
  k.push_back('\n');
  k.append(version);
  k.push_back('\n');
  k.append(std::to_string(offset));
  k.push_back(':');
  k.append(std::to_string(nbytes));
  return k;
}

namespace {
ProcessLocal<ChunkCache>* const g_cache = new ProcessLocal<ChunkCache>([] { return new ChunkCache(0); });
}  // namespace

ChunkCache& ProcessChunkCache() { return g_cache->Get(); }

}  // namespace lsio
