// One read call as its workers see it: the state they share (CallState) and what a worker
// does with one I/O unit, served without a read (fills, cached chunks, resident objects) or
// finished after its read (size checks, decode, scatter). The loops that claim units and
// read them are worker_local.cc and worker_remote.cc; executor.cc runs them.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "read/executor.h"
#include "util/aligned_buffer.h"

namespace lsio {

// Largest read buffer a worker keeps between calls; bigger ones are freed after the call.
constexpr size_t kArenaKeepBytes = 16u << 20;

// Per-thread buffer for coalesced reads; plain memory, so it survives fork.
AlignedBuffer& ThreadIoArena();

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

// A stored chunk larger than its codec chain can produce for the chunk shape is corrupt;
// refusing it here keeps a bogus size (a sparse 1 TiB chunk file, a forged index entry)
// from becoming a read buffer.
Status CheckStoredSize(const ArrayLayout& l, const Plan& plan, const ChunkTask& t);

// `st` with the file, chunk and byte range of `t`.
Status WithContext(Status st, const Plan& plan, const ChunkTask& t);

// A finished read of `unit`: decodes it, or fails the call with the read's error.
void FinishRead(CallState& cs, const IoUnit& unit, const RangeRead& r);

// Units served without a read: fills, and objects fetched whole while resolving (remote
// unsharded chunks). Returns false when `unit` needs a read.
bool ServeWithoutRead(CallState& cs, const IoUnit& unit);

// Units whose bytes the store has in place (Store::Mapped: a page-cached range of a mapped
// local file), decoded from there under a MapAccessGuard: kServed; kNo when the store has
// none; kRead when the file changed under the map meanwhile (FileMap::Unchanged), so that
// what was decoded is void and `unit` must be read (and decoded again) as any other.
// `guard`: the worker's -1 (not asked yet), then whether FileMap::GuardReady (asked at the
// first unit the store has mapped in this call: a syscall); without the guard, kNo.
enum class InPlace { kNo, kServed, kRead };
InPlace ServeMapped(CallState& cs, const IoUnit& unit, int* guard);

}  // namespace lsio
