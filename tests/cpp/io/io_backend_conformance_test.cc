// The IoBackend conformance suite (io_backend.h contract), run by every backend: pread,
// io_uring, and io_uring with inline RWF_NOWAIT attempts. io_uring variants skip with the
// reason from UringSupport() where the kernel refuses rings, and fail instead when
// LSIO_REQUIRE_URING=1. Faults come from the interposers of io/fault_injection.h: the
// syscall knobs for pread/preadv2, and the io_uring knobs for the ring's completions
// (UringCompletionFaultTest: short, -EINTR, -EAGAIN, -EIO and 0 results on both ring
// variants).
#include "io/io_backend.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "io/fault_injection.h"
#include "io/select_backend.h"
#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::GetFaults;
using lsio_test::ResetFaults;

constexpr uint8_t kCanary = 0xC5;
constexpr size_t kGuard = 16;

#define LSIO_SKIP_WITHOUT_URING()                                                          \
  do {                                                                                     \
    const UringSupportInfo lsio_info_ = UringSupport();                                    \
    if (!lsio_info_.available) {                                                           \
      if (lsio_test::RequireUring()) {                                                     \
        FAIL() << "LSIO_REQUIRE_URING=1 but io_uring is unavailable: " << lsio_info_.reason; \
      }                                                                                    \
      GTEST_SKIP() << "io_uring unavailable here: " << lsio_info_.reason;                  \
    }                                                                                      \
  } while (0)

struct PreadTraits {
  static constexpr bool kRing = false;
  static constexpr bool kNowait = false;
  static constexpr const char* kName = "pread";
  static Result<std::unique_ptr<IoBackend>> Make(unsigned) { return MakePreadBackend(); }
};
struct UringTraits {
  static constexpr bool kRing = true;
  static constexpr bool kNowait = false;
  static constexpr const char* kName = "uring";
  static Result<std::unique_ptr<IoBackend>> Make(unsigned qd) { return MakeUringBackend(qd, false); }
};
struct UringNowaitTraits {
  static constexpr bool kRing = true;
  static constexpr bool kNowait = true;
  static constexpr const char* kName = "uring+nowait";
  static Result<std::unique_ptr<IoBackend>> Make(unsigned qd) { return MakeUringBackend(qd, true); }
};

// A destination buffer with canaries on both sides.
struct Guarded {
  explicit Guarded(size_t n) : buf(n + 2 * kGuard, kCanary), n(n) {}
  uint8_t* data() { return buf.data() + kGuard; }
  Bytes contents() const { return Bytes(buf.begin() + kGuard, buf.begin() + static_cast<long>(kGuard + n)); }
  bool GuardsIntact() const {
    for (size_t i = 0; i < kGuard; ++i) {
      if (buf[i] != kCanary || buf[kGuard + n + i] != kCanary) return false;
    }
    return true;
  }
  Bytes buf;
  size_t n;
};

template <typename T>
class IoBackendConformanceTest : public testing::Test {
 protected:
  void SetUp() override {
    ResetFaults();
    if constexpr (T::kRing) LSIO_SKIP_WITHOUT_URING();
    auto b = T::Make(4);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    content_ = lsio_test::PatternBytes(kFileSize, 7);
    path_ = dir_.Write("data.bin", content_);
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    ResetFaults();
    if (fd_ >= 0) close(fd_);
  }

  // Runs the batch and checks on_done: exactly once per request, on the calling thread,
  // after that request's status was set.
  void Read(std::vector<ReadRequest>& reqs) {
    std::vector<int> calls(reqs.size(), 0);
    std::vector<StatusCode> code_at_callback(reqs.size(), StatusCode::kInternal);
    const auto caller = std::this_thread::get_id();
    bool wrong_thread = false;
    for (ReadRequest& r : reqs) r.status = Status::Internal("unset by the backend");
    backend_->Read(reqs, [&](size_t i) {
      ASSERT_LT(i, reqs.size());
      ++calls[i];
      code_at_callback[i] = reqs[i].status.code();
      wrong_thread |= std::this_thread::get_id() != caller;
    });
    EXPECT_FALSE(wrong_thread) << "on_done must run on the calling thread";
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(calls[i], 1) << "on_done for request " << i;
      EXPECT_EQ(code_at_callback[i], reqs[i].status.code()) << "status of request " << i << " set after on_done";
    }
  }

  Bytes Expected(uint64_t off, uint64_t len) const {
    return Bytes(content_.begin() + static_cast<long>(off), content_.begin() + static_cast<long>(off + len));
  }

  static constexpr size_t kFileSize = 256 * 1024 + 123;
  lsio_test::TempDir dir_;
  std::unique_ptr<IoBackend> backend_;
  Bytes content_;
  std::string path_;
  int fd_ = -1;
};

using Backends = testing::Types<PreadTraits, UringTraits, UringNowaitTraits>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return T::kRing ? (T::kNowait ? "UringNowait" : "Uring") : "Pread";
  }
};
TYPED_TEST_SUITE(IoBackendConformanceTest, Backends, BackendNames);

TYPED_TEST(IoBackendConformanceTest, ReportsItsName) {
  EXPECT_STREQ(this->backend_->name(), TypeParam::kName);
}

TYPED_TEST(IoBackendConformanceTest, ReadsOneRangeExactly) {
  Guarded g(1000);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = 4097;
  reqs[0].length = 1000;
  reqs[0].dst = g.data();
  this->Read(reqs);
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(g.contents(), this->Expected(4097, 1000));
  EXPECT_TRUE(g.GuardsIntact());
}

TYPED_TEST(IoBackendConformanceTest, ManyRangesInOneCallBeyondQueueDepth) {
  // 300 ranges (queue depth 4): overlapping, unsorted, some ending exactly at EOF.
  constexpr size_t kN = 300;
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs(kN);
  uint64_t x = 12345;
  bufs.reserve(kN);
  for (size_t i = 0; i < kN; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t len = 1 + (x >> 33) % 9000;
    uint64_t off = (x >> 7) % (this->kFileSize - len + 1);
    if (i % 50 == 0) off = this->kFileSize - len;  // ends at EOF
    bufs.emplace_back(len);
    reqs[i].fd = this->fd_;
    reqs[i].offset = off;
    reqs[i].length = len;
  }
  for (size_t i = 0; i < kN; ++i) reqs[i].dst = bufs[i].data();
  this->Read(reqs);
  for (size_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    ASSERT_EQ(bufs[i].contents(), this->Expected(reqs[i].offset, reqs[i].length)) << "request " << i;
    ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
  }
}

