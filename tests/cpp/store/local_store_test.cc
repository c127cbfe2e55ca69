// LocalStore: missing vs error, refusals of non-regular files (without blocking on a FIFO),
// size and version, the max_bytes cap, key checks, recovery from descriptor exhaustion, and
// objects opened by their one read (OpenForOneRead).
#include "store/local_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/fd_cache.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::TempDir;

TEST(LocalStoreTest, ReadsWholeObjectsAndLocatesKeys) {
  TempDir dir;
  dir.Write("zarr.json", std::string("{\"a\": 1}"));
  dir.Write("c/0/1", std::string("xyz"));
  LocalStore store(dir.Join(""));  // trailing '/' given
  LocalStore bare(dir.Join("").substr(0, dir.Join("").size() - 1));  // and not
  EXPECT_EQ(store.root(), bare.root());
  EXPECT_EQ(bare.Location("zarr.json"), dir.Join("zarr.json"));

  auto r = bare.ReadAll("zarr.json", 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r.value().has_value());
  EXPECT_EQ(*r.value(), "{\"a\": 1}");
  auto nested = store.ReadAll("c/0/1", 3);  // exactly max_bytes is fine
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_EQ(nested.value().value(), "xyz");

  dir.Write("empty", std::string());
  auto e = store.ReadAll("empty", 0);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e.value().has_value());
  EXPECT_TRUE(e.value()->empty());
}

TEST(LocalStoreTest, MissingIsNotAnError) {
  TempDir dir;
  LocalStore store(dir.Join(""));
  auto r = store.ReadAll("zarr.json", 1 << 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r.value().has_value());
  auto s = store.Stat("zarr.json");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_FALSE(s.value().found);
  EXPECT_EQ(s.value().size, 0u);
  EXPECT_TRUE(s.value().version.empty());
  // A missing parent directory is missing too (ENOENT), not an error.
  auto deep = store.ReadAll("no/such/key", 10);
  ASSERT_TRUE(deep.ok());
  EXPECT_FALSE(deep.value().has_value());
}

TEST(LocalStoreTest, ErrorsAreNotMissing) {
  // A file used as a directory (ENOTDIR) is an error naming the path, never "missing".
  TempDir dir;
  dir.Write("file", std::string("x"));
  LocalStore store(dir.Join(""));
  auto r = store.ReadAll("file/zarr.json", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_EQ(r.status().error_number(), ENOTDIR);
  EXPECT_EQ(r.status().message(), "cannot open file");
  EXPECT_EQ(r.status().path(), dir.Join("file/zarr.json"));
  auto s = store.Stat("file/zarr.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().error_number(), ENOTDIR);
}

TEST(LocalStoreTest, DirectoryIsRefused) {
  TempDir dir;
  dir.MakeDir("zarr.json");
  LocalStore store(dir.Join(""));
  auto r = store.ReadAll("zarr.json", 1 << 20);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  EXPECT_EQ(r.status().error_number(), EISDIR);
  EXPECT_EQ(r.status().message(), "not a regular file");
  EXPECT_EQ(r.status().path(), dir.Join("zarr.json"));
  auto s = store.Stat("zarr.json");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kIoError);
  EXPECT_EQ(s.status().error_number(), EISDIR);
}

TEST(LocalStoreTest, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.Join("zarr.json");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A blocking open of a FIFO without a writer would hang forever: run it in a child with a
  // deadline, so a regression fails instead of hanging the suite.
  const int rc = lsio_test::RunInChild([&] {
    alarm(10);
    LocalStore store(dir.Join(""));
    auto r = store.ReadAll("zarr.json", 1 << 20);
    if (r.ok()) return 1;
    if (r.status().code() != StatusCode::kIoError) return 2;
    if (r.status().error_number() != EINVAL) return 3;
    if (r.status().message() != "not a regular file") return 4;
    if (r.status().path() != fifo) return 5;
    auto s = store.Stat("zarr.json");
    if (s.ok() || s.status().error_number() != EINVAL) return 6;
    return 0;
  });
  EXPECT_EQ(rc, 0) << (rc == 1000 + SIGALRM ? "ReadAll blocked on a FIFO" : "wrong status");
}

TEST(LocalStoreTest, StatGivesSizeAndAVersionThatChangesWithTheFile) {
  TempDir dir;
  const std::string path = dir.Write("obj", std::string("12345"));
  LocalStore store(dir.Join(""));
  auto a = store.Stat("obj");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(a.value().found);
  EXPECT_EQ(a.value().size, 5u);
  EXPECT_FALSE(a.value().version.empty());
  auto again = store.Stat("obj");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().version, a.value().version);  // unchanged file, same version

  // Rewritten in place with a different mtime: a new version, same inode.
  dir.Write("obj", std::string("123456"));
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 678}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  auto b = store.Stat("obj");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().size, 6u);
  EXPECT_NE(b.value().version, a.value().version);

  // Replaced by rename with the same mtime: a new inode, so still a new version.
  const std::string tmp = dir.Write("tmp", std::string("abcdef"));
  ASSERT_EQ(utimensat(AT_FDCWD, tmp.c_str(), times, 0), 0);
  ASSERT_EQ(rename(tmp.c_str(), path.c_str()), 0);
  auto c = store.Stat("obj");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c.value().version, b.value().version);
}

