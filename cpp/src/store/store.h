// Store: maps a key (a '/'-separated path relative to the store's root) to an object with a
// size and a version, so the layers above read local files and remote objects alike.
//
// Two kinds of access:
//   - whole small objects (metadata): Stat, ReadAll;
//   - batched byte-range reads for the executor: Open a key (an ObjectRef for the duration
//     of a read call), then Read a span of RangeReads over opened objects, decoding each as
//     it completes. The executor never learns which store it reads from.
//
// Usage (metadata):
//   1. LocalStore store("/data/array");                 // or ObjectStore(config)
//   2. LSIO_ASSIGN_OR_RETURN(ObjectInfo info, store.Stat("zarr.json"));
//      if (!info.found) ...                              // missing is a value, not an error
//   3. LSIO_ASSIGN_OR_RETURN(std::optional<std::string> text, store.ReadAll("zarr.json", 64 << 20));
//      if (!text) ...                                    // missing
//   4. Errors carry the object's full location (Status::path()), e.g. the file's path.
//
// Usage (range reads, see read/executor.cc):
//   1. LSIO_ASSIGN_OR_RETURN(ObjectRef obj, store.Open("c/0/0"));
//      obj == nullptr: known missing (local stores know at open). A remote store opens without
//      I/O: size_known is false until the first read tells the size and version.
//   2. RangeRead r; r.object = obj.get(); r.kind = ReadKind::kSuffix; r.length = n; r.dst = buf;
//      store.Read(std::span(&r, 1), on_done, cancelled);
//      on_done(i) runs on the calling thread as soon as read i finished (status, missing).
//   3. After a read, obj->size / obj->version hold what the store learned; later reads with
//      pin_version fail (kIoError, ESTALE) if the object is no longer that version.
//   4. A version remembered from an earlier call (a cached shard index's) is given to a new
//      object with AdoptVersion; after the reads, ConfirmServed checks that whatever the
//      call used of it without asking the server is still current.
//
// Object versions have one owner: the store. It decides which versions it trusts
// (AdoptVersion), how reads are pinned to them, what it may serve from local copies (a
// disk cache serves only versions the server confirmed in the call) and when a remembered
// version must be confirmed (ConfirmServed). The executor only carries versions along.
//
// Invariants: "missing" (no object under the key) is never an error, and an error is never
// reported as missing; a store never blocks on a non-regular object (a FIFO without a
// writer, a device): it refuses it. ReadAll never returns more than max_bytes bytes: a larger
// object fails with kInvalidFormat, and that is the only kInvalidFormat it returns (callers
// may reword it, knowing what the object was meant to be).
//
// Thread-safety: implementations are safe to call from any number of threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lsio/remote.h"  // StoreCounters
#include "lsio/status.h"

