// HDF5's LZ4 filter (filter id 32004, hdf5plugin's and HDF Group's registered "LZ4" filter) as
// a bytes -> bytes codec, decode side, under the internal name `lsio.hdf5.lz4` (python/lsio/
// _hdf5.py gives it to datasets stored with that filter). Decoded with liblz4.
//
// Format (the filter's H5Z_filter_lz4, all integers big-endian):
//   8 bytes  the decoded size S
//   4 bytes  the block size B (the last block holds the rest: S - B * (blocks - 1))
//   then per block: 4 bytes its stored size C, then C bytes: an LZ4 block, or the block's
//   bytes as they are when C equals the block's decoded size (it did not compress).
// blocks = ceil(S / B); a B larger than S means one block of S.
#include <lz4.h>

#include <cstring>

#include "codec/codec.h"
#include "codec/registry.h"

namespace lsio {
namespace {

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

class Hdf5Lz4Codec final : public BytesToBytesCodec {
 public:
  explicit Hdf5Lz4Codec(uint64_t block) : block_(block) {}
  std::string name() const override { return "lsio.hdf5.lz4"; }
  // A block that does not shrink is stored as it is: the data, the header, a size per block.
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    return decoded + 12 + 4 * ((decoded + block_ - 1) / block_ + 1);
  }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    if (in.size() < 12) return Status::DataLoss("hdf5 lz4: chunk shorter than its 12-byte header");
    const uint64_t total = Be(in.data(), 8);
    uint64_t block = Be(in.data() + 8, 4);
    LSIO_ASSIGN_OR_RETURN(uint8_t * dst, DecodeDestination(out, total, "hdf5 lz4"));
    if (total > 0 && block == 0) return Status::DataLoss("hdf5 lz4: block size 0");
    if (block > total) block = total;
    size_t pos = 12;
    uint64_t done = 0;
    while (done < total) {
      const uint64_t want = std::min<uint64_t>(block, total - done);
      if (in.size() - pos < 4) return Status::DataLoss("hdf5 lz4: chunk ends inside a block header");
      const uint64_t stored = Be(in.data() + pos, 4);
      pos += 4;
      if (stored > in.size() - pos) {
        return Status::DataLoss("hdf5 lz4: a block of " + std::to_string(stored) + " bytes runs past the chunk's end");
      }
      if (stored == want) {
        std::memcpy(dst + done, in.data() + pos, static_cast<size_t>(want));
      } else {
        if (want > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE)) {
          return Status::DataLoss("hdf5 lz4: block of " + std::to_string(want) + " bytes is beyond LZ4's limits");
        }
        // LZ4_decompress_safe never writes past dst + done + want, whatever the input.
        const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + pos),
                                            reinterpret_cast<char*>(dst + done), static_cast<int>(stored),
                                            static_cast<int>(want));
        if (got < 0 || static_cast<uint64_t>(got) != want) {
          return Status::DataLoss("hdf5 lz4: corrupt block at byte " + std::to_string(pos - 4));
        }
      }
      pos += static_cast<size_t>(stored);
      done += want;
    }
    out.result = {dst, static_cast<size_t>(total)};
    return Status::Ok();
  }

 private:
  uint64_t block_;  // the filter's block size (bounds the stored size)
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseHdf5Lz4Codec(const nlohmann::json& config) {
  // "blocksize": the filter's parameter (0: its default, 1 GiB). Every chunk's header says
  // it again; this one only bounds how large a stored chunk may be.
  uint64_t block = uint64_t{1} << 30;
  if (auto b = config.find("blocksize"); b != config.end()) {
    if (!b->is_number_unsigned()) return Status::InvalidFormat("lsio.hdf5.lz4: \"blocksize\" must be an integer >= 0");
    if (b->get<uint64_t>() > 0) block = b->get<uint64_t>();
  }
  return std::unique_ptr<Codec>(new Hdf5Lz4Codec(block));
}

}  // namespace lsio
