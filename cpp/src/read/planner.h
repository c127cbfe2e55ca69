// The read planner: turns a batch of selections into chunk tasks and coalesced reads.
//
// Steps (the executor drives them):
//   0. PlanBytesBound (pure, allocates nothing): an upper bound of what step 1 allocates,
//      from counts per box / runs per axis, so a call under a memory limit fails before
//      planning instead of after.
//   1. BuildTasks (pure): map every selection to the read chunks it touches (inner chunks
//      of shards, or plain chunks). A chunk needed by several selections becomes ONE task
//      with several pieces, so it is read and decoded once. A task whose whole chunk lands
//      in one contiguous run of the output gets a `direct` address: it is decoded (or, if
//      stored uncompressed, read) straight there. Two inputs:
//        - a BoxBatch (read, read_crops): a piece is (task, box); what part of the chunk
//          goes where is recomputed from the box and the chunk coordinates when scattered
//          (PieceBoxDims), so a piece costs 16 bytes whatever the rank;
//        - an OuterSelection (oindex, take): every run is split per chunk into Segments,
//          grouped per axis by chunk; a task is a combination of one group per axis and
//          has ONE piece naming those groups. Memory grows with segments (runs per axis
//          summed) plus chunks touched, never with the product of the runs.
//   2. The executor resolves each task to (file, offset, nbytes) or missing, using shard
//      indexes (IndexCache, one batched read for all misses) or chunk files.
//   3. Coalesce (pure): per file, sort ranges by offset and merge neighbours while the gap
//      is <= max_gap and the merged read <= max_request. Never infers a chunk's size from
//      its neighbour: offsets come from the index only. Direct uncompressed reads stay
//      separate requests, and missing chunks become fill units.
//
// Invariants: pieces of one task are contiguous in Plan::pieces; pieces never overlap in the
// output (selections write disjoint output regions), so execution needs no locks. Inputs are
// validated by the facade (in bounds, steps >= 1 / != 0): then no index arithmetic here can
// overflow, and what could (chunk ends, byte counts) uses util/checked_math.h. The Plan
// borrows the BoxBatch / OuterSelection it was built from (Plan::boxes / Plan::outer).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codec/chain.h"
#include "read/chunk_cache.h"
#include "lsio/box.h"
#include "lsio/status.h"
#include "store/store.h"
#include "zarr/chunk_key.h"
#include "zarr/dtype.h"
#include "zarr/layout.h"  // ArrayLayout and its builder

