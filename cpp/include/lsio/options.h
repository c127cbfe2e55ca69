// lsio/options.h: tunables of an opened array. Defaults are chosen for local files; the
// Python layer also reads LSIO_THREADS and LSIO_IO.
#pragma once

#include <cstdint>
#include <string>

namespace lsio {

enum class DirectIo { kOff, kOn, kAuto };

/// What direct=auto decided for an array (Array::direct_decision()).
struct DirectDecision {
  std::string mode;           ///< "off", "on" (given), "auto: buffered" or "auto: direct misses"
  bool direct_misses = false; ///< misses are read with O_DIRECT, cached ranges from the cache
  bool direct_all = false;    ///< every read is O_DIRECT (direct=True)
  uint64_t stored_bytes = 0;  ///< estimated stored bytes of the array (auto only)
  uint64_t room_bytes = 0;    ///< page cache room measured at open (auto only)
  std::string room_source;    ///< what bounded the room: MemAvailable, a cgroup, the env
  std::string reason;         ///< one sentence
};

struct OpenOptions {
  /// Worker threads per read call, the calling thread included. 0 = the CPUs available to
  /// the process. 1 = the calling thread alone (no background threads are created).
  int threads = 0;
  /// "auto" (io_uring where the kernel allows it, page-cache hits served inline; else
  /// pread), "uring" (force; fails where unavailable) or "pread".
  std::string io = "auto";
  /// Reads in flight per worker thread (io_uring).
  unsigned queue_depth = 64;
  /// Coalescing: merge byte ranges of one file when the gap is at most max_gap bytes and the
  /// merged read at most max_request bytes.
  /// Defaults: the best pair of a cold sweep on a virtio SSD (python/lsio/_options.py).
  uint64_t max_gap = 16 << 10;
  uint64_t max_request = 1 << 20;
  /// Remote stores: let the store choose max_gap/max_request from its measurements (the
  /// bytes one first-byte latency is worth; store/object_store.h), with the two values above
  /// as upper bounds. Python sets it unless max_gap or max_request was given.
  bool adaptive_coalescing = false;
  /// Bytes of decoded shard indexes kept per array.
  uint64_t index_cache_bytes = 64 << 20;
  /// Bytes one read call may allocate for its plan and buffers; 0 = no limit. Calls that
  /// cannot fit fail with kResourceExhausted before reading.
  uint64_t memory_limit = 0;
  /// O_DIRECT reads (page cache bypassed): reads are widened to 4 KiB-aligned ranges into
  /// aligned buffers and chunks decoded from inside them; files on file systems without
  /// O_DIRECT are read buffered. kAuto (the default) decides per local array at open: an
  /// array whose stored bytes exceed the page cache this process may fill reads its misses
  /// with O_DIRECT and whatever the page cache holds from the cache; one that fits reads
  /// buffered (src/io/page_cache.h has the rule; Array::direct_decision() says what was
  /// chosen and why). Arrays read through references (kerchunk, HDF5, Icechunk) and remote
  /// arrays read buffered under kAuto.
  DirectIo direct = DirectIo::kAuto;
  /// Decoded-chunk cache (local stores): > 0 keeps decoded chunks in memory, shared by every
  /// Array of the process, LRU by bytes, at most the largest cache_bytes any Array asked
  /// for. Keyed by each file's version (checked on every call): a rewritten file is never
  /// served from it. 0 = no cache. Remote arrays ignore it.
  uint64_t cache_bytes = 0;
};

}  // namespace lsio
