// UTF-8 decoding for the few places lsio meets text inside data: fixed-width string fill
// values (zarr/fill_value.cc) and variable-length string chunks (src/strings.cc).
//
// Usage: std::vector<uint32_t> cps; if (!DecodeUtf8(text, &cps)) ...  // or ValidUtf8(text)
// Strict: overlong forms, surrogates, code points above U+10FFFF and truncated sequences are
// refused.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace lsio {

/// Appends the code points of `s` to *out (when out is not null); false for invalid UTF-8.
inline bool DecodeUtf8(std::string_view s, std::vector<uint32_t>* out) {
  static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int n;
    uint32_t cp;
    if (c < 0x80) { n = 0; cp = c; }
    else if ((c >> 5) == 6) { n = 1; cp = c & 0x1F; }
    else if ((c >> 4) == 14) { n = 2; cp = c & 0x0F; }
    else if ((c >> 3) == 30) { n = 3; cp = c & 0x07; }
    else return false;
    for (int k = 1; k <= n; ++k) {
      if (i + static_cast<size_t>(k) >= s.size()) return false;
      const uint8_t cc = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    if (out != nullptr) out->push_back(cp);
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

inline bool ValidUtf8(std::string_view s) { return DecodeUtf8(s, nullptr); }

}  // namespace lsio
