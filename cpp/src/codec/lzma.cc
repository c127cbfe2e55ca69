// numcodecs' `lzma` compressor (bytes -> bytes; Zarr v2 id "lzma", v3 "numcodecs.lzma"),
// decoded with liblzma. Formats 0 (auto), 1 (.xz, the default) and 2 (legacy .lzma) describe
// themselves and are read by lzma's auto decoder, concatenated streams included; format 3
// (raw) needs its filter chain from the configuration and is not supported yet.
#include <lzma.h>

#include <algorithm>

#include "codec/registry.h"

namespace lsio {
namespace {

// Decodes all of `in` into [dst, dst + cap); *produced > cap when the data is larger.
Status Unxz(std::span<const uint8_t> in, uint8_t* dst, size_t cap, size_t* produced) {
  lzma_stream s = LZMA_STREAM_INIT;
  if (lzma_auto_decoder(&s, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return Status::ResourceExhausted("lzma: cannot start a decoder");
  }
  s.next_in = in.data();
  s.avail_in = in.size();
  size_t out_pos = 0;
  uint8_t probe;
  lzma_action action = LZMA_RUN;
  Status st;
  for (;;) {
    const bool full = out_pos >= cap;
    s.next_out = full ? &probe : dst + out_pos;
    s.avail_out = full ? 1 : cap - out_pos;
    const size_t out_before = s.avail_out;
    if (s.avail_in == 0) action = LZMA_FINISH;  // tells a concatenated decoder the input ended
    const lzma_ret r = lzma_code(&s, action);
    out_pos += out_before - s.avail_out;
    if (full && s.avail_out == 0) {
      *produced = cap + 1;
      break;
    }
    if (r == LZMA_STREAM_END) {
      *produced = out_pos;
      break;
    }
    if (r == LZMA_BUF_ERROR) {
      st = Status::DataLoss("lzma: truncated stream");
      break;
    }
    if (r != LZMA_OK) {
      st = Status::DataLoss("lzma: corrupt data (liblzma error " + std::to_string(static_cast<int>(r)) + ")");
      break;
    }
  }
  lzma_end(&s);
  return st;
}

class LzmaCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "lzma"; }
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    return lzma_stream_buffer_bound(static_cast<size_t>(decoded)) + 4096;
  }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch& scratch) const override {
    if (in.empty()) return Status::DataLoss("lzma: empty chunk");
    return DecodeUnknownSize(out, in.size() * 4 + 4096, "lzma", [&](uint8_t* dst, size_t cap, size_t* produced) {
      return Unxz(in, dst, cap, produced);
    });
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseNumcodecsLzmaCodec(const nlohmann::json& config) {
  auto fmt = config.find("format");
  int64_t format = 1;
  if (fmt != config.end() && !fmt->is_null()) {
    if (!fmt->is_number_integer()) return Status::InvalidFormat("lzma codec: \"format\" must be an integer");
    format = fmt->get<int64_t>();
  }
  if (format == 3) {
    return Status::Unimplemented("lzma codec: raw streams (format 3, FORMAT_RAW with a filter chain) are not supported by lsio yet");
  }
  if (format < 0 || format > 3) {
    return Status::InvalidFormat("lzma codec: \"format\" must be 0 (auto), 1 (xz), 2 (alone) or 3 (raw), got " +
                                 std::to_string(format));
  }
  return std::unique_ptr<Codec>(new LzmaCodec());
}

}  // namespace lsio
