// Store adapters whose objects are made in memory from the wrapped store's objects, for
// sharded layouts the sharded source cannot read in place:
//   DecodingStore     shards compressed whole (bytes -> bytes codecs after sharding_indexed):
//                     an object is the wrapped object decoded whole;
//   NestedShardStore  nested sharding (sharding_indexed inside sharding_indexed): an object
//                     is one inner shard, the byte range the outer shard's index gives it.
// Both hand out objects whose bytes are resident (StoreObject::resident): the sharded
// source and the executor then read index and chunks from memory, as from any shard.
//
// Usage (array.cc):
//   store = std::make_shared<DecodingStore>(store, codecs, max_decoded);
//   store = std::make_shared<NestedShardStore>(store, outer_layout, key_encoding, ndim);
//
// Objects made from local files are kept (least recently used first, up to kKeepBytes)
// keyed by location and the file's version, known at Open, so later calls make each once.
// Remote ones are fetched and made again in each call: their version is known only by
// reading and may be weak (a Last-Modified date), so the version of what is made carries a
// hash of the bytes read, and an index cached for other bytes never matches. An object made
// from one whose store names no version gets a version of its own each time.
// A call holds at most kKeepBytes of made objects open at once (traits().open_budget).
//
// Errors: the wrapped store's, named by the object; bytes that do not decode, an outer index
// that does not validate, or a stored object larger than it can be are kDataLoss naming the
// object (and the byte range).
// Thread-safety: as every Store (the kept objects lock themselves).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "store/store.h"
#include "zarr/chunk_key.h"
#include "zarr/shard_index.h"

namespace lsio {

class ResidentStore : public Store {
 public:
  static constexpr uint64_t kKeepBytes = uint64_t{256} << 20;

  /// `max_object`: the most bytes one made object can hold (bounds the objects one call
  /// holds open at once).
  ResidentStore(std::shared_ptr<Store> inner, uint64_t max_object)
      : inner_(std::move(inner)), max_object_(max_object) {}

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override { return inner_->Location(key); }
  Result<ObjectRef> Open(std::string_view key) override;
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  StoreTraits traits() override;
  void Close() override;
  Result<std::string> TransportName() override { return inner_->TransportName(); }
  StoreStats& stats() override { return inner_->stats(); }
  StoreCounters Counters() override { return inner_->Counters(); }

 protected:
  /// The bytes of `key` made in memory, and their version; null bytes: no such object.
  virtual Result<std::shared_ptr<const std::string>> Make(std::string_view key, std::string* version) = 0;

  /// [offset, offset + length) of `obj` (opened by inner_), or all of it (`whole`; bounded by
  /// `max_whole` when its size is not known yet). Sets *missing when it is gone.
  Result<std::string> ReadBytes(StoreObject& obj, const std::string& location, uint64_t offset, uint64_t length,
                                bool whole, uint64_t max_whole, bool* missing);

  std::shared_ptr<const std::string> Kept(const std::string& id);
  void Keep(const std::string& id, std::shared_ptr<const std::string> bytes);
  /// The version of a made object: the wrapped one's with `detail` (sizes, place), or a
  /// version of its own when the wrapped store names none.
  static std::string VersionOf(const std::string& inner_version, const std::string& detail);
  /// Size and hash of `bytes`, for versions of objects made from a version that may be weak.
  static std::string ContentTag(const std::string& bytes);

  std::shared_ptr<Store> inner_;
  uint64_t max_object_;

 private:
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const std::string>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> kept_;
  uint64_t kept_bytes_ = 0;
};

class DecodingStore final : public ResidentStore {
 public:
  /// codecs: the bytes -> bytes codecs in encoding order; max_decoded: the most bytes a
  /// decoded shard can hold (its index plus every inner chunk at its stored maximum).
  DecodingStore(std::shared_ptr<Store> inner, std::vector<std::shared_ptr<const Codec>> codecs, uint64_t max_decoded);

 private:
  Result<std::shared_ptr<const std::string>> Make(std::string_view key, std::string* version) override;
  Result<std::string> Decode(std::string stored, const std::string& location) const;

  std::vector<std::shared_ptr<const Codec>> codecs_;  // encoding order (decoded in reverse)
  uint64_t max_decoded_;
  uint64_t max_stored_;  // what the codecs can make of max_decoded_ bytes
  // limits_[i]: the most bytes decoding codecs_[i] may produce (what codecs_[0..i) make of
  // the largest shard: an intermediate stage may be larger than the shard).
  std::vector<uint64_t> limits_;
};

class NestedShardStore final : public ResidentStore {
 public:
  /// Keys are those of the inner shards, as if the array were sharded by them (`keys`, rank
  /// `ndim`); `outer` is the outer sharding_indexed layout, whose inner_shape is the inner
  /// shards' shape.
  NestedShardStore(std::shared_ptr<Store> inner, ShardLayout outer, ChunkKeyEncoding keys, int ndim,
                   uint64_t max_inner_shard);

  /// The outer shard's location and which of its inner shards: errors in an inner shard
  /// (its index, its chunks) name the file that holds it, byte ranges counted in the inner shard.
  std::string Location(std::string_view key) const override;

 private:
  // The outer shard's key and the inner shard's place in its index; false: not such a key.
  bool Split(std::string_view key, std::string* outer_key, uint64_t* local) const;

  Result<std::shared_ptr<const std::string>> Make(std::string_view key, std::string* version) override;

  ShardLayout outer_;
  ChunkKeyEncoding keys_;
  int ndim_;
};

}  // namespace lsio
