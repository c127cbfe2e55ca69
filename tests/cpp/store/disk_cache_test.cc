// DiskCache: round trips keyed by (URL, version, offset, length); a different key is a miss;
// damaged blocks are misses and are removed; least recently used blocks go first when the
// directory passes its bound (Get refreshes a block); blocks larger than the bound are not
// kept; temporary files of dead writers are cleaned; several caches (processes) on one
// directory see each other's blocks and share one bound; blocks are checksummed and
// owner-only; the directory is created with its parents or refused at once; objects' tails
// (version, size, last bytes) round-trip by URL alone and are erased or refused when damaged.
#include "store/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::PatternBytes;
using lsio_test::TempDir;

std::vector<std::filesystem::path> Blocks(const std::string& dir) {
  std::vector<std::filesystem::path> out;
  if (!std::filesystem::exists(dir)) return out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".blk") out.push_back(e.path());
  }
  return out;
}

TEST(DiskCacheTest, RoundTripsAndMissesOtherKeys) {
  TempDir dir;
  DiskCache c(dir.path() + "/cache", 1 << 20);
  const auto b = PatternBytes(5000, 1);
  std::vector<uint8_t> out(5000);
  EXPECT_FALSE(c.Get("http://h/a", "\"e1\"", 100, 5000, out.data()));
  c.Put("http://h/a", "\"e1\"", 100, 5000, b.data());
  ASSERT_TRUE(c.Get("http://h/a", "\"e1\"", 100, 5000, out.data()));
  EXPECT_EQ(out, std::vector<uint8_t>(b.begin(), b.end()));
  EXPECT_FALSE(c.Get("http://h/a", "\"e2\"", 100, 5000, out.data()));  // another version
  EXPECT_FALSE(c.Get("http://h/b", "\"e1\"", 100, 5000, out.data()));
  EXPECT_FALSE(c.Get("http://h/a", "\"e1\"", 101, 5000, out.data()));
  const auto s = c.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.puts, 1u);
  // Another cache object on the same directory (another process) finds it.
  DiskCache other(dir.path() + "/cache/", 1 << 20);
  EXPECT_TRUE(other.Get("http://h/a", "\"e1\"", 100, 5000, out.data()));
}

TEST(DiskCacheTest, TailsRoundTripByUrlAloneAndDamagedOrErasedOnesAreMisses) {
  TempDir dir;
  DiskCache c(dir.path() + "/cache", 1 << 20);
  EXPECT_FALSE(c.GetTail("http://h/a").has_value());
  const auto b = PatternBytes(404, 3);
  const DiskCache::Tail t{"\"e1\"", 123456, std::string(b.begin(), b.end())};
  const std::string url = "http://h/a";
  const DiskCache::TailEntry e{&url, &t};
  c.PutBatch({}, std::span<const DiskCache::TailEntry>(&e, 1));
  // Another process on the directory finds it by the URL alone.
  DiskCache other(dir.path() + "/cache", 1 << 20);
  auto got = other.GetTail(url);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->version, t.version);
  EXPECT_EQ(got->size, t.size);
  EXPECT_EQ(got->bytes, t.bytes);
  EXPECT_FALSE(c.GetTail("http://h/b").has_value());
  // A tail is not a block: no block key reads it, whatever the range.
  std::vector<uint8_t> out(404);
  EXPECT_FALSE(c.Get(url, t.version, t.size - 404, 404, out.data()));
  // A flipped byte fails its checksum: a miss, and the file goes.
  auto files = Blocks(dir.path() + "/cache");
  ASSERT_EQ(files.size(), 1u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-10, std::ios::end);
    char x = 0;
    f.read(&x, 1);
    f.seekp(-10, std::ios::end);
    x = static_cast<char>(x ^ 0x5a);
    f.write(&x, 1);
  }
  EXPECT_FALSE(c.GetTail(url).has_value());
  EXPECT_TRUE(Blocks(dir.path() + "/cache").empty());
  EXPECT_EQ(c.stats().corrupt, 1u);
  // Erased (a stale version): gone for every process.
  c.PutBatch({}, std::span<const DiskCache::TailEntry>(&e, 1));
  ASSERT_TRUE(other.GetTail(url).has_value());
  c.EraseTail(url);
  EXPECT_FALSE(other.GetTail(url).has_value());
}

