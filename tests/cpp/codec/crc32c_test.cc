// CRC-32C: the standard check value, agreement with a bit-wise reference at every length
// and alignment (hardware and table paths), and the crc32c codec's verify-and-strip.
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "codec/codec_test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::Spec;

TEST(Crc32cTest, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(Crc32c(reinterpret_cast<const uint8_t*>(s), 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(nullptr, 0), 0u);
  const uint8_t zeros[32] = {};
  EXPECT_EQ(Crc32c(zeros, 32), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  uint8_t ones[32];
  std::memset(ones, 0xFF, sizeof ones);
  EXPECT_EQ(Crc32c(ones, 32), 0x62A8AB43u);  // RFC 3720 B.4: 32 bytes of 0xFF
}

TEST(Crc32cTest, MatchesBitwiseReferenceAtEveryLengthAndAlignment) {
  const Bytes data = lsio_test::PatternBytes(400, 11);
  for (size_t off = 0; off < 8; ++off) {
    for (size_t n = 0; n + off <= 300; ++n) {
      ASSERT_EQ(Crc32c(data.data() + off, n), lsio_test::ReferenceCrc32c(data.data() + off, n))
          << "offset " << off << " length " << n;
    }
  }
  const Bytes big = lsio_test::PatternBytes(1 << 20, 12);
  EXPECT_EQ(Crc32c(big.data(), big.size()), lsio_test::ReferenceCrc32c(big));
}

TEST(Crc32cTest, Section69IndexChecksums) {
  // The index bodies of zarr-format.md §6.9 (a), (b), (c): CRC over the first 64 bytes.
  const Bytes a = lsio_test::Shard69ZarrPythonEnd();
  EXPECT_EQ(Crc32c(a.data() + 24, 64), 0x569D79BAu);
  const Bytes b = lsio_test::Shard69ZarrPythonStart();
  EXPECT_EQ(Crc32c(b.data(), 64), 0x29A7F51Au);
  const Bytes c = lsio_test::Shard69TensorStore();
  EXPECT_EQ(Crc32c(c.data() + 24, 64), 0x4C2B5021u);
}

TEST(Crc32cCodecTest, VerifiesAndStrips) {
  auto chain = ParseChain(R"([{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}])",
                          Spec({4}, 2));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ((*chain)->FixedEncodedSize(), 12u);
  EXPECT_FALSE((*chain)->stored_is_decoded());
  EXPECT_EQ((*chain)->description(), "bytes, crc32c");
  const Bytes payload = lsio_test::FromHex("00 00 01 00 04 00 05 00");
  auto out = Decode(**chain, lsio_test::WithCrc(payload));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out.value(), payload);
}

TEST(Crc32cCodecTest, MismatchNamesStoredAndComputed) {
  auto chain = ParseChain(R"(["bytes", "crc32c"])", Spec({9}));
  ASSERT_TRUE(chain.ok());
  Bytes stored(reinterpret_cast<const uint8_t*>("123456789"), reinterpret_cast<const uint8_t*>("123456789") + 9);
  lsio_test::PutLE<uint32_t>(stored, 0xE3069284u);  // off by one
  auto out = Decode(**chain, stored);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "crc32c checksum mismatch (stored 0xe3069284, computed 0xe3069283)");
}

TEST(Crc32cCodecTest, ChecksumIsLittleEndian) {
  auto chain = ParseChain(R"(["bytes", "crc32c"])", Spec({9}));
  ASSERT_TRUE(chain.ok());
  const Bytes good = lsio_test::FromHex("31 32 33 34 35 36 37 38 39 83 92 06 e3");
  auto ok = Decode(**chain, good);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const Bytes big_endian = lsio_test::FromHex("31 32 33 34 35 36 37 38 39 e3 06 92 83");
  auto bad = Decode(**chain, big_endian);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
}

TEST(Crc32cCodecTest, ShorterThanTheChecksumIsDataLoss) {
  auto chain = ParseChain(R"(["bytes", "crc32c"])", Spec({1}));
  ASSERT_TRUE(chain.ok());
  auto out = Decode(**chain, lsio_test::FromHex("01 02 03"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "crc32c: chunk shorter than its 4-byte checksum");
}

TEST(Crc32cCodecTest, ValidChecksumOverWrongSizeIsDataLoss) {
  auto chain = ParseChain(R"(["bytes", "crc32c"])", Spec({8}));
  ASSERT_TRUE(chain.ok());
  auto out = Decode(**chain, lsio_test::WithCrc(lsio_test::FromHex("01 02 03 04 05 06 07")));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(out.status().message(), "chunk has 7 bytes after decoding, expected 8");
}

}  // namespace
}  // namespace lsio
