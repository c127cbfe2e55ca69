// FdCache: missing files are nullptr (fill), non-regular files are kIoError without
// blocking, unreadable files are kIoError/EACCES (checked as nobody when run as root),
// descriptors are O_CLOEXEC and blocking, entries are LRU-capped, a FileRef stays usable
// after its entry is evicted, cached entries are revalidated against the path (rewrites,
// renames, deletions), and descriptor exhaustion evicts instead of failing. OpenOnce (files
// read once, outside the cache): the same refusals, O_NONBLOCK cleared unless asked to keep it.
#include "io/fd_cache.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"
#include "util/process_local.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

std::string ReadAll(const FileRef& f) {
  std::string s(f->size, '\0');
  const ssize_t n = pread(f->fd, s.data(), s.size(), 0);
  if (n != static_cast<ssize_t>(s.size())) return "<read failed>";
  return s;
}

TEST(FdCacheTest, MissingFileIsNullptrNotAnError) {
  TempDir dir;
  FdCache cache(8);
  auto r = cache.Open(dir.Join("no/such/file"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r.value(), nullptr);
  EXPECT_EQ(cache.size(), 0u) << "absent files are not cached";
}

TEST(FdCacheTest, OpensRegularFileWithSizeAndFlags) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("hello, shard"));
  FdCache cache(8);
  auto r = cache.Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const FileRef f = r.value();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->size, 12u);
  EXPECT_EQ(ReadAll(f), "hello, shard");
  const int fdflags = fcntl(f->fd, F_GETFD);
  EXPECT_TRUE(fdflags & FD_CLOEXEC);
  const int flflags = fcntl(f->fd, F_GETFL);
  EXPECT_EQ(flflags & O_ACCMODE, O_RDONLY);
  EXPECT_FALSE(flflags & O_NONBLOCK) << "O_NONBLOCK must be cleared for regular files";
}

TEST(FdCacheTest, SecondOpenReturnsTheCachedEntry) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("x"));
  FdCache cache(8);
  auto a = cache.Open(path);
  auto b = cache.Open(path);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value().get(), b.value().get());
  EXPECT_EQ(cache.size(), 1u);
}

// Stale descriptors are the cause of silent wrong data: each Open() revalidates a cached
// entry against the path, so rewrites, replacements and deletions are seen at once.
TEST(FdCacheTest, RewriteInPlaceIsSeenByTheNextOpen) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("12345"));
  FdCache cache(8);
  FileRef a = cache.Open(path).value();
  // Same inode (truncate + write, like `cp new old`), new size.
  dir.Write("a", std::string("1234567890"));
  FileRef b = cache.Open(path).value();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->id.ino, a->id.ino);
  EXPECT_EQ(b->size, 10u);
  EXPECT_EQ(ReadAll(b), "1234567890");
  EXPECT_EQ(a->size, 5u) << "a held ref keeps describing the file it was opened as";
  EXPECT_EQ(cache.size(), 1u);
}

TEST(FdCacheTest, RewriteInPlaceWithTheSameSizeIsSeenByItsMtime) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("aaaaa"));
  FdCache cache(8);
  FileRef a = cache.Open(path).value();
  // Same inode, same size: only the timestamps tell. Give them a distinct value.
  dir.Write("a", std::string("bbbbb"));
  struct timespec times[2] = {{0, UTIME_OMIT}, {a->id.mtime_ns / 1000000000 + 7, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  FileRef b = cache.Open(path).value();
  EXPECT_NE(a.get(), b.get());
  EXPECT_EQ(ReadAll(b), "bbbbb");
}

TEST(FdCacheTest, FileReplacedByRenameIsReopened) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("old"));
  FdCache cache(8);
  FileRef a = cache.Open(path).value();
  const std::string tmp = dir.Write("a.tmp", std::string("new!"));
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
  FileRef b = cache.Open(path).value();
  ASSERT_NE(b, nullptr);
  EXPECT_NE(b->id.ino, a->id.ino);
  EXPECT_EQ(ReadAll(b), "new!");
  EXPECT_EQ(ReadAll(a), "old") << "reads in flight keep the file they started on";
}