TEST(DiskCacheTest, DamagedBlocksAreMissesAndAreRemoved) {
  TempDir dir;
  DiskCache c(dir.path(), 1 << 20);
  const auto b = PatternBytes(1000, 2);
  c.Put("u", "v", 0, 1000, b.data());
  auto files = Blocks(dir.path());
  ASSERT_EQ(files.size(), 1u);
  std::filesystem::resize_file(files[0], 500);  // truncated
  std::vector<uint8_t> out(1000);
  EXPECT_FALSE(c.Get("u", "v", 0, 1000, out.data()));
  EXPECT_TRUE(Blocks(dir.path()).empty());
  c.Put("u", "v", 0, 1000, b.data());
  EXPECT_TRUE(c.Get("u", "v", 0, 1000, out.data()));
}

TEST(DiskCacheTest, EvictsLeastRecentlyUsedBlocksToStayWithinTheBound) {
  TempDir dir;
  const uint64_t block = 4000;
  DiskCache c(dir.path(), 5 * block);  // about four blocks with their headers
  const auto b = PatternBytes(block, 3);
  std::vector<uint8_t> out(block);
  for (int i = 0; i < 4; ++i) {
    c.Put("u" + std::to_string(i), "v", 0, block, b.data());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct mtimes
  }
  for (const auto& p : Blocks(dir.path())) {  // all over a minute old: a hit refreshes them
    struct stat st;
    ASSERT_EQ(stat(p.c_str(), &st), 0);
    const struct timespec t[2] = {{0, UTIME_OMIT}, {st.st_mtim.tv_sec - 1000, st.st_mtim.tv_nsec}};
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
  }
  ASSERT_TRUE(c.Get("u0", "v", 0, block, out.data()));  // u0 becomes the most recent
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.Put("u4", "v", 0, block, b.data());
  c.Put("u5", "v", 0, block, b.data());
  uint64_t total = 0;
  for (const auto& p : Blocks(dir.path())) total += std::filesystem::file_size(p);
  EXPECT_LE(total, 5 * block);
  EXPECT_TRUE(c.Get("u0", "v", 0, block, out.data()));
  EXPECT_FALSE(c.Get("u1", "v", 0, block, out.data()));  // the oldest unused went first
  EXPECT_TRUE(c.Get("u5", "v", 0, block, out.data()));
  EXPECT_GT(c.stats().evictions, 0u);
}

TEST(DiskCacheTest, AHitRefreshesTheLruTimeOnlyOfBlocksUnusedForAMinute) {
  TempDir dir;
  DiskCache c(dir.path(), 1 << 20);
  const auto b = PatternBytes(1000, 5);
  std::vector<uint8_t> out(1000);
  c.Put("u", "v", 0, 1000, b.data());
  const auto blocks = Blocks(dir.path());
  ASSERT_EQ(blocks.size(), 1u);
  const std::string p = blocks[0].string();
  const auto mtime = [&] {
    struct stat st;
    EXPECT_EQ(stat(p.c_str(), &st), 0);
    return st.st_mtim;
  };
  const struct timespec put = mtime();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(c.Get("u", "v", 0, 1000, out.data()));
  EXPECT_EQ(mtime().tv_sec, put.tv_sec);  // used within the minute: no inode write
  EXPECT_EQ(mtime().tv_nsec, put.tv_nsec);
  const struct timespec t[2] = {{0, UTIME_OMIT}, {put.tv_sec - 120, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), t, 0), 0);
  ASSERT_TRUE(c.Get("u", "v", 0, 1000, out.data()));
  EXPECT_GE(mtime().tv_sec, put.tv_sec);  // two minutes old: refreshed to now
}

TEST(DiskCacheTest, BlocksLargerThanTheBoundAreNotKeptAndOldTempFilesAreCleaned) {
  TempDir dir;
  DiskCache c(dir.path(), 1000);
  const auto b = PatternBytes(2000, 4);
  c.Put("u", "v", 0, 2000, b.data());
  EXPECT_TRUE(Blocks(dir.path()).empty());
  // A writer that died left a temporary file two hours ago.
  std::filesystem::create_directories(dir.path() + "/ab");
  const std::string tmp = dir.path() + "/ab/.tmp.1.2.3";
  std::ofstream(tmp) << "partial";
  const struct timespec old[2] = {{time(nullptr) - 7200, 0}, {time(nullptr) - 7200, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), old, 0), 0);
  const std::string fresh = dir.path() + "/ab/.tmp.1.2.4";
  std::ofstream(fresh) << "in progress";
  c.Evict(0);
  EXPECT_FALSE(std::filesystem::exists(tmp));
  EXPECT_TRUE(std::filesystem::exists(fresh));  // may be another process's write in flight
}

