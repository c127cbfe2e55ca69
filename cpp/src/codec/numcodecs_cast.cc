// numcodecs' element-converting filters, decode side, as Zarr v2 writes them (filters see the
// chunk's bytes in the stored byte order, so each is a bytes -> bytes codec here, under an
// internal name lsio.v2.<id> that zarr/metadata_v2.cc maps the filter to):
//   fixedscaleoffset  stored `astype` elements e; decoded = (e / scale + offset) cast to `dtype`
//   quantize          stored `astype` elements (already rounded to `digits`); decoded = cast
//   bitround          stored `dtype` elements with low mantissa bits zeroed; decoded = as is
// Bit for bit as numpy computes numcodecs' decode: `enc / scale + offset` runs in float64 for
// integer and float64 `astype`, in float32 for float32 (a Python scalar takes the array's
// type), then `.astype(dtype)` rounds to nearest (floats) or truncates toward zero
// (integers); float16 elements load exactly and store in one rounding from float64, as
// numpy's casts. float16 arithmetic (a float16 `astype` of fixedscaleoffset: numpy rounds
// every half-precision step) is refused.
// v3 writes these as array -> array codecs (numcodecs.fixedscaleoffset ...) that numcodecs
// decodes the same way, on the stored bytes: ParseCodecChain (registry.cc) turns them into
// these.
#include <bit>
#include <cmath>
#include <cstring>

#include "codec/registry.h"

