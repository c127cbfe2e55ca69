// Per-call state and the decode of one read: checks a chunk's stored size, decodes it (into
// the output, a chunk-cache entry or the thread's scratch) and scatters it; see call.h.
#include "read/call.h"

#include <cerrno>
#include <cstring>

#include "codec/codec.h"
#include "io/file_map.h"
#include "read/scatter.h"
#include "read/stage.h"
#include "source/sharded.h"

namespace lsio {
namespace {

// in_writable: `in` is this task's own read buffer (CodecChain::Decode). A staged call
// (read/stage.h) leaves the chunk in the staging buffer instead of the output.
Status DecodeTask(const CallState& cs, uint32_t ti, std::span<const uint8_t> in, bool in_writable = false) {
  if (cs.ctx->stage != nullptr) return cs.ctx->stage->StageTask(cs, ti, in, in_writable);
  const ChunkTask& t = cs.plan->tasks[ti];
  const ArrayLayout& l = *cs.ctx->layout;
  DecodeScratch& scratch = ThreadDecodeScratch();
  const size_t n = static_cast<size_t>(l.chain->decoded_size());
  // With a chunk cache, a chunk that is not decoded into the output is decoded straight into
  // a new cache entry instead of the scratch buffer (no copy); one decoded into the output
  // is copied from there.
  std::string key;
  std::shared_ptr<CachedChunk> entry;
  if (cs.ctx->chunk_cache != nullptr && t.file >= 0 && !cs.plan->file_refs[static_cast<size_t>(t.file)]->version.empty()) {
    const size_t f = static_cast<size_t>(t.file);
    key = ChunkCacheKey(cs.ctx->cache_namespace, cs.plan->files[f], cs.plan->file_refs[f]->version, t.offset, t.nbytes);
    if (t.direct == nullptr && cs.ctx->chunk_cache->Fits(key, n)) entry = std::make_shared<CachedChunk>(n);
  }
  uint8_t* target = t.direct;
  if (entry != nullptr) {
    target = entry->bytes.get();
  } else if (target == nullptr) {
    if (!scratch.chunk.Reserve(n)) return Status::ResourceExhausted("cannot allocate a chunk buffer");
    target = scratch.chunk.data();
  }
  LSIO_RETURN_IF_ERROR(l.chain->Decode(in, target, scratch, in_writable));
  if (entry != nullptr) {
    cs.ctx->chunk_cache->Insert(key, ChunkCache::Chunk(entry));
  } else if (!key.empty()) {
    cs.ctx->chunk_cache->Insert(key, target, n);
  }
  Scatter(cs, t, target);
  return Status::Ok();
}

// A chunk found in the chunk cache: copied whole into the output where it is one
// contiguous run, and scattered into every other piece, as a decoded chunk would be.
void ServeCached(const CallState& cs, const ChunkTask& t) {
  const CachedChunk& chunk = *cs.plan->cached_chunks[static_cast<size_t>(t.cached)];
  if (t.direct != nullptr) std::memcpy(t.direct, chunk.data(), chunk.size);
  Scatter(cs, t, chunk.data());
}

// Decodes the tasks of `unit` from its bytes, which start at object offset `base_offset`;
// the first failure, with its file, chunk and range.
Status DecodeUnitTasks(CallState& cs, const IoUnit& unit, const uint8_t* base, uint64_t base_offset) {
  const Plan& plan = *cs.plan;
  for (uint32_t k = 0; k < unit.num_tasks; ++k) {
    const uint32_t ti = plan.unit_tasks[unit.first_task + k];
    const ChunkTask& t = plan.tasks[ti];
    if (cs.traits.remote) cs.ctx->store->stats().bytes_used.fetch_add(t.nbytes, std::memory_order_relaxed);
    std::span<const uint8_t> bytes(base + (t.offset - base_offset), t.nbytes);
    Status st = DecodeTask(cs, ti, bytes);
    if (!st.ok()) return WithContext(std::move(st), plan, t);
  }
  return Status::Ok();
}

void DecodeUnit(CallState& cs, const IoUnit& unit, const uint8_t* base, uint64_t base_offset) {
  Status st = DecodeUnitTasks(cs, unit, base, base_offset);
  if (!st.ok()) cs.Fail(std::move(st));
}

// A finished read of a chunk file opened by the read itself (unit = that one task, read into
// OneReadCapacity bytes): missing reads as fill; the size the read found is checked as
// Resolve checks sized chunks, then the chunk is decoded from the bytes read.
void FinishOneRead(CallState& cs, const IoUnit& unit, const RangeRead& r) {
  const Plan& plan = *cs.plan;
  const ArrayLayout& l = *cs.ctx->layout;
  const uint32_t ti = plan.unit_tasks[unit.first_task];
  ChunkTask t = plan.tasks[ti];
  if (r.missing) {
    if (cs.ctx->stage != nullptr) cs.ctx->stage->StageFill(ti);
    else Fill(cs, t);
    return;
  }
  t.nbytes = r.object->size;
  Status st;
  if (l.chain->stored_is_decoded() && t.nbytes != l.chain->decoded_size()) {
    st = Status::DataLoss("uncompressed chunk has " + std::to_string(t.nbytes) + " bytes, expected " +
                          std::to_string(l.chain->decoded_size()));
  } else if (t.nbytes > unit.length) {
    st = CheckStoredSize(l, plan, t);
  } else {
    // The file was read into a buffer of its own in the worker's arena, which nothing else
    // reads; unit.dst (the caller's array) only takes uncompressed chunks.
    st = DecodeTask(cs, ti, std::span<const uint8_t>(r.dst, t.nbytes), /*in_writable=*/r.dst != unit.dst);
  }
  if (!st.ok()) cs.Fail(WithContext(std::move(st), plan, t));
}

}  // namespace

AlignedBuffer& ThreadIoArena() {
  thread_local AlignedBuffer arena;
  return arena;
}

Status CheckStoredSize(const ArrayLayout& l, const Plan& plan, const ChunkTask& t) {
  const uint64_t bound = l.chain->max_stored_size();
  // Uncompressed chunks must match exactly; ExecuteRead says so with a clearer message.
  if (t.nbytes <= bound || l.chain->stored_is_decoded()) return Status::Ok();
  return Status::DataLoss("stored chunk has " + std::to_string(t.nbytes) + " bytes, more than its codecs (" +
                          l.chain->description() + ") can produce for a chunk of " +
                          std::to_string(l.chain->decoded_size()) + " bytes (at most " + std::to_string(bound) + ")")
      .WithPath(plan.files[static_cast<size_t>(t.file)])
      .WithChunk(TaskCoords(plan, t))
      .WithRange(t.offset, t.nbytes);
}

Status WithContext(Status st, const Plan& plan, const ChunkTask& t) {
  st.WithPath(plan.files[static_cast<size_t>(t.file)]).WithChunk(TaskCoords(plan, t)).WithRange(t.offset, t.nbytes);
  return st;
}

void FinishRead(CallState& cs, const IoUnit& unit, const RangeRead& r) {
  // No interrupt poll here: the poll may run Python signal handlers, which may read
  // through lsio on this thread, and this thread's arena, scratch and ring are live here.
  if (cs.failed.load(std::memory_order_relaxed)) return;
  const Plan& plan = *cs.plan;
  if (r.status.ok() && r.object->open_on_read) {
    FinishOneRead(cs, unit, r);
    return;
  }
  if (!r.status.ok() || r.missing) {
    const ChunkTask& t0 = plan.tasks[plan.unit_tasks[unit.first_task]];
    Status st = r.status.ok() ? Status::IoError("object disappeared since its index was read", ESTALE) : r.status;
    if (st.error_number() == ESTALE && t0.shard >= 0) {
      // The shard changed since its index was read: this call fails (never mixing
      // versions), and the next one reads the new indexes instead of failing again. Every
      // index of the call goes, not just this shard's: a writer rewrites many shards at
      // once, and the call after this one must not fail on the next of them.
      ShardedSource::Forget(cs.ctx->index_cache, plan.shard_ids);
    }
    st.WithPath(plan.files[static_cast<size_t>(unit.file)]);
    if (unit.num_tasks == 1) st.WithChunk(TaskCoords(plan, t0));
    cs.Fail(std::move(st));
    return;
  }
  DecodeUnit(cs, unit, r.dst, r.offset);
}

bool ServeWithoutRead(CallState& cs, const IoUnit& unit) {
  const Plan& plan = *cs.plan;
  if (unit.file < 0) {  // fills and cached chunks need no I/O
    for (uint32_t k = 0; k < unit.num_tasks; ++k) {
      const ChunkTask& t = plan.tasks[plan.unit_tasks[unit.first_task + k]];
      if (cs.ctx->stage != nullptr) continue;  // staged calls place fills when they finish
      if (t.cached >= 0) ServeCached(cs, t);
      else Fill(cs, t);
    }
    return true;
  }
  const StoreObject& file = *plan.file_refs[static_cast<size_t>(unit.file)];
  if (!file.resident) return false;
  if (unit.offset + unit.length > file.resident->size()) {
    cs.Fail(Status::Internal("unit outside its resident object").WithPath(plan.files[static_cast<size_t>(unit.file)]));
    return true;
  }
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(file.resident->data()) + unit.offset;
  if (unit.dst != nullptr) {  // uncompressed, straight into the output as a read would
    std::memcpy(unit.dst, bytes, unit.length);
    bytes = unit.dst;
  }
  DecodeUnit(cs, unit, bytes, unit.offset);
  return true;
}

InPlace ServeMapped(CallState& cs, const IoUnit& unit, int* guard) {
  // Staged (GPU) calls and calls with a chunk cache read: the map is checked once the whole
  // unit is decoded, and by then they would have staged or cached its chunks.
  if (cs.ctx->stage != nullptr || cs.ctx->chunk_cache != nullptr) return InPlace::kNo;
  const Plan& plan = *cs.plan;
  StoreObject& file = *plan.file_refs[static_cast<size_t>(unit.file)];
  const MappedRange m = cs.ctx->store->Mapped(file, unit.offset, unit.length);
  if (m.bytes == nullptr) return InPlace::kNo;
  if (*guard < 0) *guard = FileMap::GuardReady() ? 1 : 0;
  if (*guard == 0) return InPlace::kNo;
  Status st;
  {
    MapAccessGuard guard(*m.map);
    const uint8_t* bytes = m.bytes;
    if (unit.dst != nullptr) {  // uncompressed, straight into the output as a read would
      std::memcpy(unit.dst, bytes, unit.length);
      bytes = unit.dst;
    }
    st = DecodeUnitTasks(cs, unit, bytes, unit.offset);
  }
  if (!m.map->Unchanged()) {
    // What was decoded may hold zeros for a part of the file that went: void. The read
    // decodes the unit again over the same parts of the output.
    m.map->Retire();
    return InPlace::kRead;
  }
  if (!st.ok()) cs.Fail(std::move(st));
  return InPlace::kServed;
}

}  // namespace lsio
