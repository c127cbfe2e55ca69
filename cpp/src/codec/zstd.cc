// `zstd` codec (bytes -> bytes) and its per-thread decompression context.
//
// Frames normally record their content size and decode in one shot straight into the
// destination. Frames without a content size (older TensorStore) and concatenated frames
// take the streaming path, still into the same destination, bounded by its size. A content
// checksum, when present, is verified by libzstd.
#include "codec/zstd.h"

#include <zstd.h>

#include <algorithm>

#include "codec/registry.h"

namespace lsio {
namespace {

// The thread's decompression context: created once, reset per frame by libzstd.
struct ZstdScratch final : CodecScratch {
  static constexpr ScratchSlot kSlot = ScratchSlot::kZstd;
  ~ZstdScratch() override { ZSTD_freeDCtx(dctx); }
  ZSTD_DCtx* dctx = nullptr;
};

ZSTD_DCtx* GetDctx(DecodeScratch& s) {
  ZstdScratch* z = s.Get<ZstdScratch>();
  if (z == nullptr) return nullptr;
  if (z->dctx == nullptr) z->dctx = ZSTD_createDCtx();
  return z->dctx;
}

Status ZstdError(const char* what, size_t code) {
  return Status::DataLoss(std::string("zstd: ") + what + ": " + ZSTD_getErrorName(code));
}

// Streaming decode into [dst, dst+cap). *produced > cap means the data decodes to more than
// cap bytes (found with a one-byte probe once the destination is full).
Status StreamInto(ZSTD_DCtx* dctx, std::span<const uint8_t> in, uint8_t* dst, size_t cap,
                  size_t* produced) {
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  ZSTD_outBuffer ob{dst, cap, 0};
  for (;;) {
    const size_t in_before = ib.pos;
    const size_t out_before = ob.pos;
    size_t ret;
    if (ob.pos < ob.size) {
      ret = ZSTD_decompressStream(dctx, &ob, &ib);
    } else {
      uint8_t probe;
      ZSTD_outBuffer pb{&probe, 1, 0};
      ret = ZSTD_decompressStream(dctx, &pb, &ib);
      if (!ZSTD_isError(ret) && pb.pos > 0) {
        *produced = cap + 1;
        return Status::Ok();
      }
    }
    if (ZSTD_isError(ret)) return ZstdError("corrupt data", ret);
    if (ret == 0 && ib.pos == ib.size) {  // every frame decoded and flushed
      *produced = ob.pos;
      return Status::Ok();
    }
    if (ib.pos == in_before && ob.pos == out_before) {
      return Status::DataLoss(ib.pos == ib.size ? "zstd: truncated frame"
                                                : "zstd: decoder made no progress");
    }
  }
}

class ZstdCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "zstd"; }
  // One frame's worst case, plus slack for writers that split data into several frames or
  // blocks (3 bytes a block, up to 18 bytes of header and 4 of checksum a frame) or add
  // skippable frames.
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    return ZSTD_compressBound(static_cast<size_t>(decoded)) + decoded / 128 + 4096;
  }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                     DecodeScratch& scratch) const override {
    ZSTD_DCtx* dctx = GetDctx(scratch);
    if (dctx == nullptr) return Status::ResourceExhausted("zstd: cannot allocate a context");
    const unsigned long long cs = ZSTD_getFrameContentSize(in.data(), in.size());
    if (cs == ZSTD_CONTENTSIZE_ERROR) return Status::DataLoss("zstd: not a zstd frame");
    if (out.fixed != nullptr) {
      if (cs == out.size) {
        const size_t r = ZSTD_decompressDCtx(dctx, out.fixed, out.size, in.data(), in.size());
        if (ZSTD_isError(r)) return ZstdError("corrupt data", r);
        if (r != out.size) return WrongSize(r, out.size);
      } else if (cs != ZSTD_CONTENTSIZE_UNKNOWN && ZSTD_findFrameCompressedSize(in.data(), in.size()) == in.size()) {
        // A single frame that says it holds a different amount of data.
        return WrongSize(cs, out.size);
      } else {
        size_t produced = 0;
        LSIO_RETURN_IF_ERROR(StreamInto(dctx, in, out.fixed, out.size, &produced));
        if (produced != out.size) return WrongSize(produced, out.size);
      }
      out.result = {out.fixed, out.size};
      return Status::Ok();
    }
    // Unknown decoded size: grow a scratch buffer, never past out.limit (a frame header may
    // claim any content size).
    if (cs != ZSTD_CONTENTSIZE_UNKNOWN && cs > out.limit) return TooLarge(std::to_string(cs), out.limit);
    size_t cap = cs != ZSTD_CONTENTSIZE_UNKNOWN ? static_cast<size_t>(cs)
                                                : static_cast<size_t>(std::min<uint64_t>(in.size() * 4 + 4096, out.limit));
    for (;;) {
      if (!out.grow->Reserve(cap)) return Status::ResourceExhausted("zstd: out of memory");
      size_t produced = 0;
      LSIO_RETURN_IF_ERROR(StreamInto(dctx, in, out.grow->data(), cap, &produced));
      if (produced <= cap) {
        out.result = {out.grow->data(), produced};
        return Status::Ok();
      }
      if (cap >= out.limit) return TooLarge("more than " + std::to_string(cap), out.limit);
      // At least 4 KiB more: a first frame that says it holds 0 bytes (more frames follow)
      // would otherwise leave cap at 0 forever.
      cap = static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(static_cast<uint64_t>(cap) * 2, 4096), out.limit));
    }
  }

 private:
  static Status WrongSize(uint64_t got, uint64_t want) {
    return Status::DataLoss("zstd: chunk decodes to " + std::to_string(got) + " bytes, expected " +
                            std::to_string(want));
  }
  static Status TooLarge(const std::string& got, uint64_t limit) {
    return Status::DataLoss("zstd: frame decodes to " + got + " bytes, more than the " + std::to_string(limit) +
                            " the codecs below it can store for the chunk");
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseZstdCodec(const nlohmann::json& config) {
  auto lv = config.find("level");
  if (lv != config.end() && !lv->is_number_integer()) {
    return Status::InvalidFormat("zstd codec: \"level\" must be an integer");
  }
  auto ck = config.find("checksum");
  if (ck != config.end() && !ck->is_boolean()) {
    return Status::InvalidFormat("zstd codec: \"checksum\" must be a boolean");
  }
  return std::unique_ptr<Codec>(new ZstdCodec());
}

bool ZstdGpuDecodable(std::span<const uint8_t> in, uint64_t decoded) {
  // Magic 0xFD2FB528 (little endian), then the frame header descriptor, whose bit 2 says a
  // content checksum ends the frame.
  if (in.size() < 5 || in[0] != 0x28 || in[1] != 0xB5 || in[2] != 0x2F || in[3] != 0xFD || (in[4] & 0x04) != 0) {
    return false;
  }
  const unsigned long long cs = ZSTD_getFrameContentSize(in.data(), in.size());
  if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN || cs != decoded) return false;
  const size_t frame = ZSTD_findFrameCompressedSize(in.data(), in.size());
  return !ZSTD_isError(frame) && frame == in.size();
}

Status ZstdDecodeFrame(std::span<const uint8_t> in, std::span<uint8_t> out) {
  const size_t r = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
  if (ZSTD_isError(r)) return ZstdError("corrupt data", r);
  if (r != out.size()) {
    return Status::DataLoss("zstd: frame holds " + std::to_string(r) + " bytes, expected " + std::to_string(out.size()));
  }
  return Status::Ok();
}

}  // namespace lsio
