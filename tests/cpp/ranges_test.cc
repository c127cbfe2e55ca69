// lsio::ReadRanges, the public byte-range API, end to end on files in a temp dir: relative
// and absolute paths, every io mode the kernel allows, a range past the end and a missing
// file named in the error with nothing written, argument errors, and the counts (RangeStats)
// under every coalescing gap: 0 merges only touching ranges, kStoreDefault the store's 16 KiB.
// And on_range: once per range (merged, split, identical and empty ones too), only after its
// bytes are in, `waited` as the io mode implies, and a failure it returns stops the call.
#include "lsio/ranges.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lsio/array.h"  // GetIoBackendInfo
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::PatternBytes;
using lsio_test::TempDir;

TEST(ReadRangesTest, ReadsRangesOfSeveralFilesWithEveryIoMode) {
  TempDir dir;
  const Bytes a = PatternBytes(100000, 1), b = PatternBytes(777, 2);
  dir.Write("a.bin", a);
  dir.Write("sub/b.bin", b);
  for (const char* io : {"auto", "pread", "uring"}) {
    std::vector<uint8_t> x(5000), y(77), z(100000);
    std::vector<RangeSource> sources = {RangeSource::File(dir.path() + "/a.bin"),
                                        RangeSource::File(dir.path() + "/sub/../sub/b.bin")};
    std::vector<ByteRange> ranges = {{0, 123, 5000, x.data()}, {1, 700, 77, y.data()}, {0, 0, 100000, z.data()}};
    RangeOptions o;
    o.io = io;
    o.threads = 2;
    Status st = ReadRanges(sources, ranges, o);
    if (std::string(io) == "uring" && st.code() == StatusCode::kUnavailable) continue;  // kernel refuses it
    ASSERT_TRUE(st.ok()) << io << ": " << st.ToString();
    EXPECT_EQ(0, std::memcmp(x.data(), a.data() + 123, x.size())) << io;
    EXPECT_EQ(0, std::memcmp(y.data(), b.data() + 700, y.size())) << io;
    EXPECT_EQ(0, std::memcmp(z.data(), a.data(), z.size())) << io;
  }
}

TEST(ReadRangesTest, OnRangeReportsEachRangeOnceWhenItsBytesAreIn) {
  TempDir dir;
  const Bytes a = PatternBytes(300000, 5);
  const std::string path = dir.Write("a.bin", a);
  // Neighbours that merge (staged), one range split into 4 KiB requests, one read alone,
  // an identical pair and an empty range.
  std::vector<std::pair<uint64_t, uint64_t>> spans = {{100, 50}, {160, 40}, {210, 1000},  {50000, 10000},
                                                      {200000, 7}, {200000, 7}, {123, 0}, {299990, 10}};
  for (const char* io : {"auto", "pread", "uring"}) {
    for (bool cold : {true, false}) {
      // Cold: the page cache drops the file, so io_uring's reads wait on the disk.
      const bool dropped = cold && lsio_test::DropCached(path);
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<ByteRange> ranges;
      for (const auto& [off, len] : spans) bufs.emplace_back(len + 1, 0xEE);
      for (size_t i = 0; i < spans.size(); ++i) ranges.push_back({0, spans[i].first, spans[i].second, bufs[i].data()});
      std::mutex mu;
      std::vector<int> calls(spans.size(), 0);
      std::vector<int> waited(spans.size(), 0);
      std::vector<std::string> early;
      auto on_range = [&](size_t i, bool w) -> Status {
        std::lock_guard<std::mutex> lock(mu);
        ++calls[i];
        waited[i] = w ? 1 : 0;
        if (std::memcmp(bufs[i].data(), a.data() + spans[i].first, spans[i].second) != 0) {
          early.push_back("range " + std::to_string(i));
        }
        return Status::Ok();
      };
      RangeOptions o;
      o.io = io;
      o.threads = 2;
      o.max_request = 4096;
      Status st = ReadRanges({RangeSource::File(path)}, ranges, o, {}, nullptr, on_range);
      if (std::string(io) == "uring" && st.code() == StatusCode::kUnavailable) break;
      ASSERT_TRUE(st.ok()) << io << ": " << st.ToString();
      EXPECT_TRUE(early.empty()) << io << ": reported before its bytes were in: " << early.front();
      for (size_t i = 0; i < spans.size(); ++i) {
        EXPECT_EQ(calls[i], 1) << io << " range " << i;
        EXPECT_EQ(bufs[i][spans[i].second], 0xEE) << io << " range " << i << " wrote past its end";
      }
      // Identical and empty ranges never waited, nor hot reads, nor reads that cannot tell a
      // hit from a miss (pread; io="uring", which makes no inline attempt). io="auto" on
      // io_uring asks the page cache first (RWF_NOWAIT): the first range of a dropped file
      // waited. (Not every later one: a RWF_NOWAIT miss starts the kernel reading its range,
      // and the last piece of a split range may be cached by then.)
      EXPECT_EQ(waited[5] + waited[6], 0) << io;
      if (std::string(io) != "auto" || !cold) EXPECT_EQ(waited[0] + waited[3], 0) << io;
      if (std::string(io) == "auto" && dropped && GetIoBackendInfo().uring_available &&
          lsio_test::NowaitWorks(path)) {
        EXPECT_EQ(waited[0], 1) << io;
      }
    }
  }
}

