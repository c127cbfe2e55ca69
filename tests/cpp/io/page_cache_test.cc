// direct="auto"'s inputs and reads (io/page_cache.h): the page cache room from /proc and
// cgroup v1/v2 trees (fake ones written here), the rule, cachestat's view of a real file, and
// FdCache's kMisses descriptors read by every backend: cached ranges from the page cache,
// the rest with O_DIRECT, without pulling the missed range into the page cache.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "io/io_backend.h"
#include "io/page_cache.h"
#include "io/select_backend.h"
#include "io/all_backends.h"
#include "test_util.h"
#include "util/aligned_buffer.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

void WriteText(TempDir& dir, const std::string& rel, const std::string& text) {
  dir.Write(rel, Bytes(text.begin(), text.end()));
}

class RoomTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("LSIO_PAGE_CACHE_BYTES"); }
  void TearDown() override { unsetenv("LSIO_PAGE_CACHE_BYTES"); }
};

TEST_F(RoomTest, MemAvailableWithoutCgroupLimits) {
  TempDir dir;
  WriteText(dir, "proc/meminfo", "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000000 kB\n");
  WriteText(dir, "proc/self/cgroup", "0::/\n");
  WriteText(dir, "cg/cgroup.controllers", "cpu memory\n");
  WriteText(dir, "cg/memory.max", "max\n");
  const PageCacheRoom r = CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg"));
  EXPECT_EQ(r.bytes, 2000000ull * 1024);
  EXPECT_EQ(r.source, "MemAvailable");
}

TEST_F(RoomTest, CgroupV2LimitMinusAnonymousMemoryInnermostOrAncestor) {
  TempDir dir;
  WriteText(dir, "proc/meminfo", "MemAvailable:   20000000 kB\n");
  WriteText(dir, "proc/self/cgroup", "0::/jobs/train\n");
  WriteText(dir, "cg/cgroup.controllers", "memory\n");
  WriteText(dir, "cg/jobs/train/memory.max", "1073741824\n");
  WriteText(dir, "cg/jobs/train/memory.stat", "anon 268435456\nfile 500000000\nkernel 1000\n");
  WriteText(dir, "cg/jobs/memory.max", "max\n");
  PageCacheRoom r = CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg"));
  EXPECT_EQ(r.bytes, (1ull << 30) - (256ull << 20));
  EXPECT_EQ(r.source, "cgroup " + dir.Join("cg/jobs/train"));

  // A tighter parent wins.
  WriteText(dir, "cg/jobs/memory.max", "536870912\n");
  WriteText(dir, "cg/jobs/memory.stat", "anon 100\n");
  r = CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg"));
  EXPECT_EQ(r.bytes, (512ull << 20) - 100);
  EXPECT_EQ(r.source, "cgroup " + dir.Join("cg/jobs"));
}

TEST_F(RoomTest, CgroupV1LimitUsesHierarchicalRss) {
  TempDir dir;
  WriteText(dir, "proc/meminfo", "MemAvailable:   20000000 kB\n");
  WriteText(dir, "proc/self/cgroup", "5:cpu,cpuacct:/\n4:memory:/batch/job1\n0::/\n");
  WriteText(dir, "cg/memory/batch/job1/memory.limit_in_bytes", "2147483648\n");
  WriteText(dir, "cg/memory/batch/job1/memory.stat", "cache 10\nrss 5\ntotal_cache 10\ntotal_rss 1073741824\n");
  WriteText(dir, "cg/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  const PageCacheRoom r = CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg"));
  EXPECT_EQ(r.bytes, 1ull << 30);
  EXPECT_EQ(r.source, "cgroup " + dir.Join("cg/memory/batch/job1"));
}

