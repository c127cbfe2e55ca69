// The byte-range executor: reads a batch of (object, offset, length) ranges into caller
// buffers, the engine's Zarr-free path (lsio/ranges.h, lsio.read_ranges, safetensors).
//
// Usage (from the facade, GIL released):
//   std::vector<RangeObject> objects = {{&store, "model-00001.safetensors"}, ...};
//   std::vector<RangeTarget> targets = {{0, offset, length, dst}, ...};
//   Status st = ExecuteRanges(ctx, objects, targets);
//
// Steps:
//   1. Check every target (object index, offset + length without overflow).
//   2. Open the objects; local files are sized at open. Remote objects are sized by their
//      first read: the first unit of each is read into a staging buffer, unpinned, in one
//      batch (no HEAD request). A missing object, or a target past the end of its object,
//      fails here, before a byte of any caller buffer is written.
//   3. Plan (PlanRanges, pure): sort the targets by (object, offset, length); identical
//      targets are read once and copied to the others at the end; neighbours within max_gap
//      merge into one unit while it stays within max_request; a target longer than
//      max_request is split into max_request pieces so several workers share it. A unit that
//      is one target or one piece is read straight into the caller's buffer; a merged unit
//      goes through a per-worker staging buffer and is copied out.
//   4. Run. Local stores: the calling thread and up to threads-1 pool threads pull batches
//      of units from one atomic counter (one unit per batch for plain pread, up to
//      queue_depth for io_uring). Remote stores: the calling thread streams every unit
//      through Store::ReadStream (request_concurrency in flight), each pinned to the
//      version (ETag) the object was sized with. With on_target, each target is reported
//      as soon as its last unit is in (identical and empty targets at the end).
// Objects are opened in waves of at most the store's open budget (local: half the
// descriptor cache); with more objects than that, every object is first sized by Stat, so
// the no-write-before-error rule holds for the whole call.
// Errors name the object's location and the byte range; the first one stops the call. Once
// reads have started (step 4) a failure (I/O error, a file truncated meanwhile, a remote
// object changed: ESTALE) leaves the buffers partly written, only inside the targets.
// `interrupted` is polled on the calling thread between batches (local) and the interrupt
// probe while it waits on the network (remote); both stop the call with kCancelled.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lsio/ranges.h"  // RangeStats
#include "lsio/status.h"
#include "store/store.h"

namespace lsio {

/// One object a call reads from. Objects of one store are read together; a call may mix
/// stores (local files and remote objects).
struct RangeObject {
  Store* store = nullptr;
  std::string key;  ///< relative to the store's root
};

/// One range: `length` bytes of objects[object] from `offset`, into dst.
struct RangeTarget {
  uint32_t object = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dst = nullptr;  ///< room for `length` bytes; targets' buffers must not overlap
};

struct RangesContext {
  int threads = 1;            ///< workers including the calling thread (local stores)
  unsigned queue_depth = 64;  ///< reads in flight per worker (io_uring)
  /// Coalescing, as RangeOptions: max_gap kStoreDefault / max_request 0 = the store kind's
  /// default (local 16 KiB / 8 MiB, remote 1 MiB / 16 MiB).
  uint64_t max_gap = RangeOptions::kStoreDefault;
  uint64_t max_request = 0;
  std::function<bool()> interrupted;   ///< see the header comment
  bool (*interrupt_probe)() = nullptr;
  RangeStats* stats = nullptr;  ///< not null: the plan's counts are added here
  /// Set: called with a target's index once its bytes are all in (ReadRanges' on_range).
  std::function<Status(size_t, bool)> on_target;
};

/// A planned read: one request of the store.
struct RangeUnit {
  uint32_t object = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  /// Not null: the unit is one target (or a piece of one) read straight into here.
  uint8_t* dst = nullptr;
  /// Units read straight into a target: that target's index.
  uint32_t target = 0;
  /// Staged units: the targets they serve, members[first, first + count) (sorted by offset).
  uint32_t first = 0;
  uint32_t count = 0;
};

struct RangePlan {
  std::vector<RangeUnit> units;        ///< sorted by (object, offset)
  std::vector<uint32_t> members;       ///< target indices, for staged units
  /// (copy, original): targets identical to another, filled from it after the reads.
  std::vector<std::pair<uint32_t, uint32_t>> duplicates;
};

/// Step 3 above (pure; exposed for tests): the units of `targets`, whose objects all belong
/// to stores coalesced with (max_gap, max_request) (max_request > 0).
RangePlan PlanRanges(std::span<const RangeTarget> targets, uint64_t max_gap, uint64_t max_request);

/// Reads every target. Fails with kInvalidArgument (bad object index, overflowing range),
/// kIoError (missing object: ENOENT; a target past the end of its object: EINVAL; I/O
/// errors; a remote object that changed during the call: ESTALE), kCancelled,
/// kResourceExhausted (std::bad_alloc).
Status ExecuteRanges(const RangesContext& ctx, const std::vector<RangeObject>& objects,
                     std::span<const RangeTarget> targets);

}  // namespace lsio