namespace lsio {

class FileMap;  // io/file_map.h

/// What a store knows about one key.
struct ObjectInfo {
  bool found = false;   ///< false: no object under the key (size and version are then empty)
  uint64_t size = 0;    ///< bytes
  /// Changes whenever the object may have changed: mtime + inode (+ device) for local files,
  /// the ETag for HTTP/S3/GCS. Compared for equality only; its format is the store's own.
  std::string version;
  /// Remote objects: the Last-Modified header as the server sent it (an HTTP date), "" if none.
  std::string last_modified;
};

/// An object opened for range reads within one read call (a local file's descriptor, a
/// remote object's URL). What the store learned about it (size, version) is filled in by
/// Open (local) or by the first read (remote), on the thread that issued it; concurrent
/// readers only read these fields afterwards.
class StoreObject {
 public:
  virtual ~StoreObject() = default;
  bool size_known = false;
  uint64_t size = 0;
  std::string version;  ///< empty until known; compared for equality only
  bool direct = false;  ///< reads must be kDirectAlignment-aligned (local O_DIRECT)
  /// The object's bytes when they were fetched whole (remote unsharded chunks): readers take
  /// ranges from here instead of reading.
  std::shared_ptr<const std::string> resident;
  /// Set by OpenForOneRead when the store opens the object only in its read (see there).
  bool open_on_read = false;
  /// Its version came from what an earlier call or process kept (a disk cache's tail), not
  /// from this process: a failed call that used one runs again without (Store::RememberedServed).
  bool remembered = false;
};
using ObjectRef = std::shared_ptr<StoreObject>;

enum class ReadKind {
  kRange,   ///< [offset, offset + length)
  kSuffix,  ///< the last `length` bytes (all of them if the object is shorter)
  kWhole,   ///< the whole object, into `body` (dst unused)
};

struct RangeRead {
  // --- in ---
  StoreObject* object = nullptr;
  ReadKind kind = ReadKind::kRange;
  uint64_t offset = 0;
  uint64_t length = 0;
  /// kRange: 0 = all `length` bytes must exist; else end-of-object after at least this many
  /// bytes is success (aligned O_DIRECT reads may run past the end of a file).
  uint64_t min_length = 0;
  uint8_t* dst = nullptr;  ///< room for `length` bytes (kRange, kSuffix)
  /// Objects opened by their read (open_on_read), kRange: an object smaller than this or
  /// larger than offset + length is sized but not read (transferred 0), for the caller to
  /// refuse without a byte of it written to dst.
  uint64_t min_size = 0;
  /// Fail with kIoError (ESTALE) "changed since its index was read" when the object is no
  /// longer object->version (remote: If-Match). Local stores ignore it (they revalidate at
  /// Open).
  bool pin_version = false;
  /// Optional: the parts of [offset, offset + length) the caller will use (object offsets,
  /// sorted; empty = all of it). A store may leave the other bytes of dst unwritten (the
  /// disk cache does not fetch blocks that hold only bytes of coalescing gaps).
  std::span<const std::pair<uint64_t, uint64_t>> needed;
  /// kWhole: the most bytes the object may have (0: no bound). A larger object fails with
  /// kInvalidFormat and too_large set, before a buffer of its size is allocated.
  uint64_t max_length = 0;
  /// kSuffix of an object whose size is not known yet: the caller confirms the object's
  /// version (ConfirmServed) before the call trusts these bytes, so a caching store may
  /// serve them for a version it remembers, adopting it (a shard index: the disk cache's
  /// tails, store/disk_cache_store.h).
  bool confirmed_later = false;
  /// kSuffix: a caching store may keep what this read returns as the object's tail, for
  /// later confirmed_later reads (a shard index; kept even when this read may not be answered
  /// from one, as when a call runs again without them).
  bool keep_tail = false;
  // --- out ---
  Status status;
  bool missing = false;      ///< no object under the key (status Ok)
  uint64_t transferred = 0;  ///< bytes written to dst (kSuffix: min(length, size))
  bool inline_hit = false;   ///< local: served from the page cache without queueing
  bool waited = false;       ///< local: queued to the device (ReadRequest::waited)
  std::string body;          ///< kWhole
  bool too_large = false;    ///< kWhole: larger than max_length (status kInvalidFormat)
  /// Remote: seconds from sending the request that served this read to its first byte and
  /// to its end (0 when not measured: local reads, disk-cache hits, failures), for the read
  /// layer's coalescing tuner (read/coalescing_tuner.h).
  double first_byte_s = 0;
  double total_s = 0;
};

/// A range of an object readable in place (Store::Mapped): `bytes` are the range's first
/// byte, inside `map`; null bytes: read the range instead.
struct MappedRange {
  const uint8_t* bytes = nullptr;
  const FileMap* map = nullptr;
};

/// What the executor tunes by (never which store it is).
struct StoreTraits {
  bool remote = false;          ///< high latency per request: batch wide, coalesce wide
  bool one_at_a_time = false;   ///< a batch gains nothing over single reads (plain pread)
  size_t open_budget = 64;      ///< objects one call may hold open at once
  /// Local: reads worth having in flight per worker. Remote: requests in flight per read
  /// call, shared among its workers (request_concurrency).
  unsigned max_in_flight = 64;
  /// OpenForOneRead defers all I/O to the read: such objects hold nothing open until then.
  bool opens_on_read = false;
  /// Serves some reads from local copies (a disk cache): pass the call's objects to
  /// ReadStream (`confirm`) so that their adopted versions are confirmed while it serves.
  bool confirm_early = false;
};

/// Where a key's bytes are, for stores whose keys are byte ranges of shared objects
/// (manifests: Store::Locate).
struct KeyRange {
  ObjectRef object;      ///< null: no such key (missing)
  std::string location;  ///< the object's location (messages)
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool sized = true;     ///< false: the whole object, whose size its read will tell
};

/// Counters of one store (one Array), relaxed atomics. Remote stores count; local stores
/// count only reads of O_DIRECT files, once per batch (an atomic per read would cost the
/// tiny-chunk workload).
struct StoreStats {
  std::atomic<uint64_t> requests{0};       ///< requests sent (each attempt counts)
  std::atomic<uint64_t> retries{0};        ///< attempts after the first
  std::atomic<uint64_t> bytes_fetched{0};  ///< body bytes received
  std::atomic<uint64_t> bytes_used{0};     ///< bytes of chunks and indexes reads needed
  std::atomic<uint64_t> errors{0};         ///< reads that failed
  std::atomic<uint64_t> disk_cache_hits{0};   ///< reads served by the local disk cache
  std::atomic<uint64_t> disk_cache_bytes{0};  ///< bytes they served
  std::atomic<uint64_t> direct_reads{0};      ///< local reads with O_DIRECT
  std::atomic<uint64_t> page_cache_reads{0};  ///< ranges of O_DIRECT files read from the page cache
  std::atomic<uint64_t> mapped_reads{0};      ///< ranges read in place from the page cache (Mapped)
};

/// A plain copy of the counters (lsio/remote.h's StoreCounters, public).
inline StoreCounters Snapshot(const StoreStats& s) {
  StoreCounters c;
  c.requests = s.requests.load(std::memory_order_relaxed);
  c.retries = s.retries.load(std::memory_order_relaxed);
  c.bytes_fetched = s.bytes_fetched.load(std::memory_order_relaxed);
  c.bytes_used = s.bytes_used.load(std::memory_order_relaxed);
  c.errors = s.errors.load(std::memory_order_relaxed);
  c.disk_cache_hits = s.disk_cache_hits.load(std::memory_order_relaxed);
  c.disk_cache_bytes = s.disk_cache_bytes.load(std::memory_order_relaxed);
  c.direct_reads = s.direct_reads.load(std::memory_order_relaxed);
  c.page_cache_reads = s.page_cache_reads.load(std::memory_order_relaxed);
  c.mapped_reads = s.mapped_reads.load(std::memory_order_relaxed);
  return c;
}

class Store {
 public:
  virtual ~Store() = default;

