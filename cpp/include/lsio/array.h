// lsio/array.h: the public C++ API. An Array is an opened Zarr v3 array that reads
// selections and batches of same-shape crops into caller memory.
//
// Usage:
//   1. auto arr = lsio::Array::Open("/data/era5.zarr/t2m", {});   // reads zarr.json only
//   2. const lsio::ArrayInfo& info = (*arr)->info();              // shape, dtype, ...
//   3. (*arr)->Read(selection, view)      // one box (steps allowed) into a strided view
//      (*arr)->ReadBatch(selections, views)  // many boxes in one plan (shared chunks once)
// Open creates no threads, rings or cached descriptors; they appear on first read, per
// process (fork-safe, see architecture.md §3).
//
// Files changing under an open Array: every read call revalidates each file it touches
// (stat of the path against the identity of the cached descriptor: device, inode, size,
// mtime, ctime), and a shard index is used only with the file version it was decoded
// from. So each call reads every file as it is when the call reaches it: a shard replaced
// (rename), rewritten in place, created or deleted between calls is seen by the next
// call. Not guaranteed: a change made *while* a call reads that file (the call may see old
// bytes, new bytes or a CorruptDataError, never bytes placed outside the selection), an
// in-place rewrite that keeps the size within the file system's timestamp granularity, and
// consistency across files (no snapshot of the whole store). zarr.json is read once, at
// Open: reopen to see a changed shape, chunking or codecs.
//
// Thread-safety: an Array may be read from many threads at once.
// Errors: every method returns a Status; see status.h for the codes. Messages name the
// file, the chunk and the byte range involved.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lsio/box.h"
#include "lsio/node.h"  // NodeFile
#include "lsio/options.h"
#include "lsio/profile.h"
#include "lsio/remote.h"  // StoreCounters
#include "lsio/stage.h"   // StagedBatch
#include "lsio/status.h"

namespace lsio {

class Store;  // cpp/src/store/store.h: where an array's objects are read from

/// Per-call element transform: the output holds `in * scale + offset` as `out_type`
/// ("float32" or "float64"), computed while each chunk is still in cache.
struct ElementTransform {
  std::string out_type = "float32";
  double scale = 1.0;
  double offset = 0.0;
};

/// Metadata of an opened array, in plain types.
struct ArrayInfo {
  std::string path;                       ///< the array directory
  std::vector<int64_t> shape;
  std::string data_type;                  ///< Zarr name, e.g. "float32"
  std::string typestr;                    ///< numpy type string, native order, e.g. "<f4"
  std::string descr;                      ///< record types: numpy descr as JSON (zarr/dtype.h); else ""
  size_t itemsize = 0;
  std::vector<int64_t> chunks;            ///< read (inner) chunk shape
  std::optional<std::vector<int64_t>> shards;  ///< shard shape when sharded
  std::vector<uint8_t> fill_value;        ///< one element, native order
  std::string attributes_json;            ///< "{...}"
  std::optional<std::vector<std::optional<std::string>>> dimension_names;
  std::string codecs;                     ///< e.g. "sharding_indexed[bytes, zstd]"
  int zarr_format = 3;                    ///< 3 (zarr.json) or 2 (.zarray)
};

class Array {
 public:
  ~Array();
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;

  /// Opens the array whose zarr.json (Zarr v3) or .zarray (Zarr v2) is in `path`.
  /// Fails with kInvalidFormat / kUnimplemented (metadata), kIoError (cannot read it),
  /// kInvalidArgument (bad options).
  /// `files`: the array's metadata files read already (lsio/node.h's ReadNodeFiles), or
  /// nullptr to read them here.
  static Result<std::unique_ptr<Array>> Open(const std::string& path, const OpenOptions& options,
                                             const std::vector<NodeFile>* files = nullptr);
  /// Opens the array at the root of `store` (a remote store: store/object_store.h).
  /// `location` names the array in info().path and messages (a URL without secrets).
  /// options.io, queue_depth and direct concern local files and are ignored here.
  static Result<std::unique_ptr<Array>> Open(std::shared_ptr<Store> store, const std::string& location,
                                             const OpenOptions& options,
                                             const std::vector<NodeFile>* files = nullptr);

  const ArrayInfo& info() const;
  const OpenOptions& options() const;
  /// How this array reads local files: options.direct, and for DirectIo::kAuto what was
  /// decided at open and why (lsio/options.h). Remote arrays: mode "off".
  const DirectDecision& direct_decision() const;

  /// Reads `sel` into `dst` (dst.shape must equal the selection's counts).
  /// Fails with kOutOfRange, kInvalidArgument, kDataLoss, kIoError, kUnavailable.
  /// `interrupted`, if set, is polled on the calling thread (about every 10 ms) and stops
  /// the call with kCancelled when it returns true (the Python bindings check for Ctrl-C).
  Status Read(const Selection& sel, const DstView& dst,
              const std::function<bool()>& interrupted = {});

