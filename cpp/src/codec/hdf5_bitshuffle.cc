// HDF5's bitshuffle filter (filter id 32008, hdf5plugin's "Bitshuffle"), optionally with LZ4 or
// zstd per block, as a bytes -> bytes codec, decode side, under the internal name
// `lsio.hdf5.bitshuffle` (python/lsio/_hdf5.py gives it to datasets stored with that filter).
// No C library of bitshuffle is packaged (Debian has it only inside a Python module), so the
// bit transpose is lsio's own; the block codecs are liblz4 and libzstd.
//
// The transform: the data is cut into blocks of `block` elements of `elementsize` bytes (the
// last block holds the rest rounded down to a multiple of 8 elements; the final rest of
// fewer than 8 elements is stored as it is). Within a block of n elements, bit k (LSB 0) of
// byte j of element i is stored at bit (i % 8) of byte (8 j + k) * n / 8 + i / 8: one row of
// n bits for each of the element's 8 * elementsize bits.
//
// Framing (the filter's, integers big-endian):
//   "none":  the blocks' bytes, then the rest;  block = the configured one, or when 0
//            max(128, 8192 / elementsize rounded down to a multiple of 8);
//   "lz4" / "zstd": 8 bytes the decoded size S, 4 bytes the block size in bytes; then per
//            block 4 bytes its stored size C and C bytes: an LZ4 block / a zstd frame
//            decoding to the block; then the rest, as it is.
#include <lz4.h>
#include <zstd.h>

#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "codec/registry.h"

namespace lsio {
namespace {

enum class BlockCodec { kNone, kLz4, kZstd };

uint64_t Be(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

// Transposes the 8x8 bit matrix held in x (row r = byte r, column c = bit c): afterwards bit
// c of byte r is what bit r of byte c was. Three rounds of swaps: 1x1, 2x2, 4x4 sub-blocks.
uint64_t Transpose8x8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAULL;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCULL;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ULL;
  x ^= t ^ (t << 28);
  return x;
}

// Undoes the transform of one block of n elements (n % 8 == 0) of s bytes: for each group of
// 8 elements and each byte j, the 8 row bytes (8 j + k, k = 0..7) covering the group form
// an 8x8 bit matrix whose transpose holds byte j of the group's 8 elements.
void Unshuffle(const uint8_t* in, uint8_t* out, size_t n, size_t s) {
  const size_t row = n / 8;
  for (size_t g = 0; g < row; ++g) {
    uint8_t* group = out + 8 * g * s;
    for (size_t j = 0; j < s; ++j) {
      const uint8_t* col = in + 8 * j * row + g;
      uint64_t x = 0;
      for (int k = 0; k < 8; ++k) x |= uint64_t{col[static_cast<size_t>(k) * row]} << (8 * k);
      x = Transpose8x8(x);
      for (size_t t = 0; t < 8; ++t) group[t * s + j] = static_cast<uint8_t>(x >> (8 * t));
    }
  }
}

class Hdf5BitshuffleCodec final : public BytesToBytesCodec {
 public:
  Hdf5BitshuffleCodec(uint64_t elem, uint64_t block, BlockCodec codec) : elem_(elem), block_(block), codec_(codec) {}
  std::string name() const override { return "lsio.hdf5.bitshuffle"; }
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    if (codec_ == BlockCodec::kNone) return decoded;
    // Blocks of at least 8 elements: per block its 4-byte size and the codec's worst case.
    const uint64_t blocks = decoded / (8 * elem_) + 2;
    const uint64_t worst = codec_ == BlockCodec::kLz4 ? decoded + decoded / 255 + 16 * blocks
                                                      : ZSTD_compressBound(static_cast<size_t>(decoded)) + 32 * blocks;
    return 12 + worst + 4 * blocks;
  }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    uint64_t total = in.size();
    uint64_t block = block_;
    size_t pos = 0;
    if (codec_ != BlockCodec::kNone) {
      if (in.size() < 12) return Status::DataLoss("hdf5 bitshuffle: chunk shorter than its 12-byte header");
      total = Be(in.data(), 8);
      const uint64_t block_bytes = Be(in.data() + 8, 4);
      if (block_bytes == 0 || block_bytes % elem_ != 0 || (block_bytes / elem_) % 8 != 0) {
        return Status::DataLoss("hdf5 bitshuffle: block size of " + std::to_string(block_bytes) +
                                " bytes is not a multiple of 8 elements of " + std::to_string(elem_) + " bytes");
      }
      block = block_bytes / elem_;
      pos = 12;
    }
    if (total % elem_ != 0) {
      return Status::DataLoss("hdf5 bitshuffle: " + std::to_string(total) + " bytes are not whole elements of " +
                              std::to_string(elem_) + " bytes");
    }
    LSIO_ASSIGN_OR_RETURN(uint8_t * dst, DecodeDestination(out, total, "hdf5 bitshuffle"));
    const uint64_t n = total / elem_;
    std::vector<uint8_t> tmp;
    uint64_t done = 0;  // elements decoded
    const uint64_t whole = n - n % 8;
    while (done < whole) {
      const uint64_t count = std::min<uint64_t>(block, whole - done);  // a multiple of 8
      const uint64_t bytes = count * elem_;
      const uint8_t* shuffled = nullptr;
      if (codec_ == BlockCodec::kNone) {
        if (in.size() - pos < bytes) return Status::DataLoss("hdf5 bitshuffle: chunk ends inside a block");
        shuffled = in.data() + pos;
        pos += static_cast<size_t>(bytes);
      } else {
        if (in.size() - pos < 4) return Status::DataLoss("hdf5 bitshuffle: chunk ends inside a block header");
        const uint64_t stored = Be(in.data() + pos, 4);
        pos += 4;
        if (stored > in.size() - pos) {
          return Status::DataLoss("hdf5 bitshuffle: a block of " + std::to_string(stored) +
                                  " bytes runs past the chunk's end");
        }
        tmp.resize(static_cast<size_t>(bytes));
        bool ok = false;
        if (codec_ == BlockCodec::kLz4) {
          if (bytes <= static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE) && stored <= static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE)) {
            const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + pos),
                                                reinterpret_cast<char*>(tmp.data()), static_cast<int>(stored),
                                                static_cast<int>(bytes));
            ok = got >= 0 && static_cast<uint64_t>(got) == bytes;
          }
        } else {
          const size_t got = ZSTD_decompress(tmp.data(), tmp.size(), in.data() + pos, static_cast<size_t>(stored));
          ok = !ZSTD_isError(got) && got == bytes;
        }
        if (!ok) return Status::DataLoss("hdf5 bitshuffle: corrupt block at byte " + std::to_string(pos - 4));
        pos += static_cast<size_t>(stored);
        shuffled = tmp.data();
      }
      Unshuffle(shuffled, dst + done * elem_, static_cast<size_t>(count), static_cast<size_t>(elem_));
      done += count;
    }
    const uint64_t rest = (n - whole) * elem_;
    if (in.size() - pos != rest) {
      return Status::DataLoss("hdf5 bitshuffle: " + std::to_string(in.size() - pos) + " bytes after the blocks, expected " +
                              std::to_string(rest));
    }
    if (rest > 0) std::memcpy(dst + whole * elem_, in.data() + pos, static_cast<size_t>(rest));
    out.result = {dst, static_cast<size_t>(total)};
    return Status::Ok();
  }

 private:
  uint64_t elem_;
  uint64_t block_;  // elements per block ("none"; the others read it from each chunk)
  BlockCodec codec_;
};

}  // namespace

