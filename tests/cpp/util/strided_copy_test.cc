// CopyStrided / CopyStridedStreaming / FillStrided / ByteSwapInPlace: byte-exact results for
// contiguous, transposed, negative and odd strides, byte swapping per component, fill
// patterns, and streamed rows at every alignment, with canaries proving that nothing outside
// the addressed elements is written.
#include "util/strided_copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;

constexpr uint8_t kCanary = 0xEE;

template <typename T>
std::vector<T> Iota(size_t n, T start = 1) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(start + static_cast<T>(i));
  return v;
}

TEST(StridedCopyTest, ContiguousTwoDimensionalCopyIsExact) {
  auto src = Iota<uint32_t>(12);
  std::vector<uint32_t> dst(12, 0);
  const int64_t shape[] = {3, 4};
  const int64_t strides[] = {16, 4};
  CopyStrided(reinterpret_cast<uint8_t*>(dst.data()), strides,
              reinterpret_cast<const uint8_t*>(src.data()), strides, shape, 2, 4, 1);
  EXPECT_EQ(dst, src);
}

TEST(StridedCopyTest, TransposingCopyViaDestinationStrides) {
  // src is 2x3 C order; write it into a 3x2 C-order dst as its transpose.
  auto src = Iota<uint16_t>(6, 10);  // [[10,11,12],[13,14,15]]
  std::vector<uint16_t> dst(6, 0);
  const int64_t shape[] = {2, 3};
  const int64_t src_strides[] = {6, 2};
  const int64_t dst_strides[] = {2, 4};  // dst[j][i]
  CopyStrided(reinterpret_cast<uint8_t*>(dst.data()), dst_strides,
              reinterpret_cast<const uint8_t*>(src.data()), src_strides, shape, 2, 2, 1);
  EXPECT_EQ(dst, (std::vector<uint16_t>{10, 13, 11, 14, 12, 15}));
}

TEST(StridedCopyTest, NegativeSourceStridesReverseEveryDimension) {
  auto src = Iota<uint8_t>(6, 1);  // [[1,2,3],[4,5,6]]
  std::vector<uint8_t> dst(6, 0);
  const int64_t shape[] = {2, 3};
  const int64_t src_strides[] = {-3, -1};
  const int64_t dst_strides[] = {3, 1};
  CopyStrided(dst.data(), dst_strides, src.data() + 5, src_strides, shape, 2, 1, 1);
  EXPECT_EQ(dst, (std::vector<uint8_t>{6, 5, 4, 3, 2, 1}));
}

TEST(StridedCopyTest, NegativeDestinationStrideFlipsOneDimension) {
  auto src = Iota<uint64_t>(6, 1);
  std::vector<uint64_t> dst(6, 0);
  const int64_t shape[] = {2, 3};
  const int64_t src_strides[] = {24, 8};
  const int64_t dst_strides[] = {-24, 8};  // rows flipped
  CopyStrided(reinterpret_cast<uint8_t*>(dst.data() + 3), dst_strides,
              reinterpret_cast<const uint8_t*>(src.data()), src_strides, shape, 2, 8, 1);
  EXPECT_EQ(dst, (std::vector<uint64_t>{4, 5, 6, 1, 2, 3}));
}

TEST(StridedCopyTest, GappedDestinationLeavesGapsUntouched) {
  auto src = Iota<uint32_t>(4, 1);
  std::vector<uint8_t> dst(4 * 4 * 3, kCanary);  // every third slot is written
  const int64_t shape[] = {4};
  const int64_t src_strides[] = {4};
  const int64_t dst_strides[] = {12};
  CopyStrided(dst.data(), dst_strides, reinterpret_cast<const uint8_t*>(src.data()), src_strides,
              shape, 1, 4, 1);
  for (size_t i = 0; i < 4; ++i) {
    uint32_t v;
    std::memcpy(&v, dst.data() + 12 * i, 4);
    EXPECT_EQ(v, i + 1);
    for (size_t b = 4; b < 12; ++b) EXPECT_EQ(dst[12 * i + b], kCanary) << i << "," << b;
  }
}

