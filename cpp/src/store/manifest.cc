// Manifest and ManifestStore (see manifest.h).
#include "store/manifest.h"

#include <algorithm>
#include <functional>
#include <cerrno>
#include <numeric>
#include <utility>

namespace lsio {

// ------------------------------------------------------------------------------- Manifest

uint32_t Manifest::Builder::Url(const std::string& url) {
  auto it = url_index_.find(url);
  if (it != url_index_.end()) return it->second;
  const uint32_t n = static_cast<uint32_t>(urls_.size());
  urls_.push_back(url);
  url_index_.emplace(url, n);
  return n;
}

void Manifest::Builder::AddInline(std::string key, std::string bytes) {
  keys_.push_back(std::move(key));
  entries_.push_back({Kind::kInline, kInlineUrl, 0, bytes.size(), static_cast<uint32_t>(inline_.size())});
  inline_.push_back(std::move(bytes));
}

void Manifest::Builder::AddRange(std::string key, uint32_t url, uint64_t offset, uint64_t length) {
  keys_.push_back(std::move(key));
  entries_.push_back({Kind::kRange, url, offset, length, 0});
}

void Manifest::Builder::AddWhole(std::string key, uint32_t url) {
  keys_.push_back(std::move(key));
  entries_.push_back({Kind::kWhole, url, 0, kWholeLength, 0});
}

Result<std::shared_ptr<const Manifest>> Manifest::Builder::Finish() && {
  std::vector<uint32_t> order(keys_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return keys_[a] < keys_[b]; });
  auto m = std::make_shared<Manifest>();
  size_t total = 0;
  for (const std::string& k : keys_) total += k.size();
  m->keys_.reserve(total);
  const size_t n = order.size();
  m->key_end_.reserve(n);
  m->url_.reserve(n);
  m->offset_.reserve(n);
  m->length_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t j = order[i];
    if (i > 0 && keys_[j] == keys_[order[i - 1]]) {
      return Status::InvalidFormat("the manifest holds key \"" + keys_[j] + "\" twice");
    }
    m->keys_ += keys_[j];
    m->key_end_.push_back(m->keys_.size());
    const Pending& e = entries_[j];
    m->url_.push_back(e.kind == Kind::kInline ? kInlineUrl : e.url);
    m->offset_.push_back(e.kind == Kind::kInline ? e.inline_index : e.offset);
    m->length_.push_back(e.length);
  }
  m->inline_ = std::move(inline_);
  m->urls_ = std::move(urls_);
  keys_.clear();
  entries_.clear();
  return std::shared_ptr<const Manifest>(std::move(m));
}

Manifest::Entry Manifest::Find(std::string_view key) const {
  size_t lo = 0, hi = key_end_.size();
  while (lo < hi) {  // first entry whose key is >= key
    const size_t mid = lo + (hi - lo) / 2;
    if (KeyAt(mid) < key) lo = mid + 1;
    else hi = mid;
  }
  Entry e;
  if (lo == key_end_.size() || KeyAt(lo) != key) return e;
  if (url_[lo] == kInlineUrl) {
    e.kind = Kind::kInline;
    e.bytes = inline_[static_cast<size_t>(offset_[lo])];
    e.length = e.bytes.size();
    return e;
  }
  e.url = url_[lo];
  if (length_[lo] == kWholeLength) {
    e.kind = Kind::kWhole;
    return e;
  }
  e.kind = Kind::kRange;
  e.offset = offset_[lo];
  e.length = length_[lo];
  return e;
}

std::vector<std::string> Manifest::Children(std::string_view prefix) const {
  std::string p(prefix);
  while (!p.empty() && p.back() == '/') p.pop_back();
  if (!p.empty()) p.push_back('/');
  size_t lo = 0, hi = key_end_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (KeyAt(mid) < p) lo = mid + 1;
    else hi = mid;
  }
  std::vector<std::string> out;
  for (size_t i = lo; i < key_end_.size(); ++i) {
    const std::string_view k = KeyAt(i);
    if (k.substr(0, p.size()) != p) break;
    const std::string_view rest = k.substr(p.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) continue;  // a document of the node itself
    const std::string_view name = rest.substr(0, slash);
    if (out.empty() || out.back() != name) out.emplace_back(name);
  }
  return out;
}

