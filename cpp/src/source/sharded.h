// ShardedSource: the chunk source of sharded arrays (Zarr v3 sharding_indexed). It maps an
// inner chunk of a shard to a byte range of the shard object, with the version that range
// was read from: it opens the shard objects through the store, takes their indexes from the
// IndexCache or reads every missing one in one batched store call, decodes and validates
// them, and says where each inner chunk lies. The executor plans, reads and decodes; it
// never parses an index.
//
// Usage (read/executor.cc, per wave of a read call):
//   ShardedSource source(layout.shard, index_cache, &store);
//   std::vector<ShardedSource::Shard> shards = {{id, "c/0/1"}, ...};
//   LSIO_RETURN_IF_ERROR(source.Resolve(shards, cancelled));
//   for each shard: shard.object == nullptr -> absent (every chunk reads as fill);
//                   else ShardedSource::Locate(shard.index, local) -> missing or (offset, nbytes)
//   after a read failed with ESTALE: ShardedSource::Forget(cache, ids) (the next call reads
//   those indexes again).
//
// Versions: a store that knows an object's version at Open (local files) gets the index
// decoded from that very version (IndexCache::Find). A store that learns versions only by
// reading (remote) is offered the cached index's version (Store::AdoptVersion): adopted,
// chunk reads are pinned to it and whatever is served without a request is confirmed after
// the wave (Store::ConfirmServed); refused, the index is read again. A missing index is
// read with a suffix range (index at the end) or from offset 0, which also tells a remote
// store the object's size and version; no HEAD.
//
// Errors: kDataLoss naming the shard and the index's byte range for a shard shorter than
// its index or an index that fails to decode or validate; store errors named by the shard.
// Thread-safety: a ShardedSource is used by one read call on its calling thread; the
// IndexCache it uses is shared and locks itself.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "lsio/status.h"
#include "source/index_cache.h"
#include "store/store.h"
#include "zarr/shard_index.h"

namespace lsio {

/// Where an inner chunk's bytes are within its shard object.
struct ChunkSpan {
  bool missing = true;  ///< not stored: reads as the fill value
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

class ShardedSource {
 public:
  /// `use_remembered`: index reads may be answered from what earlier processes kept (a disk
  /// cache's tails; RangeRead::confirmed_later); false when a call runs again without them.
  ShardedSource(const ShardLayout& shard, IndexCache* cache, Store* store, bool use_remembered = true)
      : shard_(shard), cache_(cache), store_(store), use_remembered_(use_remembered) {}

  struct Shard {
    Shard() = default;
    Shard(uint64_t shard_id, std::string shard_key) : id(shard_id), key(std::move(shard_key)) {}
    // --- in ---
    uint64_t id = 0;      ///< linear shard number (the IndexCache key)
    std::string key;      ///< the shard object's key in the store
    // --- out ---
    ObjectRef object;     ///< null: no such shard (all of it reads as fill)
    std::string location; ///< the object's location, as errors name it
    ShardIndexPtr index;  ///< set when object != null
  };

  /// Resolves every shard of `shards` (see the header comment). `cancelled` is polled while
  /// a remote store waits on the network.
  Status Resolve(std::span<Shard> shards, const std::function<bool()>& cancelled);

  /// Where inner chunk `local` (C order within the shard) of a resolved shard lies.
  static ChunkSpan Locate(const ShardIndexPtr& index, uint64_t local) {
    const ShardIndexEntry& e = (*index)[local];
    if (e.missing()) return ChunkSpan{};
    return ChunkSpan{false, e.offset, e.nbytes};
  }

  /// Drops the cached indexes of `ids`: their objects changed, and the next call must read
  /// the new indexes instead of failing again on the next of them.
  static void Forget(IndexCache* cache, std::span<const uint64_t> ids) {
    for (uint64_t id : ids) cache->Erase(id);
  }

 private:
  const ShardLayout& shard_;
  IndexCache* cache_;
  Store* store_;
  bool use_remembered_;
};

}  // namespace lsio
