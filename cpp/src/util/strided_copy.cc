// Strided copy kernels. The innermost dimension is the hot loop: it becomes one memcpy when
// both sides are contiguous there, and a fixed-size element loop otherwise, so the common
// item sizes compile to plain loads and stores.
#include "util/strided_copy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace lsio {
namespace {

inline void SwapUnits(uint8_t* p, size_t itemsize, size_t unit) {
  for (size_t off = 0; off < itemsize; off += unit) {
    uint8_t* q = p + off;
    switch (unit) {
      case 2: { uint16_t v; std::memcpy(&v, q, 2); v = __builtin_bswap16(v); std::memcpy(q, &v, 2); break; }
      case 4: { uint32_t v; std::memcpy(&v, q, 4); v = __builtin_bswap32(v); std::memcpy(q, &v, 4); break; }
      case 8: { uint64_t v; std::memcpy(&v, q, 8); v = __builtin_bswap64(v); std::memcpy(q, &v, 8); break; }
      default: break;
    }
  }
}

template <size_t N>
inline void CopyRunFixed(uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds, src + i * ss, N);
}

void CopyRun(uint8_t* dst, int64_t ds, const uint8_t* src, int64_t ss, int64_t n,
             size_t itemsize, size_t swap_unit) {
  const int64_t isz = static_cast<int64_t>(itemsize);
  if (swap_unit <= 1) {
    if (ds == isz && ss == isz) {
      std::memcpy(dst, src, static_cast<size_t>(n) * itemsize);
      return;
    }
    switch (itemsize) {
      case 1: CopyRunFixed<1>(dst, ds, src, ss, n); return;
      case 2: CopyRunFixed<2>(dst, ds, src, ss, n); return;
      case 4: CopyRunFixed<4>(dst, ds, src, ss, n); return;
      case 8: CopyRunFixed<8>(dst, ds, src, ss, n); return;
      case 16: CopyRunFixed<16>(dst, ds, src, ss, n); return;
      default:
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * ds, src + i * ss, itemsize);
        return;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* d = dst + i * ds;
    std::memcpy(d, src + i * ss, itemsize);
    SwapUnits(d, itemsize, swap_unit);
  }
}

// One row with non-temporal stores for its whole 64-byte lines; the partial lines at either
// end are stored normally (a partial non-temporal line costs more than the read it saves).
// SSE2 is part of x86-64, so no dispatch is needed; other CPUs copy normally.
inline void StreamRow(uint8_t* d, const uint8_t* s, size_t n) {
#if defined(__SSE2__)
  const size_t head = std::min(n, (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  for (; n >= 64; d += 64, s += 64, n -= 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
  }
#endif
  std::memcpy(d, s, n);
}

}  // namespace

void CopyStridedStreaming(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                          const int64_t* src_strides, const int64_t* shape, int ndim, size_t itemsize) {
  const int64_t isz = static_cast<int64_t>(itemsize);
  const size_t row = ndim == 0 ? itemsize : static_cast<size_t>(shape[ndim - 1]) * itemsize;
  if (ndim == 0 || row < kMinStreamedRow || dst_strides[ndim - 1] != isz || src_strides[ndim - 1] != isz) {
    CopyStrided(dst, dst_strides, src, src_strides, shape, ndim, itemsize, 1);
    return;
  }
  ForEachInnerRun(dst, dst_strides, src, src_strides, shape, ndim,
                  [row](uint8_t* d, const uint8_t* s) { StreamRow(d, s, row); });
#if defined(__SSE2__)
  // Non-temporal stores are weakly ordered: fenced before anything says the rows are written.
  _mm_sfence();
#endif
}

namespace {

// The last-level cache's size from sysfs (what lscpu shows), 0 if unknown. sysconf's figure
// comes from cpuid, which in VMs reports the host's whole L3 (320 MiB on the 2-core dev VM,
// whose sysfs says 32 MiB).
uint64_t LastLevelCacheBytes() {
  int best_level = 0;
  uint64_t best = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level");
    std::ifstream size_file(dir + "size");
    int level = 0;
    uint64_t size = 0;
    std::string unit;
    if (!(level_file >> level) || !(size_file >> size)) break;
    size_file >> unit;  // "32768K": the number stops at the unit letter
    if (unit == "K") size <<= 10;
    else if (unit == "M") size <<= 20;
    else if (unit == "G") size <<= 30;
    if (level > best_level) {
      best_level = level;
      best = size;
    }
  }
  return best;
}

// Computed when the library loads, so no first call can leave a half-done once-flag to a
// forked child; a read-only number, the same in every process.
const uint64_t g_streaming_threshold = [] {
  constexpr uint64_t kMiB = 1u << 20;
  const uint64_t llc = LastLevelCacheBytes();
  if (llc == 0) return 8 * kMiB;
  return std::max<uint64_t>(4 * kMiB, llc / 4);
}();

}  // namespace