TEST(FdCacheTest, DeletedFileIsMissingAtTheNextOpen) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("x"));
  FdCache cache(8);
  ASSERT_NE(cache.Open(path).value(), nullptr);
  ASSERT_EQ(unlink(path.c_str()), 0);
  auto r = cache.Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), nullptr);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(FdCacheTest, UnchangedFileKeepsItsEntry) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("x"));
  FdCache cache(8);
  FileRef a = cache.Open(path).value();
  FileRef b = cache.Open(path).value();
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->id, b->id);
}

TEST(FdCacheTest, BufferedAndDirectDescriptorsAreSeparateEntries) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("x"));
  FdCache cache(8);
  FileRef a = cache.Open(path, false).value();
  FileRef b = cache.Open(path, true).value();
  EXPECT_NE(a.get(), b.get());
  EXPECT_FALSE(a->direct);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(FdCacheTest, DropPrefixDropsOnlyThatTree) {
  TempDir dir;
  const std::string a = dir.Write("x/1", std::string("1"));
  const std::string b = dir.Write("x/2", std::string("2"));
  const std::string c = dir.Write("y/1", std::string("3"));
  FdCache cache(8);
  for (const auto& p : {a, b, c}) ASSERT_NE(cache.Open(p).value(), nullptr);
  cache.Open(a, true).value();
  cache.DropPrefix(dir.Join("x/"));
  EXPECT_EQ(cache.size(), 1u);
}

TEST(FdCacheTest, DescriptorExhaustionEvictsInsteadOfFailing) {
  // Runs in a child: it lowers RLIMIT_NOFILE so that the cache's own entries exhaust it.
  TempDir dir;
  std::vector<std::string> paths;
  for (int i = 0; i < 64; ++i) paths.push_back(dir.Write("f" + std::to_string(i), std::string("x")));
  const int rc = lsio_test::RunInChild([&] {
    FdCache cache(1000);  // a fixed capacity far above the limit set below
    int used = 0;
    for (int fd = 0; fd < 1024; ++fd) used += fcntl(fd, F_GETFD) != -1;
    rlimit rl{static_cast<rlim_t>(used + 8), static_cast<rlim_t>(used + 8)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 77;
    for (const auto& p : paths) {
      auto r = cache.Open(p);
      if (!r.ok() || r.value() == nullptr) return 1;
    }
    return cache.size() < paths.size() / 2 ? 0 : 2;  // it had to give descriptors back
  });
  if (rc == 77) GTEST_SKIP() << "setrlimit refused";
  EXPECT_EQ(rc, 0);
}

TEST(FdCacheTest, DefaultCapacityFollowsTheCurrentLimit) {
  const int rc = lsio_test::RunInChild([] {
    rlimit rl{256, 256};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 77;
    FdCache cache;
    if (cache.capacity() != 64) return 1;
    rl = {128, 128};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 77;
    return cache.capacity() == 32 ? 0 : 2;
  });
  if (rc == 77) GTEST_SKIP() << "setrlimit refused";
  EXPECT_EQ(rc, 0);
}

TEST(FdCacheTest, DirectoryIsIoErrorWithEisdir) {
  TempDir dir;
  const std::string sub = dir.MakeDir("sub");
  FdCache cache(8);
  auto r = cache.Open(sub);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_EQ(r.status().error_number(), EISDIR);
  EXPECT_EQ(r.status().path(), sub);
  EXPECT_EQ(r.status().message(), "expected a file, found a directory");
  EXPECT_EQ(cache.size(), 0u);
}

TEST(FdCacheTest, FifoIsIoErrorWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A blocking open of a FIFO without a writer would hang forever: run it in a child with a
  // deadline, so a regression fails instead of hanging the suite.
  const int rc = lsio_test::RunInChild([&] {
    alarm(10);
    FdCache cache(8);
    auto r = cache.Open(fifo);
    if (r.ok()) return 1;
    if (r.status().code() != StatusCode::kIoError) return 2;
    if (r.status().error_number() != EINVAL) return 3;
    if (r.status().message() != "not a regular file") return 4;
    if (r.status().path() != fifo) return 5;
    return 0;
  });
  EXPECT_EQ(rc, 0) << (rc == 1000 + SIGALRM ? "Open blocked on a FIFO" : "wrong status");
}

TEST(FdCacheTest, PermissionDeniedIsIoErrorWithPath) {
  // Root ignores mode bits, so as root the open runs in a forked child that first becomes
  // nobody (uid/gid 65534, no supplementary groups). Exit codes 77-79 mean "cannot test
  // here" and skip with the reason; anything else non-zero is a wrong result.
  TempDir dir;
  const std::string path = dir.Write("secret", std::string("x"));
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // mkdtemp made it 0700
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  const int rc = lsio_test::RunInChild([&] {
    if (geteuid() == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) return 77;
    }
    if (access(dir.path().c_str(), X_OK) != 0) return 78;
    if (access(path.c_str(), R_OK) == 0) return 79;
    FdCache cache(8);
    auto r = cache.Open(path);
    if (r.ok()) return 1;
    if (r.status().code() != StatusCode::kIoError) return 2;
    if (r.status().error_number() != EACCES) return 3;
    if (r.status().path() != path) return 4;
    if (cache.size() != 0) return 5;
    return 0;
  });
  chmod(path.c_str(), 0644);
  if (rc == 77) GTEST_SKIP() << "cannot drop privileges to uid/gid 65534 here (setuid refused)";
  if (rc == 78) GTEST_SKIP() << "the test directory " << dir.path() << " is not traversable by uid 65534";
  if (rc == 79) GTEST_SKIP() << "a mode-000 file stays readable after dropping privileges (capabilities kept)";
  EXPECT_EQ(rc, 0) << "the child's check number " << rc << " failed";
}

