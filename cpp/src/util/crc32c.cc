// CRC-32C (Castagnoli). No Debian-packaged library provides CRC-32C (zlib's crc32 is the
// other polynomial), so this is written here: SSE4.2's crc32 instruction where the CPU has
// it, a slice-by-8 table otherwise. Used by the crc32c codec and shard indexes (codec/) and
// by the disk cache's block checksums (store/).
#include "util/crc32c.h"

#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace lsio {
namespace {

struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[0][i] = c;
    }
    for (int s = 1; s < 8; ++s)
      for (uint32_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
  }
};

const Tables& GetTables() {
  static const Tables kTables;  // immutable data, no lock: fork-safe
  return kTables;
}

uint32_t Crc32cSoftware(uint32_t crc, const uint8_t* p, size_t n) {
  const Tables& T = GetTables();
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    v ^= crc;
    crc = T.t[7][v & 0xff] ^ T.t[6][(v >> 8) & 0xff] ^ T.t[5][(v >> 16) & 0xff] ^
          T.t[4][(v >> 24) & 0xff] ^ T.t[3][(v >> 32) & 0xff] ^ T.t[2][(v >> 40) & 0xff] ^
          T.t[1][(v >> 48) & 0xff] ^ T.t[0][v >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) crc = (crc >> 8) ^ T.t[0][(crc ^ *p++) & 0xff];
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(uint32_t crc, const uint8_t* p, size_t n) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n--) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool HasSse42() {
  static const bool kHas = __builtin_cpu_supports("sse4.2");
  return kHas;
}
#endif

}  // namespace

uint32_t Crc32c(const uint8_t* data, size_t n) {
#if defined(__x86_64__)
  if (HasSse42()) return ~Crc32cHardware(~0u, data, n);
#endif
  return ~Crc32cSoftware(~0u, data, n);
}

}  // namespace lsio