TYPED_TEST(IoBackendConformanceTest, EmptyBatchCallsNothing) {
  std::vector<ReadRequest> reqs;
  int calls = 0;
  this->backend_->Read(reqs, [&](size_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TYPED_TEST(IoBackendConformanceTest, ZeroLengthRequestsSucceedWithoutASyscall) {
  // fd -1 and a null dst: any syscall would fail with EBADF, any write would crash.
  Guarded g(16);
  std::vector<ReadRequest> reqs(3);
  reqs[0].fd = -1;
  reqs[0].offset = 0;
  reqs[0].length = 0;
  reqs[1].fd = this->fd_;
  reqs[1].offset = 10;
  reqs[1].length = 16;
  reqs[1].dst = g.data();
  reqs[2].fd = this->fd_;
  reqs[2].offset = this->kFileSize + 100;  // past EOF, but nothing to read
  reqs[2].length = 0;
  this->Read(reqs);
  EXPECT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_TRUE(reqs[2].status.ok()) << reqs[2].status.ToString();
  ASSERT_TRUE(reqs[1].status.ok()) << reqs[1].status.ToString();
  EXPECT_EQ(g.contents(), this->Expected(10, 16));
}

TYPED_TEST(IoBackendConformanceTest, EofBeforeLengthIsDataLoss) {
  Guarded g(200);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = this->kFileSize - 50;
  reqs[0].length = 200;
  reqs[0].dst = g.data();
  this->Read(reqs);
  const Status& st = reqs[0].status;
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_EQ(st.message(), "unexpected end of file after 50 of 200 bytes");
  EXPECT_TRUE(st.has_range());
  EXPECT_EQ(st.range_offset(), this->kFileSize - 50);
  EXPECT_EQ(st.range_length(), 200u);
  // The bytes before EOF arrived; nothing was written past what the file holds.
  const Bytes got = g.contents();
  EXPECT_EQ(Bytes(got.begin(), got.begin() + 50), this->Expected(this->kFileSize - 50, 50));
  EXPECT_TRUE(std::all_of(got.begin() + 50, got.end(), [](uint8_t b) { return b == kCanary; }));
  EXPECT_TRUE(g.GuardsIntact());
}

TYPED_TEST(IoBackendConformanceTest, RequestLargerThanTheFileIsDataLoss) {
  const uint64_t len = this->kFileSize + 4096;
  Guarded g(len);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = 0;
  reqs[0].length = len;
  reqs[0].dst = g.data();
  this->Read(reqs);
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(reqs[0].status.message(), "unexpected end of file after " + std::to_string(this->kFileSize) + " of " +
                                          std::to_string(len) + " bytes");
  EXPECT_TRUE(g.GuardsIntact());
}

TYPED_TEST(IoBackendConformanceTest, OffsetPastEndOfFileIsDataLoss) {
  Guarded g(8);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = this->kFileSize + 1;
  reqs[0].length = 8;
  reqs[0].dst = g.data();
  this->Read(reqs);
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(reqs[0].status.message(), "unexpected end of file after 0 of 8 bytes");
  EXPECT_EQ(g.contents(), Bytes(8, kCanary));
}

TYPED_TEST(IoBackendConformanceTest, BadFdIsIoErrorWithErrno) {
  // A descriptor number above RLIMIT_NOFILE can never be open, so it cannot be reused by
  // anything the backend opens meanwhile (an io_uring ring takes the lowest free number).
  rlimit rl{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
  const int closed_fd = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 30)
                            ? (1 << 30)
                            : static_cast<int>(rl.rlim_cur) + 10;
  const int dir_fd = open(this->dir_.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dir_fd, 0);
  Guarded a(8), b(8);
  std::vector<ReadRequest> reqs(2);
  reqs[0].fd = closed_fd;
  reqs[0].offset = 0;
  reqs[0].length = 8;
  reqs[0].dst = a.data();
  reqs[1].fd = dir_fd;
  reqs[1].offset = 0;
  reqs[1].length = 8;
  reqs[1].dst = b.data();
  this->Read(reqs);
  close(dir_fd);
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kIoError) << reqs[0].status.ToString();
  EXPECT_EQ(reqs[0].status.error_number(), EBADF);
  EXPECT_EQ(reqs[0].status.message(), "read failed");
  EXPECT_EQ(reqs[0].status.range_offset(), 0u);
  EXPECT_EQ(reqs[0].status.range_length(), 8u);
  EXPECT_EQ(reqs[1].status.code(), StatusCode::kIoError) << reqs[1].status.ToString();
  EXPECT_EQ(reqs[1].status.error_number(), EISDIR);
  EXPECT_TRUE(a.GuardsIntact() && b.GuardsIntact());
  EXPECT_EQ(a.contents(), Bytes(8, kCanary));
}

TYPED_TEST(IoBackendConformanceTest, FailuresAreIndependent) {
  std::vector<Guarded> bufs;
  bufs.reserve(6);
  std::vector<ReadRequest> reqs(6);
  const uint64_t offs[] = {0, 0, 100, this->kFileSize - 4, 5000, 0};
  const uint64_t lens[] = {64, 64, 64, 8, 64, 0};
  const int fds[] = {this->fd_, -1, this->fd_, this->fd_, this->fd_, -1};
  for (size_t i = 0; i < 6; ++i) bufs.emplace_back(lens[i]);
  for (size_t i = 0; i < 6; ++i) {
    reqs[i].fd = fds[i];
    reqs[i].offset = offs[i];
    reqs[i].length = lens[i];
    reqs[i].dst = bufs[i].data();
  }
  this->Read(reqs);
  EXPECT_TRUE(reqs[0].status.ok());
  EXPECT_EQ(bufs[0].contents(), this->Expected(0, 64));
  EXPECT_EQ(reqs[1].status.code(), StatusCode::kIoError);
  EXPECT_EQ(reqs[1].status.error_number(), EBADF);
  EXPECT_TRUE(reqs[2].status.ok());
  EXPECT_EQ(bufs[2].contents(), this->Expected(100, 64));
  EXPECT_EQ(reqs[3].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(reqs[3].status.message(), "unexpected end of file after 4 of 8 bytes");
  EXPECT_TRUE(reqs[4].status.ok());
  EXPECT_EQ(bufs[4].contents(), this->Expected(5000, 64));
  EXPECT_TRUE(reqs[5].status.ok());
}

TYPED_TEST(IoBackendConformanceTest, ShortReadsAreResumed) {
  // Every interposed pread/preadv2 moves at most 7 bytes, and every io_uring read SQE asks
  // the kernel for at most 7 bytes (a genuine short completion).
  GetFaults().max_bytes = 7;
  GetFaults().uring_max_bytes = 7;
  std::vector<Guarded> bufs;
  bufs.reserve(3);
  const uint64_t offs[] = {3, 70000, this->kFileSize - 100};
  const uint64_t lens[] = {1000, 4096, 100};
  std::vector<ReadRequest> reqs(3);
  for (size_t i = 0; i < 3; ++i) bufs.emplace_back(lens[i]);
  for (size_t i = 0; i < 3; ++i) {
    reqs[i].fd = this->fd_;
    reqs[i].offset = offs[i];
    reqs[i].length = lens[i];
    reqs[i].dst = bufs[i].data();
  }
  this->Read(reqs);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << reqs[i].status.ToString();
    EXPECT_EQ(bufs[i].contents(), this->Expected(offs[i], lens[i]));
    EXPECT_TRUE(bufs[i].GuardsIntact());
  }
  if constexpr (!TypeParam::kRing) {
    EXPECT_GE(GetFaults().pread_calls.load(), (1000u + 4096u + 100u) / 7u);
  }
  if constexpr (TypeParam::kRing && !TypeParam::kNowait) {
    EXPECT_GE(GetFaults().uring_reads.load(), (1000u + 4096u + 100u) / 7u);
  }
  if constexpr (TypeParam::kNowait) {
    EXPECT_GE(GetFaults().preadv2_calls.load(), 2u);
  }
}

TYPED_TEST(IoBackendConformanceTest, ShortReadsThenEofIsDataLoss) {
  GetFaults().max_bytes = 3;
  GetFaults().uring_max_bytes = 3;
  Guarded g(20);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = this->kFileSize - 10;
  reqs[0].length = 20;
  reqs[0].dst = g.data();
  this->Read(reqs);
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(reqs[0].status.message(), "unexpected end of file after 10 of 20 bytes");
  const Bytes got = g.contents();
  EXPECT_EQ(Bytes(got.begin(), got.begin() + 10), this->Expected(this->kFileSize - 10, 10));
}

TYPED_TEST(IoBackendConformanceTest, EintrAndEagainAreRetried) {
  GetFaults().eintr_every = 2;   // calls 2, 4, 6, ... fail with EINTR
  GetFaults().eagain_every = 3;  // calls 3, 9, 15, ... fail with EAGAIN
  GetFaults().max_bytes = 100;
  GetFaults().uring_eintr_every = 2;  // the same on the ring's completions
  GetFaults().uring_eagain_every = 3;
  GetFaults().uring_max_bytes = 100;
  Guarded g(5000);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = 1234;
  reqs[0].length = 5000;
  reqs[0].dst = g.data();
  this->Read(reqs);
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(g.contents(), this->Expected(1234, 5000));
}

TYPED_TEST(IoBackendConformanceTest, UsableFromManyThreadsAtOnce) {
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &failures] {
      for (int rep = 0; rep < 30; ++rep) {
        std::vector<Bytes> bufs(8);
        std::vector<ReadRequest> reqs(8);
        for (size_t i = 0; i < 8; ++i) {
          const uint64_t off = static_cast<uint64_t>((t * 7919 + rep * 104729 + static_cast<int>(i) * 1299709) % 200000);
          bufs[i].assign(3000, 0);
          reqs[i].fd = this->fd_;
          reqs[i].offset = off;
          reqs[i].length = 3000;
          reqs[i].dst = bufs[i].data();
        }
        int done = 0;
        this->backend_->Read(reqs, [&](size_t) { ++done; });
        if (done != 8) ++failures[static_cast<size_t>(t)];
        for (size_t i = 0; i < 8; ++i) {
          if (!reqs[i].status.ok() || bufs[i] != this->Expected(reqs[i].offset, 3000)) ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
}

TYPED_TEST(IoBackendConformanceTest, ForkedChildReadsAfterParentDid) {
  // The parent's thread has used the backend (a ring exists for io_uring); the child must
  // read correctly through the same backend object without touching the parent's ring.
  auto read_check = [this](uint64_t off) {
    Bytes buf(4096, 0);
    std::vector<ReadRequest> reqs(1);
    reqs[0].fd = this->fd_;
    reqs[0].offset = off;
    reqs[0].length = buf.size();
    reqs[0].dst = buf.data();
    this->backend_->Read(reqs, [](size_t) {});
    return reqs[0].status.ok() && buf == this->Expected(off, buf.size());
  };
  ASSERT_TRUE(read_check(0));
  const int rc = lsio_test::RunInChild([&] {
    for (uint64_t off = 0; off < 64 * 1024; off += 8192) {
      if (!read_check(off)) return 1;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(read_check(8192)) << "the parent must keep reading after the child";
}

// ---- io_uring specifics (not expressible for pread) ----

TEST(UringBackendTest, PipeShortReadsAreResumed) {
  // A pipe hands the ring what is available: 3 bytes now, 3 more later.
  LSIO_SKIP_WITHOUT_URING();
  auto b = MakeUringBackend(8, false);
  ASSERT_TRUE(b.ok());
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(write(p[1], "abc", 3), 3);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    EXPECT_EQ(write(p[1], "def", 3), 3);
    close(p[1]);
  });
  Bytes buf(6, 0);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = p[0];
  reqs[0].offset = 0;
  reqs[0].length = 6;
  reqs[0].dst = buf.data();
  int calls = 0;
  (*b)->Read(reqs, [&](size_t) { ++calls; });
  writer.join();
  close(p[0]);
  EXPECT_EQ(calls, 1);
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(std::string(buf.begin(), buf.end()), "abcdef");
}

TEST(UringBackendTest, PipeEofAfterShortReadIsDataLoss) {
  LSIO_SKIP_WITHOUT_URING();
  auto b = MakeUringBackend(8, false);
  ASSERT_TRUE(b.ok());
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(write(p[1], "abc", 3), 3);
  close(p[1]);
  Bytes buf(6, 0);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = p[0];
  reqs[0].offset = 0;
  reqs[0].length = 6;
  reqs[0].dst = buf.data();
  (*b)->Read(reqs, [](size_t) {});
  close(p[0]);
  EXPECT_EQ(reqs[0].status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(reqs[0].status.message(), "unexpected end of file after 3 of 6 bytes");
  EXPECT_EQ(std::string(buf.begin(), buf.begin() + 3), "abc");
}

TEST(UringBackendTest, PartialInlineReadIsFinishedByTheRing) {
  // RWF_NOWAIT serves the first 5 bytes (the cached part), then says EAGAIN: the ring must
  // continue at offset + 5 into dst + 5.
  LSIO_SKIP_WITHOUT_URING();
  ResetFaults();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(10000, 3);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto b = MakeUringBackend(8, true);
  ASSERT_TRUE(b.ok());
  GetFaults().nowait_budget = 5;
  Guarded g(4000);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = fd;
  reqs[0].offset = 1000;
  reqs[0].length = 4000;
  reqs[0].dst = g.data();
  (*b)->Read(reqs, [](size_t) {});
  const uint64_t inline_calls = GetFaults().preadv2_calls.load();
  ResetFaults();
  close(fd);
  ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
  EXPECT_EQ(g.contents(), Bytes(content.begin() + 1000, content.begin() + 5000));
  EXPECT_TRUE(g.GuardsIntact());
  EXPECT_GE(inline_calls, 2u) << "expected one partial inline read, then EAGAIN";
}

// A file opened for one read stays O_NONBLOCK (ReadRequest::fd_nonblocking): a page-cache
// hit is served inline without touching the flag (no fcntl per file), a miss clears it
// before the ring reads (io_uring answers EAGAIN on an O_NONBLOCK descriptor), and the
// plain ring backend clears it for every such request.
TEST(UringBackendTest, NonblockingDescriptorIsClearedOnlyForReadsThatLeaveTheInlinePath) {
  LSIO_SKIP_WITHOUT_URING();
  ResetFaults();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(20000, 5);
  const std::string path = dir.Write("f", content);
  struct Case {
    bool nowait;
    int64_t nowait_budget;  // -1: every inline attempt hits
    bool expect_cleared;
  };
  for (const Case c : {Case{true, -1, false}, Case{true, 0, true}, Case{true, 700, true}, Case{false, -1, true}}) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    ASSERT_GE(fd, 0);
    auto b = MakeUringBackend(8, c.nowait);
    ASSERT_TRUE(b.ok());
    GetFaults().nowait_budget = c.nowait_budget;
    Guarded g(9000);
    std::vector<ReadRequest> reqs(1);
    reqs[0].fd = fd;
    reqs[0].offset = 1234;
    reqs[0].length = 9000;
    reqs[0].dst = g.data();
    reqs[0].fd_nonblocking = true;
    (*b)->Read(reqs, [](size_t) {});
    ResetFaults();
    const int flags = fcntl(fd, F_GETFL);
    close(fd);
    const std::string what = std::string(c.nowait ? "uring+nowait" : "uring") + ", inline budget " +
                             std::to_string(c.nowait_budget);
    ASSERT_TRUE(reqs[0].status.ok()) << what << ": " << reqs[0].status.ToString();
    EXPECT_EQ(g.contents(), Bytes(content.begin() + 1234, content.begin() + 1234 + 9000)) << what;
    EXPECT_TRUE(g.GuardsIntact()) << what;
    EXPECT_EQ((flags & O_NONBLOCK) == 0, c.expect_cleared) << what;
  }
}

TEST(UringBackendTest, QueueDepthOneStillCompletesEveryRequest) {
  LSIO_SKIP_WITHOUT_URING();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(50000, 9);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  for (bool nowait : {false, true}) {
    auto b = MakeUringBackend(1, nowait);
    ASSERT_TRUE(b.ok());
    std::vector<Bytes> bufs(40, Bytes(1000));
    std::vector<ReadRequest> reqs(40);
    for (size_t i = 0; i < 40; ++i) {
      reqs[i].fd = fd;
      reqs[i].offset = i * 1111;
      reqs[i].length = 1000;
      reqs[i].dst = bufs[i].data();
    }
    std::vector<int> calls(40, 0);
    (*b)->Read(reqs, [&](size_t i) { ++calls[i]; });
    for (size_t i = 0; i < 40; ++i) {
      ASSERT_TRUE(reqs[i].status.ok());
      EXPECT_EQ(calls[i], 1);
      EXPECT_EQ(bufs[i], Bytes(content.begin() + static_cast<long>(i * 1111),
                               content.begin() + static_cast<long>(i * 1111 + 1000)));
    }
  }
  close(fd);
}

TEST(UringBackendTest, ZeroQueueDepthIsInvalidArgument) {
  auto b = MakeUringBackend(0, false);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "io_uring queue depth must be >= 1");
}

// Installs a seccomp filter making io_uring_setup fail with `err` (this process only: run
// it in a forked child).
bool BlockIoUringSetup(int err) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(UringBackendTest, ReadsFallBackToPreadWhenRingSetupFails) {
  // A uring backend made where rings worked, used in a child where io_uring_setup is
  // refused (the parent's thread already had a ring): reads still complete.
  LSIO_SKIP_WITHOUT_URING();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(8192, 4);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto b = MakeUringBackend(8, false);
  ASSERT_TRUE(b.ok());
  IoBackend* backend = b->get();
  auto read_ok = [&] {
    Bytes buf(8192, 0);
    std::vector<ReadRequest> reqs(1);
    reqs[0].fd = fd;
    reqs[0].offset = 0;
    reqs[0].length = 8192;
    reqs[0].dst = buf.data();
    backend->Read(reqs, [](size_t) {});
    return reqs[0].status.ok() && buf == content;
  };
  ASSERT_TRUE(read_ok());
  const int rc = lsio_test::RunInChild([&] {
    if (!BlockIoUringSetup(EPERM)) return 77;
    return read_ok() ? 0 : 1;
  });
  close(fd);
  if (rc == 77) GTEST_SKIP() << "cannot install a seccomp filter here";
  EXPECT_EQ(rc, 0);
}

TEST(SelectBackendTest, AutoFallsBackToPreadWhenSeccompRefusesIoUring) {
  for (int err : {EPERM, ENOSYS}) {
    const int rc = lsio_test::RunInChild([err] {
      if (!BlockIoUringSetup(err)) return 77;
      if (ProbeUringSetup() != -err) return 1;
      const UringSupportInfo info = UringSupport();  // re-probed in the child
      if (info.available || info.error != err) return 2;
      const std::string want = err == EPERM ? "(blocked by seccomp or kernel.io_uring_disabled)"
                                            : "(kernel without io_uring)";
      if (info.reason.find("io_uring setup failed: ") != 0) return 3;
      if (info.reason.find(want) == std::string::npos) return 4;
      auto autob = MakeBackend(IoMode::kAuto, 8);
      if (!autob.ok() || std::string((*autob)->name()) != "pread") return 5;
      auto forced = MakeBackend(IoMode::kUring, 8);
      if (forced.ok() || forced.status().code() != StatusCode::kUnavailable) return 6;
      if (forced.status().error_number() != err) return 7;
      if (forced.status().message().find("io_uring") == std::string::npos) return 8;
      if (err == EPERM && forced.status().message().find("seccomp") == std::string::npos) return 9;
      return 0;
    });
    if (rc == 77) GTEST_SKIP() << "cannot install a seccomp filter here";
    EXPECT_EQ(rc, 0) << "errno " << err;
  }
}


// Every interposed pread fails with EIO: each request must fail with kIoError/EIO, be
// reported exactly once, and leave its destination and the bytes around it untouched.
TEST(PreadConformanceFaultTest, EioOnEveryCallFailsEveryRequest) {
  ResetFaults();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(20000, 5);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto b = MakePreadBackend();
  GetFaults().eio_every = 1;
  constexpr size_t kN = 5;
  std::vector<Guarded> bufs;
  bufs.reserve(kN);
  std::vector<ReadRequest> reqs(kN);
  for (size_t i = 0; i < kN; ++i) {
    bufs.emplace_back(100 + i);
    reqs[i].fd = fd;
    reqs[i].offset = i * 3001;
    reqs[i].length = 100 + i;
    reqs[i].dst = bufs[i].data();
    reqs[i].status = Status::Internal("unset by the backend");
  }
  std::vector<int> calls(kN, 0);
  b->Read(reqs, [&](size_t i) {
    ASSERT_LT(i, kN);
    ++calls[i];
  });
  const uint64_t pread_calls = GetFaults().pread_calls.load();
  ResetFaults();
  close(fd);
  EXPECT_GE(pread_calls, kN);
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(calls[i], 1) << "on_done for request " << i;
    EXPECT_EQ(reqs[i].status.code(), StatusCode::kIoError) << reqs[i].status.ToString();
    EXPECT_EQ(reqs[i].status.error_number(), EIO) << reqs[i].status.ToString();
    EXPECT_EQ(reqs[i].status.message(), "read failed");
    EXPECT_EQ(reqs[i].status.range_offset(), i * 3001);
    EXPECT_EQ(reqs[i].status.range_length(), 100 + i);
    EXPECT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    EXPECT_EQ(bufs[i].contents(), Bytes(100 + i, kCanary)) << "request " << i;
  }
}

// With uring+nowait, an EIO from the inline preadv2(RWF_NOWAIT) is a real error (not a
// "try the ring" answer): the request fails with kIoError/EIO without reaching the ring.
TEST(UringBackendTest, InlineEioFailsTheRequest) {
  LSIO_SKIP_WITHOUT_URING();
  ResetFaults();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(20000, 6);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  auto b = MakeUringBackend(8, true);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  GetFaults().eio_every = 1;
  constexpr size_t kN = 4;
  std::vector<Guarded> bufs;
  bufs.reserve(kN);
  std::vector<ReadRequest> reqs(kN);
  for (size_t i = 0; i < kN; ++i) {
    bufs.emplace_back(256);
    reqs[i].fd = fd;
    reqs[i].offset = 1000 + i * 4096;
    reqs[i].length = 256;
    reqs[i].dst = bufs[i].data();
    reqs[i].status = Status::Internal("unset by the backend");
  }
  std::vector<int> calls(kN, 0);
  (*b)->Read(reqs, [&](size_t i) {
    ASSERT_LT(i, kN);
    ++calls[i];
  });
  const uint64_t inline_calls = GetFaults().preadv2_calls.load();
  ResetFaults();
  close(fd);
  EXPECT_EQ(inline_calls, kN) << "one inline preadv2 per request, no retries after EIO";
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(calls[i], 1) << "on_done for request " << i;
    EXPECT_EQ(reqs[i].status.code(), StatusCode::kIoError) << reqs[i].status.ToString();
    EXPECT_EQ(reqs[i].status.error_number(), EIO) << reqs[i].status.ToString();
    EXPECT_EQ(reqs[i].status.message(), "read failed");
    EXPECT_EQ(reqs[i].status.range_offset(), 1000 + i * 4096);
    EXPECT_EQ(reqs[i].status.range_length(), 256u);
    EXPECT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    EXPECT_EQ(bufs[i].contents(), Bytes(256, kCanary)) << "request " << i;
  }
}


// ---- io_uring completion faults (uring and uring+nowait) ----
//
// The ring's completions are faulted through the interposed io_uring_submit_and_wait (see
// fault_injection.h): a faulted read is submitted as a NOP, so nothing is written to its
// buffer, and its completion carries the injected result. For uring+nowait the inline
// RWF_NOWAIT attempt is refused (nowait_budget = 0), so every read goes to the ring.
template <typename T>
class UringCompletionFaultTest : public IoBackendConformanceTest<T> {
 protected:
  void SetUp() override {
    IoBackendConformanceTest<T>::SetUp();
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    if constexpr (T::kNowait) GetFaults().nowait_budget = 0;
  }

  // `n` requests on `fds[i % fds.size()]` at scattered offsets, each with guard bytes.
  void MakeRequests(size_t n, const std::vector<int>& fds, std::vector<Guarded>* bufs,
                    std::vector<ReadRequest>* reqs) {
    bufs->clear();
    bufs->reserve(n);
    reqs->assign(n, ReadRequest{});
    for (size_t i = 0; i < n; ++i) {
      const uint64_t len = 500 + (i * 997) % 7000;
      const uint64_t off = (i * 104729) % (this->kFileSize - len);
      bufs->emplace_back(len);
      (*reqs)[i].fd = fds[i % fds.size()];
      (*reqs)[i].offset = off;
      (*reqs)[i].length = len;
    }
    for (size_t i = 0; i < n; ++i) (*reqs)[i].dst = (*bufs)[i].data();
  }

  // The backend still serves plain reads on this thread's ring after the faults.
  void ExpectCleanReadAfterwards() {
    ResetFaults();
    if constexpr (T::kNowait) GetFaults().nowait_budget = 0;
    Guarded g(3000);
    std::vector<ReadRequest> reqs(1);
    reqs[0].fd = this->fd_;
    reqs[0].offset = 777;
    reqs[0].length = 3000;
    reqs[0].dst = g.data();
    this->Read(reqs);
    ASSERT_TRUE(reqs[0].status.ok()) << reqs[0].status.ToString();
    EXPECT_EQ(g.contents(), this->Expected(777, 3000));
    EXPECT_TRUE(g.GuardsIntact());
  }
};

using RingBackends = testing::Types<UringTraits, UringNowaitTraits>;
TYPED_TEST_SUITE(UringCompletionFaultTest, RingBackends, BackendNames);

TYPED_TEST(UringCompletionFaultTest, ShortCompletionsAreResumedToTheFullLength) {
  // 40 requests beyond queue depth 4; every completion carries at most 333 bytes.
  GetFaults().uring_max_bytes = 333;
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs;
  this->MakeRequests(40, {this->fd_}, &bufs, &reqs);
  uint64_t total = 0;
  for (const ReadRequest& r : reqs) total += r.length;
  this->Read(reqs);
  const uint64_t ring_reads = GetFaults().uring_reads.load();
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    ASSERT_EQ(bufs[i].contents(), this->Expected(reqs[i].offset, reqs[i].length)) << "request " << i;
    ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
  }
  EXPECT_GE(ring_reads, total / 333) << "the completions were not short";
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, EagainAndEintrCompletionsAreRetried) {
  GetFaults().uring_eintr_every = 2;   // read SQEs 2, 4, 6, ... complete with -EINTR
  GetFaults().uring_eagain_every = 3;  // 3, 9, 15, ... with -EAGAIN
  GetFaults().uring_max_bytes = 1000;
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs;
  this->MakeRequests(12, {this->fd_}, &bufs, &reqs);
  this->Read(reqs);
  const uint64_t injected = GetFaults().uring_injected.load();
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
    ASSERT_EQ(bufs[i].contents(), this->Expected(reqs[i].offset, reqs[i].length)) << "request " << i;
    ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
  }
  EXPECT_GT(injected, 10u) << "the faults were not injected";
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, EioIsIoErrorWithErrnoAndOtherRequestsAreUnaffected) {
  // A second descriptor of the same file whose every ring read completes with -EIO: its
  // requests fail, the interleaved requests on the first descriptor do not.
  const int bad_fd = open(this->path_.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(bad_fd, 0);
  GetFaults().uring_eio_fd = bad_fd;
  GetFaults().uring_max_bytes = 2000;  // the good requests take several completions each
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs;
  this->MakeRequests(16, {this->fd_, bad_fd}, &bufs, &reqs);
  this->Read(reqs);
  close(bad_fd);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ReadRequest& r = reqs[i];
    ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    if (i % 2 == 0) {
      ASSERT_TRUE(r.status.ok()) << i << ": " << r.status.ToString();
      ASSERT_EQ(bufs[i].contents(), this->Expected(r.offset, r.length)) << "request " << i;
      continue;
    }
    EXPECT_EQ(r.status.code(), StatusCode::kIoError) << i << ": " << r.status.ToString();
    EXPECT_EQ(r.status.error_number(), EIO) << r.status.ToString();
    EXPECT_EQ(r.status.message(), "read failed");
    EXPECT_TRUE(r.status.has_range());
    EXPECT_EQ(r.status.range_offset(), r.offset);
    EXPECT_EQ(r.status.range_length(), r.length);
    EXPECT_EQ(bufs[i].contents(), Bytes(r.length, kCanary)) << "a failed read wrote into request " << i;
  }
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, EioAfterPartialProgressFailsTheWholeRequest) {
  // 1000 bytes in completions of 100: the 4th completion is -EIO. The request fails (its
  // 300 good bytes are not reported as data) and nothing lands past what was read.
  GetFaults().uring_max_bytes = 100;
  GetFaults().uring_eio_every = 4;
  Guarded g(1000);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = 5000;
  reqs[0].length = 1000;
  reqs[0].dst = g.data();
  this->Read(reqs);
  EXPECT_EQ(GetFaults().uring_reads.load(), 4u) << "no retry after -EIO";
  const Status& st = reqs[0].status;
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_EQ(st.error_number(), EIO);
  EXPECT_EQ(st.range_offset(), 5000u);
  EXPECT_EQ(st.range_length(), 1000u);
  const Bytes got = g.contents();
  EXPECT_EQ(Bytes(got.begin(), got.begin() + 300), this->Expected(5000, 300));
  EXPECT_EQ(Bytes(got.begin() + 300, got.end()), Bytes(700, kCanary));
  EXPECT_TRUE(g.GuardsIntact());
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, ZeroResultIsEndOfFileAfterTheBytesRead) {
  GetFaults().uring_max_bytes = 100;
  GetFaults().uring_eof_every = 3;  // the 3rd completion says 0 bytes: end of file
  Guarded g(1000);
  std::vector<ReadRequest> reqs(1);
  reqs[0].fd = this->fd_;
  reqs[0].offset = 64;
  reqs[0].length = 1000;
  reqs[0].dst = g.data();
  this->Read(reqs);
  const Status& st = reqs[0].status;
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_EQ(st.message(), "unexpected end of file after 200 of 1000 bytes");
  EXPECT_EQ(st.range_offset(), 64u);
  EXPECT_EQ(st.range_length(), 1000u);
  const Bytes got = g.contents();
  EXPECT_EQ(Bytes(got.begin(), got.begin() + 200), this->Expected(64, 200));
  EXPECT_EQ(Bytes(got.begin() + 200, got.end()), Bytes(800, kCanary));
  EXPECT_TRUE(g.GuardsIntact());
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, MixedFaultsAcrossManyRequests) {
  // Short, -EINTR, -EAGAIN and -EIO completions interleaved over 60 requests: each request
  // ends either with exactly its bytes or with kIoError/EIO, never anything else, and no
  // byte is written outside any buffer.
  GetFaults().uring_max_bytes = 1500;
  GetFaults().uring_eintr_every = 5;
  GetFaults().uring_eagain_every = 7;
  GetFaults().uring_eio_every = 11;
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs;
  this->MakeRequests(60, {this->fd_}, &bufs, &reqs);
  this->Read(reqs);
  size_t ok = 0, eio = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ReadRequest& r = reqs[i];
    ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    if (r.status.ok()) {
      ++ok;
      ASSERT_EQ(bufs[i].contents(), this->Expected(r.offset, r.length)) << "request " << i;
    } else {
      ++eio;
      ASSERT_EQ(r.status.code(), StatusCode::kIoError) << i << ": " << r.status.ToString();
      ASSERT_EQ(r.status.error_number(), EIO) << r.status.ToString();
    }
  }
  EXPECT_GT(ok, 0u);
  EXPECT_GT(eio, 0u);
  this->ExpectCleanReadAfterwards();
}

