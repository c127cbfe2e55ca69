// Faults seen through lsio::Array end to end (the engine below the facade, with
// io/fault_injection.cc interposing pread/preadv2, io_uring_submit_and_wait and
// posix_memalign in this binary):
//   - an io_uring read of a chunk that completes with -EIO surfaces as kIoError naming the
//     shard file, the chunk and its byte range, leaves the caller's memory outside the
//     selection untouched, and the next read on the same Array succeeds (uring, and
//     uring+nowait with the inline attempt refused);
//   - every posix_memalign of a read (read arena, decoded-chunk buffer) failed in turn:
//     kResourceExhausted, nothing written outside the selection, no garbage inside it, and
//     the Array (and the same thread) reads correctly afterwards;
//   - std::bad_alloc from any operator new of a read (threads 1 and 2): kResourceExhausted
//     or the data, never a crash, nothing written outside the selection;
//   - pthread_create failing with EAGAIN: the read returns the data with fewer threads;
//   - a shard file the process may not read (mode 000, read by a forked child that dropped
//     root privileges to nobody): kIoError with EACCES naming the file.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "io/fault_injection.h"
#include "lsio/array.h"
#include "test_util.h"
#include "util/thread_pool.h"

namespace lsio {
namespace {

using lsio_test::Box;
using lsio_test::Bytes;
using lsio_test::GetFaults;
using lsio_test::ResetFaults;
using lsio_test::TempDir;
using lsio_test::View;

constexpr int32_t kSentinel = 0x5A5A5A5A;
constexpr int64_t kN = 32;      // array [32, 32] int32
constexpr int64_t kShard = 16;  // shards [16, 16]
constexpr int64_t kInner = 8;   // inner chunks [8, 8], zstd

int32_t Value(int64_t r, int64_t c) { return static_cast<int32_t>(r * 1000 + c); }

Bytes Zstd(const Bytes& raw) {
  Bytes out(ZSTD_compressBound(raw.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 1);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// Where an inner chunk is stored.
struct ChunkLoc {
  std::string shard;
  uint64_t offset = 0;
  uint64_t nbytes = 0;
};

// A sharded zstd store written byte by byte: 2 x 2 shards of 2 x 2 inner chunks each, the
// index (offset, nbytes per inner chunk, crc32c) at the end of each shard.
class ShardedStore {
 public:
  explicit ShardedStore(const TempDir& dir) : root_(dir.Join("arr")) {
    dir.Write("arr/zarr.json", std::string(R"({"zarr_format": 3, "node_type": "array", "shape": [32, 32],
      "data_type": "int32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [16, 16]}},
      "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": -1,
      "codecs": [{"name": "sharding_indexed", "configuration": {"chunk_shape": [8, 8],
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}],
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}],
        "index_location": "end"}}]})"));
    for (int64_t sr = 0; sr < kN / kShard; ++sr) {
      for (int64_t sc = 0; sc < kN / kShard; ++sc) {
        const std::string rel = "arr/c/" + std::to_string(sr) + "/" + std::to_string(sc);
        Bytes data, index;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        for (int64_t ir = 0; ir < kShard / kInner; ++ir) {
          for (int64_t ic = 0; ic < kShard / kInner; ++ic) {
            const int64_t gr = sr * (kShard / kInner) + ir, gc = sc * (kShard / kInner) + ic;
            Bytes raw;
            for (int64_t r = 0; r < kInner; ++r)
              for (int64_t c = 0; c < kInner; ++c) lsio_test::PutLE<uint32_t>(raw, static_cast<uint32_t>(Value(gr * kInner + r, gc * kInner + c)));
            const Bytes z = Zstd(raw);
            lsio_test::PutLE<uint64_t>(index, data.size());
            lsio_test::PutLE<uint64_t>(index, z.size());
            locs_[{gr, gc}] = ChunkLoc{"", data.size(), z.size()};
            chunks.emplace_back(gr, gc);
            data.insert(data.end(), z.begin(), z.end());
          }
        }
        data = lsio_test::Concat({data, lsio_test::WithCrc(index)});
        const std::string path = dir.Write(rel, data);
        for (const auto& k : chunks) locs_[k].shard = path;
      }
    }
  }

