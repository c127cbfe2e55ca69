// PlanRanges (sorting, deduplication, coalescing within max_gap/max_request, splitting of
// long ranges, direct vs staged units) and ExecuteRanges on local files (pread, and
// io_uring where the kernel allows it; 1 and 4 threads; more files than the open budget)
// and through ObjectStore on the scripted loopback server (sized by the first request, no
// HEAD; chunk requests pinned with If-Match; an object replaced mid-call is ESTALE). Errors
// (missing file, range past the end) come before any byte of the buffers is written.
#include "read/ranges.h"

#include <atomic>
#include <cerrno>
#include <thread>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "io/select_backend.h"
#include "net/test_object_server.h"
#include "store/object_store.h"
#include "store/local_store.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::PatternBytes;
using lsio_test::TempDir;
using testing::TestObjectServer;

RangeTarget T(uint32_t object, uint64_t offset, uint64_t length, uint8_t* dst = nullptr) {
  return RangeTarget{object, offset, length, dst};
}

TEST(PlanRangesTest, NeighboursWithinTheGapMergeIntoOneStagedUnit) {
  std::vector<uint8_t> buf(100);
  std::vector<RangeTarget> t = {T(0, 100, 10, &buf[0]), T(0, 0, 10, &buf[10]), T(0, 15, 5, &buf[20])};
  RangePlan p = PlanRanges(t, /*max_gap=*/8, /*max_request=*/1 << 20);
  // [0,10) and [15,20) merge (gap 5); [100,110) is 80 bytes away: its own, direct unit.
  ASSERT_EQ(p.units.size(), 2u);
  EXPECT_EQ(p.units[0].offset, 0u);
  EXPECT_EQ(p.units[0].length, 20u);
  EXPECT_EQ(p.units[0].dst, nullptr);
  ASSERT_EQ(p.units[0].count, 2u);
  EXPECT_EQ(p.members[p.units[0].first], 1u);
  EXPECT_EQ(p.members[p.units[0].first + 1], 2u);
  EXPECT_EQ(p.units[1].offset, 100u);
  EXPECT_EQ(p.units[1].dst, &buf[0]);
  EXPECT_EQ(p.units[1].count, 0u);
}

TEST(PlanRangesTest, MergingStopsAtMaxRequestAndAtAnotherObject) {
  std::vector<uint8_t> buf(100);
  std::vector<RangeTarget> t = {T(0, 0, 10, &buf[0]), T(0, 10, 10, &buf[10]), T(0, 20, 10, &buf[20]),
                                T(1, 30, 10, &buf[30])};
  RangePlan p = PlanRanges(t, 100, /*max_request=*/20);
  ASSERT_EQ(p.units.size(), 3u);
  EXPECT_EQ(p.units[0].length, 20u);  // [0, 20): two targets
  EXPECT_EQ(p.units[1].offset, 20u);  // [20, 30) alone: direct
  EXPECT_EQ(p.units[1].dst, &buf[20]);
  EXPECT_EQ(p.units[2].object, 1u);
}

TEST(PlanRangesTest, IdenticalRangesAreReadOnceAndOverlappingOnesMerge) {
  std::vector<uint8_t> buf(100);
  std::vector<RangeTarget> t = {T(0, 0, 10, &buf[0]), T(0, 0, 10, &buf[10]), T(0, 0, 10, &buf[20]),
                                T(0, 5, 10, &buf[30])};
  RangePlan p = PlanRanges(t, 0, 1 << 20);
  ASSERT_EQ(p.duplicates.size(), 2u);
  EXPECT_EQ(p.duplicates[0], std::make_pair(1u, 0u));
  EXPECT_EQ(p.duplicates[1], std::make_pair(2u, 0u));  // the original, not the other copy
  ASSERT_EQ(p.units.size(), 1u);
  EXPECT_EQ(p.units[0].length, 15u);
  EXPECT_EQ(p.units[0].count, 2u);
}

TEST(PlanRangesTest, LongRangesAreSplitIntoDirectPiecesAndEmptyOnesReadNothing) {
  std::vector<uint8_t> buf(100);
  std::vector<RangeTarget> t = {T(0, 7, 25, &buf[0]), T(0, 50, 0, nullptr)};
  RangePlan p = PlanRanges(t, 1000, /*max_request=*/10);
  ASSERT_EQ(p.units.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(p.units[i].offset, 7 + 10 * i);
    EXPECT_EQ(p.units[i].dst, &buf[10 * i]);
  }
  EXPECT_EQ(p.units[2].length, 5u);
}

