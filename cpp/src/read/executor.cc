// Executor: one read call from selections to output. Plans it, resolves chunk locations in
// waves (Resolve, WaveResolver), runs the worker loops (worker.h; a unit's decode and
// scatter are call.h and scatter.h) within the call's budgets (budget.h), and times it
// (LastCallProfile). Also the process's worker pool and SurveyChunks.
#include "read/executor.h"

#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <exception>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "codec/codec.h"
#include "read/budget.h"
#include "read/call.h"
#include "read/worker.h"
#include "source/sharded.h"
#include "util/process_local.h"
#include "util/strided_copy.h"  // StreamingThresholdBytes
#include "util/thread_pool.h"

namespace lsio {
namespace {

// The process's worker pool (rebuilt in a forked child; never joined at exit).
ProcessLocal<ThreadPool>* const g_pool = new ProcessLocal<ThreadPool>([] { return new ThreadPool(); });

std::string ObjectKey(const ArrayLayout& l, const int64_t* coords) { return ChunkKey(l.keys, coords, l.ndim()); }

// Codec buffers of the thread's DecodeScratch kept across calls, each (blosc's byte planes
// and frame copy: 4 MiB covers chunks up to 4 MiB without a new allocation per call).
constexpr size_t kCodecScratchKeepBytes = 4u << 20;

// Reads the objects of tasks `unsized` whole, all in flight at once (objects whose size the
// store learns only by reading them: remote unsharded chunks, whole-object references); the
// bytes stay with the object (resident) and the workers decode from there.
Status ReadWhole(const ReadContext& ctx, Plan* plan, const std::vector<uint32_t>& unsized) {
  const ArrayLayout& l = *ctx.layout;
  Store& store = *ctx.store;
  if (unsized.empty()) return Status::Ok();
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
    if (ctx.tuner != nullptr && r.status.ok()) ctx.tuner->AddSample(r.transferred, r.first_byte_s, r.total_s);
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

  if (!l.sharded && store.LocatesKeys()) {
    // A manifest (store/manifest.h): chunks are byte ranges of a few shared objects; one plan
    // file per object, so the planner merges neighbouring chunks into one read.
    std::vector<std::string> keys;
    keys.reserve(last - first);
    for (uint32_t i = first; i < last; ++i) keys.push_back(ObjectKey(l, plan->coords.data() + plan->tasks[i].coords));
    std::vector<KeyRange> where;
    if (Status st = store.Locate(keys, &where); !st.ok()) return st;
    std::unordered_map<const StoreObject*, int32_t> file_of;
    std::vector<uint32_t> unsized;  // whole-object references not sized yet (remote)
    for (uint32_t i = first; i < last; ++i) {
      ChunkTask& t = plan->tasks[i];
      KeyRange& k = where[i - first];
      if (k.object == nullptr) {
        t.missing = true;
        continue;
      }
      const bool sized = k.sized;
      auto it = file_of.find(k.object.get());
      if (it == file_of.end()) {
        const StoreObject* key = k.object.get();
        it = file_of.emplace(key, add_file(std::move(k.location), std::move(k.object))).first;
      }
      t.file = it->second;
      t.offset = k.offset;
      t.nbytes = k.nbytes;
      if (sized) LSIO_RETURN_IF_ERROR(CheckStoredSize(l, *plan, t));
      else unsized.push_back(i);
    }
    return ReadWhole(ctx, plan, unsized);
  }

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
    return ReadWhole(ctx, plan, unsized);
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
  ShardedSource source(l.shard, ctx.index_cache, &store, ctx.use_remembered);
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

// Splits a plan's tasks into waves that each hold at most `budget` files open, and resolves
// each wave (shard indexes, chunk files). A call touching more files than the descriptor
// budget allows thus runs in several rounds; tasks of one shard are mostly adjacent, so a
// shard is rarely opened twice.
class WaveResolver {
 public:
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
    if (!sharded && ctx_.store->LocatesKeys()) {
      // A manifest: chunks of objects already in the wave are free; a wave holds at most
      // `budget_` distinct objects open (a crop along time over thousands of daily files).
      std::unordered_set<int64_t> objects;
      for (; end < plan_->tasks.size(); ++end) {
        const int64_t o = ctx_.store->ObjectNumber(
            ObjectKey(*ctx_.layout, plan_->coords.data() + plan_->tasks[end].coords));
        if (o < 0 || objects.count(o) != 0) continue;
        if (objects.size() == budget_) break;
        objects.insert(o);
      }
    }
    for (; end < plan_->tasks.size() && !(!sharded && ctx_.store->LocatesKeys()); ++end) {
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
// `stream`: scatter chunks into the output with non-temporal stores (CopyStridedStreaming).
// `staged`: ctx.stage's call, where a staging buffer too small ends the call with
// staged->needed set.
Status RunPlan(const ReadContext& ctx, Plan& plan, bool stream, StagedBatch* staged = nullptr);

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

// A call that failed after the store served reads from what earlier processes kept (the
// disk cache's tails, Store::RememberedServed) may have failed because of them: a version
// that turned out stale, or the index of an array since re-created at the same path with
// another layout, which no longer decodes. It runs once more without any of it (the tails
// it adopted forgotten, the array's cached indexes dropped, none taken this time), writing
// every byte of the selection again; a genuine error then repeats and is returned. So a
// rewrite made before this process started is never an error in it.
template <typename F>
Status WithoutRememberedOnFailure(const ReadContext& ctx, F&& call) {
  const uint64_t served = ctx.store->RememberedServed();
  Status st = call(ctx);
  if (st.ok() || st.code() == StatusCode::kCancelled || ctx.store->RememberedServed() == served) return st;
  ctx.store->ForgetRemembered();
  if (ctx.index_cache != nullptr) ctx.index_cache->Clear();
  ReadContext again = ctx;
  again.use_remembered = false;
  return call(again);
}

// Times a whole call (planning, resolving, workers) into t_profile; RunPlan adds the time
// spent in RunOnWorkers (a call run again is timed as a whole).
template <typename F>
Status Profiled(const ReadContext& ctx, F&& call) {
  t_profile = CallProfile{};
  t_profile.stream_threshold_bytes = StreamingThresholdBytes();
  const auto t0 = ProfileClock::now();
  Status st = WithoutRememberedOnFailure(ctx, std::forward<F>(call));
  t_profile.total_ns = NsSince(t0);
  return st;
}
}  // namespace

CallProfile LastCallProfile() { return t_profile; }

Status ExecuteRead(const ReadContext& ctx, const BoxBatch& batch) {
  return Profiled(ctx, [&](const ReadContext& c) { return ExecuteReadImpl(c, batch); });
}

Status ExecuteRead(const ReadContext& ctx, const OuterSelection& sel) {
  return Profiled(ctx, [&](const ReadContext& c) { return ExecuteReadImpl(c, sel); });
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

Status ExecuteStage(const ReadContext& ctx_in, const BoxBatch& batch_in, std::span<uint8_t> staging, bool gpu_codecs,
                    StagedBatch* out) {
  return Profiled(ctx_in, [&](const ReadContext& ctx_run) -> Status {
    const ArrayLayout& l = *ctx_run.layout;
    if (l.ndim() > 64) return Status::Unimplemented("arrays of more than 64 dimensions");
    if (ctx_run.convert != nullptr) return Status::InvalidArgument("a staged read cannot convert elements");
    // The plan's output addresses are offsets from a base that is never written through:
    // the scatter ops carry them (relative to it) to a device the engine cannot address.
    static uint8_t base_anchor[1];
    BoxBatch batch = batch_in;
    batch.dst = base_anchor;
    batch.dsts = nullptr;
    LSIO_RETURN_IF_ERROR(CheckPlanBound(ctx_run, PlanBytesBound(l, batch)));
    Plan plan;
    const auto t_plan = ProfileClock::now();
    LSIO_RETURN_IF_ERROR(BuildTasks(l, batch, &plan, /*allow_direct=*/false, ctx_run.interrupted));
    t_profile.plan_ns += NsSince(t_plan);
    StageSink sink(staging, gpu_codecs, plan.tasks.size());
    ReadContext ctx = ctx_run;
    ctx.chunk_cache = nullptr;
    ctx.stage = &sink;
    *out = StagedBatch{};
    LSIO_RETURN_IF_ERROR(RunPlan(ctx, plan, /*stream=*/false, out));
    if (out->needed > 0) return Status::Ok();
    Status st = sink.Finish(l, plan, base_anchor, out);
    if (!st.ok() && sink.overflowed()) {
      *out = StagedBatch{};
      out->needed = sink.Bound(l, plan, 0);
      return Status::Ok();
    }
    return st;
  });
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

Status RunPlan(const ReadContext& ctx, Plan& plan, bool stream, StagedBatch* staged) {
  const ArrayLayout& l = *ctx.layout;
  const StoreTraits traits = ctx.store->traits();
  // With a chunk cache, chunk files are opened while resolving: their version keys the cache.
  // So are they for a staged call: its staging buffer is sized from their sizes.
  WaveResolver waves(ctx, &plan, traits, /*one_read=*/ctx.chunk_cache == nullptr && ctx.stage == nullptr);
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
    uint64_t need = 0;
    if (ctx.stage != nullptr && !ctx.stage->Fits(l, plan, first, last, &need)) {
      staged->needed = need + ctx.stage->Rest(l, plan, last);  // exact for a one-wave call
      return Status::Ok();
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
    if (cs.failed.load()) {
      if (ctx.stage != nullptr && ctx.stage->overflowed()) {  // CPU-staged frames took more room
        staged->needed = ctx.stage->Bound(l, plan, first);
        return Status::Ok();
      }
      return cs.error;
    }
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

Status SurveyChunksImpl(const ReadContext& ctx, std::vector<int64_t>* nbytes);

Status SurveyChunks(const ReadContext& ctx, std::vector<int64_t>* nbytes) {
  return WithoutRememberedOnFailure(ctx, [&](const ReadContext& c) { return SurveyChunksImpl(c, nbytes); });
}

Status SurveyChunksImpl(const ReadContext& ctx, std::vector<int64_t>* nbytes) {
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
    // Sizes from a remembered index (an adopted version) are reported only once the server
    // confirmed that version, as a read's bytes are.
    Status served = ctx.store->ConfirmServed(std::span<const ObjectRef>(plan.file_refs), [&ctx] {
      return ctx.interrupt_probe != nullptr && ctx.interrupt_probe();
    });
    if (!served.ok()) {
      if (served.error_number() == ESTALE) ShardedSource::Forget(ctx.index_cache, plan.shard_ids);
      return served;
    }
    for (uint32_t i = first; i < last; ++i) {
      const ChunkTask& t = plan.tasks[i];
      if (!t.missing) (*nbytes)[i] = static_cast<int64_t>(t.nbytes);
    }
  }
  return Status::Ok();
}

}  // namespace lsio
