// The byte-range executor (see ranges.h).
#include "read/ranges.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "read/executor.h"  // ProcessWorkerPool
#include "util/thread_pool.h"

namespace lsio {

RangePlan PlanRanges(std::span<const RangeTarget> targets, uint64_t max_gap, uint64_t max_request) {
  RangePlan plan;
  std::vector<uint32_t> order;
  order.reserve(targets.size());
  for (uint32_t i = 0; i < targets.size(); ++i) {
    if (targets[i].length > 0) order.push_back(i);  // empty targets read nothing
  }
  auto key = [&](uint32_t i) {
    const RangeTarget& t = targets[i];
    return std::make_tuple(t.object, t.offset, t.length);
  };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto ka = key(a);
    const auto kb = key(b);
    return ka != kb ? ka < kb : a < b;  // stable among identical ranges: the first reads
  });

  RangeUnit open;  // the staged unit being grown (count == 0: none)
  auto close_open = [&] {
    if (open.count == 0) return;
    if (open.count == 1) {
      // One target: read it straight into its buffer.
      open.target = plan.members[open.first];
      const RangeTarget& t = targets[open.target];
      plan.members.pop_back();
      open.dst = t.dst;
      open.count = 0;
      open.first = 0;
    }
    plan.units.push_back(open);
    open = RangeUnit{};
  };
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t i = order[k];
    const RangeTarget& t = targets[i];
    if (k > 0 && key(order[k - 1]) == key(i)) {
      // Identical to the previous one (which may itself be a copy: point at the original).
      uint32_t original = order[k - 1];
      if (!plan.duplicates.empty() && plan.duplicates.back().first == original) {
        original = plan.duplicates.back().second;
      }
      plan.duplicates.emplace_back(i, original);
      continue;
    }
    if (t.length > max_request) {
      // Split across workers (and requests), each piece straight into its slice.
      close_open();
      for (uint64_t done = 0; done < t.length; done += max_request) {
        RangeUnit u;
        u.object = t.object;
        u.offset = t.offset + done;
        u.length = std::min(max_request, t.length - done);
        u.dst = t.dst + done;
        u.target = i;
        plan.units.push_back(u);
      }
      continue;
    }
    const uint64_t end = t.offset + t.length;
    const uint64_t open_end = open.offset + open.length;
    if (open.count > 0 && open.object == t.object && (t.offset <= open_end || t.offset - open_end <= max_gap) &&
        std::max(end, open.offset + open.length) - open.offset <= max_request) {
      open.length = std::max(end, open.offset + open.length) - open.offset;
      plan.members.push_back(i);
      ++open.count;
      continue;
    }
    close_open();
    open.object = t.object;
    open.offset = t.offset;
    open.length = t.length;
    open.first = static_cast<uint32_t>(plan.members.size());
    open.count = 1;
    plan.members.push_back(i);
  }
  close_open();
  return plan;
}

namespace {

using Clock = std::chrono::steady_clock;

// The first error of a call, kept by whichever thread saw it first.
struct FirstError {
  std::mutex mu;
  std::atomic<bool> failed{false};
  Status status;
  void Set(Status st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed.load()) {
      status = std::move(st);
      failed.store(true);
    }
  }
};

// Everything one store's share of a call reads with.
struct StoreRun {
  Store* store = nullptr;
  StoreTraits traits;
  uint64_t max_gap = 0;
  uint64_t max_request = 0;
  std::vector<uint32_t> objects;       // call-wide object indices, ascending
  std::vector<RangeTarget> targets;    // this store's targets, `object` = call-wide index
  std::vector<uint32_t> ids;           // targets[j] is the call's target ids[j]
  std::vector<ObjectRef> refs;         // call-wide object index -> opened object (this store's)
  RangePlan plan;
  // With on_target: units of targets[j] not finished yet (a split target has several).
  std::unique_ptr<std::atomic<uint32_t>[]> pending;
  // Units read to size remote objects before every store's targets were checked: their
  // bytes wait here until the reads start (step 4), so a call that fails its checks has
  // written nothing of the caller's and reported nothing.
  std::vector<std::pair<size_t, std::unique_ptr<uint8_t[]>>> sized;
};

