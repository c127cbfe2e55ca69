// Standard base64 (RFC 4648) decoding: Zarr v3 fill values of byte strings and kerchunk's
// "base64:" inline chunks.
#pragma once

#include <string>
#include <string_view>

namespace lsio {

/// Decodes standard base64 (padding optional) into *out (appended); false for anything
/// else (other characters, data after padding, padding that does not complete the last
/// group of four, a last group of one character).
bool DecodeBase64(std::string_view s, std::string* out);

}  // namespace lsio