TEST(LocalStoreTest, ObjectsOverTheCapAreRefusedUnread) {
  TempDir dir;
  dir.Write("small", std::string("0123456789a"));
  LocalStore store(dir.Join(""));
  auto r = store.ReadAll("small", 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(r.status().path(), dir.Join("small"));

  // A 64 MiB cap (the facade's metadata cap is 32 MiB), on a sparse file one byte over it (nothing is read).
  const std::string big = dir.Write("big", std::string());
  ASSERT_EQ(truncate(big.c_str(), (off_t{64} << 20) + 1), 0);
  auto b = store.ReadAll("big", uint64_t{64} << 20);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidFormat);
  auto s = store.Stat("big");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value().size, (uint64_t{64} << 20) + 1);
}

TEST(LocalStoreTest, KeysMustStayUnderTheRoot) {
  TempDir dir;
  LocalStore store(dir.Join(""));
  for (const char* key : {"", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "a/", "a/."}) {
    auto r = store.ReadAll(key, 10);
    ASSERT_FALSE(r.ok()) << key;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << key;
    auto s = store.Stat(key);
    ASSERT_FALSE(s.ok()) << key;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << key;
  }
  EXPECT_TRUE(ValidateKey("a/b.c/..d").ok());
}

// UBSan's vptr check probes memory through a pipe(), which cannot be created while the
// test holds every descriptor; it then reports a bogus "invalid vptr". The calls made in that
// state are exempt from that one check.
__attribute__((no_sanitize("vptr"))) Result<std::optional<std::string>> ReadAllWithNoDescriptorsLeft(
    LocalStore& store, const std::string& key) {
  return store.ReadAll(key, 1 << 20);
}

TEST(LocalStoreTest, OutOfDescriptorsGivesTheFdCacheBackAndRetries) {
  // In a child: it lowers RLIMIT_NOFILE and uses up every descriptor but the cache's.
  TempDir dir;
  dir.Write("zarr.json", std::string("{}"));
  std::vector<std::string> shards;
  for (int i = 0; i < 4; ++i) shards.push_back(dir.Write("s" + std::to_string(i), std::string("x")));
  const int rc = lsio_test::RunInChild([&] {
    alarm(10);
    for (const auto& p : shards) {
      auto r = ProcessFdCache().Open(p);  // the reference is dropped: the cache keeps the fd
      if (!r.ok() || r.value() == nullptr) return 1;
    }
    if (ProcessFdCache().size() != shards.size()) return 2;
    const int spare = open("/dev/null", O_RDONLY | O_CLOEXEC);  // what dup() copies below
    if (spare < 0) return 8;
    int used = 0;
    for (int fd = 0; fd < 1024; ++fd) used += fcntl(fd, F_GETFD) != -1;
    rlimit rl{static_cast<rlim_t>(used + 2), static_cast<rlim_t>(used + 2)};
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 77;
    // Descriptors are exhausted only around the exempt calls (see above) and given back
    // before anything else runs, the store's destructor included.
    std::vector<int> filler;
    filler.reserve(16);
    auto exhaust = [&] {
      for (int fd; (fd = dup(spare)) >= 0;) filler.push_back(fd);
      return errno == EMFILE;
    };
    auto release = [&] {
      for (int fd : filler) close(fd);
      filler.clear();
    };
    LocalStore store(dir.Join(""));
    if (!exhaust()) return 3;
    auto r = ReadAllWithNoDescriptorsLeft(store, "zarr.json");
    release();
    if (!r.ok() || !r.value().has_value() || *r.value() != "{}") return 4;
    if (ProcessFdCache().size() != 0) return 5;
    // With nothing left to give back, exhaustion is an error with its errno, not "missing".
    if (!exhaust()) return 3;
    auto f = ReadAllWithNoDescriptorsLeft(store, "zarr.json");
    release();
    if (f.ok()) return 6;
    if (f.status().code() != StatusCode::kIoError || f.status().error_number() != EMFILE) return 7;
    return 0;
  });
  if (rc == 77) GTEST_SKIP() << "setrlimit refused";
  EXPECT_EQ(rc, 0);
}

