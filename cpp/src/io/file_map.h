// FileMap: a local file mapped whole into memory, so that ranges the page cache already holds
// are decoded in place instead of being copied out by a read (hot W11 940-1,015 -> 1,041-1,100
// crops/s; the kernel's copy was 11% of the call). And MapAccessGuard, which turns a file
// shrinking under the mapping (or its storage failing) into a read of the range instead of a
// crash.
//
// Usage (LocalStore::Mapped, read/call.cc ServeMapped):
//   1. const FileMap* m = open_file.Map();           // lazily, once per OpenFile; may be null
//   2. if (m->Resident(offset, length)) {             // mincore(2): no read would be needed
//        { MapAccessGuard g(*m);                       // this thread's accesses are guarded
//          ... decode from m->data() + offset ... }
//        if (!m->Unchanged()) { m->Retire(); read the range instead; the decode is void }
//      }
//
// Why only resident ranges: touching a range that is not cached blocks the thread on a page
// fault that reads one page run at a time, where the I/O backend keeps 64 reads in flight
// (the numpy memmap baseline of W14 cold: 0.08x). mincore(2) answers from the page tables and
// the page cache without starting I/O. It tells the truth only for files the process owns or
// may write (Linux 5.0+ reports every page of other files' mappings as resident, to close a
// side channel), so Create refuses other files and they keep being read with copies.
//
// Why a guard, and a check after each access: a file that shrinks under its mapping makes
// an access to a page past its new end raise SIGBUS, which would kill the process, and bytes
// past the new end on the page that holds it read as zeros without any signal (pread would
// have met the end of the file). The guard's handler (installed once, chained to whatever
// handler was there, e.g. Python's faulthandler) recognises a fault in the mapping of the
// calling thread's active guard, maps a page of zeros over the faulting page, marks the
// FileMap faulted and returns, so the access completes (if that mmap fails, it chains on as
// for any other SIGBUS rather than repeat the fault forever). A SIGBUS sent (not raised by
// an access) to a thread inside a guard is absorbed: Python's faulthandler, enabled after
// this handler, prints its "Bus error" report and re-raises that way after putting this
// handler back; the access then repeats and faults here. After the access the reader asks
// Unchanged(): not faulted, and fstat(2) still gives the size, mtime and ctime the file was
// opened with. If not, whatever it decoded is void and it reads the range instead, as it
// would have without the map (a file cut short then fails that read: end of file; one only
// appended to reads correctly), and Retire()s the map for as long as its file stays open; the next
// call's FdCache revalidation opens the file afresh. The check shares FileIdentity's limit
// (fd_cache.h): a file cut and grown back to its size in place (same inode) within the file
// system's timestamp granularity (a few ms) is not seen, and a call reading it meanwhile can
// decode zeros from the page that held the passing end, where a read would have met the end
// of the file (tests/python/test_mapped_reads.py found it with a writer cutting and
// refilling a shard in a loop). Writers that replace files (tmp + rename, as zarr-python's)
// or only append are safe; one that rewrites a file in place while it is read gives every
// reader torn bytes anyway.
//
// Network and FUSE file systems are never mapped (OpenFile::Map in io/fd_cache.cc): their clients
// revalidate cached pages on read(2), not on a page fault, so a mapping could show bytes a
// read would have refreshed.
//
// Why one map per open file, kept across calls: page faults on first touch are what a map
// costs instead of the copy, and a process pays them once per page. Mapping per call (and
// unmapping at its end) lost the gain: hot W11 947-968 crops/s against 1,079-1,116 kept
// (one build, A/B by process; ~1,000 reading). The price: pages a map touched stay in the
// process's page tables while the file is open, where posix_fadvise(DONTNEED) and
// drop_caches cannot drop them (memory pressure still can: the kernel unmaps them), and they
// count in RSS (RssFile). lsio.close_files() (CloseLocalFiles) closes the cached files and
// their maps: the benchmarks' cold rounds call it before dropping the page cache.
//
// Thread-safety: a FileMap is immutable but for its faulted and retired flags; guards are per
// thread. Fork: a child inherits the maps with the parent's abandoned FdCache entries and
// never looks them up (its FdCache starts empty); they stay mapped, so nothing the child
// still holds dangles. The handler is inherited with the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace lsio {

class FileMap {
 public:
  /// Maps the `size` bytes of the regular file open at `fd` read-only, or returns nullptr
  /// where it cannot or must not (size 0, mmap failed, or residency is hidden: a file the
  /// process neither owns nor may write). `mtime_ns` and `ctime_ns` are the file's times
  /// when it was opened (Unchanged compares against them and `size`); `fd` must stay open
  /// while the map lives. Installs the SIGBUS handler on first use.
  static std::unique_ptr<FileMap> Create(int fd, uint64_t size, int64_t mtime_ns, int64_t ctime_ns);
  ~FileMap();
  FileMap(const FileMap&) = delete;
  FileMap& operator=(const FileMap&) = delete;

  const uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }

  /// Whether every page of [offset, offset + length) is in memory now (so reading it starts
  /// no I/O). False for ranges outside the file and when mincore fails.
  bool Resident(uint64_t offset, uint64_t length) const;

  /// Whether the SIGBUS handler is installed (installing it on first use) and still in place:
  /// something installed later (Python's faulthandler.enable(), another library) or a
  /// faulthandler.disable() that put back what it found may have displaced it, and then no
  /// access is guarded. Readers map nothing while it is not (read/call.cc ServeMapped asks
  /// at each worker's first mapped unit of a call: a sigaction(2) query).
  static bool GuardReady();

  /// A guarded access to this map faulted: bytes read from it since may be zeros.
  bool faulted() const { return faulted_.load(std::memory_order_acquire); }

  /// Not faulted, and the file still has the size and times it was opened with (fstat):
  /// what was read from the map since it was created is the file's.
  bool Unchanged() const;

  /// No range is Resident from now on (the file changed: read it instead).
  void Retire() const { retired_.store(true, std::memory_order_release); }

 private:
  FileMap(const uint8_t* base, int fd, uint64_t size, int64_t mtime_ns, int64_t ctime_ns)
      : base_(base), fd_(fd), size_(size), mtime_ns_(mtime_ns), ctime_ns_(ctime_ns) {}
  friend class MapAccessGuard;
  friend bool OnMapFault(FileMap* map, void* addr);

  const uint8_t* base_;
  int fd_;
  uint64_t size_;
  int64_t mtime_ns_, ctime_ns_;
  std::atomic<bool> faulted_{false};
  mutable std::atomic<bool> retired_{false};
};

/// While alive, a SIGBUS of this thread's access to `map` is absorbed as described above.
/// Guards do not nest (a second one on the same thread replaces the first until it ends).
class MapAccessGuard {
 public:
  explicit MapAccessGuard(const FileMap& map);
  ~MapAccessGuard();
  MapAccessGuard(const MapAccessGuard&) = delete;
  MapAccessGuard& operator=(const MapAccessGuard&) = delete;

 private:
  const FileMap* previous_;
};

}  // namespace lsio
