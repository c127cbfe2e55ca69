// The page cache, as direct="auto" sees it: whether a range of a file is cached now, how much
// page cache this process may fill, and the rule that picks O_DIRECT for an array.
//
// Usage:
//   1. PageCacheRoom room = CurrentPageCacheRoom();          // at open: /proc and cgroup files
//   2. DirectDecision d = ChooseDirect(stored_bytes, room);   // d.direct_misses, d.reason
//   3. Per read of an array that chose O_DIRECT for misses:
//      switch (CachedState(buffered_fd, offset, length)) { kAll: serve it from the cache; ... }
//
// Why a check and not a RWF_NOWAIT attempt: a preadv2(RWF_NOWAIT) that misses still starts
// readahead of the range into the page cache (seen with fincore on this kernel), so a
// following O_DIRECT read would read it from disk a second time. cachestat(2) (Linux 6.5)
// reads the page cache's counters for a range without starting any I/O. Where it is missing
// (ENOSYS: older kernels; EPERM: seccomp), CachedState says kUnknown and callers read with
// O_DIRECT: hits are then lost, never read twice. Kernels since 6.14 also refuse it (EPERM)
// for a file the caller neither owns nor may write (a shared read-only dataset): FdCache then
// keeps no buffered twin for that file, which is read with O_DIRECT throughout.
//
// The rule (docs/guide/tuning.md, README "Tunables"): an array whose stored bytes exceed
// the page cache room cannot stay cached, so buffered reads would only evict other data
// (the rest of the machine's, and this array's own pages before they are read again) and
// spend a copy per read. Its misses are read with O_DIRECT; whatever is cached is still
// read from the cache. Data that fits is read buffered, so later epochs hit the cache.
//
// The room is the smallest of: MemAvailable (/proc/meminfo: free memory plus reclaimable
// cache), and for each memory cgroup limit above this process (v2 memory.max, v1
// memory.limit_in_bytes, and v2 memory.high when lower, from its own cgroup up to the root)
// the limit minus the group's anonymous and shmem memory (the page cache counts against the
// limit; those cannot be given to it without swap). LSIO_PAGE_CACHE_BYTES replaces the measurement (a size, e.g. "8G"): for
// machines shared with jobs that need their own cache, and for tests.
//
// Thread-safety: every function may be called from any thread; CurrentPageCacheRoom reads
// files each call (call it at open, not per read).
#pragma once

#include <cstdint>
#include <string>

#include "lsio/options.h"  // DirectDecision

namespace lsio {

struct PageCacheRoom {
  uint64_t bytes = 0;
  std::string source;  ///< what bounded it: "MemAvailable", "cgroup <dir>", "LSIO_PAGE_CACHE_BYTES"
};

/// Reads the room now. `proc_root` / `cgroup_root` replace "/proc" and "/sys/fs/cgroup"
/// (tests hand in fake trees).
PageCacheRoom CurrentPageCacheRoom(const std::string& proc_root = "/proc",
                                   const std::string& cgroup_root = "/sys/fs/cgroup");

/// The rule above: direct_misses when stored_bytes > room.bytes (mode "auto: ...").
DirectDecision ChooseDirect(uint64_t stored_bytes, const PageCacheRoom& room);

enum class Cached { kAll, kSome, kNone, kUnknown };

/// How much of [offset, offset + length) of the file open at `fd` is in the page cache now
/// (the part past the end of the file does not count). kUnknown where cachestat(2) is
/// missing or refused; probed once per process.
Cached CachedState(int fd, uint64_t offset, uint64_t length, uint64_t file_size);

/// Whether cachestat(2) works here (false on kernels before 6.5 or under seccomp).
bool CachestatAvailable();

/// Whether cachestat(2) answers for the file open at `fd` (it may refuse a file the caller
/// neither owns nor may write, on kernels since 6.14).
bool CachestatWorksOn(int fd);

}  // namespace lsio
