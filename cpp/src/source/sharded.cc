// ShardedSource (see sharded.h): shard objects, their indexes, and where inner chunks lie.
#include "source/sharded.h"

#include <string>
#include <utility>

#include "store/local_store.h"  // WidenForDirect
#include "util/aligned_buffer.h"

namespace lsio {
namespace {

Status ShorterThanIndex(uint64_t size, uint64_t index_size, const std::string& location) {
  return Status::DataLoss("shard is " + std::to_string(size) + " bytes, shorter than its " +
                          std::to_string(index_size) + "-byte index")
      .WithPath(location);
}

}  // namespace

Status ShardedSource::Resolve(std::span<Shard> shards, const std::function<bool()>& cancelled) {
  Store& store = *store_;
  const bool remote = store.traits().remote;
  // Shards whose index must be read, with the read that fetches it.
  std::vector<RangeRead> reqs;
  std::vector<size_t> req_shard;
  // Shards that take a remembered version are not confirmed here: the chunk reads' stream
  // sends their confirmations first and serves disk hits meanwhile (Store::ReadStream's
  // `confirm`), and ConfirmServed catches the rest. Sent here, they held up every call
  // behind a round trip even when its indexes came from memory or the disk cache's tails
  // (W7 warm: 48-54 ms for the second call of a new process, 31 ms without).
  for (size_t s = 0; s < shards.size(); ++s) {
    Shard& sh = shards[s];
    sh.object.reset();
    sh.index.reset();
    auto ref = store.Open(sh.key);
    if (!ref.ok()) return ref.status();
    if (ref.value() == nullptr) continue;  // absent shard: all fill
    sh.object = std::move(ref).value();
    sh.location = store.Location(sh.key);
    StoreObject& f = *sh.object;
    RangeRead r;
    r.object = &f;
    r.length = shard_.index_size;
    if (f.size_known) {
      // Always through the cache, which checks that the index was decoded from this very
      // version (a shard reopened in a later wave may have been rewritten meanwhile).
      sh.index = cache_->Find(sh.id, f.version);
      if (sh.index) continue;
      if (f.size < shard_.index_size) return ShorterThanIndex(f.size, shard_.index_size, sh.location);
      r.kind = ReadKind::kRange;
      r.offset = shard_.IndexOffset(f.size);
    } else {
      // The store learns size and version only by reading. A cached index is used with the
      // version it came from if the store adopts that version (see the header comment);
      // else the index is read with a suffix (or prefix) range, which tells both.
      if (auto hit = cache_->FindAny(sh.id); hit && store.AdoptVersion(f, hit->version, hit->object_size)) {
        sh.index = hit->index;
        continue;
      }
      if (shard_.index_at_end) {
        r.kind = ReadKind::kSuffix;
        // Every caller confirms the versions of a wave's objects before it returns (the
        // executor's ConfirmServed), so a disk cache may answer from a kept tail.
        r.confirmed_later = remote && use_remembered_;
        r.keep_tail = remote;
      } else {
        r.kind = ReadKind::kRange;
        r.offset = 0;
      }
    }
    reqs.push_back(r);
    req_shard.push_back(s);
  }
  if (reqs.empty()) return Status::Ok();

  std::vector<AlignedBuffer> bufs(reqs.size());
  std::vector<uint64_t> skip(reqs.size(), 0);  // index bytes start here in the buffer
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i].object->direct) {
      const uint64_t want = reqs[i].offset;
      WidenForDirect(&reqs[i]);
      skip[i] = want - reqs[i].offset;
    }
    if (!bufs[i].Reserve(reqs[i].length)) return Status::ResourceExhausted("cannot allocate shard index buffers");
    reqs[i].dst = bufs[i].data();
  }
  Status first_error;
  std::vector<size_t> absent;  // let go of after the reads (their RangeReads point at them)
  auto on_index = [&](size_t i) {
    if (!first_error.ok()) return;
    Shard& sh = shards[req_shard[i]];
    const RangeRead& r = reqs[i];
    if (!r.status.ok()) {
      first_error = Status(r.status).WithPath(sh.location);
      return;
    }
    if (r.missing) {  // absent shard (a remote store learns it here)
      absent.push_back(req_shard[i]);
      return;
    }
    const StoreObject& obj = *r.object;
    if (!obj.size_known || obj.size < shard_.index_size || r.transferred < skip[i] + shard_.index_size) {
      first_error = ShorterThanIndex(obj.size, shard_.index_size, sh.location);
      return;
    }
    const uint64_t index_offset = shard_.IndexOffset(obj.size);
    const std::span<const uint8_t> bytes(bufs[i].data() + skip[i], shard_.index_size);
    auto decoded = DecodeShardIndex(bytes, shard_, obj.size);
    if (!decoded.ok()) {
      first_error = Status(decoded.status()).WithPath(sh.location).WithRange(index_offset, shard_.index_size);
      return;
    }
    sh.index = std::make_shared<const std::vector<ShardIndexEntry>>(std::move(decoded).value());
    if (remote) store.stats().bytes_used.fetch_add(shard_.index_size, std::memory_order_relaxed);
    cache_->Insert(sh.id, sh.index, obj.version, obj.size);
  };
  store.Read(reqs, on_index, cancelled);
  for (size_t s : absent) shards[s].object.reset();
  return first_error;
}

}  // namespace lsio