uint64_t Manifest::memory_bytes() const {
  uint64_t n = keys_.capacity() + key_end_.capacity() * sizeof(uint64_t) + url_.capacity() * sizeof(uint32_t) +
               offset_.capacity() * sizeof(uint64_t) + length_.capacity() * sizeof(uint64_t);
  for (const std::string& s : inline_) n += s.capacity() + sizeof(std::string);
  for (const std::string& s : urls_) n += s.capacity() + sizeof(std::string);
  return n;
}

// -------------------------------------------------------------------------- ManifestStore

namespace {

// An object of the target seen through a reference: reads of [0, size) go to the target at
// [base, base + size); a whole-object reference (whole) reads the target as it is.
class SliceObject final : public StoreObject {
 public:
  ObjectRef target;
  uint64_t base = 0;
  bool whole = false;
  bool pinned = false;  // the manifest fixes the target's version: every read is pinned to it
  uint32_t store = 0;   // which target of a several-target ManifestStore holds `target`
  // Made by Locate and read by every worker of a call: its fields are set once, from an
  // opened target, and never written back by reads (workers would race).
  bool shared = false;
};

// A target read standing for a read of a slice, and what it needs kept alive.
struct Translated {
  RangeRead* outer = nullptr;
  RangeRead inner;
  std::vector<std::pair<uint64_t, uint64_t>> needed;
  bool whole_into_body = false;  // a kWhole read of a range slice, read as a range
  bool passthrough = false;      // a read of a target object itself
  uint32_t store = 0;            // the target it goes to
};

// Fills t->inner from *t->outer; false (outer finished, status set) when the read cannot be
// made: it asks for bytes outside its slice, or its object is resident (inline bytes).
bool Translate(Translated* t) {
  RangeRead& r = *t->outer;
  RangeRead& in = t->inner;
  auto* s = dynamic_cast<SliceObject*>(r.object);
  if (s == nullptr && r.object->resident) {  // inline bytes: the readers take them from `resident`
    const std::string& b = *r.object->resident;
    r.missing = false;
    if (r.kind == ReadKind::kWhole) {
      r.body = b;
      r.transferred = b.size();
    } else {
      const uint64_t from = r.kind == ReadKind::kSuffix ? b.size() - std::min<uint64_t>(r.length, b.size()) : r.offset;
      const uint64_t n = r.kind == ReadKind::kSuffix ? b.size() - from : r.length;
      if (from > b.size() || n > b.size() - from) {
        r.status = Status::DataLoss("read of bytes [" + std::to_string(from) + ", " + std::to_string(from + n) +
                                    ") of an inline value of " + std::to_string(b.size()) + " bytes");
        return false;
      }
      std::copy_n(b.data() + from, n, r.dst);
      r.transferred = n;
    }
    r.status = Status::Ok();
    return false;
  }
  in = RangeRead{};
  in.object = s == nullptr ? r.object : s->target.get();
  t->store = s == nullptr ? 0 : s->store;
  in.pin_version = r.pin_version || (s != nullptr && s->pinned);
  in.min_size = r.min_size;
  if (s == nullptr || s->whole) {  // a target object (Locate) or a whole-object slice: as it is
    t->passthrough = s == nullptr;
    in.kind = r.kind;
    in.offset = r.offset;
    in.length = r.length;
    in.min_length = r.min_length;
    in.dst = r.dst;
    in.max_length = r.max_length;
    in.needed = r.needed;
    return true;
  }
  const uint64_t size = s->size;
  uint64_t from = r.offset, n = r.length;
  if (r.kind == ReadKind::kSuffix) {
    n = std::min(r.length, size);
    from = size - n;
  } else if (r.kind == ReadKind::kWhole) {
    if (r.max_length != 0 && size > r.max_length) {
      r.too_large = true;
      r.status = Status::InvalidFormat("referenced range of " + std::to_string(size) + " bytes is larger than " +
                                       std::to_string(r.max_length));
      return false;
    }
    from = 0;
    n = size;
    r.body.assign(static_cast<size_t>(n), '\0');
    t->whole_into_body = true;
  }
  if (from > size || n > size - from) {
    r.status = Status::DataLoss("read of bytes [" + std::to_string(from) + ", " + std::to_string(from + n) +
                                ") of a reference of " + std::to_string(size) + " bytes");
    return false;
  }
  in.kind = ReadKind::kRange;
  in.offset = s->base + from;
  in.length = n;
  in.dst = t->whole_into_body ? reinterpret_cast<uint8_t*>(r.body.data()) : r.dst;
  if (!r.needed.empty()) {
    t->needed.reserve(r.needed.size());
    for (const auto& [a, b] : r.needed) t->needed.emplace_back(a + s->base, b + s->base);
    in.needed = t->needed;
  }
  return true;
}

// Copies what the target read did back into the slice's read.
void Back(Translated* t) {
  RangeRead& r = *t->outer;
  RangeRead& in = t->inner;
  r.status = std::move(in.status);
  r.transferred = in.transferred;
  r.inline_hit = in.inline_hit;
  r.waited = in.waited;
  r.first_byte_s = in.first_byte_s;
  r.total_s = in.total_s;
  r.too_large = in.too_large;
  r.missing = false;
  if (in.missing) {  // the manifest points at nothing: an error, never a missing chunk
    r.status = Status::IoError("the referenced object does not exist", ENOENT);
    r.transferred = 0;
  }
  if (t->passthrough) {
    if (r.kind == ReadKind::kWhole) r.body = std::move(in.body);
    return;
  }
  auto* s = static_cast<SliceObject*>(r.object);
  if (s->whole && s->shared) {
    if (r.kind == ReadKind::kWhole) r.body = std::move(in.body);
    return;
  }
  if (s->whole) {
    if (r.kind == ReadKind::kWhole) r.body = std::move(in.body);
    // What the target learned is the slice's too.
    if (s->target->size_known) {
      s->size = s->target->size;
      s->size_known = true;
    }
    s->version = s->target->version;
  } else if (t->whole_into_body && !r.status.ok()) {
    r.body.clear();
  }
}

// Translates and reads `t` (outer reads set), each target's share in turn; on_done(i) per read.
void ReadTranslated(const std::vector<std::shared_ptr<Store>>& targets_, std::vector<Translated>& t, const std::function<void(size_t)>& on_done,
                    const std::function<bool()>& cancelled) {
  // Per target, the reads sent to it: t[sent[k]] went as inner[k]. Targets are read in turn.
  std::vector<std::vector<size_t>> sent(targets_.size());
  for (size_t i = 0; i < t.size(); ++i) {
    if (Translate(&t[i])) sent[t[i].store].push_back(i);
    else on_done(i);
  }
  for (size_t g = 0; g < targets_.size(); ++g) {
    if (sent[g].empty()) continue;
    if (cancelled && cancelled()) {
      for (size_t i : sent[g]) {
        t[i].outer->status = Status::Cancelled("the read was cancelled");
        on_done(i);
      }
      continue;
    }
    std::vector<RangeRead> inner;
    inner.reserve(sent[g].size());
    for (size_t i : sent[g]) inner.push_back(std::move(t[i].inner));
    targets_[g]->Read(inner, [&](size_t k) {
      Translated& x = t[sent[g][k]];
      x.inner = std::move(inner[k]);
      Back(&x);
      on_done(sent[g][k]);
    }, cancelled);
  }
}

std::string CleanPrefix(std::string_view p) {
  std::string out(p);
  while (!out.empty() && out.front() == '/') out.erase(out.begin());
  while (!out.empty() && out.back() == '/') out.pop_back();
  if (!out.empty()) out.push_back('/');
  return out;
}

}  // namespace

