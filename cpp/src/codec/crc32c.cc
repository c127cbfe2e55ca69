// The `crc32c` codec (the checksum itself is util/crc32c.h).
#include <cstdio>
#include <cstring>

#include "codec/registry.h"

namespace lsio {
namespace {

class Crc32cCodec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "crc32c"; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded + 4; }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out,
                     DecodeScratch& scratch) const override {
    if (in.size() < 4) return Status::DataLoss("crc32c: chunk shorter than its 4-byte checksum");
    const size_t n = in.size() - 4;
    uint32_t stored;
    std::memcpy(&stored, in.data() + n, 4);  // little endian on the hosts lsio supports
    const uint32_t computed = Crc32c(in.data(), n);
    if (stored != computed) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "crc32c checksum mismatch (stored 0x%08x, computed 0x%08x)",
                    stored, computed);
      return Status::DataLoss(buf);
    }
    out.result = in.first(n);
    return Status::Ok();
  }
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseCrc32cCodec(const nlohmann::json& config) {
  return std::unique_ptr<Codec>(new Crc32cCodec());
}

}  // namespace lsio
