// lsio/ranges.h: the public C++ API for batched byte-range reads, without Zarr. Reads many
// (source, offset, length) ranges of local files or remote objects into caller buffers in
// one planned call: ranges are sorted, identical ones read once, neighbours coalesced, long
// ones split across threads; the same I/O backends (io_uring, pread, HTTP) as Array reads.
// lsio.read_ranges and lsio.safetensors are built on it.
//
// Usage:
//   1. std::vector<lsio::RangeSource> sources = {lsio::RangeSource::File("/ckpt/model.safetensors")};
//      // remote: lsio::RangeSource::Object(*lsio::RemoteStore::Create(o), "model.safetensors")
//   2. std::vector<uint8_t> header(64), weights(1 << 20);
//      std::vector<lsio::ByteRange> ranges = {{0, 8, 64, header.data()}, {0, 4096, weights.size(), weights.data()}};
//   3. lsio::Status st = lsio::ReadRanges(sources, ranges, {});
//      if (!st.ok()) ... st.ToString() names the file and the byte range
//
// Guarantees: a missing source or a range past the end of its source fails before any byte
// of any buffer is written (remote objects are sized by their first request, not a HEAD).
// After that, an I/O error leaves buffers partly written, only inside the ranges. Buffers of
// different ranges must not overlap. A long-lived process reuses descriptors (the process's
// descriptor cache, revalidated by stat on every call), rings and HTTP connections.
// Thread-safety: ReadRanges may be called from many threads at once. Fork-safe like Array.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "lsio/status.h"

namespace lsio {

class RemoteStore;

/// Where ranges are read from: a local file, or an object below a remote store's root.
struct RangeSource {
  std::string path;                     ///< local file (relative paths: to the working directory)
  std::shared_ptr<RemoteStore> remote;  ///< set: the object `key` of this store
  std::string key;

  static RangeSource File(std::string path) { return RangeSource{std::move(path), nullptr, {}}; }
  static RangeSource Object(std::shared_ptr<RemoteStore> store, std::string key) {
    return RangeSource{{}, std::move(store), std::move(key)};
  }
};

/// One range: `length` bytes of sources[source] from `offset`, into dst.
struct ByteRange {
  uint32_t source = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  void* dst = nullptr;  ///< room for `length` bytes
};

struct RangeOptions {
  /// Worker threads, the calling thread included (local files); 0 = the CPUs available.
  int threads = 0;
  /// Local files: "auto", "uring" or "pread" (as OpenOptions::io).
  std::string io = "auto";
  unsigned queue_depth = 64;  ///< io_uring reads in flight per worker
  /// The store kind's default coalescing gap (local 16 KiB, remote 1 MiB).
  static constexpr uint64_t kStoreDefault = UINT64_MAX;
  /// Coalescing: neighbours at most max_gap bytes apart merge (0: only touching ones;
  /// kStoreDefault: by store kind); requests are at most max_request bytes (0: by store
  /// kind, local 8 MiB, remote 16 MiB). Longer ranges are split into max_request requests;
  /// a split into more than 2^22 extra requests is refused (kInvalidArgument).
  uint64_t max_gap = kStoreDefault;
  uint64_t max_request = 0;
};

/// What a call read: the plan's requests (after coalescing and splitting), and the bytes they
/// cover, gaps between merged neighbours included. Counted as each store's plan is made,
/// before its objects are opened: a call refused for its arguments adds nothing, one that
/// fails later (a missing file, a range past the end, an I/O error) adds what it planned.
struct RangeStats {
  uint64_t ranges = 0;      ///< ranges given (zero-length and identical ones included)
  uint64_t requests = 0;    ///< reads issued to the stores
  uint64_t bytes_read = 0;  ///< bytes those reads cover (>= the distinct bytes asked for)
};

/// Reads every range. Fails with kInvalidArgument (bad options, a source index out of range,
/// a range whose end overflows, overlapping buffers are NOT detected here), kIoError
/// (missing source: ENOENT; a range past the end: EINVAL; I/O and HTTP errors; a remote
/// object replaced during the call: ESTALE), kDataLoss (a file that shrank during the call),
/// kUnavailable (io="uring" where the kernel refuses it), kCancelled (`interrupted` returned
/// true; polled on the calling thread about every 10 ms), kResourceExhausted.
/// `stats`, when given, receives the call's counts (added to its fields).
/// `on_range`, when given, is called once per range as on_range(index in `ranges`, waited)
/// as soon as all of its bytes are in its buffer, on whichever thread finished them
/// (several at once: it must be thread-safe), so a caller can use each range while others
/// are still being read (lsio/records.h GatherRecords decodes payloads as they land).
/// `waited`: its bytes came over the network, or from a local device after the page cache was
/// asked and missed (io="auto" on io_uring, RWF_NOWAIT) or bypassed (O_DIRECT); false for
/// page-cache hits, wherever a miss cannot be told from a hit (io="pread", io="uring", file
/// systems without RWF_NOWAIT), and for identical and empty ranges (reported at the end, on
/// the calling thread). A range read in pieces (longer than max_request) reports its last
/// piece's. A failure it returns stops the call and is returned unchanged. It must not throw
/// (an exception becomes the call's kInternal failure) and must not read through lsio: it
/// runs inside the reading thread's batch, whose per-thread state a nested read would reuse.
Status ReadRanges(const std::vector<RangeSource>& sources, std::span<const ByteRange> ranges,
                  const RangeOptions& options = {}, const std::function<bool()>& interrupted = {},
                  RangeStats* stats = nullptr, const std::function<Status(size_t, bool)>& on_range = {});

}  // namespace lsio
