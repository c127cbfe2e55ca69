// DecodeBase64 (see base64.h).
#include "util/base64.h"

#include <cstdint>

namespace lsio {

bool DecodeBase64(std::string_view s, std::string* out) {
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0, chars = 0;
  for (char ch : s) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=') { ++pad; continue; }
    else return false;
    if (pad > 0) return false;  // data after padding
    ++chars;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // One character past a whole group holds no byte (a truncated string); padding, where
  // given, completes the last group exactly.
  if (chars % 4 == 1) return false;
  return pad == 0 || (pad <= 2 && (chars + pad) % 4 == 0);
}

}  // namespace lsio
