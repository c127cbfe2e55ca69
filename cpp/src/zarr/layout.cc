// The one ArrayLayout builder (see layout.h).
#include "zarr/layout.h"

#include <utility>

namespace lsio {

Result<ArrayLayout> BuildArrayLayout(const ArrayMetadata& meta, std::string root) {
  const size_t nd = meta.shape.size();
  if (meta.read_chunk_shape.size() != nd) {
    return Status::InvalidArgument("array layout: chunk rank " + std::to_string(meta.read_chunk_shape.size()) +
                                   " does not match the shape's rank " + std::to_string(nd));
  }
  if (meta.chain == nullptr) return Status::InvalidArgument("array layout: no codec chain");
  if (meta.fill_value.size() != meta.dtype.itemsize) {
    return Status::InvalidArgument("array layout: fill value is " + std::to_string(meta.fill_value.size()) +
                                   " bytes, the data type's item is " + std::to_string(meta.dtype.itemsize));
  }
  ArrayLayout l;
  l.grid.reserve(nd);
  for (size_t d = 0; d < nd; ++d) {
    const int64_t n = meta.shape[d], c = meta.read_chunk_shape[d];
    if (n < 0 || c < 1) {
      return Status::InvalidArgument("array layout: dimension " + std::to_string(d) + " has shape " +
                                     std::to_string(n) + " and chunk " + std::to_string(c));
    }
    // (n - 1) / c + 1 rather than (n + c - 1) / c: the latter overflows for n near INT64_MAX.
    l.grid.push_back(n == 0 ? 0 : (n - 1) / c + 1);
  }
  if (!root.empty() && root.back() != '/') root += '/';
  l.root = std::move(root);
  l.shape = meta.shape;
  l.chunk = meta.read_chunk_shape;
  l.sharded = meta.sharding.has_value();
  if (l.sharded) l.shard = *meta.sharding;
  l.keys = meta.key_encoding;
  l.chain = meta.chain.get();
  l.fill = meta.fill_value;
  l.itemsize = meta.dtype.itemsize;
  l.dtype = meta.dtype.type;
  return l;
}

}  // namespace lsio