TEST(DiskCacheTest, ConcurrentWritersOfOneBlockLeaveOneWholeBlock) {
  TempDir dir;
  DiskCache c(dir.path(), 1 << 20);
  const auto b = PatternBytes(100000, 5);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      std::vector<uint8_t> out(b.size());
      for (int i = 0; i < 20; ++i) {
        c.Put("u", "v", 0, b.size(), b.data());
        if (c.Get("u", "v", 0, b.size(), out.data())) {
          ASSERT_EQ(out, std::vector<uint8_t>(b.begin(), b.end()));
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(Blocks(dir.path()).size(), 1u);
}

TEST(DiskCacheTest, BlocksWhoseBytesChangedOnDiskAreMissesAndAreRemoved) {
  TempDir dir;
  DiskCache c(dir.path(), 1 << 20);
  const auto b = PatternBytes(3000, 6);
  c.Put("u", "v", 0, 3000, b.data());
  auto files = Blocks(dir.path());
  ASSERT_EQ(files.size(), 1u);
  {
    // Same size, one byte of the data flipped: only the checksum can tell.
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-100, std::ios::end);
    char ch = 0;
    f.seekg(-100, std::ios::end);
    f.get(ch);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(ch ^ 0x5A));
  }
  std::vector<uint8_t> out(3000);
  EXPECT_FALSE(c.Get("u", "v", 0, 3000, out.data()));
  EXPECT_TRUE(Blocks(dir.path()).empty());
  EXPECT_EQ(c.stats().corrupt, 1u);
}

TEST(DiskCacheTest, DirectoriesAndBlocksAreOwnerOnlyWhateverTheUmask) {
  TempDir dir;
  const mode_t old = umask(0);
  {
    auto c = SharedDiskCache(dir.path() + "/a/b/cache", 1 << 20);  // parents created too
    umask(old);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const auto b = PatternBytes(100, 7);
    c.value()->Put("u", "v", 0, 100, b.data());
  }
  umask(old);
  struct stat st;
  ASSERT_EQ(stat((dir.path() + "/a/b/cache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto files = Blocks(dir.path() + "/a/b/cache");
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(files[0].parent_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(DiskCacheTest, AnUnusableDirectoryFailsWhenTheCacheIsMade) {
  TempDir dir;
  std::ofstream(dir.path() + "/file") << "x";
  auto c = SharedDiskCache(dir.path() + "/file/cache", 1 << 20);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kIoError);
  EXPECT_NE(c.status().ToString().find(dir.path() + "/file"), std::string::npos) << c.status().ToString();
}

TEST(DiskCacheTest, SeveralProcessesOnOneDirectoryShareItsBound) {
  // Two cache objects stand for two processes: each alone stays under the bound, together
  // they would pass it twice over without the shared counter.
  TempDir dir;
  const uint64_t block = 4000;
  DiskCache a(dir.path(), 10 * block), b(dir.path(), 10 * block);
  const auto bytes = PatternBytes(block, 8);
  for (int i = 0; i < 12; ++i) {
    a.Put("a" + std::to_string(i), "v", 0, block, bytes.data());
    b.Put("b" + std::to_string(i), "v", 0, block, bytes.data());
    uint64_t total = 0;
    for (const auto& p : Blocks(dir.path())) total += std::filesystem::file_size(p);
    EXPECT_LE(total, 10 * block) << "after " << i + 1 << " blocks each";
  }
  EXPECT_GT(a.stats().evictions + b.stats().evictions, 0u);
}

TEST(DiskCacheTest, ReadsAndWritesStayCorrectWhileScansRun) {
  TempDir dir;
  DiskCache c(dir.path(), 64 << 20);
  const auto b = PatternBytes(1000, 9);
  for (int i = 0; i < 2000; ++i) c.Put("u" + std::to_string(i), "v", 0, 1000, b.data());
  std::atomic<bool> done{false};
  std::thread scanner([&] {
    while (!done.load()) c.Evict(64 << 20);
  });
  std::vector<uint8_t> out(1000);
  for (int i = 0; i < 200; ++i) {
    c.Put("w" + std::to_string(i), "v", 0, 1000, b.data());
    ASSERT_TRUE(c.Get("u" + std::to_string(i), "v", 0, 1000, out.data()));
  }
  done = true;
  scanner.join();
}

}  // namespace
}  // namespace lsio
