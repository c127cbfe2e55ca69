// DecodingStore (see decoding_store.h).
#include "source/decoding_store.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "io/fd_cache.h"  // kDirectAlignment
#include "util/aligned_buffer.h"

namespace lsio {
namespace {

// The object the adapter opens: the decoded bytes (resident) and the wrapped object's
// version, which names those bytes as well as the stored ones.
class DecodedObject final : public StoreObject {};

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
    : inner_(std::move(inner)), codecs_(std::move(codecs)), max_decoded_(max_decoded),
      max_stored_(SaturatingMaxEncoded(codecs_, max_decoded)) {}

Result<std::string> DecodingStore::Decode(std::string stored, const std::string& location) const {
  std::string cur = std::move(stored);
  for (size_t i = codecs_.size(); i-- > 0;) {
    const auto& codec = static_cast<const BytesToBytesCodec&>(*codecs_[i]);
    AlignedBuffer grow;
    BytesOut out;
    out.grow = &grow;
    out.limit = max_decoded_;  // no stage of a valid shard holds more than the shard
    const std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(cur.data()), cur.size());
    const Status st = codec.DecodeBytes(in, out, ThreadDecodeScratch());
    if (!st.ok()) {
      return Status(st.code(), "whole-shard " + codec.name() + ": " + st.message()).WithPath(location);
    }
    cur.assign(reinterpret_cast<const char*>(out.result.data()), out.result.size());
  }
  return cur;
}

std::shared_ptr<const std::string> DecodingStore::Kept(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = kept_.find(id);
  if (it == kept_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void DecodingStore::Keep(const std::string& id, std::shared_ptr<const std::string> bytes) {
  if (bytes->size() > kKeepBytes / 4) return;  // a shard that large would push out all others
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

Result<std::shared_ptr<const std::string>> DecodingStore::Decoded(std::string_view key, std::string* version) {
  LSIO_ASSIGN_OR_RETURN(ObjectRef obj, inner_->Open(key));
  if (obj == nullptr) return std::shared_ptr<const std::string>();
  const std::string location = inner_->Location(key);
  if (obj->size_known && !obj->version.empty()) {  // a local store: the version before reading
    if (auto hit = Kept(location + '\n' + obj->version)) {
      *version = obj->version;
      return hit;
    }
  }
  RangeRead r;
  r.object = obj.get();
  AlignedBuffer buf;
  if (obj->size_known) {  // local: one range of the known size (aligned for O_DIRECT files)
    if (obj->size > max_stored_) r.too_large = true;
    const uint64_t align = obj->direct ? kDirectAlignment : 1;
    r.kind = ReadKind::kRange;
    r.length = (obj->size + align - 1) / align * align;
    r.min_length = obj->direct ? std::max<uint64_t>(obj->size, 1) : 0;
    if (!r.too_large && !buf.Reserve(std::max<uint64_t>(r.length, 1))) {
      return Status::ResourceExhausted("cannot allocate " + std::to_string(r.length) + " bytes for a shard")
          .WithPath(location);
    }
    r.dst = buf.data();
  } else {  // remote: the whole object, bounded, which also tells its size and version
    r.kind = ReadKind::kWhole;
    r.max_length = std::max<uint64_t>(max_stored_, 1);
  }
  if (!r.too_large && (r.kind == ReadKind::kWhole || r.length != 0)) inner_->Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  if (!r.too_large && r.kind == ReadKind::kRange && r.status.ok() && !r.missing) {
    r.body.assign(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(std::min(r.transferred, obj->size)));
  }
  if (r.too_large) {
    return Status::DataLoss("shard compressed whole is larger than its codecs can produce for a shard of at most " +
                            std::to_string(max_decoded_) + " bytes (" + std::to_string(max_stored_) +
                            "): refused before reading it")
        .WithPath(location);
  }
  if (!r.status.ok()) return Status(r.status).WithPath(location);
  if (r.missing) return std::shared_ptr<const std::string>();
  *version = obj->version;
  LSIO_ASSIGN_OR_RETURN(std::string decoded, Decode(std::move(r.body), location));
  auto bytes = std::make_shared<const std::string>(std::move(decoded));
  if (!version->empty()) Keep(location + '\n' + *version, bytes);
  return bytes;
}

Result<ObjectRef> DecodingStore::Open(std::string_view key) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Decoded(key, &version));
  if (bytes == nullptr) return ObjectRef();
  auto obj = std::make_shared<DecodedObject>();
  obj->resident = std::move(bytes);
  obj->size = obj->resident->size();
  obj->size_known = true;
  obj->version = version;
  return ObjectRef(std::move(obj));
}

Result<ObjectInfo> DecodingStore::Stat(std::string_view key) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Decoded(key, &version));
  ObjectInfo info;
  if (bytes == nullptr) return info;
  info.found = true;
  info.size = bytes->size();
  info.version = version;
  return info;
}

Result<std::optional<std::string>> DecodingStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  std::string version;
  LSIO_ASSIGN_OR_RETURN(std::shared_ptr<const std::string> bytes, Decoded(key, &version));
  if (bytes == nullptr) return std::optional<std::string>();
  if (bytes->size() > max_bytes) {
    return Status::InvalidFormat("decoded object is " + std::to_string(bytes->size()) + " bytes, more than " +
                                 std::to_string(max_bytes))
        .WithPath(inner_->Location(key));
  }
  return std::optional<std::string>(*bytes);
}

// Every object is resident: a read is a copy of its decoded bytes.
void DecodingStore::Serve(RangeRead& r) {
  r.missing = false;
  r.status = Status::Ok();
  const std::shared_ptr<const std::string>& held = r.object->resident;
  if (held == nullptr) {
    r.status = Status::Internal("a read through the decoding store of an object it did not open");
    return;
  }
  const std::string& b = *held;
  if (r.kind == ReadKind::kWhole) {
    if (r.max_length != 0 && b.size() > r.max_length) {
      r.too_large = true;
      r.status = Status::InvalidFormat("object of " + std::to_string(b.size()) + " bytes, more than " +
                                       std::to_string(r.max_length));
      return;
    }
    r.body = b;
    r.transferred = b.size();
    return;
  }
  const uint64_t from = r.kind == ReadKind::kSuffix ? b.size() - std::min<uint64_t>(r.length, b.size()) : r.offset;
  const uint64_t n = r.kind == ReadKind::kSuffix ? b.size() - from : r.length;
  if (from > b.size() || n > b.size() - from) {
    if (r.min_length != 0 && from <= b.size() && b.size() - from >= r.min_length) {
      std::memcpy(r.dst, b.data() + from, b.size() - from);
      r.transferred = b.size() - from;
      return;
    }
    r.status = Status::DataLoss("read of bytes [" + std::to_string(from) + ", " + std::to_string(from + n) +
                                ") of a decoded shard of " + std::to_string(b.size()) + " bytes");
    return;
  }
  std::memcpy(r.dst, b.data() + from, n);
  r.transferred = n;
}

void DecodingStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                         const std::function<bool()>&) {
  for (size_t i = 0; i < reads.size(); ++i) {
    Serve(reads[i]);
    on_done(i);
  }
}

StoreTraits DecodingStore::traits() {
  // Reads are copies from memory (the fetch happened at Open): local, one batch is enough.
  StoreTraits t;
  t.remote = false;
  t.open_budget = inner_->traits().open_budget;
  return t;
}

}  // namespace lsio
