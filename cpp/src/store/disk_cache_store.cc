// DiskCacheStore (see disk_cache_store.h): blocks served from disk, the rest through the
// wrapped store, fetched blocks kept.
#include "store/disk_cache_store.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <utility>

namespace lsio {
namespace {

// Only reads pinned to a version that names its bytes (a strong ETag the wrapped store does
// not know to have changed); an adopted one is confirmed by the wrapped store before the
// call ends.
bool Cacheable(const RangeRead& r, const Store& inner) {
  return r.kind == ReadKind::kRange && r.pin_version && r.object != nullptr && r.length > 0 && r.dst != nullptr &&
         inner.VersionIdentifiesBytes(*r.object);
}

}  // namespace

// The disk cache stores aligned blocks of kDiskBlock bytes (the last block of an object may
// be shorter), so what one call cached serves any later read of the same bytes, whatever
// its coalescing: a read is served when every block it overlaps is on disk; otherwise it
// is widened to whole blocks for its request (at most 2 x kDiskBlock more bytes) and every
// block is kept.
namespace {
constexpr uint64_t kDiskBlock = 64 << 10;
// Fetched blocks held for writing at the end of a Read/ReadStream call, at most this much.
constexpr uint64_t kPendingLimit = 256ull << 20;
// Adopted tails remembered for erasing (DiskCacheStore::Stale), at most this many URLs.
constexpr size_t kMaxAdopted = 1 << 16;

// [first block start, end of last block) of r's bytes, clipped to the object.
std::pair<uint64_t, uint64_t> BlockSpan(const RangeRead& r) {
  const uint64_t a = r.offset / kDiskBlock * kDiskBlock;
  const uint64_t end = r.offset + r.length;
  const uint64_t b = std::min((end + kDiskBlock - 1) / kDiskBlock * kDiskBlock, r.object->size);
  return {a, b};
}
}  // namespace

bool DiskCacheStore::ServeFromDisk(RangeRead& r, Widening* w) {
  if (!Cacheable(r, *inner_) || !r.object->size_known) return false;
  if (r.offset + r.length > r.object->size) return false;  // the server reports that error
  const auto [a, b] = BlockSpan(r);
  const std::string url = inner_->Identity(*r.object);
  if (url.empty()) return false;
  thread_local std::vector<uint8_t> block;
  const uint64_t end = r.offset + r.length;
  uint64_t first_missing = UINT64_MAX, last_missing = 0;
  size_t nk = 0;  // first needed span that may still overlap a block
  for (uint64_t at = a; at < b; at += kDiskBlock) {
    const uint64_t len = std::min(kDiskBlock, b - at);
    if (!r.needed.empty()) {  // blocks holding only gap bytes are neither read nor fetched
      while (nk < r.needed.size() && r.needed[nk].second <= at) ++nk;
      if (nk == r.needed.size() || r.needed[nk].first >= at + len) continue;
    }
    bool hit;
    if (at >= r.offset && at + len <= end) {  // inside the read: straight into dst
      hit = cache_->Get(url, r.object->version, at, len, r.dst + (at - r.offset));
    } else {
      block.resize(static_cast<size_t>(len));
      hit = cache_->Get(url, r.object->version, at, len, block.data());
      if (hit) {
        const uint64_t from = std::max(at, r.offset);
        const uint64_t to = std::min(at + len, end);
        std::memcpy(r.dst + (from - r.offset), block.data() + (from - at), static_cast<size_t>(to - from));
      }
    }
    if (!hit) {
      first_missing = std::min(first_missing, at);
      last_missing = at + len;
    }
  }
  if (first_missing == UINT64_MAX) {
    r.status = Status::Ok();
    r.missing = false;
    r.transferred = r.length;
    inner_->stats().disk_cache_hits.fetch_add(1, std::memory_order_relaxed);
    inner_->stats().disk_cache_bytes.fetch_add(r.length, std::memory_order_relaxed);
    return true;
  }
  // Fetch only the blocks from the first missing one to the last (whole blocks, kept after).
  w->offset = r.offset;
  w->length = r.length;
  w->dst = r.dst;
  w->buffer.reset(new uint8_t[last_missing - first_missing]);
  r.offset = first_missing;
  r.length = last_missing - first_missing;
  r.dst = w->buffer.get();
  return false;
}

bool DiskCacheStore::ServeTail(RangeRead& r) {
  if (r.kind != ReadKind::kSuffix || !r.confirmed_later || r.object == nullptr || r.object->size_known ||
      r.dst == nullptr || r.length == 0) {
    return false;
  }
  const std::string url = inner_->Identity(*r.object);
  if (url.empty()) return false;
  std::optional<DiskCache::Tail> tail = cache_->GetTail(url);
  if (!tail) return false;
  const uint64_t n = std::min(r.length, tail->size);
  if (tail->bytes.size() < n || !inner_->AdoptVersion(*r.object, tail->version, tail->size)) return false;
  r.object->remembered = true;
  remembered_served_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard<std::mutex> lock(adopted_mu_);
    if (adopted_.size() >= kMaxAdopted) adopted_.clear();  // forgetting only costs a second retry
    adopted_.insert(url);
  }
  std::memcpy(r.dst, tail->bytes.data() + (tail->bytes.size() - n), static_cast<size_t>(n));
  r.status = Status::Ok();
  r.missing = false;
  r.transferred = n;
  inner_->stats().disk_cache_hits.fetch_add(1, std::memory_order_relaxed);
  inner_->stats().disk_cache_bytes.fetch_add(n, std::memory_order_relaxed);
  return true;
}