TYPED_TEST(UringCompletionFaultTest, FaultedRingsOnManyThreadsAtOnce) {
  // Each thread has its own ring (and its own record of injected NOPs): short and -EINTR
  // completions on four rings at once still give every thread its exact bytes.
  GetFaults().uring_max_bytes = 700;
  GetFaults().uring_eintr_every = 3;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([this, t, &failures] {
      for (int rep = 0; rep < 10; ++rep) {
        std::vector<Guarded> bufs;
        std::vector<ReadRequest> reqs;
        this->MakeRequests(6 + static_cast<size_t>(t), {this->fd_}, &bufs, &reqs);
        int done = 0;
        this->backend_->Read(reqs, [&](size_t) { ++done; });
        if (done != static_cast<int>(reqs.size())) ++failures[static_cast<size_t>(t)];
        for (size_t i = 0; i < reqs.size(); ++i) {
          if (!reqs[i].status.ok() || bufs[i].contents() != this->Expected(reqs[i].offset, reqs[i].length) ||
              !bufs[i].GuardsIntact()) {
            ++failures[static_cast<size_t>(t)];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
  EXPECT_GT(GetFaults().uring_injected.load(), 0u);
}

// ---- hard ring errors and exceptions from on_done (uring and uring+nowait) ----
//
// A Read that ends early (the ring failed hard, or on_done threw) must leave nothing behind
// on the thread's ring: the caller frees the buffers, and the next Read on that thread must
// neither submit the old SQEs into them nor take the old completions (whose user_data names
// the old call's request indices) for its own. Each test poisons the first call's buffers
// after it ended, reads again on the same thread, and checks the poison and the new data.
template <typename T>
class UringHardErrorTest : public UringCompletionFaultTest<T> {
 protected:
  static constexpr uint8_t kPoison = 0xEE;

  // The next Read on this thread: exact data, on_done once per request; and every byte of
  // `old` still holds the poison (nothing of the old call reached it).
  void ExpectCleanNextRead(std::vector<Guarded>* old) {
    for (Guarded& g : *old) std::fill(g.buf.begin(), g.buf.end(), kPoison);
    ResetFaults();
    if constexpr (T::kNowait) GetFaults().nowait_budget = 0;
    std::vector<Guarded> bufs;
    std::vector<ReadRequest> reqs;
    this->MakeRequests(12, {this->fd_}, &bufs, &reqs);
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].offset = (reqs[i].offset + 4099) % (this->kFileSize - reqs[i].length);
    this->Read(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
      ASSERT_EQ(bufs[i].contents(), this->Expected(reqs[i].offset, reqs[i].length)) << "request " << i;
      ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    }
    for (size_t i = 0; i < old->size(); ++i) {
      const Bytes& b = (*old)[i].buf;
      ASSERT_EQ(b, Bytes(b.size(), kPoison)) << "the old call's request " << i << " was written after it ended";
    }
  }
};

TYPED_TEST_SUITE(UringHardErrorTest, RingBackends, BackendNames);

TYPED_TEST(UringHardErrorTest, HardSubmitFailureFailsTheCallAndLeavesNothingQueued) {
  // Queue depth 4, 12 requests: the submission call numbered fail_after + 1 fails with
  // -EBADF (after publishing its SQEs, as liburing does). With fail_after > 0 reads of
  // earlier submissions are in flight or done when it fails.
  for (int64_t fail_after : {0, 1, 2}) {
    SCOPED_TRACE("submission calls before the failure: " + std::to_string(fail_after));
    ResetFaults();
    if constexpr (TypeParam::kNowait) GetFaults().nowait_budget = 0;
    GetFaults().uring_submit_fail_after = fail_after;
    GetFaults().uring_submit_errno = EBADF;
    std::vector<Guarded> bufs;
    std::vector<ReadRequest> reqs;
    this->MakeRequests(12, {this->fd_}, &bufs, &reqs);
    this->Read(reqs);  // on_done exactly once per request
    const uint64_t failed = GetFaults().uring_submit_failed.load();
    ASSERT_EQ(failed, 1u) << "the submission failure was not injected";
    size_t errors = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
      if (reqs[i].status.ok()) {
        ASSERT_EQ(bufs[i].contents(), this->Expected(reqs[i].offset, reqs[i].length)) << "request " << i;
        continue;
      }
      ++errors;
      EXPECT_EQ(reqs[i].status.code(), StatusCode::kIoError) << reqs[i].status.ToString();
      EXPECT_EQ(reqs[i].status.error_number(), EBADF) << reqs[i].status.ToString();
    }
    EXPECT_GT(errors, 0u);
    this->ExpectCleanNextRead(&bufs);
    if (this->HasFatalFailure()) return;
  }
}

struct ThrownFromOnDone {};

TYPED_TEST(UringHardErrorTest, OnDoneThrowingLeavesNoReadInFlight) {
  // Queue depth 4, 12 requests; on_done throws on its kth call while other reads are
  // submitted (and for k > 1, more are prepared): the exception reaches the caller, and
  // nothing of the call is in flight or queued afterwards.
  for (int k : {1, 2, 5}) {
    SCOPED_TRACE("on_done throws on call " + std::to_string(k));
    ResetFaults();
    if constexpr (TypeParam::kNowait) GetFaults().nowait_budget = 0;
    std::vector<Guarded> bufs;
    std::vector<ReadRequest> reqs;
    this->MakeRequests(12, {this->fd_}, &bufs, &reqs);
    int calls = 0;
    bool thrown = false;
    try {
      this->backend_->Read(reqs, [&](size_t) {
        if (++calls == k) throw ThrownFromOnDone{};
      });
    } catch (const ThrownFromOnDone&) {
      thrown = true;
    }
    ASSERT_TRUE(thrown);
    EXPECT_EQ(calls, k) << "on_done ran after it threw";
    this->ExpectCleanNextRead(&bufs);
    if (this->HasFatalFailure()) return;
  }
}

TYPED_TEST(UringHardErrorTest, OnDoneThrowingWithPreparedUnsubmittedReads) {
  // Request 0 goes to the ring and is only prepared (not submitted yet) when request 1, of
  // zero length, gets its on_done at once and that throws. The prepared SQE must never be
  // submitted later into request 0's (by then freed) buffer.
  std::vector<Guarded> bufs;
  std::vector<ReadRequest> reqs;
  this->MakeRequests(2, {this->fd_}, &bufs, &reqs);
  reqs[1].length = 0;
  bool thrown = false;
  try {
    this->backend_->Read(reqs, [&](size_t i) {
      if (i == 1) throw ThrownFromOnDone{};
    });
  } catch (const ThrownFromOnDone&) {
    thrown = true;
  }
  ASSERT_TRUE(thrown);
  this->ExpectCleanNextRead(&bufs);
}

TEST(UringBackendTest, InlineHitsAndFaultedRingReadsInOneBatch) {
  // uring+nowait with a partly cached file: the inline attempts serve the first 20000 bytes,
  // the rest goes to the ring, where the reads of one descriptor fail with -EIO. The inline
  // hits and the good ring reads are unaffected by the failures.
  LSIO_SKIP_WITHOUT_URING();
  ResetFaults();
  lsio_test::TempDir dir;
  const Bytes content = lsio_test::PatternBytes(200000, 8);
  const std::string path = dir.Write("f", content);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int bad_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_GE(bad_fd, 0);
  auto b = MakeUringBackend(4, true);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  GetFaults().nowait_budget = 20000;
  GetFaults().uring_eio_fd = bad_fd;
  constexpr size_t kN = 20;
  std::vector<Guarded> bufs;
  bufs.reserve(kN);
  std::vector<ReadRequest> reqs(kN);
  for (size_t i = 0; i < kN; ++i) {
    bufs.emplace_back(4000);
    // Requests 0-4 fit the inline budget; of the rest, the odd ones use the failing fd.
    reqs[i].fd = i >= 5 && i % 2 == 1 ? bad_fd : fd;
    reqs[i].offset = i * 9001;
    reqs[i].length = 4000;
    reqs[i].dst = bufs[i].data();
  }
  std::vector<int> calls(kN, 0);
  (*b)->Read(reqs, [&](size_t i) { ++calls[i]; });
  const uint64_t ring_reads = GetFaults().uring_reads.load();
  ResetFaults();
  close(fd);
  close(bad_fd);
  EXPECT_GT(ring_reads, 0u);
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(calls[i], 1) << "on_done for request " << i;
    EXPECT_TRUE(bufs[i].GuardsIntact()) << "request " << i;
    const Bytes want(content.begin() + static_cast<long>(i * 9001), content.begin() + static_cast<long>(i * 9001 + 4000));
    if (reqs[i].fd == bad_fd) {
      EXPECT_EQ(reqs[i].status.code(), StatusCode::kIoError) << i << ": " << reqs[i].status.ToString();
      EXPECT_EQ(reqs[i].status.error_number(), EIO);
    } else {
      EXPECT_TRUE(reqs[i].status.ok()) << i << ": " << reqs[i].status.ToString();
      EXPECT_EQ(bufs[i].contents(), want) << "request " << i;
    }
  }
}

}  // namespace
}  // namespace lsio
