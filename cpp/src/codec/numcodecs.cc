// numcodecs' byte formats as bytes -> bytes codecs: the Zarr v2 `lz4` compressor and the
// `shuffle` and `delta` filters (zarr/metadata_v2.cc maps them here), also reachable from v3
// metadata as zarr-python's numcodecs.zarr3 names `numcodecs.lz4` and `numcodecs.shuffle`
// (bytes -> bytes there too).
//
// v2 filters work on the chunk's bytes in the stored byte order (numcodecs sees the raw
// buffer), which is where a bytes -> bytes codec sits in the chain: after the compressor is
// undone and before `bytes` swaps to native order. So `delta` is one here too, under the
// internal name `lsio.v2.delta` (numcodecs.zarr3's Delta is array -> array, on native-order
// elements, and is not this codec).
//
// Formats (numcodecs 0.13-0.16):
//   lz4:     4-byte little-endian decoded size, then one raw LZ4 block (LZ4_compress_fast).
//   shuffle: byte planes: decoded[i * E + j] = encoded[j * n + i], n = size / E (E <= 1: copy).
//   delta:   elements of `dtype` (with its byte order): encoded[0] = x[0],
//            encoded[i] = x[i] - x[i-1]; decoded by a running sum in `dtype` (np.cumsum),
//            integers wrapping around as numpy's do. float16 sums as numpy's half loops do:
//            each step adds the two values as float32 and rounds the sum to float16
//            (numpy/_core/src/umath/loops.c.src, HALF_add; cumsum is an accumulate, not a
//            reduce, so every partial sum is rounded), which lsio must match bit for bit.
// Also the lz4 block checks and decoder of staged reads (codec/numcodecs.h).
#include "codec/numcodecs.h"

#include <lz4.h>

#include <bit>
#include <cstring>
#include <optional>
#include <type_traits>
#include <utility>

#include "codec/registry.h"
#include "util/byte_shuffle.h"

namespace lsio {
namespace {

class Lz4Codec final : public BytesToBytesCodec {
 public:
  std::string name() const override { return "numcodecs.lz4"; }
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    // LZ4_compressBound: n + n/255 + 16, plus the 4-byte size header.
    return decoded + decoded / 255 + 16 + 4;
  }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    if (in.size() < 4) return Status::DataLoss("lz4: chunk shorter than its 4-byte size header");
    const uint64_t n = uint64_t{in[0]} | uint64_t{in[1]} << 8 | uint64_t{in[2]} << 16 | uint64_t{in[3]} << 24;
    if (n > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE) || in.size() - 4 > static_cast<uint64_t>(INT32_MAX)) {
      return Status::DataLoss("lz4: block of " + std::to_string(n) + " bytes is beyond LZ4's limits");
    }
    LSIO_ASSIGN_OR_RETURN(uint8_t * dst, DecodeDestination(out, n, "lz4"));
    // LZ4_decompress_safe never writes past dst + n, whatever the input.
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data() + 4), reinterpret_cast<char*>(dst),
                                        static_cast<int>(in.size() - 4), static_cast<int>(n));
    if (got < 0) return Status::DataLoss("lz4: corrupt block");
    if (static_cast<uint64_t>(got) != n) {
      return Status::DataLoss("lz4: block decodes to " + std::to_string(got) + " bytes, its header says " +
                              std::to_string(n));
    }
    out.result = {dst, static_cast<size_t>(n)};
    return Status::Ok();
  }
};

// numcodecs' shuffle refuses a buffer that is not whole elements; HDF5's shuffle filter
// (lsio.hdf5.shuffle, python/lsio/_hdf5.py) leaves the bytes after the last whole element in
// place: netCDF-C runs fletcher32 before shuffle, so an 8-byte type's chunks end in 4 bytes.
class ShuffleCodec final : public BytesToBytesCodec {
 public:
  ShuffleCodec(uint64_t elementsize, bool hdf5) : e_(elementsize), hdf5_(hdf5) {}
  std::string name() const override { return hdf5_ ? "lsio.hdf5.shuffle" : "numcodecs.shuffle"; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded; }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    LSIO_ASSIGN_OR_RETURN(uint8_t * dst, DecodeDestination(out, in.size(), "shuffle"));
    if (e_ <= 1) {
      std::memcpy(dst, in.data(), in.size());
    } else {
      if (!hdf5_ && in.size() % e_ != 0) {
        return Status::DataLoss("shuffle: " + std::to_string(in.size()) + " bytes are not a whole number of " +
                                std::to_string(e_) + "-byte elements");
      }
      UnshuffleBytes(dst, in.data(), in.size(), static_cast<size_t>(e_));
    }
    out.result = {dst, in.size()};
    return Status::Ok();
  }

 private:
  uint64_t e_;
  bool hdf5_;
};

template <typename T>
T Load(const uint8_t* p, bool swap) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  if (swap) for (size_t k = 0; k < sizeof(T) / 2; ++k) std::swap(b[k], b[sizeof(T) - 1 - k]);
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