TEST_F(RoomTest, EnvironmentOverridesAndLimitBelowAnonymousIsZero) {
  TempDir dir;
  WriteText(dir, "proc/meminfo", "MemAvailable:   20000000 kB\n");
  WriteText(dir, "proc/self/cgroup", "0::/a\n");
  WriteText(dir, "cg/cgroup.controllers", "memory\n");
  WriteText(dir, "cg/a/memory.max", "1000\n");
  WriteText(dir, "cg/a/memory.stat", "anon 5000\n");
  EXPECT_EQ(CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg")).bytes, 0u);
  setenv("LSIO_PAGE_CACHE_BYTES", "3G", 1);
  const PageCacheRoom r = CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg"));
  EXPECT_EQ(r.bytes, 3ull << 30);
  EXPECT_EQ(r.source, "LSIO_PAGE_CACHE_BYTES");
  setenv("LSIO_PAGE_CACHE_BYTES", "512MiB", 1);
  EXPECT_EQ(CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg")).bytes, 512ull << 20);
  setenv("LSIO_PAGE_CACHE_BYTES", "lots", 1);  // unparsable: measured instead
  EXPECT_EQ(CurrentPageCacheRoom(dir.Join("proc"), dir.Join("cg")).bytes, 0u);
}

TEST_F(RoomTest, RealMachineHasSomeRoom) {
  const PageCacheRoom r = CurrentPageCacheRoom();
  EXPECT_GT(r.bytes, 0u);
  EXPECT_FALSE(r.source.empty());
}

TEST(ChooseDirectTest, DirectMissesOnlyWhenTheArrayCannotStayCached) {
  PageCacheRoom room{1000, "MemAvailable"};
  DirectDecision d = ChooseDirect(1000, room);
  EXPECT_FALSE(d.direct_misses);
  EXPECT_EQ(d.mode, "auto: buffered");
  d = ChooseDirect(1001, room);
  EXPECT_TRUE(d.direct_misses);
  EXPECT_EQ(d.mode, "auto: direct misses");
  EXPECT_NE(d.reason.find("MemAvailable"), std::string::npos) << d.reason;
  EXPECT_EQ(d.stored_bytes, 1001u);
  EXPECT_EQ(d.room_bytes, 1000u);
}

// A file whose pages are dropped from the page cache (what the disk holds is written first:
// only clean pages can be dropped).
std::string ColdFile(TempDir& dir, const Bytes& data) {
  const std::string path = dir.Write("f", data);
  const int fd = open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return path;
}

TEST(CachedStateTest, SeesWhatThePageCacheHolds) {
  if (!CachestatAvailable()) GTEST_SKIP() << "cachestat(2) is not available on this kernel";
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(64 * 4096 + 100, 1);
  const std::string path = ColdFile(dir, data);
  const int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(CachedState(fd, 0, data.size(), data.size()), Cached::kNone);
  std::vector<uint8_t> buf(8192);
  ASSERT_EQ(pread(fd, buf.data(), 8192, 16 * 4096), 8192);
  EXPECT_EQ(CachedState(fd, 16 * 4096, 8192, data.size()), Cached::kAll);
  EXPECT_EQ(CachedState(fd, 16 * 4096 + 10, 100, data.size()), Cached::kAll);
  EXPECT_EQ(CachedState(fd, 15 * 4096, 3 * 4096, data.size()), Cached::kSome);
  // The tail page: past the end of the file nothing can be cached, and nothing is asked.
  std::vector<uint8_t> tail(100);
  ASSERT_EQ(pread(fd, tail.data(), 100, 64 * 4096), 100);
  EXPECT_EQ(CachedState(fd, 64 * 4096, 4096, data.size()), Cached::kAll);
  EXPECT_EQ(CachedState(fd, 70 * 4096, 4096, data.size()), Cached::kAll);  // empty range
  close(fd);
}

using Named = lsio_test::NamedBackend;
using lsio_test::AllBackends;

TEST(MissesDirectTest, CachedRangesFromThePageCacheOthersDirectWithoutCachingThem) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(256 * 1024 + 333, 5);
  const std::string path = ColdFile(dir, data);
  FdCache files(8);
  auto f = files.Open(path, DirectMode::kMisses);
  ASSERT_TRUE(f.ok() && f.value()) << f.status().ToString();
  if (!f.value()->direct) GTEST_SKIP() << "the file system under " << dir.path() << " refuses O_DIRECT";
  ASSERT_GE(f.value()->cache_fd, 0);
  EXPECT_NE(f.value()->cache_fd, f.value()->fd);
  // A separate entry from the plain O_DIRECT and buffered ones.
  auto on = files.Open(path, DirectMode::kOn);
  ASSERT_TRUE(on.ok());
  EXPECT_LT(on.value()->cache_fd, 0);
  EXPECT_NE(on.value()->fd, f.value()->fd);
  const bool cachestat = CachestatAvailable();

  for (Named& nb : AllBackends()) {
    SCOPED_TRACE(nb.name);
    // Three ranges: [0, 64K) made cached by a buffered read first, [128K, 192K) cold, and an
    // unaligned tail widened past the end of the file, half cached.
    {
      const int fd = open(path.c_str(), O_RDONLY);
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  // no readahead past what is warmed here
      std::vector<uint8_t> warm(64 * 1024);
      ASSERT_EQ(pread(fd, warm.data(), warm.size(), 0), static_cast<ssize_t>(warm.size()));
      ASSERT_EQ(pread(fd, warm.data(), 4096, 256 * 1024 - 4096), 4096);
      close(fd);
    }
    AlignedBuffer buf;
    ASSERT_TRUE(buf.Reserve(3 * 65536 + 8192));
    std::vector<ReadRequest> reqs(3);
    const uint64_t offs[3] = {0, 128 * 1024, 256 * 1024 - 4096};
    const uint64_t lens[3] = {64 * 1024, 64 * 1024, 8192};
    uint64_t at = 0;
    for (int i = 0; i < 3; ++i) {
      reqs[i].fd = f.value()->fd;
      reqs[i].cache_fd = f.value()->cache_fd;
      reqs[i].file_size = data.size();
      reqs[i].offset = offs[i];
      reqs[i].length = lens[i];
      reqs[i].dst = buf.data() + at;
      at += lens[i];
    }
    reqs[2].min_length = data.size() - offs[2];
    size_t done = 0;
    nb.backend->Read(reqs, [&](size_t) { ++done; });
    ASSERT_EQ(done, 3u);
    at = 0;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
      const uint64_t n = std::min<uint64_t>(lens[i], data.size() - offs[i]);
      EXPECT_EQ(reqs[i].transferred, n) << i;
      EXPECT_EQ(0, std::memcmp(buf.data() + at, data.data() + offs[i], n)) << i;
      at += lens[i];
    }
    EXPECT_EQ(reqs[0].inline_hit, cachestat) << "cached: read from the page cache";
    EXPECT_FALSE(reqs[1].inline_hit) << "cold: O_DIRECT";
    EXPECT_FALSE(reqs[2].inline_hit) << "partly cached: O_DIRECT";
    if (cachestat) {
      // The cold range was read around the page cache: still not cached (a RWF_NOWAIT
      // attempt would have started readahead of it).
      EXPECT_EQ(CachedState(f.value()->cache_fd, 128 * 1024, 64 * 1024, data.size()), Cached::kNone);
    }
  }
}