std::string Where(const StoreRun& run, const std::vector<RangeObject>& objects, uint32_t object) {
  return run.store->Location(objects[object].key);
}

// Copies a staged unit's bytes into the targets it serves.
void Scatter(const RangeUnit& u, const uint8_t* staged, const StoreRun& run) {
  for (uint32_t m = u.first; m < u.first + u.count; ++m) {
    const RangeTarget& t = run.targets[run.plan.members[m]];
    std::memcpy(t.dst, staged + (t.offset - u.offset), static_cast<size_t>(t.length));
  }
}

// Calls on_target for call-wide target `i`. It runs inside completion loops, which must not
// unwind while reads are in flight: a callback that throws becomes the call's failure.
Status ReportTarget(const RangesContext& ctx, size_t i, bool waited) {
  try {
    return ctx.on_target(i, waited);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory in the range callback (std::bad_alloc)");
  } catch (...) {
    return Status::Internal("the range callback threw an exception");
  }
}

// A unit's bytes are in (and scattered): report the targets it completed (on_target).
// waited: the unit was queued to the device or came over the network (RangeRead::waited).
Status UnitDone(const RangesContext& ctx, StoreRun& run, const RangeUnit& u, bool waited) {
  if (!ctx.on_target) return Status::Ok();
  auto done = [&](uint32_t j) -> Status {
    if (run.pending[j].fetch_sub(1, std::memory_order_acq_rel) != 1) return Status::Ok();  // more pieces
    return ReportTarget(ctx, run.ids[j], waited);
  };
  if (u.dst != nullptr) return done(u.target);
  for (uint32_t m = u.first; m < u.first + u.count; ++m) LSIO_RETURN_IF_ERROR(done(run.plan.members[m]));
  return Status::Ok();
}

// The outcome of one finished unit read: Ok, or the error naming the object and range.
Status Finished(const RangeRead& r, const RangeUnit& u, const StoreRun& run, const std::vector<RangeObject>& objects) {
  Status st = r.status;
  if (st.ok() && r.missing) {
    st = Status::IoError(run.traits.remote ? "no such object (it was deleted during the call)"
                                           : "no such file (it was deleted during the call)",
                         ENOENT);
  } else if (st.ok() && r.transferred != u.length) {
    st = Status::DataLoss("unexpected end of data: got " + std::to_string(r.transferred) + " of " +
                          std::to_string(u.length) + " bytes (the object shrank during the call?)");
  }
  if (st.ok()) return st;
  return st.WithPath(Where(run, objects, u.object)).WithRange(u.offset, u.length);
}

// Local stores: the calling thread and pool threads pull batches of units.
struct LocalRun {
  const RangesContext* ctx = nullptr;
  const std::vector<RangeObject>* objects = nullptr;
  StoreRun* run = nullptr;
  size_t begin = 0;  // units [begin, end) of run->plan
  size_t end = 0;
  std::vector<size_t> cuts;  // batch b is units [cuts[b], cuts[b + 1])
  std::atomic<size_t> next{0};
  std::thread::id caller;
  Clock::time_point last_poll;
  FirstError* error = nullptr;
};

