// Variable-length string chunks (lsio/strings.h): the bytes -> bytes codecs from the registry,
// run in reverse with growable buffers, then the vlen-utf8 layout.
#include "lsio/strings.h"

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "codec/registry.h"

namespace lsio {
namespace {

bool ValidUtf8(std::string_view s) {
  static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int n;
    uint32_t cp;
    if (c < 0x80) { n = 0; cp = c; }
    else if ((c >> 5) == 6) { n = 1; cp = c & 0x1F; }
    else if ((c >> 4) == 14) { n = 2; cp = c & 0x0F; }
    else if ((c >> 3) == 30) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + static_cast<size_t>(n) >= s.size() && n > 0) return false;
    for (int k = 1; k <= n; ++k) {
      const uint8_t cc = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

Result<std::vector<std::string>> DecodeVlenUtf8Chunk(const std::string& codecs_json, std::string_view stored,
                                                     uint64_t items) {
  nlohmann::json list = nlohmann::json::parse(codecs_json, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_array()) return Status::InvalidFormat("codecs must be a JSON list");
  std::vector<std::unique_ptr<Codec>> codecs;
  for (const auto& element : list) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(element));
    if (c->kind() != CodecKind::kBytesToBytes) {
      return Status::Unimplemented("codec '" + c->name() + "' after vlen-utf8 is not supported by lsio");
    }
    codecs.push_back(std::move(c));
  }
  // Decode in reverse, each stage into its own growable buffer.
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(stored.data()), stored.size());
  AlignedBuffer buffers[2];
  DecodeScratch& scratch = ThreadDecodeScratch();
  for (size_t k = codecs.size(); k-- > 0;) {
    BytesOut out;
    out.grow = &buffers[k % 2];
    LSIO_RETURN_IF_ERROR(static_cast<const BytesToBytesCodec&>(*codecs[k]).DecodeBytes(bytes, out, scratch));
    bytes = out.result;
  }
  if (bytes.size() < 4) return Status::DataLoss("vlen-utf8: chunk shorter than its 4-byte item count");
  const uint64_t count = Le32(bytes.data());
  if (count != items) {
    return Status::DataLoss("vlen-utf8: chunk holds " + std::to_string(count) + " items, expected " +
                            std::to_string(items));
  }
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(count));
  size_t at = 4;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 4) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " runs past the chunk");
    const uint64_t n = Le32(bytes.data() + at);
    at += 4;
    if (bytes.size() - at < n) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " runs past the chunk");
    std::string_view s(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(n));
    if (!ValidUtf8(s)) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " is not valid UTF-8");
    out.emplace_back(s);
    at += static_cast<size_t>(n);
  }
  if (at != bytes.size()) {
    return Status::DataLoss("vlen-utf8: " + std::to_string(bytes.size() - at) + " bytes after the last item");
  }
  return out;
}

}  // namespace lsio