TEST(MissesDirectTest, AFileCachestatRefusesIsReadWithODirectThroughout) {
  // Kernels since 6.14 answer cachestat only for files the caller owns or may write: a
  // shared read-only dataset. As root the read runs in a forked child that becomes nobody
  // (exit codes 77/78: cannot test here). The file must read correctly with no twin, and
  // the refusal must not switch hit detection off for the process (owned files keep it).
  if (!CachestatAvailable()) GTEST_SKIP() << "cachestat(2) is not available on this kernel";
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(64 * 1024 + 10, 9);
  const std::string path = ColdFile(dir, data);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  const int rc = lsio_test::RunInChild([&] {
    if (geteuid() == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) return 77;
    }
    if (access(dir.path().c_str(), X_OK) != 0) return 78;
    FdCache files(8);
    auto f = files.Open(path, DirectMode::kMisses);
    if (!f.ok() || !f.value()) return 1;
    if (!f.value()->direct) return 0;  // no O_DIRECT here: nothing more to check
    const int own = CachestatWorksOn(f.value()->fd) ? 1 : 0;
    if (own == 1 && f.value()->cache_fd < 0) return 2;  // cachestat answers: a twin is kept
    if (own == 0 && f.value()->cache_fd >= 0) return 3;  // refused: no twin
    if (!CachestatAvailable()) return 4;                 // the refusal is per file
    AlignedBuffer buf;
    if (!buf.Reserve(68 * 1024)) return 5;
    for (Named& nb : AllBackends()) {
      ReadRequest r;
      r.fd = f.value()->fd;
      r.cache_fd = f.value()->cache_fd;
      r.direct = true;
      r.file_size = data.size();
      r.offset = 0;
      r.length = 68 * 1024;
      r.min_length = data.size();
      r.dst = buf.data();
      std::span<ReadRequest> one(&r, 1);
      nb.backend->Read(one, [](size_t) {});
      if (!r.status.ok() || r.transferred != data.size()) return 6;
      if (std::memcmp(buf.data(), data.data(), data.size()) != 0) return 7;
      if (own == 0 && r.inline_hit) return 8;
    }
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "cannot drop privileges to uid/gid 65534 here (setuid refused)";
  if (rc == 78) GTEST_SKIP() << "the test directory " << dir.path() << " is not traversable by uid 65534";
  EXPECT_EQ(rc, 0) << "the child's check number " << rc << " failed";
}

}  // namespace
}  // namespace lsio