TEST(ReadRangesTest, OnRangeFailureStopsTheCall) {
  TempDir dir;
  const Bytes a = PatternBytes(1 << 20, 6);
  const std::string path = dir.Write("a.bin", a);
  std::vector<uint8_t> out(1 << 20);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 256; ++i) ranges.push_back({0, i * 4096, 1000, out.data() + i * 4096});
  for (const char* io : {"auto", "pread"}) {
    std::atomic<int> calls{0};
    RangeOptions o;
    o.io = io;
    o.threads = 1;  // batches of 4 in order: the call stops after the batch holding range 7
    o.queue_depth = 4;
    o.max_gap = 0;
    const Status st = ReadRanges({RangeSource::File(path)}, ranges, o, {}, nullptr, [&](size_t i, bool) -> Status {
      ++calls;
      return i == 7 ? Status::DataLoss("range 7 is bad") : Status::Ok();
    });
    EXPECT_EQ(st.code(), StatusCode::kDataLoss) << io;
    EXPECT_EQ(st.message(), "range 7 is bad") << io;
    EXPECT_LE(calls.load(), 8) << io << ": the call went on after the failure";
  }
}

TEST(ReadRangesTest, StatsCountRequestsAndBytesForEachGap) {
  TempDir dir;
  const Bytes a = PatternBytes(1 << 20, 4);
  dir.Write("a.bin", a);
  // 64 strided ranges of 1 KiB, 3 KiB apart (a column shard of a row-major tensor), one
  // touching pair at the end, and one range twice.
  std::vector<uint8_t> out(70 * 1024);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 64; ++i) ranges.push_back({0, i * 4096, 1024, out.data() + i * 1024});
  ranges.push_back({0, 500000, 1024, out.data() + 64 * 1024});
  ranges.push_back({0, 501024, 1024, out.data() + 65 * 1024});
  ranges.push_back({0, 0, 1024, out.data() + 66 * 1024});
  struct Case {
    uint64_t gap;
    uint64_t requests, bytes;
  };
  const uint64_t strided_span = 63 * 4096 + 1024;
  for (const Case& c : {Case{0, 64 + 1, 64 * 1024 + 2048}, Case{3072, 1 + 1, strided_span + 2048},
                        Case{RangeOptions::kStoreDefault, 1 + 1, strided_span + 2048},
                        Case{UINT64_MAX - 1, 1, 501024 + 1024}}) {
    RangeOptions o;
    o.max_gap = c.gap;
    o.max_request = 1 << 20;
    RangeStats stats;
    std::fill(out.begin(), out.end(), 0);
    Status st = ReadRanges({RangeSource::File(dir.path() + "/a.bin")}, ranges, o, {}, &stats);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_EQ(stats.ranges, ranges.size()) << c.gap;
    EXPECT_EQ(stats.requests, c.requests) << c.gap;
    EXPECT_EQ(stats.bytes_read, c.bytes) << c.gap;
    for (const ByteRange& r : ranges) {
      EXPECT_EQ(0, std::memcmp(r.dst, a.data() + r.offset, r.length)) << c.gap << " at " << r.offset;
    }
  }
  // Counts add up over calls; a call refused before planning adds nothing.
  RangeStats stats;
  std::vector<ByteRange> one = {{0, 0, 10, out.data()}};
  ASSERT_TRUE(ReadRanges({RangeSource::File(dir.path() + "/a.bin")}, one, {}, {}, &stats).ok());
  ASSERT_TRUE(ReadRanges({RangeSource::File(dir.path() + "/a.bin")}, one, {}, {}, &stats).ok());
  EXPECT_EQ(stats.requests, 2u);
  EXPECT_EQ(stats.bytes_read, 20u);
  std::vector<ByteRange> bad = {{1, 0, 10, out.data()}};
  EXPECT_FALSE(ReadRanges({RangeSource::File(dir.path() + "/a.bin")}, bad, {}, {}, &stats).ok());
  EXPECT_EQ(stats.requests, 2u);
}