namespace lsio {
namespace {

// A numpy dtype string of a number: '<' / '>' / '|', kind i/u/f, size.
struct NumType {
  char kind = 0;
  size_t size = 0;
  bool big = false;
  std::string text;
};

Result<NumType> ParseNumType(const nlohmann::json& j, const char* codec, const char* key) {
  if (!j.is_string()) return Status::InvalidFormat(std::string(codec) + " filter: \"" + key + "\" must be a string");
  const std::string s = j.get<std::string>();
  NumType t;
  t.text = s;
  if (s.size() >= 3 && (s[0] == '<' || s[0] == '>' || s[0] == '|') && (s[1] == 'i' || s[1] == 'u' || s[1] == 'f')) {
    const std::string n = s.substr(2);
    if (n == "1" || n == "2" || n == "4" || n == "8") {
      t.kind = s[1];
      t.size = std::stoul(n);
      t.big = s[0] == '>';
      if (!(t.kind == 'f' && t.size == 1)) return t;
    }
  }
  return Status::Unimplemented(std::string(codec) + " filter with " + key + " '" + s + "' is not supported by lsio yet");
}

template <typename T>
T LoadAs(const uint8_t* p, bool swap) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if (swap) {
    if constexpr (sizeof(T) == 2) v = std::bit_cast<T>(__builtin_bswap16(std::bit_cast<uint16_t>(v)));
    if constexpr (sizeof(T) == 4) v = std::bit_cast<T>(__builtin_bswap32(std::bit_cast<uint32_t>(v)));
    if constexpr (sizeof(T) == 8) v = std::bit_cast<T>(__builtin_bswap64(std::bit_cast<uint64_t>(v)));
  }
  return v;
}

template <typename T>
void StoreAs(uint8_t* p, T v, bool swap) {
  if (swap) {
    if constexpr (sizeof(T) == 2) v = std::bit_cast<T>(__builtin_bswap16(std::bit_cast<uint16_t>(v)));
    if constexpr (sizeof(T) == 4) v = std::bit_cast<T>(__builtin_bswap32(std::bit_cast<uint32_t>(v)));
    if constexpr (sizeof(T) == 8) v = std::bit_cast<T>(__builtin_bswap64(std::bit_cast<uint64_t>(v)));
  }
  std::memcpy(p, &v, sizeof(T));
}

bool Swap(const NumType& t) { return t.size > 1 && t.big != (std::endian::native == std::endian::big); }

// The element as a double (exact for every integer up to 2^53 and every float32/64).
double Load(const NumType& t, const uint8_t* p) {
  const bool s = Swap(t);
  switch (t.kind * 16 + static_cast<int>(t.size)) {
    case 'i' * 16 + 1: return LoadAs<int8_t>(p, false);
    case 'i' * 16 + 2: return LoadAs<int16_t>(p, s);
    case 'i' * 16 + 4: return LoadAs<int32_t>(p, s);
    case 'i' * 16 + 8: return static_cast<double>(LoadAs<int64_t>(p, s));
    case 'u' * 16 + 1: return LoadAs<uint8_t>(p, false);
    case 'u' * 16 + 2: return LoadAs<uint16_t>(p, s);
    case 'u' * 16 + 4: return LoadAs<uint32_t>(p, s);
    case 'u' * 16 + 8: return static_cast<double>(LoadAs<uint64_t>(p, s));
    case 'f' * 16 + 2: return static_cast<double>(std::bit_cast<_Float16>(LoadAs<uint16_t>(p, s)));
    case 'f' * 16 + 4: return LoadAs<float>(p, s);
    case 'f' * 16 + 8: return LoadAs<double>(p, s);
  }
  __builtin_unreachable();  // ParseNumType admits no other type
}

// numpy's cast of a float64 (or float32 widened exactly) to `t`: floats round to nearest,
// integers truncate toward zero (C's conversion).
void StoreCast(const NumType& t, uint8_t* p, double v) {
  const bool s = Swap(t);
  switch (t.kind * 16 + static_cast<int>(t.size)) {
    case 'i' * 16 + 1: StoreAs<int8_t>(p, static_cast<int8_t>(static_cast<int64_t>(v)), false); break;
    case 'i' * 16 + 2: StoreAs<int16_t>(p, static_cast<int16_t>(static_cast<int64_t>(v)), s); break;
    case 'i' * 16 + 4: StoreAs<int32_t>(p, static_cast<int32_t>(static_cast<int64_t>(v)), s); break;
    case 'i' * 16 + 8: StoreAs<int64_t>(p, static_cast<int64_t>(v), s); break;
    case 'u' * 16 + 1: StoreAs<uint8_t>(p, static_cast<uint8_t>(static_cast<int64_t>(v)), false); break;
    case 'u' * 16 + 2: StoreAs<uint16_t>(p, static_cast<uint16_t>(static_cast<int64_t>(v)), s); break;
    case 'u' * 16 + 4: StoreAs<uint32_t>(p, static_cast<uint32_t>(static_cast<int64_t>(v)), s); break;
    case 'u' * 16 + 8: StoreAs<uint64_t>(p, static_cast<uint64_t>(v), s); break;
    // float64 -> float16 in one rounding, as numpy's astype (not through float32).
    case 'f' * 16 + 2: StoreAs<uint16_t>(p, std::bit_cast<uint16_t>(static_cast<_Float16>(v)), s); break;
    case 'f' * 16 + 4: StoreAs<float>(p, static_cast<float>(v), s); break;
    case 'f' * 16 + 8: StoreAs<double>(p, v, s); break;
    default: __builtin_unreachable();  // ParseNumType admits no other type
  }
}

// Decoded `dtype` elements from stored `astype` elements, one by one.
class ConvertCodec final : public BytesToBytesCodec {
 public:
  enum class Op { kScaleOffset, kCast };
  ConvertCodec(std::string name, Op op, NumType dtype, NumType astype, double scale, double offset)
      : name_(std::move(name)), op_(op), dtype_(std::move(dtype)), astype_(std::move(astype)), scale_(scale),
        offset_(offset) {}
  std::string name() const override { return name_; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override {
    return decoded / dtype_.size * astype_.size;
  }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    if (in.size() % astype_.size != 0) {
      return Status::DataLoss(name_ + ": " + std::to_string(in.size()) + " bytes are not a whole number of '" +
                              astype_.text + "' elements");
    }
    const uint64_t n = in.size() / astype_.size;
    const uint64_t bytes = n * dtype_.size;
    uint8_t* dst;
    if (out.fixed != nullptr) {
      if (bytes != out.size) {
        return Status::DataLoss(name_ + ": chunk decodes to " + std::to_string(bytes) + " bytes, expected " +
                                std::to_string(out.size));
      }
      dst = out.fixed;
    } else {
      if (bytes > out.limit) return Status::DataLoss(name_ + ": chunk decodes to more bytes than its chunk holds");
      if (!out.grow->Reserve(bytes)) return Status::ResourceExhausted(name_ + ": out of memory");
      dst = out.grow->data();
    }
    const bool f32 = astype_.kind == 'f' && astype_.size == 4;
    const float scale32 = static_cast<float>(scale_), offset32 = static_cast<float>(offset_);
    for (uint64_t i = 0; i < n; ++i) {
      double v = Load(astype_, in.data() + i * astype_.size);
      if (op_ == Op::kScaleOffset) {
        // float32 stays float32 through both steps (numpy with a Python scalar operand).
        v = f32 ? static_cast<double>(static_cast<float>(static_cast<float>(v) / scale32) + offset32)
                : v / scale_ + offset_;
      }
      StoreCast(dtype_, dst + i * dtype_.size, v);
    }
    out.result = {dst, bytes};
    return Status::Ok();
  }

