// UnshuffleBytes: the vector kernels equal the scalar loop and the encoders' layout (plane j
// = byte j of every item, trailing bytes kept) for every item size 1..17, every length
// around the 32-item vector step, and unaligned source and destination; nothing outside
// dst[0, nbytes) is written.
#include "util/byte_shuffle.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lsio {
namespace {

using lsio_test::Bytes;

constexpr uint8_t kCanary = 0xEE;
constexpr size_t kGuard = 48;

// What a blosc or numcodecs encoder stores for `data`: the byte planes, then the bytes of
// the trailing partial item as they were.
Bytes Shuffle(const Bytes& data, size_t typesize) {
  if (typesize <= 1) return data;
  const size_t n = data.size() / typesize;
  Bytes out(data.size());
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < typesize; ++j) out[j * n + i] = data[i * typesize + j];
  }
  if (data.size() != n * typesize) {
    std::memcpy(out.data() + n * typesize, data.data() + n * typesize, data.size() - n * typesize);
  }
  return out;
}

TEST(ByteShuffleTest, UndoesTheEncodersLayoutForEveryItemSizeAndLength) {
  for (size_t typesize = 1; typesize <= 17; ++typesize) {
    for (size_t items : {0u, 1u, 31u, 32u, 33u, 63u, 64u, 65u, 100u, 1000u, 4096u}) {
      for (size_t extra : {size_t{0}, typesize / 2}) {  // a trailing partial item
        const size_t nbytes = items * typesize + extra;
        const Bytes data = lsio_test::PatternBytes(nbytes, typesize * 1000 + items + extra);
        const Bytes shuffled = Shuffle(data, typesize);
        for (size_t align : {0u, 1u, 7u}) {  // source and destination off their natural alignment
          const std::string what = "typesize " + std::to_string(typesize) + ", " + std::to_string(nbytes) +
                                   " bytes, offset " + std::to_string(align);
          Bytes src(align + nbytes);
          if (nbytes != 0) std::memcpy(src.data() + align, shuffled.data(), nbytes);
          Bytes dst(kGuard + align + nbytes + kGuard, kCanary);
          uint8_t* d = dst.data() + kGuard + align;
          UnshuffleBytes(d, src.data() + align, nbytes, typesize);
          ASSERT_EQ(Bytes(d, d + nbytes), data) << what;
          for (size_t i = 0; i < kGuard + align; ++i) ASSERT_EQ(dst[i], kCanary) << what << ": wrote before dst";
          for (size_t i = kGuard + align + nbytes; i < dst.size(); ++i) {
            ASSERT_EQ(dst[i], kCanary) << what << ": wrote past dst";
          }
          Bytes ref(nbytes);
          UnshuffleBytesScalar(ref.data(), src.data() + align, nbytes, typesize);
          ASSERT_EQ(ref, data) << what << " (scalar)";
        }
      }
    }
  }
}

TEST(ByteShuffleTest, VectorKernelsServeTwoFourAndEightByteItemsWithAvx2) {
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
#else
  const bool avx2 = false;
#endif
  for (size_t typesize = 0; typesize <= 17; ++typesize) {
    const bool want = avx2 && (typesize == 2 || typesize == 4 || typesize == 8);
    EXPECT_EQ(UnshuffleIsVectorized(typesize), want) << "typesize " << typesize;
  }
}

}  // namespace
}  // namespace lsio
