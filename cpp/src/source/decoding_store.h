// DecodingStore: a store adapter whose objects are the wrapped store's objects decoded whole
// by bytes -> bytes codecs. It is how lsio reads Zarr v3 shards compressed whole (codecs
// after sharding_indexed): each shard object is fetched and decompressed once, and the
// sharded source and the executor then read its index and inner chunks from the decoded
// bytes (StoreObject::resident), as from any shard.
//
// Usage (array.cc, when the metadata has codecs after sharding_indexed):
//   auto store = std::make_shared<DecodingStore>(inner, codecs, max_decoded);
//   // codecs: the bytes -> bytes codecs in encoding order; max_decoded: the most bytes a
//   // decoded shard can hold (its index plus every inner chunk at its stored maximum).
//
// No partial reads are possible in this format: opening a shard reads it whole. Decoded
// shards are kept (least recently used first, up to kKeepBytes) keyed by location and the
// wrapped object's version, so later calls on local stores, which know versions at Open,
// decode each shard once; remote ones are fetched again per call (their version is known
// only after the fetch), then found decoded.
//
// Errors: the wrapped store's, named by the object; a stored object larger than the codecs
// can produce for max_decoded bytes, or one that does not decode, is kDataLoss naming it.
// Thread-safety: as every Store (the cache locks itself).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "codec/codec.h"
#include "store/store.h"

namespace lsio {

class DecodingStore final : public Store {
 public:
  static constexpr uint64_t kKeepBytes = uint64_t{256} << 20;

  DecodingStore(std::shared_ptr<Store> inner, std::vector<std::shared_ptr<const Codec>> codecs,
                uint64_t max_decoded);

  Result<ObjectInfo> Stat(std::string_view key) override;
  Result<std::optional<std::string>> ReadAll(std::string_view key, uint64_t max_bytes) override;
  std::string Location(std::string_view key) const override { return inner_->Location(key); }
  Result<ObjectRef> Open(std::string_view key) override;
  void Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
            const std::function<bool()>& cancelled = {}) override;
  StoreTraits traits() override;
  void Close() override { inner_->Close(); }
  Result<std::string> TransportName() override { return inner_->TransportName(); }
  StoreStats& stats() override { return inner_->stats(); }
  StoreCounters Counters() override { return inner_->Counters(); }

 private:
  // The decoded bytes of `key` (fetched and decoded, or kept); null: no such object.
  Result<std::shared_ptr<const std::string>> Decoded(std::string_view key, std::string* version);
  Result<std::string> Decode(std::string stored, const std::string& location) const;
  std::shared_ptr<const std::string> Kept(const std::string& id);
  void Keep(const std::string& id, std::shared_ptr<const std::string> bytes);
  static void Serve(RangeRead& r);

  std::shared_ptr<Store> inner_;
  std::vector<std::shared_ptr<const Codec>> codecs_;  // encoding order (decoded in reverse)
  uint64_t max_decoded_;
  uint64_t max_stored_;  // what the codecs can make of max_decoded_ bytes

  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const std::string>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> kept_;
  uint64_t kept_bytes_ = 0;
};

}  // namespace lsio