TEST(FdCacheTest, CapacityHasAFloorOfFour) {
  EXPECT_EQ(FdCache(1).capacity(), 4u);
  EXPECT_EQ(FdCache(100).capacity(), 100u);
  const size_t def = DefaultFdCacheCapacity();
  EXPECT_GE(def, 16u);
  EXPECT_LE(def, 4096u);
}

TEST(FdCacheTest, EvictionKeepsFileRefsValid) {
  TempDir dir;
  FdCache cache(4);
  std::vector<FileRef> refs;
  for (int i = 0; i < 10; ++i) {
    const std::string path = dir.Write("f" + std::to_string(i), "content " + std::to_string(i));
    auto r = cache.Open(path);
    ASSERT_TRUE(r.ok());
    refs.push_back(r.value());
  }
  EXPECT_EQ(cache.size(), 4u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(ReadAll(refs[static_cast<size_t>(i)]), "content " + std::to_string(i)) << "evicted ref " << i;
  }
  // Dropping the last ref of an evicted entry closes its descriptor.
  const int evicted_fd = refs[0]->fd;
  refs[0].reset();
  EXPECT_EQ(fcntl(evicted_fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  // A cached entry's descriptor survives dropping the caller's ref.
  const int cached_fd = refs[9]->fd;
  refs[9].reset();
  EXPECT_NE(fcntl(cached_fd, F_GETFD), -1);
}

TEST(FdCacheTest, LeastRecentlyUsedIsEvictedFirst) {
  TempDir dir;
  FdCache cache(4);
  std::vector<std::string> paths;
  std::vector<const OpenFile*> first;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(dir.Write("f" + std::to_string(i), std::string("x")));
    first.push_back(cache.Open(paths.back()).value().get());
  }
  ASSERT_EQ(cache.Open(paths[0]).value().get(), first[0]);  // touch 0: now 1 is the oldest
  paths.push_back(dir.Write("f4", std::string("x")));
  ASSERT_TRUE(cache.Open(paths[4]).ok());
  EXPECT_EQ(cache.size(), 4u);
  // 0 is still cached (same object); 1 was evicted (a new object on reopen).
  auto again0 = cache.Open(paths[0]);
  EXPECT_EQ(again0.value().get(), first[0]);
  FileRef keep1 = cache.Open(paths[1]).value();  // reopened: evicts another
  EXPECT_NE(keep1.get(), nullptr);
  EXPECT_EQ(cache.size(), 4u);
}

TEST(FdCacheTest, ClearDropsEntriesButNotRefs) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("abc"));
  FdCache cache(8);
  FileRef ref = cache.Open(path).value();
  cache.Clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(ReadAll(ref), "abc");
  FileRef again = cache.Open(path).value();
  EXPECT_NE(again.get(), ref.get());
}