// Rows of every length around the streaming cut-off and the 64-byte line, written at every
// byte offset in a line, into rows separated by canary gaps: the same bytes as CopyStrided,
// and nothing between or around the rows.
TEST(StridedCopyTest, StreamingCopyMatchesCopyAtEveryAlignmentAndLength) {
  const size_t lengths[] = {1, 63, 64, 65, kMinStreamedRow - 1, kMinStreamedRow, kMinStreamedRow + 1,
                            kMinStreamedRow + 63, 512, 1000, 4096 + 17};
  for (size_t len : lengths) {
    for (size_t misalign = 0; misalign < 64; misalign += 7) {
      const int64_t rows = 3;
      const int64_t gap = 37;
      const int64_t dst_row_stride = static_cast<int64_t>(len) + gap;
      std::vector<uint8_t> src(static_cast<size_t>(rows) * len);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + len);
      const size_t size = 128 + misalign + static_cast<size_t>(rows * dst_row_stride) + 64;
      const int64_t shape[] = {rows, static_cast<int64_t>(len)};
      const int64_t ss[] = {static_cast<int64_t>(len), 1};
      const int64_t ds[] = {dst_row_stride, 1};
      // 64-aligned base, then the offset under test.
      auto at = [misalign](std::vector<uint8_t>& v) {
        const uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
        return v.data() + ((64 - (p & 63)) & 63) + misalign;
      };
      std::vector<uint8_t> want(size, kCanary);
      std::vector<uint8_t> got(size, kCanary);
      uint8_t* w = at(want);
      uint8_t* g = at(got);
      CopyStrided(w, ds, src.data(), ss, shape, 2, 1, 1);
      CopyStridedStreaming(g, ds, src.data(), ss, shape, 2, 1);
      // The two buffers' bases differ in alignment: compare from the copies' starts on.
      const size_t span = static_cast<size_t>(rows * dst_row_stride) + 32;
      ASSERT_EQ(std::vector<uint8_t>(g, g + span), std::vector<uint8_t>(w, w + span))
          << "row " << len << " at offset " << misalign;
      // Only the rows were written: as many non-canary bytes as the source has.
      size_t written = 0;
      for (uint8_t b : got) written += b != kCanary;
      size_t nonsentinel = 0;
      for (uint8_t b : src) nonsentinel += b != kCanary;
      EXPECT_EQ(written, nonsentinel) << "row " << len << " at offset " << misalign;
    }
  }
}

TEST(StridedCopyTest, StreamingCopyFallsBackForStridedRowsAndItems) {
  // Elements of 4 bytes with a gapped destination row: not a contiguous run, copied as
  // CopyStrided copies it.
  auto src = Iota<uint32_t>(200, 7);
  std::vector<uint8_t> want(200 * 8 + 64, kCanary);
  std::vector<uint8_t> got = want;
  const int64_t shape[] = {2, 100};
  const int64_t ss[] = {400, 4};
  const int64_t ds[] = {800, 8};
  CopyStrided(want.data(), ds, reinterpret_cast<const uint8_t*>(src.data()), ss, shape, 2, 4, 1);
  CopyStridedStreaming(got.data(), ds, reinterpret_cast<const uint8_t*>(src.data()), ss, shape, 2, 4);
  EXPECT_EQ(got, want);
  // A zero-dimensional copy is one element.
  uint64_t one = 0x1122334455667788ull, out = 0;
  CopyStridedStreaming(reinterpret_cast<uint8_t*>(&out), nullptr, reinterpret_cast<const uint8_t*>(&one), nullptr,
                       nullptr, 0, 8);
  EXPECT_EQ(out, one);
}

TEST(StridedCopyTest, StreamingThresholdIsAtLeastFourMiB) {
  EXPECT_GE(StreamingThresholdBytes(), 4u << 20);
  EXPECT_EQ(StreamingThresholdBytes(), StreamingThresholdBytes());
}

TEST(StridedCopyTest, SwapUnitEqualToItemsizeByteSwapsEachElement) {
  const uint16_t s16[] = {0x0102, 0xA0B0};
  const uint32_t s32[] = {0x01020304u, 0xDEADBEEFu};
  const uint64_t s64[] = {0x0102030405060708ull, 0x1122334455667788ull};
  uint16_t d16[2];
  uint32_t d32[2];
  uint64_t d64[2];
  const int64_t shape[] = {2};
  int64_t st[] = {2};
  CopyStrided(reinterpret_cast<uint8_t*>(d16), st, reinterpret_cast<const uint8_t*>(s16), st, shape, 1, 2, 2);
  st[0] = 4;
  CopyStrided(reinterpret_cast<uint8_t*>(d32), st, reinterpret_cast<const uint8_t*>(s32), st, shape, 1, 4, 4);
  st[0] = 8;
  CopyStrided(reinterpret_cast<uint8_t*>(d64), st, reinterpret_cast<const uint8_t*>(s64), st, shape, 1, 8, 8);
  EXPECT_EQ(d16[0], 0x0201);
  EXPECT_EQ(d16[1], 0xB0A0);
  EXPECT_EQ(d32[0], 0x04030201u);
  EXPECT_EQ(d32[1], 0xEFBEADDEu);
  EXPECT_EQ(d64[0], 0x0807060504030201ull);
  EXPECT_EQ(d64[1], 0x8877665544332211ull);
}

