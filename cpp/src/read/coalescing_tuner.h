// CoalescingTuner: adaptive coalescing for remote reads (OpenOptions::adaptive_coalescing):
// which max_gap / max_request the planner should use for an array's next read call, learned
// from the requests of its earlier calls and what those calls achieved. One per Array and
// process (the facade owns it); the store only reports each request's timings
// (RangeRead::first_byte_s / total_s), so any remote provider is tuned alike.
//
// Starting point: merging a gap of G bytes into a request saves one request (a first-byte
// latency L in one of the C concurrency slots) and costs G bytes of transfer at the
// per-request rate r (the link's bandwidth shared by the requests in flight). So merging pays
// while G < L * r: the bytes one latency is worth. Every completed request of at least 32 KiB
// gives its first-byte time and its rate after that; the tuner keeps L as the floor of the
// first-byte times (on a saturated link the first byte also waits behind other transfers,
// which a merge does not save) and r as a running mean in the log domain, and suggests
// max_gap = L * r (16 KiB .. the bound) and max_request = 16 x max_gap (1 MiB .. the bound).
// That estimate assumes requests, not bytes, are what is scarce; on a saturated link the
// opposite holds and it over-merges. So it only picks the starting point: from then on each
// call's useful bytes per second (ReportCall) steer max_gap by hill climbing over 16 KiB ..
// 1 MiB in factors of 2 (epochs of a few calls per level, moving on while a step helps by 3%,
// turning back when it does not). Per array, because the best gap depends on the array's
// chunk layout as much as on the link. Measured in W7 (benchmarks/RESULTS.md).
//
// Usage (src/array.cc):
//   uint64_t gap = o.max_gap, req = o.max_request;
//   tuner.Hint(o.max_gap, o.max_request, &gap, &req);           // false: no opinion yet
//   ... each finished remote read: tuner.AddSample(r.transferred, r.first_byte_s, r.total_s);
//   tuner.ReportCall(used_bytes, seconds, gap);                 // after a successful call
//
// Thread-safety: every method may be called from any thread (one mutex). Fork: the facade
// keeps it in a ProcessLocal slot, so a child starts learning afresh.
#pragma once

#include <cstdint>
#include <mutex>

namespace lsio {

class CoalescingTuner {
 public:
  /// One completed request: body bytes, seconds to its first byte and to its end. Small
  /// bodies (under 32 KiB) and unmeasured requests (zeros) are ignored.
  void AddSample(uint64_t bytes, double first_byte_s, double total_s);

  /// The coalescing for the next call, within the given upper bounds; false (outputs
  /// untouched) until a few requests were measured.
  bool Hint(uint64_t max_gap_bound, uint64_t max_request_bound, uint64_t* max_gap, uint64_t* max_request);

  /// After a successful call that ran with Hint's max_gap: its useful bytes and wall time.
  /// Reports of a call that ran with another gap (an earlier level's hint) are ignored.
  void ReportCall(uint64_t used_bytes, double seconds, uint64_t max_gap);

 private:
  std::mutex mu_;
  // The estimate: floor of the first-byte times, mean log rate.
  double latency_floor_s_ = 0;
  double log_rate_ = 0;
  uint64_t samples_ = 0;
  // Hill climbing over max_gap = 16 KiB << level (level 0..6): calls are grouped in epochs
  // of a few calls at one level; useful bytes/s per level decide where to go next.
  // level_ < 0: not started (the estimate above picks the first level).
  int level_ = -1;
  int direction_ = -1;
  int hold_ = 0;
  uint64_t hinted_gap_ = 0;  // the max_gap of the current level's hints
  uint64_t epoch_calls_ = 0;
  double epoch_bytes_ = 0;
  double epoch_seconds_ = 0;
  double level_rate_[7] = {0, 0, 0, 0, 0, 0, 0};
};

}  // namespace lsio
