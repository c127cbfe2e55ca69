// FileMap and MapAccessGuard (io/file_map.h): a file mapped whole reads as its bytes;
// Resident follows the page cache (dropped pages are not resident, a read makes them so);
// Unchanged sees a write or a cut (also one that only leaves zeros, no fault, on the last
// page); a file truncated under its mapping reads as zeros inside a guard and marks the map
// faulted, where an unguarded access still dies of SIGBUS; the SIGBUS handler chains to the
// handler that was there before it; a SIGBUS sent (not raised by an access) to a thread
// inside a guard is absorbed (Python's faulthandler re-raising).
#include "io/file_map.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::TempDir;

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

struct Fd {
  int fd = -1;
  explicit Fd(const std::string& path, int flags = O_RDONLY) : fd(open(path.c_str(), flags | O_CLOEXEC)) {}
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

void ExitOnSigbus(int) { _exit(42); }

// The file open at `fd` mapped as OpenFile::Map maps it: with its size and times now.
std::unique_ptr<FileMap> MapNow(int fd, uint64_t size) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  return FileMap::Create(fd, size, static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                         static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec);
}

bool OnTmpfs(const std::string& path) {
  struct statfs s;
  return statfs(path.c_str(), &s) == 0 && static_cast<uint32_t>(s.f_type) == 0x01021994u;  // TMPFS_MAGIC
}

TEST(FileMapTest, MapsTheWholeFile) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(3 * kPage + 100, 7);
  const std::string path = dir.Write("f", data);
  Fd f(path);
  ASSERT_GE(f.fd, 0);
  auto m = MapNow(f.fd, data.size());
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->size(), data.size());
  EXPECT_EQ(std::memcmp(m->data(), data.data(), data.size()), 0);
  EXPECT_FALSE(m->faulted());
}

TEST(FileMapTest, EmptyFilesAndBadDescriptorsAreNotMapped) {
  TempDir dir;
  const std::string path = dir.Write("empty", Bytes{});
  Fd f(path);
  ASSERT_GE(f.fd, 0);
  EXPECT_EQ(MapNow(f.fd, 0), nullptr);
  EXPECT_EQ(MapNow(-1, 100), nullptr);
  Fd d(dir.path(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(d.fd, 0);
  EXPECT_EQ(MapNow(d.fd, 4096), nullptr);  // not a regular file
}

TEST(FileMapTest, ResidentFollowsThePageCache) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(64 * kPage + 100, 3);
  const std::string path = dir.Write("f", data);
  Fd f(path);
  ASSERT_GE(f.fd, 0);
  fdatasync(f.fd);
  posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);  // clean pages, never mapped: dropped
  auto m = MapNow(f.fd, data.size());
  ASSERT_NE(m, nullptr);
  // Out of range, whatever the cache holds.
  EXPECT_FALSE(m->Resident(data.size() - 1, 2));
  EXPECT_FALSE(m->Resident(data.size() + 1, 0));
  EXPECT_TRUE(m->Resident(data.size(), 0));
  if (OnTmpfs(dir.path())) {  // tmpfs pages live in memory: always resident
    EXPECT_TRUE(m->Resident(0, data.size()));
    return;
  }
  EXPECT_FALSE(m->Resident(16 * kPage, 2 * kPage));
  std::vector<uint8_t> buf(2 * kPage);
  ASSERT_EQ(pread(f.fd, buf.data(), buf.size(), 16 * kPage), static_cast<ssize_t>(buf.size()));
  EXPECT_TRUE(m->Resident(16 * kPage, 2 * kPage));
  EXPECT_TRUE(m->Resident(16 * kPage + 10, kPage));
  EXPECT_FALSE(m->Resident(15 * kPage, 3 * kPage)) << "a page not read is not resident";
  EXPECT_EQ(std::memcmp(m->data() + 16 * kPage, data.data() + 16 * kPage, 2 * kPage), 0);
}

// A file of four pages, mapped and read, then cut to one page by another descriptor.
struct Truncated {
  TempDir dir;
  Bytes data = lsio_test::PatternBytes(4 * kPage, 11);
  std::string path = dir.Write("f", data);
  Fd f{path};
  std::unique_ptr<FileMap> m = MapNow(f.fd, data.size());

  bool Cut() {
    if (m == nullptr) return false;
    volatile uint8_t sink = m->data()[3 * kPage];  // mapped in before the cut
    (void)sink;
    return truncate(path.c_str(), static_cast<off_t>(kPage)) == 0;
  }
};