void LocalWorker(LocalRun& lr) {
  StoreRun& run = *lr.run;
  const bool on_caller = std::this_thread::get_id() == lr.caller;
  std::vector<uint8_t> staging;
  std::vector<RangeRead> reads;
  std::vector<size_t> unit_of;
  std::vector<size_t> staged_at;
  while (!lr.error->failed.load(std::memory_order_relaxed)) {
    if (on_caller && lr.ctx->interrupted && Clock::now() - lr.last_poll >= std::chrono::milliseconds(10)) {
      lr.last_poll = Clock::now();  // (starts at zero: a poll before the first batch, then every 10 ms)
      // Nothing of this thread's is in flight here, so the poll may run any code.
      if (lr.ctx->interrupted()) {
        lr.error->Set(Status::Cancelled("interrupted"));
        return;
      }
    }
    const size_t b = lr.next.fetch_add(1, std::memory_order_relaxed);
    if (b + 1 >= lr.cuts.size()) return;
    const size_t first = lr.cuts[b];
    const size_t last = lr.cuts[b + 1];
    reads.assign(last - first, RangeRead{});
    unit_of.clear();
    staged_at.clear();
    uint64_t staged_bytes = 0;
    for (size_t k = first; k < last; ++k) {
      const RangeUnit& u = run.plan.units[k];
      staged_at.push_back(u.dst == nullptr ? staged_bytes : 0);
      if (u.dst == nullptr) staged_bytes += u.length;
    }
    if (staging.size() < staged_bytes) staging.resize(static_cast<size_t>(staged_bytes));
    for (size_t k = first; k < last; ++k) {
      const RangeUnit& u = run.plan.units[k];
      RangeRead& r = reads[k - first];
      r.object = run.refs[u.object].get();
      r.kind = ReadKind::kRange;
      r.offset = u.offset;
      r.length = u.length;
      r.dst = u.dst != nullptr ? u.dst : staging.data() + staged_at[k - first];
    }
    run.store->Read(std::span<RangeRead>(reads), [&](size_t i) {
      const RangeUnit& u = run.plan.units[first + i];
      Status st = Finished(reads[i], u, run, *lr.objects);
      if (!st.ok()) {
        lr.error->Set(std::move(st));
        return;
      }
      if (u.dst == nullptr) Scatter(u, staging.data() + staged_at[i], run);
      if (lr.error->failed.load(std::memory_order_relaxed)) return;  // the call failed: no more reports
      st = UnitDone(*lr.ctx, run, u, reads[i].waited);
      if (!st.ok()) lr.error->Set(std::move(st));
    });
  }
}

// Remote stores: every unit streamed from the calling thread, pinned to the object's version.
Status RunRemote(const RangesContext& ctx, const std::vector<RangeObject>& objects, StoreRun& run, size_t begin,
                 size_t end, const std::vector<bool>& done) {
  struct Slot {
    RangeRead read;
    size_t unit = 0;
    std::unique_ptr<uint8_t[]> staging;
  };
  std::deque<Slot> slots;  // stable addresses; finished slots are reused
  std::vector<Slot*> free_slots;
  std::unordered_map<const RangeRead*, Slot*> in_flight;
  size_t next = begin;
  FirstError error;
  auto next_read = [&]() -> RangeRead* {
    while (next < end && done[next]) ++next;
    if (error.failed.load() || next >= end) return nullptr;
    Slot* s;
    if (!free_slots.empty()) {
      s = free_slots.back();
      free_slots.pop_back();
    } else {
      s = &slots.emplace_back();
    }
    const RangeUnit& u = run.plan.units[next];
    s->unit = next++;
    s->read = RangeRead{};
    s->read.object = run.refs[u.object].get();
    s->read.kind = ReadKind::kRange;
    s->read.offset = u.offset;
    s->read.length = u.length;
    s->read.pin_version = true;
    if (u.dst != nullptr) {
      s->read.dst = u.dst;
    } else {
      s->staging.reset(new uint8_t[u.length]);
      s->read.dst = s->staging.get();
    }
    in_flight[&s->read] = s;
    return &s->read;
  };
  auto on_done = [&](RangeRead& r) {
    const auto it = in_flight.find(&r);
    Slot* s = it->second;
    in_flight.erase(it);
    const RangeUnit& u = run.plan.units[s->unit];
    Status st = Finished(r, u, run, objects);
    if (st.ok()) {
      if (u.dst == nullptr) Scatter(u, s->staging.get(), run);
      if (!error.failed.load()) st = UnitDone(ctx, run, u, true);  // after a failure: no more reports
    }
    if (!st.ok()) error.Set(std::move(st));
    s->staging.reset();
    free_slots.push_back(s);
  };
  std::function<bool()> cancelled;
  if (ctx.interrupt_probe != nullptr) cancelled = [probe = ctx.interrupt_probe] { return probe(); };
  run.store->ReadStream(next_read, on_done, cancelled);
  if (error.failed.load()) return error.status;
  if (cancelled && cancelled()) return Status::Cancelled("interrupted");
  return Status::Ok();
}

