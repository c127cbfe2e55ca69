// The codec conformance suite, run by every bytes -> bytes codec (zstd with and without a
// content size, gzip, crc32c, blosc): round trips at several sizes, as the only codec and stacked
// under zstd (the growable-buffer path), and kDataLoss for truncation, wrong decoded size,
// garbage, empty input and trailing bytes (except blosc, whose frame says its own length:
// c-blosc and numcodecs ignore bytes after it, and z5py wrote them). Test data is encoded with
// libzstd / zlib / c-blosc / a reference CRC-32C, never with lsio.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::Spec;

struct ZstdTraits {
  static constexpr const char* kJson = R"({"name": "zstd", "configuration": {"level": 0, "checksum": false}})";
  static Bytes Encode(const Bytes& d) { return lsio_test::ZstdCompress(d); }
};
struct ZstdNoContentSizeTraits {
  static constexpr const char* kJson = R"({"name": "zstd", "configuration": {"level": 1, "checksum": true}})";
  static Bytes Encode(const Bytes& d) {
    return lsio_test::ZstdCompress(d, {.level = 1, .content_size = false, .checksum = true});
  }
};
struct GzipTraits {
  static constexpr const char* kJson = R"({"name": "gzip", "configuration": {"level": 5}})";
  static Bytes Encode(const Bytes& d) { return lsio_test::Deflate(d, true, 5); }
};
struct BloscTraits {
  static constexpr bool kIgnoresTrailingBytes = true;
  static constexpr const char* kJson =
      R"({"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle", "typesize": 1, "blocksize": 0}})";
  static Bytes Encode(const Bytes& d) { return lsio_test::BloscCompress(d); }
};
struct BloscZstdBitshuffleTraits {
  static constexpr bool kIgnoresTrailingBytes = true;
  static constexpr const char* kJson =
      R"({"name": "blosc", "configuration": {"cname": "zstd", "clevel": 3, "shuffle": "bitshuffle", "typesize": 4, "blocksize": 256}})";
  static Bytes Encode(const Bytes& d) {
    return lsio_test::BloscCompress(d, {.cname = "zstd", .clevel = 3, .shuffle = BLOSC_BITSHUFFLE, .typesize = 4,
                                        .blocksize = 256});
  }
};
struct Crc32cTraits {
  static constexpr const char* kJson = R"({"name": "crc32c"})";
  static Bytes Encode(const Bytes& d) { return lsio_test::WithCrc(d); }
};

template <typename T>
class CodecConformanceTest : public testing::Test {
 protected:
  // [bytes, <codec>] for a 1-d uint8 chunk of n elements.
  std::unique_ptr<CodecChain> Chain(int64_t n) {
    auto c = ParseChain(std::string(R"([{"name": "bytes"}, )") + T::kJson + "]", Spec({n}));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }
  static void ExpectDataLoss(const Result<Bytes>& r, const std::string& what) {
    ASSERT_FALSE(r.ok()) << what << ": decoded without error";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << what << ": " << r.status().ToString();
    EXPECT_FALSE(r.status().message().empty());
  }
};

using Codecs = testing::Types<ZstdTraits, ZstdNoContentSizeTraits, GzipTraits, BloscTraits,
                              BloscZstdBitshuffleTraits, Crc32cTraits>;
class CodecNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, ZstdTraits>) return "Zstd";
    if (std::is_same_v<T, ZstdNoContentSizeTraits>) return "ZstdNoContentSize";
    if (std::is_same_v<T, GzipTraits>) return "Gzip";
    if (std::is_same_v<T, BloscTraits>) return "Blosc";
    if (std::is_same_v<T, BloscZstdBitshuffleTraits>) return "BloscZstdBitshuffle";
    return "Crc32c";
  }
};
TYPED_TEST_SUITE(CodecConformanceTest, Codecs, CodecNames);

TYPED_TEST(CodecConformanceTest, RoundTripsAtSeveralSizes) {
  DecodeScratch scratch;  // reused across sizes and calls, as a worker thread does
  for (size_t n : {1u, 7u, 4096u, 100003u}) {
    const Bytes data = lsio_test::TestData(n, n);
    auto chain = this->Chain(static_cast<int64_t>(n));
    ASSERT_NE(chain, nullptr);
    for (int rep = 0; rep < 2; ++rep) {
      auto out = Decode(*chain, TypeParam::Encode(data), &scratch);
      ASSERT_TRUE(out.ok()) << "n=" << n << ": " << out.status().ToString();
      EXPECT_EQ(out.value(), data) << "n=" << n;
    }
  }
}