template <typename T>
void Store(uint8_t* p, T v, bool swap) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  if (swap) for (size_t k = 0; k < sizeof(T) / 2; ++k) std::swap(b[k], b[sizeof(T) - 1 - k]);
  std::memcpy(p, b, sizeof(T));
}

// The running sum over `n` elements of T; integers in their unsigned type (wrap-around, no UB).
template <typename T, bool = std::is_integral_v<T>>
struct Accumulator {
  using type = T;  // floats: summed in their own type, as np.cumsum
};
template <typename T>
struct Accumulator<T, true> {
  using type = std::make_unsigned_t<T>;  // integers: wrap around without UB
};

template <typename T>
void UndoDelta(const uint8_t* in, uint8_t* out, uint64_t n, bool swap) {
  using Acc = typename Accumulator<T>::type;
  Acc sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const Acc d = static_cast<Acc>(Load<T>(in + i * sizeof(T), swap));
    sum = i == 0 ? d : static_cast<Acc>(sum + d);
    Store<T>(out + i * sizeof(T), static_cast<T>(sum), swap);
  }
}

// IEEE binary16 <-> binary32, written out because C++20 has no portable float16: the widening
// is exact; the narrowing rounds to nearest, ties to even, overflows to infinity and keeps a
// NaN a NaN (its top payload bits, at least one set), as numpy's npy_float_to_half.
float HalfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | man << 13);
  if (exp == 0) {
    const float v = static_cast<float>(man) * 0x1p-24f;  // zero or subnormal: exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | (exp + 112) << 23 | man << 13);  // rebias 15 -> 127
}

uint16_t FloatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // infinity or NaN
    if (a == 0x7f800000u) return sign | 0x7c00u;
    const uint16_t payload = static_cast<uint16_t>((a >> 13) & 0x3ffu);
    return sign | 0x7c00u | (payload ? payload : 1);
  }
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520: rounds past 65504 to infinity
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero) in units of 2^-24
    if (a <= 0x33000000u) return sign;  // <= 2^-25, which ties to the even zero
    const uint32_t man = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - (a >> 23);  // 14..24
    uint32_t q = man >> shift;
    const uint32_t rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1))) ++q;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((a >> 23) - 112) << 10 | ((a >> 13) & 0x3ffu);
  const uint32_t rest = a & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

// numpy's float16 a + b. NaN operands are decided here and not by the hardware add, whose
// choice between two NaNs depends on how the compiler orders the operands: numpy's x86-64
// wheels return b's NaN when b is one, else a's, quieted (its sum of two NaNs came out as the
// second one's in every combination tried). inf + -inf is left to the add, as in numpy.
uint16_t AddHalf(uint16_t a, uint16_t b) {
  constexpr uint16_t kQuiet = 0x0200;
  if (IsHalfNaN(b)) return b | kQuiet;
  if (IsHalfNaN(a)) return a | kQuiet;
  return FloatToHalf(HalfToFloat(a) + HalfToFloat(b));
}

// np.cumsum in float16: the first element as stored, then each partial sum rounded to float16.
void UndoDeltaHalf(const uint8_t* in, uint8_t* out, uint64_t n, bool swap) {
  uint16_t sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t d = Load<uint16_t>(in + i * 2, swap);
    sum = i == 0 ? d : AddHalf(sum, d);
    Store<uint16_t>(out + i * 2, sum, swap);
  }
}

class DeltaCodec final : public BytesToBytesCodec {
 public:
  DeltaCodec(char kind, size_t size, bool big, std::string dtype)
      : kind_(kind), size_(size), big_(big), dtype_(std::move(dtype)) {}
  std::string name() const override { return "delta"; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded; }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    if (in.size() % size_ != 0) {
      return Status::DataLoss("delta: " + std::to_string(in.size()) + " bytes are not a whole number of '" + dtype_ +
                              "' elements");
    }
    LSIO_ASSIGN_OR_RETURN(uint8_t * dst, DecodeDestination(out, in.size(), "delta"));
    const uint64_t n = in.size() / size_;
    const bool swap = big_ != (std::endian::native == std::endian::big);
    const uint8_t* src = in.data();
    switch (kind_ * 16 + static_cast<int>(size_)) {
      case 'i' * 16 + 1: UndoDelta<int8_t>(src, dst, n, false); break;
      case 'i' * 16 + 2: UndoDelta<int16_t>(src, dst, n, swap); break;
      case 'i' * 16 + 4: UndoDelta<int32_t>(src, dst, n, swap); break;
      case 'i' * 16 + 8: UndoDelta<int64_t>(src, dst, n, swap); break;
      case 'u' * 16 + 1: UndoDelta<uint8_t>(src, dst, n, false); break;
      case 'u' * 16 + 2: UndoDelta<uint16_t>(src, dst, n, swap); break;
      case 'u' * 16 + 4: UndoDelta<uint32_t>(src, dst, n, swap); break;
      case 'u' * 16 + 8: UndoDelta<uint64_t>(src, dst, n, swap); break;
      case 'f' * 16 + 2: UndoDeltaHalf(src, dst, n, swap); break;
      case 'f' * 16 + 4: UndoDelta<float>(src, dst, n, swap); break;
      case 'f' * 16 + 8: UndoDelta<double>(src, dst, n, swap); break;
      default: return Status::Internal("delta: unexpected dtype " + dtype_);
    }
    out.result = {dst, in.size()};
    return Status::Ok();
  }

 private:
  char kind_;
  size_t size_;
  bool big_;
  std::string dtype_;
};

}  // namespace