ManifestStore::ManifestStore(std::shared_ptr<const Manifest> manifest, std::string prefix, std::shared_ptr<Store> target,
                             std::vector<std::string> target_keys, std::string location,
                             std::vector<std::string> versions)
    : ManifestStore(std::move(manifest), std::move(prefix), std::vector<std::shared_ptr<Store>>{std::move(target)}, {},
                    std::move(target_keys), std::move(location), std::move(versions)) {}

ManifestStore::ManifestStore(std::shared_ptr<const Manifest> manifest, std::string prefix,
                             std::vector<std::shared_ptr<Store>> targets, std::vector<uint32_t> target_of,
                             std::vector<std::string> target_keys, std::string location,
                             std::vector<std::string> versions)
    : manifest_(std::move(manifest)),
      prefix_(CleanPrefix(prefix)),
      targets_(std::move(targets)),
      target_of_(std::make_shared<const std::vector<uint32_t>>(std::move(target_of))),
      target_keys_(std::make_shared<const std::vector<std::string>>(std::move(target_keys))),
      location_(std::move(location)),
      versions_(std::make_shared<const std::vector<std::string>>(std::move(versions))) {}

Store& ManifestStore::Primary() const {
  for (const auto& t : targets_) {
    if (t->traits().remote) return *t;
  }
  return *targets_[0];
}

