// The worker loop of remote stores, and the per-thread buffers of its requests in flight:
// each worker keeps its share of the call's requests in flight from start to end; see
// worker.h.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "read/worker.h"

namespace lsio {
namespace {

// Read buffers of a remote worker's requests in flight, one per request slot; kept across
// calls (up to kArenaKeepBytes in all, see TrimRemoteBuffers).
std::vector<AlignedBuffer>& ThreadRemoteBuffers() {
  thread_local std::vector<AlignedBuffer> buffers;
  return buffers;
}

}  // namespace

void TrimRemoteBuffers() {
  size_t kept = 0;
  for (AlignedBuffer& b : ThreadRemoteBuffers()) {
    if (kept + b.capacity() > kArenaKeepBytes) b.Trim(0);
    kept += b.capacity();
  }
}

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
    if (ctx.tuner != nullptr && r.status.ok()) ctx.tuner->AddSample(r.transferred, r.first_byte_s, r.total_s);
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

}  // namespace lsio