TEST(FileMapTest, ATruncationUnderAGuardReadsZerosAndMarksTheMap) {
  Truncated t;
  ASSERT_NE(t.m, nullptr);
  ASSERT_TRUE(t.Cut());
  uint8_t got[16];
  {
    MapAccessGuard g(*t.m);
    std::memcpy(got, t.m->data() + 3 * kPage + 8, sizeof got);  // past the end now: SIGBUS, absorbed
  }
  for (uint8_t b : got) EXPECT_EQ(b, 0);
  EXPECT_TRUE(t.m->faulted());
  EXPECT_FALSE(t.m->Unchanged());
  EXPECT_FALSE(t.m->Resident(0, kPage)) << "a faulted map is never served from again";
  // The page still inside the file reads as before.
  EXPECT_EQ(std::memcmp(t.m->data(), t.data.data(), kPage), 0);
}

TEST(FileMapTest, UnchangedUntilTheFileIsWrittenOrCut) {
  TempDir dir;
  const Bytes data = lsio_test::PatternBytes(4 * kPage + 10, 2);
  const std::string path = dir.Write("f", data);
  // Times an hour old, so that a write now moves them on every kernel (before 6.13 a write
  // within the same coarse tick as the file's creation would leave them as they were).
  const struct timespec old[2] = {{time(nullptr) - 3600, 0}, {time(nullptr) - 3600, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), old, 0), 0);
  Fd f(path);
  auto m = MapNow(f.fd, data.size());
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(m->Unchanged());
  EXPECT_TRUE(m->Resident(0, kPage));
  // The same bytes written again (same size): the times move. A cut inside the last page
  // reads as zeros there without any fault, which only this check sees.
  Fd w(path, O_WRONLY);
  ASSERT_EQ(pwrite(w.fd, data.data(), 16, 0), 16);
  EXPECT_FALSE(m->Unchanged());
  m->Retire();
  EXPECT_FALSE(m->Resident(0, kPage)) << "a retired map serves nothing";

  auto m2 = MapNow(f.fd, data.size());
  ASSERT_NE(m2, nullptr);
  ASSERT_EQ(ftruncate(w.fd, static_cast<off_t>(4 * kPage + 2)), 0);
  EXPECT_EQ(m2->data()[4 * kPage + 5], 0) << "past the new end, on its page: zeros, no SIGBUS";
  EXPECT_FALSE(m2->faulted());
  EXPECT_FALSE(m2->Unchanged());
}

// Sanitizers take SIGBUS themselves (the handler chains to theirs) and write a report of the
// fault, which scripts/sanitize.sh counts as a failure: the unguarded death is checked in the
// plain build only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

TEST(FileMapTest, AnUnguardedFaultStillKillsTheProcess) {
  if (kSanitized) GTEST_SKIP() << "a sanitizer's SIGBUS handler would report the intended fault";
  const int rc = lsio_test::RunInChild([] {
    Truncated t;
    if (!t.Cut()) return 2;
    volatile uint8_t b = t.m->data()[3 * kPage + 8];
    (void)b;
    return 0;
  });
  EXPECT_EQ(rc, 1000 + SIGBUS);
}

TEST(FileMapTest, ASignalSentInsideAGuardIsAbsorbed) {
  const int rc = lsio_test::RunInChild([] {
    Truncated t;
    if (t.m == nullptr) return 2;
    {
      MapAccessGuard g(*t.m);
      raise(SIGBUS);  // si_code SI_TKILL: no access to look at
    }
    return t.m->faulted() ? 3 : 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST(FileMapTest, TheGuardIsReadyOnlyWhileItsHandlerIsInPlace) {
  const int rc = lsio_test::RunInChild([] {
    if (!FileMap::GuardReady()) return 2;
    struct sigaction other, mine;
    std::memset(&other, 0, sizeof other);
    other.sa_handler = ExitOnSigbus;
    sigemptyset(&other.sa_mask);
    sigaction(SIGBUS, &other, &mine);  // as faulthandler.enable() after lsio would
    if (FileMap::GuardReady()) return 3;
    sigaction(SIGBUS, &mine, nullptr);  // as faulthandler.disable() puts it back
    return FileMap::GuardReady() ? 0 : 4;
  });
  EXPECT_EQ(rc, 0);
}

TEST(FileMapDeathTest, OtherFaultsGoToTheHandlerThatWasThere) {
  // threadsafe: the child runs this test alone in a fresh process, where the handler is
  // installed by the FileMap below, after ExitOnSigbus. The style is put back afterwards.
  const std::string style = GTEST_FLAG_GET(death_test_style);
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_handler = ExitOnSigbus;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, nullptr);
        Truncated t;
        if (!t.Cut()) _exit(2);
        volatile uint8_t b = t.m->data()[3 * kPage + 8];  // unguarded
        (void)b;
        _exit(0);
      },
      testing::ExitedWithCode(42), "");
  GTEST_FLAG_SET(death_test_style, style);
}

}  // namespace
}  // namespace lsio
