// numcodecs' 32-bit checksum codecs (bytes -> bytes): `crc32` and `adler32` (zlib's, stored
// as 4 little-endian bytes before the data by default, `location` "end" after it) and
// `fletcher32` (HDF5's Fletcher-32 over 16-bit big-endian words, stored after the data).
// Zarr v2 writes them as filters or compressors, v3 as numcodecs.crc32 / .adler32 /
// .fletcher32. Decoding verifies and strips the checksum: a mismatch is kDataLoss.
#include <zlib.h>

#include <cstdio>
#include <cstring>

#include "codec/registry.h"

namespace lsio {
namespace {

enum class Sum { kCrc32, kAdler32, kFletcher32 };

// HDF5's H5_checksum_fletcher32 (what numcodecs.fletcher32 and h5py's filter compute):
// 16-bit words read big-endian, an odd last byte as the high byte of a word, sums folded
// every 360 words so they cannot overflow.
uint32_t Fletcher32(const uint8_t* data, size_t n) {
  size_t words = n / 2;
  uint32_t sum1 = 0, sum2 = 0;
  while (words > 0) {
    size_t t = words > 360 ? 360 : words;
    words -= t;
    do {
      sum1 += (static_cast<uint32_t>(data[0]) << 8) | data[1];
      data += 2;
      sum2 += sum1;
    } while (--t);
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  if (n % 2) {
    sum1 += static_cast<uint32_t>(*data) << 8;
    sum2 += sum1;
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  }
  sum1 = (sum1 & 0xffff) + (sum1 >> 16);
  sum2 = (sum2 & 0xffff) + (sum2 >> 16);
  return (sum2 << 16) | sum1;
}

uint32_t Compute(Sum sum, const uint8_t* data, size_t n) {
  switch (sum) {
    case Sum::kCrc32: {
      uLong c = crc32(0L, Z_NULL, 0);
      while (n > 0) {  // zlib takes uInt lengths
        const uInt k = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
        c = crc32(c, data, k);
        data += k;
        n -= k;
      }
      return static_cast<uint32_t>(c);
    }
    case Sum::kAdler32: {
      uLong a = adler32(0L, Z_NULL, 0);
      while (n > 0) {
        const uInt k = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
        a = adler32(a, data, k);
        data += k;
        n -= k;
      }
      return static_cast<uint32_t>(a);
    }
    case Sum::kFletcher32: return Fletcher32(data, n);
  }
  return 0;
}

class Checksum32Codec final : public BytesToBytesCodec {
 public:
  Checksum32Codec(Sum sum, std::string name, bool at_end, bool hdf5_reversed = false)
      : sum_(sum), name_(std::move(name)), at_end_(at_end), hdf5_reversed_(hdf5_reversed) {}
  std::string name() const override { return name_; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded + 4; }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch& scratch) const override {
    if (in.size() < 4) return Status::DataLoss(name_ + ": chunk shorter than its 4-byte checksum");
    const size_t n = in.size() - 4;
    const uint8_t* payload = at_end_ ? in.data() : in.data() + 4;
    uint32_t stored;
    std::memcpy(&stored, at_end_ ? in.data() + n : in.data(), 4);  // little endian on lsio's hosts
    const uint32_t computed = Compute(sum_, payload, n);
    // HDF5 before 1.6.3 stored Fletcher-32 with the bytes of each 16-bit half swapped on
    // little-endian hosts; HDF5's filter accepts that form too (H5Zfletcher32.c).
    const uint32_t reversed = ((computed & 0x00FF00FFu) << 8) | ((computed >> 8) & 0x00FF00FFu);
    if (stored != computed && !(hdf5_reversed_ && stored == reversed)) {
      char buf[112];
      std::snprintf(buf, sizeof buf, "%s checksum mismatch (stored 0x%08x, computed 0x%08x)", name_.c_str(), stored,
                    computed);
      return Status::DataLoss(buf);
    }
    out.result = std::span<const uint8_t>(payload, n);
    return Status::Ok();
  }

 private:
  Sum sum_;
  std::string name_;
  bool at_end_;
  bool hdf5_reversed_;
};

Result<std::unique_ptr<Codec>> Parse(Sum sum, const char* name, bool default_end, const nlohmann::json& config) {
  bool at_end = default_end;
  auto loc = config.find("location");
  if (loc != config.end() && !loc->is_null()) {
    if (!loc->is_string() || (*loc != "start" && *loc != "end")) {
      return Status::InvalidFormat(std::string(name) + " codec: \"location\" must be \"start\" or \"end\"");
    }
    at_end = *loc == "end";
  }
  return std::unique_ptr<Codec>(new Checksum32Codec(sum, name, at_end));
}

}  // namespace

Result<std::unique_ptr<Codec>> ParseNumcodecsCrc32Codec(const nlohmann::json& config) {
  return Parse(Sum::kCrc32, "crc32", /*default_end=*/false, config);
}
Result<std::unique_ptr<Codec>> ParseNumcodecsAdler32Codec(const nlohmann::json& config) {
  return Parse(Sum::kAdler32, "adler32", /*default_end=*/false, config);
}
Result<std::unique_ptr<Codec>> ParseNumcodecsFletcher32Codec(const nlohmann::json& config) {
  // Always at the end (numcodecs takes no location for it).
  return std::unique_ptr<Codec>(new Checksum32Codec(Sum::kFletcher32, "fletcher32", /*at_end=*/true));
}
Result<std::unique_ptr<Codec>> ParseHdf5Fletcher32Codec(const nlohmann::json& config) {
  return std::unique_ptr<Codec>(
      new Checksum32Codec(Sum::kFletcher32, "fletcher32", /*at_end=*/true, /*hdf5_reversed=*/true));
}

}  // namespace lsio