TYPED_TEST(CodecConformanceTest, RoundTripsStackedUnderZstd) {
  // [bytes, zstd, <codec>]: <codec> decodes first, into a buffer of unknown size.
  const Bytes data = lsio_test::TestData(5000, 3);
  auto chain = ParseChain(std::string(R"(["bytes", {"name": "zstd", "configuration": {"level": 1}}, )") +
                              TypeParam::kJson + "]",
                          Spec({5000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_FALSE((*chain)->FixedEncodedSize().has_value());
  const Bytes stored = TypeParam::Encode(lsio_test::ZstdCompress(data));
  auto out = Decode(**chain, stored);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TYPED_TEST(CodecConformanceTest, RoundTripsUnderACrc32cLayer) {
  // [bytes, <codec>, crc32c]: the checksum is stripped first, then <codec> decodes.
  const Bytes data = lsio_test::TestData(3000, 4);
  auto chain = ParseChain(std::string(R"(["bytes", )") + TypeParam::kJson + R"(, "crc32c"])", Spec({3000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  auto out = Decode(**chain, lsio_test::WithCrc(TypeParam::Encode(data)));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), data);
}

TYPED_TEST(CodecConformanceTest, TruncationIsDataLoss) {
  const Bytes data = lsio_test::TestData(2000, 5);
  const Bytes enc = TypeParam::Encode(data);
  auto chain = this->Chain(2000);
  ASSERT_NE(chain, nullptr);
  std::vector<size_t> cuts = {0, 1, 3, 4, 5, enc.size() / 2, enc.size() - 4, enc.size() - 1};
  for (size_t cut : cuts) {
    const Bytes t(enc.begin(), enc.begin() + static_cast<long>(cut));
    this->ExpectDataLoss(Decode(*chain, t), "truncated to " + std::to_string(cut) + " of " + std::to_string(enc.size()));
  }
}

TYPED_TEST(CodecConformanceTest, WrongDecodedSizeIsDataLoss) {
  auto chain = this->Chain(1000);
  ASSERT_NE(chain, nullptr);
  this->ExpectDataLoss(Decode(*chain, TypeParam::Encode(lsio_test::TestData(999))), "999 bytes for 1000");
  this->ExpectDataLoss(Decode(*chain, TypeParam::Encode(lsio_test::TestData(1001))), "1001 bytes for 1000");
  this->ExpectDataLoss(Decode(*chain, TypeParam::Encode(lsio_test::TestData(5000))), "5000 bytes for 1000");
}

TYPED_TEST(CodecConformanceTest, GarbageIsDataLoss) {
  auto chain = this->Chain(1000);
  ASSERT_NE(chain, nullptr);
  this->ExpectDataLoss(Decode(*chain, lsio_test::PatternBytes(300, 99)), "random bytes");
  this->ExpectDataLoss(Decode(*chain, Bytes(1004, 0)), "zeros");
}

template <typename T>
constexpr bool IgnoresTrailingBytes() {
  if constexpr (requires { T::kIgnoresTrailingBytes; }) return T::kIgnoresTrailingBytes;
  return false;
}

TYPED_TEST(CodecConformanceTest, TrailingBytesAreDataLoss) {
  const Bytes data = lsio_test::TestData(1000, 6);
  Bytes enc = TypeParam::Encode(data);
  enc.insert(enc.end(), {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09});
  auto chain = this->Chain(1000);
  ASSERT_NE(chain, nullptr);
  if constexpr (IgnoresTrailingBytes<TypeParam>()) {
    auto out = Decode(*chain, enc);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out.value(), data);
  } else {
    this->ExpectDataLoss(Decode(*chain, enc), "9 trailing bytes");
  }
}

TYPED_TEST(CodecConformanceTest, FlippedPayloadByteIsDetected) {
  // A flipped byte in the middle must not decode to the original data silently.
  const Bytes data = lsio_test::TestData(4000, 8);
  Bytes enc = TypeParam::Encode(data);
  enc[enc.size() / 2] ^= 0x40;
  auto chain = this->Chain(4000);
  ASSERT_NE(chain, nullptr);
  auto out = Decode(*chain, enc);
  if (out.ok()) {
    // Without a checksum (zstd without checksum flag) corruption may go unnoticed, but the
    // result cannot be the original.
    EXPECT_NE(out.value(), data);
  } else {
    EXPECT_EQ(out.status().code(), StatusCode::kDataLoss) << out.status().ToString();
  }
}

}  // namespace
}  // namespace lsio