TEST(FdCacheTest, ConcurrentOpensOfOnePathShareOneEntry) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("abc"));
  FdCache cache(8);
  std::vector<std::thread> threads;
  std::vector<const OpenFile*> seen(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto r = cache.Open(path);
      seen[static_cast<size_t>(t)] = r.ok() ? r.value().get() : nullptr;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(cache.size(), 1u);
  auto final_ref = cache.Open(path).value();
  for (const OpenFile* p : seen) EXPECT_EQ(p, final_ref.get());
}

TEST(FdCacheTest, ForkedChildGetsAFreshCacheAndClosesInheritedDescriptors) {
  TempDir dir;
  const std::string path = dir.Write("a", std::string("abc"));
  ProcessLocal<FdCache> slot([] { return new FdCache(8); });
  FileRef parent_ref = slot.Get().Open(path).value();
  const int parent_fd = parent_ref->fd;
  const int rc = lsio_test::RunInChild([&] {
    FdCache& fresh = slot.Get();
    if (fresh.size() != 0) return 1;
    if (fcntl(parent_fd, F_GETFD) != -1 || errno != EBADF) return 2;  // closed by OnForkAbandon
    auto r = fresh.Open(path);
    if (!r.ok() || r.value() == nullptr || ReadAll(r.value()) != "abc") return 3;
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ReadAll(parent_ref), "abc") << "the parent's descriptor must stay open";
}

TEST(OpenOnceTest, OpensRegularFilesOutsideTheCache) {
  TempDir dir;
  const std::string path = dir.Write("c.0", std::string("hello"));
  const size_t cached = ProcessFdCache().size();
  for (bool keep_nonblock : {false, true}) {
    auto r = OpenOnce(path, keep_nonblock);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_GE(r.value().fd, 0);
    EXPECT_EQ(r.value().size, 5u);
    const int flflags = fcntl(r.value().fd, F_GETFL);
    EXPECT_EQ(flflags & O_ACCMODE, O_RDONLY);
    EXPECT_EQ((flflags & O_NONBLOCK) != 0, keep_nonblock);
    EXPECT_TRUE(fcntl(r.value().fd, F_GETFD) & FD_CLOEXEC);
    char buf[8] = {};
    EXPECT_EQ(pread(r.value().fd, buf, sizeof buf, 0), 5);
    EXPECT_EQ(std::string(buf, 5), "hello");
    close(r.value().fd);
  }
  EXPECT_EQ(ProcessFdCache().size(), cached);
}

TEST(OpenOnceTest, MissingIsNoDescriptorAndOtherFailuresAreErrors) {
  TempDir dir;
  dir.MakeDir("d");
  const std::string file = dir.Write("f", std::string("x"));
  auto missing = OpenOnce(dir.Join("nope"), false);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_EQ(missing.value().fd, -1);
  auto d = OpenOnce(dir.Join("d"), false);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().error_number(), EISDIR);
  EXPECT_EQ(d.status().path(), dir.Join("d"));
  auto notdir = OpenOnce(file + "/x", false);
  ASSERT_FALSE(notdir.ok());
  EXPECT_EQ(notdir.status().code(), StatusCode::kIoError);
  EXPECT_EQ(notdir.status().error_number(), ENOTDIR);
  const std::string fifo = dir.Join("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rc = lsio_test::RunInChild([&] {
    alarm(10);
    auto r = OpenOnce(fifo, false);
    if (r.ok()) return 1;
    return r.status().error_number() == EINVAL ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << (rc == 1000 + SIGALRM ? "OpenOnce blocked on a FIFO" : "wrong status");
}

}  // namespace
}  // namespace lsio
