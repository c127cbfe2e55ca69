// lsio/options.h: tunables of an opened array. Defaults are chosen for local files; the
// Python layer also reads LSIO_THREADS and LSIO_IO.
#pragma once

#include <cstdint>
#include <string>

namespace lsio {

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
  /// O_DIRECT reads (page cache bypassed) for cold scans of data larger than RAM: reads are
  /// widened to 4 KiB-aligned ranges into aligned buffers and chunks decoded from inside
  /// them. Files on file systems without O_DIRECT are read buffered.
  bool direct = false;
  /// Decoded-chunk cache (local stores): > 0 keeps decoded chunks in memory, shared by every
  /// Array of the process, LRU by bytes, at most the largest cache_bytes any Array asked
  /// for. Keyed by each file's version (checked on every call): a rewritten file is never
  /// served from it. 0 = no cache. Remote arrays ignore it.
  uint64_t cache_bytes = 0;
};

}  // namespace lsio
