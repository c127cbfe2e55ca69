// Variable-length string chunks (lsio/strings.h): the bytes -> bytes codecs from the registry,
// run in reverse with growable buffers, then the vlen-utf8 layout.
#include "lsio/strings.h"

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "codec/registry.h"
#include "util/utf8.h"

namespace lsio {
namespace {

constexpr uint64_t kMaxDecodedBytes = 1ull << 30;

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
    // A string chunk's decoded size is unknown up front; a frame claiming more than this is
    // taken as corrupt rather than allocated.
    out.limit = kMaxDecodedBytes;
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
