// numcodecs' formats (codec/numcodecs.cc): lz4 frames made with liblz4 itself (4-byte LE size
// + raw block, as numcodecs writes them), shuffle byte planes and delta running sums built
// here by the definitions in numcodecs' source, and corrupt inputs that must fail with
// kDataLoss without writing past the chunk.
#include "codec/numcodecs.h"

#include <lz4.h>

#include <cstring>
#include <limits>

#include "codec/codec_test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;
using lsio_test::Decode;
using lsio_test::ParseChain;
using lsio_test::Spec;

Bytes Lz4Frame(const Bytes& data) {
  Bytes out(4 + LZ4_compressBound(static_cast<int>(data.size())));
  const uint32_t n = static_cast<uint32_t>(data.size());
  for (int k = 0; k < 4; ++k) out[k] = static_cast<uint8_t>(n >> (8 * k));
  const int c = LZ4_compress_default(reinterpret_cast<const char*>(data.data()), reinterpret_cast<char*>(out.data() + 4),
                                     static_cast<int>(data.size()), static_cast<int>(out.size() - 4));
  out.resize(4 + static_cast<size_t>(c));
  return out;
}

Bytes Pattern(size_t n) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * 7) % 13 + (i / 64));
  return b;
}

TEST(NumcodecsTest, Lz4FramesDecodeAndCorruptOnesFail) {
  auto chain = ParseChain(R"(["bytes", {"name": "numcodecs.lz4", "configuration": {"acceleration": 1}}])", Spec({4000}));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const Bytes data = Pattern(4000);
  const Bytes frame = Lz4Frame(data);
  auto got = Decode(**chain, frame);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);

  Bytes wrong_size = frame;
  wrong_size[0] ^= 1;  // header says 3999 or 4001 bytes
  Bytes truncated(frame.begin(), frame.end() - 7);
  Bytes garbage = frame;
  for (size_t i = 4; i < garbage.size(); i += 3) garbage[i] = 0xFF;
  for (const Bytes& bad : {wrong_size, truncated, garbage, Bytes{1, 2, 3}}) {
    auto r = Decode(**chain, bad);  // Decode checks the guard byte after the chunk
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find("lz4"), std::string::npos) << r.status().message();
  }
}

TEST(NumcodecsTest, Lz4GpuFrameIsTheBlockAfterAMatchingSizeHeader) {
  const Bytes data = Pattern(3000);
  const Bytes frame = Lz4Frame(data);
  std::span<const uint8_t> block;
  ASSERT_TRUE(Lz4GpuFrame(frame, data.size(), &block));
  EXPECT_EQ(block.data(), frame.data() + 4);
  EXPECT_EQ(block.size(), frame.size() - 4);
  Bytes out(data.size());
  ASSERT_TRUE(Lz4DecodeBlock(block, out).ok());
  EXPECT_EQ(out, data);
  // Another size in the header, no block after it, or not even a header: the CPU decodes
  // (and reports) the chunk.
  EXPECT_FALSE(Lz4GpuFrame(frame, data.size() + 1, &block));
  EXPECT_FALSE(Lz4GpuFrame(std::span<const uint8_t>(frame.data(), 4), data.size(), &block));
  EXPECT_FALSE(Lz4GpuFrame(Bytes{1, 2, 3}, data.size(), &block));

  Bytes garbage(block.begin(), block.end());
  for (size_t i = 0; i < garbage.size(); i += 3) garbage[i] = 0xFF;
  Status st = Lz4DecodeBlock(garbage, out);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "lz4: corrupt block");
  Bytes bigger(data.size() + 10);
  st = Lz4DecodeBlock(block, bigger);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_EQ(st.message(), "lz4: block decodes to 3000 bytes, expected 3010");
  Bytes smaller(data.size() - 1);
  EXPECT_EQ(Lz4DecodeBlock(block, smaller).code(), StatusCode::kDataLoss);
}

TEST(NumcodecsTest, ShuffleUndoesBytePlanes) {
  auto chain = ParseChain(R"(["bytes", {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}}])",
                          Spec({6}, 4));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const Bytes data = Pattern(24);
  Bytes planes(24);
  for (size_t i = 0; i < 6; ++i)
    for (size_t j = 0; j < 4; ++j) planes[j * 6 + i] = data[i * 4 + j];
  auto got = Decode(**chain, planes);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, data);
  auto bad = ParseChain(R"(["bytes", {"name": "numcodecs.shuffle", "configuration": {"elementsize": -1}}])", Spec({6}, 4));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidFormat);
}