Status CheckTargets(const StoreRun& run, const std::vector<RangeObject>& objects) {
  for (const RangeTarget& t : run.targets) {
    const StoreObject* o = run.refs[t.object].get();
    if (o == nullptr || !o->size_known) continue;  // remote, only empty targets: not sized
    if (t.offset > o->size || t.length > o->size - t.offset) {
      return Status::IoError("bytes [" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.length) +
                                 ") are past the end of the " + (run.traits.remote ? "object" : "file") + " (" +
                                 std::to_string(o->size) + " bytes)",
                             EINVAL)
          .WithPath(Where(run, objects, t.object))
          .WithRange(t.offset, t.length);
    }
  }
  return Status::Ok();
}

Status Missing(const StoreRun& run, const std::vector<RangeObject>& objects, uint32_t object) {
  return Status::IoError(run.traits.remote ? "no such object" : "no such file", ENOENT)
      .WithPath(Where(run, objects, object));
}

// Opens run.objects[a, b) (all of them unless sizes were checked by Stat first).
Status OpenObjects(StoreRun& run, const std::vector<RangeObject>& objects, size_t a, size_t b) {
  for (size_t k = a; k < b; ++k) {
    const uint32_t o = run.objects[k];
    auto ref = run.store->Open(objects[o].key);
    if (!ref.ok()) return Status(ref.status()).WithPath(Where(run, objects, o));
    if (ref.value() == nullptr) return Missing(run, objects, o);
    run.refs[o] = std::move(ref).value();
  }
  return Status::Ok();
}

// Copies a unit's staged bytes to the caller and reports the targets it completed.
Status Deliver(const RangesContext& ctx, StoreRun& run, size_t unit, const uint8_t* staged) {
  const RangeUnit& u = run.plan.units[unit];
  if (u.dst != nullptr) std::memcpy(u.dst, staged, static_cast<size_t>(u.length));
  else Scatter(u, staged, run);
  return UnitDone(ctx, run, u, true);
}

// Remote objects are sized by their first unit, read into staging (nothing of the caller's
// is written before every target is known to be inside its object). `deliver`: the bytes go
// to the caller now; else they wait in run.sized for step 4.
Status SizeRemote(const RangesContext& ctx, const std::vector<RangeObject>& objects, StoreRun& run, size_t begin,
                  size_t end, std::vector<bool>* done, bool deliver) {
  std::vector<size_t> first_unit;
  for (size_t k = begin; k < end; ++k) {
    const RangeUnit& u = run.plan.units[k];
    if (!run.refs[u.object]->size_known && (first_unit.empty() || run.plan.units[first_unit.back()].object != u.object)) {
      first_unit.push_back(k);
    }
  }
  if (first_unit.empty()) return Status::Ok();
  std::vector<RangeRead> reads(first_unit.size());
  std::vector<std::unique_ptr<uint8_t[]>> staging(first_unit.size());
  for (size_t i = 0; i < first_unit.size(); ++i) {
    const RangeUnit& u = run.plan.units[first_unit[i]];
    staging[i].reset(new uint8_t[u.length]);
    reads[i].object = run.refs[u.object].get();
    reads[i].kind = ReadKind::kRange;
    reads[i].offset = u.offset;
    reads[i].length = u.length;
    reads[i].dst = staging[i].get();
  }
  std::function<bool()> cancelled;
  if (ctx.interrupt_probe != nullptr) cancelled = [probe = ctx.interrupt_probe] { return probe(); };
  run.store->Read(std::span<RangeRead>(reads), [](size_t) {}, cancelled);
  if (cancelled && cancelled()) return Status::Cancelled("interrupted");
  // A missing object first, then targets past the end (clearer than the short read or the
  // 416 that a past-the-end first unit got), then any other failure.
  for (size_t i = 0; i < reads.size(); ++i) {
    if (reads[i].status.ok() && reads[i].missing) return Missing(run, objects, run.plan.units[first_unit[i]].object);
  }
  LSIO_RETURN_IF_ERROR(CheckTargets(run, objects));
  for (size_t i = 0; i < reads.size(); ++i) {
    const RangeUnit& u = run.plan.units[first_unit[i]];
    Status st = Finished(reads[i], u, run, objects);
    if (st.ok()) continue;
    // A sizing request that failed learned no size; when the cause is a target past the end
    // (416, or a short answer), a HEAD says so more clearly than the request's own error.
    StoreObject* o = run.refs[u.object].get();
    if (!o->size_known && st.code() != StatusCode::kCancelled) {
      auto info = run.store->Stat(objects[u.object].key);
      if (info.ok() && info.value().found) {
        o->size = info.value().size;
        o->size_known = true;
        LSIO_RETURN_IF_ERROR(CheckTargets(run, objects));
      }
    }
    return st;
  }
  for (size_t i = 0; i < reads.size(); ++i) {
    (*done)[first_unit[i]] = true;
    if (deliver) LSIO_RETURN_IF_ERROR(Deliver(ctx, run, first_unit[i], staging[i].get()));
    else run.sized.emplace_back(first_unit[i], std::move(staging[i]));
  }
  return Status::Ok();
}

