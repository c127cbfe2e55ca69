// numcodecs' `bz2` compressor (bytes -> bytes; Zarr v2 id "bz2", v3 "numcodecs.bz2"),
// decoded with libbz2. Python's bz2 module writes one stream; several concatenated streams
// (bz2.decompress reads them) are decoded one after the other.
#include <bzlib.h>

#include <algorithm>

#include "codec/registry.h"

namespace lsio {
namespace {

// Decodes all of `in` into [dst, dst + cap); *produced > cap when the data is larger.
Status Bunzip(std::span<const uint8_t> in, uint8_t* dst, size_t cap, size_t* produced) {
  size_t in_pos = 0, out_pos = 0;
  uint8_t probe;
  while (in_pos < in.size()) {
    bz_stream bz{};
    if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) return Status::ResourceExhausted("bz2: cannot start a decoder");
    int r = BZ_OK;
    while (true) {
      const bool full = out_pos >= cap;
      bz.next_in = reinterpret_cast<char*>(const_cast<uint8_t*>(in.data() + in_pos));
      bz.avail_in = static_cast<unsigned>(std::min<size_t>(in.size() - in_pos, 1u << 30));
      bz.next_out = reinterpret_cast<char*>(full ? &probe : dst + out_pos);
      bz.avail_out = full ? 1u : static_cast<unsigned>(std::min<size_t>(cap - out_pos, 1u << 30));
      const unsigned in_before = bz.avail_in, out_before = bz.avail_out;
      r = BZ2_bzDecompress(&bz);
      in_pos += in_before - bz.avail_in;
      out_pos += out_before - bz.avail_out;
      if (full && bz.avail_out == 0) {
        BZ2_bzDecompressEnd(&bz);
        *produced = cap + 1;
        return Status::Ok();
      }
      if (r == BZ_STREAM_END) break;
      if (r != BZ_OK) {
        BZ2_bzDecompressEnd(&bz);
        return Status::DataLoss("bz2: corrupt data (libbz2 error " + std::to_string(r) + ")");
      }
      if (in_before == bz.avail_in && out_before == bz.avail_out) {
        BZ2_bzDecompressEnd(&bz);
        return Status::DataLoss("bz2: truncated stream");
      }
    }
    BZ2_bzDecompressEnd(&bz);
  }
  *produced = out_pos;
  return Status::Ok();
}

class Bz2Codec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "bz2"; }
  // bzip2's documented worst case is 1% + 600 bytes per stream.
  uint64_t MaxEncodedSize(uint64_t decoded) const override { return decoded + decoded / 100 + 600 + 4096; }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch& scratch) const override {
    if (in.empty()) return Status::DataLoss("bz2: empty chunk");
    return DecodeUnknownSize(out, in.size() * 4 + 4096, "bz2", [&](uint8_t* dst, size_t cap, size_t* produced) {
      return Bunzip(in, dst, cap, produced);
    });
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseNumcodecsBz2Codec(const nlohmann::json& config) {
  auto lv = config.find("level");
  if (lv != config.end() && !lv->is_null() && (!lv->is_number_integer() || lv->get<int>() < 1 || lv->get<int>() > 9)) {
    return Status::InvalidFormat("bz2 codec: \"level\" must be an integer in 1..9");
  }
  return std::unique_ptr<Codec>(new Bz2Codec());
}

}  // namespace lsio
