// The worker loop of local stores: batches of units read with the I/O backend (pread, or
// io_uring with several reads in flight), each decoded as its read completes, and ranges the
// page cache holds decoded in place from the file's mapping (ServeMapped); see worker.h.
#include <algorithm>
#include <functional>
#include <string>

#include "read/worker.h"
#include "store/local_store.h"  // WidenForDirect

namespace lsio {

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

  // Whether the SIGBUS guard is in place (ServeMapped asks once, at the first unit mapped).
  int guard = -1;
  // Units decoded in place from a mapping (ServeMapped), counted once per call and worker.
  struct MappedTally {
    StoreStats& stats;
    uint64_t n = 0;
    ~MappedTally() {
      if (n != 0) stats.mapped_reads.fetch_add(n, std::memory_order_relaxed);
    }
  } mapped{ctx.store->stats()};

  // Between batches this thread holds no arena, scratch or ring state: the one place
  // where the interrupt poll (and whatever Python signal handler it runs) may happen.
  while (!cs.failed.load(std::memory_order_relaxed) && !cs.Interrupted()) {
    reqs.clear();
    req_unit.clear();
    uint64_t buffered = 0;
    bool served_in_place = false;
    while (reqs.size() < batch_limit && buffered < cs.batch_bytes) {
      const size_t u = cs.next.fetch_add(1, std::memory_order_relaxed);
      if (u >= n) break;
      const IoUnit& unit = plan.units[u];
      if (ServeWithoutRead(cs, unit)) continue;
      if (ServeMapped(cs, unit, &guard) == InPlace::kServed) {
        ++mapped.n;
        if (cs.failed.load(std::memory_order_relaxed)) break;
        // Back to the poll above after each one, as after a hit read inline: a call served
        // all from the mapping must still see Ctrl-C and another worker's failure.
        if (reqs.empty()) {
          served_in_place = true;
          break;
        }
        continue;
      }
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
    if (reqs.empty()) {
      if (served_in_place) continue;
      break;
    }

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

}  // namespace lsio
