// The read planner: turns a batch of selections into chunk tasks and coalesced reads.
//
// Steps (the executor drives them):
//   1. BuildTasks (pure): map every selection to the read chunks it touches (inner chunks
//      of shards, or plain chunks). A chunk needed by several selections becomes ONE task
//      with several pieces, so it is read and decoded once. A task whose whole chunk lands
//      in one contiguous run of the output gets a `direct` address: it is decoded (or, if
//      stored uncompressed, read) straight there.
//   2. The executor resolves each task to (file, offset, nbytes) or missing, using shard
//      indexes (IndexCache, one batched read for all misses) or chunk files.
//   3. Coalesce (pure): per file, sort ranges by offset and merge neighbours while the gap
//      is <= max_gap and the merged read <= max_request. Never infers a chunk's size from
//      its neighbour: offsets come from the index only. Direct uncompressed reads stay
//      separate requests, and missing chunks become fill units.
//
// Invariants: pieces of one task are contiguous in Plan::pieces; pieces never overlap in the
// output (selections write disjoint output regions), so execution needs no locks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codec/chain.h"
#include "io/file_cache.h"
#include "lsio/box.h"
#include "zarr/chunk_key.h"
#include "zarr/dtype.h"
#include "zarr/shard_index.h"

namespace lsio {

/// Everything about an array's storage layout the planner and executor need.
struct ArrayLayout {
  std::string root;                 ///< array directory, ending in '/'
  std::vector<int64_t> shape;
  std::vector<int64_t> chunk;       ///< read chunk shape (inner chunk if sharded)
  std::vector<int64_t> grid;        ///< read chunks per dimension, ceil(shape / chunk)
  bool sharded = false;
  ShardLayout shard;                ///< valid when sharded
  ChunkKeyEncoding keys;
  const CodecChain* chain = nullptr;
  std::vector<uint8_t> fill;        ///< one element, native order
  size_t itemsize = 1;
  DataType dtype = DataType::kUInt8;

  int ndim() const { return static_cast<int>(shape.size()); }
};

struct PlanOptions {
  uint64_t max_gap = 16 << 10;
  uint64_t max_request = 1 << 20;
};

/// One destination of a chunk: a sub-box of the chunk copied into one selection's output.
struct Piece {
  uint32_t task = 0;
  uint32_t box = 0;
  uint8_t* dst = nullptr;   ///< output address of the piece's first element
  uint32_t dims = 0;        ///< offset into Plan::piece_dims: ndim x (src_start, count, step)
};

struct ChunkTask {
  uint32_t coords = 0;      ///< offset into Plan::coords (ndim entries)
  int32_t shard = -1;       ///< index into Plan::shards (sharded arrays)
  uint64_t local = 0;       ///< inner chunk index within its shard (C order)
  int32_t file = -1;        ///< index into Plan::files once resolved
  uint64_t offset = 0;
  uint64_t nbytes = 0;
  bool missing = false;
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

struct Plan {
  int ndim = 0;
  std::vector<ChunkTask> tasks;
  std::vector<Piece> pieces;
  std::vector<int64_t> piece_dims;
  std::vector<int64_t> coords;
  std::vector<int64_t> shard_coords;     ///< ndim entries per shard touched
  std::vector<uint64_t> shard_ids;       ///< linear shard index per shard touched
  std::vector<std::string> files;        ///< paths, indexed by ChunkTask::file
  std::vector<FileRef> file_refs;        ///< parallel to files (nullptr: absent)
  std::vector<IoUnit> units;
  std::vector<uint32_t> unit_tasks;
};

/// Step 1. Selections and views must already be validated (same rank, in bounds).
/// allow_direct = false when the output is not the chunk's own element type (transforms).
void BuildTasks(const ArrayLayout& layout, const std::vector<Selection>& sels,
                const std::vector<DstView>& dsts, Plan* plan, bool allow_direct = true);

/// Step 3, for tasks [first, last). They must be resolved (file/offset/nbytes or missing).
/// Appends to plan->units and plan->unit_tasks.
void Coalesce(const ArrayLayout& layout, const PlanOptions& opts, uint32_t first, uint32_t last,
              Plan* plan);

/// "(1, 2, 3)": a task's chunk coordinates for error messages.
std::string TaskCoords(const Plan& plan, const ChunkTask& t);

}  // namespace lsio
