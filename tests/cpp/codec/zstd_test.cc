// zstd specifics: frames with and without a content size, with a content checksum,
// concatenated and skippable frames, truncation, wrong decoded sizes, garbage, and
// configuration validation. Frames are made with libzstd.
#include <zlib.h>
#include <zstd.h>

#include <string>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"
#include "codec/registry.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Concat;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::Spec;
using lsio_test::ZstdCompress;

class ZstdTest : public testing::Test {
 protected:
  // [bytes, zstd] for n uint8 elements.
  static std::unique_ptr<CodecChain> Chain(int64_t n) {
    auto c = ParseChain(R"(["bytes", {"name": "zstd", "configuration": {"level": 0, "checksum": false}}])", Spec({n}));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }
};

TEST_F(ZstdTest, FrameWithContentSizeDecodes) {
  const Bytes data = lsio_test::TestData(10000);
  const Bytes frame = ZstdCompress(data);
  ASSERT_EQ(lsio_test::ZstdContentSize(frame), 10000u);
  auto out = Decode(*Chain(10000), frame);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST_F(ZstdTest, FrameWithoutContentSizeTakesTheStreamingPath) {
  const Bytes data = lsio_test::TestData(70000);
  const Bytes frame = ZstdCompress(data, {.content_size = false});
  ASSERT_EQ(lsio_test::ZstdContentSize(frame), ZSTD_CONTENTSIZE_UNKNOWN);
  auto out = Decode(*Chain(70000), frame);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST_F(ZstdTest, ContentChecksumIsVerified) {
  const Bytes data = lsio_test::TestData(5000);
  for (bool content_size : {true, false}) {
    Bytes frame = ZstdCompress(data, {.content_size = content_size, .checksum = true});
    auto ok = Decode(*Chain(5000), frame);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(ok.value(), data);
    frame.back() ^= 0xFF;  // the last 4 bytes are the checksum
    auto bad = Decode(*Chain(5000), frame);
    ASSERT_FALSE(bad.ok()) << "content_size=" << content_size;
    EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(bad.status().message().rfind("zstd: corrupt data: ", 0), 0u) << bad.status().message();
    EXPECT_NE(bad.status().message().find("checksum"), std::string::npos) << bad.status().message();
  }
}

TEST_F(ZstdTest, ConcatenatedFramesDecodeToTheirConcatenation) {
  const Bytes a = lsio_test::TestData(3000, 1);
  const Bytes b = lsio_test::TestData(2000, 2);
  const Bytes c = lsio_test::TestData(1000, 3);
  const Bytes whole = Concat({a, b, c});
  // With content sizes (the first frame's size is not the chunk's), and without.
  for (bool cs : {true, false}) {
    const Bytes stored = Concat({ZstdCompress(a, {.content_size = cs}), ZstdCompress(b, {.content_size = cs}),
                                 ZstdCompress(c, {.content_size = cs, .checksum = true})});
    auto out = Decode(*Chain(6000), stored);
    ASSERT_TRUE(out.ok()) << "content_size=" << cs << ": " << out.status().ToString();
    EXPECT_EQ(out.value(), whole);
  }
}

TEST_F(ZstdTest, ExtraFrameAfterAFullSizeFrameIsDataLoss) {
  const Bytes a = lsio_test::TestData(1000, 1);
  const Bytes stored = Concat({ZstdCompress(a), ZstdCompress(lsio_test::TestData(10, 2))});
  auto out = Decode(*Chain(1000), stored);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
}

TEST_F(ZstdTest, SkippableFrameBeforeDataIsIgnored) {
  const Bytes data = lsio_test::TestData(800);
  Bytes skippable;
  lsio_test::PutLE<uint32_t>(skippable, 0x184D2A50u);  // skippable frame magic
  lsio_test::PutLE<uint32_t>(skippable, 5);
  skippable.insert(skippable.end(), {1, 2, 3, 4, 5});
  auto out = Decode(*Chain(800), Concat({skippable, ZstdCompress(data)}));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TEST_F(ZstdTest, WrongDecodedSizeNamesBothSizes) {
  // A single frame that records its size: refused before decompressing.
  auto small = Decode(*Chain(100), ZstdCompress(lsio_test::TestData(99)));
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(small.status().message(), "zstd: chunk decodes to 99 bytes, expected 100");
  auto large = Decode(*Chain(100), ZstdCompress(lsio_test::TestData(150)));
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().message(), "zstd: chunk decodes to 150 bytes, expected 100");
  // Without a content size the streaming path finds out.
  auto small_stream = Decode(*Chain(100), ZstdCompress(lsio_test::TestData(99), {.content_size = false}));
  ASSERT_FALSE(small_stream.ok());
  EXPECT_EQ(small_stream.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(small_stream.status().message(), "zstd: chunk decodes to 99 bytes, expected 100");
  auto large_stream = Decode(*Chain(100), ZstdCompress(lsio_test::TestData(150), {.content_size = false}));
  ASSERT_FALSE(large_stream.ok());
  EXPECT_EQ(large_stream.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(large_stream.status().message().rfind("zstd: chunk decodes to ", 0), 0u) << large_stream.status().message();
}

TEST_F(ZstdTest, GarbageIsNotAZstdFrame) {
  auto out = Decode(*Chain(100), lsio_test::FromHex("de ad be ef 00 11 22 33 44 55 66 77"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "zstd: not a zstd frame");
  auto empty = Decode(*Chain(100), Bytes{});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kDataLoss);
}

TEST_F(ZstdTest, TruncatedFramesAreDataLossAtEveryLength) {
  const Bytes data = lsio_test::TestData(3000);
  for (bool cs : {true, false}) {
    for (bool ck : {false, true}) {
      const Bytes frame = ZstdCompress(data, {.content_size = cs, .checksum = ck});
      for (size_t cut = 0; cut < frame.size(); ++cut) {
        auto out = Decode(*Chain(3000), Bytes(frame.begin(), frame.begin() + static_cast<long>(cut)));
        ASSERT_FALSE(out.ok()) << "cs=" << cs << " ck=" << ck << " cut=" << cut << " of " << frame.size();
        ASSERT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
      }
    }
  }
}

TEST_F(ZstdTest, ConfigurationIsValidated) {
  for (const char* ok : {R"({"name": "zstd"})", R"("zstd")", R"({"name": "zstd", "configuration": {"level": -5}})",
                         R"({"name": "zstd", "configuration": {"level": 22, "checksum": true}})"}) {
    auto c = ParseCodec(nlohmann::json::parse(ok));
    EXPECT_TRUE(c.ok()) << ok << ": " << c.status().ToString();
  }
  auto lvl = ParseCodec(nlohmann::json::parse(R"({"name": "zstd", "configuration": {"level": "3"}})"));
  ASSERT_FALSE(lvl.ok());
  EXPECT_EQ(lvl.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(lvl.status().message(), "zstd codec: \"level\" must be an integer");
  auto ck = ParseCodec(nlohmann::json::parse(R"({"name": "zstd", "configuration": {"checksum": 1}})"));
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), StatusCode::kInvalidFormat);
  EXPECT_EQ(ck.status().message(), "zstd codec: \"checksum\" must be a boolean");
}

TEST_F(ZstdTest, DecodesStraightIntoTheDestination) {
  // [bytes, zstd] is not stored-is-decoded, and has no fixed encoded size.
  auto chain = Chain(64);
  EXPECT_FALSE(chain->stored_is_decoded());
  EXPECT_FALSE(chain->FixedEncodedSize().has_value());
  EXPECT_EQ(chain->description(), "bytes, zstd");
  EXPECT_EQ(chain->decoded_size(), 64u);
}

}  // namespace
}  // namespace lsio

namespace lsio {
namespace {

// zstd above another bytes -> bytes codec decodes into a buffer it grows (the size below it is
// not known). A first frame that says it holds nothing, more frames following, once left that
// buffer at 0 bytes forever (the codec chain fuzzer's timeout): it must grow and decode.
TEST(ZstdGrowTest, FirstFrameOfSizeZeroThenMoreFrames) {
  auto chain = lsio_test::ParseChain(
      R"(["bytes", {"name": "numcodecs.zlib", "configuration": {"level": 1}},
          {"name": "zstd", "configuration": {"level": 0, "checksum": false}}])",
      lsio_test::Spec({5000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const lsio_test::Bytes data = lsio_test::TestData(5000);
  lsio_test::Bytes inner(compressBound(static_cast<uLong>(data.size())));
  uLongf n = static_cast<uLongf>(inner.size());
  ASSERT_EQ(compress2(inner.data(), &n, data.data(), static_cast<uLong>(data.size()), 1), Z_OK);
  inner.resize(n);
  const lsio_test::Bytes stored = lsio_test::Concat(
      {lsio_test::ZstdCompress({}), lsio_test::ZstdCompress(inner, {.content_size = false})});
  ASSERT_EQ(lsio_test::ZstdContentSize(stored), 0u);
  auto out = lsio_test::Decode(**chain, stored);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

}  // namespace
}  // namespace lsio