Result<std::string> ManifestStore::TransportName() {
  if (targets_.size() == 1) return targets_[0]->TransportName();
  std::vector<std::string> names;  // each transport once: "uring+nowait, http"
  for (const auto& t : targets_) {
    LSIO_ASSIGN_OR_RETURN(std::string n, t->TransportName());
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void ManifestStore::Close() {
  for (const auto& t : targets_) t->Close();
}

StoreStats& ManifestStore::stats() { return Primary().stats(); }

StoreCounters ManifestStore::Counters() {
  StoreCounters c = Snapshot(Primary().stats());
  for (const auto& t : targets_) {
    if (&t->stats() == &Primary().stats()) continue;
    const StoreCounters o = Snapshot(t->stats());
    c.requests += o.requests;
    c.retries += o.retries;
    c.bytes_fetched += o.bytes_fetched;
    c.bytes_used += o.bytes_used;
    c.errors += o.errors;
    c.disk_cache_hits += o.disk_cache_hits;
    c.disk_cache_bytes += o.disk_cache_bytes;
  }
  return c;
}

bool ManifestStore::Expect(StoreObject& obj, uint32_t url) const {
  if (url >= versions_->size() || (*versions_)[url].empty()) return false;
  // A remote object opens without a version (its first read learns one): it takes the one
  // the manifest names, so that read is already pinned to it. A local file's version is its
  // own (set at Open) and is left alone.
  if (obj.version.empty()) obj.version = (*versions_)[url];
  return true;
}

std::shared_ptr<ManifestStore> ManifestStore::Sub(std::string_view prefix) const {
  auto s = std::make_shared<ManifestStore>(manifest_, prefix_ + std::string(prefix), targets_, std::vector<uint32_t>(),
                                           std::vector<std::string>(), location_, std::vector<std::string>());
  s->target_of_ = target_of_;  // shared, not copied
  s->target_keys_ = target_keys_;
  s->versions_ = versions_;
  return s;
}

std::string ManifestStore::Full(std::string_view key) const { return prefix_ + std::string(key); }

std::string ManifestStore::RefLocation(const Manifest::Entry& e, std::string_view key) const {
  const std::string ref = "reference \"" + std::string(key) + "\" of " + location_;
  if (e.kind != Manifest::Kind::kRange && e.kind != Manifest::Kind::kWhole) return ref;
  const std::string object = TargetOf(e.url).Location((*target_keys_)[e.url]);
  if (e.kind == Manifest::Kind::kWhole) return object + " (" + ref + ")";
  return object + " bytes [" + std::to_string(e.offset) + ", " + std::to_string(e.offset + e.length) + ") (" + ref + ")";
}

std::string ManifestStore::Location(std::string_view key) const {
  const std::string full = Full(key);
  return RefLocation(manifest_->Find(full), full);
}

Result<ObjectInfo> ManifestStore::Stat(std::string_view key) {
  const std::string full = Full(key);
  const Manifest::Entry e = manifest_->Find(full);
  ObjectInfo info;
  switch (e.kind) {
    case Manifest::Kind::kMissing:
      return info;
    case Manifest::Kind::kInline:
      info.found = true;
      info.size = e.length;
      info.version = "inline:" + std::to_string(std::hash<std::string_view>{}(e.bytes));
      return info;
    case Manifest::Kind::kRange:
    case Manifest::Kind::kWhole: {
      Result<ObjectInfo> t = TargetOf(e.url).Stat((*target_keys_)[e.url]);
      if (!t.ok()) return Status(t.status()).WithPath(RefLocation(e, full));
      if (!t.value().found) {
        return Status::IoError("the referenced object does not exist", ENOENT).WithPath(RefLocation(e, full));
      }
      info = t.value();
      if (e.kind == Manifest::Kind::kRange) {
        if (e.offset > info.size || e.length > info.size - e.offset) {
          return Status::DataLoss("the reference runs past the end of its object (" + std::to_string(info.size) +
                                  " bytes)")
              .WithPath(RefLocation(e, full));
        }
        info.version += "#" + std::to_string(e.offset) + "+" + std::to_string(e.length);
        info.size = e.length;
      }
      return info;
    }
  }
  return info;
}

Result<ObjectRef> ManifestStore::Open(std::string_view key) {
  const std::string full = Full(key);
  const Manifest::Entry e = manifest_->Find(full);
  switch (e.kind) {
    case Manifest::Kind::kMissing:
      return ObjectRef();
    case Manifest::Kind::kInline: {
      auto obj = std::make_shared<StoreObject>();
      obj->resident = std::make_shared<const std::string>(e.bytes);
      obj->size = e.length;
      obj->size_known = true;
      // Anything keyed by the version (the chunk cache) must change with the bytes: a
      // rewritten reference file may hold other inline values of the same length.
      obj->version = "inline:" + std::to_string(std::hash<std::string_view>{}(e.bytes));
      return obj;
    }
    case Manifest::Kind::kRange:
    case Manifest::Kind::kWhole:
      break;
  }
  Result<ObjectRef> t = TargetOf(e.url).Open((*target_keys_)[e.url]);
  if (!t.ok()) return Status(t.status()).WithPath(RefLocation(e, full));
  if (t.value() == nullptr) {
    return Status::IoError("the referenced object does not exist", ENOENT).WithPath(RefLocation(e, full));
  }
  auto s = std::make_shared<SliceObject>();
  s->target = std::move(t).value();
  s->pinned = Expect(*s->target, e.url);
  s->store = TargetIndex(e.url);
  if (e.kind == Manifest::Kind::kWhole) {
    s->whole = true;
    s->size_known = s->target->size_known;
    s->size = s->target->size;
    s->version = s->target->version;
    return ObjectRef(std::move(s));
  }
  if (s->target->size_known && (e.offset > s->target->size || e.length > s->target->size - e.offset)) {
    return Status::DataLoss("the reference runs past the end of its object (" + std::to_string(s->target->size) +
                            " bytes)")
        .WithPath(RefLocation(e, full));
  }
  s->base = e.offset;
  s->size = e.length;
  s->size_known = true;
  // Anything keyed by this version (the chunk cache) changes when the object does.
  if (!s->target->version.empty()) {
    s->version = s->target->version + "#" + std::to_string(e.offset) + "+" + std::to_string(e.length);
  }
  return ObjectRef(std::move(s));
}

Result<std::optional<std::string>> ManifestStore::ReadAll(std::string_view key, uint64_t max_bytes) {
  const std::string full = Full(key);
  const Manifest::Entry e = manifest_->Find(full);
  if (e.kind == Manifest::Kind::kMissing) return std::optional<std::string>();
  if (e.kind == Manifest::Kind::kInline) {
    if (e.length > max_bytes) {
      return Status::InvalidFormat("inline value of " + std::to_string(e.length) + " bytes is larger than " +
                                   std::to_string(max_bytes))
          .WithPath(RefLocation(e, full));
    }
    return std::optional<std::string>(std::string(e.bytes));
  }
  if (e.kind == Manifest::Kind::kWhole) {
    Result<std::optional<std::string>> r = TargetOf(e.url).ReadAll((*target_keys_)[e.url], max_bytes);
    if (!r.ok()) return Status(r.status()).WithPath(RefLocation(e, full));
    if (!r.value()) return Status::IoError("the referenced object does not exist", ENOENT).WithPath(RefLocation(e, full));
    return r;
  }
  if (e.length > max_bytes) {
    return Status::InvalidFormat("referenced range of " + std::to_string(e.length) + " bytes is larger than " +
                                 std::to_string(max_bytes))
        .WithPath(RefLocation(e, full));
  }
  LSIO_ASSIGN_OR_RETURN(ObjectRef obj, Open(key));
  RangeRead r;
  r.object = obj.get();
  r.kind = ReadKind::kWhole;
  r.max_length = max_bytes;
  Read(std::span<RangeRead>(&r, 1), [](size_t) {});
  if (!r.status.ok()) return Status(r.status).WithPath(RefLocation(e, full));
  return std::optional<std::string>(std::move(r.body));
}

void ManifestStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                         const std::function<bool()>& cancelled) {
  std::vector<Translated> t(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) t[i].outer = &reads[i];
  ReadTranslated(targets_, t, on_done, cancelled);
}

void ManifestStore::ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                               const std::function<bool()>& cancelled, std::span<const ObjectRef> confirm) {
  (void)confirm;  // slices adopt no versions
  if (targets_.size() > 1) {
    // Several targets: the stream in batches. Whatever `next` gives now is read (each target
    // in turn), then `next` is asked again: it returns null while it waits for reads to
    // finish, and null with none in flight when the stream is over.
    for (;;) {
      if (cancelled && cancelled()) return;
      std::vector<Translated> t;
      while (RangeRead* r = next()) {
        t.emplace_back();
        t.back().outer = r;
      }
      if (t.empty()) return;
      ReadTranslated(targets_, t, [&](size_t i) { on_done(*t[i].outer); }, cancelled);
    }
  }
  std::unordered_map<const RangeRead*, std::unique_ptr<Translated>> in_flight;
  // A finished target read is freed only when the target asks for the next one: a store may
  // still look at a read after its on_done returned (LocalStore releases its object then).
  std::vector<std::unique_ptr<Translated>> finished;
  targets_[0]->ReadStream(
      [&]() -> RangeRead* {
        finished.clear();
        for (;;) {
          RangeRead* r = next();
          if (r == nullptr) return nullptr;
          auto t = std::make_unique<Translated>();
          t->outer = r;
          if (!Translate(t.get())) {
            on_done(*r);
            continue;
          }
          RangeRead* in = &t->inner;
          in_flight.emplace(in, std::move(t));
          return in;
        }
      },
      [&](RangeRead& in) {
        auto it = in_flight.find(&in);
        std::unique_ptr<Translated> t = std::move(it->second);
        in_flight.erase(it);
        Back(t.get());
        on_done(*t->outer);
        finished.push_back(std::move(t));
      },
      cancelled);
}