  const std::string& root() const { return root_; }
  const ChunkLoc& loc(int64_t gr, int64_t gc) const { return locs_.at({gr, gc}); }

 private:
  std::string root_;
  std::map<std::pair<int64_t, int64_t>, ChunkLoc> locs_;
};

std::unique_ptr<Array> OpenOk(const std::string& path, const OpenOptions& o) {
  auto a = Array::Open(path, o);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

// A [kOut, kOut] int32 buffer full of sentinels; reads go into the sub-view at (kAt, kAt).
struct Canvas {
  static constexpr int64_t kOut = 40;
  static constexpr int64_t kAt = 3;
  std::vector<int32_t> buf = std::vector<int32_t>(kOut * kOut, kSentinel);

  DstView ViewOf(int64_t rows, int64_t cols) {
    DstView v;
    v.data = reinterpret_cast<uint8_t*>(buf.data() + kAt * kOut + kAt);
    v.shape = {rows, cols};
    v.byte_strides = {kOut * 4, 4};
    return v;
  }
  // Every element outside the view still holds the sentinel; inside, each element is the
  // sentinel or its true value (`exact`: only the true value). Returns "" when so.
  std::string Check(int64_t r0, int64_t c0, int64_t rows, int64_t cols, bool exact) const {
    for (int64_t r = 0; r < kOut; ++r) {
      for (int64_t c = 0; c < kOut; ++c) {
        const int32_t got = buf[static_cast<size_t>(r * kOut + c)];
        const bool inside = r >= kAt && r < kAt + rows && c >= kAt && c < kAt + cols;
        const int32_t want = inside ? Value(r0 + r - kAt, c0 + c - kAt) : kSentinel;
        if (got == want) continue;
        if (inside && !exact && got == kSentinel) continue;
        return "element (" + std::to_string(r) + ", " + std::to_string(c) + ") of the output is " +
               std::to_string(got) + (inside ? " inside" : " outside") + " the selection";
      }
    }
    return "";
  }
};

#define LSIO_SKIP_WITHOUT_URING()                                                        \
  do {                                                                                   \
    const IoBackendInfo lsio_info_ = GetIoBackendInfo();                                 \
    if (!lsio_info_.uring_available) {                                                   \
      if (lsio_test::RequireUring()) FAIL() << "LSIO_REQUIRE_URING=1: " << lsio_info_.reason; \
      GTEST_SKIP() << "io_uring unavailable here: " << lsio_info_.reason;                \
    }                                                                                    \
  } while (0)

class FaultTest : public testing::Test {
 protected:
  void SetUp() override { ResetFaults(); }
  void TearDown() override { ResetFaults(); }
};

// ---- io_uring completion faults end to end ----

TEST_F(FaultTest, UringEioOnAChunkNamesFileChunkAndRangeAndTheNextReadSucceeds) {
  LSIO_SKIP_WITHOUT_URING();
  TempDir dir;
  const ShardedStore store(dir);
  // "uring": every read on the ring. "auto" is uring+nowait; its inline attempt is refused
  // (nowait_budget 0) so that the chunk read, too, goes to the ring.
  for (const char* io : {"uring", "auto"}) {
    SCOPED_TRACE(io);
    ResetFaults();
    OpenOptions o;
    o.io = io;
    o.threads = 1;
    auto a = OpenOk(store.root(), o);
    ASSERT_NE(a, nullptr);
    {
      Canvas warm;  // caches shard (0, 1)'s index, so the next read reads one chunk only
      ASSERT_TRUE(a->Read(Box({0, 16}, {8, 8}), warm.ViewOf(8, 8)).ok());
      ASSERT_EQ(warm.Check(0, 16, 8, 8, true), "");
    }
    GetFaults().nowait_budget = 0;
    GetFaults().uring_eio_every = 1;
    Canvas out;  // rows 9..14, cols 17..22: inside inner chunk (1, 2) of shard (0, 1)
    const Status st = a->Read(Box({9, 17}, {6, 6}), out.ViewOf(6, 6));
    const uint64_t ring_reads = GetFaults().uring_reads.load();
    ResetFaults();
    EXPECT_EQ(ring_reads, 1u) << "exactly the one chunk read should have reached the ring";
    const ChunkLoc& loc = store.loc(1, 2);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
    EXPECT_EQ(st.error_number(), EIO) << st.ToString();
    EXPECT_EQ(st.path(), loc.shard);
    EXPECT_EQ(st.chunk(), "(1, 2)");
    ASSERT_TRUE(st.has_range());
    EXPECT_EQ(st.range_offset(), loc.offset);
    EXPECT_EQ(st.range_length(), loc.nbytes);
    const std::string text = st.ToString();
    EXPECT_NE(text.find("file '" + loc.shard + "'"), std::string::npos) << text;
    EXPECT_NE(text.find("chunk (1, 2)"), std::string::npos) << text;
    EXPECT_NE(text.find("bytes [" + std::to_string(loc.offset) + ", " + std::to_string(loc.offset + loc.nbytes) + ")"),
              std::string::npos)
        << text;
    EXPECT_EQ(out.Check(9, 17, 6, 6, /*exact=*/false), "");

    // The same Array, same thread (same ring), no faults: the read succeeds.
    Canvas again;
    const Status st2 = a->Read(Box({9, 17}, {6, 6}), again.ViewOf(6, 6));
    ASSERT_TRUE(st2.ok()) << st2.ToString();
    EXPECT_EQ(again.Check(9, 17, 6, 6, /*exact=*/true), "");
  }
}

TEST_F(FaultTest, UringFaultsAcrossAWholeReadStillGiveExactData) {
  // Short, -EINTR and -EAGAIN completions over a read of every chunk (index reads
  // included): retried and resumed, the result is exact.
  LSIO_SKIP_WITHOUT_URING();
  TempDir dir;
  const ShardedStore store(dir);
  for (const char* io : {"uring", "auto"}) {
    SCOPED_TRACE(io);
    ResetFaults();
    GetFaults().nowait_budget = 0;
    GetFaults().uring_max_bytes = 37;
    GetFaults().uring_eintr_every = 3;
    GetFaults().uring_eagain_every = 5;
    OpenOptions o;
    o.io = io;
    o.threads = 2;
    auto a = OpenOk(store.root(), o);
    ASSERT_NE(a, nullptr);
    Canvas out;
    const Status st = a->Read(Box({1, 2}, {30, 29}), out.ViewOf(30, 29));
    const uint64_t injected = GetFaults().uring_injected.load();
    ResetFaults();
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(out.Check(1, 2, 30, 29, /*exact=*/true), "");
    EXPECT_GT(injected, 0u);
  }
}

TEST_F(FaultTest, UringHardSubmitFailureFailsTheReadAndTheNextReadIsExact) {
  // The ring's submission fails hard (-EBADF, after liburing published the SQEs) in the
  // middle of a read: kIoError, nothing written outside the selection, and the next read on
  // the same thread (a fresh ring) is exact.
  LSIO_SKIP_WITHOUT_URING();
  TempDir dir;
  const ShardedStore store(dir);
  for (const char* io : {"uring", "auto"}) {
    for (const int64_t fail_after : {0, 1}) {
      SCOPED_TRACE(std::string(io) + ", submissions before the failure: " + std::to_string(fail_after));
      ResetFaults();
      OpenOptions o;
      o.io = io;
      o.threads = 1;
      o.max_gap = 0;
      o.max_request = 1;  // one read per chunk
      auto a = OpenOk(store.root(), o);
      ASSERT_NE(a, nullptr);
      {
        Canvas warm;  // caches the shard indexes: the faulted read reads chunks only
        ASSERT_TRUE(a->Read(Box({0, 0}, {32, 32}), warm.ViewOf(32, 32)).ok());
      }
      GetFaults().nowait_budget = 0;
      GetFaults().uring_submit_fail_after = fail_after;
      Canvas out;
      const Status st = a->Read(Box({1, 2}, {30, 29}), out.ViewOf(30, 29));
      const uint64_t failed = GetFaults().uring_submit_failed.load();
      ResetFaults();
      ASSERT_EQ(failed, 1u);
      EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
      EXPECT_EQ(st.error_number(), EBADF) << st.ToString();
      EXPECT_EQ(out.Check(1, 2, 30, 29, /*exact=*/false), "");
      const std::vector<int32_t> after_failure = out.buf;
      Canvas again;
      const Status st2 = a->Read(Box({1, 2}, {30, 29}), again.ViewOf(30, 29));
      ASSERT_TRUE(st2.ok()) << st2.ToString();
      EXPECT_EQ(again.Check(1, 2, 30, 29, /*exact=*/true), "");
      EXPECT_EQ(out.buf, after_failure) << "the failed read's output changed after it returned";
    }
  }
}

// ---- allocation failures ----

// Runs `body` on a fresh thread: its thread-local read arena and decode scratch start
// empty, so the read must allocate them.
template <typename F>
void OnFreshThread(F body) {
  std::thread t(body);
  t.join();
}

TEST_F(FaultTest, EveryFailedReadAllocationIsResourceExhaustedAndHarmless) {
  // Fails the 1st, 2nd, ... posix_memalign of one read until a read needs fewer, each time
  // on a fresh thread. A cold Array (shard indexes not cached) allocates index buffers, the
  // read arena and the decoded-chunk buffer; a warm one (indexes cached) the last two.
  TempDir dir;
  const ShardedStore store(dir);
  std::vector<const char*> ios = {"pread"};
  if (GetIoBackendInfo().uring_available) ios.push_back("uring");
  for (const char* io : ios) {
    OpenOptions o;
    o.io = io;
    o.threads = 1;  // the read runs on the calling (fresh) thread only
    o.max_gap = 0;  // one read per chunk
    std::vector<std::string> messages;
    for (const bool warm : {false, true}) {
      std::unique_ptr<Array> shared;
      if (warm) {
        shared = OpenOk(store.root(), o);
        ASSERT_NE(shared, nullptr);
        Canvas all;
        ASSERT_TRUE(shared->Read(Box({0, 0}, {32, 32}), all.ViewOf(32, 32)).ok());
      }
      for (uint64_t nth = 1; nth < 50; ++nth) {
        SCOPED_TRACE(std::string(io) + (warm ? ", warm" : ", cold") + ": failing allocation " + std::to_string(nth));
        std::unique_ptr<Array> cold = warm ? nullptr : OpenOk(store.root(), o);
        Array* a = warm ? shared.get() : cold.get();
        ASSERT_NE(a, nullptr);
        bool failed = false;
        OnFreshThread([&] {
          Canvas out;  // crop across all four shards, no chunk fully covered
          lsio_test::ArmAllocFailure(nth, 1);
          const Status st = a->Read(Box({5, 6}, {22, 21}), out.ViewOf(22, 21));
          failed = GetFaults().alloc_failed.load() > 0;
          ResetFaults();
          if (failed) {
            EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
            EXPECT_EQ(st.message().rfind("cannot allocate", 0), 0u) << st.ToString();
            messages.push_back(st.message());
            EXPECT_EQ(out.Check(5, 6, 22, 21, /*exact=*/false), "");
          } else {
            ASSERT_TRUE(st.ok()) << st.ToString();
            EXPECT_EQ(out.Check(5, 6, 22, 21, /*exact=*/true), "");
          }
          // The same Array on the same thread (arena and scratch as the failure left them).
          Canvas again;
          const Status st2 = a->Read(Box({5, 6}, {22, 21}), again.ViewOf(22, 21));
          ASSERT_TRUE(st2.ok()) << st2.ToString();
          EXPECT_EQ(again.Check(5, 6, 22, 21, /*exact=*/true), "");
        });
        if (HasFatalFailure() || !failed) break;
      }
    }
    // Both per-read buffers were hit: the read arena and the decoded-chunk buffer.
    bool arena = false, chunk = false;
    std::string seen;
    for (const std::string& m : messages) {
      arena |= m.find("bytes for reads") != std::string::npos;
      chunk |= m == "cannot allocate a chunk buffer";
      seen += "\n  " + m;
    }
    EXPECT_TRUE(arena) << io << ": no failed read-arena allocation among:" << seen;
    EXPECT_TRUE(chunk) << io << ": no failed chunk-buffer allocation among:" << seen;
  }
}

TEST_F(FaultTest, FailedAllocationOnAWorkerThreadFailsTheCall) {
  // threads = 4 over an unsharded store of 16 KiB chunks (incompressible): each worker's
  // arena and chunk buffer must grow to >= 16 KiB, larger than anything the other tests of
  // this binary read, and the first such allocation, on whichever thread, fails. The
  // failure stops the whole call; the Array then reads normally on the same workers.
  TempDir dir;
  dir.Write("big/zarr.json", std::string(R"({"zarr_format": 3, "node_type": "array", "shape": [256, 256],
    "data_type": "int32", "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64, 64]}},
    "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}}, "fill_value": 0,
    "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "zstd", "configuration": {"level": 1}}]})"));
  std::vector<int32_t> truth(256 * 256);
  for (int64_t gr = 0; gr < 4; ++gr) {
    for (int64_t gc = 0; gc < 4; ++gc) {
      const Bytes raw = lsio_test::PatternBytes(64 * 64 * 4, static_cast<uint64_t>(gr * 4 + gc + 1));
      for (int64_t r = 0; r < 64; ++r)
        std::memcpy(&truth[static_cast<size_t>((gr * 64 + r) * 256 + gc * 64)], raw.data() + r * 64 * 4, 64 * 4);
      dir.Write("big/c/" + std::to_string(gr) + "/" + std::to_string(gc), Zstd(raw));
    }
  }
  OpenOptions o;
  o.io = "pread";
  o.threads = 4;
  auto a = OpenOk(dir.Join("big"), o);
  ASSERT_NE(a, nullptr);
  // A marker word; if the data happened to contain it inside the selection, that element
  // would merely count as untouched, which weakens nothing outside the selection.
  constexpr int32_t kMark = 0x7E7E7E7E;
  std::vector<int32_t> out(260 * 260, kMark);
  DstView v;
  v.data = reinterpret_cast<uint8_t*>(out.data() + 2 * 260 + 2);
  v.shape = {250, 250};
  v.byte_strides = {260 * 4, 4};
  lsio_test::ArmAllocFailure(1, 16 << 10);
  const Status st = a->Read(Box({3, 3}, {250, 250}), v);
  const uint64_t failed = GetFaults().alloc_failed.load();
  ResetFaults();
  ASSERT_EQ(failed, 1u) << "no worker allocated >= 16 KiB: the fault was not exercised";
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_EQ(st.message().rfind("cannot allocate", 0), 0u) << st.ToString();
  for (int64_t r = 0; r < 260; ++r) {
    for (int64_t c = 0; c < 260; ++c) {
      const int32_t got = out[static_cast<size_t>(r * 260 + c)];
      const bool inside = r >= 2 && r < 252 && c >= 2 && c < 252;
      if (!inside) {
        ASSERT_EQ(got, kMark) << "written outside the selection at " << r << ", " << c;
      } else if (got != kMark) {
        ASSERT_EQ(got, truth[static_cast<size_t>((r + 1) * 256 + c + 1)]) << "garbage at " << r << ", " << c;
      }
    }
  }
  std::vector<int32_t> again(250 * 250, 0);
  const Status st2 = a->Read(Box({3, 3}, {250, 250}), View(again.data(), {250, 250}, 4));
  ASSERT_TRUE(st2.ok()) << st2.ToString();
  for (int64_t r = 0; r < 250; ++r)
    for (int64_t c = 0; c < 250; ++c)
      ASSERT_EQ(again[static_cast<size_t>(r * 250 + c)], truth[static_cast<size_t>((r + 3) * 256 + c + 3)]);
}

// ---- std::bad_alloc from std containers, and thread creation failures ----

TEST_F(FaultTest, BadAllocFromAnyAllocationOfAReadIsResourceExhaustedAndHarmless) {
  // operator new fails on the 1st, 2nd, ... allocation of one ReadBatch (planner vectors,
  // hash maps, Status strings, worker vectors, std::function, on the calling thread or a
  // pool thread) until a read completes without reaching the Nth: each read returns OK or
  // kResourceExhausted, writes nothing outside its selection, and the Array then reads
  // correctly. threads 1 and 2; a cold Array each time, so index reads allocate too.
  TempDir dir;
  const ShardedStore store(dir);
  std::vector<const char*> ios = {"pread"};
  if (GetIoBackendInfo().uring_available) ios.push_back("uring");
  for (const char* io : ios) {
    for (const int threads : {1, 2}) {
      OpenOptions o;
      o.io = io;
      o.threads = threads;
      o.max_gap = 0;  // one read per chunk: several reads in flight on the ring
      uint64_t exhausted = 0;
      uint64_t nth = 1;
      for (; nth < 5000; ++nth) {
        SCOPED_TRACE(std::string(io) + ", threads " + std::to_string(threads) + ": failing allocation " +
                     std::to_string(nth));
        auto a = OpenOk(store.root(), o);
        ASSERT_NE(a, nullptr);
        Canvas out;
        const Selection box = Box({5, 6}, {22, 21});
        const DstView view = out.ViewOf(22, 21);
        lsio_test::ArmNewFailure(nth, 1);
        const Status st = a->Read(box, view);
        const uint64_t failed = GetFaults().new_failed.load();
        lsio_test::ArmNewFailure(0, 0);
        if (st.ok()) {
          ASSERT_EQ(out.Check(5, 6, 22, 21, /*exact=*/true), "");
        } else {
          ASSERT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
          ASSERT_EQ(failed, 1u) << st.ToString();
          ASSERT_EQ(out.Check(5, 6, 22, 21, /*exact=*/false), "");
          ++exhausted;
        }
        Canvas again;
        const Status st2 = a->Read(Box({5, 6}, {22, 21}), again.ViewOf(22, 21));
        ASSERT_TRUE(st2.ok()) << st2.ToString();
        ASSERT_EQ(again.Check(5, 6, 22, 21, /*exact=*/true), "");
        if (failed == 0) break;  // the read made fewer than nth allocations
      }
      std::cout << io << ", threads " << threads << ": " << nth << " allocations swept, " << exhausted
                << " reads failed with kResourceExhausted\n";
      EXPECT_LT(nth, 5000u) << "the sweep never ended";
      EXPECT_GT(exhausted, 0u) << io << ", threads " << threads;
    }
  }
}

TEST_F(FaultTest, ThreadCreationFailureReadsWithFewerThreads) {
  // pthread_create fails with EAGAIN (as under a nearly exhausted RLIMIT_AS): the read asks
  // for more pool threads than any other test of this binary creates, gets none of them,
  // and still returns the data.
  TempDir dir;
  const ShardedStore store(dir);
  OpenOptions o;
  o.io = "pread";
  o.threads = 48;
  o.max_gap = 0;
  o.max_request = 1;  // no coalescing: one unit per chunk, 16 units, 15 pool threads wanted
  auto a = OpenOk(store.root(), o);
  ASSERT_NE(a, nullptr);
  GetFaults().pthread_create_fail = 1000;
  Canvas out;
  const Status st = a->Read(Box({1, 2}, {30, 29}), out.ViewOf(30, 29));
  const uint64_t failed = GetFaults().pthread_create_failed.load();
  ResetFaults();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(out.Check(1, 2, 30, 29, /*exact=*/true), "");
  EXPECT_GT(failed, 0u) << "no thread creation was attempted";
}

TEST_F(FaultTest, ThreadPoolEnsureThreadsReportsTheThreadsItGot) {
  ThreadPool pool;
  GetFaults().pthread_create_fail = 1;
  EXPECT_EQ(pool.EnsureThreads(3), 0);  // the first creation failed: no threads, no throw
  EXPECT_EQ(GetFaults().pthread_create_failed.load(), 1u);
  EXPECT_EQ(pool.EnsureThreads(3), 3);
  std::atomic<int> calls{0};
  RunOnWorkers(&pool, 3, [&] { calls.fetch_add(1); });
  EXPECT_GE(calls.load(), 1);
}

// ---- unreadable shard (privileges dropped in a forked child) ----

// Exit codes of the child that mean "cannot test here", not "wrong behaviour".
constexpr int kCannotDrop = 77;
constexpr int kStillReadable = 78;
constexpr int kNotTraversable = 79;

// In a child: become nobody (65534) with no supplementary groups. 0, or kCannotDrop.
int DropToNobody() {
  if (setgroups(0, nullptr) != 0) return kCannotDrop;
  if (setgid(65534) != 0) return kCannotDrop;
  if (setuid(65534) != 0) return kCannotDrop;
  if (geteuid() != 65534) return kCannotDrop;
  return 0;
}

std::string ChildSkipReason(int rc) {
  switch (rc) {
    case kCannotDrop: return "cannot drop privileges to uid/gid 65534 here (setuid refused)";
    case kStillReadable: return "the mode-000 file stays readable after dropping privileges (capabilities kept)";
    case kNotTraversable: return "the test directory is not traversable by uid 65534";
    default: return "";
  }
}

TEST_F(FaultTest, UnreadableShardIsIoErrorWithEaccesNamingTheFile) {
  TempDir dir;
  const ShardedStore store(dir);
  const std::string shard = store.loc(0, 2).shard;  // shard (0, 1)
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);      // mkdtemp made it 0700
  ASSERT_EQ(chmod(shard.c_str(), 0), 0);
  if (geteuid() != 0) {
    // An unprivileged run is already subject to the mode bits: test in-process.
    if (access(shard.c_str(), R_OK) == 0) GTEST_SKIP() << "mode 000 does not stop this process";
  }
  const int rc = lsio_test::RunInChild([&] {
    if (geteuid() == 0) {
      if (const int r = DropToNobody(); r != 0) return r;
    }
    if (access(store.root().c_str(), X_OK) != 0) return kNotTraversable;
    if (access(shard.c_str(), R_OK) == 0) return kStillReadable;
    for (const char* io : {"pread", "auto"}) {
      OpenOptions o;
      o.io = io;
      o.threads = 1;
      auto a = Array::Open(store.root(), o);
      if (!a.ok()) return 10;
      Canvas out;
      // Shard (0, 0) is readable: fine. Shard (0, 1) is not.
      if (!(*a)->Read(Box({0, 0}, {16, 16}), out.ViewOf(16, 16)).ok()) return 11;
      const Status st = (*a)->Read(Box({0, 10}, {4, 12}), out.ViewOf(4, 12));
      if (st.code() != StatusCode::kIoError) return 12;
      if (st.error_number() != EACCES) return 13;
      if (st.path() != shard) return 14;
      if (st.ToString().find("file '" + shard + "'") == std::string::npos) return 15;
      // The readable part of the array still reads after the failure.
      Canvas again;
      if (!(*a)->Read(Box({16, 0}, {16, 16}), again.ViewOf(16, 16)).ok()) return 16;
      if (!again.Check(16, 0, 16, 16, true).empty()) return 17;
    }
    return 0;
  });
  chmod(shard.c_str(), 0644);
  if (const std::string why = ChildSkipReason(rc); !why.empty()) GTEST_SKIP() << why;
  EXPECT_EQ(rc, 0) << "the child's check number " << rc << " failed";
}

}  // namespace
}  // namespace lsio