Status RunLocal(const RangesContext& ctx, const std::vector<RangeObject>& objects, StoreRun& run, size_t begin,
                size_t end) {
  if (begin >= end) return Status::Ok();
  LocalRun lr;
  lr.ctx = &ctx;
  lr.objects = &objects;
  lr.run = &run;
  lr.begin = begin;
  lr.end = end;
  // Batches: up to queue_depth units, about 1 MiB and a quarter of a worker's share of the
  // units, whichever comes first. Many small ranges (zrecord gathers) then keep up to
  // queue_depth reads in flight per worker on io_uring; counting every unit as max_request
  // long, as before, made batches of one unit, so a worker waited for each small read
  // before it issued the next (2.2x slower than ArrayRecord on W14's cold batches). Ranges
  // of a MiB or more stay one per batch (W10's tensors), and the share cap spreads a few
  // units over every worker (as worker_local.cc does for arrays). A worker's staging holds
  // at most its batch.
  const size_t share = std::max<size_t>(1, (end - begin) / (4 * static_cast<size_t>(std::max(1, ctx.threads))));
  const size_t most = run.traits.one_at_a_time ? 1 : std::min<size_t>(std::max(1u, ctx.queue_depth), share);
  lr.cuts.push_back(begin);
  uint64_t bytes = 0;
  for (size_t k = begin; k < end; ++k) {
    bytes += run.plan.units[k].length;
    if (k + 1 - lr.cuts.back() >= most || bytes >= (1ull << 20)) {
      lr.cuts.push_back(k + 1);
      bytes = 0;
    }
  }
  if (lr.cuts.back() != end) lr.cuts.push_back(end);
  lr.caller = std::this_thread::get_id();
  lr.last_poll = Clock::time_point{};  // poll before the first batch, then every 10 ms
  FirstError error;
  lr.error = &error;
  const size_t batches = lr.cuts.size() - 1;
  int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(1, ctx.threads)), batches));
  ThreadPool* pool = nullptr;
  if (workers > 1) {
    pool = &ProcessWorkerPool();
    workers = 1 + std::min(workers - 1, pool->EnsureThreads(workers - 1));
  }
  RunOnWorkers(pool, workers - 1, [&lr] { LocalWorker(lr); });
  if (error.failed.load()) return error.status;
  return Status::Ok();
}

