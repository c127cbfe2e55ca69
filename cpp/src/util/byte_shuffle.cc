// Byte unshuffle kernels (see byte_shuffle.h): a scalar loop for any item size and AVX2
// kernels for 2-, 4- and 8-byte items, chosen at run time.
//
// Each AVX2 kernel takes 32 items per step: one 32-byte load from each of the E planes,
// then interleaves them with unpack steps (bytes, then 16-bit, then 32-bit pairs) until
// every register holds whole items. The unpacks work within each 128-bit lane, so the
// lower lane ends up with items 0..15 of the step and the upper lane with items 16..31;
// permute2x128 puts the lanes back in item order before the stores.
#include "util/byte_shuffle.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lsio {
namespace {

// Items [begin, n) of the planes at src (n items each), then the trailing bytes.
void UnshuffleTail(uint8_t* dst, const uint8_t* src, size_t nbytes, size_t e, size_t begin) {
  const size_t n = nbytes / e;
  for (size_t j = 0; j < e; ++j) {
    const uint8_t* plane = src + j * n;
    for (size_t i = begin; i < n; ++i) dst[i * e + j] = plane[i];
  }
  const size_t rest = nbytes - n * e;
  if (rest != 0) std::memcpy(dst + n * e, src + n * e, rest);
}

#if defined(__x86_64__)
#define LSIO_AVX2 __attribute__((target("avx2")))

LSIO_AVX2 inline __m256i Load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
LSIO_AVX2 inline void Store(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
// Lower lanes of a and b (items 0..15 of a step), and upper lanes (items 16..31).
LSIO_AVX2 inline __m256i LowLanes(__m256i a, __m256i b) { return _mm256_permute2x128_si256(a, b, 0x20); }
LSIO_AVX2 inline __m256i HighLanes(__m256i a, __m256i b) { return _mm256_permute2x128_si256(a, b, 0x31); }

LSIO_AVX2 size_t Unshuffle2(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = Load(src + i), b = Load(src + n + i);
    const __m256i lo = _mm256_unpacklo_epi8(a, b);  // items 0..7 | 16..23
    const __m256i hi = _mm256_unpackhi_epi8(a, b);  // items 8..15 | 24..31
    uint8_t* d = dst + 2 * i;
    Store(d, LowLanes(lo, hi));
    Store(d + 32, HighLanes(lo, hi));
  }
  return i;
}

LSIO_AVX2 size_t Unshuffle4(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = Load(src + i), b = Load(src + n + i);
    const __m256i c = Load(src + 2 * n + i), e = Load(src + 3 * n + i);
    const __m256i ab_lo = _mm256_unpacklo_epi8(a, b), ab_hi = _mm256_unpackhi_epi8(a, b);
    const __m256i ce_lo = _mm256_unpacklo_epi8(c, e), ce_hi = _mm256_unpackhi_epi8(c, e);
    const __m256i r0 = _mm256_unpacklo_epi16(ab_lo, ce_lo);  // items 0..3 | 16..19
    const __m256i r1 = _mm256_unpackhi_epi16(ab_lo, ce_lo);  // items 4..7 | 20..23
    const __m256i r2 = _mm256_unpacklo_epi16(ab_hi, ce_hi);  // items 8..11 | 24..27
    const __m256i r3 = _mm256_unpackhi_epi16(ab_hi, ce_hi);  // items 12..15 | 28..31
    uint8_t* d = dst + 4 * i;
    Store(d, LowLanes(r0, r1));
    Store(d + 32, LowLanes(r2, r3));
    Store(d + 64, HighLanes(r0, r1));
    Store(d + 96, HighLanes(r2, r3));
  }
  return i;
}

LSIO_AVX2 size_t Unshuffle8(uint8_t* dst, const uint8_t* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i p[8];
    for (int k = 0; k < 8; ++k) p[k] = Load(src + k * n + i);
    // Byte pairs (bytes 2k, 2k+1): t[2k] items 0..7 | 16..23, t[2k+1] items 8..15 | 24..31.
    __m256i t[8];
    for (int k = 0; k < 4; ++k) {
      t[2 * k] = _mm256_unpacklo_epi8(p[2 * k], p[2 * k + 1]);
      t[2 * k + 1] = _mm256_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
    }
    // Half items: u[0..3] bytes 0..3 and u[4..7] bytes 4..7 of items 0-3, 4-7, 8-11, 12-15
    // (and 16 more in the upper lane).
    __m256i u[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i lo_a = t[4 * h], hi_a = t[4 * h + 1], lo_b = t[4 * h + 2], hi_b = t[4 * h + 3];
      u[4 * h] = _mm256_unpacklo_epi16(lo_a, lo_b);
      u[4 * h + 1] = _mm256_unpackhi_epi16(lo_a, lo_b);
      u[4 * h + 2] = _mm256_unpacklo_epi16(hi_a, hi_b);
      u[4 * h + 3] = _mm256_unpackhi_epi16(hi_a, hi_b);
    }
    // Whole items, two per lane: v[m] holds items 2m, 2m+1 | 16+2m, 17+2m.
    __m256i v[8];
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = _mm256_unpacklo_epi32(u[k], u[4 + k]);
      v[2 * k + 1] = _mm256_unpackhi_epi32(u[k], u[4 + k]);
    }
    uint8_t* d = dst + 8 * i;
    for (int k = 0; k < 4; ++k) {
      Store(d + 32 * k, LowLanes(v[2 * k], v[2 * k + 1]));
      Store(d + 128 + 32 * k, HighLanes(v[2 * k], v[2 * k + 1]));
    }
  }
  return i;
}

bool HasAvx2() {
  static const bool kHas = __builtin_cpu_supports("avx2");
  return kHas;
}
#endif

}  // namespace

void UnshuffleBytesScalar(uint8_t* dst, const uint8_t* src, size_t nbytes, size_t typesize) {
  if (typesize <= 1) {
    if (nbytes != 0) std::memcpy(dst, src, nbytes);
    return;
  }
  UnshuffleTail(dst, src, nbytes, typesize, 0);
}

bool UnshuffleIsVectorized(size_t typesize) {
#if defined(__x86_64__)
  return (typesize == 2 || typesize == 4 || typesize == 8) && HasAvx2();
#else
  (void)typesize;
  return false;
#endif
}

void UnshuffleBytes(uint8_t* dst, const uint8_t* src, size_t nbytes, size_t typesize) {
  if (typesize <= 1) {
    UnshuffleBytesScalar(dst, src, nbytes, typesize);
    return;
  }
  size_t done = 0;  // items the vector kernel wrote
#if defined(__x86_64__)
  if (UnshuffleIsVectorized(typesize)) {
    const size_t n = nbytes / typesize;
    switch (typesize) {
      case 2: done = Unshuffle2(dst, src, n); break;
      case 4: done = Unshuffle4(dst, src, n); break;
      case 8: done = Unshuffle8(dst, src, n); break;
    }
  }
#endif
  UnshuffleTail(dst, src, nbytes, typesize, done);
}

}  // namespace lsio
