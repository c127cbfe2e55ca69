// Executor: resolve chunk locations, then read + decode + scatter on the worker threads.
#include "read/executor.h"

#include <cxxabi.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <new>
#include <thread>
#include <mutex>
#include <optional>

#include "codec/codec.h"
#include "source/sharded.h"
#include "store/local_store.h"  // WidenForDirect
#include "util/aligned_buffer.h"
#include "util/process_local.h"
#include "util/strided_copy.h"
#include "util/thread_pool.h"

namespace lsio {
namespace {

// The process's worker pool (rebuilt in a forked child; never joined at exit).
ProcessLocal<ThreadPool>* const g_pool = new ProcessLocal<ThreadPool>([] { return new ThreadPool(); });

// Per-thread buffer for coalesced reads; plain memory, so it survives fork.
AlignedBuffer& ThreadIoArena() {
  thread_local AlignedBuffer arena;
  return arena;
}

std::string ObjectKey(const ArrayLayout& l, const int64_t* coords) { return ChunkKey(l.keys, coords, l.ndim()); }


// Largest read buffer a worker keeps between calls; bigger ones are freed after the call.
constexpr size_t kArenaKeepBytes = 16u << 20;
// Codec buffers of the thread's DecodeScratch kept across calls, each (blosc's byte planes
// and frame copy: 4 MiB covers chunks up to 4 MiB without a new allocation per call).
constexpr size_t kCodecScratchKeepBytes = 4u << 20;

// A stored chunk larger than its codec chain can produce for the chunk shape is corrupt;
// refusing it here keeps a bogus size (a sparse 1 TiB chunk file, a forged index entry)
// from becoming a read buffer.
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

// Unsharded chunks opened by their read (Store::OpenForOneRead) are read into a buffer of
// this many bytes, their size being unknown until then: all a chunk may hold. 0: chunks are
// opened and sized while resolving instead, where that buffer would be large (an open per
// file matters only for small chunks; a buffer sized by the bound and not by the file could
// be far larger than the file, up to unallocatable for a forged huge shape).
uint64_t OneReadCapacity(const ArrayLayout& l) {
  constexpr uint64_t kMaxCapacity = 16u << 20;
  const uint64_t bound = l.chain->stored_is_decoded() ? l.chain->decoded_size() : l.chain->max_stored_size();
  return bound <= kMaxCapacity ? bound : 0;
}

// Step 2: fill in file/offset/nbytes/missing for tasks [first, last). `shard_index` and
// `shard_file` are per plan shard and persist across waves (-2: not looked at yet).
// `one_read`: unsharded chunk files may be opened by their read (on the workers) instead of
// here; a task whose object is then has nbytes = OneReadCapacity until its read sizes it.
Status Resolve(const ReadContext& ctx, bool one_read, uint32_t first, uint32_t last, Plan* plan,
               std::vector<ShardIndexPtr>* shard_index_io, std::vector<int32_t>* shard_file_io) {
  const ArrayLayout& l = *ctx.layout;
  Store& store = *ctx.store;
  const int nd = l.ndim();

  auto add_file = [plan](std::string location, ObjectRef ref) {
    plan->files.push_back(std::move(location));
    plan->file_refs.push_back(std::move(ref));
    return static_cast<int32_t>(plan->files.size() - 1);
  };

  if (!l.sharded) {
    std::vector<uint32_t> unsized;  // tasks whose object size the store learns by reading it
    const uint64_t capacity = one_read ? OneReadCapacity(l) : 0;
    for (uint32_t i = first; i < last; ++i) {
      ChunkTask& t = plan->tasks[i];
      const std::string key = ObjectKey(l, plan->coords.data() + t.coords);
      auto ref = capacity != 0 ? store.OpenForOneRead(key) : store.Open(key);
      if (!ref.ok()) return Status(ref.status()).WithChunk(TaskCoords(*plan, t));
      if (ref.value() == nullptr) {
        t.missing = true;
        continue;
      }
      const bool sized = ref.value()->size_known;
      const bool on_read = ref.value()->open_on_read;
      t.offset = 0;
      t.nbytes = on_read ? capacity : ref.value()->size;
      t.file = add_file(store.Location(key), std::move(ref).value());
      if (on_read) continue;  // sized, checked (FinishOneRead) and found missing by its read
      if (sized) LSIO_RETURN_IF_ERROR(CheckStoredSize(l, *plan, t));
      else unsized.push_back(i);
    }
    if (unsized.empty()) return Status::Ok();
    // Whole-object reads, all in flight at once; the bytes stay with the object (resident)
    // and the workers decode from there.
    std::vector<RangeRead> reads(unsized.size());
    // A chunk larger than its codecs can produce is refused before its body is buffered.
    const uint64_t bound = l.chain->stored_is_decoded() ? l.chain->decoded_size() : l.chain->max_stored_size();
    for (size_t k = 0; k < unsized.size(); ++k) {
      reads[k].object = plan->file_refs[static_cast<size_t>(plan->tasks[unsized[k]].file)].get();
      reads[k].kind = ReadKind::kWhole;
      reads[k].max_length = std::max<uint64_t>(bound, 1);
    }
    Status first_error;
    store.Read(reads, [&](size_t k) {
      ChunkTask& t = plan->tasks[unsized[k]];
      RangeRead& r = reads[k];
      if (!first_error.ok()) return;
      if (r.too_large) {
        first_error = Status::DataLoss("stored chunk is larger than its codecs (" + l.chain->description() +
                                       ") can produce for a chunk of " + std::to_string(l.chain->decoded_size()) +
                                       " bytes (at most " + std::to_string(bound) + "): refused before reading it")
                          .WithPath(plan->files[static_cast<size_t>(t.file)])
                          .WithChunk(TaskCoords(*plan, t));
        return;
      }
      if (!r.status.ok()) {
        first_error = Status(r.status).WithPath(plan->files[static_cast<size_t>(t.file)]).WithChunk(TaskCoords(*plan, t));
        return;
      }
      if (r.missing) {
        t.missing = true;
        return;
      }
      StoreObject& obj = *r.object;
      obj.resident = std::make_shared<const std::string>(std::move(r.body));
      obj.size = obj.resident->size();
      obj.size_known = true;
      t.nbytes = obj.size;
      first_error = CheckStoredSize(l, *plan, t);
    }, [&ctx] { return ctx.interrupt_probe != nullptr && ctx.interrupt_probe(); });
    return first_error;
  }

  // Sharded: the shards touched in this wave, resolved by the chunk source (shard objects,
  // their indexes: source/sharded.h), then each task located in its shard.
  std::vector<ShardIndexPtr>& index = *shard_index_io;
  std::vector<int32_t>& shard_file = *shard_file_io;
  constexpr int32_t kPending = -3;  // asked for in this wave
  std::vector<ShardedSource::Shard> shards;
  std::vector<size_t> shard_slot;
  for (uint32_t i = first; i < last; ++i) {
    const size_t s = static_cast<size_t>(plan->tasks[i].shard);
    if (shard_file[s] == kPending) continue;
    if (shard_file[s] != -2 && (shard_file[s] == -1 || plan->file_refs[static_cast<size_t>(shard_file[s])])) continue;
    shard_file[s] = kPending;
    shards.push_back({plan->shard_ids[s], ObjectKey(l, plan->shard_coords.data() + s * static_cast<size_t>(nd))});
    shard_slot.push_back(s);
  }
  ShardedSource source(l.shard, ctx.index_cache, &store);
  LSIO_RETURN_IF_ERROR(source.Resolve(shards, [&ctx] { return ctx.interrupt_probe != nullptr && ctx.interrupt_probe(); }));
  for (size_t k = 0; k < shards.size(); ++k) {
    const size_t s = shard_slot[k];
    if (shards[k].object == nullptr) {
      shard_file[s] = -1;
      continue;
    }
    index[s] = std::move(shards[k].index);
    shard_file[s] = add_file(std::move(shards[k].location), std::move(shards[k].object));
  }
  for (uint32_t i = first; i < last; ++i) {
    ChunkTask& t = plan->tasks[i];
    const size_t s = static_cast<size_t>(t.shard);
    if (shard_file[s] < 0) {
      t.missing = true;
      continue;
    }
    const ChunkSpan c = ShardedSource::Locate(index[s], t.local);
    if (c.missing) {
      t.missing = true;
      continue;
    }
    t.file = shard_file[s];
    t.offset = c.offset;
    t.nbytes = c.nbytes;
    LSIO_RETURN_IF_ERROR(CheckStoredSize(l, *plan, t));
  }
  return Status::Ok();
}

// Per-call state shared by the workers.
struct CallState {
  const ReadContext* ctx;
  const Plan* plan;
  StoreTraits traits;  // the store's, read once per call
  uint64_t batch_bytes = 0;  // read buffer per worker batch (may be below ctx->batch_bytes)
  const std::vector<uint8_t>* fill = nullptr;  // fill element in the output's type
  int workers = 1;                             // threads working on this wave
  bool stream = false;  // scatter with non-temporal stores (an output larger than the cache)
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status error;
  std::thread::id caller = std::this_thread::get_id();
  std::chrono::steady_clock::time_point next_check = std::chrono::steady_clock::now();

