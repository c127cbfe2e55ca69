// LocalStore: the Store over a local POSIX directory, reading through io/.
//
// Usage:
//   1. LocalStore store(array_dir);                       // a trailing '/' is optional
//   2. LSIO_ASSIGN_OR_RETURN(auto text, store.ReadAll("zarr.json", 64 << 20));
//   3. store.Location("zarr.json") == array_dir + "/zarr.json" (the path errors carry).
//
// Invariants: a key maps to root + key; only regular files are objects: a directory under a
// key fails with kIoError (EISDIR), any other non-regular file (FIFO, socket, device) with
// kIoError (EINVAL), both "not a regular file", and a FIFO is refused without blocking
// (opened O_NONBLOCK). ENOENT is "missing"; every other failure is kIoError with the errno
// and the path. The version is "<dev>:<ino>:<mtime ns>" (rewritten in place or replaced by
// rename: a new version). ReadAll opens, reads and closes its own descriptor (small objects
// read once: caching them would only take descriptors from the chunk files); when the
// process is out of descriptors it gives the process file cache's back and retries once.
//
// Thread-safety: immutable after construction; every method may run on any thread. Holds no
// descriptors between calls, so fork() needs nothing from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/store.h"

namespace lsio {

class LocalStore final : public Store {
 public:
  explicit LocalStore(std::string root);

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override;

  /// The root directory, ending in '/'.
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

}  // namespace lsio
