// `gzip` codec (bytes -> bytes). A chunk of known decoded size is inflated by libdeflate
// (1.8x zlib's inflate on W11's shuffled float chunks), member by member; everything else,
// and whatever libdeflate refuses, by zlib, whose windowBits 15+32 accepts gzip and zlib
// wrappers alike and whose messages name what is wrong; several concatenated gzip members
// are decoded one after the other.
// Also the gzip member parsing and raw inflate of staged reads (codec/gzip.h).
#include "codec/gzip.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>

#include "codec/registry.h"

namespace lsio {
namespace {

// The thread's inflate stream: initialised once, reset per chunk (InflateInto). It stays at
// one address, as zlib's state points back to it.
struct GzipScratch final : CodecScratch {
  static constexpr ScratchSlot kSlot = ScratchSlot::kGzip;
  ~GzipScratch() override {
    if (ready) inflateEnd(&stream);
    if (fast != nullptr) libdeflate_free_decompressor(fast);
  }
  z_stream stream{};
  bool ready = false;
  libdeflate_decompressor* fast = nullptr;
};

// Inflates all of `in` (gzip members, or one zlib stream) into exactly [dst, dst + size)
// with libdeflate, checksums verified; false for anything else (then zlib decodes, or says
// what is wrong).
bool FastInflate(GzipScratch* g, std::span<const uint8_t> in, uint8_t* dst, size_t size) {
  if (g->fast == nullptr) g->fast = libdeflate_alloc_decompressor();
  if (g->fast == nullptr || in.size() < 2) return false;
  size_t in_pos = 0, out_pos = 0;
  if (in[0] == 0x1f && in[1] == 0x8b) {
    while (in_pos < in.size()) {
      size_t used = 0, made = 0;
      if (libdeflate_gzip_decompress_ex(g->fast, in.data() + in_pos, in.size() - in_pos, dst + out_pos,
                                        size - out_pos, &used, &made) != LIBDEFLATE_SUCCESS || used == 0) {
        return false;
      }
      in_pos += used;
      out_pos += made;
    }
    return out_pos == size;
  }
  // RFC 1950: deflate (CM 8), a window of at most 32 KiB, FCHECK, and no preset dictionary.
  if ((in[0] & 0x0f) != 8 || (in[0] >> 4) > 7 || ((in[0] << 8) | in[1]) % 31 != 0 || (in[1] & 0x20) != 0) {
    return false;
  }
  size_t used = 0, made = 0;
  return libdeflate_zlib_decompress_ex(g->fast, in.data(), in.size(), dst, size, &used, &made) ==
             LIBDEFLATE_SUCCESS &&
         used == in.size() && made == size;
}

z_stream* GetStream(DecodeScratch& s) {
  GzipScratch* g = s.Get<GzipScratch>();
  if (g == nullptr) return nullptr;
  if (!g->ready) {
    if (inflateInit2(&g->stream, 15 + 32) != Z_OK) return nullptr;
    g->ready = true;
  }
  return &g->stream;
}

Status ZlibError(const z_stream* zs, int code) {
  std::string m = "gzip: corrupt data";
  if (zs->msg != nullptr) m += std::string(": ") + zs->msg;
  else m += " (zlib error " + std::to_string(code) + ")";
  return Status::DataLoss(m);
}

// Inflates all of `in` into [dst, dst+cap). *produced > cap means the data is larger.
Status InflateInto(z_stream* zs, std::span<const uint8_t> in, uint8_t* dst, size_t cap,
                   size_t* produced) {
  inflateReset2(zs, 15 + 32);
  zs->next_in = const_cast<Bytef*>(in.data());
  zs->avail_in = static_cast<uInt>(in.size());
  size_t out_pos = 0;
  uint8_t overflow_probe;
  for (;;) {
    const bool full = out_pos >= cap;
    zs->next_out = full ? &overflow_probe : dst + out_pos;
    zs->avail_out = full ? 1 : static_cast<uInt>(std::min<size_t>(cap - out_pos, 1u << 30));
    const uInt avail_before = zs->avail_out;
    const int r = inflate(zs, Z_NO_FLUSH);
    out_pos += avail_before - zs->avail_out;
    if (full && zs->avail_out == 0) {
      *produced = cap + 1;
      return Status::Ok();
    }
    if (r == Z_STREAM_END) {
      if (zs->avail_in == 0) break;
      inflateReset2(zs, 15 + 32);  // another gzip member follows
      continue;
    }
    if (r == Z_BUF_ERROR && zs->avail_in == 0) return Status::DataLoss("gzip: truncated stream");
    if (r != Z_OK && r != Z_BUF_ERROR) return ZlibError(zs, r);
  }
  *produced = out_pos;
  return Status::Ok();
}

class GzipCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "gzip"; }
  // Deflate's worst case is stored blocks (5 bytes per 64 KiB); a member header may carry
  // up to 64 KiB of extra field plus a name and comment, and writers may emit several
  // members or flush often: n/64 + 128 KiB covers all of that generously.
  uint64_t MaxEncodedSize(uint64_t decoded) const override { return decoded + decoded / 64 + (128u << 10); }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                     DecodeScratch& scratch) const override {
    z_stream* zs = GetStream(scratch);
    if (zs == nullptr) return Status::ResourceExhausted("gzip: cannot allocate a zlib stream");
    if (in.size() > (1ull << 31)) return Status::Unimplemented("gzip: chunks over 2 GiB");
    if (out.fixed != nullptr && FastInflate(scratch.Get<GzipScratch>(), in, out.fixed, out.size)) {
      out.result = {out.fixed, out.size};
      return Status::Ok();
    }
    // zlib's streaming inflate: corrupt or mis-sized data (named precisely), or an unknown size.
    return DecodeUnknownSize(out, in.size() * 4 + 4096, "gzip", [&](uint8_t* dst, size_t cap, size_t* produced) {
      return InflateInto(zs, in, dst, cap, produced);
    });
  }
};

}  // namespace