 private:
  std::string name_;
  Op op_;
  NumType dtype_, astype_;
  double scale_, offset_;
};

// Decoding a bitround chunk is reading it: the rounding happened when it was written.
class IdentityCodec final : public BytesToBytesCodec {
 public:
  explicit IdentityCodec(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<uint64_t> EncodedSize(uint64_t decoded) const override { return decoded; }
  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch&) const override {
    out.result = in;
    return Status::Ok();
  }

 private:
  std::string name_;
};

Result<double> Number(const nlohmann::json& config, const char* key, double fallback, const char* codec) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_number()) return Status::InvalidFormat(std::string(codec) + " filter: \"" + key + "\" must be a number");
  return it->get<double>();
}

}  // namespace

Result<std::unique_ptr<Codec>> ParseV2FixedScaleOffsetCodec(const nlohmann::json& config) {
  const char* kName = "fixedscaleoffset";
  auto d = config.find("dtype");
  if (d == config.end()) return Status::InvalidFormat("fixedscaleoffset filter: \"dtype\" is missing");
  LSIO_ASSIGN_OR_RETURN(NumType dtype, ParseNumType(*d, kName, "dtype"));
  NumType astype = dtype;
  if (auto a = config.find("astype"); a != config.end() && !a->is_null()) {
    LSIO_ASSIGN_OR_RETURN(astype, ParseNumType(*a, kName, "astype"));
  }
  if (astype.kind == 'f' && astype.size == 2) {
    return Status::Unimplemented("fixedscaleoffset filter with astype '" + astype.text +
                                 "' (float16 arithmetic) is not supported by lsio yet");
  }
  LSIO_ASSIGN_OR_RETURN(double scale, Number(config, "scale", 1.0, kName));
  LSIO_ASSIGN_OR_RETURN(double offset, Number(config, "offset", 0.0, kName));
  return std::unique_ptr<Codec>(
      new ConvertCodec(kName, ConvertCodec::Op::kScaleOffset, std::move(dtype), std::move(astype), scale, offset));
}

Result<std::unique_ptr<Codec>> ParseV2QuantizeCodec(const nlohmann::json& config) {
  const char* kName = "quantize";
  auto d = config.find("dtype");
  if (d == config.end()) return Status::InvalidFormat("quantize filter: \"dtype\" is missing");
  LSIO_ASSIGN_OR_RETURN(NumType dtype, ParseNumType(*d, kName, "dtype"));
  NumType astype = dtype;
  if (auto a = config.find("astype"); a != config.end() && !a->is_null()) {
    LSIO_ASSIGN_OR_RETURN(astype, ParseNumType(*a, kName, "astype"));
  }
  if (dtype.kind != 'f' || astype.kind != 'f') {
    return Status::InvalidFormat("quantize filter: \"dtype\" and \"astype\" must be floating point");
  }
  if (astype.size == dtype.size && astype.big == dtype.big) return std::unique_ptr<Codec>(new IdentityCodec(kName));
  return std::unique_ptr<Codec>(new ConvertCodec(kName, ConvertCodec::Op::kCast, std::move(dtype), std::move(astype), 1, 0));
}

Result<std::unique_ptr<Codec>> ParseV2BitRoundCodec(const nlohmann::json& config) {
  auto k = config.find("keepbits");
  if (k == config.end() || !k->is_number_integer() || k->get<int64_t>() < 0) {
    return Status::InvalidFormat("bitround filter: \"keepbits\" must be a non-negative integer");
  }
  return std::unique_ptr<Codec>(new IdentityCodec("bitround"));
}

}  // namespace lsio
