// ResidentStore, DecodingStore and NestedShardStore (see resident_store.h).
#include "source/resident_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "io/fd_cache.h"  // kDirectAlignment
#include "util/aligned_buffer.h"

namespace lsio {

// ---- ResidentStore ------------------------------------------------------------------------

std::string ResidentStore::VersionOf(const std::string& inner_version, const std::string& detail) {
  static std::atomic<uint64_t> unversioned{0};
  if (inner_version.empty()) return "unversioned:" + std::to_string(unversioned.fetch_add(1) + 1);
  return inner_version + "|" + detail;
}

std::string ResidentStore::ContentTag(const std::string& bytes) {
  return std::to_string(bytes.size()) + ":" + std::to_string(std::hash<std::string>{}(bytes));
}

void ResidentStore::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    lru_.clear();
    kept_.clear();
    kept_bytes_ = 0;
  }
  inner_->Close();
}

std::shared_ptr<const std::string> ResidentStore::Kept(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kept_.find(id);
  if (it == kept_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void ResidentStore::Keep(const std::string& id, std::shared_ptr<const std::string> bytes) {
  if (bytes->size() > kKeepBytes / 4) return;  // one that large would push out all others
  std::lock_guard<std::mutex> lock(mu_);
  if (kept_.count(id) != 0) return;
  kept_bytes_ += bytes->size();
  lru_.emplace_front(id, std::move(bytes));
  kept_[id] = lru_.begin();
  while (kept_bytes_ > kKeepBytes && !lru_.empty()) {
    kept_bytes_ -= lru_.back().second->size();
    kept_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

Result<std::string> ResidentStore::ReadBytes(StoreObject& obj, const std::string& location, uint64_t offset,
                                             uint64_t length, bool whole, uint64_t max_whole, bool* missing) {
  *missing = false;
  RangeRead r;
  r.object = &obj;
  AlignedBuffer buf;
  if (whole && !obj.size_known) {  // remote: the whole object, bounded; it tells size and version
    r.kind = ReadKind::kWhole;
    r.max_length = std::max<uint64_t>(max_whole, 1);
  } else {
    if (whole) {
      if (obj.size > max_whole) {
        return Status::DataLoss("object of " + std::to_string(obj.size) + " bytes is larger than it can be (" +
                                std::to_string(max_whole) + "): refused before reading it")
            .WithPath(location);
      }
      offset = 0;
      length = obj.size;
    }
    if (length == 0) return std::string();
    // An O_DIRECT file: the enclosing aligned range, into an aligned buffer.
    const uint64_t align = obj.direct ? kDirectAlignment : 1;
    const uint64_t start = offset / align * align;
    r.kind = ReadKind::kRange;
    r.offset = start;
    r.length = (offset + length - start + align - 1) / align * align;
    r.min_length = obj.direct ? offset + length - start : 0;
    r.pin_version = !obj.version.empty();
    if (!buf.Reserve(r.length)) {
      return Status::ResourceExhausted("cannot allocate " + std::to_string(r.length) + " bytes").WithPath(location);
    }
    r.dst = buf.data();
  }
  inner_->Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  if (r.too_large) {
    return Status::DataLoss("object is larger than it can be (" + std::to_string(max_whole) +
                            " bytes): refused before reading it")
        .WithPath(location);
  }
  if (!r.status.ok()) return Status(r.status).WithPath(location).WithRange(offset, length);
  if (r.missing) {
    *missing = true;
    return std::string();
  }
  if (r.kind == ReadKind::kWhole) return std::move(r.body);
  const uint64_t skip = offset - r.offset;
  if (r.transferred < skip + length) {
    return Status::DataLoss("the object ended before the bytes asked").WithPath(location).WithRange(offset, length);
  }
  return std::string(reinterpret_cast<const char*>(buf.data()) + skip, static_cast<size_t>(length));
}

Result<ObjectRef> ResidentStore::Open(std::string_view key) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Make(key, &version));
  if (bytes == nullptr) return ObjectRef();
  auto obj = std::make_shared<StoreObject>();
  obj->resident = std::move(bytes);
  obj->size = obj->resident->size();
  obj->size_known = true;
  obj->version = version;
  return obj;
}

Result<ObjectInfo> ResidentStore::Stat(std::string_view key) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Make(key, &version));
  ObjectInfo info;
  if (bytes == nullptr) return info;
  info.found = true;
  info.size = bytes->size();
  info.version = version;
  return info;
}

