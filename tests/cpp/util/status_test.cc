// Status / Result: codes, context setters keeping the innermost value, ToString formatting,
// and the propagation macros.
#include "lsio/status.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace lsio {
namespace {

TEST(StatusTest, OkCarriesNothing) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  s.WithPath("/x").WithRange(1, 2).WithChunk("(0)");
  EXPECT_EQ(s.path(), "") << "context is never attached to OK";
  EXPECT_FALSE(s.has_range());
  EXPECT_EQ(s.chunk(), "");
}

TEST(StatusTest, ContextSettersKeepTheFirstValue) {
  Status s = Status::DataLoss("bad");
  s.WithPath("/inner").WithPath("/outer").WithRange(100, 50).WithRange(0, 1).WithChunk("(1, 2)").WithChunk("(9)");
  EXPECT_EQ(s.path(), "/inner");
  EXPECT_TRUE(s.has_range());
  EXPECT_EQ(s.range_offset(), 100u);
  EXPECT_EQ(s.range_length(), 50u);
  EXPECT_EQ(s.chunk(), "(1, 2)");
  EXPECT_EQ(s.ToString(), "bad [file '/inner', chunk (1, 2), bytes [100, 150)]");
}

TEST(StatusTest, IoErrorCarriesErrnoInToString) {
  Status s = Status::IoError("read failed", EIO);
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.error_number(), EIO);
  EXPECT_EQ(s.ToString(), std::string("read failed (errno ") + std::to_string(EIO) + ": " + std::strerror(EIO) + ")");
}

TEST(StatusTest, CodeNames) {
  EXPECT_STREQ(StatusCodeName(StatusCode::kOk), "Ok");
  EXPECT_STREQ(StatusCodeName(StatusCode::kDataLoss), "DataLoss");
  EXPECT_STREQ(StatusCodeName(StatusCode::kInvalidFormat), "InvalidFormat");
  EXPECT_STREQ(StatusCodeName(StatusCode::kUnimplemented), "Unimplemented");
  EXPECT_STREQ(StatusCodeName(StatusCode::kIoError), "IoError");
  EXPECT_STREQ(StatusCodeName(StatusCode::kUnavailable), "Unavailable");
  EXPECT_EQ(Status::Unavailable("no ring", EPERM).error_number(), EPERM);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  LSIO_ASSIGN_OR_RETURN(int h, Half(x));
  LSIO_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  LSIO_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(ResultTest, MacrosPropagateErrorsAndValues) {
  auto r = Quarter(8);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  auto bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Result<int>(3).status().ok());
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(5));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 5);
}

}  // namespace
}  // namespace lsio
