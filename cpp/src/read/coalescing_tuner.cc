// CoalescingTuner (see coalescing_tuner.h): the latency x rate starting point, then hill
// climbing on each call's useful bytes per second.
#include "read/coalescing_tuner.h"

#include <algorithm>
#include <cmath>

namespace lsio {
namespace {
constexpr int kLevels = 7;           // max_gap 16 KiB << level: 16 KiB .. 1 MiB
constexpr uint64_t kEpochCalls = 4;  // read calls measured per level visit
constexpr int kHoldEpochs = 6;       // epochs spent at a level a failed probe returned to
constexpr uint64_t kMinSamples = 4;  // measured requests before the first hint
uint64_t LevelGap(int level) { return (uint64_t{16} << 10) << level; }
}  // namespace

void CoalescingTuner::AddSample(uint64_t bytes, double first_byte_s, double total_s) {
  // Small bodies finish within the timer's resolution: their rate says nothing.
  if (bytes < (32u << 10) || !(first_byte_s > 0) || !(total_s > first_byte_s)) return;
  const double rate = static_cast<double>(bytes) / (total_s - first_byte_s);
  std::lock_guard<std::mutex> lock(mu_);
  // The latency is the floor of the first-byte times, not their mean: on a saturated link a
  // first byte also waits behind other transfers, and that wait is not what a merged
  // request saves. The floor creeps up 1% per sample so that it follows a link that got
  // slower. The per-request rate is a mean in the log domain: the first samples count
  // fully, later ones as an exponential mean (about the last 20).
  latency_floor_s_ = samples_ == 0 ? first_byte_s : std::min(latency_floor_s_ * 1.01, first_byte_s);
  const double w = std::max(0.05, 1.0 / static_cast<double>(++samples_));
  log_rate_ += w * (std::log(rate) - log_rate_);
}

bool CoalescingTuner::Hint(uint64_t max_gap_bound, uint64_t max_request_bound, uint64_t* max_gap,
                           uint64_t* max_request) {
  uint64_t g;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (level_ < 0) {
      if (samples_ < kMinSamples) return false;
      // Start where the latency x rate estimate points.
      const double est = latency_floor_s_ * std::exp(log_rate_);
      level_ = 0;
      while (level_ + 1 < kLevels && static_cast<double>(LevelGap(level_ + 1)) <= est) ++level_;
    }
    g = std::min(LevelGap(level_), max_gap_bound);
    hinted_gap_ = g;
  }
  *max_gap = g;
  const uint64_t req = std::max<uint64_t>(16 * g, uint64_t{1} << 20);
  *max_request = std::min(req, max_request_bound);
  return true;
}

void CoalescingTuner::ReportCall(uint64_t used_bytes, double seconds, uint64_t max_gap) {
  if (!(seconds > 0) || used_bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (level_ < 0 || max_gap != hinted_gap_) return;  // ran with another level's hint
  epoch_bytes_ += static_cast<double>(used_bytes);
  epoch_seconds_ += seconds;
  if (++epoch_calls_ < kEpochCalls) return;
  const double rate = epoch_bytes_ / epoch_seconds_;
  epoch_calls_ = 0;
  epoch_bytes_ = epoch_seconds_ = 0;
  const int here = level_;
  level_rate_[here] = rate;
  if (hold_ > 0) {  // settled after a step that did not help: stay, then probe again
    --hold_;
    return;
  }
  const int prev = here - direction_;  // the level we came from (if any)
  const bool came = prev >= 0 && prev < kLevels && level_rate_[prev] > 0;
  if (came && rate < level_rate_[prev] * 1.03) {
    // The step did not help: go back and stay a while (probing costs), then try the other
    // way from there.
    direction_ = -direction_;
    level_ = prev;
    hold_ = kHoldEpochs;
    return;
  }
  int next = here + direction_;
  if (next < 0 || next >= kLevels) {
    direction_ = -direction_;
    next = here + direction_;
  }
  level_ = next;
}

}  // namespace lsio