namespace lsio {

struct PlanOptions {
  uint64_t max_gap = 16 << 10;
  uint64_t max_request = 1 << 20;
};

/// One destination of a chunk: a sub-box of the chunk copied into one selection's output.
struct Piece {
  uint32_t task = 0;
  /// BoxBatch plans: the box. Outer plans: offset into Plan::piece_groups (ndim entries).
  uint32_t box = 0;
  /// Output address of the piece's first element (box plans; outer plans: only when the
  /// task is direct, else null).
  uint8_t* dst = nullptr;
};

/// Outer plans: the part of one run that lies in one chunk along one dimension.
struct Segment {
  int64_t chunk = 0;      ///< chunk index along the dimension
  int64_t src_start = 0;  ///< first (lowest) index, relative to the chunk's origin
  int64_t count = 0;
  int64_t step = 1;       ///< >= 1
  int64_t dst_first = 0;  ///< output position of the lowest index
  int64_t dst_step = 1;   ///< +1, or -1 for runs with negative steps (output written backwards)
};

/// Outer plans: the segments of one dimension that lie in one chunk.
struct SegmentGroup {
  int64_t chunk = 0;
  uint32_t first = 0;  ///< into Plan::segments
  uint32_t count = 0;
};

struct ChunkTask {
  uint32_t coords = 0;      ///< offset into Plan::coords (ndim entries)
  int32_t shard = -1;       ///< index into Plan::shards (sharded arrays)
  uint64_t local = 0;       ///< inner chunk index within its shard (C order)
  int32_t file = -1;        ///< index into Plan::files once resolved
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool missing = false;
  /// >= 0: the decoded chunk comes from the chunk cache, Plan::cached_chunks[cached] (no read)
  int32_t cached = -1;
  uint8_t* direct = nullptr;  ///< output address when the whole chunk is one contiguous run
  uint32_t first_piece = 0;
  uint32_t num_pieces = 0;
};

/// A unit of work: one coalesced read feeding one or more tasks, or a set of fills.
struct IoUnit {
  int32_t file = -1;        ///< -1 for fill units
  uint64_t offset = 0;
  uint64_t length = 0;
  uint8_t* dst = nullptr;   ///< set for direct uncompressed reads (no buffer needed)
  uint32_t first_task = 0;  ///< offset into Plan::unit_tasks
  uint32_t num_tasks = 0;
};

/// The per-box API (vectors of Selection and DstView) copied into flat arrays, viewed as a
/// BoxBatch. For tests, benchmarks and Array::ReadBatch; not copyable (batch points inside).
struct BoxBatchStorage {
  BoxBatchStorage(const std::vector<Selection>& sels, const std::vector<DstView>& dsts);
  BoxBatchStorage(const BoxBatchStorage&) = delete;
  BoxBatchStorage& operator=(const BoxBatchStorage&) = delete;
  std::vector<int64_t> starts, counts, steps, strides;
  std::vector<uint8_t*> dsts;
  BoxBatch batch;
};

struct Plan {
  int ndim = 0;
  const BoxBatch* boxes = nullptr;          ///< what a box plan's pieces refer to
  const OuterSelection* outer = nullptr;    ///< what an outer plan's pieces refer to
  std::unique_ptr<BoxBatchStorage> owned;   ///< set by the vector overload of BuildTasks
  std::vector<ChunkTask> tasks;
  std::vector<Piece> pieces;
  std::vector<Segment> segments;            ///< outer plans: per axis, sorted by chunk
  std::vector<SegmentGroup> groups;         ///< outer plans: per axis, one per chunk touched
  std::vector<uint32_t> piece_groups;       ///< outer plans: ndim group indices per piece
  std::vector<int64_t> coords;
  std::vector<int64_t> shard_coords;     ///< ndim entries per shard touched
  std::vector<uint64_t> shard_ids;       ///< linear shard index per shard touched
  std::vector<std::string> files;        ///< locations (paths, URLs), indexed by ChunkTask::file
  std::vector<ObjectRef> file_refs;      ///< parallel to files (nullptr: released)
  std::vector<IoUnit> units;
  std::vector<uint32_t> unit_tasks;
  /// Decoded chunks found in the chunk cache (read/chunk_cache.h), by ChunkTask::cached.
  std::vector<std::shared_ptr<const CachedChunk>> cached_chunks;
};

/// Step 0: upper bounds of BuildTasks' allocations (no allocation, O(boxes x ndim) or
/// O(runs)). Counts saturate at UINT64_MAX.
struct PlanBound {
  uint64_t pieces = 0;
  uint64_t tasks = 0;
  uint64_t segments = 0;
  uint64_t bytes = 0;
};
PlanBound PlanBytesBound(const ArrayLayout& layout, const BoxBatch& batch);
PlanBound PlanBytesBound(const ArrayLayout& layout, const OuterSelection& sel);

/// Step 1. Selections and views must already be validated (same rank, in bounds). The plan
/// borrows `batch` / `sel`. allow_direct = false when the output is not the chunk's own
/// element type (transforms).
/// Fails with kResourceExhausted when the plan would need more than 2^32 - 1 pieces, tasks
/// or segments (the plan's indexes are 32-bit).
/// `interrupted`, if set, is polled every 4096 boxes (kCancelled when it returns true).
Status BuildTasks(const ArrayLayout& layout, const BoxBatch& batch, Plan* plan, bool allow_direct = true,
                  const std::function<bool()>& interrupted = {});
Status BuildTasks(const ArrayLayout& layout, const OuterSelection& sel, Plan* plan, bool allow_direct = true);
/// The per-box form: copies the selections into plan->owned first.
Status BuildTasks(const ArrayLayout& layout, const std::vector<Selection>& sels,
                  const std::vector<DstView>& dsts, Plan* plan, bool allow_direct = true);

/// Box plans: what piece `pc` copies, per dimension: the first index relative to the chunk's
/// origin, the count and the step (3 x ndim values into `dims`).
void PieceBoxDims(const ArrayLayout& layout, const Plan& plan, const Piece& pc, int64_t* dims);

/// Step 3, for tasks [first, last). They must be resolved (file/offset/nbytes or missing).
/// Appends to plan->units and plan->unit_tasks.
void Coalesce(const ArrayLayout& layout, const PlanOptions& opts, uint32_t first, uint32_t last,
              Plan* plan);

/// "(1, 2, 3)": a task's chunk coordinates for error messages.
std::string TaskCoords(const Plan& plan, const ChunkTask& t);

}  // namespace lsio
