// CoalescingTuner (read/coalescing_tuner.h): the starting point from request timings, then
// hill climbing on each call's useful bytes per second. No network: the tuner is fed
// synthetic timings and call results, as the remote worker loop and the facade report them.
// (executor_remote_test checks that a remote read's requests reach the tuner.)
#include <cmath>
#include <cstdint>
#include <functional>

#include <gtest/gtest.h>

#include "read/coalescing_tuner.h"

namespace lsio {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// Runs `calls` read calls: each asks for the hint, then reports the throughput `rate_of`
// gives for the max_gap it was handed. Returns the max_gap of the last hint.
uint64_t Drive(CoalescingTuner& s, int calls, const std::function<double(uint64_t)>& rate_of) {
  uint64_t gap = 0, req = 0;
  for (int i = 0; i < calls; ++i) {
    EXPECT_TRUE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
    s.ReportCall(10 * kMiB, 10.0 * kMiB / rate_of(gap), gap);
  }
  EXPECT_TRUE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
  return gap;
}

TEST(CoalescingTunerTest, NoHintBeforeEnoughTimingSamples) {
  CoalescingTuner s;
  uint64_t gap = 0, req = 0;
  EXPECT_FALSE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
  s.AddSample(1 << 20, 0.020, 0.022);
  s.AddSample(100, 0.020, 0.021);  // too small to say anything: ignored
  EXPECT_FALSE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
}

TEST(CoalescingTunerTest, StartsAtTheBytesOneLatencyIsWorth) {
  // 20 ms to the first byte, then 3.2 MB/s per request (a 100 MB/s link shared by 32):
  // one latency is worth 64 KB, so the first hint is the 32 KiB level (<= 64 KB).
  CoalescingTuner slow;
  for (int i = 0; i < 8; ++i) slow.AddSample(320000, 0.020, 0.120);
  uint64_t gap = 0, req = 0;
  ASSERT_TRUE(slow.Hint(kMiB, 16 * kMiB, &gap, &req));
  EXPECT_EQ(gap, 32u << 10);
  EXPECT_EQ(req, kMiB);  // 16 x gap, at least 1 MiB

  // Fast link (500 MB/s per request): worth 10 MB, capped by the bounds.
  CoalescingTuner fast;
  for (int i = 0; i < 8; ++i) fast.AddSample(5 << 20, 0.020, 0.020 + 5.0 * kMiB / 500e6);
  ASSERT_TRUE(fast.Hint(kMiB, 16 * kMiB, &gap, &req));
  EXPECT_EQ(gap, kMiB);
  EXPECT_EQ(req, 16 * kMiB);
  ASSERT_TRUE(fast.Hint(256 << 10, 2 * kMiB, &gap, &req));  // explicit bounds win
  EXPECT_EQ(gap, 256u << 10);
  EXPECT_EQ(req, 2 * kMiB);
}

TEST(CoalescingTunerTest, ClimbsDownToTheBestGapOnASaturatedLink) {
  // The estimate says 1 MiB, but the link is the bottleneck: throughput falls as the gap
  // (the bytes wasted) grows. The climb must end near the smallest level.
  CoalescingTuner s;
  for (int i = 0; i < 8; ++i) s.AddSample(5 << 20, 0.020, 0.021);
  const uint64_t gap = Drive(s, 120, [](uint64_t g) { return 100e6 / (1.0 + static_cast<double>(g) / (64 << 10)); });
  EXPECT_LE(gap, 32u << 10);
}

TEST(CoalescingTunerTest, StaysNearThePeakOfAThroughputCurve) {
  // Throughput peaking at 128 KiB (log-parabola): after the climb the hint spends most of
  // its time at the peak or a neighbour.
  CoalescingTuner s;
  for (int i = 0; i < 8; ++i) s.AddSample(5 << 20, 0.020, 0.021);
  auto rate = [](uint64_t g) {
    const double x = std::log2(static_cast<double>(g) / (128 << 10));
    return 100e6 / (1.0 + 0.3 * x * x);
  };
  Drive(s, 60, rate);
  int near = 0;
  for (int i = 0; i < 100; ++i) {
    uint64_t gap = 0, req = 0;
    ASSERT_TRUE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
    near += gap >= (64u << 10) && gap <= (256u << 10);
    s.ReportCall(10 * kMiB, 10.0 * kMiB / rate(gap), gap);
  }
  EXPECT_GE(near, 80);
}

TEST(CoalescingTunerTest, ReportsFromAnotherGapAreIgnored) {
  CoalescingTuner s;
  for (int i = 0; i < 8; ++i) s.AddSample(5 << 20, 0.020, 0.021);
  uint64_t gap = 0, req = 0;
  ASSERT_TRUE(s.Hint(kMiB, 16 * kMiB, &gap, &req));
  for (int i = 0; i < 50; ++i) s.ReportCall(kMiB, 1e-6, 16 << 10);  // not the level in use
  uint64_t again = 0;
  ASSERT_TRUE(s.Hint(kMiB, 16 * kMiB, &again, &req));
  EXPECT_EQ(again, gap);
}

}  // namespace
}  // namespace lsio
