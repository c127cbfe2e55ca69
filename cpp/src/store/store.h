// Store: maps a key (a '/'-separated path relative to the store's root) to an object with a
// size and a version, so the layers above read local files and remote objects alike.
//
// This is the first step of the L2 store layer: whole-object reads of small objects
// (metadata). Batched range reads (incl. suffix ranges) and the descriptor budget move here
// next; until then the read layer still reads chunk data through io/ directly.
//
// Usage:
//   1. LocalStore store("/data/array");                 // or a remote store, later
//   2. LSIO_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat("zarr.json"));
//      if (!info.found) ...                              // missing is a value, not an error
//   3. LSIO_ASSIGN_OR_RETURN(std::optional<std::string> text, store.ReadAll("zarr.json", 64 << 20));
//      if (!text) ...                                    // missing
//   4. Errors carry the object's full location (Status::path()), e.g. the file's path.
//
// Invariants: "missing" (no object under the key) is never an error, and an error is never
// reported as missing; a store never blocks on a non-regular object (a FIFO without a
// writer, a device): it refuses it. ReadAll never returns more than max_bytes bytes: a larger
// object fails with kInvalidFormat, and that is the only kInvalidFormat it returns (callers
// may reword it, knowing what the object was meant to be).
//
// Thread-safety: implementations are safe to call from any number of threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "lsio/status.h"

namespace lsio {

/// What a store knows about one key.
struct ObjectInfo {
  bool found = false;   ///< false: no object under the key (size and version are then empty)
  uint64_t size = 0;    ///< bytes
  /// Changes whenever the object may have changed: mtime + inode (+ device) for local files,
  /// the ETag for HTTP/S3/GCS. Compared for equality only; its format is the store's own.
  std::string version;
};

class Store {
 public:
  virtual ~Store() = default;

  /// Size and version of `key`, or found == false when there is no object under it.
  virtual Result<ObjectInfo> Stat(std::string_view key) = 0;

  /// The whole object under `key`, or nullopt when there is none. An object larger than
  /// `max_bytes` fails with kInvalidFormat without being read.
  virtual Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) = 0;

  /// Where `key` lives, as error messages name it (a file path, a URL).
  virtual std::string Location(std::string_view key) const = 0;
};

/// Checks that `key` is a relative key: non-empty, no leading '/', no empty, "." or ".."
/// segments (a key must never escape the store's root). kInvalidArgument otherwise.
Status ValidateKey(std::string_view key);

}  // namespace lsio