Status ManifestStore::Locate(std::span<const std::string> keys, std::vector<KeyRange>* out) {
  out->assign(keys.size(), KeyRange{});
  std::unordered_map<uint32_t, ObjectRef> opened;  // URL number -> the target's object
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string full = Full(keys[i]);
    const Manifest::Entry e = manifest_->Find(full);
    KeyRange& k = (*out)[i];
    switch (e.kind) {
      case Manifest::Kind::kMissing:
        continue;
      case Manifest::Kind::kInline:
      case Manifest::Kind::kWhole: {  // objects of their own (a remote one not sized yet:
                                       // the executor reads it whole, size_known false)
        LSIO_ASSIGN_OR_RETURN(k.object, Open(keys[i]));
        k.location = RefLocation(e, full);
        k.nbytes = k.object->size_known ? k.object->size : 0;
        k.sized = k.object->size_known;
        continue;
      }
      case Manifest::Kind::kRange:
        break;
    }
    auto it = opened.find(e.url);
    if (it == opened.end()) {
      const std::string& key = (*target_keys_)[e.url];
      Result<ObjectRef> t = TargetOf(e.url).Open(key);
      if (!t.ok()) return Status(t.status()).WithPath(RefLocation(e, full));
      if (t.value() == nullptr) {
        return Status::IoError("the referenced object does not exist", ENOENT).WithPath(RefLocation(e, full));
      }
      const bool pinned = Expect(*t.value(), e.url);  // the executor pins every range read
      ObjectRef obj = std::move(t).value();
      if (targets_.size() > 1) {
        // Several targets: the object seen through a whole-object slice, which says which
        // target its reads go to.
        auto s = std::make_shared<SliceObject>();
        s->whole = true;
        s->shared = true;
        s->pinned = pinned;
        s->store = TargetIndex(e.url);
        s->size_known = obj->size_known;
        s->size = obj->size;
        s->version = obj->version;
        s->direct = obj->direct;
        s->target = std::move(obj);
        obj = std::move(s);
      }
      it = opened.emplace(e.url, std::move(obj)).first;
    }
    const ObjectRef& obj = it->second;
    if (obj->size_known && (e.offset > obj->size || e.length > obj->size - e.offset)) {
      return Status::DataLoss("the reference runs past the end of its object (" + std::to_string(obj->size) +
                              " bytes)")
          .WithPath(RefLocation(e, full));
    }
    k.object = obj;
    k.location = TargetOf(e.url).Location((*target_keys_)[e.url]);
    k.offset = e.offset;
    k.nbytes = e.length;
  }
  return Status::Ok();
}