Result<std::optional<std::string>> ResidentStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Make(key, &version));
  if (bytes == nullptr) return std::optional<std::string>();
  if (bytes->size() > max_bytes) {
    return Status::InvalidFormat("object of " + std::to_string(bytes->size()) + " bytes, more than " +
                                 std::to_string(max_bytes))
        .WithPath(inner_->Location(key));
  }
  return std::optional<std::string>(*bytes);
}

// Every object is resident: a read is a copy of its bytes.
void ResidentStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                         const std::function<bool()>&) {
  for (size_t i = 0; i < reads.size(); ++i) {
    RangeRead& r = reads[i];
    r.missing = false;
    r.status = Status::Ok();
    const std::shared_ptr<const std::string>& held = r.object->resident;
    if (held == nullptr) {
      r.status = Status::Internal("a read of an object this store did not open");
    } else if (r.kind == ReadKind::kWhole) {
      if (r.max_length != 0 && held->size() > r.max_length) {
        r.too_large = true;
        r.status = Status::InvalidFormat("object of " + std::to_string(held->size()) + " bytes, more than " +
                                         std::to_string(r.max_length));
      } else {
        r.body = *held;
        r.transferred = held->size();
      }
    } else {
      const std::string& b = *held;
      const uint64_t from = r.kind == ReadKind::kSuffix ? b.size() - std::min<uint64_t>(r.length, b.size()) : r.offset;
      uint64_t n = r.kind == ReadKind::kSuffix ? b.size() - from : r.length;
      if (from > b.size() || n > b.size() - from) {
        if (r.min_length != 0 && from <= b.size() && b.size() - from >= r.min_length) {
          n = b.size() - from;
        } else {
          r.status = Status::DataLoss("read of bytes [" + std::to_string(from) + ", " + std::to_string(from + n) +
                                      ") of an object of " + std::to_string(b.size()) + " bytes");
          n = 0;
        }
      }
      if (r.status.ok()) {
        std::memcpy(r.dst, b.data() + from, static_cast<size_t>(n));
        r.transferred = n;
      }
    }
    on_done(i);
  }
}

StoreTraits ResidentStore::traits() {
  // Reads are copies from memory (the fetch happened at Open): local, one batch is enough.
  // Each open object holds its bytes: a wave opens at most kKeepBytes of them.
  StoreTraits t;
  t.remote = false;
  const uint64_t fit = kKeepBytes / std::max<uint64_t>(max_object_, 1);
  t.open_budget = static_cast<size_t>(std::clamp<uint64_t>(fit, 1, inner_->traits().open_budget));
  return t;
}

// ---- DecodingStore ------------------------------------------------------------------------

namespace {

uint64_t SaturatingMaxEncoded(const std::vector<std::shared_ptr<const Codec>>& codecs, uint64_t decoded) {
  uint64_t n = decoded;
  for (const auto& c : codecs) {
    const uint64_t next = static_cast<const BytesToBytesCodec&>(*c).MaxEncodedSize(n);
    n = next < n ? std::numeric_limits<uint64_t>::max() : next;  // saturate
  }
  return n;
}

}  // namespace

DecodingStore::DecodingStore(std::shared_ptr<Store> inner, std::vector<std::shared_ptr<const Codec>> codecs,
                             uint64_t max_decoded)
    : ResidentStore(std::move(inner), max_decoded), codecs_(std::move(codecs)), max_decoded_(max_decoded),
      max_stored_(SaturatingMaxEncoded(codecs_, max_decoded)) {
  for (size_t i = 0; i < codecs_.size(); ++i) {
    limits_.push_back(SaturatingMaxEncoded({codecs_.begin(), codecs_.begin() + static_cast<ptrdiff_t>(i)}, max_decoded));
  }
}