TEST(StridedCopyTest, ComplexSwapReversesEachComponentSeparately) {
  // complex64 = two float32 components: swap unit 4, itemsize 8.
  const Bytes src = lsio_test::FromHex("01 02 03 04 05 06 07 08  11 12 13 14 15 16 17 18");
  Bytes dst(16, 0);
  const int64_t shape[] = {2};
  const int64_t st[] = {8};
  CopyStrided(dst.data(), st, src.data(), st, shape, 1, 8, 4);
  EXPECT_EQ(dst, lsio_test::FromHex("04 03 02 01 08 07 06 05  14 13 12 11 18 17 16 15"));

  // complex128: swap unit 8, itemsize 16, through a strided (reversed) source.
  const Bytes src2 = lsio_test::FromHex(
      "00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"
      "10 11 12 13 14 15 16 17 18 19 1a 1b 1c 1d 1e 1f");
  Bytes dst2(32, 0);
  const int64_t st_src[] = {-16};
  const int64_t st_dst[] = {16};
  CopyStrided(dst2.data(), st_dst, src2.data() + 16, st_src, shape, 1, 16, 8);
  EXPECT_EQ(dst2, lsio_test::FromHex(
                      "17 16 15 14 13 12 11 10 1f 1e 1d 1c 1b 1a 19 18"
                      "07 06 05 04 03 02 01 00 0f 0e 0d 0c 0b 0a 09 08"));
}

TEST(StridedCopyTest, OddItemsizeWithStridesCopiesWholeElements) {
  // itemsize 3 takes the generic element loop.
  const Bytes src = lsio_test::FromHex("01 02 03 04 05 06 07 08 09");
  Bytes dst(12, kCanary);
  const int64_t shape[] = {3};
  const int64_t ss[] = {3};
  const int64_t ds[] = {4};
  CopyStrided(dst.data(), ds, src.data(), ss, shape, 1, 3, 1);
  EXPECT_EQ(dst, lsio_test::FromHex("01 02 03 ee 04 05 06 ee 07 08 09 ee"));
}

TEST(StridedCopyTest, SixteenByteItemsWithStrides) {
  const Bytes src = lsio_test::PatternBytes(64, 3);
  Bytes dst(64, 0);
  const int64_t shape[] = {2};
  const int64_t ss[] = {32};
  const int64_t ds[] = {16};
  CopyStrided(dst.data(), ds, src.data(), ss, shape, 1, 16, 1);
  EXPECT_TRUE(std::equal(src.begin(), src.begin() + 16, dst.begin()));
  EXPECT_TRUE(std::equal(src.begin() + 32, src.begin() + 48, dst.begin() + 16));
  EXPECT_TRUE(std::all_of(dst.begin() + 32, dst.end(), [](uint8_t b) { return b == 0; }));
}

TEST(StridedCopyTest, ThreeDimensionalPermutationMatchesReference) {
  // src C-order [2,3,4]; dst is its [2,0,1] permutation: dst[k][i][j] = src[i][j][k].
  const int64_t I = 2, J = 3, K = 4;
  auto src = Iota<uint32_t>(static_cast<size_t>(I * J * K), 100);
  std::vector<uint32_t> dst(src.size(), 0);
  const int64_t shape[] = {I, J, K};
  const int64_t ss[] = {J * K * 4, K * 4, 4};
  const int64_t ds[] = {J * 4, 4, I * J * 4};
  CopyStrided(reinterpret_cast<uint8_t*>(dst.data()), ds, reinterpret_cast<const uint8_t*>(src.data()), ss,
              shape, 3, 4, 1);
  for (int64_t i = 0; i < I; ++i)
    for (int64_t j = 0; j < J; ++j)
      for (int64_t k = 0; k < K; ++k)
        EXPECT_EQ(dst[static_cast<size_t>(k * I * J + i * J + j)], src[static_cast<size_t>(i * J * K + j * K + k)]);
}

TEST(StridedCopyTest, ZeroDimensionalCopiesOneElementWithSwap) {
  const uint32_t src = 0x11223344u;
  uint32_t dst = 0;
  CopyStrided(reinterpret_cast<uint8_t*>(&dst), nullptr, reinterpret_cast<const uint8_t*>(&src), nullptr,
              nullptr, 0, 4, 1);
  EXPECT_EQ(dst, src);
  CopyStrided(reinterpret_cast<uint8_t*>(&dst), nullptr, reinterpret_cast<const uint8_t*>(&src), nullptr,
              nullptr, 0, 4, 4);
  EXPECT_EQ(dst, 0x44332211u);
}