void DiskCacheStore::Stale(const StoreObject& obj) {
  // The tail goes whoever adopted the version (another process may have kept the same one).
  cache_->EraseTail(inner_->Identity(obj));
  if (obj.remembered) ForgetRemembered();
}

void DiskCacheStore::ForgetRemembered() {
  std::unordered_set<std::string> adopted;
  {
    std::lock_guard<std::mutex> lock(adopted_mu_);
    adopted.swap(adopted_);
  }
  for (const std::string& url : adopted) cache_->EraseTail(url);
}

void DiskCacheStore::AfterInner(const RangeRead& r, Pending* pending) {
  if (r.object == nullptr) return;
  if (r.status.error_number() == ESTALE) {
    Stale(*r.object);
    return;
  }
  if (r.kind == ReadKind::kSuffix && r.keep_tail && r.status.ok() && !r.missing && r.object->size_known &&
      r.transferred > 0 && inner_->VersionIdentifiesBytes(*r.object)) {
    DiskCache::Tail t{r.object->version, r.object->size,
                      std::string(reinterpret_cast<const char*>(r.dst), static_cast<size_t>(r.transferred))};
    pending->tails.emplace_back(inner_->Identity(*r.object), std::move(t));
  }
}

Status DiskCacheStore::ConfirmServed(std::span<const ObjectRef> objects, const std::function<bool()>& cancelled) {
  Status st = inner_->ConfirmServed(objects, cancelled);
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(adopted_mu_);
    for (const ObjectRef& o : objects) {
      if (o != nullptr && o->remembered && !adopted_.empty()) adopted_.erase(inner_->Identity(*o));
    }
  }
  if (st.error_number() == ESTALE) {
    // The changed ones among the objects that could have tails (strong versions, which then
    // no longer identify their bytes).
    for (const ObjectRef& o : objects) {
      if (o == nullptr) continue;
      const std::string& v = o->version;
      const bool strong = v.size() >= 2 && v.front() == '"' && v.back() == '"';
      if (strong && o->size_known && !inner_->VersionIdentifiesBytes(*o)) Stale(*o);
    }
  }
  return st;
}

