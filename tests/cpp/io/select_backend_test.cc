// Backend selection: io mode names, the once-per-process io_uring probe, and what each mode
// builds here. (The seccomp-refused fallback is in io_backend_conformance_test.cc.)
#include "io/select_backend.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

TEST(SelectBackendTest, ParsesIoModes) {
  EXPECT_EQ(ParseIoMode("auto").value(), IoMode::kAuto);
  EXPECT_EQ(ParseIoMode("uring").value(), IoMode::kUring);
  EXPECT_EQ(ParseIoMode("io_uring").value(), IoMode::kUring);
  EXPECT_EQ(ParseIoMode("pread").value(), IoMode::kPread);
  EXPECT_STREQ(IoModeName(IoMode::kAuto), "auto");
  EXPECT_STREQ(IoModeName(IoMode::kUring), "uring");
  EXPECT_STREQ(IoModeName(IoMode::kPread), "pread");
}

TEST(SelectBackendTest, UnknownIoModeIsInvalidArgument) {
  for (const char* bad : {"", "AUTO", "mmap", "uring "}) {
    auto m = ParseIoMode(bad);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(m.status().message(), std::string("unknown io mode '") + bad + "' (expected auto, uring or pread)");
  }
}

TEST(SelectBackendTest, UringSupportAgreesWithTheProbe) {
  const int probe = ProbeUringSetup();
  const UringSupportInfo info = UringSupport();
  EXPECT_EQ(info.available, probe == 0);
  if (info.available) {
    EXPECT_EQ(info.error, 0);
    EXPECT_EQ(info.reason, "");
  } else {
    EXPECT_EQ(info.error, -probe);
    EXPECT_NE(info.reason.find(std::strerror(info.error)), std::string::npos) << info.reason;
  }
  if (lsio_test::RequireUring()) {
    EXPECT_TRUE(info.available) << "LSIO_REQUIRE_URING=1: " << info.reason;
  }
}

TEST(SelectBackendTest, EachModeBuildsTheExpectedBackend) {
  const UringSupportInfo info = UringSupport();
  auto p = MakeBackend(IoMode::kPread, 8);
  ASSERT_TRUE(p.ok());
  EXPECT_STREQ((*p)->name(), "pread");

  auto a = MakeBackend(IoMode::kAuto, 8);
  ASSERT_TRUE(a.ok());
  EXPECT_STREQ((*a)->name(), info.available ? "uring+nowait" : "pread");

  auto u = MakeBackend(IoMode::kUring, 8);
  if (info.available) {
    ASSERT_TRUE(u.ok()) << u.status().ToString();
    EXPECT_STREQ((*u)->name(), "uring");
  } else {
    ASSERT_FALSE(u.ok());
    EXPECT_EQ(u.status().code(), StatusCode::kUnavailable);
    EXPECT_EQ(u.status().error_number(), info.error);
  }
}

}  // namespace
}  // namespace lsio