int64_t ManifestStore::ObjectNumber(std::string_view key) const {
  const Manifest::Entry e = manifest_->Find(Full(key));
  return e.kind == Manifest::Kind::kRange || e.kind == Manifest::Kind::kWhole ? static_cast<int64_t>(e.url) : -1;
}

MappedRange ManifestStore::Mapped(StoreObject& obj, uint64_t offset, uint64_t length) {
  auto* s = dynamic_cast<SliceObject*>(&obj);
  if (s == nullptr) return obj.resident ? MappedRange{} : targets_[0]->Mapped(obj, offset, length);
  if (s->whole) return targets_[s->store]->Mapped(*s->target, offset, length);
  if (offset > s->size || length > s->size - offset) return {};
  return targets_[s->store]->Mapped(*s->target, s->base + offset, length);
}

StoreTraits ManifestStore::traits() {
  StoreTraits t = Primary().traits();
  for (const auto& other : targets_) {  // several targets: what every one of them can take
    const StoreTraits o = other->traits();
    t.open_budget = std::min(t.open_budget, o.open_budget);
    t.one_at_a_time = t.one_at_a_time && o.one_at_a_time;
  }
  t.opens_on_read = false;  // Open resolves the reference (and opens the target object)
  t.confirm_early = false;
  return t;
}

}  // namespace lsio