  // On the calling thread only: poll the caller's interrupt check at most every 10 ms.
  bool Interrupted() {
    if (!ctx->interrupted || std::this_thread::get_id() != caller) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_check) return false;
    next_check = now + std::chrono::milliseconds(10);
    if (!ctx->interrupted()) return false;
    Fail(Status::Cancelled("read interrupted"));
    return true;
  }

  // While a remote batch waits on the network: failed elsewhere, or (calling thread only)
  // the user pressed Ctrl-C, seen by the probe without running any handler.
  bool StopWaiting() {
    if (failed.load(std::memory_order_relaxed)) return true;
    if (ctx->interrupt_probe == nullptr || std::this_thread::get_id() != caller) return false;
    if (!ctx->interrupt_probe()) return false;
    Fail(Status::Cancelled("read interrupted"));
    return true;
  }

  void Fail(Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (error.ok()) error = std::move(st);
    failed.store(true, std::memory_order_relaxed);
  }
};

// Outer plans: walks the product of a piece's per-axis segment groups and calls
// run(dst, dst_stride, src, src_stride, n) once per innermost segment (n elements along the
// last axis). `src` is the chunk (null for fills: src offsets are then meaningless). The
// segments of the axes before the last are walked element by element; the last axis's
// segments each become one strided run, which for slice-like selections is a whole row.
template <typename Run>
void WalkOuter(const Plan& plan, const Piece& pc, const int64_t* cstride, const uint8_t* src, Run&& run) {
  const OuterSelection& sel = *plan.outer;
  const int nd = plan.ndim;
  if (nd == 0) {
    run(sel.dst, 0, src, 0, 1);
    return;
  }
  const uint32_t* groups = plan.piece_groups.data() + pc.box;
  const int64_t* ostride = sel.byte_strides.data();
  const int last = nd - 1;
  const SegmentGroup& lg = plan.groups[groups[last]];
  const Segment* lsegs = plan.segments.data() + lg.first;
  auto row = [&](uint8_t* dst, const uint8_t* from) {
    for (uint32_t i = 0; i < lg.count; ++i) {
      const Segment& s = lsegs[i];
      run(dst + s.dst_first * ostride[last], s.dst_step * ostride[last],
          src != nullptr ? from + s.src_start * cstride[last] : nullptr, s.step * cstride[last], s.count);
    }
  };
  // Recursion over the axes before the last (depth <= 63).
  auto walk = [&](auto&& self, int d, uint8_t* dst, const uint8_t* from) -> void {
    if (d == last) {
      row(dst, from);
      return;
    }
    const SegmentGroup& grp = plan.groups[groups[d]];
    for (uint32_t i = 0; i < grp.count; ++i) {
      const Segment& s = plan.segments[grp.first + i];
      uint8_t* o = dst + s.dst_first * ostride[d];
      const uint8_t* f = src != nullptr ? from + s.src_start * cstride[d] : nullptr;
      for (int64_t k = 0; k < s.count; ++k) {
        self(self, d + 1, o, f);
        o += s.dst_step * ostride[d];
        if (f != nullptr) f += s.step * cstride[d];
      }
    }
  };
  walk(walk, 0, sel.dst, src);
}

// Chunk-internal C-order byte strides.
void ChunkStrides(const ArrayLayout& l, int64_t* cstride) {
  int64_t s = static_cast<int64_t>(l.itemsize);
  for (int d = l.ndim() - 1; d >= 0; --d) {
    cstride[d] = s;
    s *= l.chunk[static_cast<size_t>(d)];
  }
}

// Copies one innermost run of n elements (outer plans).
inline void CopyOneRun(const CallState& cs, uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n) {
  const int64_t shape[1] = {n};
  if (cs.ctx->convert != nullptr) {
    cs.ctx->convert(dst, ds, src, ss, n, cs.ctx->scale, cs.ctx->offset);
    return;
  }
  const size_t isz = cs.ctx->layout->itemsize;
  if (n == 1) {  // scattered gathers: one element per segment
    switch (isz) {
      case 1: *dst = *src; return;
      case 2: std::memcpy(dst, src, 2); return;
      case 4: std::memcpy(dst, src, 4); return;
      case 8: std::memcpy(dst, src, 8); return;
      default: std::memcpy(dst, src, isz); return;
    }
  }
  CopyStrided(dst, &ds, src, &ss, shape, 1, isz, 1);
}

// Copies the chunk at `src` (C order, chunk shape) into every piece except the direct one.
void Scatter(const CallState& cs, const ChunkTask& t, const uint8_t* src) {
  const ArrayLayout& l = *cs.ctx->layout;
  const Plan& plan = *cs.plan;
  const int nd = l.ndim();
  int64_t cstride[64];
  int64_t sstride[64];
  int64_t count[64];
  int64_t dims[3 * 64];
  ChunkStrides(l, cstride);
  for (uint32_t p = t.first_piece; p < t.first_piece + t.num_pieces; ++p) {
    const Piece& pc = plan.pieces[p];
    if (t.direct != nullptr && pc.dst == t.direct) continue;  // decoded in place
    if (plan.outer != nullptr) {
      WalkOuter(plan, pc, cstride, src, [&](uint8_t* d, int64_t ds, const uint8_t* f, int64_t ss, int64_t n) {
        CopyOneRun(cs, d, ds, f, ss, n);
      });
      continue;
    }
    PieceBoxDims(l, plan, pc, dims);
    const uint8_t* from = src;
    for (int d = 0; d < nd; ++d) {
      from += dims[3 * d] * cstride[d];
      count[d] = dims[3 * d + 1];
      sstride[d] = dims[3 * d + 2] * cstride[d];
    }
    const int64_t* dst_strides = plan.boxes->DstStrides(pc.box);
    if (cs.ctx->convert != nullptr) {
      ConvertStrided(cs.ctx->convert, pc.dst, dst_strides, from, sstride, count, nd,
                     cs.ctx->scale, cs.ctx->offset);
    } else if (cs.stream) {
      CopyStridedStreaming(pc.dst, dst_strides, from, sstride, count, nd, l.itemsize);
    } else {
      CopyStrided(pc.dst, dst_strides, from, sstride, count, nd, l.itemsize, 1);
    }
  }
}

void Fill(const CallState& cs, const ChunkTask& t) {
  const ArrayLayout& l = *cs.ctx->layout;
  const Plan& plan = *cs.plan;
  const int nd = l.ndim();
  int64_t count[64];
  int64_t dims[3 * 64];
  int64_t cstride[64];
  ChunkStrides(l, cstride);
  for (uint32_t p = t.first_piece; p < t.first_piece + t.num_pieces; ++p) {
    const Piece& pc = plan.pieces[p];
    if (plan.outer != nullptr) {
      WalkOuter(plan, pc, cstride, nullptr, [&](uint8_t* d, int64_t ds, const uint8_t*, int64_t, int64_t n) {
        const int64_t shape[1] = {n};
        FillStrided(d, &ds, shape, 1, cs.fill->data(), cs.fill->size());
      });
      continue;
    }
    PieceBoxDims(l, plan, pc, dims);
    for (int d = 0; d < nd; ++d) count[d] = dims[3 * d + 1];
    FillStrided(pc.dst, plan.boxes->DstStrides(pc.box), count, nd, cs.fill->data(), cs.fill->size());
  }
}

// in_writable: `in` is this task's own read buffer (CodecChain::Decode).
Status DecodeTask(const CallState& cs, const ChunkTask& t, std::span<const uint8_t> in, bool in_writable = false) {
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

Status WithContext(Status st, const Plan& plan, const ChunkTask& t) {
  st.WithPath(plan.files[static_cast<size_t>(t.file)]).WithChunk(TaskCoords(plan, t)).WithRange(t.offset, t.nbytes);
  return st;
}

// Decodes the tasks of `unit` from its bytes, which start at object offset `base_offset`.
void DecodeUnit(CallState& cs, const IoUnit& unit, const uint8_t* base, uint64_t base_offset) {
  const Plan& plan = *cs.plan;
  for (uint32_t k = 0; k < unit.num_tasks; ++k) {
    const ChunkTask& t = plan.tasks[plan.unit_tasks[unit.first_task + k]];
    if (cs.traits.remote) cs.ctx->store->stats().bytes_used.fetch_add(t.nbytes, std::memory_order_relaxed);
    std::span<const uint8_t> bytes(base + (t.offset - base_offset), t.nbytes);
    Status st = DecodeTask(cs, t, bytes);
    if (!st.ok()) {
      cs.Fail(WithContext(std::move(st), plan, t));
      return;
    }
  }
}

// A finished read of a chunk file opened by the read itself (unit = that one task, read into
// OneReadCapacity bytes): missing reads as fill; the size the read found is checked as
// Resolve checks sized chunks, then the chunk is decoded from the bytes read.
void FinishOneRead(CallState& cs, const IoUnit& unit, const RangeRead& r) {
  const Plan& plan = *cs.plan;
  const ArrayLayout& l = *cs.ctx->layout;
  ChunkTask t = plan.tasks[plan.unit_tasks[unit.first_task]];
  if (r.missing) {
    Fill(cs, t);
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
    st = DecodeTask(cs, t, std::span<const uint8_t>(r.dst, t.nbytes), /*in_writable=*/r.dst != unit.dst);
  }
  if (!st.ok()) cs.Fail(WithContext(std::move(st), plan, t));
}

// A finished read of `unit`: decodes it, or fails the call with the read's error.
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

// Units served without a read: fills, and objects fetched whole while resolving (remote
// unsharded chunks). Returns false when `unit` needs a read.
bool ServeWithoutRead(CallState& cs, const IoUnit& unit) {
  const Plan& plan = *cs.plan;
  if (unit.file < 0) {  // fills and cached chunks need no I/O
    for (uint32_t k = 0; k < unit.num_tasks; ++k) {
      const ChunkTask& t = plan.tasks[plan.unit_tasks[unit.first_task + k]];
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

// Read buffers of a remote worker's requests in flight, one per request slot; kept across
// calls (up to kArenaKeepBytes in all, see TrimRemoteBuffers).
std::vector<AlignedBuffer>& ThreadRemoteBuffers() {
  thread_local std::vector<AlignedBuffer> buffers;
  return buffers;
}

void TrimRemoteBuffers() {
  size_t kept = 0;
  for (AlignedBuffer& b : ThreadRemoteBuffers()) {
    if (kept + b.capacity() > kArenaKeepBytes) b.Trim(0);
    kept += b.capacity();
  }
}

// Local stores: each worker claims a batch of units, reads it (pread one by one, io_uring
// several in flight) and decodes each read as it completes.
void LocalWorkerLoop(CallState& cs) {
  const ReadContext& ctx = *cs.ctx;
  const Plan& plan = *cs.plan;
  const size_t n = plan.units.size();
  std::vector<RangeRead> reqs;
  std::vector<size_t> req_unit;
  const StoreTraits& traits = cs.traits;
  const size_t workers = static_cast<size_t>(std::max(1, cs.workers));
  // pread reads one unit at a time. io_uring wants several reads in flight, but a batch must
  // not swallow the whole call: a worker that grabs every unit leaves the others idle (seen
  // as threads=2 running no faster than 1), so batches are capped at a quarter of each
  // worker's share.
  const size_t share = std::max<size_t>(1, n / (4 * workers));
  const size_t in_flight = std::max(1u, traits.max_in_flight);
  const size_t max_batch = traits.one_at_a_time ? 1 : std::min<size_t>(in_flight, share);
  // A batch whose reads were all served inline from the page cache (inline_hit) gains
  // nothing from claiming several units at once and leaves the other workers idle at the end
  // of the call (W1 hot: 10% behind pread). So a worker claims one unit at a time while its
  // reads hit the page cache, and full batches once one does not (stores without inline
  // hits switch after their first unit).
  size_t batch_limit = 1;

  // Built once per call: a std::function per batch would allocate (its captures exceed the
  // small-buffer size), and batches are single units while reads hit the page cache.
  const std::function<void(size_t)> on_done = [&](size_t i) { FinishRead(cs, plan.units[req_unit[i]], reqs[i]); };

  // Between batches this thread holds no arena, scratch or ring state: the one place
  // where the interrupt poll (and whatever Python signal handler it runs) may happen.
  while (!cs.failed.load(std::memory_order_relaxed) && !cs.Interrupted()) {
    reqs.clear();
    req_unit.clear();
    uint64_t buffered = 0;
    while (reqs.size() < batch_limit && buffered < cs.batch_bytes) {
      const size_t u = cs.next.fetch_add(1, std::memory_order_relaxed);
      if (u >= n) break;
      const IoUnit& unit = plan.units[u];
      if (ServeWithoutRead(cs, unit)) continue;
      StoreObject& file = *plan.file_refs[static_cast<size_t>(unit.file)];
      RangeRead r;
      r.object = &file;
      r.offset = unit.offset;
      r.length = unit.length;
      r.dst = unit.dst;  // null: placed in the arena below
      r.pin_version = true;
      // An uncompressed chunk opened by its read is read (maybe straight into the output)
      // only when it has exactly the decoded size; FinishOneRead refuses any other.
      if (file.open_on_read && cs.ctx->layout->chain->stored_is_decoded()) r.min_size = unit.length;
      if (file.direct) {
        // Aligned reads land in the arena; uncompressed chunks are copied out from there.
        WidenForDirect(&r);
        r.dst = nullptr;
        buffered += r.length + kDirectAlignment;
      } else if (unit.dst == nullptr) {
        buffered += r.length;
      }
      reqs.push_back(r);
      req_unit.push_back(u);
    }
    if (reqs.empty()) break;

    AlignedBuffer& arena = ThreadIoArena();
    if (!arena.Reserve(buffered)) {
      cs.Fail(Status::ResourceExhausted("cannot allocate " + std::to_string(buffered) + " bytes for reads"));
      return;
    }
    uint64_t at = 0;
    for (RangeRead& r : reqs) {
      if (r.dst == nullptr) {
        if (r.min_length != 0) at = (at + kDirectAlignment - 1) & ~(kDirectAlignment - 1);
        r.dst = arena.data() + at;
        at += r.length;
      }
    }
    ctx.store->Read(reqs, on_done, [&cs] { return cs.StopWaiting(); });
    bool all_hits = true;
    for (const RangeRead& r : reqs) all_hits &= r.inline_hit || r.length == 0;
    batch_limit = all_hits ? 1 : max_batch;
  }
}

// Remote stores: every request waits a first-byte latency (~20 ms on S3), so each worker
// keeps its share of the call's request budget (request_concurrency / workers) in flight
// from start to end, starting the next unit as soon as one of its requests finishes. Batches
// that wait for their slowest request before the next batch starts left the link idle
// between batches (0.73x of a 100 MB/s link bound in W7, where TensorStore reached 0.80x).
// A worker's read buffers stay within cs.batch_bytes (one request may exceed it alone).
void RemoteWorkerLoop(CallState& cs) {
  const ReadContext& ctx = *cs.ctx;
  const Plan& plan = *cs.plan;
  const size_t n = plan.units.size();
  const size_t workers = static_cast<size_t>(std::max(1, cs.workers));
  const size_t slots = std::max<size_t>(1, (std::max<size_t>(1, cs.traits.max_in_flight) + workers - 1) / workers);
  std::vector<RangeRead> reads(slots);
  std::vector<size_t> read_unit(slots);
  // The chunk ranges each read serves (RangeRead::needed: a disk cache skips gap blocks).
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> needed(slots);
  std::vector<AlignedBuffer>& buffers = ThreadRemoteBuffers();
  if (buffers.size() < slots) buffers.resize(slots);
  std::vector<size_t> free_slots;
  for (size_t i = slots; i-- > 0;) free_slots.push_back(i);
  size_t in_flight = 0;
  uint64_t buffered = 0;
  constexpr size_t kNone = SIZE_MAX;
  size_t held = kNone;  // claimed, waiting for buffer room

  auto unit_buffer = [&](const IoUnit& unit) -> uint64_t { return unit.dst == nullptr ? unit.length : 0; };
  const std::function<RangeRead*()> next = [&]() -> RangeRead* {
    while (!cs.failed.load(std::memory_order_relaxed) && !free_slots.empty()) {
      size_t u = held;
      held = kNone;
      if (u == kNone) {
        u = cs.next.fetch_add(1, std::memory_order_relaxed);
        if (u >= n) return nullptr;
      }
      const IoUnit& unit = plan.units[u];
      if (ServeWithoutRead(cs, unit)) continue;
      const uint64_t bytes = unit_buffer(unit);
      if (in_flight > 0 && buffered + bytes > cs.batch_bytes) {
        held = u;  // asked again once a request finishes
        return nullptr;
      }
      StoreObject& file = *plan.file_refs[static_cast<size_t>(unit.file)];
      if (file.direct) {
        cs.Fail(Status::Internal("remote store with an O_DIRECT object").WithPath(plan.files[static_cast<size_t>(unit.file)]));
        return nullptr;
      }
      const size_t slot = free_slots.back();
      RangeRead& r = reads[slot];
      r = RangeRead();
      r.object = &file;
      r.offset = unit.offset;
      r.length = unit.length;
      r.dst = unit.dst;
      r.pin_version = true;
      needed[slot].clear();
      for (uint32_t k = 0; k < unit.num_tasks; ++k) {
        const ChunkTask& t = plan.tasks[plan.unit_tasks[unit.first_task + k]];
        needed[slot].emplace_back(t.offset, t.offset + t.nbytes);
      }
      std::sort(needed[slot].begin(), needed[slot].end());
      r.needed = needed[slot];
      if (r.dst == nullptr) {
        if (!buffers[slot].Reserve(bytes)) {
          cs.Fail(Status::ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes for a read"));
          return nullptr;
        }
        r.dst = buffers[slot].data();
      }
      free_slots.pop_back();
      read_unit[slot] = u;
      buffered += bytes;
      ++in_flight;
      return &r;
    }
    return nullptr;
  };
  const std::function<void(RangeRead&)> on_done = [&](RangeRead& r) {
    const size_t slot = static_cast<size_t>(&r - reads.data());
    const IoUnit& unit = plan.units[read_unit[slot]];
    FinishRead(cs, unit, r);
    buffered -= unit_buffer(unit);
    --in_flight;
    free_slots.push_back(slot);
  };
  // The interrupt poll (which may run Python signal handlers) happens only outside
  // ReadStream, when this thread holds no read state; inside, StopWaiting only probes.
  while (!cs.failed.load(std::memory_order_relaxed) && !cs.Interrupted()) {
    ctx.store->ReadStream(next, on_done, [&cs] { return cs.StopWaiting(); },
                          cs.traits.confirm_early ? std::span<const ObjectRef>(plan.file_refs)
                                                  : std::span<const ObjectRef>());
    if (held == kNone && cs.next.load(std::memory_order_relaxed) >= n) break;
  }
}

void WorkerLoopBody(CallState& cs) {
  if (cs.traits.remote) {
    RemoteWorkerLoop(cs);
  } else {
    LocalWorkerLoop(cs);
  }
}

// The entry point of every worker (the calling thread and pool helpers): exceptions end
// here and become the call's Status, since no exception may cross the pool's threads or
// leave the engine. The backend has drained its reads before an exception reaches this
// frame (io_backend.h), so nothing writes into the arena or the output afterwards.
void WorkerLoop(CallState& cs) {
  try {
    WorkerLoopBody(cs);
  } catch (abi::__forced_unwind&) {
    throw;  // thread exit (pthread_exit at interpreter shutdown): must unwind on
  } catch (const std::bad_alloc&) {
    cs.Fail(Status::ResourceExhausted("cannot allocate memory while reading (std::bad_alloc)"));
  } catch (const std::exception& e) {
    cs.Fail(Status::Internal(std::string("unexpected exception while reading: ") + e.what()));
  } catch (...) {
    cs.Fail(Status::Internal("unexpected exception while reading"));
  }
  ThreadIoArena().Trim(kArenaKeepBytes);
  TrimRemoteBuffers();
  ThreadDecodeScratch().TrimCodecBuffers(kCodecScratchKeepBytes);
}

std::string HumanBytes(uint64_t b) {
  return b >= (10ull << 20) ? std::to_string(b >> 20) + " MiB"
                            : b >= (10ull << 10) ? std::to_string(b >> 10) + " KiB" : std::to_string(b) + " bytes";
}

// Chooses workers and batch size so that the plan plus every worker's read buffer and decode
// scratch stay within ctx.memory_limit; fails before any read if even one worker cannot.
Status FitMemory(const ReadContext& ctx, const Plan& plan, int* workers, uint64_t* batch_bytes) {
  *batch_bytes = ctx.batch_bytes;
  if (ctx.memory_limit == 0) return Status::Ok();
  const CodecChain& chain = *ctx.layout->chain;
  uint64_t max_unit = 0;
  uint64_t total_buffered = 0;
  for (const IoUnit& u : plan.units) {
    if (u.file < 0 || u.dst != nullptr) continue;
    max_unit = std::max(max_unit, u.length);
    total_buffered += u.length;
  }
  // Decoded chunk + two ping-pong stage buffers (each at most about the decoded size), and
  // what codecs keep of their own (blosc's byte planes and frame copy).
  const uint64_t scratch = chain.decode_scratch_bytes();
  const uint64_t plan_bytes = plan.tasks.capacity() * sizeof(ChunkTask) + plan.pieces.capacity() * sizeof(Piece) +
                              plan.coords.capacity() * sizeof(int64_t) + plan.segments.capacity() * sizeof(Segment) +
                              plan.groups.capacity() * sizeof(SegmentGroup) +
                              plan.piece_groups.capacity() * sizeof(uint32_t) +
                              plan.units.capacity() * sizeof(IoUnit) + plan.unit_tasks.capacity() * sizeof(uint32_t);
  uint64_t need = 0;
  for (int w = *workers; w >= 1; --w) {
    for (uint64_t batch : {ctx.batch_bytes, uint64_t{1}}) {
      const uint64_t arena = std::min(total_buffered, batch + max_unit);
      uint64_t per_worker = 0;
      if (__builtin_add_overflow(arena, scratch, &per_worker) ||
          __builtin_mul_overflow(per_worker, static_cast<uint64_t>(w), &need) ||
          __builtin_add_overflow(need, plan_bytes, &need)) {
        need = UINT64_MAX;
      }
      if (need <= ctx.memory_limit) {
        *workers = w;
        *batch_bytes = batch;
        return Status::Ok();
      }
    }
  }
  const auto human = HumanBytes;
  return Status::ResourceExhausted("this read needs about " + human(need) + " of buffers (largest read " +
                                   human(max_unit) + ", decoded chunk " + human(chain.decoded_size()) +
                                   "), over the memory limit of " + human(ctx.memory_limit) +
                                   ": read a smaller region, lower max_request, or raise memory_limit");
}

// Splits a plan's tasks into waves that each hold at most `budget` files open, and resolves
// each wave (shard indexes, chunk files). A call touching more files than the descriptor
// budget allows thus runs in several rounds; tasks of one shard are mostly adjacent, so a
// shard is rarely opened twice.
class WaveResolver {
 public:
  // Objects per wave. Unsharded chunks of a remote store are fetched whole while resolving
  // and held until the wave is decoded: keep that to what the workers have in flight anyway.
  static size_t WaveBudget(const ReadContext& ctx, const StoreTraits& traits, bool one_read) {
    // Chunk files opened by their reads hold a descriptor only while a worker reads them.
    if (one_read && traits.opens_on_read && !ctx.layout->sharded && OneReadCapacity(*ctx.layout) != 0) {
      return SIZE_MAX;
    }
    size_t budget = std::max<size_t>(4, traits.open_budget);
    if (traits.remote && !ctx.layout->sharded) {
      const size_t in_flight = static_cast<size_t>(std::max(1, ctx.threads)) * std::max(1u, traits.max_in_flight);
      budget = std::min(budget, std::max<size_t>(4, in_flight));
    }
    return budget;
  }

  // one_read: chunk files may be opened by their reads (Resolve); false when the call needs
  // every chunk's size from resolving alone (SurveyChunks).
  WaveResolver(const ReadContext& ctx, Plan* plan, const StoreTraits& traits, bool one_read)
      : ctx_(ctx),
        plan_(plan),
        one_read_(one_read),
        budget_(WaveBudget(ctx, traits, one_read)),
        shard_index_(plan->shard_ids.size()),
        shard_file_(plan->shard_ids.size(), -2),
        shard_wave_(plan->shard_ids.size(), UINT32_MAX) {}

  /// Resolves the next wave into [*first, *last); false when every task is done.
  Result<bool> Next(uint32_t* first, uint32_t* last) {
    // Release the previous wave's objects (a local store's cache may keep descriptors).
    for (ObjectRef& f : plan_->file_refs) f.reset();
    if (next_ >= plan_->tasks.size()) return false;
    const bool sharded = ctx_.layout->sharded;
    uint32_t end = next_;
    size_t opened = 0;
    for (; end < plan_->tasks.size(); ++end) {
      if (sharded) {
        const size_t s = static_cast<size_t>(plan_->tasks[end].shard);
        if (shard_wave_[s] == wave_) continue;
        if (opened == budget_) break;
        shard_wave_[s] = wave_;
      } else if (opened == budget_) {
        break;
      }
      ++opened;
    }
    LSIO_RETURN_IF_ERROR(Resolve(ctx_, one_read_, next_, end, plan_, &shard_index_, &shard_file_));
    *first = next_;
    *last = end;
    next_ = end;
    ++wave_;
    return true;
  }

 private:
  const ReadContext& ctx_;
  Plan* plan_;
  const bool one_read_;
  const size_t budget_;
  std::vector<ShardIndexPtr> shard_index_;
  std::vector<int32_t> shard_file_;
  std::vector<uint32_t> shard_wave_;
  uint32_t next_ = 0;
  uint32_t wave_ = 0;
};

// Fails before planning when even the plan's upper bound exceeds ctx.memory_limit.
Status CheckPlanBound(const ReadContext& ctx, const PlanBound& bound) {
  if (ctx.memory_limit == 0 || bound.bytes <= ctx.memory_limit) return Status::Ok();
  return Status::ResourceExhausted(
      "planning this read needs up to " + HumanBytes(bound.bytes) + " (" + std::to_string(bound.pieces) +
      " chunk pieces), over the memory limit of " + HumanBytes(ctx.memory_limit) +
      ": read fewer crops or indices at once, or raise memory_limit");
}

// `stream`: scatter chunks into the output with non-temporal stores (CopyStridedStreaming).
Status RunPlan(const ReadContext& ctx, Plan& plan, bool stream);

}  // namespace

Status ExecuteRead(const ReadContext& ctx, const std::vector<Selection>& sels,
                   const std::vector<DstView>& dsts) {
  BoxBatchStorage storage(sels, dsts);
  storage.batch.ndim = ctx.layout->ndim();
  return ExecuteRead(ctx, storage.batch);
}

// The calls themselves (ExecuteRead wraps them to time them).
Status ExecuteReadImpl(const ReadContext& ctx, const BoxBatch& batch);
Status ExecuteReadImpl(const ReadContext& ctx, const OuterSelection& sel);

namespace {
thread_local CallProfile t_profile;  // the last call of this thread (LastCallProfile)
using ProfileClock = std::chrono::steady_clock;

uint64_t NsSince(ProfileClock::time_point t0) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(ProfileClock::now() - t0).count());
}

// Times a whole call (planning, resolving, workers) into t_profile; RunPlan adds the time
// spent in RunOnWorkers.
template <typename F>
Status Profiled(F&& call) {
  t_profile = CallProfile{};
  t_profile.stream_threshold_bytes = StreamingThresholdBytes();
  const auto t0 = ProfileClock::now();
  Status st = call();
  t_profile.total_ns = NsSince(t0);
  return st;
}
}  // namespace

CallProfile LastCallProfile() { return t_profile; }

Status ExecuteRead(const ReadContext& ctx, const BoxBatch& batch) {
  return Profiled([&] { return ExecuteReadImpl(ctx, batch); });
}

Status ExecuteRead(const ReadContext& ctx, const OuterSelection& sel) {
  return Profiled([&] { return ExecuteReadImpl(ctx, sel); });
}

Status ExecuteReadImpl(const ReadContext& ctx, const BoxBatch& batch) {
  const ArrayLayout& l = *ctx.layout;
  if (l.ndim() > 64) return Status::Unimplemented("arrays of more than 64 dimensions");
  LSIO_RETURN_IF_ERROR(CheckPlanBound(ctx, PlanBytesBound(l, batch)));
  Plan plan;
  const auto t_plan = ProfileClock::now();
  LSIO_RETURN_IF_ERROR(BuildTasks(l, batch, &plan, /*allow_direct=*/ctx.convert == nullptr, ctx.interrupted));
  t_profile.plan_ns += NsSince(t_plan);
  // A batch whose output exceeds what the cache keeps is scattered with non-temporal stores:
  // cached stores would first read each output line from memory only to overwrite it (W8,
  // 16 MiB of crops per call: 1.09-1.18x). Smaller outputs stay cached for the caller.
  const size_t out_isz = ctx.convert != nullptr ? ctx.out_itemsize : l.itemsize;
  uint64_t out_bytes = 0;
  for (size_t b = 0; b < batch.size && out_bytes < StreamingThresholdBytes(); ++b) {
    uint64_t n = out_isz;
    for (int d = 0; d < batch.ndim; ++d) n *= static_cast<uint64_t>(std::max<int64_t>(0, batch.Count(b, d)));
    out_bytes += n;
  }
  return RunPlan(ctx, plan, /*stream=*/out_bytes >= StreamingThresholdBytes());
}

Status ExecuteReadImpl(const ReadContext& ctx, const OuterSelection& sel) {
  const ArrayLayout& l = *ctx.layout;
  if (l.ndim() > 64) return Status::Unimplemented("arrays of more than 64 dimensions");
  LSIO_RETURN_IF_ERROR(CheckPlanBound(ctx, PlanBytesBound(l, sel)));
  Plan plan;
  const auto t_plan = ProfileClock::now();
  LSIO_RETURN_IF_ERROR(BuildTasks(l, sel, &plan, /*allow_direct=*/ctx.convert == nullptr));
  t_profile.plan_ns += NsSince(t_plan);
  return RunPlan(ctx, plan, /*stream=*/false);  // outer plans copy runs of any length
}

namespace {

// Marks the wave's resolved chunks that the chunk cache holds (a decoded copy of this very
// object version and byte range); they are served without a read.
void LookUpCached(const ReadContext& ctx, uint32_t first, uint32_t last, Plan* plan) {
  for (uint32_t i = first; i < last; ++i) {
    ChunkTask& t = plan->tasks[i];
    if (t.missing || t.file < 0) continue;
    const size_t f = static_cast<size_t>(t.file);
    const StoreObject* obj = plan->file_refs[f].get();
    if (obj == nullptr || obj->version.empty()) continue;
    auto hit = ctx.chunk_cache->Find(
        ChunkCacheKey(ctx.cache_namespace, plan->files[f], obj->version, t.offset, t.nbytes));
    if (hit == nullptr || hit->size != ctx.layout->chain->decoded_size()) continue;
    t.cached = static_cast<int32_t>(plan->cached_chunks.size());
    plan->cached_chunks.push_back(std::move(hit));
  }
}

Status RunPlan(const ReadContext& ctx, Plan& plan, bool stream) {
  const ArrayLayout& l = *ctx.layout;
  const StoreTraits traits = ctx.store->traits();
  // With a chunk cache, chunk files are opened while resolving: their version keys the cache.
  WaveResolver waves(ctx, &plan, traits, /*one_read=*/ctx.chunk_cache == nullptr);
  const int max_workers = std::max(1, ctx.threads);
  // The fill element as the output stores it.
  std::vector<uint8_t> fill = l.fill;
  if (ctx.convert != nullptr) {
    fill.assign(ctx.out_itemsize, 0);
    ctx.convert(fill.data(), 0, l.fill.data(), 0, 1, ctx.scale, ctx.offset);
  }
  uint32_t first = 0;
  uint32_t last = 0;
  for (;;) {
    if (ctx.interrupted && ctx.interrupted()) return Status::Cancelled("read interrupted");
    const auto t_resolve = ProfileClock::now();
    LSIO_ASSIGN_OR_RETURN(bool more, waves.Next(&first, &last));
    if (!more) break;

    if (ctx.chunk_cache != nullptr) LookUpCached(ctx, first, last, &plan);
    t_profile.resolve_ns += NsSince(t_resolve);
    // Uncompressed chunks must have exactly the decoded size; say so before reading.
    if (l.chain->stored_is_decoded()) {
      for (uint32_t i = first; i < last; ++i) {
        const ChunkTask& t = plan.tasks[i];
        if (!t.missing && t.cached < 0 && t.nbytes != l.chain->decoded_size()) {
          return WithContext(Status::DataLoss("uncompressed chunk has " + std::to_string(t.nbytes) +
                                              " bytes, expected " + std::to_string(l.chain->decoded_size())),
                             plan, t);
        }
      }
    }
    plan.units.clear();
    plan.unit_tasks.clear();
    const auto t_coalesce = ProfileClock::now();
    Coalesce(l, ctx.plan, first, last, &plan);
    t_profile.coalesce_ns += NsSince(t_coalesce);

    CallState cs;
    cs.ctx = &ctx;
    cs.plan = &plan;
    cs.traits = traits;
    cs.fill = &fill;
    cs.stream = stream;
    int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(max_workers), plan.units.size()));
    LSIO_RETURN_IF_ERROR(FitMemory(ctx, plan, &workers, &cs.batch_bytes));
    ThreadPool* pool = nullptr;
    if (workers > 1) {
      // Threads that cannot be created (no room for a stack under RLIMIT_AS, EAGAIN) mean
      // fewer workers, not an error: the calling thread can always work.
      pool = &ProcessWorkerPool();
      workers = 1 + std::min(workers - 1, pool->EnsureThreads(workers - 1));
    }
    cs.workers = workers;
    const auto t_workers = ProfileClock::now();
    RunOnWorkers(pool, workers - 1, [&cs] { WorkerLoop(cs); });
    t_profile.workers_ns += NsSince(t_workers);
    t_profile.waves += 1;
    t_profile.workers = std::max(t_profile.workers, workers);
    t_profile.units += plan.units.size();
    t_profile.streamed = stream;
    if (cs.failed.load()) return cs.error;
    // Bytes the store served for adopted versions without asking the server (disk cache,
    // chunk cache) count only once the server confirmed those versions.
    Status served = ctx.store->ConfirmServed(std::span<const ObjectRef>(plan.file_refs), [&ctx] {
      return ctx.interrupt_probe != nullptr && ctx.interrupt_probe();
    });
    if (!served.ok()) {
      if (served.error_number() == ESTALE) {
        ShardedSource::Forget(ctx.index_cache, plan.shard_ids);  // the next call reads them anew
      }
      return served;
    }
  }
  return Status::Ok();
}

}  // namespace

ThreadPool& ProcessWorkerPool() { return g_pool->Get(); }

Status SurveyChunks(const ReadContext& ctx, std::vector<int64_t>* nbytes) {
  const ArrayLayout& l = *ctx.layout;
  const int nd = l.ndim();
  // One selection over the whole array; its tasks come out in C order of the chunk grid.
  Selection all(static_cast<size_t>(nd));
  DstView none;
  none.shape.resize(static_cast<size_t>(nd));
  none.byte_strides.assign(static_cast<size_t>(nd), 0);
  uint64_t total = 1;
  for (int d = 0; d < nd; ++d) {
    all[static_cast<size_t>(d)] = {0, l.shape[static_cast<size_t>(d)], 1};
    none.shape[static_cast<size_t>(d)] = l.shape[static_cast<size_t>(d)];
    total *= static_cast<uint64_t>(l.grid[static_cast<size_t>(d)]);
  }
  if (total > (1ull << 31)) return Status::ResourceExhausted("more than 2^31 chunks to survey");
  Plan plan;
  LSIO_RETURN_IF_ERROR(BuildTasks(l, std::vector<Selection>{all}, std::vector<DstView>{none}, &plan));
  nbytes->assign(plan.tasks.size(), -1);
  WaveResolver waves(ctx, &plan, ctx.store->traits(), /*one_read=*/false);  // sizes wanted
  uint32_t first = 0;
  uint32_t last = 0;
  for (;;) {
    LSIO_ASSIGN_OR_RETURN(bool more, waves.Next(&first, &last));
    if (!more) break;
    for (uint32_t i = first; i < last; ++i) {
      const ChunkTask& t = plan.tasks[i];
      if (!t.missing) (*nbytes)[i] = static_cast<int64_t>(t.nbytes);
    }
  }
  return Status::Ok();
}

}  // namespace lsio
