// LocalStore: the Store over a local POSIX directory, reading through io/.
//
// Usage:
//   1. LocalStore store(array_dir);                       // a trailing '/' is optional
//      LocalStore store(array_dir, {.mode = IoMode::kPread, .direct = DirectMode::kOn});
//   2. LSIO_ASSIGN_OR_RETURN(auto text, store.ReadAll("zarr.json", 64 << 20));
//   3. store.Location("zarr.json") == array_dir + "/zarr.json" (the path errors carry).
//   4. Range reads (store.h): Open(key) takes a descriptor from the process-wide FdCache
//      (one descriptor budget for every Array; the file is revalidated by stat on each
//      Open), and Read hands the ranges to the I/O backend (pread or io_uring, chosen once
//      per process and store on first read: io/select_backend.h).
//   5. OpenForOneRead(key) (files read once, e.g. unsharded chunks): no syscall; the worker
//      thread that reads the object opens, fstats, reads and closes it (io/OpenOnce),
//      outside the FdCache, whose stat-per-use, lock and eviction churn cost more than
//      they save for files read once per call. With `direct` (kOn or kMisses), it is Open(key).
//   6. direct = DirectMode::kMisses (direct="auto" on data larger than the page cache, see
//      io/page_cache.h): descriptors are O_DIRECT with a buffered twin; each range the page
//      cache holds is read from the twin, every other one with O_DIRECT. set_direct() changes
//      the mode before the first read (Array::Open decides once it knows the array's size).
//
// Invariants: a key maps to root + key; only regular files are objects: a directory under a
// key fails with kIoError (EISDIR), any other non-regular file (FIFO, socket, device) with
// kIoError (EINVAL), both "not a regular file", and a FIFO is refused without blocking
// (opened O_NONBLOCK). ENOENT is "missing"; every other failure is kIoError with the errno
// and the path. The version is "<dev>:<ino>:<mtime ns>" (rewritten in place or replaced by
// rename: a new version). ReadAll opens, reads and closes its own descriptor (small objects
// read once: caching them would only take descriptors from the chunk files); when the
// process is out of descriptors it gives the process descriptor cache's back and retries once.
//
// Versions: "<dev>:<ino>:<size>:<mtime ns>:<ctime ns>" (FileVersion below), the same for
// Stat and Open, so anything derived from a file's bytes can be keyed by it.
//
// Thread-safety: every method may run on any thread. Descriptors live in the process's
// FdCache and the backend in a ProcessLocal slot, so a forked child builds its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "io/select_backend.h"
#include "store/store.h"
#include "util/process_local.h"

namespace lsio {

/// O_DIRECT wants block-aligned offsets, lengths and buffers: widens a read of a `direct`
/// object to kDirectAlignment boundaries. The bytes wanted then start at
/// dst + (old offset - r->offset), and end-of-file after them is fine (min_length: the
/// widened end may lie past the end of the file).
inline void WidenForDirect(RangeRead* r) {
  const uint64_t end = r->offset + r->length;
  const uint64_t a = r->offset & ~(kDirectAlignment - 1);
  const uint64_t e = (end + kDirectAlignment - 1) & ~(kDirectAlignment - 1);
  r->offset = a;
  r->length = e - a;
  r->min_length = end - a;
}

struct LocalStoreOptions {
  IoMode mode = IoMode::kAuto;
  unsigned queue_depth = 64;
  DirectMode direct = DirectMode::kOff;  ///< O_DIRECT where the file system allows (step 6)
  FdCache* files = nullptr;       ///< nullptr: ProcessFdCache()
  IoBackend* backend = nullptr;   ///< nullptr: one built from mode/queue_depth per process
};

/// The version string of a file identity (see the header comment).
std::string FileVersion(const FileIdentity& id);

class LocalStore final : public Store {
 public:
  explicit LocalStore(std::string root, LocalStoreOptions options = {});
  ~LocalStore() override;

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override;
  Result<ObjectRef> Open(std::string_view key) override;
  Result<ObjectRef> OpenForOneRead(std::string_view key) override;
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  StoreTraits traits() override;
  /// io="auto" only (io="uring" and "pread" always read, and so does a store given its own
  /// backend: tests interposing faults), files opened by Open, not O_DIRECT ones.
  MappedRange Mapped(StoreObject& obj, uint64_t offset, uint64_t length) override;
  void Close() override;
  Result<std::string> TransportName() override;

  /// Before the first read only (the backend and descriptors follow the mode in effect).
  void set_direct(DirectMode mode) { options_.direct = mode; }
  DirectMode direct() const { return options_.direct; }

  /// The root directory, ending in '/'.
  const std::string& root() const { return root_; }

 private:
  struct BackendSlot {
    Status status;
    std::unique_ptr<IoBackend> backend;
  };
  Result<IoBackend*> Backend();
  FdCache& files() const { return options_.files != nullptr ? *options_.files : ProcessFdCache(); }

  std::string root_;
  LocalStoreOptions options_;
  ProcessLocal<BackendSlot> backend_;
};

}  // namespace lsio