Result<std::unique_ptr<Codec>> ParseHdf5BitshuffleCodec(const nlohmann::json& config) {
  // "elementsize": bytes per element (> 0); "blocksize": elements per block, a multiple of 8
  // (0: the filter's default); "compression": "none", "lz4" or "zstd".
  const auto count = [&](const char* key, uint64_t dflt) -> Result<uint64_t> {
    auto it = config.find(key);
    if (it == config.end()) return dflt;
    if (!it->is_number_unsigned()) {
      return Status::InvalidFormat(std::string("lsio.hdf5.bitshuffle: \"") + key + "\" must be an integer >= 0");
    }
    return it->get<uint64_t>();
  };
  LSIO_ASSIGN_OR_RETURN(uint64_t elem, count("elementsize", 0));
  LSIO_ASSIGN_OR_RETURN(uint64_t block, count("blocksize", 0));
  if (elem == 0 || elem > (uint64_t{1} << 20)) {
    return Status::InvalidFormat("lsio.hdf5.bitshuffle: \"elementsize\" must be in 1..1048576");
  }
  if (block % 8 != 0) return Status::InvalidFormat("lsio.hdf5.bitshuffle: \"blocksize\" must be a multiple of 8");
  if (block == 0) block = std::max<uint64_t>(128, (8192 / elem) / 8 * 8);
  BlockCodec codec = BlockCodec::kNone;
  if (auto c = config.find("compression"); c != config.end()) {
    if (!c->is_string()) return Status::InvalidFormat("lsio.hdf5.bitshuffle: \"compression\" must be a string");
    const std::string v = c->get<std::string>();
    if (v == "lz4") codec = BlockCodec::kLz4;
    else if (v == "zstd") codec = BlockCodec::kZstd;
    else if (v != "none") return Status::InvalidFormat("lsio.hdf5.bitshuffle: unknown compression '" + v + "'");
  }
  return std::unique_ptr<Codec>(new Hdf5BitshuffleCodec(elem, block, codec));
}

}  // namespace lsio