  /// Reads many selections in one plan; views must not overlap. With `transform`, the
  /// views address elements of transform->out_type (kInvalidType for complex arrays or an
  /// unknown out_type). Fails with kResourceExhausted when memory runs out (never throws
  /// std::bad_alloc); the output is then partly written inside the selections only.
  Status ReadBatch(const std::vector<Selection>& sels, const std::vector<DstView>& dsts,
                   const std::function<bool()>& interrupted = {},
                   const ElementTransform* transform = nullptr);

  /// ReadBatch for boxes given as flat arrays (no allocation per box: read_crops of a
  /// million crops plans in a few bytes per crop). Every index is checked against the
  /// array with exact arithmetic before anything is allocated; with memory_limit set, an
  /// upper bound of the plan's size must fit too.
  /// Fails with kOutOfRange (outside the array, including selections whose last index
  /// overflows int64), kInvalidArgument (rank, step < 1, count < 0), kResourceExhausted
  /// (memory_limit), and as ReadBatch.
  Status ReadBoxes(const BoxBatch& batch, const std::function<bool()>& interrupted = {},
                   const ElementTransform* transform = nullptr);

  /// Stages `batch` for a device decoder (lsio/stage.h): reads every chunk the boxes touch
  /// (as ReadBoxes would) into `staging` as GPU-decodable frames (`gpu_codecs`) or chunks
  /// decoded by the CPU, and fills `out` with the frames and the scatter ops into an output
  /// laid out as batch.dst_box_stride / dst_strides say; the batch's addresses are ignored
  /// and nothing is written outside `staging`. When `staging` is too small, returns Ok with
  /// out->needed (bytes that suffice). Validates and fails like ReadBoxes (no transform).
  Status StageBoxes(const BoxBatch& batch, std::span<uint8_t> staging, bool gpu_codecs, StagedBatch* out,
                    const std::function<bool()>& interrupted = {});

  /// Outer (orthogonal) indexing: reads the cartesian product of per-dimension runs
  /// without expanding it (memory grows with the runs and the chunks touched). Runs may
  /// repeat indices or step backwards; their output ranges must lie inside sel.shape.
  /// Fails like ReadBoxes, and with kInvalidArgument for a zero step or an output range
  /// outside the output view.
  Status ReadOuter(const OuterSelection& sel, const std::function<bool()>& interrupted = {},
                   const ElementTransform* transform = nullptr);

  /// Stored bytes of every read chunk (inner chunk if sharded), in C order of the chunk grid;
  /// -1 where a chunk is not stored (it reads as the fill value). Reads shard indexes only.
  /// Fails like ReadBatch (corrupt shard index, I/O errors).
  Result<std::vector<int64_t>> StoredChunkBytes();

  /// Releases what this Array holds in the process: the cached descriptors of its files
  /// (in the process-wide descriptor cache, which other Arrays of the same files share) and
  /// its shard index cache. The Array stays usable; a later read opens files afresh.
  void Close();

  /// Counters of the array's store (remote stores count requests, retries and bytes; local
  /// ones report zeros).
  StoreCounters Stats() const;
  /// Name of the I/O backend reads use ("pread", "uring", "uring+nowait"; "http" for remote
  /// stores); decides it on first call. Fails with kUnavailable when io="uring" cannot work
  /// here.
  Result<std::string> BackendName();

 private:
  struct Impl;
  explicit Array(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// What io="auto" resolves to in this process, and why.
struct IoBackendInfo {
  std::string auto_backend;  ///< "uring" or "pread"
  bool uring_available = false;
  std::string reason;        ///< why io_uring is unavailable (empty when available)
};
IoBackendInfo GetIoBackendInfo();

/// The process's decoded-chunk cache (OpenOptions::cache_bytes): its capacity (the largest
/// cache_bytes of any Array that has read since the last ClearChunkCache), bytes held (decoded sizes plus a per-entry
/// overhead), and counters since the process started (a forked child starts afresh).
struct ChunkCacheStats {
  uint64_t capacity = 0;
  uint64_t bytes = 0;
  uint64_t entries = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t evictions = 0;
};
ChunkCacheStats GetChunkCacheStats();
/// Drops every cached chunk and resets the capacity to 0, until the next read of an Array
/// with cache_bytes sets it again (counters stay).
void ClearChunkCache();

/// Closes the local files this process keeps open between reads (the descriptor cache) and
/// with them their mappings for reads in place (io/file_map.h): pages a mapping touched stay
/// in the process's page tables, where posix_fadvise(DONTNEED) and drop_caches cannot drop
/// them. Reads in flight keep what they hold; later reads reopen the files.
void CloseLocalFiles();

/// Timing of the last read call made on the calling thread (lsio/profile.h).
CallProfile GetLastCallProfile();

/// Installs a check that says whether the user asked to interrupt (Ctrl-C) without running
/// any handler, callable with no lock held. Remote reads call it on the thread that made
/// the call while they wait on the network (every ~20 ms), and stop with kCancelled when it
/// returns true; between batches the call's `interrupted` callback runs as before. The
/// Python bindings install one at import; nullptr removes it.
void SetInterruptProbe(bool (*probe)());

}  // namespace lsio