Result<std::string> DecodingStore::Decode(std::string stored, const std::string& location) const {
  std::string cur = std::move(stored);
  for (size_t i = codecs_.size(); i-- > 0;) {
    const auto& codec = static_cast<const BytesToBytesCodec&>(*codecs_[i]);
    AlignedBuffer grow;
    BytesOut out;
    out.grow = &grow;
    out.limit = limits_[i];  // what the codecs before it make of the largest shard
    const std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(cur.data()), cur.size());
    const Status st = codec.DecodeBytes(in, out, ThreadDecodeScratch());
    if (!st.ok()) return Status(st.code(), "whole-shard " + codec.name() + ": " + st.message()).WithPath(location);
    cur.assign(reinterpret_cast<const char*>(out.result.data()), out.result.size());
  }
  return cur;
}

Result<std::shared_ptr<const std::string>> DecodingStore::Make(std::string_view key, std::string* version) {
  LSIO_ASSIGN_OR_RETURN(ObjectRef obj, inner_->Open(key));
  if (obj == nullptr) return std::shared_ptr<const std::string>();
  const std::string location = inner_->Location(key);
  const bool known_before = obj->size_known && !obj->version.empty();
  if (known_before) {  // a local store: the version before reading
    if (auto hit = Kept(location + '\n' + obj->version)) {
      *version = VersionOf(obj->version, std::to_string(obj->size) + ":" + std::to_string(hit->size()));
      return hit;
    }
  }
  bool missing = false;
  LSIO_ASSIGN_OR_RETURN(std::string stored, ReadBytes(*obj, location, 0, 0, /*whole=*/true, max_stored_, &missing));
  if (missing) return std::shared_ptr<const std::string>();
  // A version known only by reading (remote) may be weak (a Last-Modified date: a rewrite in
  // the same second keeps it), so what is made from it is neither kept nor versioned by it
  // alone: the version carries the stored bytes' hash, and an index cached for other bytes
  // never matches.
  const bool strong = known_before;
  const std::string tag = strong ? std::string() : ContentTag(stored);
  LSIO_ASSIGN_OR_RETURN(std::string decoded, Decode(std::move(stored), location));
  auto bytes = std::make_shared<const std::string>(std::move(decoded));
  if (strong) Keep(location + '\n' + obj->version, bytes);
  *version = VersionOf(obj->version, std::to_string(obj->size) + ":" + std::to_string(bytes->size()) +
                                         (strong ? "" : ":" + tag));
  return bytes;
}

// ---- NestedShardStore ---------------------------------------------------------------------

NestedShardStore::NestedShardStore(std::shared_ptr<Store> inner, ShardLayout outer, ChunkKeyEncoding keys, int ndim,
                                   uint64_t max_inner_shard)
    : ResidentStore(std::move(inner), max_inner_shard), outer_(std::move(outer)), keys_(keys), ndim_(ndim) {}

bool NestedShardStore::Split(std::string_view key, std::string* outer_key, uint64_t* local) const {
  // The inner shard's grid position, its outer shard and its place in that shard's index.
  const size_t nd = static_cast<size_t>(ndim_);
  std::vector<int64_t> g(nd), outer(nd);
  if (!ParseChunkKey(keys_, key, ndim_, g.data())) return false;
  *local = 0;
  for (size_t d = 0; d < nd; ++d) {
    const int64_t per = outer_.chunks_per_shard[d];
    outer[d] = g[d] / per;
    *local = *local * static_cast<uint64_t>(per) + static_cast<uint64_t>(g[d] % per);
  }
  *outer_key = ChunkKey(keys_, outer.data(), ndim_);
  return true;
}

std::string NestedShardStore::Location(std::string_view key) const {
  std::string outer_key;
  uint64_t local = 0;
  if (!Split(key, &outer_key, &local)) return inner_->Location(key);
  return inner_->Location(outer_key) + " (inner shard " + std::to_string(local) + ")";
}

