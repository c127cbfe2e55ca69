// HttpStore's adaptive coalescing (http_store.h): the starting point from request timings,
// then hill climbing on each call's useful bytes per second. No network: the store is fed
// synthetic timings and call results, as the executor and facade would report them.
#include <cmath>
#include <cstdint>
#include <functional>

#include <gtest/gtest.h>

#include "store/http_store.h"

namespace lsio {
namespace {

HttpStoreConfig Config() {
  HttpStoreConfig c;
  c.scheme = "http";
  c.host = "127.0.0.1:1";
  c.root = "/a.zarr";
  return c;
}

constexpr uint64_t kMiB = 1 << 20;

// Runs `calls` read calls: each asks for the hint, then reports the throughput `rate_of`
// gives for the max_gap it was handed. Returns the max_gap of the last hint.
uint64_t Drive(HttpStore& s, int calls, const std::function<double(uint64_t)>& rate_of) {
  uint64_t gap = 0, req = 0;
  for (int i = 0; i < calls; ++i) {
    EXPECT_TRUE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
    s.ReportCall(10 * kMiB, 10.0 * kMiB / rate_of(gap), gap);
  }
  EXPECT_TRUE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
  return gap;
}

TEST(CoalescingTest, NoHintBeforeEnoughTimingSamples) {
  HttpStore s(Config());
  uint64_t gap = 0, req = 0;
  EXPECT_FALSE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
  s.AddTimingSample(1 << 20, 0.020, 0.022);
  s.AddTimingSample(100, 0.020, 0.021);  // too small to say anything: ignored
  EXPECT_FALSE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
}

TEST(CoalescingTest, StartsAtTheBytesOneLatencyIsWorth) {
  // 20 ms to the first byte, then 3.2 MB/s per request (a 100 MB/s link shared by 32):
  // one latency is worth 64 KB, so the first hint is the 32 KiB level (<= 64 KB).
  HttpStore slow(Config());
  for (int i = 0; i < 8; ++i) slow.AddTimingSample(320000, 0.020, 0.120);
  uint64_t gap = 0, req = 0;
  ASSERT_TRUE(slow.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
  EXPECT_EQ(gap, 32u << 10);
  EXPECT_EQ(req, kMiB);  // 16 x gap, at least 1 MiB

  // Fast link (500 MB/s per request): worth 10 MB, capped by the bounds.
  HttpStore fast(Config());
  for (int i = 0; i < 8; ++i) fast.AddTimingSample(5 << 20, 0.020, 0.020 + 5.0 * kMiB / 500e6);
  ASSERT_TRUE(fast.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
  EXPECT_EQ(gap, kMiB);
  EXPECT_EQ(req, 16 * kMiB);
  ASSERT_TRUE(fast.CoalescingHint(256 << 10, 2 * kMiB, &gap, &req));  // explicit bounds win
  EXPECT_EQ(gap, 256u << 10);
  EXPECT_EQ(req, 2 * kMiB);
}

TEST(CoalescingTest, ClimbsDownToTheBestGapOnASaturatedLink) {
  // The estimate says 1 MiB, but the link is the bottleneck: throughput falls as the gap
  // (the bytes wasted) grows. The climb must end near the smallest level.
  HttpStore s(Config());
  for (int i = 0; i < 8; ++i) s.AddTimingSample(5 << 20, 0.020, 0.021);
  const uint64_t gap = Drive(s, 120, [](uint64_t g) { return 100e6 / (1.0 + static_cast<double>(g) / (64 << 10)); });
  EXPECT_LE(gap, 32u << 10);
}

TEST(CoalescingTest, StaysNearThePeakOfAThroughputCurve) {
  // Throughput peaking at 128 KiB (log-parabola): after the climb the hint spends most of
  // its time at the peak or a neighbour.
  HttpStore s(Config());
  for (int i = 0; i < 8; ++i) s.AddTimingSample(5 << 20, 0.020, 0.021);
  auto rate = [](uint64_t g) {
    const double x = std::log2(static_cast<double>(g) / (128 << 10));
    return 100e6 / (1.0 + 0.3 * x * x);
  };
  Drive(s, 60, rate);
  int near = 0;
  for (int i = 0; i < 100; ++i) {
    uint64_t gap = 0, req = 0;
    ASSERT_TRUE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
    near += gap >= (64u << 10) && gap <= (256u << 10);
    s.ReportCall(10 * kMiB, 10.0 * kMiB / rate(gap), gap);
  }
  EXPECT_GE(near, 80);
}

TEST(CoalescingTest, ReportsFromAnotherGapAreIgnored) {
  HttpStore s(Config());
  for (int i = 0; i < 8; ++i) s.AddTimingSample(5 << 20, 0.020, 0.021);
  uint64_t gap = 0, req = 0;
  ASSERT_TRUE(s.CoalescingHint(kMiB, 16 * kMiB, &gap, &req));
  for (int i = 0; i < 50; ++i) s.ReportCall(kMiB, 1e-6, 16 << 10);  // not the level in use
  uint64_t again = 0;
  ASSERT_TRUE(s.CoalescingHint(kMiB, 16 * kMiB, &again, &req));
  EXPECT_EQ(again, gap);
}

}  // namespace
}  // namespace lsio
