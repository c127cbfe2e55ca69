// ChunkCache: decoded chunks kept across read calls, shared by the Arrays of a process, LRU
// by bytes (opt-in: OpenOptions::cache_bytes, lsio.open(cache_bytes=...)).
//
// Usage (read/executor.cc looks chunks up, read/call.cc inserts them):
//   1. The facade sets ReadContext::chunk_cache = &ProcessChunkCache() after
//      ProcessChunkCache().Reserve(options.cache_bytes), and ReadContext::cache_namespace to a
//      fingerprint of the array's metadata (two arrays over the same files with different
//      codecs or dtypes never share entries).
//   2. Resolving a chunk: key = ChunkCacheKey(namespace, location, version, offset, nbytes);
//      Find(key) -> the decoded chunk (C order, native byte order) or nullptr.
//   3. After decoding a miss: Insert(key, decoded bytes) (copied; evicts least recently
//      used entries until the total fits).
// Keys carry the stored object's version (local files: device, inode, size, mtime, ctime,
// as the descriptor cache saw them at this call's open; remote: the ETag), so a rewritten,
// replaced or re-created file is a miss and its old entries age out: never served stale.
// Bytes counted per entry: the decoded size plus the key and a fixed overhead, so RSS stays
// within the capacity plus the allocator's slack. An entry larger than the capacity is not
// kept. The capacity only grows (the largest any Array asked for) until Clear(), which empties
// the cache and resets it to 0 (the next read with a cache sets it again).
//
// Thread-safety: all methods take one internal lock (held for a lookup or an insert's list
// update, never during a copy into the output: entries are immutable shared_ptrs, so a
// reader keeps its entry alive while another thread evicts it). Fork: the process cache
// lives in a ProcessLocal slot, so a child starts with an empty cache and a fresh lock.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <cstddef>

namespace lsio {

/// A decoded chunk held by the cache (uninitialised when made: decoders fill it).
struct CachedChunk {
  explicit CachedChunk(size_t n) : bytes(new uint8_t[n]), size(n) {}
  std::unique_ptr<uint8_t[]> bytes;
  size_t size;
  const uint8_t* data() const { return bytes.get(); }
};

class ChunkCache {
 public:
  explicit ChunkCache(uint64_t capacity_bytes = 0) : capacity_(capacity_bytes) {}

  using Chunk = std::shared_ptr<const CachedChunk>;

  /// The decoded chunk under `key`, or nullptr (counted as a hit or a miss).
  Chunk Find(const std::string& key);
  /// Keeps a copy of `n` decoded bytes under `key` (replacing an entry with that key).
  void Insert(const std::string& key, const uint8_t* data, size_t n);
  /// Keeps `chunk` itself under `key` (a chunk decoded straight into a CachedChunk: no copy).
  void Insert(const std::string& key, Chunk chunk);
  /// Whether an entry of `n` bytes under `key` would be kept (so a decoder may decode into
  /// a CachedChunk instead of its scratch buffer).
  bool Fits(const std::string& key, size_t n);
  /// Raises the capacity to at least `bytes` (never lowers it).
  void Reserve(uint64_t bytes);
  /// Drops every entry and resets the capacity to 0 (counters stay).
  void Clear();

  struct Stats {
    uint64_t capacity = 0;
    uint64_t bytes = 0;    ///< counted bytes held now
    uint64_t entries = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t inserts = 0;
    uint64_t evictions = 0;
  };
  Stats stats();

  /// Bytes an entry of `n` decoded bytes under `key` counts for.
  static uint64_t Cost(const std::string& key, size_t n) { return n + key.size() + kOverhead; }

 private:
  static constexpr uint64_t kOverhead = 128;  // list node, map slot, vector and control block
  struct Entry {
    std::string key;
    Chunk chunk;
    uint64_t cost = 0;
  };
  using Lru = std::list<Entry>;
  void EvictLocked();

  std::mutex mu_;
  uint64_t capacity_;
  Lru lru_;  // most recently used first
  std::unordered_map<std::string_view, Lru::iterator> map_;  // views into the entries' keys
  uint64_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, inserts_ = 0, evictions_ = 0;
};

/// The key of a stored chunk: namespace, object location and version, and the chunk's byte
/// range in the object.
std::string ChunkCacheKey(std::string_view cache_namespace, std::string_view location, std::string_view version,
                          uint64_t offset, uint64_t nbytes);

/// The process's cache (rebuilt empty in a forked child).
ChunkCache& ProcessChunkCache();

}  // namespace lsio