  /// Size and version of `key`, or found == false when there is no object under it.
  virtual Result<ObjectInfo> Stat(std::string_view key) = 0;

  /// The whole object under `key`, or nullopt when there is none. An object larger than
  /// `max_bytes` fails with kInvalidFormat without being read.
  virtual Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) = 0;

  /// Where `key` lives, as error messages name it (a file path, a URL; never secrets).
  virtual std::string Location(std::string_view key) const = 0;

  /// Opens `key` for range reads (see above). Local: nullptr when missing.
  virtual Result<ObjectRef> Open(std::string_view key) = 0;

  /// Opens `key` for ONE whole-object read made soon after, on whichever thread (unsharded
  /// chunk files, thousands per call). A store that can defers all of its I/O to that read
  /// and returns an object with open_on_read set and size unknown: the read opens the object
  /// on the reading thread, reports "missing" there (RangeRead::missing), sets size /
  /// size_known, reads min(length, size) bytes of a kRange read from offset 0 (`transferred`
  /// says how many; see RangeRead::min_size for sizes the caller refuses) and lets go of the
  /// object right after its on_done. So resolving costs the calling thread no syscall and no
  /// descriptor is held between resolving and reading. Other stores: Open(key).
  virtual Result<ObjectRef> OpenForOneRead(std::string_view key) { return Open(key); }