TEST(ReadRangesTest, RelativePathsAreRelativeToTheWorkingDirectory) {
  TempDir dir;
  const Bytes a = PatternBytes(1000, 3);
  dir.Write("rel.bin", a);
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  ASSERT_EQ(chdir(dir.path().c_str()), 0);
  std::vector<uint8_t> x(10);
  std::vector<ByteRange> ranges = {{0, 990, 10, x.data()}};
  Status st = ReadRanges({RangeSource::File("./rel.bin")}, ranges);
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(0, std::memcmp(x.data(), a.data() + 990, 10));
}

TEST(ReadRangesTest, ErrorsNameTheFileAndRangeAndWriteNothing) {
  TempDir dir;
  dir.Write("a.bin", PatternBytes(1000, 1));
  std::vector<uint8_t> x(10, 0xAB), y(10, 0xAB);
  std::vector<RangeSource> sources = {RangeSource::File(dir.path() + "/a.bin"),
                                      RangeSource::File(dir.path() + "/missing.bin")};
  std::vector<ByteRange> past = {{0, 0, 10, x.data()}, {0, 995, 10, y.data()}};
  Status st = ReadRanges(sources, past);
  EXPECT_EQ(st.code(), StatusCode::kIoError);
  EXPECT_EQ(st.error_number(), EINVAL);
  EXPECT_EQ(st.path(), dir.path() + "/a.bin");
  EXPECT_NE(st.ToString().find("bytes [995, 1005)"), std::string::npos) << st.ToString();
  std::vector<ByteRange> missing = {{0, 0, 10, x.data()}, {1, 0, 10, y.data()}};
  st = ReadRanges(sources, missing);
  EXPECT_EQ(st.error_number(), ENOENT);
  EXPECT_EQ(st.path(), dir.path() + "/missing.bin");
  EXPECT_EQ(x, std::vector<uint8_t>(10, 0xAB));
  EXPECT_EQ(y, std::vector<uint8_t>(10, 0xAB));
}

TEST(ReadRangesTest, InterruptedIsPolledAboutEvery10MsNotEveryBatch) {
  // The poll takes the GIL in Python: polled after every batch of small reads, a call stalls
  // behind any busy Python thread.
  TempDir dir;
  const Bytes a = PatternBytes(4 << 20, 8);
  const std::string path = dir.Write("a.bin", a);
  std::vector<uint8_t> out(4096 * 64);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 4096; ++i) ranges.push_back({0, i * 1024, 64, out.data() + i * 64});
  for (const char* io : {"pread", "auto"}) {
    RangeOptions o;
    o.io = io;
    o.threads = 1;
    o.queue_depth = 1;  // thousands of batches of one read
    o.max_gap = 0;
    int polls = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = ReadRanges({RangeSource::File(path)}, ranges, o, [&] { return ++polls, false; });
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(st.ok()) << io << ": " << st.ToString();
    EXPECT_GE(polls, 1) << io;
    EXPECT_LE(polls, static_cast<int>(ms / 10) + 2) << io << ": " << polls << " polls in " << ms << " ms";
    EXPECT_EQ(0, std::memcmp(out.data() + 64 * 100, a.data() + 1024 * 100, 64)) << io;
  }
}

TEST(ReadRangesTest, DotDotAfterASymlinkIsThePathTheSystemOpens) {
  // "lnk/../x.bin" is x.bin beside the link's target to the OS; lexically it would be
  // dir/x.bin, another file.
  TempDir dir;
  dir.Write("real/sub/keep", PatternBytes(1, 1));
  dir.Write("real/x.bin", Bytes{'R', 'E', 'A', 'L'});
  dir.Write("x.bin", Bytes{'W', 'R', 'O', 'N'});
  ASSERT_EQ(symlink((dir.path() + "/real/sub").c_str(), (dir.path() + "/lnk").c_str()), 0);
  std::vector<uint8_t> x(4);
  std::vector<ByteRange> ranges = {{0, 0, 4, x.data()}};
  const Status st = ReadRanges({RangeSource::File(dir.path() + "/lnk/../x.bin")}, ranges);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(std::string(x.begin(), x.end()), "REAL");
}

TEST(ReadRangesTest, BadArguments) {
  std::vector<uint8_t> x(10);
  std::vector<ByteRange> ranges = {{0, 0, 10, x.data()}};
  RangeOptions o;
  o.io = "mmap";
  EXPECT_EQ(ReadRanges({RangeSource::File("/dev/null")}, ranges, o).code(), StatusCode::kInvalidArgument);
  o = RangeOptions{};
  o.threads = -1;
  EXPECT_EQ(ReadRanges({RangeSource::File("/dev/null")}, ranges, o).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRanges({RangeSource::File("")}, ranges).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadRanges({}, ranges).code(), StatusCode::kInvalidArgument);  // no source 0
  // A device is not a regular file: refused, not read.
  Status st = ReadRanges({RangeSource::File("/dev/zero")}, ranges);
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
}

}  // namespace
}  // namespace lsio