namespace {

uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// zlib's crc32 takes uInt lengths: chunks over 4 GiB are summed in pieces.
uLong Crc32Of(std::span<const uint8_t> b) {
  uLong c = crc32(0L, Z_NULL, 0);
  for (size_t at = 0; at < b.size();) {
    const uInt n = static_cast<uInt>(std::min<size_t>(b.size() - at, 1u << 30));
    c = crc32(c, b.data() + at, n);
    at += n;
  }
  return c;
}

}  // namespace

bool GzipGpuFrame(std::span<const uint8_t> in, uint64_t decoded, std::span<const uint8_t>* body, uint32_t* crc) {
  // RFC 1952: ID1 ID2 CM FLG MTIME(4) XFL OS, then the optional fields FLG announces.
  constexpr uint8_t kFhcrc = 0x02, kFextra = 0x04, kFname = 0x08, kFcomment = 0x10;
  const size_t size = in.size();
  if (decoded > UINT32_MAX || size < 10 + 1 + 8) return false;
  if (in[0] != 0x1f || in[1] != 0x8b || in[2] != 8 || (in[3] & 0xE0) != 0) return false;
  const uint8_t flg = in[3];
  const size_t end = size - 8;  // the trailer: CRC-32, ISIZE
  size_t pos = 10;
  if (flg & kFextra) {
    if (end - pos < 2) return false;
    const size_t xlen = size_t{in[pos]} | size_t{in[pos + 1]} << 8;
    pos += 2;
    if (end - pos < xlen) return false;
    pos += xlen;
  }
  for (const uint8_t field : {kFname, kFcomment}) {  // zero-terminated strings
    if ((flg & field) == 0) continue;
    while (pos < end && in[pos] != 0) ++pos;
    if (pos == end) return false;
    ++pos;
  }
  if (flg & kFhcrc) {
    // zlib checks the header's CRC-16 when the CPU inflates; the GPU never sees the header.
    if (end - pos < 2) return false;
    const uint32_t want = uint32_t{in[pos]} | uint32_t{in[pos + 1]} << 8;
    if ((Crc32Of(in.first(pos)) & 0xffff) != want) return false;
    pos += 2;
  }
  if (pos >= end) return false;  // no deflate stream at all
  if (Le32(in.data() + size - 4) != decoded) return false;
  *body = in.subspan(pos, end - pos);
  *crc = Le32(in.data() + end);
  return true;
}

Status InflateRawFrame(std::span<const uint8_t> in, std::span<uint8_t> out, int64_t check) {
  z_stream zs{};
  if (inflateInit2(&zs, -15) != Z_OK) return Status::ResourceExhausted("deflate: cannot allocate a zlib stream");
  size_t in_pos = 0, out_pos = 0;
  uint8_t probe;
  Status st = Status::Ok();
  for (;;) {
    const bool full = out_pos == out.size();
    zs.next_in = const_cast<Bytef*>(in.data() + in_pos);
    zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size() - in_pos, 1u << 30));
    zs.next_out = full ? &probe : out.data() + out_pos;
    zs.avail_out = full ? 1 : static_cast<uInt>(std::min<size_t>(out.size() - out_pos, 1u << 30));
    const uInt in_before = zs.avail_in, out_before = zs.avail_out;
    const int r = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_before - zs.avail_in;
    const size_t produced = out_before - zs.avail_out;
    if (full && produced > 0) {
      st = Status::DataLoss("deflate: frame decodes to more than " + std::to_string(out.size()) + " bytes");
      break;
    }
    out_pos += produced;
    if (r == Z_STREAM_END) {
      if (in_pos != in.size()) {
        st = Status::DataLoss("deflate: " + std::to_string(in.size() - in_pos) + " bytes after the final block");
      } else if (out_pos != out.size()) {
        st = Status::DataLoss("deflate: frame decodes to " + std::to_string(out_pos) + " bytes, expected " +
                              std::to_string(out.size()));
      }
      break;
    }
    if (r == Z_OK) continue;
    if (r == Z_BUF_ERROR && in_pos == in.size()) {
      st = Status::DataLoss("deflate: truncated stream");
    } else {
      st = Status::DataLoss(std::string("deflate: corrupt data") + (zs.msg != nullptr ? std::string(": ") + zs.msg : ""));
    }
    break;
  }
  inflateEnd(&zs);
  if (!st.ok() || check < 0) return st;
  if (Crc32Of(out) != static_cast<uLong>(check)) return Status::DataLoss("gzip: CRC-32 mismatch");
  return Status::Ok();
}

Result<std::unique_ptr<Codec>> ParseGzipCodec(const nlohmann::json& config) {
  auto lv = config.find("level");
  if (lv != config.end()) {
    if (!lv->is_number_integer() || lv->get<int>() < 0 || lv->get<int>() > 9) {
      return Status::InvalidFormat("gzip codec: \"level\" must be an integer in 0..9");
    }
  }
  return std::unique_ptr<Codec>(new GzipCodec());
}

}  // namespace lsio
