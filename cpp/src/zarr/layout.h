// ArrayLayout: everything about an array's storage layout that the planner and executor need,
// and the one builder that derives it from parsed metadata.
//
// Usage:
//   1. LSIO_ASSIGN_OR_RETURN(ArrayMetadata m, ParseArrayMetadata(zarr_json_text));
//   2. LSIO_ASSIGN_OR_RETURN(ArrayLayout l, BuildArrayLayout(m, "/data/array"));
//   3. Keep `m` alive (and unmoved) as long as `l`: l.chain points into m.chain.
//   4. Hand &l to the read layer (ReadContext::layout, BuildTasks, ...).
// Tests and benchmarks that have no zarr.json fill an ArrayMetadata's shape, dtype,
// read_chunk_shape, fill_value, sharding and chain themselves and call the same builder, so
// derived fields (grid, sharded, root's trailing '/') are computed in exactly one place.
//
// Invariants of a built layout: shape, chunk and grid have one entry per dimension; every
// chunk extent is >= 1; grid[d] = ceil(shape[d] / chunk[d]), computed without overflow even
// for shapes near INT64_MAX; root is empty or ends in '/'; chain is non-null; fill holds
// exactly one element (itemsize bytes).
//
// Thread-safety: pure; a built layout is immutable in use and may be shared by any number of
// threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codec/chain.h"
#include "lsio/status.h"
#include "zarr/chunk_key.h"
#include "zarr/dtype.h"
#include "zarr/metadata.h"
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

/// Builds the layout of the array described by `meta`, stored under `root` (a directory; a
/// trailing '/' is added when missing). The layout borrows meta.chain. Fails with
/// kInvalidArgument when `meta` is inconsistent (ranks differ, a chunk extent < 1, a negative
/// extent, no chain, a fill value that is not one element): ParseArrayMetadata never yields
/// such metadata, so only hand-filled metadata can hit this.
Result<ArrayLayout> BuildArrayLayout(const ArrayMetadata& meta, std::string root);

}  // namespace lsio
