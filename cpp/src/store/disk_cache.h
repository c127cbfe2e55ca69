// DiskCache: byte ranges of remote objects kept in a local directory across calls, processes
// and restarts (storage_options={"cache_dir": ..., "cache_bytes": ...}), on the model of
// NVIDIA's VDisc: a remote store reads a block from disk when it has it and from the network
// otherwise, then keeps it.
//
// Usage (store/object_store.cc):
//   1. auto cache = SharedDiskCache("/scratch/lsio-cache", 64ull << 30);  // Result: one per dir per process
//   2. before a read pinned to a known version (ETag):
//        if (cache->Get(url, etag, offset, length, dst)) ... // served, no request
//   3. after a successful network read: cache->Put(url, etag, offset, length, dst);
//
// The HTTP store caches aligned 64 KiB blocks of objects (store/object_store.cc: reads are
// served when every block holding needed bytes is here, else the missing span is fetched as
// whole blocks). Blocks are keyed by (URL, ETag, offset, length): an object rewritten under
// the same URL has another ETag, so its old blocks are never served again and age out.
// The store serves blocks only for a strong ETag the server confirmed: in this read call
// (the shard index read, or a conditional If-None-Match request for a cached index; a
// read_ranges object's first request), or within the storage option cache_max_age
// (default 0). A remembered version is never assumed current (ObjectStore::AdoptVersion).
// Weak ETags and Last-Modified dates do not say the bytes are identical: such objects are
// never cached.
//
// Tails: besides blocks, the cache keeps per object the version, size and last bytes that a
// read of the object's end returned (a shard index), keyed by URL alone: a new process (or
// Array) adopts that version instead of reading the index again, and the wrapped store
// confirms it before the call succeeds (store/disk_cache_store.h); a stale tail is erased.
//
// Layout: <dir>/<2 hex>/<32 hex>.blk, the name a 128-bit hash of the key; each file holds a
// header (magic, key, CRC-32C of the bytes) and the bytes. Directories are created 0700 and
// files 0600 (the headers hold object URLs). A batch of blocks is written to temporary
// names in the same directories, made durable with one syncfs, then renamed into place:
// readers in any process see a whole block or none (no torn reads), and concurrent writers
// of one block leave one of their identical copies. Get checks the header against the key,
// the file's size and the checksum (a hash collision is a miss; a damaged file is a miss
// and is removed) and bumps the file's mtime, the LRU clock, when it is over a minute old
// (a warm batch then writes no inodes; eviction needs no finer clock).
// Eviction: every process adds the bytes it wrote to one counter in <dir>/usage (under
// flock), so the bound holds for all processes sharing the directory; whoever sees the
// counter pass the capacity rescans the directory (all processes' blocks) without holding
// any lock readers or writers take, removes the least recently used blocks down to 90% of
// the capacity, stores the scanned total in the counter, and removes temporary files older
// than an hour (writers that died). A block larger than the capacity is not kept. I/O
// errors in the cache never fail a read: the block is fetched from the network instead;
// they are counted and the last one is kept (stats(), last_error()). The directory itself
// (with its parents) is created when the cache is made, and a directory that cannot be
// created or written fails there (SharedDiskCache), never silently later.
//
// Thread-safety: all methods may be called from any thread. Fork: SharedDiskCache keeps its
// map in a ProcessLocal slot.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "lsio/status.h"

namespace lsio {

class DiskCache {
 public:
  DiskCache(std::string dir, uint64_t capacity_bytes);
  ~DiskCache();
  DiskCache(const DiskCache&) = delete;
  DiskCache& operator=(const DiskCache&) = delete;

  /// Fills dst with the cached block and returns true, or returns false (a miss).
  bool Get(const std::string& url, const std::string& version, uint64_t offset, uint64_t length, uint8_t* dst);
  /// Keeps a copy of the block (best effort: errors are counted, never returned).
  void Put(const std::string& url, const std::string& version, uint64_t offset, uint64_t length,
           const uint8_t* src);
  struct Block {
    const std::string* url;
    const std::string* version;
    uint64_t offset;
    uint64_t length;
    const uint8_t* src;
  };
  /// An object's tail: the version and size a read of its end (ReadKind::kSuffix) saw, with
  /// the bytes it returned. Kept under the object's URL alone, so that a later call or
  /// process learns the version it last saw without a request (a sharded store's index).
  struct Tail {
    std::string version;
    uint64_t size = 0;
    std::string bytes;  ///< the object's last bytes.size() bytes
  };
  struct TailEntry {
    const std::string* url;
    const Tail* tail;
  };
  /// Put for many blocks (and tails), made durable together (one syncfs) before any becomes
  /// visible.
  void PutBatch(std::span<const Block> blocks, std::span<const TailEntry> tails = {});
  /// The tail kept for `url`, if any (checked like a block: header, size, checksum).
  std::optional<Tail> GetTail(const std::string& url);
  /// Removes the tail kept for `url` (its version turned out stale).
  void EraseTail(const std::string& url);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t puts = 0;
    uint64_t evictions = 0;
    uint64_t errors = 0;   ///< writes or scans that failed (the cache then just misses)
    uint64_t corrupt = 0;  ///< blocks whose bytes failed their checksum (removed)
  };
  Stats stats() const;
  /// The last error counted in stats().errors, for messages ("" if none).
  std::string last_error() const;
  const std::string& dir() const { return dir_; }
  uint64_t capacity() const { return capacity_; }

  /// Scans the directory and evicts down to `target` bytes; returns the bytes left. Public
  /// for tests; Put calls it when the running total passes the capacity.
  uint64_t Evict(uint64_t target);

 private:
  std::string BlockPath(const std::string& key) const;
  void NoteError(std::string what);
  int UsageFd();
  // Adds `added` to the directory's shared byte counter (or sets it to `added`) and returns
  // the new total; UINT64_MAX when unknown (no counter yet, or it cannot be used).
  uint64_t AddUsage(uint64_t added, bool set = false);

  const std::string dir_;
  const uint64_t capacity_;
  mutable std::mutex mu_;  // last_error_, usage_fd_
  std::mutex scan_mu_;     // one eviction scan at a time
  // The usage counter's read-modify-write: flock excludes other processes only (the lock
  // belongs to the open file, which this process's threads share).
  std::mutex usage_mu_;
  std::string last_error_;
  int usage_fd_ = -1;
  std::atomic<uint64_t> hits_{0}, misses_{0}, puts_{0}, evictions_{0}, errors_{0}, corrupt_{0}, counter_{0};
  std::atomic<bool> made_[256] = {};  // subdirectory <2 hex> created (by this process)
};

/// The process's DiskCache for `dir` (created on first use; the capacity is the largest any
/// caller gave). A forked child gets its own objects.
/// Fails (kIoError naming the directory) when the directory cannot be created or written.
Result<std::shared_ptr<DiskCache>> SharedDiskCache(const std::string& dir, uint64_t capacity_bytes);

}  // namespace lsio