uint64_t StreamingThresholdBytes() { return g_streaming_threshold; }

void CopyStrided(uint8_t* dst, const int64_t* dst_strides, const uint8_t* src,
                 const int64_t* src_strides, const int64_t* shape, int ndim, size_t itemsize,
                 size_t swap_unit) {
  const int64_t n = ndim == 0 ? 1 : shape[ndim - 1];
  const int64_t ds = ndim == 0 ? 0 : dst_strides[ndim - 1];
  const int64_t ss = ndim == 0 ? 0 : src_strides[ndim - 1];
  const int64_t isz = static_cast<int64_t>(itemsize);
  if (swap_unit <= 1 && ds == isz && ss == isz) {
    // The common scatter (rows contiguous on both sides): one memcpy per row with no call
    // in between. Tiny chunks copy tens of short rows each, where CopyRun's per-row call
    // and dispatch showed as ~4% of a read in perf.
    const size_t row = static_cast<size_t>(n) * itemsize;
    ForEachInnerRun(dst, dst_strides, src, src_strides, shape, ndim,
                    [row](uint8_t* d, const uint8_t* s) { std::memcpy(d, s, row); });
    return;
  }
  ForEachInnerRun(dst, dst_strides, src, src_strides, shape, ndim,
                  [&](uint8_t* d, const uint8_t* s) { CopyRun(d, ds, s, ss, n, itemsize, swap_unit); });
}

void FillStrided(uint8_t* dst, const int64_t* dst_strides, const int64_t* shape, int ndim,
                 const uint8_t* pattern, size_t itemsize) {
  bool repeated_byte = true;
  for (size_t i = 1; i < itemsize; ++i) repeated_byte &= pattern[i] == pattern[0];
  const int64_t n = ndim == 0 ? 1 : shape[ndim - 1];
  const int64_t s = ndim == 0 ? 0 : dst_strides[ndim - 1];
  const bool memset_ok = repeated_byte && (n == 1 || s == static_cast<int64_t>(itemsize));
  ForEachInnerRun(dst, dst_strides, nullptr, nullptr, shape, ndim, [&](uint8_t* d, const uint8_t*) {
    if (memset_ok) {
      std::memset(d, pattern[0], static_cast<size_t>(n) * itemsize);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * s, pattern, itemsize);
    }
  });
}

void ByteSwapInPlace(uint8_t* data, size_t count, size_t unit) {
  switch (unit) {
    case 2:
      for (size_t i = 0; i < count; ++i) {
        uint16_t v; std::memcpy(&v, data + 2 * i, 2); v = __builtin_bswap16(v); std::memcpy(data + 2 * i, &v, 2);
      }
      return;
    case 4:
      for (size_t i = 0; i < count; ++i) {
        uint32_t v; std::memcpy(&v, data + 4 * i, 4); v = __builtin_bswap32(v); std::memcpy(data + 4 * i, &v, 4);
      }
      return;
    case 8:
      for (size_t i = 0; i < count; ++i) {
        uint64_t v; std::memcpy(&v, data + 8 * i, 8); v = __builtin_bswap64(v); std::memcpy(data + 8 * i, &v, 8);
      }
      return;
    default:
      return;
  }
}

}  // namespace lsio
