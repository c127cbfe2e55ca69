// gzip specifics: gzip and zlib wrappers, concatenated members, truncation, corrupt
// trailer, wrong sizes and level validation. Streams are made with zlib.
#include <string>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"
#include "codec/registry.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Concat;
using lsio_test::Decode;
using lsio_test::Deflate;
using lsio_test::ParseChain;
using lsio_test::Spec;

std::unique_ptr<CodecChain> GzipChain(int64_t n) {
  auto c = ParseChain(R"(["bytes", {"name": "gzip", "configuration": {"level": 6}}])", Spec({n}));
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(GzipTest, GzipMemberRoundTrips) {
  const Bytes data = lsio_test::TestData(50000);
  for (int level : {0, 1, 9}) {
    auto out = Decode(*GzipChain(50000), Deflate(data, true, level));
    ASSERT_TRUE(out.ok()) << "level " << level << ": " << out.status().ToString();
    EXPECT_EQ(out.value(), data);
  }
}

TEST(GzipTest, ZlibWrapperIsAcceptedToo) {
  const Bytes data = lsio_test::TestData(777);
  auto out = Decode(*GzipChain(777), Deflate(data, false));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST(GzipTest, ConcatenatedMembersDecodeInOrder) {
  const Bytes a = lsio_test::TestData(1000, 1);
  const Bytes b = lsio_test::TestData(24, 2);
  auto out = Decode(*GzipChain(1024), Concat({Deflate(a), Deflate(b)}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), Concat({a, b}));
}

TEST(GzipTest, TruncatedStreamIsDataLoss) {
  const Bytes data = lsio_test::TestData(4000);
  const Bytes enc = Deflate(data);
  for (size_t cut = 0; cut < enc.size(); ++cut) {
    auto out = Decode(*GzipChain(4000), Bytes(enc.begin(), enc.begin() + static_cast<long>(cut)));
    ASSERT_FALSE(out.ok()) << "cut " << cut;
    ASSERT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
  }
  // Cut inside the 8-byte trailer: the data is all there, the stream is not.
  auto trailer = Decode(*GzipChain(4000), Bytes(enc.begin(), enc.end() - 3));
  ASSERT_FALSE(trailer.ok());
  EXPECT_EQ(trailer.status().message(), "gzip: truncated stream");
}

TEST(GzipTest, CorruptTrailerCrcIsDataLoss) {
  const Bytes data = lsio_test::TestData(4000);
  Bytes enc = Deflate(data);
  enc[enc.size() - 8] ^= 0x01;  // first byte of the CRC-32 trailer
  auto out = Decode(*GzipChain(4000), enc);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "gzip: corrupt data: incorrect data check");
}

TEST(GzipTest, GarbageIsDataLossWithZlibsMessage) {
  auto out = Decode(*GzipChain(100), lsio_test::FromHex("00 01 02 03 04 05 06 07 08 09"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "gzip: corrupt data: incorrect header check");
}

TEST(GzipTest, WrongDecodedSizeNamesTheSizes) {
  auto small = Decode(*GzipChain(100), Deflate(lsio_test::TestData(99)));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(small.status().message(), "gzip: chunk decodes to 99 bytes, expected 100");
  auto large = Decode(*GzipChain(100), Deflate(lsio_test::TestData(101)));
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().message(), "gzip: chunk decodes to more than 100 bytes, expected 100");
}

TEST(GzipTest, LevelIsValidated) {
  for (int level = 0; level <= 9; ++level) {
    EXPECT_TRUE(ParseCodec({{"name", "gzip"}, {"configuration", {{"level", level}}}}).ok()) << level;
  }
  EXPECT_TRUE(ParseCodec(nlohmann::json("gzip")).ok());
  for (const char* bad : {R"({"level": 10})", R"({"level": -1})", R"({"level": "5"})", R"({"level": 5.5})"}) {
    auto c = ParseCodec({{"name", "gzip"}, {"configuration", nlohmann::json::parse(bad)}});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidFormat);
    EXPECT_EQ(c.status().message(), "gzip codec: \"level\" must be an integer in 0..9");
  }
}

}  // namespace
}  // namespace lsio