  /// Performs every read; returns when all are finished. Statuses name no location: the
  /// caller adds Location(key) (and the chunk) as it knows them (also when on_done throws: the
  /// exception propagates once nothing is in flight). `cancelled` is polled on the calling
  /// thread by stores whose reads can wait long (remote); unfinished reads then end kCancelled.
  virtual void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                    const std::function<bool()>& cancelled = {}) = 0;

  /// Read for callers that give reads as room frees up: next() runs on the calling thread
  /// whenever the store can start another read and returns one (kept alive and untouched by
  /// the caller until its on_done) or nullptr when it has none to give now; it is asked again
  /// after every finished read, and ReadStream returns once it gave nullptr with no read in
  /// flight. On cancellation next is not asked again. Remote stores keep up to
  /// traits().max_in_flight reads in flight this way, so a slow request never holds back the
  /// ones behind it; the default runs each read through Read on its own.
  /// `confirm`: objects whose adopted versions (AdoptVersion) the caller wants confirmed
  /// now, at the start of the stream, so that the confirmations overlap the reads (given when
  /// traits().confirm_early; several workers may pass the same objects: each is asked once).
  virtual void ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                          const std::function<bool()>& cancelled = {}, std::span<const ObjectRef> confirm = {}) {
    (void)confirm;
    while (!(cancelled && cancelled())) {
      RangeRead* r = next();
      if (r == nullptr) return;
      Read(std::span<RangeRead>(r, 1), [&](size_t) { on_done(*r); }, cancelled);
    }
  }

  virtual StoreTraits traits() = 0;

  /// [offset, offset + length) of `obj` (opened in this call) readable in place, without a
  /// read: a local file's range the page cache holds, through the file's mapping
  /// (io/file_map.h). The bytes stay valid while the call holds `obj`. Callers read them only
  /// inside a MapAccessGuard(*map) and treat everything read as lost if map->faulted()
  /// afterwards (read/call.cc). Default: nothing is mapped.
  virtual MappedRange Mapped(StoreObject& obj, uint64_t offset, uint64_t length) {
    (void)obj, (void)offset, (void)length;
    return {};
  }

  /// Whether `obj` (opened in this call, size not known yet) may take a version and size
  /// this process learned earlier (a cached shard index's) instead of reading the object to
  /// learn them. True: the fields are set; reads pinned to that version fail (ESTALE) if it
  /// is no longer current, and whatever the store serves of it without asking the server
  /// (a disk cache) is confirmed before the call may succeed (ConfirmServed). False: the
  /// caller reads the object to learn its version (an empty version pins nothing). This and
  /// ConfirmServed are the one place that decides whether a remembered version is trusted.
  virtual bool AdoptVersion(StoreObject& obj, const std::string& version, uint64_t size) {
    if (version.empty()) return false;
    obj.version = version;
    obj.size = size;
    obj.size_known = true;
    return true;
  }

  /// After the reads of a wave, on the calling thread: Ok when every object of `objects`
  /// whose adopted version the call used without the server confirming it (bytes served
  /// from a local copy, decoded chunks served from the chunk cache) is still at that
  /// version; asks the server for those not confirmed yet (in parallel). An object that
  /// changed fails with kIoError (ESTALE) naming it: the call must not return its old
  /// bytes as current. Local stores: Ok (they revalidate at Open).
  virtual Status ConfirmServed(std::span<const ObjectRef> objects, const std::function<bool()>& cancelled = {}) {
    (void)objects;
    (void)cancelled;
    return Status::Ok();
  }

  /// How many reads this store served from what earlier processes kept (a disk cache's
  /// tails: StoreObject::remembered), ever. A call that failed while this grew may be wrong
  /// because of it (a stale version, an index of an array since re-created at the same
  /// path): the executor forgets it (ForgetRemembered) and runs the call once more without
  /// (RangeRead::confirmed_later unset), so such a failure is never an error the caller sees.
  virtual uint64_t RememberedServed() { return 0; }
  /// Drops what this process took from what earlier processes kept (see RememberedServed).
  virtual void ForgetRemembered() {}

  /// Stores whose keys are byte ranges of a few shared objects (store/manifest.h): true, and
  /// Locate resolves a batch of keys to (object, offset, nbytes), opening each distinct object
  /// once, so that the planner merges neighbouring ranges of one object into one read. The
  /// objects returned are read through this store's Read / ReadStream like any other.
  virtual bool LocatesKeys() const { return false; }
  /// For LocatesKeys stores: which object `key` is a range of (a number shared by every key
  /// of that object), or -1 when reading it holds no object open (missing, inline); no I/O.
  /// A read call's wave holds at most the descriptor budget of distinct objects.
  virtual int64_t ObjectNumber(std::string_view key) const {
    (void)key;
    return -1;
  }
  virtual Status Locate(std::span<const std::string> keys, std::vector<KeyRange>* out) {
    (void)keys;
    (void)out;
    return Status::Unimplemented("this store does not locate keys");
  }

  /// Drops what the store keeps for its objects in this process (cached descriptors,
  /// connections are shared and stay).
  virtual void Close() {}

  /// The transport reads use, for reports ("pread", "uring", "http").
  virtual Result<std::string> TransportName() = 0;

  /// What identifies `obj`'s bytes across calls and processes (a cache key: the endpoint's
  /// URL of a remote object); "" when nothing may keep copies of them.
  virtual std::string Identity(const StoreObject& obj) const {
    (void)obj;
    return std::string();
  }
  /// Whether obj->version names its bytes exactly (a strong ETag), so that copies may be
  /// kept under it, and it is not known to have changed.
  virtual bool VersionIdentifiesBytes(const StoreObject& obj) const {
    (void)obj;
    return false;
  }

  /// A wrapping store (store/disk_cache_store.h) counts into the store it wraps.
  virtual StoreStats& stats() { return stats_; }
  /// What the array reports (Array::Stats): stats(), or the sum over several stores a store
  /// reads from (a ManifestStore with several targets).
  virtual StoreCounters Counters() { return Snapshot(stats()); }

 private:
  StoreStats stats_;
};

/// Checks that `key` is a relative key: non-empty, no leading '/', no empty, "." or ".."
/// segments (a key must never escape the store's root). kInvalidArgument otherwise.
Status ValidateKey(std::string_view key);

}  // namespace lsio