// A directory of pattern files read through a LocalStore with its own descriptor cache.
struct LocalFixture {
  TempDir dir;
  std::vector<Bytes> files;
  std::unique_ptr<FdCache> cache;
  std::unique_ptr<LocalStore> store;

  LocalFixture(int nfiles, size_t size, size_t cache_capacity = 64, IoMode mode = IoMode::kPread) {
    for (int i = 0; i < nfiles; ++i) {
      files.push_back(PatternBytes(size + static_cast<size_t>(i), static_cast<uint64_t>(i + 1)));
      dir.Write("f" + std::to_string(i), files.back());
    }
    cache = std::make_unique<FdCache>(cache_capacity);
    LocalStoreOptions o;
    o.files = cache.get();
    o.mode = mode;
    store = std::make_unique<LocalStore>(dir.path(), o);
  }
  std::vector<RangeObject> Objects() {
    std::vector<RangeObject> v;
    for (size_t i = 0; i < files.size(); ++i) v.push_back({store.get(), "f" + std::to_string(i)});
    return v;
  }
};

// Random ranges over the files (some identical, some overlapping, some long), into one
// buffer; checks every byte and that the gaps between ranges' buffers stay untouched.
void ReadRandomRanges(LocalFixture& fx, int threads, uint64_t max_request) {
  std::vector<RangeTarget> targets;
  std::vector<uint64_t> at;
  uint64_t x = 12345, total = 0;
  auto rnd = [&](uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (int i = 0; i < 400; ++i) {
    const uint32_t f = static_cast<uint32_t>(rnd(fx.files.size()));
    const uint64_t size = fx.files[f].size();
    uint64_t len = rnd(4) == 0 ? rnd(size / 2) : rnd(3000);
    uint64_t off = rnd(size - len + 1);
    if (i > 0 && rnd(10) == 0) {  // an exact copy of an earlier range
      const RangeTarget& e = targets[rnd(targets.size())];
      std::tie(len, off) = std::make_pair(e.length, e.offset);
      targets.push_back(T(e.object, off, len));
    } else {
      targets.push_back(T(f, off, len));
    }
    at.push_back(total);
    total += len + 3;  // 3 guard bytes after each range
  }
  std::vector<uint8_t> out(total, 0xAB);
  for (size_t i = 0; i < targets.size(); ++i) targets[i].dst = out.data() + at[i];
  RangesContext ctx;
  ctx.threads = threads;
  ctx.max_request = max_request;
  Status st = ExecuteRanges(ctx, fx.Objects(), targets);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (size_t i = 0; i < targets.size(); ++i) {
    const RangeTarget& t = targets[i];
    const Bytes& f = fx.files[t.object];
    ASSERT_EQ(0, std::memcmp(out.data() + at[i], f.data() + t.offset, t.length)) << "range " << i;
    for (int g = 0; g < 3; ++g) ASSERT_EQ(out[at[i] + t.length + g], 0xAB) << "guard after range " << i;
  }
}

TEST(ExecuteRangesTest, RandomRangesEqualTheFilesWithOneAndFourThreads) {
  LocalFixture fx(5, 200000);
  ReadRandomRanges(fx, 1, 1 << 20);
  ReadRandomRanges(fx, 4, 1 << 20);
  ReadRandomRanges(fx, 4, 4096);  // long ranges split into many pieces
}

TEST(ExecuteRangesTest, IoUringGivesTheSameBytes) {
  auto probe = MakeBackend(IoMode::kUring, 8);
  if (!probe.ok()) GTEST_SKIP() << "io_uring unavailable: " << probe.status().ToString();
  LocalFixture fx(3, 100000, 64, IoMode::kUring);
  ReadRandomRanges(fx, 2, 1 << 20);
}

TEST(ExecuteRangesTest, MoreFilesThanTheOpenBudgetAreReadInWaves) {
  LocalFixture fx(40, 5000, /*cache_capacity=*/8);  // open budget 4
  ASSERT_EQ(fx.store->traits().open_budget, 4u);
  ReadRandomRanges(fx, 2, 1 << 20);
}

TEST(ExecuteRangesTest, ARangePastTheEndFailsBeforeAnythingIsWritten) {
  LocalFixture fx(2, 1000);
  std::vector<uint8_t> a(100, 0xAB), b(10, 0xAB);
  std::vector<RangeTarget> t = {T(0, 0, 100, a.data()), T(1, 995, 10, b.data())};  // f1 has 1001 bytes
  Status st = ExecuteRanges(RangesContext{}, fx.Objects(), t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(st.error_number(), EINVAL);
  EXPECT_EQ(st.path(), fx.dir.path() + "/f1");
  EXPECT_TRUE(st.has_range());
  EXPECT_EQ(st.range_offset(), 995u);
  EXPECT_NE(st.message().find("past the end"), std::string::npos) << st.message();
  EXPECT_EQ(a, std::vector<uint8_t>(100, 0xAB));
  // Up to the end exactly is fine.
  t[1] = T(1, 991, 10, b.data());
  st = ExecuteRanges(RangesContext{}, fx.Objects(), t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(0, std::memcmp(b.data(), fx.files[1].data() + 991, 10));
}

TEST(ExecuteRangesTest, AMissingFileFailsWithEnoentBeforeAnythingIsWritten) {
  LocalFixture fx(1, 1000);
  std::vector<RangeObject> objects = fx.Objects();
  objects.push_back({fx.store.get(), "nope"});
  std::vector<uint8_t> a(100, 0xAB), b(10, 0xAB);
  std::vector<RangeTarget> t = {T(0, 0, 100, a.data()), T(1, 0, 10, b.data())};
  Status st = ExecuteRanges(RangesContext{}, objects, t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(st.error_number(), ENOENT);
  EXPECT_EQ(st.path(), fx.dir.path() + "/nope");
  EXPECT_EQ(a, std::vector<uint8_t>(100, 0xAB));
}

TEST(ExecuteRangesTest, BadArgumentsAreInvalidArgument) {
  LocalFixture fx(1, 100);
  uint8_t b[4];
  std::vector<RangeTarget> t = {T(3, 0, 4, b)};
  EXPECT_EQ(ExecuteRanges(RangesContext{}, fx.Objects(), t).code(), StatusCode::kInvalidArgument);
  t = {T(0, UINT64_MAX - 1, 4, b)};
  EXPECT_EQ(ExecuteRanges(RangesContext{}, fx.Objects(), t).code(), StatusCode::kInvalidArgument);
}

TEST(ExecuteRangesTest, InterruptedStopsWithCancelledAndIsPolledOnTheCallingThreadOnly) {
  LocalFixture fx(1, 1 << 20);
  std::vector<uint8_t> out(1 << 20);
  std::vector<RangeTarget> t;
  for (uint64_t i = 0; i < 256; ++i) t.push_back(T(0, i * 4096, 4096, out.data() + i * 4096));
  RangesContext ctx;
  ctx.threads = 3;
  ctx.max_request = 4096;
  ctx.max_gap = 0;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> elsewhere{false};
  ctx.interrupted = [&] {
    if (std::this_thread::get_id() != caller) elsewhere = true;
    return true;
  };
  Status st = ExecuteRanges(ctx, fx.Objects(), t);
  EXPECT_EQ(st.code(), StatusCode::kCancelled) << st.ToString();
  EXPECT_FALSE(elsewhere.load());
}

// --- remote ---

ObjectStoreConfig Config(const TestObjectServer& srv) {
  ObjectStoreConfig c;
  c.scheme = "http";
  c.host = srv.host();
  c.root = "/bucket";
  c.display_root = "s3://bucket";
  c.client.timeout_ms = 2000;
  c.client.connect_timeout_ms = 1000;
  c.client.stall_timeout_ms = 1000;
  c.client.max_attempts = 2;
  c.client.total_timeout_ms = 3000;
  c.client.retry_base_delay_ms = 1;
  c.client.retry_max_delay_ms = 5;
  return c;
}

TEST(ExecuteRangesRemoteTest, RangesEqualTheObjectsWithoutAHeadAndLaterRequestsArePinned) {
  TestObjectServer srv;
  const Bytes a = PatternBytes(300000, 1), b = PatternBytes(5000, 2);
  srv.Put("/bucket/a", a);
  srv.Put("/bucket/b", b);
  ObjectStore store(Config(srv));
  ASSERT_TRUE(store.Check().ok());
  std::vector<RangeObject> objects = {{&store, "a"}, {&store, "b"}};
  std::vector<uint8_t> out(300000 + 100 + 10);
  std::vector<RangeTarget> t = {T(0, 0, 300000, out.data()), T(1, 10, 100, out.data() + 300000),
                                T(1, 4990, 10, out.data() + 300100)};
  RangesContext ctx;
  ctx.max_request = 64 << 10;  // a: 5 requests (the first sizes it), b: 2 (gap 4880 > 1 KiB)
  ctx.max_gap = 1024;
  Status st = ExecuteRanges(ctx, objects, t);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(0, std::memcmp(out.data(), a.data(), 300000));
  EXPECT_EQ(0, std::memcmp(out.data() + 300000, b.data() + 10, 100));
  EXPECT_EQ(0, std::memcmp(out.data() + 300100, b.data() + 4990, 10));
  size_t pinned = 0;
  for (const auto& q : srv.requests()) {
    EXPECT_EQ(q.method, "GET");
    pinned += q.HasHeader("If-Match");
  }
  EXPECT_EQ(srv.request_count(), 7u);
  EXPECT_EQ(pinned, 7u - 2u);  // all but the first request of each object
}

TEST(ExecuteRangesRemoteTest, PastTheEndAndMissingObjectsFailBeforeAnythingIsWritten) {
  TestObjectServer srv;
  srv.Put("/bucket/a", PatternBytes(1000, 1));
  ObjectStore store(Config(srv));
  std::vector<RangeObject> objects = {{&store, "a"}, {&store, "gone"}};
  std::vector<uint8_t> out(300, 0xAB);
  // The first request of "a" ([0, 100)) learns its size; [990, 1090) is then refused.
  std::vector<RangeTarget> t = {T(0, 0, 100, out.data()), T(0, 990, 100, out.data() + 100)};
  RangesContext ctx;
  ctx.max_gap = 1;  // not merged
  Status st = ExecuteRanges(ctx, objects, t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_NE(st.message().find("past the end"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("s3://bucket/a"), std::string::npos) << st.ToString();
  EXPECT_TRUE(st.has_range());
  EXPECT_EQ(out, std::vector<uint8_t>(300, 0xAB));
  // Merged into the sizing request itself, the range past the end fails that request; the
  // error still says "past the end" (the store is asked the size after the failure).
  ctx.max_gap = RangeOptions::kStoreDefault;  // 1 MiB: merged
  st = ExecuteRanges(ctx, objects, t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_NE(st.message().find("past the end"), std::string::npos) << st.ToString();
  EXPECT_EQ(out, std::vector<uint8_t>(300, 0xAB));
  t = {T(0, 0, 100, out.data()), T(1, 0, 100, out.data() + 100)};
  st = ExecuteRanges(ctx, objects, t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(st.error_number(), ENOENT);
  EXPECT_NE(st.ToString().find("s3://bucket/gone"), std::string::npos) << st.ToString();
  EXPECT_EQ(out, std::vector<uint8_t>(300, 0xAB));
}

TEST(ExecuteRangesRemoteTest, AnObjectReplacedDuringTheCallIsEstale) {
  TestObjectServer srv;
  const Bytes a = PatternBytes(4000, 1);
  srv.Put("/bucket/a", a);
  ObjectStore store(Config(srv));
  std::vector<RangeObject> objects = {{&store, "a"}};
  // Replace the object as soon as its first (sizing) request was answered.
  std::atomic<int> seen{0};
  srv.set_hook([&](const testing::SeenRequest&, testing::ServerConnection&) {
    if (seen.fetch_add(1) == 1) srv.Put("/bucket/a", PatternBytes(4000, 9));
    return false;
  });
  std::vector<uint8_t> out(4000);
  std::vector<RangeTarget> t = {T(0, 0, 1000, out.data()), T(0, 3000, 1000, out.data() + 1000)};
  RangesContext ctx;
  ctx.max_gap = 1;
  Status st = ExecuteRanges(ctx, objects, t);
  ASSERT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(st.error_number(), ESTALE) << st.ToString();
}

}  // namespace
}  // namespace lsio