// One kRange read of `obj` from offset 0 into `buf` (capacity `length`), on this thread.
RangeRead ReadOnce(LocalStore& store, StoreObject* obj, std::vector<uint8_t>* buf, uint64_t length,
                   uint64_t min_size = 0) {
  buf->assign(length, 0xEE);
  RangeRead r;
  r.object = obj;
  r.kind = ReadKind::kRange;
  r.length = length;
  r.min_size = min_size;
  r.dst = buf->data();
  int calls = 0;
  store.Read(std::span<RangeRead>(&r, 1), [&](size_t i) {
    EXPECT_EQ(i, 0u);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  return r;
}

TEST(LocalStoreTest, OneReadObjectsOpenInTheirReadAndHoldNoDescriptor) {
  TempDir dir;
  dir.Write("c.0", std::string("hello"));
  for (IoMode mode : {IoMode::kPread, IoMode::kAuto}) {
    LocalStore store(dir.Join(""), {.mode = mode});
    std::vector<uint8_t> buf;
    {  // first read: the backend's own descriptors (an io_uring ring) exist from here on
      auto warm = store.OpenForOneRead("c.0");
      ASSERT_TRUE(warm.ok());
      ASSERT_TRUE(ReadOnce(store, warm.value().get(), &buf, 16).status.ok());
    }
    const size_t cached = ProcessFdCache().size();
    const int fds = lsio_test::OpenDescriptors();
    auto o = store.OpenForOneRead("c.0");
    ASSERT_TRUE(o.ok()) << o.status().ToString();
    ASSERT_NE(o.value(), nullptr);
    EXPECT_TRUE(o.value()->open_on_read);
    EXPECT_FALSE(o.value()->size_known) << "nothing is known before the read";
    EXPECT_EQ(lsio_test::OpenDescriptors(), fds) << "opening for one read opens nothing";
    EXPECT_TRUE(store.traits().opens_on_read);

    RangeRead r = ReadOnce(store, o.value().get(), &buf, 16);  // room for more than the file
    ASSERT_TRUE(r.status.ok()) << r.status.ToString();
    EXPECT_FALSE(r.missing);
    EXPECT_EQ(r.transferred, 5u);
    EXPECT_TRUE(o.value()->size_known);
    EXPECT_EQ(o.value()->size, 5u);
    EXPECT_EQ(std::string(buf.begin(), buf.begin() + 5), "hello");
    EXPECT_EQ(buf[5], 0xEE) << "nothing past the file's bytes";
    EXPECT_EQ(lsio_test::OpenDescriptors(), fds) << "the descriptor is closed after the read";
    EXPECT_EQ(ProcessFdCache().size(), cached) << "and never cached";
  }
}

TEST(LocalStoreTest, OneReadObjectsReportMissingAndErrorsFromTheirRead) {
  TempDir dir;
  dir.MakeDir("dir");
  dir.Write("file", std::string("x"));
  LocalStore store(dir.Join(""));
  std::vector<uint8_t> buf;

  auto missing = store.OpenForOneRead("no/such.0");
  ASSERT_TRUE(missing.ok());
  ASSERT_NE(missing.value(), nullptr) << "missing is found by the read, not by the open";
  RangeRead m = ReadOnce(store, missing.value().get(), &buf, 8);
  EXPECT_TRUE(m.status.ok()) << m.status.ToString();
  EXPECT_TRUE(m.missing);
  EXPECT_EQ(m.transferred, 0u);

  auto d = store.OpenForOneRead("dir");
  ASSERT_TRUE(d.ok());
  RangeRead rd = ReadOnce(store, d.value().get(), &buf, 8);
  EXPECT_FALSE(rd.missing);
  EXPECT_EQ(rd.status.code(), StatusCode::kIoError);
  EXPECT_EQ(rd.status.error_number(), EISDIR);
  EXPECT_EQ(rd.status.path(), dir.Join("dir"));

  auto nd = store.OpenForOneRead("file/c.0");
  ASSERT_TRUE(nd.ok());
  RangeRead rn = ReadOnce(store, nd.value().get(), &buf, 8);
  EXPECT_FALSE(rn.missing) << "ENOTDIR is an error, never missing";
  EXPECT_EQ(rn.status.error_number(), ENOTDIR);
  EXPECT_EQ(rn.status.message(), "cannot open file");
}

TEST(LocalStoreTest, OneReadObjectsOutsideTheAcceptedSizesAreSizedButNotRead) {
  TempDir dir;
  dir.Write("big", std::string(100, 'b'));
  dir.Write("small", std::string(3, 's'));
  LocalStore store(dir.Join(""));
  const int fds = lsio_test::OpenDescriptors();
  std::vector<uint8_t> buf;

  auto big = store.OpenForOneRead("big");
  ASSERT_TRUE(big.ok());
  RangeRead b = ReadOnce(store, big.value().get(), &buf, 64);
  ASSERT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(big.value()->size, 100u);
  EXPECT_EQ(b.transferred, 0u);
  EXPECT_EQ(buf, std::vector<uint8_t>(64, 0xEE)) << "a larger object is not read at all";

  auto small = store.OpenForOneRead("small");
  ASSERT_TRUE(small.ok());
  RangeRead s = ReadOnce(store, small.value().get(), &buf, 8, /*min_size=*/8);
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_EQ(small.value()->size, 3u);
  EXPECT_EQ(s.transferred, 0u);
  EXPECT_EQ(buf, std::vector<uint8_t>(8, 0xEE)) << "a smaller object than min_size is not read at all";
  EXPECT_EQ(lsio_test::OpenDescriptors(), fds);
}

TEST(LocalStoreTest, OneReadOfAFifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.Join("c.0");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int rc = lsio_test::RunInChild([&] {
    alarm(10);
    for (IoMode mode : {IoMode::kPread, IoMode::kAuto}) {
      LocalStore store(dir.Join(""), {.mode = mode});
      auto o = store.OpenForOneRead("c.0");
      if (!o.ok()) return 1;
      std::vector<uint8_t> buf;
      RangeRead r = ReadOnce(store, o.value().get(), &buf, 8);
      if (r.status.ok() || r.missing) return 2;
      if (r.status.error_number() != EINVAL || r.status.message() != "not a regular file") return 3;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << (rc == 1000 + SIGALRM ? "a one-read open blocked on a FIFO" : "wrong status");
}

TEST(LocalStoreTest, DirectStoresOpenOneReadObjectsAtOnce) {
  // O_DIRECT descriptors need aligned reads into aligned buffers: they keep the cached path.
  TempDir dir;
  dir.Write("c.0", std::string("x"));
  LocalStore store(dir.Join(""), {.direct = DirectMode::kOn});
  EXPECT_FALSE(store.traits().opens_on_read);
  auto o = store.OpenForOneRead("c.0");
  ASSERT_TRUE(o.ok());
  ASSERT_NE(o.value(), nullptr);
  EXPECT_FALSE(o.value()->open_on_read);
  EXPECT_TRUE(o.value()->size_known);
  EXPECT_EQ(o.value()->size, 1u);
}

}  // namespace
}  // namespace lsio