Result<std::shared_ptr<const std::string>> NestedShardStore::Make(std::string_view key, std::string* version) {
  std::string outer_key;
  uint64_t local = 0;
  if (!Split(key, &outer_key, &local)) {
    return Status::InvalidArgument("'" + std::string(key) + "' is not the key of an inner shard");
  }
  const std::string location = inner_->Location(outer_key);
  LSIO_ASSIGN_OR_RETURN(ObjectRef obj, inner_->Open(outer_key));
  if (obj == nullptr) return std::shared_ptr<const std::string>();
  const std::string id_tail = "\n" + std::to_string(local);
  auto detail = [&](uint64_t size) {
    return std::to_string(obj->size) + "#" + std::to_string(local) + ":" + std::to_string(size);
  };
  const bool known_before = obj->size_known && !obj->version.empty();  // else weak (see DecodingStore::Make)
  if (known_before) {
    if (auto hit = Kept(location + '\n' + obj->version + id_tail)) {
      *version = VersionOf(obj->version, detail(hit->size()));
      return hit;
    }
  }
  // The outer index: at its end (a suffix read when the size is not known yet) or start.
  bool missing = false;
  std::string index;
  if (obj->size_known) {
    if (obj->size < outer_.index_size) {
      return Status::DataLoss("shard of " + std::to_string(obj->size) + " bytes is shorter than its " +
                              std::to_string(outer_.index_size) + "-byte index")
          .WithPath(location);
    }
    LSIO_ASSIGN_OR_RETURN(index, ReadBytes(*obj, location, outer_.IndexOffset(obj->size), outer_.index_size,
                                           false, 0, &missing));
  } else {
    RangeRead r;
    r.object = obj.get();
    AlignedBuffer buf;
    if (!buf.Reserve(std::max<uint64_t>(outer_.index_size, 1))) return Status::ResourceExhausted("index buffer");
    r.kind = outer_.index_at_end ? ReadKind::kSuffix : ReadKind::kRange;
    r.length = outer_.index_size;
    r.dst = buf.data();
    inner_->Read(std::span<RangeRead>(&r, 1), [](size_t) {});
    if (!r.status.ok()) return Status(r.status).WithPath(location);
    missing = r.missing;
    if (!missing) {
      if (!obj->size_known || obj->size < outer_.index_size || r.transferred < outer_.index_size) {
        return Status::DataLoss("shard is shorter than its " + std::to_string(outer_.index_size) + "-byte index")
            .WithPath(location);
      }
      index.assign(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(outer_.index_size));
    }
  }
  if (missing) return std::shared_ptr<const std::string>();
  const uint64_t index_offset = outer_.IndexOffset(obj->size);
  auto entries = DecodeShardIndex(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(index.data()), index.size()), outer_, obj->size);
  if (!entries.ok()) return Status(entries.status()).WithPath(location).WithRange(index_offset, outer_.index_size);
  if (local >= entries.value().size()) return Status::Internal("inner shard outside its shard's index").WithPath(location);
  const ShardIndexEntry& e = entries.value()[static_cast<size_t>(local)];
  if (e.missing()) return std::shared_ptr<const std::string>();  // not written: all of it reads as fill
  if (e.nbytes > max_object_) {
    return Status::DataLoss("inner shard " + std::to_string(local) + " is " + std::to_string(e.nbytes) +
                            " bytes, more than an inner shard can hold (" + std::to_string(max_object_) + ")")
        .WithPath(location)
        .WithRange(e.offset, e.nbytes);
  }
  LSIO_ASSIGN_OR_RETURN(std::string bytes, ReadBytes(*obj, location, e.offset, e.nbytes, false, 0, &missing));
  if (missing) return std::shared_ptr<const std::string>();
  *version = VersionOf(obj->version, detail(bytes.size()) + (known_before ? "" : ":" + ContentTag(bytes)));
  auto held = std::make_shared<const std::string>(std::move(bytes));
  if (known_before) Keep(location + '\n' + obj->version + id_tail, held);
  return held;
}

}  // namespace lsio