bool Lz4GpuFrame(std::span<const uint8_t> in, uint64_t decoded, std::span<const uint8_t>* block) {
  if (in.size() < 5) return false;
  const uint64_t n = uint64_t{in[0]} | uint64_t{in[1]} << 8 | uint64_t{in[2]} << 16 | uint64_t{in[3]} << 24;
  // Within LZ4's own limits too, so that the CPU executor (Lz4DecodeBlock) can decode any
  // frame a GPU decoder is given.
  if (n != decoded || n > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE) || in.size() - 4 > static_cast<uint64_t>(INT32_MAX)) {
    return false;
  }
  *block = in.subspan(4);
  return true;
}

Status Lz4DecodeBlock(std::span<const uint8_t> in, std::span<uint8_t> out) {
  if (in.size() > static_cast<uint64_t>(INT32_MAX) || out.size() > static_cast<uint64_t>(LZ4_MAX_INPUT_SIZE)) {
    return Status::DataLoss("lz4: block of " + std::to_string(in.size()) + " -> " + std::to_string(out.size()) +
                            " bytes is beyond LZ4's limits");
  }
  // LZ4_decompress_safe never writes past out.size(), whatever the input, and fails on a
  // block that would.
  const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(in.data()), reinterpret_cast<char*>(out.data()),
                                      static_cast<int>(in.size()), static_cast<int>(out.size()));
  if (got < 0) return Status::DataLoss("lz4: corrupt block");
  if (static_cast<uint64_t>(got) != out.size()) {
    return Status::DataLoss("lz4: block decodes to " + std::to_string(got) + " bytes, expected " +
                            std::to_string(out.size()));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Codec>> ParseNumcodecsLz4Codec(const nlohmann::json& config) {
  auto a = config.find("acceleration");
  if (a != config.end() && !a->is_number_integer()) {
    return Status::InvalidFormat("lz4 codec: \"acceleration\" must be an integer");
  }
  return std::unique_ptr<Codec>(new Lz4Codec());
}

namespace {

Result<std::unique_ptr<Codec>> ParseShuffle(const nlohmann::json& config, bool hdf5) {
  auto e = config.find("elementsize");
  int64_t size = 4;  // numcodecs' default
  if (e != config.end()) {
    if (!e->is_number_integer() || e->get<int64_t>() < 0 || e->get<int64_t>() > (1 << 20)) {
      return Status::InvalidFormat("shuffle codec: \"elementsize\" must be an integer in 0..2^20");
    }
    size = e->get<int64_t>();
  }
  return std::unique_ptr<Codec>(new ShuffleCodec(static_cast<uint64_t>(size), hdf5));
}

}  // namespace

Result<std::unique_ptr<Codec>> ParseNumcodecsShuffleCodec(const nlohmann::json& config) {
  return ParseShuffle(config, false);
}

Result<std::unique_ptr<Codec>> ParseHdf5ShuffleCodec(const nlohmann::json& config) {
  return ParseShuffle(config, true);
}

Result<std::unique_ptr<Codec>> ParseV2DeltaCodec(const nlohmann::json& config) {
  auto d = config.find("dtype");
  if (d == config.end() || !d->is_string()) return Status::InvalidFormat("delta filter: \"dtype\" must be a string");
  const std::string dtype = d->get<std::string>();
  if (auto a = config.find("astype"); a != config.end() && !a->is_null() && *a != *d) {
    return Status::Unimplemented("delta filter with astype '" + (a->is_string() ? a->get<std::string>() : a->dump()) +
                                 "' other than its dtype '" + dtype + "' is not supported by lsio yet");
  }
  if (dtype.size() < 3 || (dtype[0] != '<' && dtype[0] != '>' && dtype[0] != '|') ||
      (dtype[1] != 'i' && dtype[1] != 'u' && dtype[1] != 'f')) {
    return Status::Unimplemented("delta filter of dtype '" + dtype + "' is not supported by lsio yet");
  }
  const std::string size = dtype.substr(2);
  if (size != "1" && size != "2" && size != "4" && size != "8") {
    return Status::Unimplemented("delta filter of dtype '" + dtype + "' is not supported by lsio yet");
  }
  if (dtype[1] == 'f' && size == "1") {
    return Status::Unimplemented("delta filter of dtype '" + dtype + "' is not supported by lsio yet");
  }
  return std::unique_ptr<Codec>(new DeltaCodec(dtype[1], std::stoul(size), dtype[0] == '>', dtype));
}

}  // namespace lsio
