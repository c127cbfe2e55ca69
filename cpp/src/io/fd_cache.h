// FdCache: path -> open read-only descriptor, its size and the identity of the file.
//
// One cache serves the whole process (ProcessFdCache()), so every Array shares one
// descriptor budget, derived from the *current* RLIMIT_NOFILE each time a file is opened.
//
// Usage:
//   1. FdCache& cache = ProcessFdCache();
//   2. LSIO_ASSIGN_OR_RETURN(FileRef f, cache.Open(path, DirectMode::kOff));
//      f == nullptr means the file does not exist (a missing chunk or shard: reads as fill).
//   3. Use f->fd with positional reads only (pread / io_uring), never lseek. f->id says
//      which file (device, inode, size, mtime, ctime) the descriptor reads; anything derived
//      from the file's bytes (a decoded shard index) must be keyed by it.
//   4. Array::Close drops an array's entries with DropPrefix(root).
//
// Files changing under the cache: Open() of a cached path stats the path and compares its
// identity with the cached one. A file replaced (rename over it: new inode), rewritten in
// place (same inode, new size or mtime/ctime) or deleted is therefore seen by the next
// Open(): the stale descriptor is dropped and the path opened afresh (or reported missing).
// An in-place rewrite that keeps the size and lands within the file system's timestamp
// granularity (a few ms on ext4) cannot be told apart; neither can a change made while a
// read is in flight.
//
// Buffered descriptors are marked POSIX_FADV_RANDOM: the kernel reads what is asked and no
// readahead (the planner's coalescing decides what is read together); on network and FUSE
// file systems they keep the client's readahead.
//
// Files are opened O_RDONLY|O_CLOEXEC. Anything that is not a regular file (a directory,
// a FIFO, a device) is refused with kIoError without ever blocking: the open itself uses
// O_NONBLOCK, which is cleared again for regular files (io_uring would otherwise return
// EAGAIN for uncached data).
//
// Budget: the cache keeps at most capacity() descriptors (a quarter of RLIMIT_NOFILE, read
// again on every open, 16..4096), least recently used first out. A FileRef keeps its
// descriptor open even if the cache evicts the entry meanwhile, so eviction never races
// with a read in flight. When open() still fails with EMFILE/ENFILE, every cached entry is
// evicted and the open retried, so a read that could be served by evicting never fails.
//
// With DirectMode::kOn, descriptors are switched to O_DIRECT (page cache bypassed) where the
// file system supports it; OpenFile::direct says whether it took, so callers must then issue
// block-aligned reads into aligned buffers (kDirectAlignment). Where it does not take
// (tmpfs on older kernels, some FUSE file systems) the file is read buffered. kMisses
// (direct="auto" on data larger than the page cache) does the same and also opens a second,
// buffered descriptor of the same file (OpenFile::cache_fd) for the ranges the page cache
// holds (io/page_cache.h); such an entry holds two descriptors. Entries of one path in
// different modes are separate.
//
// Thread-safety: all methods may be called concurrently. Fork: the process cache lives in a
// ProcessLocal slot; a child gets a fresh cache and closes the inherited descriptors.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "io/file_map.h"
#include "lsio/status.h"

struct stat;

namespace lsio {

/// Offsets, lengths and buffers of O_DIRECT reads are multiples of this (covers every
/// logical block size up to 4 KiB).
constexpr uint64_t kDirectAlignment = 4096;

/// Which version of which file: equal identities mean the same bytes, up to the limits
/// described above.
struct FileIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// The identity of the file `st` describes (as FdCache records it after open).
FileIdentity IdentityOf(const struct stat& st);

/// How FdCache opens a file: buffered, O_DIRECT, or O_DIRECT plus a buffered descriptor
/// for cached ranges (see above).
enum class DirectMode : uint8_t { kOff, kOn, kMisses };

struct OpenFile {
  int fd = -1;
  uint64_t size = 0;
  bool direct = false;  ///< the descriptor is O_DIRECT
  /// kMisses (and O_DIRECT took): a buffered descriptor of the same file, else -1.
  int cache_fd = -1;
  FileIdentity id;      ///< taken with fstat right after open
  bool network = false; ///< on a network or FUSE file system (fstatfs)
  ~OpenFile();

  /// The whole file mapped for reads in place (io/file_map.h), made on first use; null for
  /// O_DIRECT descriptors, network and FUSE file systems, and where FileMap::Create refuses.
  const FileMap* Map() const;

 private:
  mutable std::once_flag map_once_;
  mutable std::unique_ptr<FileMap> map_;
};

using FileRef = std::shared_ptr<const OpenFile>;

class FdCache {
 public:
  /// capacity 0: follow the current RLIMIT_NOFILE (DefaultFdCacheCapacity()).
  explicit FdCache(size_t capacity = 0);

  /// Opens (or finds and revalidates) `path`. Returns nullptr when it does not exist
  /// (ENOENT). Fails with kIoError (errno, path) for other failures and non-regular files.
  Result<FileRef> Open(const std::string& path, DirectMode mode = DirectMode::kOff);
  Result<FileRef> Open(const std::string& path, bool direct) {
    return Open(path, direct ? DirectMode::kOn : DirectMode::kOff);
  }

  /// Drops the entries whose path starts with `prefix` (descriptors close when the last
  /// FileRef goes).
  void DropPrefix(const std::string& prefix);

  /// Drops every entry.
  void Clear();

  size_t size();
  /// The current budget: the fixed capacity, or one derived from RLIMIT_NOFILE now.
  size_t capacity() const;

  /// In a forked child: close the inherited descriptors without taking the lock.
  void OnForkAbandon();

 private:
  using Lru = std::list<std::pair<std::string, FileRef>>;
  void EvictLocked(size_t keep);
  void EraseLocked(const std::string& key, const FileRef& expected);

  const size_t fixed_capacity_;
  std::mutex mu_;
  Lru lru_;  // front = most recently used
  std::unordered_map<std::string, Lru::iterator> map_;
};

/// The process-wide cache every Array reads through (a ProcessLocal slot).
FdCache& ProcessFdCache();

/// A descriptor opened for one use and closed by its owner, outside any cache.
struct OnceFile {
  int fd = -1;        ///< -1: the file does not exist (ENOENT)
  uint64_t size = 0;  ///< from fstat right after open
};

/// Opens `path` read-only for reads made now (objects read once: unsharded chunk files,
/// metadata), without the cache's stat, lock and eviction. Same refusals as FdCache::Open
/// (non-regular files, never blocking on a FIFO), and O_NONBLOCK is cleared again unless
/// `keep_nonblock` (plain pread ignores it on regular files; io_uring does not). Out of
/// descriptors (EMFILE/ENFILE), it gives the process cache's back and retries once.
/// The caller closes the descriptor (also after a later failure of its own).
/// Fails with kIoError (errno, path).
Result<OnceFile> OpenOnce(const std::string& path, bool keep_nonblock);

/// A quarter of the current RLIMIT_NOFILE, clamped to 16..4096 (the rest stays for the
/// application and for descriptors held by reads in flight).
size_t DefaultFdCacheCapacity();

}  // namespace lsio
