// DiskCache: byte ranges of remote objects kept in a local directory across calls, processes
// and restarts (storage_options={"cache_dir": ..., "cache_bytes": ...}), on the model of
// NVIDIA's VDisc: a remote store reads a block from disk when it has it and from the network
// otherwise, then keeps it.
//
// Usage (store/http_store.cc):
//   1. auto cache = SharedDiskCache("/scratch/lsio-cache", 64ull << 30);  // one per dir per process
//   2. before a read pinned to a known version (ETag):
//        if (cache->Get(url, etag, offset, length, dst)) ... // served, no request
//   3. after a successful network read: cache->Put(url, etag, offset, length, dst);
//
// The HTTP store caches aligned 64 KiB blocks of objects (store/http_store.cc: reads are
// served when every block holding needed bytes is here, else the missing span is fetched as
// whole blocks). Blocks are keyed by (URL, ETag, offset, length): an object rewritten under the same URL
// has another ETag, so its old blocks are never served again and age out. Only reads pinned
// to a version the store learned from the server this process (chunk reads after their
// shard index was read; read_ranges after an object's first request) use the cache, so
// versions are revalidated by the index requests, never assumed.
//
// Layout: <dir>/<2 hex>/<32 hex>.blk, the name a 128-bit hash of the key; each file holds a
// header (magic, key) and the bytes, and is written to a temporary name in the same
// directory and renamed into place: readers in any process see a whole block or none (no
// torn reads), and concurrent writers of one block leave one of their identical copies.
// Get checks the header against the key and the file's size (a hash collision or a damaged
// file is a miss; a damaged file is removed) and bumps the file's mtime, the LRU clock.
// Eviction: when this process's running total of the directory passes the capacity, it
// rescans the directory (all processes' blocks), removes the least recently used blocks
// down to 90% of the capacity, and removes temporary files older than an hour (writers that
// died). A block larger than the capacity is not kept. I/O errors in the cache never fail a
// read: the block is fetched from the network instead.
//
// Thread-safety: all methods may be called from any thread; the running total and the scan
// take an internal lock. Fork: SharedDiskCache keeps its map in a ProcessLocal slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace lsio {

class DiskCache {
 public:
  DiskCache(std::string dir, uint64_t capacity_bytes);

  /// Fills dst with the cached block and returns true, or returns false (a miss).
  bool Get(const std::string& url, const std::string& version, uint64_t offset, uint64_t length, uint8_t* dst);
  /// Keeps a copy of the block (best effort: errors are counted, never returned).
  void Put(const std::string& url, const std::string& version, uint64_t offset, uint64_t length,
           const uint8_t* src);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t puts = 0;
    uint64_t evictions = 0;
    uint64_t errors = 0;  ///< writes or scans that failed (the cache then just misses)
  };
  Stats stats() const;
  const std::string& dir() const { return dir_; }
  uint64_t capacity() const { return capacity_; }

  /// Scans the directory and evicts down to `target` bytes; returns the bytes left. Public
  /// for tests; Put calls it when the running total passes the capacity.
  uint64_t Evict(uint64_t target);

 private:
  std::string BlockPath(const std::string& key) const;

  const std::string dir_;
  const uint64_t capacity_;
  std::mutex mu_;
  bool scanned_ = false;  // total_ known from a scan
  uint64_t total_ = 0;    // this process's estimate of the bytes in dir_
  std::atomic<uint64_t> hits_{0}, misses_{0}, puts_{0}, evictions_{0}, errors_{0}, counter_{0};
  std::atomic<bool> made_[256] = {};  // subdirectory <2 hex> created (by this process)
};

/// The process's DiskCache for `dir` (created on first use; the capacity is the largest any
/// caller gave). A forked child gets its own objects.
std::shared_ptr<DiskCache> SharedDiskCache(const std::string& dir, uint64_t capacity_bytes);

}  // namespace lsio
