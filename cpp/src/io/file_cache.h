// FileCache: path -> open read-only descriptor and size.
//
// Each lsio::Array owns one (in a ProcessLocal slot), so an Array sees its files as they
// were when it first touched them, and a newly opened Array sees the store afresh. Stores
// are assumed not to change while an Array reads them; reopen to see rewritten files.
//
// Usage:
//   1. FileCache cache(DefaultFileCacheCapacity());
//   2. LSIO_ASSIGN_OR_RETURN(FileRef f, cache.Open(path));
//      f == nullptr means the file does not exist (a missing chunk or shard: reads as fill).
//   3. Use f->fd with positional reads only (pread / io_uring), never lseek.
//
// Files are opened O_RDONLY|O_CLOEXEC. Anything that is not a regular file (a directory,
// a FIFO, a device) is refused with kIoError without ever blocking: the open itself uses
// O_NONBLOCK, which is cleared again for regular files (io_uring would otherwise return
// EAGAIN for uncached data).
//
// The cache is LRU-capped below RLIMIT_NOFILE. A FileRef keeps its descriptor open even if
// the cache evicts the entry meanwhile, so eviction never races with a read in flight.
// Sizes are taken at open time.
//
// With `direct`, descriptors are switched to O_DIRECT (page cache bypassed) where the file
// system supports it; OpenFile::direct says whether it took, so callers must then issue
// block-aligned reads into aligned buffers (kDirectAlignment). Where it does not take
// (tmpfs on older kernels, some FUSE file systems) the file is read buffered.
//
// Thread-safety: all methods may be called concurrently. Fork: keep the cache in a
// ProcessLocal slot; a child then gets a fresh cache and closes the inherited descriptors.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lsio/status.h"

namespace lsio {

/// Offsets, lengths and buffers of O_DIRECT reads are multiples of this (covers every
/// logical block size up to 4 KiB).
constexpr uint64_t kDirectAlignment = 4096;

struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  bool direct = false;  ///< the descriptor is O_DIRECT
  ~OpenFile();
};

using FileRef = std::shared_ptr<const OpenFile>;

class FileCache {
 public:
  explicit FileCache(size_t capacity, bool direct = false);

  /// Opens (or finds) `path`. Returns nullptr when it does not exist (ENOENT).
  /// Fails with kIoError (errno, path) for other failures and non-regular files.
  Result<FileRef> Open(const std::string& path);

  /// Drops every entry (descriptors close when the last FileRef goes).
  void Clear();

  size_t size();
  size_t capacity() const { return capacity_; }

  /// In a forked child: close the inherited descriptors without taking the lock.
  void OnForkAbandon();

 private:
  using Lru = std::list<std::pair<std::string, FileRef>>;
  void EvictLocked(size_t keep);

  const size_t capacity_;
  const bool direct_;
  std::mutex mu_;
  Lru lru_;  // front = most recently used
  std::unordered_map<std::string, Lru::iterator> map_;
};

/// A capacity well below RLIMIT_NOFILE (a few arrays can be open at once).
size_t DefaultFileCacheCapacity();

}  // namespace lsio