void DiskCacheStore::Keep(RangeRead& r, Widening* w, Pending* pending) {
  if (w->dst == nullptr) return;  // not widened: not cacheable
  const bool ok = r.status.ok() && !r.missing && r.transferred == r.length;
  if (ok) {
    // Written after the call's requests (WritePending), not here: a write in this callback
    // would hold up every other request in flight (cold W7: 0.68x of no cache, written here).
    pending->spans.push_back({inner_->Identity(*r.object), r.object->version, r.offset, r.length, std::move(w->buffer)});
    pending->bytes += r.length;
    // The fetched span's part of what was asked (blocks before and after it came from disk).
    const uint64_t from = std::max(r.offset, w->offset);
    const uint64_t to = std::min(r.offset + r.length, w->offset + w->length);
    if (to > from) std::memcpy(w->dst + (from - w->offset), r.dst + (from - r.offset), static_cast<size_t>(to - from));
  }
  // The caller sees the read it asked for.
  r.offset = w->offset;
  r.length = w->length;
  r.dst = w->dst;
  if (ok) r.transferred = w->length;
  w->dst = nullptr;
  w->buffer.reset();
  if (pending->bytes > kPendingLimit) WritePending(pending);  // bounds the memory held
}

void DiskCacheStore::WritePending(Pending* pending) {
  std::vector<DiskCache::Block> blocks;
  for (Pending::Span& sp : pending->spans) {
    for (uint64_t at = sp.offset; at < sp.offset + sp.length; at += kDiskBlock) {
      const uint64_t len = std::min(kDiskBlock, sp.offset + sp.length - at);
      blocks.push_back({&sp.id, &sp.version, at, len, sp.bytes.get() + (at - sp.offset)});
    }
  }
  std::vector<DiskCache::TailEntry> tails;
  for (const auto& [url, tail] : pending->tails) tails.push_back({&url, &tail});
  if (!blocks.empty() || !tails.empty()) cache_->PutBatch(blocks, tails);
  pending->spans.clear();
  pending->tails.clear();
  pending->bytes = 0;
}


void DiskCacheStore::Read(std::span<RangeRead> reads, const std::function<void(size_t)>& on_done,
                          const std::function<bool()>& cancelled) {
  // Reads whose blocks are all on disk finish at once; the rest go to the wrapped store in
  // one batch, widened to whole blocks.
  std::vector<size_t> rest;
  std::vector<Widening> widened(reads.size());
  for (size_t i = 0; i < reads.size(); ++i) {
    if (ServeTail(reads[i]) || ServeFromDisk(reads[i], &widened[i])) on_done(i);
    else rest.push_back(i);
  }
  if (rest.empty()) return;
  std::vector<RangeRead> inner_reads(rest.size());
  for (size_t k = 0; k < rest.size(); ++k) inner_reads[k] = std::move(reads[rest[k]]);
  Pending pending;
  inner_->Read(inner_reads, [&](size_t k) {
    RangeRead& r = reads[rest[k]];
    r = std::move(inner_reads[k]);
    AfterInner(r, &pending);
    Keep(r, &widened[rest[k]], &pending);
    on_done(rest[k]);
  }, cancelled);
  WritePending(&pending);
}

void DiskCacheStore::ReadStream(const std::function<RangeRead*()>& next, const std::function<void(RangeRead&)>& on_done,
                                const std::function<bool()>& cancelled, std::span<const ObjectRef> confirm) {
  std::unordered_map<const RangeRead*, Widening> widened;  // reads in flight that were widened
  Pending pending;
  inner_->ReadStream(
      [&]() -> RangeRead* {
        // Reads the disk holds finish here, inline, while the wrapped store's requests (the
        // confirmations of adopted versions first) are in flight.
        for (;;) {
          RangeRead* r = next();
          if (r == nullptr) return nullptr;
          Widening w;
          if (ServeTail(*r) || ServeFromDisk(*r, &w)) {
            on_done(*r);
            continue;
          }
          if (w.dst != nullptr) widened[r] = std::move(w);
          return r;
        }
      },
      [&](RangeRead& r) {
        AfterInner(r, &pending);
        if (auto it = widened.find(&r); it != widened.end()) {
          Keep(r, &it->second, &pending);
          widened.erase(it);
        }
        on_done(r);
      },
      cancelled, confirm);
  WritePending(&pending);
}

}  // namespace lsio