TEST(StridedCopyTest, ZeroExtentWritesNothing) {
  const Bytes src(16, 0x55);
  Bytes dst(16, kCanary);
  const int64_t shape[] = {2, 0};
  const int64_t st[] = {8, 1};
  CopyStrided(dst.data(), st, src.data(), st, shape, 2, 1, 1);
  EXPECT_EQ(dst, Bytes(16, kCanary));
  const uint8_t pattern[] = {1};
  FillStrided(dst.data(), st, shape, 2, pattern, 1);
  EXPECT_EQ(dst, Bytes(16, kCanary));
}

TEST(FillStridedTest, RepeatedBytePatternFillsContiguousRuns) {
  Bytes dst(2 * 3 * 4 + 8, kCanary);
  const uint8_t pattern[] = {0xAB, 0xAB, 0xAB, 0xAB};
  const int64_t shape[] = {2, 3};
  const int64_t st[] = {12, 4};
  FillStrided(dst.data() + 4, st, shape, 2, pattern, 4);
  for (size_t i = 0; i < dst.size(); ++i) {
    const bool inside = i >= 4 && i < 28;
    EXPECT_EQ(dst[i], inside ? 0xAB : kCanary) << i;
  }
}

TEST(FillStridedTest, NonRepeatedPatternIsWrittenPerElement) {
  // 1.0f = 00 00 80 3f: not a repeated byte, so a memset would be wrong.
  const float one = 1.0f;
  std::vector<float> dst(6, -7.0f);
  const int64_t shape[] = {2, 3};
  const int64_t st[] = {12, 4};
  FillStrided(reinterpret_cast<uint8_t*>(dst.data()), st, shape, 2, reinterpret_cast<const uint8_t*>(&one), 4);
  EXPECT_EQ(dst, std::vector<float>(6, 1.0f));
}

TEST(FillStridedTest, StridedFillLeavesGapsUntouched) {
  // A 2x2 sub-box of a 3x4 uint16 array, both patterns.
  for (const uint16_t pat : {uint16_t{0x7777}, uint16_t{0x1234}}) {
    std::vector<uint16_t> dst(12, 0xEEEE);
    const int64_t shape[] = {2, 2};
    const int64_t st[] = {8, 4};  // rows 0,1 ; columns 0,2
    FillStrided(reinterpret_cast<uint8_t*>(dst.data() + 1), st, shape, 2,
                reinterpret_cast<const uint8_t*>(&pat), 2);
    std::vector<uint16_t> want(12, 0xEEEE);
    want[1] = want[3] = want[5] = want[7] = pat;
    EXPECT_EQ(dst, want) << std::hex << pat;
  }
}

TEST(FillStridedTest, NegativeStridesAndComplexPattern) {
  // complex64 (1.0, -2.0) into a reversed 1-d view of 3 elements.
  const float pat[2] = {1.0f, -2.0f};
  std::vector<float> dst(8, 0.0f);
  const int64_t shape[] = {3};
  const int64_t st[] = {-8};
  FillStrided(reinterpret_cast<uint8_t*>(dst.data() + 4), st, shape, 1, reinterpret_cast<const uint8_t*>(pat), 8);
  EXPECT_EQ(dst, (std::vector<float>{1, -2, 1, -2, 1, -2, 0, 0}));
}

TEST(FillStridedTest, ZeroDimensionalFillsOneElement) {
  const double nan_bits_src = -0.0;
  double dst = 5.0;
  FillStrided(reinterpret_cast<uint8_t*>(&dst), nullptr, nullptr, 0,
              reinterpret_cast<const uint8_t*>(&nan_bits_src), 8);
  EXPECT_TRUE(std::signbit(dst));
  EXPECT_EQ(dst, 0.0);
}

TEST(ByteSwapInPlaceTest, SwapsEachUnit) {
  Bytes b = lsio_test::FromHex("01 02 03 04 05 06 07 08");
  ByteSwapInPlace(b.data(), 4, 2);
  EXPECT_EQ(b, lsio_test::FromHex("02 01 04 03 06 05 08 07"));
  ByteSwapInPlace(b.data(), 2, 4);
  EXPECT_EQ(b, lsio_test::FromHex("03 04 01 02 07 08 05 06"));
  ByteSwapInPlace(b.data(), 1, 8);
  EXPECT_EQ(b, lsio_test::FromHex("06 05 08 07 02 01 04 03"));
}

TEST(ByteSwapInPlaceTest, UnitOneOrUnsupportedIsANoOp) {
  const Bytes orig = lsio_test::FromHex("01 02 03 04 05 06");
  Bytes b = orig;
  ByteSwapInPlace(b.data(), 6, 1);
  EXPECT_EQ(b, orig);
  ByteSwapInPlace(b.data(), 2, 3);
  EXPECT_EQ(b, orig);
  ByteSwapInPlace(b.data(), 0, 8);
  EXPECT_EQ(b, orig);
}

}  // namespace
}  // namespace lsio