Status Execute(const RangesContext& ctx, const std::vector<RangeObject>& objects, std::span<const RangeTarget> targets) {
  // 1. Arguments.
  for (size_t i = 0; i < targets.size(); ++i) {
    const RangeTarget& t = targets[i];
    if (t.object >= objects.size() || objects[t.object].store == nullptr) {
      return Status::InvalidArgument("range " + std::to_string(i) + " names source " + std::to_string(t.object) +
                                     " of " + std::to_string(objects.size()));
    }
    if (t.offset > UINT64_MAX - t.length) {
      return Status::InvalidArgument("range " + std::to_string(i) + " overflows: offset " + std::to_string(t.offset) +
                                     " + length " + std::to_string(t.length));
    }
    if (t.length > 0 && t.dst == nullptr) {
      return Status::InvalidArgument("range " + std::to_string(i) + " has no destination");
    }
  }
  // Group by store, in order of first appearance.
  std::vector<std::unique_ptr<StoreRun>> runs;
  std::map<Store*, StoreRun*> by_store;
  std::vector<bool> used(objects.size(), false);
  for (const RangeTarget& t : targets) used[t.object] = true;
  for (uint32_t o = 0; o < objects.size(); ++o) {
    if (!used[o]) continue;
    StoreRun*& r = by_store[objects[o].store];
    if (r == nullptr) {
      runs.push_back(std::make_unique<StoreRun>());
      r = runs.back().get();
      r->store = objects[o].store;
      LSIO_RETURN_IF_ERROR(r->store->TransportName().status());  // io="uring" where it cannot work
      r->traits = r->store->traits();
      r->max_gap = ctx.max_gap != RangeOptions::kStoreDefault ? ctx.max_gap
                                                              : (r->traits.remote ? (1ull << 20) : (16ull << 10));
      // Local: 8 MiB pieces. A checkpoint's long tensors read fastest in pieces of 4-16 MiB
      // (hot 10 GB/s at 2 threads vs 8 with 1 MiB, W10), and merged small ranges stay small.
      r->max_request = ctx.max_request > 0 ? ctx.max_request : (r->traits.remote ? (16ull << 20) : (8ull << 20));
      r->refs.resize(objects.size());
    }
    r->objects.push_back(o);
  }
  for (uint32_t i = 0; i < targets.size(); ++i) {
    StoreRun* r = by_store[objects[targets[i].object].store];
    r->targets.push_back(targets[i]);
    r->ids.push_back(i);
  }

  // 2-3. Open (or size) every object and plan, before any caller byte is written.
  std::vector<std::vector<bool>> done(runs.size());
  std::vector<bool> waves(runs.size(), false);
  if (ctx.stats != nullptr) ctx.stats->ranges += targets.size();
  for (size_t s = 0; s < runs.size(); ++s) {
    StoreRun& run = *runs[s];
    // A tiny max_request would split long ranges into more requests than memory holds
    // (1 GiB at max_request=1: a billion planned units): refused, not planned.
    constexpr uint64_t kMaxExtraPieces = uint64_t{1} << 22;
    uint64_t pieces = 0;
    for (const RangeTarget& t : run.targets) {
      pieces += t.length > run.max_request ? (t.length - 1) / run.max_request + 1 : 1;
    }
    if (pieces > run.targets.size() + kMaxExtraPieces) {
      return Status::InvalidArgument("max_request of " + std::to_string(run.max_request) + " bytes splits the ranges into " +
                                     std::to_string(pieces) + " requests, more than one call plans: use a larger max_request");
    }
    run.plan = PlanRanges(run.targets, run.max_gap, run.max_request);
    if (ctx.on_target) {  // the units that serve each target (several pieces of a split one)
      run.pending.reset(new std::atomic<uint32_t>[run.targets.size()]());
      for (const RangeUnit& u : run.plan.units) {
        if (u.dst != nullptr) {
          run.pending[u.target].fetch_add(1, std::memory_order_relaxed);
        } else {
          for (uint32_t m = u.first; m < u.first + u.count; ++m) {
            run.pending[run.plan.members[m]].fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
    }
    if (ctx.stats != nullptr) {
      ctx.stats->requests += run.plan.units.size();
      for (const RangeUnit& u : run.plan.units) ctx.stats->bytes_read += u.length;
    }
    done[s].assign(run.plan.units.size(), false);
    if (run.objects.size() <= run.traits.open_budget) {
      LSIO_RETURN_IF_ERROR(OpenObjects(run, objects, 0, run.objects.size()));
      if (run.traits.remote) {
        LSIO_RETURN_IF_ERROR(SizeRemote(ctx, objects, run, 0, run.plan.units.size(), &done[s], /*deliver=*/false));
      }
      else LSIO_RETURN_IF_ERROR(CheckTargets(run, objects));
      continue;
    }
    // More objects than may be open at once: size them all by Stat, open them in waves.
    waves[s] = true;
    std::vector<ObjectRef> sized(objects.size());
    for (uint32_t o : run.objects) {
      LSIO_ASSIGN_OR_RETURN(ObjectInfo info, run.store->Stat(objects[o].key));
      if (!info.found) return Missing(run, objects, o);
      auto ref = std::make_shared<StoreObject>();
      ref->size_known = true;
      ref->size = info.size;
      run.refs[o] = ref;
    }
    LSIO_RETURN_IF_ERROR(CheckTargets(run, objects));
    for (uint32_t o : run.objects) run.refs[o].reset();
  }

  // 4. Read.
  for (size_t s = 0; s < runs.size(); ++s) {
    StoreRun& run = *runs[s];
    if (run.traits.remote && !waves[s]) {
      for (auto& [unit, staged] : run.sized) LSIO_RETURN_IF_ERROR(Deliver(ctx, run, unit, staged.get()));
      run.sized.clear();
      LSIO_RETURN_IF_ERROR(RunRemote(ctx, objects, run, 0, run.plan.units.size(), done[s]));
      continue;
    }
    if (!waves[s]) {
      LSIO_RETURN_IF_ERROR(RunLocal(ctx, objects, run, 0, run.plan.units.size()));
      continue;
    }
    // Waves of at most open_budget objects; units are sorted by object.
    size_t unit = 0;
    for (size_t a = 0; a < run.objects.size(); a += run.traits.open_budget) {
      const size_t b = std::min(run.objects.size(), a + run.traits.open_budget);
      LSIO_RETURN_IF_ERROR(OpenObjects(run, objects, a, b));
      size_t end = unit;
      while (end < run.plan.units.size() && run.plan.units[end].object <= run.objects[b - 1]) ++end;
      if (run.traits.remote) {
        // Sized by Stat (no version): the wave's first reads learn the version, unpinned.
        LSIO_RETURN_IF_ERROR(SizeRemote(ctx, objects, run, unit, end, &done[s], /*deliver=*/true));
        LSIO_RETURN_IF_ERROR(RunRemote(ctx, objects, run, unit, end, done[s]));
      } else {
        LSIO_RETURN_IF_ERROR(RunLocal(ctx, objects, run, unit, end));
      }
      for (size_t k = a; k < b; ++k) run.refs[run.objects[k]].reset();
      unit = end;
    }
  }
  // Copies of identical ranges, from the buffer the original was read into.
  for (const auto& run : runs) {
    for (const auto& [copy, original] : run->plan.duplicates) {
      const RangeTarget& c = run->targets[copy];
      std::memcpy(c.dst, run->targets[original].dst, static_cast<size_t>(c.length));
      if (ctx.on_target) LSIO_RETURN_IF_ERROR(ReportTarget(ctx, run->ids[copy], false));
    }
  }
  if (ctx.on_target) {
    for (size_t i = 0; i < targets.size(); ++i) {
      if (targets[i].length == 0) LSIO_RETURN_IF_ERROR(ReportTarget(ctx, i, false));
    }
  }
  return Status::Ok();
}

}  // namespace

Status ExecuteRanges(const RangesContext& ctx, const std::vector<RangeObject>& objects,
                     std::span<const RangeTarget> targets) {
  try {
    return Execute(ctx, objects, targets);
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("cannot allocate memory for the range read (std::bad_alloc)");
  }
}

}  // namespace lsio