TEST(NumcodecsTest, DeltaIsARunningSumThatWrapsAndKeepsByteOrder) {
  // int16, big endian: values 32767, -32768 (wrapped), -32767 from deltas 32767, 1, 1.
  auto chain = ParseChain(
      R"([{"name": "bytes", "configuration": {"endian": "big"}}, {"name": "lsio.v2.delta", "configuration": {"dtype": ">i2"}}])",
      Spec({3}, 2));
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const Bytes deltas = {0x7F, 0xFF, 0x00, 0x01, 0x00, 0x01};
  auto got = Decode(**chain, deltas);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  int16_t v[3];
  std::memcpy(v, got->data(), 6);  // `bytes` swapped them to native order
  EXPECT_EQ(v[0], 32767);
  EXPECT_EQ(v[1], -32768);
  EXPECT_EQ(v[2], -32767);
  // float64: summed in float64, in order (np.cumsum), so rounding matches numpy's.
  auto fchain = ParseChain(R"(["bytes", {"name": "lsio.v2.delta", "configuration": {"dtype": "<f8"}}])", Spec({3}, 8));
  ASSERT_TRUE(fchain.ok());
  const double d[3] = {0.1, 0.2, 1e16};
  Bytes fin(24);
  std::memcpy(fin.data(), d, 24);
  auto fgot = Decode(**fchain, fin);
  ASSERT_TRUE(fgot.ok());
  double f[3];
  std::memcpy(f, fgot->data(), 24);
  EXPECT_EQ(f[1], 0.1 + 0.2);
  EXPECT_EQ(f[2], (0.1 + 0.2) + 1e16);
  for (const char* cfg : {R"({"dtype": "<i4", "astype": "<i2"})", R"({"dtype": "<f1"})", R"({"dtype": "<M8[ns]"})"}) {
    auto r = ParseChain(std::string(R"(["bytes", {"name": "lsio.v2.delta", "configuration": )") + cfg + "}]",
                        Spec({3}, 4));
    EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented) << cfg;
  }
}

TEST(NumcodecsTest, DeltaFloat16RoundsEveryPartialSumAsNumpy) {
  // np.cumsum in float16 rounds each step (float32 sum, then to nearest-even float16):
  // 1 + 2^-11 ties back to 1, twice, where an exact running sum would reach 1 + 2^-10; 65504
  // + 16 = 65520 rounds to infinity; a subnormal step sums exactly. Bits, both byte orders.
  const uint16_t enc[] = {0x3C00, 0x1000, 0x1000, 0x3C00, 0x7BFF, 0x4C00, 0x0001, 0x8001};
  const uint16_t want[] = {0x3C00, 0x3C00, 0x3C00, 0x4000, 0x7BFF, 0x7C00, 0x7C00, 0x7C00};
  for (bool big : {false, true}) {
    auto chain = ParseChain(std::string(R"(["bytes", {"name": "lsio.v2.delta", "configuration": {"dtype": ")") +
                                (big ? ">f2" : "<f2") + R"("}}])",
                            Spec({8}, 2));
    ASSERT_TRUE(chain.ok()) << chain.status().ToString();
    Bytes in(16);
    for (size_t i = 0; i < 8; ++i) {
      in[2 * i + (big ? 1 : 0)] = static_cast<uint8_t>(enc[i] & 0xff);
      in[2 * i + (big ? 0 : 1)] = static_cast<uint8_t>(enc[i] >> 8);
    }
    auto got = Decode(**chain, in);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t i = 0; i < 8; ++i) {
      const uint16_t v = static_cast<uint16_t>((*got)[2 * i + (big ? 1 : 0)] | (*got)[2 * i + (big ? 0 : 1)] << 8);
      EXPECT_EQ(v, want[i]) << (big ? ">f2" : "<f2") << " element " << i;
    }
  }
  // Subnormals: 2^-24 + 2^-24 = 2^-23 exactly, and a negative step back.
  auto chain = ParseChain(R"(["bytes", {"name": "lsio.v2.delta", "configuration": {"dtype": "<f2"}}])", Spec({3}, 2));
  ASSERT_TRUE(chain.ok());
  const Bytes sub = {0x01, 0x00, 0x01, 0x00, 0x01, 0x80};
  auto got = Decode(**chain, sub);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, (Bytes{0x01, 0x00, 0x02, 0x00, 0x01, 0x00}));
}

}  // namespace
}  // namespace lsio
